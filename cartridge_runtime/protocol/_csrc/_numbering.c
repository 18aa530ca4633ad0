/* Compiled fast path of a cartridge writer's batch: number and encode (see _seq.py, which
 * owns the numbering rules, and _codec.py, which owns the encoding).
 *
 * encode_numbered(counters, closed, max_closed, frames, start, out, max_frame) numbers each
 * frame of frames[start:] as SeqAssigner.number does (per (rid, xid) flow, 0, 1, 2...; a
 * terminal closes the flow) and appends its wire bytes (encode_small's) to out, in order.
 * It stops at the first frame it does not take, before changing anything for it: a
 * straggler (the Python path counts it), a frame encode_small leaves to Python (a large
 * payload, an error to name), anything unusual. It returns that frame's index, or
 * len(frames) when it took them all.
 */
#include <string.h>

#include "_frames.h"

static unsigned char kinds[64]; /* frame type code -> 0 not a flow frame, 1 flow, 2 terminal */
static Py_ssize_t n_kinds;
static PyObject *s_dict, *s_popitem, *s_routing_id;

PyObject *
configure_numbering(PyObject *module, PyObject *arg)
{
    if (!PyBytes_Check(arg) || PyBytes_GET_SIZE(arg) > (Py_ssize_t)sizeof(kinds)) {
        PyErr_SetString(PyExc_TypeError, "configure_numbering(kinds: bytes)");
        return NULL;
    }
    n_kinds = PyBytes_GET_SIZE(arg);
    memcpy(kinds, PyBytes_AS_STRING(arg), (size_t)n_kinds);
    if (s_dict == NULL) {
        s_dict = PyUnicode_InternFromString("__dict__");
        s_popitem = PyUnicode_InternFromString("popitem");
        s_routing_id = PyUnicode_InternFromString("routing_id");
        if (s_dict == NULL || s_popitem == NULL || s_routing_id == NULL)
            return NULL;
    }
    Py_RETURN_NONE;
}

/* The flow key of a frame whose dict is d: (rid value, xid value or None); NULL with no
 * exception when the frame is unusual. */
static PyObject *
flow_key(PyObject *d)
{
    PyObject *rid = PyDict_GetItemWithError(d, codec.s_id);
    if (rid == NULL)
        return NULL;
    PyObject *rv = PyObject_GetAttr(rid, codec.s_value);
    if (rv == NULL)
        return NULL;
    PyObject *xid = PyDict_GetItemWithError(d, s_routing_id);
    PyObject *xv = Py_None;
    Py_INCREF(xv);
    if (xid != NULL && xid != Py_None) {
        Py_DECREF(xv);
        xv = PyObject_GetAttr(xid, codec.s_value);
        if (xv == NULL) {
            Py_DECREF(rv);
            return NULL;
        }
    }
    PyObject *key = PyTuple_Pack(2, rv, xv);
    Py_DECREF(rv);
    Py_DECREF(xv);
    return key;
}

/* One frame: 1 taken, 0 left to Python (nothing changed), -1 error. */
static int
take_one(PyObject *counters, PyObject *closed, Py_ssize_t max_closed, PyObject *frame,
         PyObject *out, PyObject *max_frame)
{
    PyObject *d = PyObject_GetAttr(frame, s_dict);
    if (d == NULL || !PyDict_Check(d)) {
        Py_XDECREF(d);
        PyErr_Clear();
        return 0;
    }
    int rc = 0;
    PyObject *key = NULL, *seq = NULL, *wire = NULL;
    PyObject *ft = PyDict_GetItemWithError(d, codec.s_frame_type);
    long code = ft != NULL && PyLong_Check(ft) ? PyLong_AsLong(ft) : -1;
    if (code < 0 || code >= n_kinds)
        goto done;
    int kind = kinds[code];
    if (kind == 0) {
        seq = PyLong_FromLong(0);
    }
    else {
        if ((key = flow_key(d)) == NULL)
            goto done;
        int straggler = PyDict_Contains(closed, key);
        if (straggler != 0)
            goto done;
        PyObject *n = PyDict_GetItemWithError(counters, key);
        if (n == NULL && PyErr_Occurred())
            goto done;
        seq = n != NULL ? Py_NewRef(n) : PyLong_FromLong(0);
    }
    if (seq == NULL)
        goto done;
    PyObject *args[3] = {d, seq, max_frame};
    wire = encode_small(NULL, args, 3);
    if (wire == NULL || wire == Py_None)
        goto done; /* Python encodes it, or names the error */
    if (kind == 1) {
        PyObject *next = PyNumber_Add(seq, codec.i_one);
        if (next == NULL || PyDict_SetItem(counters, key, next) < 0) {
            Py_XDECREF(next);
            rc = -1;
            goto done;
        }
        Py_DECREF(next);
    }
    else if (kind == 2) {
        if (PyDict_DelItem(counters, key) < 0)
            PyErr_Clear(); /* a flow that never counted: pop(key, 0) */
        if (PyObject_SetItem(closed, key, Py_None) < 0) {
            rc = -1;
            goto done;
        }
        if (PyObject_Length(closed) > max_closed) {
            PyObject *gone = PyObject_CallMethodObjArgs(closed, s_popitem, Py_False, NULL);
            if (gone == NULL) {
                rc = -1;
                goto done;
            }
            Py_DECREF(gone);
        }
    }
    rc = PyList_Append(out, wire) < 0 ? -1 : 1;
done:
    if (rc == 0)
        PyErr_Clear();
    Py_XDECREF(wire);
    Py_XDECREF(seq);
    Py_XDECREF(key);
    Py_DECREF(d);
    return rc;
}

PyObject *
encode_numbered(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7 || !PyDict_Check(args[0]) || !PyDict_Check(args[1]) || !PyList_Check(args[3]) ||
        !PyList_Check(args[5])) {
        PyErr_SetString(PyExc_TypeError,
                        "encode_numbered(counters, closed, max_closed, frames, start, out, max_frame)");
        return NULL;
    }
    Py_ssize_t max_closed = PyLong_AsSsize_t(args[2]);
    Py_ssize_t i = PyLong_AsSsize_t(args[4]);
    if ((max_closed == -1 || i == -1) && PyErr_Occurred())
        return NULL;
    PyObject *frames = args[3];
    if (n_kinds == 0)
        return PyLong_FromSsize_t(i);
    for (; i < PyList_GET_SIZE(frames); i++) {
        int rc = take_one(args[0], args[1], max_closed, PyList_GET_ITEM(frames, i), args[5], args[6]);
        if (rc < 0)
            return NULL;
        if (rc == 0)
            break;
    }
    return PyLong_FromSsize_t(i);
}

/* encode_flow(frames, max_frame, out) -> index: frame i of a flow its sender opens and ends in
 * one go (a small call's request) encoded with seq i onto out, while encode_small takes them;
 * the index of the first frame left to Python (len(frames) when none was). */
PyObject *
encode_flow(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyList_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "encode_flow(frames, max_frame, out)");
        return NULL;
    }
    if (!PyList_Check(args[0]) && !PyTuple_Check(args[0]))
        return PyLong_FromLong(0); /* another sequence: all of it is Python's */
    if (s_dict == NULL && (s_dict = PyUnicode_InternFromString("__dict__")) == NULL)
        return NULL;
    PyObject *frames = args[0], *out = args[2];
    Py_ssize_t n = PySequence_Fast_GET_SIZE(frames), i = 0;
    PyObject **items = PySequence_Fast_ITEMS(frames);
    for (; i < n; i++) {
        PyObject *d = PyObject_GetAttr(items[i], s_dict);
        if (d == NULL || !PyDict_Check(d)) {
            Py_XDECREF(d);
            PyErr_Clear();
            break;
        }
        PyObject *seq = PyLong_FromSsize_t(i);
        if (seq == NULL) {
            Py_DECREF(d);
            return NULL;
        }
        PyObject *call[3] = {d, seq, args[1]};
        PyObject *wire = encode_small(NULL, call, 3);
        Py_DECREF(seq);
        Py_DECREF(d);
        if (wire == NULL || wire == Py_None) {
            Py_XDECREF(wire);
            PyErr_Clear(); /* Python encodes it, or raises the error by name */
            break;
        }
        int rc = PyList_Append(out, wire);
        Py_DECREF(wire);
        if (rc < 0)
            return NULL;
    }
    return PyLong_FromSsize_t(i);
}
