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
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* Value kinds of the key table (must match _codec._C_KINDS). */
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

/* The MessageId of a decoded id value not in the cache (new reference), added to the cache
 * as _codec._new_id does. A valid value (16 bytes, or an unsigned integer) is built here;
 * anything else goes to _new_id, which raises the precise error. */
static PyObject *
make_id(PyObject *key, PyObject *v)
{
    int valid;
    if (PyBytes_CheckExact(v))
        valid = PyBytes_GET_SIZE(v) == 16;
    else {
        int overflow;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (x == -1 && PyErr_Occurred())
            return NULL;
        valid = overflow > 0 || (overflow == 0 && x >= 0);
    }
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


/* ---- a direct CBOR reader for frame bodies ------------------------------------------------
 * Reads the subset of CBOR that frames use (definite-length maps, arrays, byte and text
 * strings, integers within 64 bits, true/false/null, floats) into the same Python objects
 * cbor2 builds, straight from the buffer. Anything else (tags, indefinite lengths, undefined,
 * invalid UTF-8, non-scalar map keys, deep nesting, truncation, trailing bytes) makes it give
 * up, and the caller lets cbor2 and the Python path read the body and name any error. */

#define GIVE_UP ((PyObject *)1) /* not an object: "let Python decide" */
#define MAX_DEPTH 8

typedef struct {
    const unsigned char *p;
    const unsigned char *end;
} Reader;

/* Major type and argument of the next item; 0 when unsupported or truncated. */
static int
read_head(Reader *r, int *major, uint64_t *arg, int *info)
{
    if (r->p >= r->end)
        return 0;
    unsigned char b = *r->p++;
    *major = b >> 5;
    *info = b & 31;
    int extra;
    if (*info < 24) {
        *arg = (uint64_t)*info;
        return 1;
    }
    switch (*info) {
    case 24: extra = 1; break;
    case 25: extra = 2; break;
    case 26: extra = 4; break;
    case 27: extra = 8; break;
    default: return 0; /* indefinite length or reserved */
    }
    if (r->end - r->p < extra)
        return 0;
    uint64_t v = 0;
    for (int i = 0; i < extra; i++)
        v = (v << 8) | r->p[i];
    r->p += extra;
    *arg = v;
    return 1;
}

/* The next item as a new reference, GIVE_UP, or NULL with an exception set. */
static PyObject *
read_item(Reader *r, int depth)
{
    int major, info;
    uint64_t arg;
    if (!read_head(r, &major, &arg, &info))
        return GIVE_UP;
    switch (major) {
    case 0:
        return PyLong_FromUnsignedLongLong(arg);
    case 1:
        if (arg > (uint64_t)LLONG_MAX)
            return GIVE_UP;
        return PyLong_FromLongLong(-1 - (long long)arg);
    case 2:
    case 3: {
        if (arg > (uint64_t)(r->end - r->p))
            return GIVE_UP;
        const char *start = (const char *)r->p;
        r->p += arg;
        if (major == 2)
            return PyBytes_FromStringAndSize(start, (Py_ssize_t)arg);
        PyObject *text = PyUnicode_DecodeUTF8(start, (Py_ssize_t)arg, "strict");
        if (text == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            PyErr_Clear();
            return GIVE_UP;
        }
        return text;
    }
    case 4: {
        if (depth >= MAX_DEPTH || arg > (uint64_t)(r->end - r->p))
            return GIVE_UP; /* every item takes at least one byte */
        PyObject *list = PyList_New((Py_ssize_t)arg);
        if (list == NULL)
            return NULL;
        for (Py_ssize_t i = 0; i < (Py_ssize_t)arg; i++) {
            PyObject *item = read_item(r, depth + 1);
            if (item == NULL || item == GIVE_UP) {
                Py_DECREF(list);
                return item;
            }
            PyList_SET_ITEM(list, i, item);
        }
        return list;
    }
    case 5: {
        if (depth >= MAX_DEPTH || arg > (uint64_t)(r->end - r->p) / 2)
            return GIVE_UP;
        PyObject *map = PyDict_New();
        if (map == NULL)
            return NULL;
        for (uint64_t i = 0; i < arg; i++) {
            PyObject *key = read_item(r, depth + 1);
            if (key == NULL || key == GIVE_UP) {
                Py_DECREF(map);
                return key;
            }
            if (!PyLong_CheckExact(key) && !PyUnicode_CheckExact(key)) {
                Py_DECREF(key); /* cbor2 turns other keys into immutable forms */
                Py_DECREF(map);
                return GIVE_UP;
            }
            PyObject *value = read_item(r, depth + 1);
            if (value == NULL || value == GIVE_UP) {
                Py_DECREF(key);
                Py_DECREF(map);
                return value;
            }
            int rc = PyDict_SetItem(map, key, value);
            Py_DECREF(key);
            Py_DECREF(value);
            if (rc < 0) {
                Py_DECREF(map);
                return NULL;
            }
        }
        return map;
    }
    case 7:
        switch (info) {
        case 20: Py_RETURN_FALSE;
        case 21: Py_RETURN_TRUE;
        case 22: Py_RETURN_NONE;
        case 25: {
            unsigned char b[2] = {(unsigned char)(arg >> 8), (unsigned char)arg};
            double d = PyFloat_Unpack2((const char *)b, 0);
            if (d == -1.0 && PyErr_Occurred())
                return NULL;
            return PyFloat_FromDouble(d);
        }
        case 26: {
            unsigned char b[4];
            for (int i = 0; i < 4; i++)
                b[i] = (unsigned char)(arg >> (24 - 8 * i));
            double d = PyFloat_Unpack4((const char *)b, 0);
            if (d == -1.0 && PyErr_Occurred())
                return NULL;
            return PyFloat_FromDouble(d);
        }
        case 27: {
            unsigned char b[8];
            for (int i = 0; i < 8; i++)
                b[i] = (unsigned char)(arg >> (56 - 8 * i));
            double d = PyFloat_Unpack8((const char *)b, 0);
            if (d == -1.0 && PyErr_Occurred())
                return NULL;
            return PyFloat_FromDouble(d);
        }
        default:
            return GIVE_UP; /* undefined, other simple values */
        }
    default:
        return GIVE_UP; /* tags */
    }
}

/* ---- a direct CBOR writer for small frames --------------------------------------------------
 * Writes exactly what cbor2.dumps writes for the types frames hold (shortest integer heads,
 * definite lengths, finite floats as 8 bytes, maps in insertion order). Any other type or
 * value (subclasses, non-finite floats, integers beyond 64 bits, deep nesting) makes it give
 * up, and the caller uses cbor2. */

typedef struct {
    unsigned char *buf;
    Py_ssize_t len;
    Py_ssize_t cap;
    unsigned char small[512];
} Writer;

static int
w_reserve(Writer *w, Py_ssize_t more)
{
    if (w->len + more <= w->cap)
        return 1;
    Py_ssize_t cap = w->cap * 2;
    while (cap < w->len + more)
        cap *= 2;
    unsigned char *nb;
    if (w->buf == w->small) {
        nb = PyMem_Malloc((size_t)cap);
        if (nb != NULL)
            memcpy(nb, w->buf, (size_t)w->len);
    }
    else
        nb = PyMem_Realloc(w->buf, (size_t)cap);
    if (nb == NULL) {
        PyErr_NoMemory();
        return 0;
    }
    w->buf = nb;
    w->cap = cap;
    return 1;
}

static int
w_head(Writer *w, int major, uint64_t arg)
{
    if (!w_reserve(w, 9))
        return 0;
    unsigned char *o = w->buf + w->len;
    unsigned char m = (unsigned char)(major << 5);
    if (arg < 24) {
        o[0] = m | (unsigned char)arg;
        w->len += 1;
    }
    else if (arg < 0x100) {
        o[0] = m | 24;
        o[1] = (unsigned char)arg;
        w->len += 2;
    }
    else if (arg < 0x10000) {
        o[0] = m | 25;
        o[1] = (unsigned char)(arg >> 8);
        o[2] = (unsigned char)arg;
        w->len += 3;
    }
    else if (arg < 0x100000000ULL) {
        o[0] = m | 26;
        for (int i = 0; i < 4; i++)
            o[1 + i] = (unsigned char)(arg >> (24 - 8 * i));
        w->len += 5;
    }
    else {
        o[0] = m | 27;
        for (int i = 0; i < 8; i++)
            o[1 + i] = (unsigned char)(arg >> (56 - 8 * i));
        w->len += 9;
    }
    return 1;
}

static int
w_raw(Writer *w, const void *data, Py_ssize_t n)
{
    if (!w_reserve(w, n))
        return 0;
    memcpy(w->buf + w->len, data, (size_t)n);
    w->len += n;
    return 1;
}

/* 1 written, 0 error (exception set), -1 give up. */
static int
write_item(Writer *w, PyObject *v, int depth)
{
    if (v == Py_True || v == Py_False || v == Py_None) {
        unsigned char b = v == Py_True ? 0xf5 : v == Py_False ? 0xf4 : 0xf6;
        return w_raw(w, &b, 1);
    }
    if (PyLong_CheckExact(v)) {
        int overflow;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow == 0) {
            if (x >= 0)
                return w_head(w, 0, (uint64_t)x);
            return w_head(w, 1, (uint64_t)(-1 - x));
        }
        if (overflow > 0) {
            unsigned long long u = PyLong_AsUnsignedLongLong(v);
            if (u == (unsigned long long)-1 && PyErr_Occurred()) {
                PyErr_Clear();
                return -1;
            }
            return w_head(w, 0, u);
        }
        return -1; /* below -2**63: cbor2 decides */
    }
    if (PyUnicode_CheckExact(v)) {
        Py_ssize_t n;
        const char *utf8 = PyUnicode_AsUTF8AndSize(v, &n);
        if (utf8 == NULL) {
            PyErr_Clear(); /* e.g. lone surrogates: cbor2 raises its own error */
            return -1;
        }
        return w_head(w, 3, (uint64_t)n) ? w_raw(w, utf8, n) : 0;
    }
    if (PyBytes_CheckExact(v)) {
        Py_ssize_t n = PyBytes_GET_SIZE(v);
        return w_head(w, 2, (uint64_t)n) ? w_raw(w, PyBytes_AS_STRING(v), n) : 0;
    }
    if (PyFloat_CheckExact(v)) {
        double d = PyFloat_AS_DOUBLE(v);
        if (!isfinite(d))
            return -1; /* cbor2 writes NaN and infinities in half precision */
        unsigned char b[9];
        b[0] = 0xfb;
        if (PyFloat_Pack8(d, (char *)b + 1, 0) < 0)
            return 0;
        return w_raw(w, b, 9);
    }
    if (depth >= MAX_DEPTH)
        return -1;
    if (PyDict_CheckExact(v)) {
        if (!w_head(w, 5, (uint64_t)PyDict_GET_SIZE(v)))
            return 0;
        Py_ssize_t pos = 0;
        PyObject *k, *x;
        while (PyDict_Next(v, &pos, &k, &x)) {
            int rc = write_item(w, k, depth + 1);
            if (rc != 1)
                return rc;
            rc = write_item(w, x, depth + 1);
            if (rc != 1)
                return rc;
        }
        return 1;
    }
    if (PyList_CheckExact(v) || PyTuple_CheckExact(v)) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(v);
        PyObject **items = PySequence_Fast_ITEMS(v);
        if (!w_head(w, 4, (uint64_t)n))
            return 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            int rc = write_item(w, items[i], depth + 1);
            if (rc != 1)
                return rc;
        }
        return 1;
    }
    return -1;
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
        PyObject *val = v;
        PyObject *owned = NULL;
        if (v == Py_None)
            goto fallback; /* null: absent for key > 3, an error below; Python sorts it */
        switch (key_kind[key]) {
        case K_INT:
            if (!PyLong_CheckExact(v))
                goto fallback;
            if (key > 1) {
                long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
                if (overflow < 0 || (overflow == 0 && x < 0))
                    goto fallback;
            }
            break;
        case K_CHECKSUM:
            if (!PyLong_CheckExact(v))
                goto fallback;
            if (PyLong_AsUnsignedLongLong(v) == (unsigned long long)-1 && PyErr_Occurred()) {
                PyErr_Clear(); /* negative or >= 2**64: Python names the error */
                goto fallback;
            }
            break;
        case K_STR:
            if (!PyUnicode_CheckExact(v))
                goto fallback;
            break;
        case K_BOOL:
            if (!PyBool_Check(v))
                goto fallback;
            break;
        case K_META:
            if (!PyDict_CheckExact(v) || !text_keys(v))
                goto fallback;
            break;
        case K_BYTES:
            if (!PyBytes_CheckExact(v))
                goto fallback;
            break;
        case K_ID:
            if (!PyBytes_CheckExact(v) && !PyLong_CheckExact(v))
                goto fallback;
            val = PyDict_GetItemWithError(id_cache, v);
            if (val == NULL) {
                if (PyErr_Occurred())
                    goto error;
                owned = make_id(kobj, v);
                if (owned == NULL)
                    goto error; /* the same FrameDecodeError the Python path raises */
                val = owned;
            }
            break;
        default:
            goto fallback;
        }
        if (key < last) {
            Py_XDECREF(owned);
            goto fallback; /* out of wire order: Python restores the order */
        }
        last = key;
        int rc = PyDict_SetItem(d, key_name[key], val);
        Py_XDECREF(owned);
        if (rc < 0)
            goto error;
    }
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
    Reader r = {(const unsigned char *)view.buf + start, (const unsigned char *)view.buf + stop};
    PyObject *m = read_item(&r, 0);
    int whole = r.p == r.end;
    PyBuffer_Release(&view);
    if (m == NULL)
        return NULL;
    if (m == GIVE_UP)
        Py_RETURN_NONE; /* outside the subset: cbor2 reads it */
    if (!whole || !PyDict_CheckExact(m)) {
        Py_DECREF(m); /* trailing bytes, or not a map: the exact path names the error */
        Py_RETURN_NONE;
    }
    PyObject *result = build_frame(m, 1);
    Py_DECREF(m);
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
    PyObject *m = frame_map(d, args[1]);
    if (m == NULL)
        return NULL;
    Writer w;
    w.buf = w.small;
    w.len = PREFIX_LEN; /* the prefix is filled in last */
    w.cap = (Py_ssize_t)sizeof w.small;
    int rc = write_item(&w, m, 0);
    PyObject *wire = NULL;
    if (rc == 1) {
        Py_ssize_t n = w.len - PREFIX_LEN;
        if (n <= max_frame && n <= hard_cap && n <= 0xFFFFFFFFL) {
            w.buf[0] = (unsigned char)((n >> 24) & 0xFF);
            w.buf[1] = (unsigned char)((n >> 16) & 0xFF);
            w.buf[2] = (unsigned char)((n >> 8) & 0xFF);
            w.buf[3] = (unsigned char)(n & 0xFF);
            wire = PyBytes_FromStringAndSize((const char *)w.buf, w.len);
        }
        else
            wire = Py_NewRef(Py_None); /* over a limit: Python raises the error */
    }
    if (w.buf != w.small)
        PyMem_Free(w.buf);
    if (rc == 0) {
        Py_DECREF(m);
        return NULL;
    }
    if (rc == 1) {
        Py_DECREF(m);
        return wire;
    }
    /* A value outside the writer's subset: cbor2 encodes it (and raises what it raises). */
    PyObject *body = PyObject_CallOneArg(dumps, m);
    Py_DECREF(m);
    if (body == NULL)
        return NULL;
    if (!PyBytes_CheckExact(body)) {
        Py_DECREF(body);
        Py_RETURN_NONE;
    }
    Py_ssize_t n = PyBytes_GET_SIZE(body);
    if (n > max_frame || n > hard_cap || n > 0xFFFFFFFFL) {
        Py_DECREF(body);
        Py_RETURN_NONE;
    }
    wire = PyBytes_FromStringAndSize(NULL, PREFIX_LEN + n);
    if (wire == NULL) {
        Py_DECREF(body);
        return NULL;
    }
    unsigned char *out = (unsigned char *)PyBytes_AS_STRING(wire);
    out[0] = (unsigned char)((n >> 24) & 0xFF);
    out[1] = (unsigned char)((n >> 16) & 0xFF);
    out[2] = (unsigned char)((n >> 8) & 0xFF);
    out[3] = (unsigned char)(n & 0xFF);
    memcpy(out + PREFIX_LEN, PyBytes_AS_STRING(body), (size_t)n);
    Py_DECREF(body);
    return wire;
}

static PyMethodDef methods[] = {
    {"configure", (PyCFunction)(void (*)(void))configure, METH_VARARGS | METH_KEYWORDS,
     "Hand over the codec's tables and callables (once, from _codec)."},
    {"map_to_frame", map_to_frame, METH_O,
     "A validated Frame from a decoded map, or None to let the Python path decide."},
    {"decode_direct", (PyCFunction)(void (*)(void))decode_direct, METH_FASTCALL,
     "decode_direct(data, start, stop) -> Frame | None (None: let Python read it)."},
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
