/* A coroutine run with an outbox held while it does not suspend, compiled (see
 * runtime/_frames/_writer.py, _HeldWhileRunning, which owns the behaviour).
 *
 * held_while_running(outbox, coro) -> an awaitable that runs coro, calling outbox.hold()
 * each time coro is resumed and outbox.release() each time it suspends or ends (the release
 * writes what it queued), and passes results, exceptions, throw (a cancellation) and close
 * through as `await coro` does. The handler worker awaits one per request: as a Python
 * generator it cost a frame, a generator and a few calls a request.
 */
#include "_frames.h"

typedef struct {
    PyObject_HEAD
    PyObject *coro;
    PyObject *outbox;
} HeldObject;

static PyObject *s_hold, *s_release, *s_throw, *s_close;

static int
call0(PyObject *o, PyObject *name)
{
    PyObject *r = PyObject_CallMethodNoArgs(o, name);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

/* outbox.release(), keeping an exception already set (a failed release then loses to it). */
static int
release(HeldObject *self)
{
    if (!PyErr_Occurred())
        return call0(self->outbox, s_release);
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    if (call0(self->outbox, s_release) < 0) {
        Py_XDECREF(et);
        Py_XDECREF(ev);
        Py_XDECREF(tb);
        return -1;
    }
    PyErr_Restore(et, ev, tb);
    return 0;
}

static PySendResult
held_am_send(PyObject *op, PyObject *arg, PyObject **result)
{
    HeldObject *self = (HeldObject *)op;
    if (self->coro == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "cannot reuse an awaited held_while_running");
        *result = NULL;
        return PYGEN_ERROR;
    }
    if (call0(self->outbox, s_hold) < 0) {
        *result = NULL;
        return PYGEN_ERROR;
    }
    PySendResult r = PyIter_Send(self->coro, arg, result);
    if (release(self) < 0) {
        if (r != PYGEN_ERROR)
            Py_CLEAR(*result);
        return PYGEN_ERROR;
    }
    return r;
}

/* A send result as a Python call's: the yielded value, or NULL with StopIteration(value). */
static PyObject *
as_call(PySendResult r, PyObject *result)
{
    if (r == PYGEN_NEXT)
        return result;
    if (r == PYGEN_RETURN) {
        if (result == Py_None)
            PyErr_SetNone(PyExc_StopIteration);
        else {
            PyObject *stop = PyObject_CallOneArg(PyExc_StopIteration, result);
            if (stop != NULL) {
                PyErr_SetObject(PyExc_StopIteration, stop);
                Py_DECREF(stop);
            }
        }
        Py_DECREF(result);
    }
    return NULL;
}

static PyObject *
held_iternext(PyObject *op)
{
    PyObject *result;
    PySendResult r = held_am_send(op, Py_None, &result);
    return as_call(r, result);
}

static PyObject *
held_send(PyObject *op, PyObject *arg)
{
    PyObject *result;
    PySendResult r = held_am_send(op, arg, &result);
    return as_call(r, result);
}

static PyObject *
held_throw(PyObject *op, PyObject *args)
{
    HeldObject *self = (HeldObject *)op;
    if (self->coro == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "cannot reuse an awaited held_while_running");
        return NULL;
    }
    PyObject *throw = PyObject_GetAttr(self->coro, s_throw);
    if (throw == NULL)
        return NULL;
    if (call0(self->outbox, s_hold) < 0) {
        Py_DECREF(throw);
        return NULL;
    }
    PyObject *r = PyObject_Call(throw, args, NULL);
    Py_DECREF(throw);
    if (release(self) < 0) {
        Py_XDECREF(r);
        return NULL;
    }
    return r;
}

static PyObject *
held_close(PyObject *op, PyObject *unused)
{
    HeldObject *self = (HeldObject *)op;
    if (self->coro == NULL)
        Py_RETURN_NONE;
    PyObject *r = PyObject_CallMethodNoArgs(self->coro, s_close);
    return r;
}

static PyObject *
held_await(PyObject *op)
{
    return Py_NewRef(op);
}

static int
held_traverse(PyObject *op, visitproc visit, void *arg)
{
    HeldObject *self = (HeldObject *)op;
    Py_VISIT(self->coro);
    Py_VISIT(self->outbox);
    return 0;
}

static int
held_clear(PyObject *op)
{
    HeldObject *self = (HeldObject *)op;
    Py_CLEAR(self->coro);
    Py_CLEAR(self->outbox);
    return 0;
}

static void
held_dealloc(PyObject *op)
{
    PyObject_GC_UnTrack(op);
    held_clear(op);
    Py_TYPE(op)->tp_free(op);
}

static PyAsyncMethods held_async = {
    .am_await = held_await,
    .am_send = held_am_send,
};

static PyMethodDef held_methods[] = {
    {"send", held_send, METH_O, "Resume the coroutine with a value, the outbox held."},
    {"throw", held_throw, METH_VARARGS, "Throw into the coroutine, the outbox held."},
    {"close", held_close, METH_NOARGS, "Close the coroutine."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject HeldType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cartridge_runtime.protocol._speedups.Held",
    .tp_basicsize = sizeof(HeldObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A coroutine awaited with an outbox held while it runs (held_while_running).",
    .tp_traverse = held_traverse,
    .tp_clear = held_clear,
    .tp_dealloc = held_dealloc,
    .tp_as_async = &held_async,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = held_iternext,
    .tp_methods = held_methods,
};

PyObject *
held_while_running(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "held_while_running(outbox, coro)");
        return NULL;
    }
    if (s_hold == NULL) {
        if (PyType_Ready(&HeldType) < 0)
            return NULL;
        if ((s_hold = PyUnicode_InternFromString("hold")) == NULL ||
            (s_release = PyUnicode_InternFromString("release")) == NULL ||
            (s_throw = PyUnicode_InternFromString("throw")) == NULL ||
            (s_close = PyUnicode_InternFromString("close")) == NULL)
            return NULL;
    }
    HeldObject *self = PyObject_GC_New(HeldObject, &HeldType);
    if (self == NULL)
        return NULL;
    self->outbox = Py_NewRef(args[0]);
    self->coro = Py_NewRef(args[1]);
    PyObject_GC_Track((PyObject *)self);
    return (PyObject *)self;
}
