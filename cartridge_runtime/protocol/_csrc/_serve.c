/* The cartridge's side of the receiver's fast path: serve_flow_fast, the connection's
 * dispatch of a flow frame of an open request, over receive_fast (_receiver.c).
 */
#include "_frames.h"

static struct {
    PyObject *s_id, *s_input_error, *s_output, *s_receiver, *s_outgoing;
} sv;

static int
intern_names(void)
{
#define INTERN(var, text) if ((sv.var = PyUnicode_InternFromString(text)) == NULL) return -1
    INTERN(s_input_error, "input_error");
    INTERN(s_output, "output");
    INTERN(s_receiver, "receiver");
    INTERN(s_outgoing, "_outgoing");
    INTERN(s_id, "id"); /* last: the others are there once it is */
#undef INTERN
    return 0;
}

/* serve_flow_fast(requests, fallback, frame): CartridgeConnection._on_flow for a frame of an
 * open request that receive_fast takes whole (no input error, no output name on a
 * STREAM_START, no credit waiting to be sent); fallback(frame) for everything else. */
PyObject *
serve_flow_fast(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyDict_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "serve_flow_fast(requests, fallback, frame)");
        return NULL;
    }
    PyObject *requests = args[0], *fallback = args[1], *frame = args[2];
    if (sv.s_id == NULL && intern_names() < 0)
        return NULL;
    if (!receiver_is_configured())
        return PyObject_CallOneArg(fallback, frame);
    PyObject *fid = PyObject_GetAttr(frame, sv.s_id);
    if (fid == NULL)
        return NULL;
    PyObject *request = PyDict_GetItemWithError(requests, fid);
    Py_DECREF(fid);
    if (request == NULL) {
        if (PyErr_Occurred())
            return NULL;
        return PyObject_CallOneArg(fallback, frame);
    }
    Py_INCREF(request);
    PyObject *result = NULL, *receiver = NULL, *outgoing = NULL, *v = NULL;
    if ((v = PyObject_GetAttr(request, sv.s_input_error)) == NULL)
        goto done;
    int plain = v == Py_None;
    Py_CLEAR(v);
    if (plain) {
        if ((v = PyObject_GetAttr(frame, sv.s_output)) == NULL)
            goto done;
        plain = v == Py_None; /* only a STREAM_START carries one */
        Py_CLEAR(v);
    }
    if (plain) {
        if ((receiver = PyObject_GetAttr(request, sv.s_receiver)) == NULL ||
            (outgoing = PyObject_GetAttr(receiver, sv.s_outgoing)) == NULL)
            goto done;
        plain = PyList_CheckExact(outgoing) && PyList_GET_SIZE(outgoing) == 0;
    }
    if (plain) {
        PyObject *call[2] = {receiver, frame};
        result = receive_fast(module, call, 2);
        if (result == NULL || result != Py_None)
            goto done;
        Py_CLEAR(result);
    }
    result = PyObject_CallOneArg(fallback, frame);
done:
    Py_XDECREF(v);
    Py_XDECREF(receiver);
    Py_XDECREF(outgoing);
    Py_DECREF(request);
    return result;
}

