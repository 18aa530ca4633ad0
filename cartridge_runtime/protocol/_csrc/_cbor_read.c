/* The direct CBOR reader of the codec fast paths (see _cbor.h). */
#include "_cbor.h"

/* Major type and argument of the next item; 0 when unsupported or truncated. */
static int
read_head(CborReader *r, int *major, uint64_t *arg, int *info)
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

/* The next item as a new reference, CBOR_GIVE_UP, or NULL with an exception set. */
PyObject *
cbor_read_item(CborReader *r, int depth)
{
    int major, info;
    uint64_t arg;
    if (!read_head(r, &major, &arg, &info))
        return CBOR_GIVE_UP;
    switch (major) {
    case 0:
        return PyLong_FromUnsignedLongLong(arg);
    case 1:
        if (arg > (uint64_t)LLONG_MAX)
            return CBOR_GIVE_UP;
        return PyLong_FromLongLong(-1 - (long long)arg);
    case 2:
    case 3: {
        if (arg > (uint64_t)(r->end - r->p))
            return CBOR_GIVE_UP;
        const char *start = (const char *)r->p;
        r->p += arg;
        if (major == 2)
            return PyBytes_FromStringAndSize(start, (Py_ssize_t)arg);
        PyObject *text = PyUnicode_DecodeUTF8(start, (Py_ssize_t)arg, "strict");
        if (text == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            PyErr_Clear();
            return CBOR_GIVE_UP;
        }
        return text;
    }
    case 4: {
        if (depth >= CBOR_MAX_DEPTH || arg > (uint64_t)(r->end - r->p))
            return CBOR_GIVE_UP; /* every item takes at least one byte */
        PyObject *list = PyList_New((Py_ssize_t)arg);
        if (list == NULL)
            return NULL;
        for (Py_ssize_t i = 0; i < (Py_ssize_t)arg; i++) {
            PyObject *item = cbor_read_item(r, depth + 1);
            if (item == NULL || item == CBOR_GIVE_UP) {
                Py_DECREF(list);
                return item;
            }
            PyList_SET_ITEM(list, i, item);
        }
        return list;
    }
    case 5: {
        if (depth >= CBOR_MAX_DEPTH || arg > (uint64_t)(r->end - r->p) / 2)
            return CBOR_GIVE_UP;
        PyObject *map = PyDict_New();
        if (map == NULL)
            return NULL;
        for (uint64_t i = 0; i < arg; i++) {
            PyObject *key = cbor_read_item(r, depth + 1);
            if (key == NULL || key == CBOR_GIVE_UP) {
                Py_DECREF(map);
                return key;
            }
            if (!PyLong_CheckExact(key) && !PyUnicode_CheckExact(key)) {
                Py_DECREF(key); /* cbor2 turns other keys into immutable forms */
                Py_DECREF(map);
                return CBOR_GIVE_UP;
            }
            PyObject *value = cbor_read_item(r, depth + 1);
            if (value == NULL || value == CBOR_GIVE_UP) {
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
            return CBOR_GIVE_UP; /* undefined, other simple values */
        }
    default:
        return CBOR_GIVE_UP; /* tags */
    }
}
