/* Frames written out as CBOR bodies with their length prefix, byte for byte what the Python
 * path in _codec.py writes (see _speedups.c).
 */
#include <string.h>

#include "_frames.h"

/* The CBOR map of a frame's __dict__ (new reference) with seq overridden when not None. */
PyObject *
frame_map(PyObject *d, PyObject *seq)
{
    PyObject *m = PyDict_New();
    if (m == NULL)
        return NULL;
    Py_ssize_t pos = 0;
    PyObject *name, *v;
    while (PyDict_Next(d, &pos, &name, &v)) {
        PyObject *k = PyDict_GetItemWithError(codec.key_of, name);
        if (k == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetObject(PyExc_KeyError, name);
            goto error;
        }
        PyObject *conv = NULL;
        if (k == codec.i_one) {
            conv = PyDict_GetItemWithError(codec.frame_type_ints, v);
            if (conv == NULL) {
                if (!PyErr_Occurred())
                    PyErr_SetObject(PyExc_KeyError, v);
                goto error;
            }
            Py_INCREF(conv);
        }
        else if (k == codec.i_two || k == codec.i_thirteen) {
            conv = PyObject_GetAttr(v, codec.s_value);
            if (conv == NULL)
                goto error;
        }
        else if (k == codec.i_three && seq != Py_None) {
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
PyObject *
frame_prefixed(const unsigned char *body, Py_ssize_t n, Py_ssize_t max_frame)
{
    if (n > max_frame || n > codec.hard_cap || n > 0xFFFFFFFFL)
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
int
frame_write(CborWriter *w, PyObject *d, PyObject *seq)
{
    if (!cbor_write_head(w, 5, (uint64_t)PyDict_GET_SIZE(d)))
        return 0;
    Py_ssize_t pos = 0;
    PyObject *name, *v;
    while (PyDict_Next(d, &pos, &name, &v)) {
        PyObject *k = PyDict_GetItemWithError(codec.key_of, name);
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
            PyObject *conv = PyDict_GetItemWithError(codec.frame_type_ints, v);
            if (conv == NULL)
                return PyErr_Occurred() ? 0 : -1;
            rc = cbor_write_item(w, conv, 1);
        }
        else if (key == 2 || key == 13) {
            PyObject *conv = PyObject_GetAttr(v, codec.s_value);
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
PyObject *
frame_prefix_in_place(CborWriter *w, Py_ssize_t max_frame)
{
    Py_ssize_t n = w->len - PREFIX_LEN;
    if (n > max_frame || n > codec.hard_cap || n > 0xFFFFFFFFL)
        Py_RETURN_NONE;
    unsigned char *out = w->buf;
    out[0] = (unsigned char)((n >> 24) & 0xFF);
    out[1] = (unsigned char)((n >> 16) & 0xFF);
    out[2] = (unsigned char)((n >> 8) & 0xFF);
    out[3] = (unsigned char)(n & 0xFF);
    return PyBytes_FromStringAndSize((const char *)out, w->len);
}

