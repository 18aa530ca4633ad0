/* The cartridge session's per-frame path for a request's body frames, compiled (see
 * runtime/_frames/_session.py, which owns the rules, and _cartridge_conn.py, whose _on_flow
 * this takes the common case of).
 *
 * deliver_flow(conn, requests, outbox, ready_table, active, fallback, deliver, frame) does for
 * a STREAM_START, CHUNK, STREAM_END or END of an open, running request what
 * Session._dispatch does: the connection's receiver takes the frame (receive_fast, the
 * receiver's own fast path), and its one event goes to the request's input: a value or the
 * end of a stream into the stream's mailbox, the end of the body to the package. It decides
 * nothing itself: any frame it does not take whole before changing anything goes to
 * fallback(frame) (the Python dispatch), and an event other than those three, or one the
 * Python delivery must look at (a value kept for pass-through, a stream that is gone), to
 * deliver(a, frame, events) (the Python delivery).
 */
#include "_frames.h"

typedef struct {
    int configured;
    PyObject *ft[4]; /* STREAM_START, CHUNK, STREAM_END, END */
    PyObject *ev_data, *ev_closed, *ev_ended;
    PyObject *data_tag;  /* _input._DATA */
    PyObject *end_entry; /* the mailbox entry of a stream's end */
    PyObject *one;
    Py_ssize_t pass_through_min;
    PyObject *s_frame_type, *s_id, *s_input_error, *s_output, *s_receiver, *s_outgoing,
        *s_table, *s_inputs, *s_stream_id, *s_value, *s_box, *s_q, *s_event, *s_append,
        *s_put, *s_feed, *s_end;
} DeliverTables;

static DeliverTables dt;

/* Queue entry into a stream feed's mailbox (_input._Mailbox.put). */
static int
put(PyObject *feed, PyObject *entry)
{
    PyObject *box = PyObject_GetAttr(feed, dt.s_box);
    if (box == NULL)
        return -1;
    PyObject *ev = PyObject_GetAttr(box, dt.s_event), *r = NULL;
    if (ev == NULL) {
        Py_DECREF(box);
        return -1;
    }
    if (ev == Py_None) {
        PyObject *q = PyObject_GetAttr(box, dt.s_q);
        if (q != NULL) {
            r = PyObject_CallMethodOneArg(q, dt.s_append, entry);
            Py_DECREF(q);
        }
    }
    else { /* someone waits: the mailbox wakes them */
        r = PyObject_CallMethodOneArg(box, dt.s_put, entry);
    }
    Py_DECREF(ev);
    Py_DECREF(box);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

/* The event's stream feed in a's inputs (borrowed), NULL without an error when it is gone. */
static PyObject *
feed_of(PyObject *inputs, PyObject *ev)
{
    PyObject *sid = PyObject_GetAttr(ev, dt.s_stream_id);
    if (sid == NULL)
        return NULL;
    PyObject *s = PyDict_GetItemWithError(inputs, sid);
    Py_DECREF(sid);
    return s;
}

/* Deliver the one event of a fast-path frame to request a: 1 done, 0 for the Python delivery
 * (nothing changed), -1 on error. */
static int
deliver_one(PyObject *a, PyObject *ev)
{
    PyTypeObject *t = Py_TYPE(ev);
    if (t == (PyTypeObject *)dt.ev_ended) {
        PyObject *feed = PyObject_GetAttr(a, dt.s_feed);
        if (feed == NULL)
            return -1;
        PyObject *r = PyObject_CallMethodNoArgs(feed, dt.s_end);
        Py_DECREF(feed);
        if (r == NULL)
            return -1;
        Py_DECREF(r);
        return 1;
    }
    if (t != (PyTypeObject *)dt.ev_data && t != (PyTypeObject *)dt.ev_closed)
        return 0;
    PyObject *inputs = PyObject_GetAttr(a, dt.s_inputs);
    if (inputs == NULL)
        return -1;
    int done = 0;
    if (!PyDict_CheckExact(inputs))
        goto out;
    PyObject *s = feed_of(inputs, ev);
    if (s == NULL) {
        done = PyErr_Occurred() ? -1 : 0;
        goto out;
    }
    Py_INCREF(s);
    if (t == (PyTypeObject *)dt.ev_closed) {
        done = put(s, dt.end_entry) < 0 ? -1 : 1;
    }
    else {
        PyObject *value = PyObject_GetAttr(ev, dt.s_value);
        if (value == NULL)
            done = -1;
        else if (PyBytes_CheckExact(value) && PyBytes_GET_SIZE(value) >= dt.pass_through_min)
            done = 0; /* perhaps kept with its wire form: the Python delivery decides */
        else {
            PyObject *entry = PyTuple_Pack(4, dt.data_tag, value, Py_None, dt.one);
            done = entry == NULL ? -1 : (put(s, entry) < 0 ? -1 : 1);
            Py_XDECREF(entry);
        }
        Py_XDECREF(value);
    }
    Py_DECREF(s);
out:
    Py_DECREF(inputs);
    return done;
}

PyObject *
deliver_flow(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "deliver_flow(conn, requests, outbox, ready_table, "
                                         "active, fallback, deliver, frame)");
        return NULL;
    }
    PyObject *conn = args[0], *requests = args[1], *outbox = args[2], *ready = args[3];
    PyObject *active = args[4], *fallback = args[5], *deliver = args[6], *frame = args[7];
    if (!dt.configured || !PyDict_CheckExact(requests) || !PyDict_CheckExact(active) ||
        !PyList_CheckExact(outbox) || PyList_GET_SIZE(outbox) != 0)
        return PyObject_CallOneArg(fallback, frame);
    PyObject *ft = PyObject_GetAttr(frame, dt.s_frame_type);
    if (ft == NULL)
        return NULL;
    int flow = ft == dt.ft[0] || ft == dt.ft[1] || ft == dt.ft[2] || ft == dt.ft[3];
    Py_DECREF(ft);
    if (!flow)
        return PyObject_CallOneArg(fallback, frame);
    PyObject *table = PyObject_GetAttr(conn, dt.s_table);
    if (table == NULL)
        return NULL;
    int serving = table == ready;
    Py_DECREF(table);
    if (!serving)
        return PyObject_CallOneArg(fallback, frame);
    PyObject *fid = PyObject_GetAttr(frame, dt.s_id);
    if (fid == NULL)
        return NULL;
    PyObject *request = PyDict_GetItemWithError(requests, fid);
    PyObject *a = request == NULL ? NULL : PyDict_GetItemWithError(active, fid);
    Py_DECREF(fid);
    if (a == NULL) {
        if (PyErr_Occurred())
            return NULL;
        return PyObject_CallOneArg(fallback, frame);
    }
    Py_INCREF(request);
    Py_INCREF(a);
    PyObject *result = NULL, *receiver = NULL, *v = NULL, *events = NULL;
    /* serve_flow_fast's conditions: no input error, no output name, no credit to send */
    if ((v = PyObject_GetAttr(request, dt.s_input_error)) == NULL)
        goto done;
    int plain = v == Py_None;
    Py_CLEAR(v);
    if (plain) {
        if ((v = PyObject_GetAttr(frame, dt.s_output)) == NULL)
            goto done;
        plain = v == Py_None;
        Py_CLEAR(v);
    }
    if (plain) {
        if ((receiver = PyObject_GetAttr(request, dt.s_receiver)) == NULL ||
            (v = PyObject_GetAttr(receiver, dt.s_outgoing)) == NULL)
            goto done;
        plain = PyList_CheckExact(v) && PyList_GET_SIZE(v) == 0;
        Py_CLEAR(v);
    }
    if (plain) {
        PyObject *call[2] = {receiver, frame};
        if ((events = receive_fast(module, call, 2)) == NULL)
            goto done;
        plain = events != Py_None;
    }
    if (!plain) {
        result = PyObject_CallOneArg(fallback, frame);
        goto done;
    }
    /* The receiver took the frame: from here on it is delivered, never handed back. */
    int delivered = 0;
    if (PyList_CheckExact(events) && PyList_GET_SIZE(events) == 1) {
        delivered = deliver_one(a, PyList_GET_ITEM(events, 0));
        if (delivered < 0)
            goto done;
    }
    if (!delivered) {
        PyObject *call[3] = {a, frame, events};
        PyObject *r = PyObject_Vectorcall(deliver, call, 3, NULL);
        if (r == NULL)
            goto done;
        Py_DECREF(r);
    }
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(v);
    Py_XDECREF(events);
    Py_XDECREF(receiver);
    Py_DECREF(a);
    Py_DECREF(request);
    return result;
}

/* configure_delivery(flow_types, stream_data, stream_closed, body_ended, data_tag, end_entry,
 * pass_through_min): the frame types, event classes and mailbox entries of the session. */
PyObject *
configure_delivery(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7 || !PyTuple_Check(args[0]) || PyTuple_GET_SIZE(args[0]) != 4 ||
        !PyType_Check(args[1]) || !PyType_Check(args[2]) || !PyType_Check(args[3]) ||
        !PyTuple_Check(args[5]) || !PyLong_Check(args[6])) {
        PyErr_SetString(PyExc_TypeError,
                        "configure_delivery(flow_types, stream_data, stream_closed, body_ended, "
                        "data_tag, end_entry, pass_through_min)");
        return NULL;
    }
    Py_ssize_t min = PyLong_AsSsize_t(args[6]);
    if (min == -1 && PyErr_Occurred())
        return NULL;
    if (dt.s_frame_type == NULL) {
#define INTERN(var, text) \
    if ((dt.var = PyUnicode_InternFromString(text)) == NULL) return NULL
        INTERN(s_frame_type, "frame_type");
        INTERN(s_id, "id");
        INTERN(s_input_error, "input_error");
        INTERN(s_output, "output");
        INTERN(s_receiver, "receiver");
        INTERN(s_outgoing, "_outgoing");
        INTERN(s_table, "_table");
        INTERN(s_inputs, "inputs");
        INTERN(s_stream_id, "stream_id");
        INTERN(s_value, "value");
        INTERN(s_box, "_box");
        INTERN(s_q, "_q");
        INTERN(s_event, "_event");
        INTERN(s_append, "append");
        INTERN(s_put, "put");
        INTERN(s_feed, "feed");
        INTERN(s_end, "end");
#undef INTERN
        if ((dt.one = PyLong_FromLong(1)) == NULL)
            return NULL;
    }
    dt.configured = 0;
    for (int i = 0; i < 4; i++)
        Py_XSETREF(dt.ft[i], Py_NewRef(PyTuple_GET_ITEM(args[0], i)));
    Py_XSETREF(dt.ev_data, Py_NewRef(args[1]));
    Py_XSETREF(dt.ev_closed, Py_NewRef(args[2]));
    Py_XSETREF(dt.ev_ended, Py_NewRef(args[3]));
    Py_XSETREF(dt.data_tag, Py_NewRef(args[4]));
    Py_XSETREF(dt.end_entry, Py_NewRef(args[5]));
    dt.pass_through_min = min;
    dt.configured = 1;
    Py_RETURN_NONE;
}
