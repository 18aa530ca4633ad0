/* Compiled fast path of BodyReceiver.receive (see _request_state.py, which owns the rules).
 *
 * receive_fast(receiver, frame) takes the common, valid case of the five frames every small
 * request and response is made of: REQ, STREAM_START, a scalar CHUNK whose index, credit and
 * checksum are right, STREAM_END with the right chunk_count, and END with every stream
 * closed. It applies the same transitions the Python tables give (configure_receiver checks
 * them) and returns the same events. Anything else (LOG, ERR, sequence streams, an empty
 * chunk, a mistake of any kind) answers None before changing anything, and the Python code
 * then decides, raising its precise error where there is one.
 *
 * Events are made as object.__new__ plus one generic setattr per field, as attrs' own
 * __init__ does for these classes; configure_receiver checks the field names of each class
 * so that a field added later in Python switches this path off instead of leaving it unset.
 */
#include <string.h>

#include "_frames.h"

typedef struct {
    int configured;
    /* inputs and states (compared by identity) */
    PyObject *ft_req, *ft_start, *ft_chunk, *ft_stream_end, *ft_end;
    PyObject *rs_expect, *rs_open, *rs_done;
    PyObject *ss_open, *ss_closed;
    PyObject *stream_class;  /* _Stream */
    PyObject *decode_scalar; /* _payload.decode_scalar, for payloads other than a string */
    PyObject *ev_req, *ev_opened, *ev_data, *ev_closed, *ev_ended;
    /* attribute names */
    PyObject *s_frame_type, *s_id, *s_value, *s_rid, *s_state, *s_streams, *s_verify,
        *s_credit, *s_stream_id, *s_chunk_index, *s_checksum, *s_payload, *s_window,
        *s_chunks, *s_assembler, *s_chunk_count, *s_meta, *s_media_urn, *s_is_sequence,
        *s_unbounded, *s_output, *s_routing_id, *s_cap, *s_xid, *s_wire, *s_input_error,
        *s_receiver, *s_outgoing;
    PyObject *empty_str;
} ReceiverTables;

static ReceiverTables rt;

static PyObject *
attr(PyObject *o, PyObject *name)
{
    return PyObject_GetAttr(o, name);
}

/* A new event of class cls with fields names[i] = values[i], without running __init__. */
static PyObject *
make_event(PyObject *cls, int n, PyObject **names, PyObject **values)
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

static PyObject *
one(PyObject *ev)
{
    if (ev == NULL)
        return NULL;
    PyObject *list = PyList_New(1);
    if (list == NULL) {
        Py_DECREF(ev);
        return NULL;
    }
    PyList_SET_ITEM(list, 0, ev);
    return list;
}

/* A scalar payload's value: a definite byte or text string read here, anything else by
 * decode_scalar. New reference, CBOR_GIVE_UP, or NULL with an exception (cleared: the
 * Python path raises it again in its place). */
PyObject *
scalar_value(PyObject *payload)
{
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(payload);
    Py_ssize_t n = PyBytes_GET_SIZE(payload);
    int major = p[0] & 0xE0, info = p[0] & 0x1F;
    if (major == 0x40 || major == 0x60) {
        Py_ssize_t hl;
        uint64_t len;
        if (info < 24) {
            hl = 1;
            len = (uint64_t)info;
        }
        else if (info >= 24 && info <= 27) {
            hl = 1 + ((Py_ssize_t)1 << (info - 24));
            if (n < hl)
                return CBOR_GIVE_UP;
            len = 0;
            for (Py_ssize_t i = 1; i < hl; i++)
                len = (len << 8) | p[i];
        }
        else
            return CBOR_GIVE_UP;
        if ((uint64_t)(n - hl) == len) {
            if (major == 0x40)
                return PyBytes_FromStringAndSize((const char *)p + hl, n - hl);
            PyObject *text = PyUnicode_DecodeUTF8((const char *)p + hl, n - hl, NULL);
            if (text == NULL) {
                PyErr_Clear();
                return CBOR_GIVE_UP;
            }
            return text;
        }
    }
    PyObject *value = PyObject_CallOneArg(rt.decode_scalar, payload);
    if (value == NULL) {
        PyErr_Clear();
        return CBOR_GIVE_UP;
    }
    return value;
}

/* The stream of a CHUNK or STREAM_END, if it is open in scalar mode: a borrowed reference
 * (the receiver's dict holds it), or NULL (no exception) to let Python decide. */
static PyObject *
open_stream(PyObject *streams, PyObject *frame, PyObject **sid_out)
{
    PyObject *sid = attr(frame, rt.s_stream_id);
    if (sid == NULL) {
        PyErr_Clear();
        return NULL;
    }
    if (!PyUnicode_CheckExact(sid) || PyUnicode_GET_LENGTH(sid) == 0) {
        Py_DECREF(sid);
        return NULL;
    }
    PyObject *stream = PyDict_GetItemWithError(streams, sid);
    Py_DECREF(sid);
    if (stream == NULL) {
        PyErr_Clear();
        return NULL;
    }
    PyObject *state = attr(stream, rt.s_state);
    if (state == NULL) {
        PyErr_Clear();
        return NULL;
    }
    Py_DECREF(state); /* compared by identity; the enum member outlives this call */
    if (state != rt.ss_open)
        return NULL;
    *sid_out = sid; /* borrowed through the stream's key in the dict */
    return stream;
}

/* An int attribute as a C value; -1 (no exception) when absent, not an exact int, or out of
 * range. */
static Py_ssize_t
int_attr(PyObject *o, PyObject *name)
{
    PyObject *v = attr(o, name);
    if (v == NULL) {
        PyErr_Clear();
        return -1;
    }
    Py_ssize_t n = PyLong_CheckExact(v) ? PyLong_AsSsize_t(v) : -1;
    Py_DECREF(v);
    if (n == -1 && PyErr_Occurred())
        PyErr_Clear();
    return n;
}

static int
set_int(PyObject *o, PyObject *name, Py_ssize_t n)
{
    PyObject *v = PyLong_FromSsize_t(n);
    if (v == NULL)
        return -1;
    int rc = PyObject_SetAttr(o, name, v);
    Py_DECREF(v);
    return rc;
}

static PyObject *
chunk(PyObject *self, PyObject *frame, PyObject *streams)
{
    PyObject *sid = NULL;
    PyObject *stream = open_stream(streams, frame, &sid);
    if (stream == NULL)
        Py_RETURN_NONE;
    Py_INCREF(stream);
    PyObject *result = Py_None, *value = NULL, *wire = NULL, *payload = NULL, *held = NULL;
    Py_INCREF(Py_None);
    PyObject *assembler = attr(stream, rt.s_assembler);
    if (assembler == NULL || assembler != Py_None)
        goto done; /* sequence mode: Python assembles the items */
    Py_ssize_t chunks = int_attr(stream, rt.s_chunks);
    Py_ssize_t window = int_attr(stream, rt.s_window);
    if (chunks < 0 || window <= 0 || int_attr(frame, rt.s_chunk_index) != chunks)
        goto done;
    payload = attr(frame, rt.s_payload);
    if (payload == NULL || !PyBytes_CheckExact(payload) || PyBytes_GET_SIZE(payload) == 0)
        goto done;
    int verify = 0;
    PyObject *v = attr(self, rt.s_verify);
    if (v == NULL)
        goto done;
    verify = PyObject_IsTrue(v);
    Py_DECREF(v);
    if (verify < 0)
        goto done;
    held = attr(frame, rt.s_checksum);
    if (held == NULL)
        goto done;
    if (verify) {
        if (!PyLong_CheckExact(held))
            goto done;
        unsigned long long want = PyLong_AsUnsignedLongLong(held);
        if (want == (unsigned long long)-1 && PyErr_Occurred())
            goto done;
        if (want != fnv1a64((const unsigned char *)PyBytes_AS_STRING(payload),
                            PyBytes_GET_SIZE(payload)))
            goto done;
    }
    value = scalar_value(payload);
    if (value == NULL || value == CBOR_GIVE_UP) {
        value = NULL;
        goto done;
    }
    if (verify && held != Py_None) {
        wire = Py_BuildValue("(On)", held, PyBytes_GET_SIZE(payload));
        if (wire == NULL)
            goto fail;
    }
    else {
        wire = Py_None;
        Py_INCREF(wire);
    }
    if (set_int(stream, rt.s_window, window - 1) < 0 || set_int(stream, rt.s_chunks, chunks + 1) < 0)
        goto fail;
    PyObject *names[] = {rt.s_stream_id, rt.s_value, rt.s_wire};
    PyObject *values[] = {sid, value, wire};
    Py_DECREF(result);
    result = one(make_event(rt.ev_data, 3, names, values));
    goto done;
fail:
    Py_CLEAR(result);
done:
    if (PyErr_Occurred() && result != NULL) {
        PyErr_Clear(); /* a give-up on the way: Python decides */
    }
    Py_XDECREF(assembler);
    Py_XDECREF(payload);
    Py_XDECREF(held);
    Py_XDECREF(value);
    Py_XDECREF(wire);
    Py_DECREF(stream);
    return result;
}

static PyObject *
stream_start(PyObject *self, PyObject *frame, PyObject *streams)
{
    PyObject *sid = attr(frame, rt.s_stream_id);
    if (sid == NULL)
        return NULL;
    if (!PyUnicode_CheckExact(sid) || PyUnicode_GET_LENGTH(sid) == 0) {
        Py_DECREF(sid);
        Py_RETURN_NONE;
    }
    int known = PyDict_Contains(streams, sid);
    if (known != 0) { /* a restart (Python names it), or an error */
        Py_DECREF(sid);
        return known < 0 ? NULL : Py_NewRef(Py_None);
    }
    PyObject *result = NULL, *stream = NULL, *credit = NULL, *media = NULL, *output = NULL,
             *meta = NULL;
    PyObject *is_seq = NULL, *unbounded = NULL;
    int seq_flag, unb_flag;
    if ((credit = attr(self, rt.s_credit)) == NULL || (is_seq = attr(frame, rt.s_is_sequence)) == NULL ||
        (unbounded = attr(frame, rt.s_unbounded)) == NULL || (media = attr(frame, rt.s_media_urn)) == NULL ||
        (output = attr(frame, rt.s_output)) == NULL || (meta = attr(frame, rt.s_meta)) == NULL)
        goto done;
    if ((seq_flag = PyObject_IsTrue(is_seq)) < 0 || (unb_flag = PyObject_IsTrue(unbounded)) < 0)
        goto done;
    PyObject *seq_b = seq_flag ? Py_True : Py_False, *unb_b = unb_flag ? Py_True : Py_False;
    stream = PyObject_CallFunctionObjArgs(rt.stream_class, sid, credit, seq_b, unb_b, NULL);
    if (stream == NULL || PyObject_SetAttr(stream, rt.s_state, rt.ss_open) < 0 ||
        PyDict_SetItem(streams, sid, stream) < 0)
        goto done;
    int media_ok = PyObject_IsTrue(media);
    if (media_ok < 0)
        goto done;
    PyObject *names[] = {rt.s_stream_id, rt.s_media_urn, rt.s_is_sequence, rt.s_unbounded,
                         rt.s_output, rt.s_meta};
    PyObject *values[] = {sid, media_ok ? media : rt.empty_str, seq_b, unb_b, output, meta};
    result = one(make_event(rt.ev_opened, 6, names, values));
done:
    Py_XDECREF(sid);
    Py_XDECREF(stream);
    Py_XDECREF(credit);
    Py_XDECREF(is_seq);
    Py_XDECREF(unbounded);
    Py_XDECREF(media);
    Py_XDECREF(output);
    Py_XDECREF(meta);
    return result;
}

static PyObject *
stream_end(PyObject *frame, PyObject *streams)
{
    PyObject *sid = NULL;
    PyObject *stream = open_stream(streams, frame, &sid);
    if (stream == NULL)
        Py_RETURN_NONE;
    Py_ssize_t chunks = int_attr(stream, rt.s_chunks);
    PyObject *count = attr(frame, rt.s_chunk_count);
    if (count == NULL)
        return NULL;
    Py_ssize_t n = PyLong_CheckExact(count) ? PyLong_AsSsize_t(count) : -1;
    if (n == -1 && PyErr_Occurred())
        PyErr_Clear();
    if (chunks < 0 || n != chunks) { /* absent, wrong, or strange: Python decides */
        Py_DECREF(count);
        Py_RETURN_NONE;
    }
    Py_INCREF(sid); /* the stream's own id keeps living while the event is made */
    PyObject *result = NULL;
    if (PyObject_SetAttr(stream, rt.s_state, rt.ss_closed) == 0) {
        PyObject *names[] = {rt.s_stream_id, rt.s_chunk_count};
        PyObject *values[] = {sid, count};
        result = one(make_event(rt.ev_closed, 2, names, values));
    }
    Py_DECREF(sid);
    Py_DECREF(count);
    return result;
}

static PyObject *
end(PyObject *self, PyObject *frame, PyObject *streams)
{
    Py_ssize_t pos = 0;
    PyObject *key, *stream;
    while (PyDict_Next(streams, &pos, &key, &stream)) {
        PyObject *state = attr(stream, rt.s_state);
        if (state == NULL)
            return NULL;
        Py_DECREF(state);
        if (state != rt.ss_closed)
            Py_RETURN_NONE; /* END while a stream is open: Python names them */
    }
    PyObject *meta = attr(frame, rt.s_meta);
    if (meta == NULL)
        return NULL;
    PyObject *result = NULL;
    if (PyObject_SetAttr(self, rt.s_state, rt.rs_done) == 0) {
        PyObject *names[] = {rt.s_meta};
        result = one(make_event(rt.ev_ended, 1, names, &meta));
    }
    Py_DECREF(meta);
    return result;
}

static PyObject *
req(PyObject *self, PyObject *frame, PyObject *fid)
{
    PyObject *xid = attr(frame, rt.s_routing_id), *cap = NULL, *payload = NULL, *result = NULL;
    if (xid == NULL || (cap = attr(frame, rt.s_cap)) == NULL ||
        (payload = attr(frame, rt.s_payload)) == NULL)
        goto done;
    if (PyObject_SetAttr(self, rt.s_state, rt.rs_open) < 0)
        goto done;
    PyObject *names[] = {rt.s_rid, rt.s_xid, rt.s_cap, rt.s_payload};
    PyObject *values[] = {fid, xid, cap, payload};
    result = one(make_event(rt.ev_req, 4, names, values));
done:
    Py_XDECREF(xid);
    Py_XDECREF(cap);
    Py_XDECREF(payload);
    return result;
}

/* receive_fast(receiver, frame) -> list of events, or None to let Python decide. */
PyObject *
receive_fast(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "receive_fast(receiver, frame)");
        return NULL;
    }
    if (!rt.configured)
        Py_RETURN_NONE;
    PyObject *self = args[0], *frame = args[1];
    PyObject *ft = NULL, *fid = NULL, *rid = NULL, *state = NULL, *streams = NULL;
    PyObject *result = NULL;
    if ((ft = attr(frame, rt.s_frame_type)) == NULL || (fid = attr(frame, rt.s_id)) == NULL ||
        (rid = attr(self, rt.s_rid)) == NULL || (state = attr(self, rt.s_state)) == NULL)
        goto done;
    if (fid != rid) { /* ids shared by the decoder are the same object; else compare values */
        PyObject *a = attr(fid, rt.s_value), *b = a ? attr(rid, rt.s_value) : NULL;
        int same = (a && b) ? PyObject_RichCompareBool(a, b, Py_EQ) : -1;
        Py_XDECREF(a);
        Py_XDECREF(b);
        if (same != 1) {
            PyErr_Clear();
            result = Py_NewRef(Py_None);
            goto done;
        }
    }
    if (ft == rt.ft_req) {
        result = state == rt.rs_expect ? req(self, frame, fid) : Py_NewRef(Py_None);
        goto done;
    }
    if (state != rt.rs_open) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    if ((streams = attr(self, rt.s_streams)) == NULL)
        goto done;
    if (!PyDict_CheckExact(streams))
        result = Py_NewRef(Py_None);
    else if (ft == rt.ft_chunk)
        result = chunk(self, frame, streams);
    else if (ft == rt.ft_start)
        result = stream_start(self, frame, streams);
    else if (ft == rt.ft_stream_end)
        result = stream_end(frame, streams);
    else if (ft == rt.ft_end)
        result = end(self, frame, streams);
    else
        result = Py_NewRef(Py_None);
done:
    Py_XDECREF(ft);
    Py_XDECREF(fid);
    Py_XDECREF(rid);
    Py_XDECREF(state);
    Py_XDECREF(streams);
    return result;
}

/* Whether names (a tuple of str) is exactly the space-separated list want. */
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
    if (!rt.configured)
        return PyObject_CallOneArg(fallback, frame);
    PyObject *fid = attr(frame, rt.s_id);
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
    if ((v = attr(request, rt.s_input_error)) == NULL)
        goto done;
    int plain = v == Py_None;
    Py_CLEAR(v);
    if (plain) {
        if ((v = attr(frame, rt.s_output)) == NULL)
            goto done;
        plain = v == Py_None; /* only a STREAM_START carries one */
        Py_CLEAR(v);
    }
    if (plain) {
        if ((receiver = attr(request, rt.s_receiver)) == NULL ||
            (outgoing = attr(receiver, rt.s_outgoing)) == NULL)
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

static int
names_are(PyObject *names, const char *want)
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

/* configure_receiver(**tables): the inputs, states, classes and callables of
 * _request_state.py, and the field names of each event class (checked here). */
PyObject *
configure_receiver(PyObject *module, PyObject *args, PyObject *kw)
{
    static char *kwnames[] = {"inputs", "request_states", "stream_states", "stream_class",
                              "decode_scalar", "events", "event_fields", NULL};
    PyObject *inputs, *rstates, *sstates, *stream_class, *decode, *events, *fields;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!O!O!OOO!O!", kwnames, &PyTuple_Type, &inputs,
                                     &PyTuple_Type, &rstates, &PyTuple_Type, &sstates,
                                     &stream_class, &decode, &PyTuple_Type, &events,
                                     &PyTuple_Type, &fields))
        return NULL;
    rt.configured = 0;
    if (PyTuple_GET_SIZE(inputs) != 5 || PyTuple_GET_SIZE(rstates) != 3 ||
        PyTuple_GET_SIZE(sstates) != 2 || PyTuple_GET_SIZE(events) != 5 ||
        PyTuple_GET_SIZE(fields) != 5) {
        PyErr_SetString(PyExc_ValueError, "configure_receiver: tables of the wrong size");
        return NULL;
    }
    static const char *want[] = {"rid xid cap payload",
                                 "stream_id media_urn is_sequence unbounded output meta",
                                 "stream_id value wire", "stream_id chunk_count", "meta"};
    for (int i = 0; i < 5; i++) {
        PyObject *cls = PyTuple_GET_ITEM(events, i);
        PyTypeObject *t = (PyTypeObject *)cls;
        if (!PyType_Check(cls) || t->tp_dictoffset != 0 ||
            !names_are(PyTuple_GET_ITEM(fields, i), want[i])) {
            PyErr_Format(PyExc_ValueError,
                         "configure_receiver: event %d is not a slotted class with fields %s",
                         i, want[i]);
            return NULL;
        }
    }
    if (!PyType_Check(stream_class) || !PyCallable_Check(decode)) {
        PyErr_SetString(PyExc_TypeError, "configure_receiver: bad stream class or decoder");
        return NULL;
    }
#define KEEP(var, val) do { Py_INCREF(val); Py_XSETREF(var, val); } while (0)
#define AT(t, i) PyTuple_GET_ITEM(t, i)
    KEEP(rt.ft_req, AT(inputs, 0));
    KEEP(rt.ft_start, AT(inputs, 1));
    KEEP(rt.ft_chunk, AT(inputs, 2));
    KEEP(rt.ft_stream_end, AT(inputs, 3));
    KEEP(rt.ft_end, AT(inputs, 4));
    KEEP(rt.rs_expect, AT(rstates, 0));
    KEEP(rt.rs_open, AT(rstates, 1));
    KEEP(rt.rs_done, AT(rstates, 2));
    KEEP(rt.ss_open, AT(sstates, 0));
    KEEP(rt.ss_closed, AT(sstates, 1));
    KEEP(rt.stream_class, stream_class);
    KEEP(rt.decode_scalar, decode);
    KEEP(rt.ev_req, AT(events, 0));
    KEEP(rt.ev_opened, AT(events, 1));
    KEEP(rt.ev_data, AT(events, 2));
    KEEP(rt.ev_closed, AT(events, 3));
    KEEP(rt.ev_ended, AT(events, 4));
#undef AT
#undef KEEP
    rt.configured = 1;
    Py_RETURN_NONE;
}

/* Interns the attribute names (from the module's init). */
int
receiver_init(void)
{
#define INTERN(var, text) if ((rt.var = PyUnicode_InternFromString(text)) == NULL) return -1
    INTERN(s_frame_type, "frame_type");
    INTERN(s_id, "id");
    INTERN(s_value, "value");
    INTERN(s_rid, "rid");
    INTERN(s_state, "state");
    INTERN(s_streams, "_streams");
    INTERN(s_verify, "verify_checksums");
    INTERN(s_credit, "initial_credit");
    INTERN(s_stream_id, "stream_id");
    INTERN(s_chunk_index, "chunk_index");
    INTERN(s_checksum, "checksum");
    INTERN(s_payload, "payload");
    INTERN(s_window, "window");
    INTERN(s_chunks, "chunks");
    INTERN(s_assembler, "assembler");
    INTERN(s_chunk_count, "chunk_count");
    INTERN(s_meta, "meta");
    INTERN(s_media_urn, "media_urn");
    INTERN(s_is_sequence, "is_sequence");
    INTERN(s_unbounded, "unbounded");
    INTERN(s_output, "output");
    INTERN(s_routing_id, "routing_id");
    INTERN(s_cap, "cap");
    INTERN(s_xid, "xid");
    INTERN(s_wire, "wire");
    INTERN(s_input_error, "input_error");
    INTERN(s_receiver, "receiver");
    INTERN(s_outgoing, "_outgoing");
    INTERN(empty_str, "");
#undef INTERN
    return 0;
}

/* Whether configure_receiver ran (the response path reads payloads with scalar_value). */
int
receiver_is_configured(void)
{
    return rt.configured;
}
