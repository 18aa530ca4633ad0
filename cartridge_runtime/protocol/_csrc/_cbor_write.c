/* The direct CBOR writer of the codec fast paths (see _cbor.h). */
#include <math.h>
#include <string.h>

#include "_cbor.h"

static int
w_reserve(CborWriter *w, Py_ssize_t more)
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

int
cbor_write_head(CborWriter *w, int major, uint64_t arg)
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
w_raw(CborWriter *w, const void *data, Py_ssize_t n)
{
    if (!w_reserve(w, n))
        return 0;
    memcpy(w->buf + w->len, data, (size_t)n);
    w->len += n;
    return 1;
}

int
cbor_write_item(CborWriter *w, PyObject *v, int depth)
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
                return cbor_write_head(w, 0, (uint64_t)x);
            return cbor_write_head(w, 1, (uint64_t)(-1 - x));
        }
        if (overflow > 0) {
            unsigned long long u = PyLong_AsUnsignedLongLong(v);
            if (u == (unsigned long long)-1 && PyErr_Occurred()) {
                PyErr_Clear();
                return -1;
            }
            return cbor_write_head(w, 0, u);
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
        return cbor_write_head(w, 3, (uint64_t)n) ? w_raw(w, utf8, n) : 0;
    }
    if (PyBytes_CheckExact(v)) {
        Py_ssize_t n = PyBytes_GET_SIZE(v);
        return cbor_write_head(w, 2, (uint64_t)n) ? w_raw(w, PyBytes_AS_STRING(v), n) : 0;
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
    if (depth >= CBOR_MAX_DEPTH)
        return -1;
    if (PyDict_CheckExact(v)) {
        if (!cbor_write_head(w, 5, (uint64_t)PyDict_GET_SIZE(v)))
            return 0;
        Py_ssize_t pos = 0;
        PyObject *k, *x;
        while (PyDict_Next(v, &pos, &k, &x)) {
            int rc = cbor_write_item(w, k, depth + 1);
            if (rc != 1)
                return rc;
            rc = cbor_write_item(w, x, depth + 1);
            if (rc != 1)
                return rc;
        }
        return 1;
    }
    if (PyList_CheckExact(v) || PyTuple_CheckExact(v)) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(v);
        PyObject **items = PySequence_Fast_ITEMS(v);
        if (!cbor_write_head(w, 4, (uint64_t)n))
            return 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            int rc = cbor_write_item(w, items[i], depth + 1);
            if (rc != 1)
                return rc;
        }
        return 1;
    }
    return -1;
}


void
cbor_writer_init(CborWriter *w, Py_ssize_t reserve)
{
    w->buf = w->small;
    w->len = reserve;
    w->cap = (Py_ssize_t)sizeof w->small;
}

void
cbor_writer_free(CborWriter *w)
{
    if (w->buf != w->small)
        PyMem_Free(w->buf);
    w->buf = w->small;
}
