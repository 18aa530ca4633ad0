/* Frame bodies read into Frames: from a map cbor2 (or the direct reader) built, or straight
 * from the bytes. The common, valid case only; anything else answers None so that the Python
 * path in _codec.py decides and names any error (see _speedups.c).
 */
#include "_frames.h"

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
    if (!valid || codec.id_cache_max <= 0)
        return PyObject_CallFunctionObjArgs(codec.new_id, key, v, NULL);
    PyObject *mid = ((PyTypeObject *)codec.id_class)->tp_alloc((PyTypeObject *)codec.id_class, 0);
    if (mid == NULL)
        return NULL;
    /* The slot's own descriptor, bypassing the frozen class's __setattr__. */
    if (PyObject_GenericSetAttr(mid, codec.s_value, v) < 0) {
        Py_DECREF(mid);
        return NULL;
    }
    if (PyDict_GET_SIZE(codec.id_cache) >= codec.id_cache_max)
        PyDict_Clear(codec.id_cache);
    if (PyDict_SetItem(codec.id_cache, v, mid) < 0) {
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

/* Store the value ``v`` of wire key ``key`` (0 <= key) in the frame dict ``d``, checking its
 * type and the wire order (``*last``: the previous key stored). An unknown key is ignored
 * (FRM-4): PUT_OK without a store. PUT_FALLBACK when Python must decide (an unusual type, a
 * null, keys out of order; with ``strict_ids``, also an invalid id, whose error Python then
 * names); PUT_ERROR with an exception set. */
static int
put_field(PyObject *d, long key, PyObject *v, long *last, int strict_ids)
{
    PyObject *val = v;
    PyObject *owned = NULL;
    int overflow;
    if (key >= MAX_KEY || codec.key_name[key] == NULL)
        return PUT_OK;
    if (v == Py_None)
        return PUT_FALLBACK; /* null: absent for key > 3, an error below; Python sorts it */
    switch (codec.key_kind[key]) {
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
        val = PyDict_GetItemWithError(codec.id_cache, v);
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
    int rc = PyDict_SetItem(d, codec.key_name[key], val);
    Py_XDECREF(owned);
    return rc < 0 ? PUT_ERROR : PUT_OK;
}

/* Give up on the frame dict ``d`` (consumed) after ``rc``, PUT_FALLBACK or PUT_ERROR: Py_None
 * (new reference) to let Python decide, or NULL with the exception left set. */
static PyObject *
abandon(PyObject *d, int rc)
{
    Py_DECREF(d);
    if (rc == PUT_ERROR)
        return NULL;
    Py_RETURN_NONE;
}

/* Whether END's meta passes _validate._check_end as it is: absent, or a dict whose
 * exit_code is an int, progress a number and message a str (each may be absent or null).
 * 0 lets the Python check decide; -1 with an exception. */
static PyObject *s_meta, *s_exit_code, *s_progress, *s_message;

static int
end_meta_plain(PyObject *d)
{
    if (s_meta == NULL && ((s_meta = PyUnicode_InternFromString("meta")) == NULL ||
                           (s_exit_code = PyUnicode_InternFromString("exit_code")) == NULL ||
                           (s_progress = PyUnicode_InternFromString("progress")) == NULL ||
                           (s_message = PyUnicode_InternFromString("message")) == NULL))
        return -1;
    PyObject *meta = PyDict_GetItemWithError(d, s_meta);
    if (meta == NULL)
        return PyErr_Occurred() ? -1 : 1;
    if (!PyDict_CheckExact(meta))
        return 0;
    PyObject *v = PyDict_GetItemWithError(meta, s_exit_code);
    if (v != NULL && v != Py_None && !PyLong_CheckExact(v))
        return 0;
    v = v == NULL && PyErr_Occurred() ? NULL : PyDict_GetItemWithError(meta, s_progress);
    if (v != NULL && v != Py_None && !PyLong_CheckExact(v) && !PyFloat_CheckExact(v))
        return 0;
    v = v == NULL && PyErr_Occurred() ? NULL : PyDict_GetItemWithError(meta, s_message);
    if (v != NULL && v != Py_None && !PyUnicode_CheckExact(v))
        return 0;
    return PyErr_Occurred() ? -1 : 1;
}

/* The Frame whose __dict__ is ``d`` (filled by put_field; new reference), Py_None (new
 * reference) to let Python decide, or NULL with an exception set. Consumes ``d``. */
static PyObject *
finish_frame(PyObject *d, int validate)
{
    PyObject *ft = PyDict_GetItemWithError(d, codec.s_frame_type);
    if (ft == NULL || PyDict_GetItemWithError(d, codec.s_version) == NULL ||
        PyDict_GetItemWithError(d, codec.s_id) == NULL || PyDict_GetItemWithError(d, codec.s_seq) == NULL)
        goto fallback_or_error;
    PyObject *ftype = PyDict_GetItemWithError(codec.frame_types, ft);
    if (ftype == NULL)
        goto fallback_or_error;
    if (ftype != codec.stream_start && PyDict_GetItemWithError(d, codec.s_output) != NULL)
        goto fallback;
    if (PyErr_Occurred())
        goto error;
    if (PyDict_SetItem(d, codec.s_frame_type, ftype) < 0) /* same slot: wire order kept */
        goto error;
    /* object.__new__(Frame), then its __dict__ set to d: no __init__, as in _codec. */
    PyTypeObject *ftype_obj = (PyTypeObject *)codec.frame_class;
    PyObject *frame = PyBaseObject_Type.tp_new(ftype_obj, codec.empty_tuple, NULL);
    if (frame == NULL)
        goto error;
    if (PyObject_GenericSetDict(frame, d, NULL) < 0) {
        Py_DECREF(frame);
        goto error;
    }
    if (validate) {
        /* Types whose check is "these keys are present" pass here without a call. */
        PyObject *names = PyDict_GetItemWithError(codec.required, ftype);
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
        if (!PyErr_Occurred() && PyLong_CheckExact(ft) && PyLong_AsLong(ft) == 4) {
            /* END (code 4): its usual meta is checked here, without a call. */
            int plain = end_meta_plain(d);
            if (plain < 0) {
                Py_DECREF(frame);
                goto error;
            }
            if (plain) {
                Py_DECREF(d);
                return frame;
            }
        }
        PyObject *check = PyErr_Occurred() ? NULL : PyDict_GetItemWithError(codec.checks, ftype);
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
PyObject *
frame_from_map(PyObject *m, int validate)
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
            return abandon(d, PUT_FALLBACK);
        int overflow;
        long key = PyLong_AsLongAndOverflow(kobj, &overflow);
        if (overflow || key < 0)
            continue; /* unknown integer keys are ignored (FRM-4) */
        int rc = put_field(d, key, v, &last, 0);
        if (rc != PUT_OK)
            return abandon(d, rc);
    }
    return finish_frame(d, validate);
}

/* The frame body in ``r`` (exactly one CBOR map, read to r->end) straight into a Frame: the
 * map's keys are read as wire key numbers and each value stored in the frame's dict as it is
 * read, with no intermediate map. Same results as cbor_read_item + frame_from_map, except that
 * anything unusual (text keys, an invalid id...) is left to Python rather than raised here:
 * the Python path then reads the whole body and names the first error. */
PyObject *
frame_read(CborReader *r)
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
            return abandon(d, PUT_FALLBACK);
        unsigned char kb = *r->p;
        long key;
        if ((kb >> 5) != 0)
            return abandon(d, PUT_FALLBACK); /* a key that is not an unsigned integer */
        if ((kb & 31) < 24) {
            key = kb & 31;
            r->p++;
        }
        else if ((kb & 31) == 24 && r->end - r->p >= 2) {
            key = r->p[1];
            r->p += 2;
        }
        else
            return abandon(d, PUT_FALLBACK);
        PyObject *v = cbor_read_item(r, 1);
        if (v == NULL)
            return abandon(d, PUT_ERROR);
        if (v == CBOR_GIVE_UP)
            return abandon(d, PUT_FALLBACK);
        int rc = put_field(d, key, v, &last, 1);
        Py_DECREF(v);
        if (rc != PUT_OK)
            return abandon(d, rc);
    }
    if (r->p != r->end)
        return abandon(d, PUT_FALLBACK); /* trailing bytes: the exact path names the error */
    return finish_frame(d, 1);
}

