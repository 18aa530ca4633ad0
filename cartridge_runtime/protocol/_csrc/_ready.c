/* ready(value): a value already there, as an awaitable with no coroutine (the response
 * iterator's queued events).
 */
#include "_frames.h"
#include "_response.h"

/* A value already there, as an awaitable: awaiting it gives the value at once, with no
 * coroutine (ready(value); the response iterator's queued events). */
typedef struct {
    PyObject_HEAD
    PyObject *value;
} Ready;

static void
ready_dealloc(PyObject *self)
{
    Py_XDECREF(((Ready *)self)->value);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *
ready_await(PyObject *self)
{
    return Py_NewRef(self);
}

/* The value, once: later sends give None. */
static PyObject *
ready_take(PyObject *self)
{
    Ready *r = (Ready *)self;
    PyObject *v = r->value;
    r->value = NULL;
    return v != NULL ? v : Py_NewRef(Py_None);
}

static PySendResult
ready_send(PyObject *self, PyObject *arg, PyObject **result)
{
    *result = ready_take(self);
    return PYGEN_RETURN;
}

static PyObject *
ready_next(PyObject *self)
{
    PyObject *v = ready_take(self);
    PyObject *stop = PyObject_CallOneArg(PyExc_StopIteration, v);
    Py_DECREF(v);
    if (stop != NULL) {
        PyErr_SetObject(PyExc_StopIteration, stop);
        Py_DECREF(stop);
    }
    return NULL;
}

static PyAsyncMethods ready_async = {
    .am_await = ready_await,
    .am_send = ready_send,
};

static PyTypeObject ReadyType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cartridge_runtime.protocol._speedups.Ready",
    .tp_basicsize = sizeof(Ready),
    .tp_dealloc = ready_dealloc,
    .tp_as_async = &ready_async,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A value already there, as an awaitable that gives it at once.",
    .tp_iter = ready_await,
    .tp_iternext = ready_next,
};

/* ready(value) -> an awaitable that gives value at once. */
PyObject *
ready_value(PyObject *module, PyObject *value)
{
    Ready *r = PyObject_New(Ready, &ReadyType);
    if (r == NULL)
        return NULL;
    r->value = Py_NewRef(value);
    return (PyObject *)r;
}

int
ready_init(void)
{
    return PyType_Ready(&ReadyType);
}
