/* Compiled fast path of the host's response path (see _call_path.py, which names the
 * rules, and HostConnection.receive_frame with the engine's CallState.on_frame, which own
 * them).
 *
 * route_response(core, fallback, frame) routes one frame the cartridge wrote. It takes the
 * common valid case of the four frames a small response is made of (STREAM_START of a scalar
 * stream, a scalar CHUNK, STREAM_END, END) for a flow of the configured class that is plain:
 * not ended, not abandoned, unobserved, its routing id copied back, no credit waiting to be
 * sent, no peer call of the cartridge under the same request id. It applies the receiver's
 * transitions to the call's BodyReceiver (as receive_fast does), makes the call's output
 * event straight from the frame (no receiver event in between), queues it and wakes the
 * caller, as the Python code does. Everything else, every mistake included, goes to
 * fallback(frame) before anything has changed, and Python decides.
 *
 * The call's parts are read where they are: the flow's, the streams' and the output events'
 * fields in their slots (offsets found at configure time from the classes' member
 * descriptors), the frame's and the receiver's in their instance dicts (configure checks no
 * descriptor of the class stands in front of them).
 */
#include <string.h>

#include "_response.h"

ResponseTables rp;

/* Store v (a new reference taken here) in a slot, dropping what it held. */
static void
slot_set(PyObject *o, Py_ssize_t off, PyObject *v)
{
    PyObject *old = SLOT(o, off);
    SLOT(o, off) = Py_NewRef(v);
    Py_XDECREF(old);
}

/* A frame's or a receiver's field, borrowed from its dict; Py_None when absent (the class
 * default of every optional frame field). */
static inline PyObject *
field(PyObject *d, PyObject *name)
{
    PyObject *v = PyDict_GetItemWithError(d, name);
    return v != NULL ? v : Py_None;
}

/* A new instance of a slotted class with its slots offs[i] set to values[i]. */
static PyObject *
make(PyObject *cls, int n, const Py_ssize_t *offs, PyObject **values)
{
    PyTypeObject *t = (PyTypeObject *)cls;
    PyObject *ev = t->tp_alloc(t, 0);
    if (ev == NULL)
        return NULL;
    for (int i = 0; i < n; i++)
        SLOT(ev, offs[i]) = Py_NewRef(values[i]);
    return ev;
}

/* An exact int slot or field as a C value; -1 when absent, not an exact int, or negative. */
static Py_ssize_t
small_int(PyObject *v)
{
    if (v == NULL || !PyLong_CheckExact(v))
        return -1;
    Py_ssize_t n = PyLong_AsSsize_t(v);
    if (n == -1 && PyErr_Occurred())
        PyErr_Clear();
    return n;
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

/* What one taken frame left for its output event (borrowed, except value and wire). */
typedef struct {
    PyObject *sid, *media, *output, *meta, *seq, *unbounded, *count, *value, *wire;
} Step;

/* The open scalar stream a CHUNK or STREAM_END names (borrowed), or NULL: Python decides. */
static PyObject *
open_stream(PyObject *streams, const Fields *fr, PyObject **sid_out)
{
    PyObject *sid = fr->stream_id;
    if (!PyUnicode_CheckExact(sid) || PyUnicode_GET_LENGTH(sid) == 0)
        return NULL;
    PyObject *stream = PyDict_GetItemWithError(streams, sid);
    if (stream == NULL || Py_TYPE(stream) != (PyTypeObject *)rp.stream_class ||
        SLOT(stream, rp.stream[S_STATE]) != rp.ss_open ||
        SLOT(stream, rp.stream[S_ASSEMBLER]) != Py_None) {
        PyErr_Clear();
        return NULL;
    }
    *sid_out = sid;
    return stream;
}

/* STREAM_START of a scalar stream not seen before: 1 taken, 0 not (nothing changed), -1. */
static int
take_start(PyObject *rd, PyObject *streams, const Fields *fr, Step *st)
{
    PyObject *sid = fr->stream_id;
    if (!PyUnicode_CheckExact(sid) || PyUnicode_GET_LENGTH(sid) == 0)
        return 0;
    int known = PyDict_Contains(streams, sid);
    if (known != 0) /* a restart (Python names it), or an error */
        return known < 0 ? -1 : 0;
    PyObject *credit = field(rd, rp.s_credit), *media = fr->media_urn;
    int seq = PyObject_IsTrue(fr->is_sequence);
    int unb = PyObject_IsTrue(fr->unbounded);
    int media_ok = PyObject_IsTrue(media);
    if (seq < 0 || unb < 0 || media_ok < 0)
        return -1;
    if (seq)
        return 0; /* a sequence stream: Python assembles its items */
    PyObject *unb_b = unb ? Py_True : Py_False;
    PyObject *values[S_COUNT];
    values[S_ASSEMBLER] = Py_None;
    values[S_CHUNKS] = rp.zero;
    values[S_IS_SEQUENCE] = Py_False;
    values[S_ITEM_META] = Py_None;
    values[S_PENDING] = rp.zero;
    values[S_STATE] = rp.ss_open;
    values[S_STREAM_ID] = sid;
    values[S_UNBOUNDED] = unb_b;
    values[S_WINDOW] = credit;
    PyObject *stream = make(rp.stream_class, S_COUNT, rp.stream, values);
    if (stream == NULL)
        return -1;
    int rc = PyDict_SetItem(streams, sid, stream);
    Py_DECREF(stream);
    if (rc < 0)
        return -1;
    st->sid = sid;
    st->media = media_ok ? media : rp.empty_str;
    st->output = fr->output;
    st->meta = fr->meta;
    st->seq = Py_False;
    st->unbounded = unb_b;
    return 1;
}

/* A scalar CHUNK in order, in the window, its checksum right. */
static int
take_chunk(PyObject *rd, PyObject *streams, const Fields *fr, Step *st)
{
    PyObject *sid = NULL;
    PyObject *stream = open_stream(streams, fr, &sid);
    if (stream == NULL)
        return 0;
    Py_ssize_t chunks = small_int(SLOT(stream, rp.stream[S_CHUNKS]));
    Py_ssize_t window = small_int(SLOT(stream, rp.stream[S_WINDOW]));
    if (chunks < 0 || window <= 0 || small_int(fr->chunk_index) != chunks)
        return 0;
    PyObject *payload = fr->payload;
    if (!PyBytes_CheckExact(payload) || PyBytes_GET_SIZE(payload) == 0)
        return 0;
    int verify = PyObject_IsTrue(field(rd, rp.s_verify));
    if (verify < 0)
        return -1;
    PyObject *held = fr->checksum;
    if (verify) {
        if (!PyLong_CheckExact(held))
            return 0;
        unsigned long long want = PyLong_AsUnsignedLongLong(held);
        if (want == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        if (want != fnv1a64((const unsigned char *)PyBytes_AS_STRING(payload),
                            PyBytes_GET_SIZE(payload)))
            return 0;
    }
    PyObject *value = scalar_value(payload);
    if (value == NULL || value == CBOR_GIVE_UP)
        return 0;
    PyObject *wire;
    if (verify && held != Py_None)
        wire = Py_BuildValue("(On)", held, PyBytes_GET_SIZE(payload));
    else
        wire = Py_NewRef(Py_None);
    PyObject *w = PyLong_FromSsize_t(window - 1), *c = PyLong_FromSsize_t(chunks + 1);
    if (wire == NULL || w == NULL || c == NULL) {
        Py_DECREF(value);
        Py_XDECREF(wire);
        Py_XDECREF(w);
        Py_XDECREF(c);
        return -1;
    }
    slot_set(stream, rp.stream[S_WINDOW], w);
    slot_set(stream, rp.stream[S_CHUNKS], c);
    Py_DECREF(w);
    Py_DECREF(c);
    st->sid = sid;
    st->value = value;
    st->wire = wire;
    return 1;
}

/* STREAM_END with the stream's own chunk count. */
static int
take_stream_end(PyObject *streams, const Fields *fr, Step *st)
{
    PyObject *sid = NULL;
    PyObject *stream = open_stream(streams, fr, &sid);
    if (stream == NULL)
        return 0;
    Py_ssize_t chunks = small_int(SLOT(stream, rp.stream[S_CHUNKS]));
    PyObject *count = fr->chunk_count;
    if (chunks < 0 || small_int(count) != chunks)
        return 0;
    slot_set(stream, rp.stream[S_STATE], rp.ss_closed);
    st->sid = sid;
    st->count = count;
    return 1;
}

/* END with every stream closed. */
static int
take_end(PyObject *receiver, PyObject *streams, const Fields *fr, Step *st)
{
    Py_ssize_t pos = 0;
    PyObject *key, *stream;
    while (PyDict_Next(streams, &pos, &key, &stream)) {
        if (Py_TYPE(stream) != (PyTypeObject *)rp.stream_class ||
            SLOT(stream, rp.stream[S_STATE]) != rp.ss_closed)
            return 0; /* END while a stream is open: Python names them */
    }
    if (PyObject_SetAttr(receiver, rp.s_state, rp.rs_done) < 0)
        return -1;
    st->meta = fr->meta;
    return 1;
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
    PyObject *call[2] = {events, pair};
    PyObject *r = PyObject_Vectorcall(rp.deque_append, call, 2, NULL);
    Py_DECREF(pair);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

/* The flow's part: 1 handled, 0 not taken (nothing changed), -1 an exception. */
static int
flow_frame(PyObject *flow, const Fields *fr, PyObject *ft, PyObject *fid)
{
    PyObject *f[F_COUNT];
    for (int i = 0; i < F_COUNT; i++)
        if ((f[i] = SLOT(flow, rp.flow[i])) == NULL)
            return 0; /* a slot not set: Python raises its AttributeError */
    if (f[F_DONE] != Py_False || f[F_ABANDONED] != Py_False || f[F_OBSERVATION] != Py_None ||
        fr->routing_id != f[F_XID] /* ids the host shares: the same object */ ||
        Py_TYPE(f[F_RECEIVER]) != (PyTypeObject *)rp.receiver_class ||
        Py_TYPE(f[F_EVENTS]) != (PyTypeObject *)rp.deque_class ||
        !PyDict_CheckExact(f[F_OUTPUTS]) || !PyLong_CheckExact(f[F_FRAMES]))
        return 0;
    PyObject *flow_keep[3] = {Py_NewRef(f[F_RECEIVER]), Py_NewRef(f[F_EVENTS]),
                              Py_NewRef(f[F_OUTPUTS])};
    PyObject *receiver = flow_keep[0], *events = flow_keep[1], *outputs = flow_keep[2];
    PyObject *rd = PyObject_GenericGetDict(receiver, NULL);
    Step st = {NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    int rc = -1;
    if (rd == NULL || !PyDict_CheckExact(rd))
        goto done;
    PyObject *outgoing = field(rd, rp.s_outgoing), *streams = field(rd, rp.s_streams);
    rc = 0;
    if (!PyList_CheckExact(outgoing) || PyList_GET_SIZE(outgoing) != 0 ||
        field(rd, rp.s_rid) != fid || field(rd, rp.s_state) != rp.rs_open ||
        !PyDict_CheckExact(streams))
        goto done;
    if (ft == rp.ft_chunk)
        rc = take_chunk(rd, streams, fr, &st);
    else if (ft == rp.ft_start)
        rc = take_start(rd, streams, fr, &st);
    else if (ft == rp.ft_stream_end)
        rc = take_stream_end(streams, fr, &st);
    else
        rc = take_end(receiver, streams, fr, &st);
    if (rc != 1)
        goto done;
    /* Taken: from here on the frame is this flow's, as in CallState.on_frame. */
    rc = -1;
    PyObject *more = PyLong_FromSsize_t(small_int(f[F_FRAMES]) + 1);
    if (more == NULL)
        goto done;
    slot_set(flow, rp.flow[F_FRAMES], more);
    Py_DECREF(more);
    slot_set(flow, rp.flow[F_QUEUED], Py_None);
    if (ft == rp.ft_chunk) {
        PyObject *values[] = {output_of(outputs, st.sid), st.sid, st.value, st.wire};
        if (queue(events, make(rp.out_data, 4, rp.data, values), st.sid) < 0)
            goto done;
    }
    else if (ft == rp.ft_start) {
        PyObject *entry = PyTuple_Pack(3, st.output, st.media, st.seq);
        if (entry == NULL)
            goto done;
        int set = PyDict_SetItem(outputs, st.sid, entry);
        Py_DECREF(entry);
        PyObject *values[] = {st.output, st.sid, st.media, st.seq, st.unbounded, st.meta};
        if (set < 0 || queue(events, make(rp.out_started, 6, rp.started, values), Py_None) < 0)
            goto done;
    }
    else if (ft == rp.ft_stream_end) {
        PyObject *values[] = {output_of(outputs, st.sid), st.sid, st.count};
        if (queue(events, make(rp.out_ended, 3, rp.ended, values), Py_None) < 0)
            goto done;
    }
    else {
        slot_set(flow, rp.flow[F_END_META], st.meta);
        PyObject *r = PyObject_CallMethodOneArg(flow, rp.s_finish, Py_None);
        if (r == NULL)
            goto done;
        Py_DECREF(r);
    }
    PyObject *waiter = SLOT(flow, rp.flow[F_WAITER]);
    if (waiter != NULL && waiter != Py_None) {
        Py_INCREF(waiter);
        slot_set(flow, rp.flow[F_WAITER], Py_None);
        PyObject *r = PyObject_CallMethodNoArgs(waiter, rp.s_set);
        Py_DECREF(waiter);
        if (r == NULL)
            goto done;
        Py_DECREF(r);
    }
    rc = 1;
done:
    Py_XDECREF(st.value);
    Py_XDECREF(st.wire);
    Py_XDECREF(rd);
    for (int i = 0; i < 3; i++)
        Py_DECREF(flow_keep[i]);
    return rc;
}

/* The routing of HostConnection.receive_frame for a response frame of one of our calls: 1
 * taken, 0 not (nothing changed), -1 an exception. */
int
response_route(PyObject *core, const Fields *fr)
{
    PyObject *ft = fr->frame_type;
    if (ft != rp.ft_chunk && ft != rp.ft_start && ft != rp.ft_stream_end && ft != rp.ft_end)
        return 0;
    PyObject *on = PyObject_GetAttr(core, rp.s_routing);
    if (on == NULL)
        return -1;
    Py_DECREF(on); /* compared by identity */
    if (on != Py_True)
        return 0;
    PyObject *calls = NULL, *origins = NULL;
    int taken = -1;
    if ((calls = PyObject_GetAttr(core, rp.s_calls)) == NULL ||
        (origins = PyObject_GetAttr(core, rp.s_origins)) == NULL)
        goto done;
    taken = 0;
    if (!PyDict_CheckExact(calls) || !PyDict_CheckExact(origins))
        goto done;
    PyObject *fid = fr->id;
    PyObject *flow = PyDict_GetItemWithError(calls, fid);
    if (flow == NULL) {
        taken = PyErr_Occurred() ? -1 : 0;
        goto done;
    }
    if (Py_TYPE(flow) != (PyTypeObject *)rp.flow_class)
        goto done;
    int theirs = PyDict_GET_SIZE(origins) ? PyDict_Contains(origins, fid) : 0;
    if (theirs != 0) {
        taken = theirs < 0 ? -1 : 0;
        goto done;
    }
    Py_INCREF(flow);
    Py_INCREF(fid);
    taken = flow_frame(flow, fr, ft, fid);
    Py_DECREF(fid);
    Py_DECREF(flow);
done:
    Py_XDECREF(calls);
    Py_XDECREF(origins);
    return taken;
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
    if (!rp.configured || Py_TYPE(frame) != (PyTypeObject *)rp.frame_class)
        return PyObject_CallOneArg(fallback, frame);
    PyObject *fd = PyObject_GenericGetDict(frame, NULL);
    if (fd == NULL)
        return NULL;
    int taken = 0;
    if (PyDict_CheckExact(fd)) {
        Fields fr = {field(fd, rp.s_frame_type), field(fd, rp.s_id), field(fd, rp.s_routing_id),
                     field(fd, rp.s_stream_id), field(fd, rp.s_chunk_index),
                     field(fd, rp.s_checksum), field(fd, rp.s_payload),
                     field(fd, rp.s_chunk_count), field(fd, rp.s_meta),
                     field(fd, rp.s_media_urn), field(fd, rp.s_is_sequence),
                     field(fd, rp.s_unbounded), field(fd, rp.s_output)};
        taken = response_route(core, &fr);
    }
    Py_DECREF(fd);
    if (taken < 0)
        return NULL;
    if (!taken)
        return PyObject_CallOneArg(fallback, frame);
    Py_RETURN_NONE;
}

/* new_receiver(rid, xid, initial_credit) -> BodyReceiver: the receiver of a call's response,
 * as BodyReceiver(rid, xid=xid, initial_credit=initial_credit, expect_req=False) makes it
 * (its instance dict filled in the order __init__ sets it), without running __init__. */
PyObject *
new_receiver(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "new_receiver(rid, xid, initial_credit)");
        return NULL;
    }
    PyObject *credit = args[2];
    if (!rp.configured || !PyLong_CheckExact(credit)) {
        if (rp.receiver_class == NULL) {
            PyErr_SetString(PyExc_RuntimeError, "new_receiver: not configured");
            return NULL;
        }
        PyObject *kw = Py_BuildValue("{sOsOsO}", "xid", args[1], "initial_credit", credit,
                                     "expect_req", Py_False);
        if (kw == NULL)
            return NULL;
        PyObject *pos = PyTuple_Pack(1, args[0]);
        PyObject *r = pos != NULL ? PyObject_Call(rp.receiver_class, pos, kw) : NULL;
        Py_XDECREF(pos);
        Py_DECREF(kw);
        return r;
    }
    Py_ssize_t c = PyLong_AsSsize_t(credit);
    if (c == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t half = c >= 0 ? c / 2 : -((-c + 1) / 2); /* Python's floor division */
    PyObject *batch = PyLong_FromSsize_t(half > 1 ? half : 1);
    PyObject *d = PyDict_New(), *streams = PyDict_New(), *outgoing = PyList_New(0);
    PyObject *r = NULL;
    if (batch == NULL || d == NULL || streams == NULL || outgoing == NULL)
        goto done;
    if (PyDict_SetItem(d, rp.s_rid, args[0]) < 0 || PyDict_SetItem(d, rp.s_xid, args[1]) < 0 ||
        PyDict_SetItem(d, rp.s_state, rp.rs_open) < 0 ||
        PyDict_SetItem(d, rp.s_credit, credit) < 0 || PyDict_SetItem(d, rp.s_batch, batch) < 0 ||
        PyDict_SetItem(d, rp.s_credit_dir, rp.credit_dir) < 0 ||
        PyDict_SetItem(d, rp.s_verify, Py_True) < 0 ||
        PyDict_SetItem(d, rp.s_streams, streams) < 0 ||
        PyDict_SetItem(d, rp.s_outgoing, outgoing) < 0)
        goto done;
    PyTypeObject *t = (PyTypeObject *)rp.receiver_class;
    r = t->tp_alloc(t, 0);
    if (r != NULL && PyObject_GenericSetDict(r, d, NULL) < 0)
        Py_CLEAR(r);
done:
    Py_XDECREF(batch);
    Py_XDECREF(d);
    Py_XDECREF(streams);
    Py_XDECREF(outgoing);
    return r;
}

