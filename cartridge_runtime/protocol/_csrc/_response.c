/* Compiled fast path of the host's response path (see _call_path.py, which names the
 * rules, and HostConnection.receive_frame with the engine's CallState.on_frame, which own
 * them).
 *
 * route_response(core, fallback, frame) routes one frame the cartridge wrote. It takes the
 * common valid case of the four frames a small response is made of (STREAM_START, a scalar
 * CHUNK, STREAM_END, END) for a flow of the configured class that is plain: not ended, not
 * abandoned, unobserved, its routing id copied back, no credit waiting to be sent, no peer
 * call of the cartridge under the same request id. It runs the frame through receive_fast
 * (the receiver's own compiled path), turns the event into the flow's output event, queues
 * it and wakes the caller, as the Python code does. Everything else, every mistake
 * included, goes to fallback(frame) before anything has changed, and Python decides.
 *
 * Output events are made as the receiver's are: tp_alloc plus one generic setattr per field,
 * the field names checked against the classes at configure time.
 */
#include <string.h>

#include "_frames.h"

typedef struct {
    int configured;
    PyObject *ft_start, *ft_chunk, *ft_stream_end, *ft_end;
    PyObject *flow_class;
    PyObject *in_opened, *in_data, *in_closed, *in_ended; /* the receiver's events */
    PyObject *out_started, *out_data, *out_ended;         /* the flow's events */
    PyObject *s_routing, *s_calls, *s_origins, *s_frame_type, *s_id, *s_routing_id, *s_xid,
        *s_done, *s_abandoned, *s_observation, *s_receiver, *s_outgoing, *s_frames, *s_queued,
        *s_events, *s_outputs, *s_waiter, *s_end_meta, *s_finish, *s_set, *s_append,
        *s_stream_id, *s_output, *s_media_urn, *s_is_sequence, *s_unbounded, *s_meta,
        *s_value, *s_wire, *s_chunk_count;
} ResponseTables;

static ResponseTables rp;

static PyObject *
make(PyObject *cls, int n, PyObject **names, PyObject **values)
{
    PyTypeObject *t = (PyTypeObject *)cls;
    PyObject *ev = t->tp_alloc(t, 0);
    if (ev == NULL)
        return NULL;
    for (int i = 0; i < n; i++) {
        if (PyObject_GenericSetAttr(ev, names[i], values[i]) < 0) {
            Py_DECREF(ev);
            return NULL;
        }
    }
    return ev;
}

/* Whether attribute name of o is (identically) want; -1 with an exception. */
static int
attr_is(PyObject *o, PyObject *name, PyObject *want)
{
    PyObject *v = PyObject_GetAttr(o, name);
    if (v == NULL)
        return -1;
    Py_DECREF(v); /* compared by identity only */
    return v == want;
}

/* The output name a stream was opened with (borrowed; None when unknown). */
static PyObject *
output_of(PyObject *outputs, PyObject *sid)
{
    PyObject *entry = PyDict_GetItemWithError(outputs, sid);
    if (entry == NULL || !PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) < 1)
        return Py_None;
    return PyTuple_GET_ITEM(entry, 0);
}

static int
queue(PyObject *events, PyObject *ev, PyObject *cost)
{
    if (ev == NULL)
        return -1;
    PyObject *pair = PyTuple_Pack(2, ev, cost);
    Py_DECREF(ev);
    if (pair == NULL)
        return -1;
    PyObject *r = PyObject_CallMethodOneArg(events, rp.s_append, pair);
    Py_DECREF(pair);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

/* One receiver event turned into the flow's output event and queued (or, for END, the call
 * finished). 0, or -1 with an exception. */
static int
deliver(PyObject *flow, PyObject *ev, PyObject *cost, PyObject *events, PyObject *outputs)
{
    PyTypeObject *t = Py_TYPE(ev);
    PyObject *a[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
    int rc = -1;
    if ((PyObject *)t == rp.in_data) {
        if ((a[0] = PyObject_GetAttr(ev, rp.s_stream_id)) == NULL ||
            (a[1] = PyObject_GetAttr(ev, rp.s_value)) == NULL ||
            (a[2] = PyObject_GetAttr(ev, rp.s_wire)) == NULL)
            goto done;
        PyObject *names[] = {rp.s_output, rp.s_stream_id, rp.s_value, rp.s_wire};
        PyObject *values[] = {output_of(outputs, a[0]), a[0], a[1], a[2]};
        rc = queue(events, make(rp.out_data, 4, names, values), cost);
    }
    else if ((PyObject *)t == rp.in_opened) {
        if ((a[0] = PyObject_GetAttr(ev, rp.s_stream_id)) == NULL ||
            (a[1] = PyObject_GetAttr(ev, rp.s_output)) == NULL ||
            (a[2] = PyObject_GetAttr(ev, rp.s_media_urn)) == NULL ||
            (a[3] = PyObject_GetAttr(ev, rp.s_is_sequence)) == NULL ||
            (a[4] = PyObject_GetAttr(ev, rp.s_unbounded)) == NULL ||
            (a[5] = PyObject_GetAttr(ev, rp.s_meta)) == NULL)
            goto done;
        PyObject *entry = PyTuple_Pack(3, a[1], a[2], a[3]);
        if (entry == NULL)
            goto done;
        int set = PyDict_SetItem(outputs, a[0], entry);
        Py_DECREF(entry);
        if (set < 0)
            goto done;
        PyObject *names[] = {rp.s_output, rp.s_stream_id, rp.s_media_urn, rp.s_is_sequence,
                             rp.s_unbounded, rp.s_meta};
        PyObject *values[] = {a[1], a[0], a[2], a[3], a[4], a[5]};
        rc = queue(events, make(rp.out_started, 6, names, values), Py_None);
    }
    else if ((PyObject *)t == rp.in_closed) {
        if ((a[0] = PyObject_GetAttr(ev, rp.s_stream_id)) == NULL ||
            (a[1] = PyObject_GetAttr(ev, rp.s_chunk_count)) == NULL)
            goto done;
        PyObject *names[] = {rp.s_output, rp.s_stream_id, rp.s_chunk_count};
        PyObject *values[] = {output_of(outputs, a[0]), a[0], a[1]};
        rc = queue(events, make(rp.out_ended, 3, names, values), Py_None);
    }
    else if ((PyObject *)t == rp.in_ended) {
        if ((a[0] = PyObject_GetAttr(ev, rp.s_meta)) == NULL ||
            PyObject_SetAttr(flow, rp.s_end_meta, a[0]) < 0)
            goto done;
        PyObject *r = PyObject_CallMethodOneArg(flow, rp.s_finish, Py_None);
        if (r == NULL)
            goto done;
        Py_DECREF(r);
        rc = 0;
    }
    else {
        PyErr_SetString(PyExc_TypeError, "route_response: an event it does not know");
    }
done:
    for (int i = 0; i < 6; i++)
        Py_XDECREF(a[i]);
    return rc;
}

/* The flow's part: 1 handled, 0 not taken (nothing changed), -1 an exception. */
static int
flow_frame(PyObject *flow, PyObject *frame, PyObject *ft)
{
    int plain;
    if ((plain = attr_is(flow, rp.s_done, Py_False)) != 1 ||
        (plain = attr_is(flow, rp.s_abandoned, Py_False)) != 1 ||
        (plain = attr_is(flow, rp.s_observation, Py_None)) != 1)
        return plain;
    PyObject *xid = PyObject_GetAttr(flow, rp.s_xid);
    if (xid == NULL)
        return -1;
    plain = attr_is(frame, rp.s_routing_id, xid); /* ids the host shares: the same object */
    Py_DECREF(xid);
    if (plain != 1)
        return plain;
    PyObject *receiver = PyObject_GetAttr(flow, rp.s_receiver);
    if (receiver == NULL)
        return -1;
    PyObject *outgoing = NULL, *events = NULL, *queue_ = NULL, *outputs = NULL, *count = NULL;
    int rc = -1;
    if ((outgoing = PyObject_GetAttr(receiver, rp.s_outgoing)) == NULL ||
        (queue_ = PyObject_GetAttr(flow, rp.s_events)) == NULL ||
        (outputs = PyObject_GetAttr(flow, rp.s_outputs)) == NULL ||
        (count = PyObject_GetAttr(flow, rp.s_frames)) == NULL)
        goto done;
    if (!PyList_CheckExact(outgoing) || PyList_GET_SIZE(outgoing) != 0 ||
        !PyDict_CheckExact(outputs) || !PyLong_CheckExact(count)) {
        rc = 0;
        goto done;
    }
    PyObject *call[2] = {receiver, frame};
    events = receive_fast(NULL, call, 2);
    if (events == NULL)
        goto done;
    if (events == Py_None || !PyList_CheckExact(events)) {
        rc = 0;
        goto done;
    }
    /* Taken: from here on the frame is this flow's, as in CallState.on_frame. */
    Py_ssize_t seen = PyLong_AsSsize_t(count);
    if (seen == -1 && PyErr_Occurred())
        goto done;
    PyObject *more = PyLong_FromSsize_t(seen + 1);
    if (more == NULL)
        goto done;
    int set = PyObject_SetAttr(flow, rp.s_frames, more);
    Py_DECREF(more);
    if (set < 0 || PyObject_SetAttr(flow, rp.s_queued, Py_None) < 0)
        goto done;
    PyObject *cost = Py_None;
    PyObject *sid = NULL;
    if (ft == rp.ft_chunk) {
        if ((sid = PyObject_GetAttr(frame, rp.s_stream_id)) == NULL)
            goto done;
        cost = sid;
    }
    Py_ssize_t n = PyList_GET_SIZE(events);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (deliver(flow, PyList_GET_ITEM(events, i), cost, queue_, outputs) < 0) {
            Py_XDECREF(sid);
            goto done;
        }
    }
    Py_XDECREF(sid);
    if (n > 0) {
        PyObject *waiter = PyObject_GetAttr(flow, rp.s_waiter);
        if (waiter == NULL)
            goto done;
        if (waiter != Py_None) {
            PyObject *r = PyObject_CallMethodNoArgs(waiter, rp.s_set);
            if (r == NULL || PyObject_SetAttr(flow, rp.s_waiter, Py_None) < 0) {
                Py_XDECREF(r);
                Py_DECREF(waiter);
                goto done;
            }
            Py_DECREF(r);
        }
        Py_DECREF(waiter);
    }
    rc = 1;
done:
    Py_XDECREF(events);
    Py_XDECREF(outgoing);
    Py_XDECREF(queue_);
    Py_XDECREF(outputs);
    Py_XDECREF(count);
    Py_DECREF(receiver);
    return rc;
}

/* route_response(core, fallback, frame) -> None: see the top of the file. */
PyObject *
route_response(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "route_response(core, fallback, frame)");
        return NULL;
    }
    PyObject *core = args[0], *fallback = args[1], *frame = args[2];
    if (!rp.configured)
        return PyObject_CallOneArg(fallback, frame);
    PyObject *ft = PyObject_GetAttr(frame, rp.s_frame_type);
    if (ft == NULL)
        return NULL;
    Py_DECREF(ft); /* compared by identity; the enum member outlives this call */
    if (ft != rp.ft_chunk && ft != rp.ft_start && ft != rp.ft_stream_end && ft != rp.ft_end)
        return PyObject_CallOneArg(fallback, frame);
    int taken = attr_is(core, rp.s_routing, Py_True);
    if (taken < 0)
        return NULL;
    if (!taken)
        return PyObject_CallOneArg(fallback, frame);
    PyObject *calls = NULL, *origins = NULL, *fid = NULL, *flow = NULL;
    if ((calls = PyObject_GetAttr(core, rp.s_calls)) == NULL ||
        (origins = PyObject_GetAttr(core, rp.s_origins)) == NULL ||
        (fid = PyObject_GetAttr(frame, rp.s_id)) == NULL)
        goto fail;
    taken = 0;
    if (PyDict_CheckExact(calls) && PyDict_CheckExact(origins)) {
        flow = PyDict_GetItemWithError(calls, fid);
        if (flow == NULL && PyErr_Occurred())
            goto fail;
        if (flow != NULL && (PyObject *)Py_TYPE(flow) == rp.flow_class) {
            int theirs = PyDict_GET_SIZE(origins) ? PyDict_Contains(origins, fid) : 0;
            if (theirs < 0)
                goto fail;
            if (!theirs) {
                Py_INCREF(flow);
                taken = flow_frame(flow, frame, ft);
                Py_DECREF(flow);
                if (taken < 0)
                    goto fail;
            }
        }
    }
    Py_DECREF(calls);
    Py_DECREF(origins);
    Py_DECREF(fid);
    if (!taken)
        return PyObject_CallOneArg(fallback, frame);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(calls);
    Py_XDECREF(origins);
    Py_XDECREF(fid);
    return NULL;
}

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

/* Whether names (a tuple of str) is exactly the space-separated list want. */
static int
fields_are(PyObject *names, const char *want)
{
    if (!PyTuple_Check(names))
        return 0;
    const char *p = want;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); i++) {
        PyObject *name = PyTuple_GET_ITEM(names, i);
        const char *s = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
        if (s == NULL)
            return 0;
        size_t len = strlen(s);
        if (strncmp(p, s, len) != 0 || (p[len] != ' ' && p[len] != '\0'))
            return 0;
        p += len + (p[len] == ' ');
    }
    return *p == '\0';
}

/* configure_response(*, frame_types, flow_class, received, outputs, output_fields). */
PyObject *
configure_response(PyObject *module, PyObject *args, PyObject *kw)
{
    static char *kwnames[] = {"frame_types", "flow_class", "received", "outputs",
                              "output_fields", NULL};
    PyObject *fts, *flow_class, *received, *outputs, *fields;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!OO!O!O!", kwnames, &PyTuple_Type, &fts,
                                     &flow_class, &PyTuple_Type, &received, &PyTuple_Type,
                                     &outputs, &PyTuple_Type, &fields))
        return NULL;
    rp.configured = 0;
    if (PyTuple_GET_SIZE(fts) != 4 || PyTuple_GET_SIZE(received) != 4 ||
        PyTuple_GET_SIZE(outputs) != 3 || PyTuple_GET_SIZE(fields) != 3) {
        PyErr_SetString(PyExc_ValueError, "configure_response: tables of the wrong size");
        return NULL;
    }
    static const char *want[] = {"output stream_id media_urn is_sequence unbounded meta",
                                 "output stream_id value wire",
                                 "output stream_id chunk_count"};
    for (int i = 0; i < 3; i++) {
        PyObject *cls = PyTuple_GET_ITEM(outputs, i);
        if (!PyType_Check(cls) || ((PyTypeObject *)cls)->tp_dictoffset != 0 ||
            !fields_are(PyTuple_GET_ITEM(fields, i), want[i])) {
            PyErr_Format(PyExc_ValueError,
                         "configure_response: output %d is not a slotted class with fields %s",
                         i, want[i]);
            return NULL;
        }
    }
    for (int i = 0; i < 4; i++) {
        if (!PyType_Check(PyTuple_GET_ITEM(received, i))) {
            PyErr_SetString(PyExc_TypeError, "configure_response: events must be classes");
            return NULL;
        }
    }
    if (!PyType_Check(flow_class)) {
        PyErr_SetString(PyExc_TypeError, "configure_response: flow_class must be a class");
        return NULL;
    }
#define KEEP(var, val) do { Py_INCREF(val); Py_XSETREF(var, val); } while (0)
#define AT(t, i) PyTuple_GET_ITEM(t, i)
    KEEP(rp.ft_start, AT(fts, 0));
    KEEP(rp.ft_chunk, AT(fts, 1));
    KEEP(rp.ft_stream_end, AT(fts, 2));
    KEEP(rp.ft_end, AT(fts, 3));
    KEEP(rp.flow_class, flow_class);
    KEEP(rp.in_opened, AT(received, 0));
    KEEP(rp.in_data, AT(received, 1));
    KEEP(rp.in_closed, AT(received, 2));
    KEEP(rp.in_ended, AT(received, 3));
    KEEP(rp.out_started, AT(outputs, 0));
    KEEP(rp.out_data, AT(outputs, 1));
    KEEP(rp.out_ended, AT(outputs, 2));
#undef AT
#undef KEEP
    rp.configured = 1;
    Py_RETURN_NONE;
}

/* Interns the attribute names (from the module's init). */
int
response_init(void)
{
    if (PyType_Ready(&ReadyType) < 0)
        return -1;
#define INTERN(var, text) if ((rp.var = PyUnicode_InternFromString(text)) == NULL) return -1
    INTERN(s_routing, "_routing");
    INTERN(s_calls, "calls");
    INTERN(s_origins, "origins");
    INTERN(s_frame_type, "frame_type");
    INTERN(s_id, "id");
    INTERN(s_routing_id, "routing_id");
    INTERN(s_xid, "xid");
    INTERN(s_done, "done");
    INTERN(s_abandoned, "abandoned");
    INTERN(s_observation, "observation");
    INTERN(s_receiver, "receiver");
    INTERN(s_outgoing, "_outgoing");
    INTERN(s_frames, "frames");
    INTERN(s_queued, "_queued");
    INTERN(s_events, "events");
    INTERN(s_outputs, "_outputs");
    INTERN(s_waiter, "_waiter");
    INTERN(s_end_meta, "end_meta");
    INTERN(s_finish, "_finish");
    INTERN(s_set, "set");
    INTERN(s_append, "append");
    INTERN(s_stream_id, "stream_id");
    INTERN(s_output, "output");
    INTERN(s_media_urn, "media_urn");
    INTERN(s_is_sequence, "is_sequence");
    INTERN(s_unbounded, "unbounded");
    INTERN(s_meta, "meta");
    INTERN(s_value, "value");
    INTERN(s_wire, "wire");
    INTERN(s_chunk_count, "chunk_count");
#undef INTERN
    return 0;
}
