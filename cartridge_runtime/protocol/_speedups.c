/* Optional compiled fast paths for the frame codec (see _codec.py, which owns the rules).
 *
 * Every function here handles the common, valid case only and answers None for anything
 * else, so that the pure-Python code in _codec.py decides: it either accepts the frame in
 * a way this file does not cover (keys out of order, CBOR nulls, non-integer keys...) or
 * raises the precise error. The one error raised from here is the one the Python path
 * would raise at the same point, because it comes from the same Python callables
 * (the id constructor, the per-type checks) handed over by configure().
 *
 * Python without a C compiler simply runs without this module: _codec.py falls back to
 * its own code, which gives the same frames and the same bytes.
 */
#include <string.h>

#include "_cbor.h"

/* Value kinds of the key table (must match _codec._c_kind). */
enum { K_INT = 0, K_STR = 1, K_BOOL = 2, K_META = 3, K_BYTES = 4, K_ID = 5, K_CHECKSUM = 6 };

#define MAX_KEY 32
#define PREFIX_LEN 4

static int configured = 0;
static PyObject *key_name[MAX_KEY];    /* key number -> interned field name, or NULL */
static int key_kind[MAX_KEY];
static PyObject *dumps;                /* cbor2.dumps */
static PyObject *frame_types;          /* dict int -> FrameType */
static PyObject *frame_type_ints;      /* dict FrameType -> int */
static PyObject *id_cache;             /* dict bytes|int -> MessageId (shared with Python) */
static PyObject *new_id;               /* callable(key, value) -> MessageId, may raise */
static PyObject *frame_class;          /* Frame */
static PyObject *checks;               /* dict FrameType -> check(frame) */
static PyObject *required;             /* dict FrameType -> tuple of names that pass it */
static PyObject *key_of;               /* dict name -> int key */
static PyObject *stream_start;         /* FrameType.STREAM_START */
static Py_ssize_t hard_cap;
static PyObject *id_class;             /* MessageId */
static Py_ssize_t id_cache_max;
static PyObject *empty_tuple;
static PyObject *s_value, *s_version, *s_frame_type, *s_id, *s_seq, *s_output,
    *s_payload, *i_one, *i_two, *i_three, *i_thirteen;

static PyObject *
configure(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *names[] = {"spec", "dumps", "frame_types",
                            "frame_type_ints", "id_cache", "new_id", "frame_class",
                            "checks", "required", "key_of", "stream_start", "hard_cap",
                            "id_class", "id_cache_max", NULL};
    PyObject *ic2;
    Py_ssize_t icmax;
    PyObject *spec, *du, *ft, *fti, *ic, *ni, *fc, *ck, *rq, *ko, *ss;
    Py_ssize_t cap;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!OO!O!O!OOO!O!O!OnOn", names,
                                     &PyDict_Type, &spec, &du,
                                     &PyDict_Type, &ft, &PyDict_Type, &fti, &PyDict_Type, &ic,
                                     &ni, &fc, &PyDict_Type, &ck, &PyDict_Type, &rq,
                                     &PyDict_Type, &ko, &ss, &cap, &ic2, &icmax))
        return NULL;
    for (int k = 0; k < MAX_KEY; k++) {
        Py_CLEAR(key_name[k]);
        key_kind[k] = -1;
    }
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(spec, &pos, &key, &value)) {
        long k = PyLong_AsLong(key);
        if (k < 0 || k >= MAX_KEY || !PyTuple_Check(value) || PyTuple_GET_SIZE(value) != 2) {
            PyErr_SetString(PyExc_ValueError, "spec: key out of range or bad entry");
            return NULL;
        }
        PyObject *name = PyTuple_GET_ITEM(value, 0);
        long kind = PyLong_AsLong(PyTuple_GET_ITEM(value, 1));
        if (!PyUnicode_CheckExact(name) || kind < K_INT || kind > K_CHECKSUM) {
            PyErr_SetString(PyExc_ValueError, "spec: bad name or kind");
            return NULL;
        }
        Py_INCREF(name);
        PyUnicode_InternInPlace(&name);
        key_name[k] = name;
        key_kind[k] = (int)kind;
    }
#define KEEP(var, val) do { Py_INCREF(val); Py_XSETREF(var, val); } while (0)
    KEEP(dumps, du);
    KEEP(frame_types, ft);
    KEEP(frame_type_ints, fti);
    KEEP(id_cache, ic);
    KEEP(new_id, ni);
    if (!PyType_Check(fc)) {
        PyErr_SetString(PyExc_TypeError, "frame_class must be a class");
        return NULL;
    }
    KEEP(frame_class, fc);
    if (!PyType_Check(ic2)) {
        PyErr_SetString(PyExc_TypeError, "id_class must be a class");
        return NULL;
    }
    KEEP(id_class, ic2);
    id_cache_max = icmax;
    KEEP(checks, ck);
    KEEP(required, rq);
    KEEP(key_of, ko);
    KEEP(stream_start, ss);
#undef KEEP
    hard_cap = cap;
    configured = 1;
    Py_RETURN_NONE;
}

/* Whether a decoded id value (exact bytes or int) is a valid id: 16 bytes, or an unsigned
 * integer. 1 yes, 0 no, -1 with an exception set. */
static int
id_value_valid(PyObject *v)
{
    if (PyBytes_CheckExact(v))
        return PyBytes_GET_SIZE(v) == 16;
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (x == -1 && PyErr_Occurred())
        return -1;
    return overflow > 0 || (overflow == 0 && x >= 0);
}

/* The MessageId of a decoded id value not in the cache (new reference), added to the cache
 * as _codec._new_id does. A valid value (16 bytes, or an unsigned integer) is built here;
 * anything else goes to _new_id, which raises the precise error. */
static PyObject *
make_id(PyObject *key, PyObject *v)
{
    int valid = id_value_valid(v);
    if (valid < 0)
        return NULL;
    if (!valid || id_cache_max <= 0)
        return PyObject_CallFunctionObjArgs(new_id, key, v, NULL);
    PyObject *mid = ((PyTypeObject *)id_class)->tp_alloc((PyTypeObject *)id_class, 0);
    if (mid == NULL)
        return NULL;
    /* The slot's own descriptor, bypassing the frozen class's __setattr__. */
    if (PyObject_GenericSetAttr(mid, s_value, v) < 0) {
        Py_DECREF(mid);
        return NULL;
    }
    if (PyDict_GET_SIZE(id_cache) >= id_cache_max)
        PyDict_Clear(id_cache);
    if (PyDict_SetItem(id_cache, v, mid) < 0) {
        Py_DECREF(mid);
        return NULL;
    }
    return mid;
}

/* All keys of a meta map are exact str. */
static int
text_keys(PyObject *m)
{
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(m, &pos, &k, &v))
        if (!PyUnicode_CheckExact(k))
            return 0;
    return 1;
}


/* Results of put_field. */
enum { PUT_OK = 1, PUT_FALLBACK = 0, PUT_ERROR = -1 };

/* Store the value ``v`` of wire key ``key`` (a known key) in the frame dict ``d``, checking
 * its type and the wire order (``*last``: the previous key stored). PUT_FALLBACK when Python
 * must decide (an unusual type, a null, keys out of order; with ``strict_ids``, also an
 * invalid id, whose error Python then names); PUT_ERROR with an exception set. */
static int
put_field(PyObject *d, long key, PyObject *v, long *last, int strict_ids)
{
    PyObject *val = v;
    PyObject *owned = NULL;
    int overflow;
    if (v == Py_None)
        return PUT_FALLBACK; /* null: absent for key > 3, an error below; Python sorts it */
    switch (key_kind[key]) {
    case K_INT:
        if (!PyLong_CheckExact(v))
            return PUT_FALLBACK;
        if (key > 1) {
            long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
            if (overflow < 0 || (overflow == 0 && x < 0))
                return PUT_FALLBACK;
        }
        break;
    case K_CHECKSUM:
        if (!PyLong_CheckExact(v))
            return PUT_FALLBACK;
        if (PyLong_AsUnsignedLongLong(v) == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear(); /* negative or >= 2**64: Python names the error */
            return PUT_FALLBACK;
        }
        break;
    case K_STR:
        if (!PyUnicode_CheckExact(v))
            return PUT_FALLBACK;
        break;
    case K_BOOL:
        if (!PyBool_Check(v))
            return PUT_FALLBACK;
        break;
    case K_META:
        if (!PyDict_CheckExact(v) || !text_keys(v))
            return PUT_FALLBACK;
        break;
    case K_BYTES:
        if (!PyBytes_CheckExact(v))
            return PUT_FALLBACK;
        break;
    case K_ID:
        if (!PyBytes_CheckExact(v) && !PyLong_CheckExact(v))
            return PUT_FALLBACK;
        val = PyDict_GetItemWithError(id_cache, v);
        if (val == NULL) {
            if (PyErr_Occurred())
                return PUT_ERROR;
            if (strict_ids) {
                int valid = id_value_valid(v);
                if (valid < 0)
                    return PUT_ERROR;
                if (!valid)
                    return PUT_FALLBACK;
            }
            PyObject *kobj = PyLong_FromLong(key);
            if (kobj == NULL)
                return PUT_ERROR;
            owned = make_id(kobj, v);
            Py_DECREF(kobj);
            if (owned == NULL)
                return PUT_ERROR; /* the same FrameDecodeError the Python path raises */
            val = owned;
        }
        break;
    default:
        return PUT_FALLBACK;
    }
    if (key < *last) {
        Py_XDECREF(owned);
        return PUT_FALLBACK; /* out of wire order: Python restores the order */
    }
    *last = key;
    int rc = PyDict_SetItem(d, key_name[key], val);
    Py_XDECREF(owned);
    return rc < 0 ? PUT_ERROR : PUT_OK;
}

/* The Frame whose __dict__ is ``d`` (filled by put_field; new reference), Py_None (new
 * reference) to let Python decide, or NULL with an exception set. Consumes ``d``. */
static PyObject *
finish_frame(PyObject *d, int validate)
{
    PyObject *ft = PyDict_GetItemWithError(d, s_frame_type);
    if (ft == NULL || PyDict_GetItemWithError(d, s_version) == NULL ||
        PyDict_GetItemWithError(d, s_id) == NULL || PyDict_GetItemWithError(d, s_seq) == NULL)
        goto fallback_or_error;
    PyObject *ftype = PyDict_GetItemWithError(frame_types, ft);
    if (ftype == NULL)
        goto fallback_or_error;
    if (ftype != stream_start && PyDict_GetItemWithError(d, s_output) != NULL)
        goto fallback;
    if (PyErr_Occurred())
        goto error;
    if (PyDict_SetItem(d, s_frame_type, ftype) < 0) /* same slot: wire order kept */
        goto error;
    /* object.__new__(Frame), then its __dict__ set to d: no __init__, as in _codec. */
    PyTypeObject *ftype_obj = (PyTypeObject *)frame_class;
    PyObject *frame = PyBaseObject_Type.tp_new(ftype_obj, empty_tuple, NULL);
    if (frame == NULL)
        goto error;
    if (PyObject_GenericSetDict(frame, d, NULL) < 0) {
        Py_DECREF(frame);
        goto error;
    }
    if (validate) {
        /* Types whose check is "these keys are present" pass here without a call. */
        PyObject *names = PyDict_GetItemWithError(required, ftype);
        if (names != NULL) {
            Py_ssize_t n = PyTuple_GET_SIZE(names), i = 0;
            for (; i < n; i++)
                if (PyDict_GetItemWithError(d, PyTuple_GET_ITEM(names, i)) == NULL)
                    break;
            if (i == n) {
                Py_DECREF(d);
                return frame;
            }
        }
        PyObject *check = PyErr_Occurred() ? NULL : PyDict_GetItemWithError(checks, ftype);
        if (check != NULL) {
            PyObject *r = PyObject_CallOneArg(check, frame);
            if (r == NULL) {
                Py_DECREF(frame);
                goto error;
            }
            Py_DECREF(r);
        }
        if (PyErr_Occurred()) {
            Py_DECREF(frame);
            goto error;
        }
    }
    Py_DECREF(d);
    return frame;

fallback_or_error:
    if (PyErr_Occurred())
        goto error;
fallback:
    Py_DECREF(d);
    Py_RETURN_NONE;
error:
    Py_DECREF(d);
    return NULL;
}

/* A Frame from a decoded map (new reference), Py_None (new reference) to let Python decide,
 * or NULL with an exception set. */
static PyObject *
build_frame(PyObject *m, int validate)
{
    if (!PyDict_CheckExact(m))
        Py_RETURN_NONE;
    PyObject *d = PyDict_New();
    if (d == NULL)
        return NULL;
    Py_ssize_t pos = 0;
    PyObject *kobj, *v;
    long last = -1;
    while (PyDict_Next(m, &pos, &kobj, &v)) {
        if (!PyLong_CheckExact(kobj))
            goto fallback;
        int overflow;
        long key = PyLong_AsLongAndOverflow(kobj, &overflow);
        if (overflow || key < 0 || key >= MAX_KEY || key_name[key] == NULL)
            continue; /* unknown integer keys are ignored (FRM-4) */
        int rc = put_field(d, key, v, &last, 0);
        if (rc == PUT_FALLBACK)
            goto fallback;
        if (rc == PUT_ERROR)
            goto error;
    }
    return finish_frame(d, validate);

fallback:
    Py_DECREF(d);
    Py_RETURN_NONE;
error:
    Py_DECREF(d);
    return NULL;
}

/* The frame body in ``r`` (exactly one CBOR map, read to r->end) straight into a Frame: the
 * map's keys are read as wire key numbers and each value stored in the frame's dict as it is
 * read, with no intermediate map. Same results as cbor_read_item + build_frame, except that
 * anything unusual (text keys, an invalid id...) is left to Python rather than raised here:
 * the Python path then reads the whole body and names the first error. */
static PyObject *
read_frame(CborReader *r)
{
    if (r->p >= r->end || (*r->p >> 5) != 5)
        Py_RETURN_NONE;
    unsigned char b = *r->p;
    uint64_t count;
    if ((b & 31) < 24) {
        count = b & 31;
        r->p++;
    }
    else
        Py_RETURN_NONE; /* a frame has far fewer than 24 keys */
    if (count > (uint64_t)(r->end - r->p) / 2)
        Py_RETURN_NONE;
    PyObject *d = PyDict_New();
    if (d == NULL)
        return NULL;
    long last = -1;
    for (uint64_t i = 0; i < count; i++) {
        if (r->p >= r->end)
            goto fallback;
        unsigned char kb = *r->p;
        long key;
        if ((kb >> 5) != 0)
            goto fallback; /* a key that is not an unsigned integer: Python decides */
        if ((kb & 31) < 24) {
            key = kb & 31;
            r->p++;
        }
        else if ((kb & 31) == 24 && r->end - r->p >= 2) {
            key = r->p[1];
            r->p += 2;
        }
        else
            goto fallback;
        PyObject *v = cbor_read_item(r, 1);
        if (v == NULL)
            goto error;
        if (v == CBOR_GIVE_UP)
            goto fallback;
        if (key >= MAX_KEY || key_name[key] == NULL) {
            Py_DECREF(v); /* unknown integer keys are ignored (FRM-4) */
            continue;
        }
        int rc = put_field(d, key, v, &last, 1);
        Py_DECREF(v);
        if (rc == PUT_FALLBACK)
            goto fallback;
        if (rc == PUT_ERROR)
            goto error;
    }
    if (r->p != r->end)
        goto fallback; /* trailing bytes: the exact path names the error */
    return finish_frame(d, 1);

fallback:
    Py_DECREF(d);
    Py_RETURN_NONE;
error:
    Py_DECREF(d);
    return NULL;
}

static PyObject *
map_to_frame(PyObject *self, PyObject *m)
{
    if (!configured) {
        PyErr_SetString(PyExc_RuntimeError, "_speedups.configure() was not called");
        return NULL;
    }
    return build_frame(m, 1);
}

/* decode_direct(data, start, stop) -> Frame | None: a frame body read with the direct reader
 * above, at any size (no cbor2 call; a payload is copied once, straight out of data). */
static PyObject *
decode_direct(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "decode_direct(data, start, stop)");
        return NULL;
    }
    if (!configured) {
        PyErr_SetString(PyExc_RuntimeError, "_speedups.configure() was not called");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    Py_ssize_t stop = PyLong_AsSsize_t(args[2]);
    if ((start == -1 || stop == -1) && PyErr_Occurred())
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    if (start < 0 || stop > view.len || start > stop) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "decode_direct: range outside the data");
        return NULL;
    }
    CborReader r = {(const unsigned char *)view.buf + start,
                    (const unsigned char *)view.buf + stop};
    PyObject *result = read_frame(&r);
    PyBuffer_Release(&view);
    return result;
}

/* take_frame(data, offset, max_frame) -> (Frame, end) | None: the frame whose length prefix
 * starts at ``offset`` of ``data`` (bytes or a buffer) and where it ends, for the decoder's
 * in-place path. None when the frame is incomplete, longer than max_frame, or outside the
 * direct reader's subset: the decoder's Python path then decides (and names any error). */
static PyObject *
take_frame(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "take_frame(data, offset, max_frame)");
        return NULL;
    }
    if (!configured) {
        PyErr_SetString(PyExc_RuntimeError, "_speedups.configure() was not called");
        return NULL;
    }
    Py_ssize_t off = PyLong_AsSsize_t(args[1]);
    Py_ssize_t max_frame = PyLong_AsSsize_t(args[2]);
    if ((off == -1 || max_frame == -1) && PyErr_Occurred())
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *result = NULL;
    const unsigned char *base = (const unsigned char *)view.buf;
    if (off < 0 || view.len - off < PREFIX_LEN) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    const unsigned char *p = base + off;
    Py_ssize_t n = ((Py_ssize_t)p[0] << 24) | ((Py_ssize_t)p[1] << 16) | ((Py_ssize_t)p[2] << 8) |
                   (Py_ssize_t)p[3];
    if (n > max_frame || n > view.len - off - PREFIX_LEN) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    Py_ssize_t end = off + PREFIX_LEN + n;
    CborReader r = {p + PREFIX_LEN, base + end};
    PyObject *frame = read_frame(&r);
    if (frame == NULL || frame == Py_None) {
        result = frame;
        goto done;
    }
    PyObject *pos = PyLong_FromSsize_t(end);
    if (pos == NULL) {
        Py_DECREF(frame);
        goto done;
    }
    result = PyTuple_New(2);
    if (result == NULL) {
        Py_DECREF(frame);
        Py_DECREF(pos);
        goto done;
    }
    PyTuple_SET_ITEM(result, 0, frame);
    PyTuple_SET_ITEM(result, 1, pos);
done:
    PyBuffer_Release(&view);
    return result;
}

/* The CBOR map of a frame's __dict__ (new reference) with seq overridden when not None. */
static PyObject *
frame_map(PyObject *d, PyObject *seq)
{
    PyObject *m = PyDict_New();
    if (m == NULL)
        return NULL;
    Py_ssize_t pos = 0;
    PyObject *name, *v;
    while (PyDict_Next(d, &pos, &name, &v)) {
        PyObject *k = PyDict_GetItemWithError(key_of, name);
        if (k == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetObject(PyExc_KeyError, name);
            goto error;
        }
        PyObject *conv = NULL;
        if (k == i_one) {
            conv = PyDict_GetItemWithError(frame_type_ints, v);
            if (conv == NULL) {
                if (!PyErr_Occurred())
                    PyErr_SetObject(PyExc_KeyError, v);
                goto error;
            }
            Py_INCREF(conv);
        }
        else if (k == i_two || k == i_thirteen) {
            conv = PyObject_GetAttr(v, s_value);
            if (conv == NULL)
                goto error;
        }
        else if (k == i_three && seq != Py_None) {
            conv = Py_NewRef(seq);
        }
        int rc = PyDict_SetItem(m, k, conv != NULL ? conv : v);
        Py_XDECREF(conv);
        if (rc < 0)
            goto error;
    }
    return m;
error:
    Py_DECREF(m);
    return NULL;
}

/* Length prefix and body as one new bytes object; None when the body exceeds a limit
 * (Python's path then raises the error that names it). */
static PyObject *
prefixed(const unsigned char *body, Py_ssize_t n, Py_ssize_t max_frame)
{
    if (n > max_frame || n > hard_cap || n > 0xFFFFFFFFL)
        Py_RETURN_NONE;
    PyObject *wire = PyBytes_FromStringAndSize(NULL, PREFIX_LEN + n);
    if (wire == NULL)
        return NULL;
    unsigned char *out = (unsigned char *)PyBytes_AS_STRING(wire);
    out[0] = (unsigned char)((n >> 24) & 0xFF);
    out[1] = (unsigned char)((n >> 16) & 0xFF);
    out[2] = (unsigned char)((n >> 8) & 0xFF);
    out[3] = (unsigned char)(n & 0xFF);
    memcpy(out + PREFIX_LEN, body, (size_t)n);
    return wire;
}

/* The CBOR body of a frame's __dict__ written straight into ``w``: the same bytes as writing
 * frame_map(d, seq), without building that map. 1 written, 0 error (exception set), -1
 * anything unusual (the caller then takes the general path, which names any error). */
static int
write_frame(CborWriter *w, PyObject *d, PyObject *seq)
{
    if (!cbor_write_head(w, 5, (uint64_t)PyDict_GET_SIZE(d)))
        return 0;
    Py_ssize_t pos = 0;
    PyObject *name, *v;
    while (PyDict_Next(d, &pos, &name, &v)) {
        PyObject *k = PyDict_GetItemWithError(key_of, name);
        if (k == NULL)
            return PyErr_Occurred() ? 0 : -1;
        long key = PyLong_AsLong(k);
        if (key < 0 || key >= MAX_KEY) {
            PyErr_Clear();
            return -1;
        }
        if (!cbor_write_head(w, 0, (uint64_t)key))
            return 0;
        int rc;
        if (key == 1) {
            PyObject *conv = PyDict_GetItemWithError(frame_type_ints, v);
            if (conv == NULL)
                return PyErr_Occurred() ? 0 : -1;
            rc = cbor_write_item(w, conv, 1);
        }
        else if (key == 2 || key == 13) {
            PyObject *conv = PyObject_GetAttr(v, s_value);
            if (conv == NULL) {
                PyErr_Clear();
                return -1;
            }
            rc = cbor_write_item(w, conv, 1);
            Py_DECREF(conv);
        }
        else if (key == 3 && seq != Py_None)
            rc = cbor_write_item(w, seq, 1);
        else
            rc = cbor_write_item(w, v, 1);
        if (rc != 1)
            return rc;
    }
    return 1;
}

/* The writer's buffer, whose first PREFIX_LEN bytes were reserved, as one bytes object with
 * the length prefix filled in; None when the body exceeds a limit. */
static PyObject *
prefix_in_place(CborWriter *w, Py_ssize_t max_frame)
{
    Py_ssize_t n = w->len - PREFIX_LEN;
    if (n > max_frame || n > hard_cap || n > 0xFFFFFFFFL)
        Py_RETURN_NONE;
    unsigned char *out = w->buf;
    out[0] = (unsigned char)((n >> 24) & 0xFF);
    out[1] = (unsigned char)((n >> 16) & 0xFF);
    out[2] = (unsigned char)((n >> 8) & 0xFF);
    out[3] = (unsigned char)(n & 0xFF);
    return PyBytes_FromStringAndSize((const char *)out, w->len);
}

/* encode_small(frame_dict, seq, max_frame) -> bytes | None: prefix and body of a frame
 * without a large payload; None when the payload is large or the body exceeds a limit
 * (Python's path then takes over, and names the error). */
static PyObject *
encode_small(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyDict_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "encode_small(frame_dict, seq, max_frame)");
        return NULL;
    }
    if (!configured) {
        PyErr_SetString(PyExc_RuntimeError, "_speedups.configure() was not called");
        return NULL;
    }
    PyObject *d = args[0];
    Py_ssize_t max_frame = PyLong_AsSsize_t(args[2]);
    if (max_frame == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    PyObject *payload = PyDict_GetItemWithError(d, s_payload);
    if (payload != NULL && payload != Py_None) {
        Py_ssize_t plen = PyObject_Length(payload);
        if (plen < 0) {
            PyErr_Clear();
            Py_RETURN_NONE;
        }
        if (plen >= 4096)
            Py_RETURN_NONE;
    }
    else if (PyErr_Occurred())
        return NULL;
    CborWriter w;
    cbor_writer_init(&w, PREFIX_LEN);
    int rc = write_frame(&w, d, args[1]);
    if (rc == 1) {
        PyObject *wire = prefix_in_place(&w, max_frame);
        cbor_writer_free(&w);
        return wire;
    }
    cbor_writer_free(&w);
    if (rc == 0)
        return NULL;
    /* Outside the direct writer's subset: build the map and let the general writer, or
     * cbor2, encode it (and raise what it raises). */
    PyObject *m = frame_map(d, args[1]);
    if (m == NULL)
        return NULL;
    cbor_writer_init(&w, 0);
    rc = cbor_write_item(&w, m, 0);
    PyObject *wire;
    if (rc == 1)
        wire = prefixed(w.buf, w.len, max_frame);
    else if (rc == 0)
        wire = NULL;
    else {
        /* A value outside the writer's subset: cbor2 encodes it (and raises what it raises). */
        PyObject *body = PyObject_CallOneArg(dumps, m);
        if (body == NULL)
            wire = NULL;
        else if (!PyBytes_CheckExact(body))
            wire = Py_NewRef(Py_None);
        else
            wire = prefixed((const unsigned char *)PyBytes_AS_STRING(body), PyBytes_GET_SIZE(body),
                            max_frame);
        Py_XDECREF(body);
    }
    cbor_writer_free(&w);
    Py_DECREF(m);
    return wire;
}

static PyMethodDef methods[] = {
    {"configure", (PyCFunction)(void (*)(void))configure, METH_VARARGS | METH_KEYWORDS,
     "Hand over the codec's tables and callables (once, from _codec)."},
    {"map_to_frame", map_to_frame, METH_O,
     "A validated Frame from a decoded map, or None to let the Python path decide."},
    {"decode_direct", (PyCFunction)(void (*)(void))decode_direct, METH_FASTCALL,
     "decode_direct(data, start, stop) -> Frame | None (None: let Python read it)."},
    {"take_frame", (PyCFunction)(void (*)(void))take_frame, METH_FASTCALL,
     "take_frame(data, offset, max_frame) -> (Frame, end) | None (None: let Python read it)."},
    {"encode_small", (PyCFunction)(void (*)(void))encode_small, METH_FASTCALL,
     "encode_small(frame_dict, seq, max_frame) -> bytes | None (small frames only)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_speedups",
    "Compiled fast paths of the frame codec (optional; see _codec.py).", -1, methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
#define INTERN(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL
    INTERN(s_value, "value");
    INTERN(s_version, "version");
    INTERN(s_frame_type, "frame_type");
    INTERN(s_id, "id");
    INTERN(s_seq, "seq");
    INTERN(s_output, "output");
    INTERN(s_payload, "payload");
#undef INTERN
    /* Small ints are cached singletons, so key identity tests against these are exact. */
    i_one = PyLong_FromLong(1);
    i_two = PyLong_FromLong(2);
    i_three = PyLong_FromLong(3);
    i_thirteen = PyLong_FromLong(13);
    empty_tuple = PyTuple_New(0);
    if (!i_one || !i_two || !i_three || !i_thirteen || !empty_tuple)
        return NULL;
    return PyModule_Create(&module);
}
