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

#include "_frames.h"
#include "structmember.h"

/* The flow's slots the router reads and writes. */
enum { F_DONE, F_ABANDONED, F_OBSERVATION, F_XID, F_RECEIVER, F_FRAMES, F_QUEUED, F_EVENTS,
       F_OUTPUTS, F_WAITER, F_END_META, F_COUNT };
static const char *flow_names[F_COUNT] = {"done", "abandoned", "observation", "xid",
                                          "receiver", "frames", "_queued", "events",
                                          "_outputs", "_waiter", "end_meta"};
/* A receiver stream's slots (every one is set when the router opens a stream). */
enum { S_ASSEMBLER, S_CHUNKS, S_IS_SEQUENCE, S_ITEM_META, S_PENDING, S_STATE, S_STREAM_ID,
       S_UNBOUNDED, S_WINDOW, S_COUNT };
static const char *stream_names[S_COUNT] = {"assembler", "chunks", "is_sequence", "item_meta",
                                            "pending", "state", "stream_id", "unbounded",
                                            "window"};
static const char *started_names[] = {"output", "stream_id", "media_urn", "is_sequence",
                                       "unbounded", "meta"};
static const char *data_names[] = {"output", "stream_id", "value", "wire"};
static const char *ended_names[] = {"output", "stream_id", "chunk_count"};
/* What the router reads from a frame's and a receiver's dict (no descriptor may shadow). */
static const char *frame_fields[] = {"frame_type", "id", "routing_id", "stream_id",
                                     "chunk_index", "checksum", "payload", "chunk_count",
                                     "meta", "media_urn", "is_sequence", "unbounded", "output",
                                     NULL};
static const char *receiver_fields[] = {"rid", "state", "_streams", "_outgoing",
                                        "verify_checksums", "initial_credit", NULL};

typedef struct {
    int configured;
    PyObject *ft_start, *ft_chunk, *ft_stream_end, *ft_end;
    PyObject *frame_class, *flow_class, *receiver_class, *stream_class, *deque_class;
    PyObject *deque_append;
    PyObject *rs_open, *rs_done, *ss_open, *ss_closed, *credit_dir;
    PyObject *out_started, *out_data, *out_ended;
    Py_ssize_t flow[F_COUNT], stream[S_COUNT], started[6], data[4], ended[3];
    PyObject *s_routing, *s_calls, *s_origins, *s_frame_type, *s_id, *s_routing_id, *s_rid,
        *s_state, *s_streams, *s_outgoing, *s_verify, *s_credit, *s_stream_id, *s_chunk_index,
        *s_checksum, *s_payload, *s_chunk_count, *s_meta, *s_media_urn, *s_is_sequence,
        *s_unbounded, *s_output, *s_finish, *s_set, *s_xid, *s_batch, *s_credit_dir;
    PyObject *empty_str, *zero;
} ResponseTables;

static ResponseTables rp;

#define SLOT(o, off) (*(PyObject **)((char *)(o) + (off)))

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

static uint64_t
fnv1a64(const unsigned char *p, Py_ssize_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
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

/* The fields of a frame the router reads (borrowed; Py_None when absent), from a Frame's
 * dict or straight from the wire. */
typedef struct {
    PyObject *frame_type, *id, *routing_id, *stream_id, *chunk_index, *checksum, *payload,
        *chunk_count, *meta, *media_urn, *is_sequence, *unbounded, *output;
} Fields;

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
static int
route(PyObject *core, const Fields *fr)
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
        taken = route(core, &fr);
    }
    Py_DECREF(fd);
    if (taken < 0)
        return NULL;
    if (!taken)
        return PyObject_CallOneArg(fallback, frame);
    Py_RETURN_NONE;
}

/* Wire keys of the fields a response frame of the four kinds may carry (others: Python). */
enum { W_VERSION, W_TYPE, W_ID, W_SEQ, W_META, W_PAYLOAD, W_EOF, W_SID, W_MEDIA, W_ROUTING,
       W_INDEX, W_COUNT, W_SUM, W_ISSEQ, W_UNB, W_OUTPUT, W_FIELDS };
static const char *wire_names[W_FIELDS] = {"version", "frame_type", "id", "seq", "meta",
                                           "payload", "eof", "stream_id", "media_urn",
                                           "routing_id", "chunk_index", "chunk_count",
                                           "checksum", "is_sequence", "unbounded", "output"};
/* Wire key -> W_* (or -1: a key this path does not take). */
static int wire_slot[MAX_KEY];
static int wire_ready;

/* The wire-key table, from the codec's own names (once, when the codec is configured). */
static int
wire_table(void)
{
    if (wire_ready)
        return 1;
    if (!codec.configured)
        return 0;
    for (int k = 0; k < MAX_KEY; k++)
        wire_slot[k] = -1;
    for (int i = 0; i < W_FIELDS; i++) {
        int found = 0;
        for (int k = 0; k < MAX_KEY; k++) {
            PyObject *name = codec.key_name[k];
            if (name != NULL && PyUnicode_CompareWithASCIIString(name, wire_names[i]) == 0) {
                wire_slot[k] = i;
                found = 1;
            }
        }
        if (!found)
            return 0;
    }
    wire_ready = 1;
    return 1;
}

/* Whether a value read for field w is of the type the codec's reader stores for it (its
 * put_field, stricter where that is simpler: the path then leaves the frame to Python). */
static int
wire_value_ok(int w, PyObject *v)
{
    switch (w) {
    case W_VERSION:
    case W_TYPE:
        return PyLong_CheckExact(v);
    case W_SEQ:
    case W_INDEX:
    case W_COUNT:
        return PyLong_CheckExact(v) && Py_SIZE(v) >= 0;
    case W_SUM:
        if (!PyLong_CheckExact(v))
            return 0;
        if (PyLong_AsUnsignedLongLong(v) == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        return 1;
    case W_SID:
    case W_MEDIA:
    case W_OUTPUT:
        return PyUnicode_CheckExact(v);
    case W_ISSEQ:
    case W_UNB:
    case W_EOF:
        return PyBool_Check(v);
    case W_ID:
    case W_ROUTING:
        return PyBytes_CheckExact(v) || PyLong_CheckExact(v);
    case W_PAYLOAD:
        return PyBytes_CheckExact(v);
    case W_META: {
        if (!PyDict_CheckExact(v))
            return 0;
        Py_ssize_t pos = 0;
        PyObject *k, *x;
        while (PyDict_Next(v, &pos, &k, &x))
            if (!PyUnicode_CheckExact(k))
                return 0;
        return 1;
    }
    default:
        return 0;
    }
}

/* Whether END's meta passes the END check as it is (absent, or exit_code an int, progress a
 * number, message a str, each absent or null): the codec's reader passes the same. */
static int
end_meta_ok(PyObject *meta)
{
    if (meta == Py_None)
        return 1;
    PyObject *v = PyDict_GetItemString(meta, "exit_code");
    if (v != NULL && v != Py_None && !PyLong_CheckExact(v))
        return 0;
    v = PyDict_GetItemString(meta, "progress");
    if (v != NULL && v != Py_None && !PyLong_CheckExact(v) && !PyFloat_CheckExact(v))
        return 0;
    v = PyDict_GetItemString(meta, "message");
    return v == NULL || v == Py_None || PyUnicode_CheckExact(v);
}

/* One frame body read straight into values[] (new references), as the codec's reader would
 * read it, and the frame's fields: 1 read, 0 not this path's (Python reads it). */
static int
wire_read(const unsigned char *p, const unsigned char *end, PyObject **values, Fields *fr)
{
    if (p >= end || (*p >> 5) != 5 || (*p & 31) >= 24)
        return 0;
    int count = *p & 31, last = -1;
    CborReader r = {p + 1, end};
    for (int i = 0; i < count; i++) {
        if (r.p >= r.end || (*r.p >> 5) != 0 || (*r.p & 31) >= 24)
            return 0;
        int key = *r.p & 31;
        r.p++;
        int w = key < MAX_KEY ? wire_slot[key] : -1;
        if (w < 0 || key <= last) /* a key this path does not take, or out of order */
            return 0;
        last = key;
        PyObject *v = cbor_read_item(&r, 1);
        if (v == NULL || v == CBOR_GIVE_UP) {
            PyErr_Clear();
            return 0;
        }
        values[w] = v;
        if (!wire_value_ok(w, v))
            return 0;
        if (w == W_ID || w == W_ROUTING) { /* ids the host shares: in the decoder's cache */
            PyObject *mid = PyDict_GetItemWithError(codec.id_cache, v);
            if (mid == NULL) {
                PyErr_Clear();
                return 0;
            }
            Py_SETREF(values[w], Py_NewRef(mid));
        }
    }
    if (r.p != r.end || values[W_VERSION] == NULL || values[W_TYPE] == NULL ||
        values[W_ID] == NULL || values[W_SEQ] == NULL)
        return 0;
    PyObject *ft = PyDict_GetItemWithError(codec.frame_types, values[W_TYPE]);
    if (ft == NULL) {
        PyErr_Clear();
        return 0;
    }
#define OR_NONE(w) (values[w] != NULL ? values[w] : Py_None)
    Fields got = {ft, values[W_ID], OR_NONE(W_ROUTING), OR_NONE(W_SID), OR_NONE(W_INDEX),
                  OR_NONE(W_SUM), OR_NONE(W_PAYLOAD), OR_NONE(W_COUNT), OR_NONE(W_META),
                  OR_NONE(W_MEDIA), OR_NONE(W_ISSEQ), OR_NONE(W_UNB), OR_NONE(W_OUTPUT)};
#undef OR_NONE
    /* The presence the codec's checks demand of the four kinds (PRESENCE_CHECKED, END's). */
    if (ft == rp.ft_start)
        *fr = got;
    else if (got.output != Py_None) /* only a STREAM_START carries one */
        return 0;
    if (ft == rp.ft_start)
        return got.stream_id != Py_None && got.media_urn != Py_None;
    *fr = got;
    if (ft == rp.ft_chunk)
        return got.stream_id != Py_None && got.chunk_index != Py_None && got.checksum != Py_None;
    if (ft == rp.ft_stream_end)
        return got.stream_id != Py_None;
    if (ft == rp.ft_end)
        return end_meta_ok(got.meta);
    return 0;
}

/* route_block(core, data, max_frame) -> int: the frames at the front of data (a block the
 * cartridge wrote, nothing pending before it) read and routed as route_response routes the
 * Frames the decoder would make of them, with no Frame made, up to the first frame this path
 * does not take whole; the offset of that frame (len(data): every one). The caller gives the
 * rest to the decoder as usual. */
PyObject *
route_block(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "route_block(core, data, max_frame)");
        return NULL;
    }
    Py_ssize_t max_frame = PyLong_AsSsize_t(args[2]);
    if (max_frame == -1 && PyErr_Occurred())
        return NULL;
    if (!rp.configured || !wire_table())
        return PyLong_FromLong(0);
    Py_buffer view;
    if (PyObject_GetBuffer(args[1], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *base = (const unsigned char *)view.buf;
    Py_ssize_t off = 0;
    int failed = 0;
    while (view.len - off >= PREFIX_LEN) {
        const unsigned char *p = base + off;
        Py_ssize_t n = ((Py_ssize_t)p[0] << 24) | ((Py_ssize_t)p[1] << 16) |
                       ((Py_ssize_t)p[2] << 8) | (Py_ssize_t)p[3];
        if (n > max_frame || n > codec.hard_cap || n > view.len - off - PREFIX_LEN)
            break;
        PyObject *values[W_FIELDS] = {NULL};
        Fields fr;
        int taken = wire_read(p + PREFIX_LEN, p + PREFIX_LEN + n, values, &fr);
        if (taken == 1)
            taken = route(args[0], &fr);
        for (int i = 0; i < W_FIELDS; i++)
            Py_XDECREF(values[i]);
        if (taken < 0)
            failed = 1;
        if (taken != 1)
            break;
        off += PREFIX_LEN + n;
    }
    PyBuffer_Release(&view);
    if (failed)
        return NULL;
    return PyLong_FromSsize_t(off);
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

/* The offset of a slot (a writable object member that raises when unset) of cls; -1. */
static Py_ssize_t
member_offset(PyObject *cls, const char *name)
{
    PyObject *key = PyUnicode_InternFromString(name);
    if (key == NULL)
        return -1;
    PyObject *d = _PyType_Lookup((PyTypeObject *)cls, key);
    Py_DECREF(key);
    if (d == NULL || !Py_IS_TYPE(d, &PyMemberDescr_Type))
        return -1;
    PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
    if (m->type != T_OBJECT_EX || (m->flags & READONLY))
        return -1;
    return m->offset;
}

static int
offsets(PyObject *cls, int n, const char **names, Py_ssize_t *out)
{
    for (int i = 0; i < n; i++) {
        if ((out[i] = member_offset(cls, names[i])) < 0) {
            PyErr_Format(PyExc_ValueError, "configure_response: %R has no slot %s", cls,
                         names[i]);
            return -1;
        }
    }
    return 0;
}

/* Whether instances of cls keep each of names in their dict, with no data descriptor of the
 * class in front of it. */
static int
dict_fields(PyObject *cls, const char **names)
{
    if (((PyTypeObject *)cls)->tp_dictoffset == 0)
        goto refuse;
    for (int i = 0; names[i] != NULL; i++) {
        PyObject *key = PyUnicode_InternFromString(names[i]);
        if (key == NULL)
            return -1;
        PyObject *d = _PyType_Lookup((PyTypeObject *)cls, key);
        Py_DECREF(key);
        if (d != NULL && Py_TYPE(d)->tp_descr_set != NULL)
            goto refuse;
    }
    return 0;
refuse:
    PyErr_Format(PyExc_ValueError, "configure_response: %R does not keep its fields in a dict",
                 cls);
    return -1;
}

/* configure_response(*, frame_types, frame_class, flow_class, receiver_class, stream_class,
 * request_states, stream_states, deque_class, outputs). */
PyObject *
configure_response(PyObject *module, PyObject *args, PyObject *kw)
{
    static char *kwnames[] = {"frame_types", "frame_class", "flow_class", "receiver_class",
                              "stream_class", "request_states", "stream_states", "deque_class",
                              "outputs", "credit_dir", NULL};
    PyObject *fts, *frame_class, *flow_class, *receiver_class, *stream_class, *rstates,
        *sstates, *deque_class, *outputs, *credit_dir;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!O!O!O!O!O!O!O!O!O", kwnames, &PyTuple_Type,
                                     &fts, &PyType_Type, &frame_class, &PyType_Type,
                                     &flow_class, &PyType_Type, &receiver_class, &PyType_Type,
                                     &stream_class, &PyTuple_Type, &rstates, &PyTuple_Type,
                                     &sstates, &PyType_Type, &deque_class, &PyTuple_Type,
                                     &outputs, &credit_dir))
        return NULL;
    rp.configured = 0;
    if (PyTuple_GET_SIZE(fts) != 4 || PyTuple_GET_SIZE(rstates) != 2 ||
        PyTuple_GET_SIZE(sstates) != 2 || PyTuple_GET_SIZE(outputs) != 3) {
        PyErr_SetString(PyExc_ValueError, "configure_response: tables of the wrong size");
        return NULL;
    }
    if (!receiver_is_configured()) {
        PyErr_SetString(PyExc_ValueError, "configure_response: the receiver's path is off");
        return NULL;
    }
    for (int i = 0; i < 3; i++)
        if (!PyType_Check(PyTuple_GET_ITEM(outputs, i))) {
            PyErr_SetString(PyExc_TypeError, "configure_response: outputs must be classes");
            return NULL;
        }
    PyObject *append = PyObject_GetAttrString(deque_class, "append");
    if (append == NULL)
        return NULL;
    Py_XSETREF(rp.deque_append, append);
    if (offsets(flow_class, F_COUNT, flow_names, rp.flow) < 0 ||
        offsets(stream_class, S_COUNT, stream_names, rp.stream) < 0 ||
        offsets(PyTuple_GET_ITEM(outputs, 0), 6, started_names, rp.started) < 0 ||
        offsets(PyTuple_GET_ITEM(outputs, 1), 4, data_names, rp.data) < 0 ||
        offsets(PyTuple_GET_ITEM(outputs, 2), 3, ended_names, rp.ended) < 0 ||
        dict_fields(frame_class, frame_fields) < 0 ||
        dict_fields(receiver_class, receiver_fields) < 0)
        return NULL;
    /* Every slot is set when a stream or an event is made here: no other slot may exist. */
    PyObject *classes[] = {stream_class, PyTuple_GET_ITEM(outputs, 0),
                           PyTuple_GET_ITEM(outputs, 1), PyTuple_GET_ITEM(outputs, 2)};
    int counts[] = {S_COUNT, 6, 4, 3};
    for (int i = 0; i < 4; i++) {
        PyObject *slots = PyObject_GetAttrString(classes[i], "__slots__");
        if (slots == NULL)
            return NULL;
        Py_ssize_t n = PySequence_Size(slots), extra = 0;
        for (Py_ssize_t j = 0; j < n; j++) {
            PyObject *name = PySequence_GetItem(slots, j);
            if (name == NULL) {
                Py_DECREF(slots);
                return NULL;
            }
            extra += PyUnicode_Check(name) && PyUnicode_CompareWithASCIIString(name, "__weakref__") == 0;
            Py_DECREF(name);
        }
        Py_DECREF(slots);
        if (n < 0 || n - extra != counts[i] || ((PyTypeObject *)classes[i])->tp_dictoffset != 0) {
            PyErr_Format(PyExc_ValueError,
                         "configure_response: %R has slots the router does not set",
                         classes[i]);
            return NULL;
        }
    }
#define KEEP(var, val) do { Py_INCREF(val); Py_XSETREF(var, val); } while (0)
#define AT(t, i) PyTuple_GET_ITEM(t, i)
    KEEP(rp.ft_start, AT(fts, 0));
    KEEP(rp.ft_chunk, AT(fts, 1));
    KEEP(rp.ft_stream_end, AT(fts, 2));
    KEEP(rp.ft_end, AT(fts, 3));
    KEEP(rp.frame_class, frame_class);
    KEEP(rp.flow_class, flow_class);
    KEEP(rp.receiver_class, receiver_class);
    KEEP(rp.stream_class, stream_class);
    KEEP(rp.deque_class, deque_class);
    KEEP(rp.rs_open, AT(rstates, 0));
    KEEP(rp.rs_done, AT(rstates, 1));
    KEEP(rp.ss_open, AT(sstates, 0));
    KEEP(rp.ss_closed, AT(sstates, 1));
    KEEP(rp.credit_dir, credit_dir);
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
    INTERN(s_rid, "rid");
    INTERN(s_state, "state");
    INTERN(s_streams, "_streams");
    INTERN(s_outgoing, "_outgoing");
    INTERN(s_verify, "verify_checksums");
    INTERN(s_credit, "initial_credit");
    INTERN(s_stream_id, "stream_id");
    INTERN(s_chunk_index, "chunk_index");
    INTERN(s_checksum, "checksum");
    INTERN(s_payload, "payload");
    INTERN(s_chunk_count, "chunk_count");
    INTERN(s_meta, "meta");
    INTERN(s_media_urn, "media_urn");
    INTERN(s_is_sequence, "is_sequence");
    INTERN(s_unbounded, "unbounded");
    INTERN(s_output, "output");
    INTERN(s_finish, "_finish");
    INTERN(s_set, "set");
    INTERN(s_xid, "xid");
    INTERN(s_batch, "batch");
    INTERN(s_credit_dir, "credit_dir");
    INTERN(empty_str, "");
#undef INTERN
    if ((rp.zero = PyLong_FromLong(0)) == NULL)
        return -1;
    return 0;
}
