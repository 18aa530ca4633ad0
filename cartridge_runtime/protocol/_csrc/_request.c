/* Compiled fast path of a small call's request (see _call_path.py; the rules are the
 * engine's inline_frames and the frame builders).
 *
 * request_frames(rid, xid, cap, inputs, max_chunk, credit, max_total) -> list | None builds
 * every frame of a request whose inputs are all small byte strings: REQ, then for input i a
 * stream "arg-i" of one CHUNK (STREAM_START, CHUNK, STREAM_END), then the requester's END.
 * Each frame is made as the builders make it: a Frame whose __dict__ holds the fields
 * present, in wire-key order. Any other input, or a request over the bounds, answers None and
 * the Python code builds it.
 */
#include <string.h>

#include "_frames.h"

typedef struct {
    int configured;
    PyObject *frame_class;
    PyObject *ft_req, *ft_start, *ft_chunk, *ft_stream_end, *ft_end;
    PyObject *version, *content_type, *empty_bytes, *zero, *one;
    PyObject *s_version, *s_frame_type, *s_id, *s_seq, *s_content_type, *s_payload, *s_eof,
        *s_cap, *s_stream_id, *s_media_urn, *s_routing_id, *s_chunk_index, *s_chunk_count,
        *s_checksum, *s_is_sequence;
} RequestTables;

static RequestTables rq;

/* A Frame of type ft for rid with its head fields set; its dict is returned borrowed through
 * *d. New reference, or NULL. */
static PyObject *
new_frame(PyObject *ft, PyObject *rid, PyObject **d)
{
    PyObject *dict = PyDict_New();
    if (dict == NULL)
        return NULL;
    if (PyDict_SetItem(dict, rq.s_version, rq.version) < 0 ||
        PyDict_SetItem(dict, rq.s_frame_type, ft) < 0 || PyDict_SetItem(dict, rq.s_id, rid) < 0 ||
        PyDict_SetItem(dict, rq.s_seq, rq.zero) < 0) {
        Py_DECREF(dict);
        return NULL;
    }
    PyObject *frame = PyBaseObject_Type.tp_new((PyTypeObject *)rq.frame_class, codec.empty_tuple,
                                               NULL);
    if (frame == NULL || PyObject_GenericSetDict(frame, dict, NULL) < 0) {
        Py_XDECREF(frame);
        Py_DECREF(dict);
        return NULL;
    }
    Py_DECREF(dict); /* the frame holds it */
    *d = dict;
    return frame;
}

static int
push(PyObject *out, PyObject *frame)
{
    if (frame == NULL)
        return -1;
    int rc = PyList_Append(out, frame);
    Py_DECREF(frame);
    return rc;
}

static int
set_xid(PyObject *d, PyObject *xid)
{
    return xid == Py_None ? 0 : PyDict_SetItem(d, rq.s_routing_id, xid);
}

/* The CHUNK payload of a byte string: its CBOR head, then the bytes. */
static PyObject *
bstr_payload(PyObject *value)
{
    Py_ssize_t n = PyBytes_GET_SIZE(value);
    unsigned char head[9];
    Py_ssize_t hl;
    uint64_t len = (uint64_t)n;
    if (len < 24) {
        head[0] = (unsigned char)(0x40 | len);
        hl = 1;
    }
    else {
        int bytes = len < 0x100 ? 1 : len < 0x10000 ? 2 : len < 0x100000000ULL ? 4 : 8;
        head[0] = (unsigned char)(0x58 + (bytes == 1 ? 0 : bytes == 2 ? 1 : bytes == 4 ? 2 : 3));
        for (int i = 0; i < bytes; i++)
            head[1 + i] = (unsigned char)(len >> (8 * (bytes - 1 - i)));
        hl = 1 + bytes;
    }
    PyObject *payload = PyBytes_FromStringAndSize(NULL, hl + n);
    if (payload == NULL)
        return NULL;
    char *p = PyBytes_AS_STRING(payload);
    memcpy(p, head, (size_t)hl);
    memcpy(p + hl, PyBytes_AS_STRING(value), (size_t)n);
    return payload;
}

/* The three frames of input i (media, value) onto out; 0, or -1 with an exception. */
static int
one_input(PyObject *out, PyObject *rid, PyObject *xid, Py_ssize_t i, PyObject *media,
          PyObject *value)
{
    PyObject *sid = PyUnicode_FromFormat("arg-%zd", i), *d = NULL, *frame = NULL;
    PyObject *payload = NULL, *sum = NULL;
    int rc = -1;
    if (sid == NULL)
        return -1;
    /* STREAM_START */
    if ((frame = new_frame(rq.ft_start, rid, &d)) == NULL)
        goto done;
    if (PyDict_SetItem(d, rq.s_stream_id, sid) < 0 || PyDict_SetItem(d, rq.s_media_urn, media) < 0 ||
        set_xid(d, xid) < 0 || PyDict_SetItem(d, rq.s_is_sequence, Py_False) < 0) {
        Py_DECREF(frame);
        goto done;
    }
    if (push(out, frame) < 0)
        goto done;
    /* CHUNK */
    if ((payload = bstr_payload(value)) == NULL)
        goto done;
    sum = PyLong_FromUnsignedLongLong(
        fnv1a64((const unsigned char *)PyBytes_AS_STRING(payload), PyBytes_GET_SIZE(payload)));
    if (sum == NULL || (frame = new_frame(rq.ft_chunk, rid, &d)) == NULL)
        goto done;
    if (PyDict_SetItem(d, rq.s_payload, payload) < 0 || PyDict_SetItem(d, rq.s_stream_id, sid) < 0 ||
        set_xid(d, xid) < 0 || PyDict_SetItem(d, rq.s_chunk_index, rq.zero) < 0 ||
        PyDict_SetItem(d, rq.s_checksum, sum) < 0) {
        Py_DECREF(frame);
        goto done;
    }
    if (push(out, frame) < 0)
        goto done;
    /* STREAM_END */
    if ((frame = new_frame(rq.ft_stream_end, rid, &d)) == NULL)
        goto done;
    if (PyDict_SetItem(d, rq.s_stream_id, sid) < 0 || set_xid(d, xid) < 0 ||
        PyDict_SetItem(d, rq.s_chunk_count, rq.one) < 0) {
        Py_DECREF(frame);
        goto done;
    }
    rc = push(out, frame);
done:
    Py_DECREF(sid);
    Py_XDECREF(payload);
    Py_XDECREF(sum);
    return rc;
}

/* request_frames(rid, xid, cap, inputs, max_chunk, credit, max_total): see the top. */
PyObject *
request_frames(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError,
                        "request_frames(rid, xid, cap, inputs, max_chunk, credit, max_total)");
        return NULL;
    }
    PyObject *rid = args[0], *xid = args[1], *cap = args[2], *inputs = args[3];
    if (!rq.configured || !PyList_CheckExact(inputs) || !PyUnicode_CheckExact(cap))
        Py_RETURN_NONE;
    Py_ssize_t size = PyLong_AsSsize_t(args[4]), credit = PyLong_AsSsize_t(args[5]),
               max_total = PyLong_AsSsize_t(args[6]);
    if ((size == -1 || credit == -1 || max_total == -1) && PyErr_Occurred())
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(inputs), total = 0;
    if (credit <= 0)
        Py_RETURN_NONE;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PyList_GET_ITEM(inputs, i);
        if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2 ||
            !PyUnicode_Check(PyTuple_GET_ITEM(pair, 0)) ||
            !PyBytes_CheckExact(PyTuple_GET_ITEM(pair, 1)))
            Py_RETURN_NONE;
        Py_ssize_t len = PyBytes_GET_SIZE(PyTuple_GET_ITEM(pair, 1));
        if (len == 0 || len > size)
            Py_RETURN_NONE;
        total += len;
        if (total > max_total)
            Py_RETURN_NONE;
    }
    PyObject *out = PyList_New(0), *d = NULL;
    if (out == NULL)
        return NULL;
    /* REQ */
    PyObject *frame = new_frame(rq.ft_req, rid, &d);
    if (frame == NULL)
        goto fail;
    if (PyDict_SetItem(d, rq.s_content_type, rq.content_type) < 0 ||
        PyDict_SetItem(d, rq.s_payload, rq.empty_bytes) < 0 || PyDict_SetItem(d, rq.s_cap, cap) < 0 ||
        set_xid(d, xid) < 0) {
        Py_DECREF(frame);
        goto fail;
    }
    if (push(out, frame) < 0)
        goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PyList_GET_ITEM(inputs, i);
        if (one_input(out, rid, xid, i, PyTuple_GET_ITEM(pair, 0), PyTuple_GET_ITEM(pair, 1)) < 0)
            goto fail;
    }
    /* the requester's END */
    if ((frame = new_frame(rq.ft_end, rid, &d)) == NULL)
        goto fail;
    if (PyDict_SetItem(d, rq.s_eof, Py_True) < 0 || set_xid(d, xid) < 0) {
        Py_DECREF(frame);
        goto fail;
    }
    if (push(out, frame) < 0)
        goto fail;
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

/* request_wire: the same frames as request_frames, written straight to their wire form,
 * frame i numbered i, with no Frame made. At most WIRE_INPUTS inputs (more: None). */
#define WIRE_INPUTS 32
#define WIRE_FRAMES (3 * WIRE_INPUTS + 2)

/* The wire key of field name (a small int), or -1 with an exception set. */
static long
wire_key(PyObject *name)
{
    PyObject *k = PyDict_GetItemWithError(codec.key_of, name);
    if (k == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetObject(PyExc_KeyError, name);
        return -1;
    }
    return PyLong_AsLong(k);
}

/* One frame's map head and its four head fields: version, type, id, seq. */
static int
w_head(CborWriter *w, Py_ssize_t fields, PyObject *ft_int, PyObject *rid_v, Py_ssize_t seq)
{
    return cbor_write_head(w, 5, (uint64_t)fields) && cbor_write_head(w, 0, 0) &&
           cbor_write_item(w, rq.version, 1) == 1 && cbor_write_head(w, 0, 1) &&
           cbor_write_item(w, ft_int, 1) == 1 && cbor_write_head(w, 0, 2) &&
           cbor_write_item(w, rid_v, 1) == 1 && cbor_write_head(w, 0, 3) &&
           cbor_write_head(w, 0, (uint64_t)seq);
}

/* A field: its key, then its value. */
static int
w_field(CborWriter *w, long key, PyObject *v)
{
    return cbor_write_head(w, 0, (uint64_t)key) && cbor_write_item(w, v, 1) == 1;
}

/* request_wire(rid, xid, cap, inputs, max_chunk, credit, max_total, max_frame) -> bytes |
 * None: every frame of the request request_frames would make, each with its length prefix,
 * numbered 0, 1, 2... as the outbox numbers a flow it queues whole (push_flow). */
PyObject *
request_wire(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "request_wire(rid, xid, cap, inputs, max_chunk, "
                                         "credit, max_total, max_frame)");
        return NULL;
    }
    PyObject *rid = args[0], *xid = args[1], *cap = args[2], *inputs = args[3];
    if (!rq.configured || !codec.configured || !PyList_CheckExact(inputs) ||
        !PyUnicode_CheckExact(cap) || PyList_GET_SIZE(inputs) > WIRE_INPUTS)
        Py_RETURN_NONE;
    Py_ssize_t size = PyLong_AsSsize_t(args[4]), credit = PyLong_AsSsize_t(args[5]),
               max_total = PyLong_AsSsize_t(args[6]), max_frame = PyLong_AsSsize_t(args[7]);
    if ((size == -1 || credit == -1 || max_total == -1 || max_frame == -1) && PyErr_Occurred())
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(inputs), total = 0;
    if (credit <= 0)
        Py_RETURN_NONE;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PyList_GET_ITEM(inputs, i);
        if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2 ||
            !PyUnicode_CheckExact(PyTuple_GET_ITEM(pair, 0)) ||
            !PyBytes_CheckExact(PyTuple_GET_ITEM(pair, 1)))
            Py_RETURN_NONE;
        Py_ssize_t len = PyBytes_GET_SIZE(PyTuple_GET_ITEM(pair, 1));
        if (len == 0 || len > size)
            Py_RETURN_NONE;
        total += len;
        if (total > max_total)
            Py_RETURN_NONE;
    }
    /* The wire keys and type codes, looked up once (the codec's tables do not change). */
    static long k_ct, k_payload, k_eof, k_cap, k_sid, k_media, k_routing, k_index, k_count,
        k_sum, k_seq;
    static PyObject *ft_int[5];
    static PyObject *arg_ids[WIRE_INPUTS];
    if (ft_int[0] == NULL) {
        k_ct = wire_key(rq.s_content_type), k_payload = wire_key(rq.s_payload),
        k_eof = wire_key(rq.s_eof), k_cap = wire_key(rq.s_cap),
        k_sid = wire_key(rq.s_stream_id), k_media = wire_key(rq.s_media_urn),
        k_routing = wire_key(rq.s_routing_id), k_index = wire_key(rq.s_chunk_index),
        k_count = wire_key(rq.s_chunk_count), k_sum = wire_key(rq.s_checksum),
        k_seq = wire_key(rq.s_is_sequence);
        if (PyErr_Occurred())
            return NULL;
        for (Py_ssize_t i = 0; i < WIRE_INPUTS; i++)
            if ((arg_ids[i] = PyUnicode_FromFormat("arg-%zd", i)) == NULL)
                return NULL;
        PyObject *fts[5] = {rq.ft_req, rq.ft_start, rq.ft_chunk, rq.ft_stream_end, rq.ft_end};
        for (int i = 0; i < 5; i++) {
            PyObject *code = PyDict_GetItemWithError(codec.frame_type_ints, fts[i]);
            if (code == NULL) {
                if (!PyErr_Occurred())
                    PyErr_SetObject(PyExc_KeyError, fts[i]);
                for (int j = 0; j < i; j++)
                    Py_CLEAR(ft_int[j]);
                return NULL;
            }
            ft_int[i] = Py_NewRef(code);
        }
    }
    PyObject *rid_v = PyObject_GetAttr(rid, codec.s_value), *xid_v = NULL, *result = NULL;
    if (rid_v == NULL)
        return NULL;
    if (xid != Py_None && (xid_v = PyObject_GetAttr(xid, codec.s_value)) == NULL) {
        Py_DECREF(rid_v);
        return NULL;
    }
    Py_ssize_t routed = xid_v != NULL, ends[WIRE_FRAMES], nf = 0;
    CborWriter w;
    cbor_writer_init(&w, 0);
#define CHECK(x) do { if (!(x)) goto fail; } while (0)
    /* REQ */
    CHECK(w_head(&w, 7 + routed, ft_int[0], rid_v, nf) && w_field(&w, k_ct, rq.content_type) &&
          w_field(&w, k_payload, rq.empty_bytes) && w_field(&w, k_cap, cap) &&
          (!routed || w_field(&w, k_routing, xid_v)));
    ends[nf++] = w.len;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PyList_GET_ITEM(inputs, i);
        PyObject *sid = arg_ids[i];
        PyObject *payload = bstr_payload(PyTuple_GET_ITEM(pair, 1));
        PyObject *sum = payload != NULL ? PyLong_FromUnsignedLongLong(fnv1a64(
                            (const unsigned char *)PyBytes_AS_STRING(payload),
                            PyBytes_GET_SIZE(payload)))
                                        : NULL;
        int ok = sum != NULL;
        /* STREAM_START, CHUNK, STREAM_END */
        ok = ok && w_head(&w, 7 + routed, ft_int[1], rid_v, nf) && w_field(&w, k_sid, sid) &&
             w_field(&w, k_media, PyTuple_GET_ITEM(pair, 0)) &&
             (!routed || w_field(&w, k_routing, xid_v)) && w_field(&w, k_seq, Py_False);
        if (ok)
            ends[nf++] = w.len;
        ok = ok && w_head(&w, 8 + routed, ft_int[2], rid_v, nf) &&
             w_field(&w, k_payload, payload) && w_field(&w, k_sid, sid) &&
             (!routed || w_field(&w, k_routing, xid_v)) && w_field(&w, k_index, rq.zero) &&
             w_field(&w, k_sum, sum);
        if (ok)
            ends[nf++] = w.len;
        ok = ok && w_head(&w, 6 + routed, ft_int[3], rid_v, nf) && w_field(&w, k_sid, sid) &&
             (!routed || w_field(&w, k_routing, xid_v)) && w_field(&w, k_count, rq.one);
        if (ok)
            ends[nf++] = w.len;
        Py_XDECREF(payload);
        Py_XDECREF(sum);
        CHECK(ok);
    }
    /* the requester's END */
    CHECK(w_head(&w, 5 + routed, ft_int[4], rid_v, nf) && w_field(&w, k_eof, Py_True) &&
          (!routed || w_field(&w, k_routing, xid_v)));
    ends[nf++] = w.len;
#undef CHECK
    Py_ssize_t start = 0;
    for (Py_ssize_t i = 0; i < nf; i++) {
        Py_ssize_t body = ends[i] - start;
        if (body > max_frame || body > codec.hard_cap) {
            result = Py_NewRef(Py_None); /* Python's path names the error */
            goto done;
        }
        start = ends[i];
    }
    result = PyBytes_FromStringAndSize(NULL, w.len + PREFIX_LEN * nf);
    if (result == NULL)
        goto done;
    unsigned char *out = (unsigned char *)PyBytes_AS_STRING(result);
    start = 0;
    for (Py_ssize_t i = 0; i < nf; i++) {
        Py_ssize_t body = ends[i] - start;
        out[0] = (unsigned char)((body >> 24) & 0xFF);
        out[1] = (unsigned char)((body >> 16) & 0xFF);
        out[2] = (unsigned char)((body >> 8) & 0xFF);
        out[3] = (unsigned char)(body & 0xFF);
        memcpy(out + PREFIX_LEN, w.buf + start, (size_t)body);
        out += PREFIX_LEN + body;
        start = ends[i];
    }
    goto done;
fail:
    if (!PyErr_Occurred())
        result = Py_NewRef(Py_None); /* a value the writer gives up on: Python decides */
done:
    cbor_writer_free(&w);
    Py_DECREF(rid_v);
    Py_XDECREF(xid_v);
    return result;
}

/* configure_request(*, frame_class, frame_types, version, content_type). */
PyObject *
configure_request(PyObject *module, PyObject *args, PyObject *kw)
{
    static char *kwnames[] = {"frame_class", "frame_types", "version", "content_type", NULL};
    PyObject *fc, *fts, *version, *ct;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO!O!O!", kwnames, &fc, &PyTuple_Type, &fts,
                                     &PyLong_Type, &version, &PyUnicode_Type, &ct))
        return NULL;
    rq.configured = 0;
    if (!PyType_Check(fc) || PyTuple_GET_SIZE(fts) != 5) {
        PyErr_SetString(PyExc_ValueError, "configure_request: a frame class and five types");
        return NULL;
    }
    if (codec.empty_tuple == NULL) {
        PyErr_SetString(PyExc_ValueError, "configure_request: the module is not initialised");
        return NULL;
    }
#define KEEP(var, val) do { Py_INCREF(val); Py_XSETREF(var, val); } while (0)
    KEEP(rq.frame_class, fc);
    KEEP(rq.ft_req, PyTuple_GET_ITEM(fts, 0));
    KEEP(rq.ft_start, PyTuple_GET_ITEM(fts, 1));
    KEEP(rq.ft_chunk, PyTuple_GET_ITEM(fts, 2));
    KEEP(rq.ft_stream_end, PyTuple_GET_ITEM(fts, 3));
    KEEP(rq.ft_end, PyTuple_GET_ITEM(fts, 4));
    KEEP(rq.version, version);
    KEEP(rq.content_type, ct);
#undef KEEP
    rq.configured = 1;
    Py_RETURN_NONE;
}

/* Interns the field names and makes the constants (from the module's init). */
int
request_init(void)
{
#define INTERN(var, text) if ((rq.var = PyUnicode_InternFromString(text)) == NULL) return -1
    INTERN(s_version, "version");
    INTERN(s_frame_type, "frame_type");
    INTERN(s_id, "id");
    INTERN(s_seq, "seq");
    INTERN(s_content_type, "content_type");
    INTERN(s_payload, "payload");
    INTERN(s_eof, "eof");
    INTERN(s_cap, "cap");
    INTERN(s_stream_id, "stream_id");
    INTERN(s_media_urn, "media_urn");
    INTERN(s_routing_id, "routing_id");
    INTERN(s_chunk_index, "chunk_index");
    INTERN(s_chunk_count, "chunk_count");
    INTERN(s_checksum, "checksum");
    INTERN(s_is_sequence, "is_sequence");
#undef INTERN
    rq.empty_bytes = PyBytes_FromStringAndSize(NULL, 0);
    rq.zero = PyLong_FromLong(0);
    rq.one = PyLong_FromLong(1);
    if (rq.empty_bytes == NULL || rq.zero == NULL || rq.one == NULL)
        return -1;
    return 0;
}
