/* Compiled fast path of a small response output's frames (see _outgoing.py, which owns the
 * rules, and runtime/_frames/_wire.py, which calls these).
 *
 * open_small(stream, data, now) is OutgoingStream.start(is_sequence=False, unbounded=False)
 * then write_bytes(data, now) for a new coalescing stream and a small byte string (0 < len <
 * COALESCE_BYTES): the bytes are buffered, and the list holds the STREAM_START.
 * close_small(stream) is OutgoingStream.close() for an open stream whose buffered bytes fit
 * one CHUNK: [CHUNK, STREAM_END]. Each frame is made as the builders make it: a Frame whose
 * __dict__ holds the fields present, in wire-key order. Any other case answers None before
 * anything changed, and the Python methods decide.
 */
#include <string.h>

#include "_frames.h"

typedef struct {
    int configured;
    PyObject *frame_class;
    PyObject *ft_start, *ft_chunk, *ft_stream_end, *ft_end;
    PyObject *st_new, *st_open, *st_closed;
    PyObject *version, *zero;
    Py_ssize_t coalesce_bytes;
    PyObject *s_version, *s_frame_type, *s_id, *s_seq, *s_meta, *s_payload, *s_stream_id,
        *s_media_urn, *s_routing_id, *s_is_sequence, *s_output, *s_chunk_index, *s_checksum,
        *s_chunk_count, *s_eof, *s_exit_code, *s_progress, *s_message;
    /* OutgoingStream's slots */
    PyObject *a_rid, *a_xid, *a_stream_id, *a_media_urn, *a_max_chunk, *a_is_sequence,
        *a_unbounded, *a_output, *a_meta, *a_coalesce, *a_state, *a_chunks_sent, *a_buf,
        *a_buf_since;
} OutputTables;

static OutputTables ot;

/* A Frame of type ft with its head fields set (seq 0); its dict is returned borrowed through
 * *d. New reference, or NULL. */
static PyObject *
new_frame(PyObject *ft, PyObject *rid, PyObject **d)
{
    PyObject *dict = PyDict_New();
    if (dict == NULL)
        return NULL;
    if (PyDict_SetItem(dict, ot.s_version, ot.version) < 0 ||
        PyDict_SetItem(dict, ot.s_frame_type, ft) < 0 || PyDict_SetItem(dict, ot.s_id, rid) < 0 ||
        PyDict_SetItem(dict, ot.s_seq, ot.zero) < 0) {
        Py_DECREF(dict);
        return NULL;
    }
    PyObject *frame = PyBaseObject_Type.tp_new((PyTypeObject *)ot.frame_class, codec.empty_tuple,
                                               NULL);
    if (frame == NULL || PyObject_GenericSetDict(frame, dict, NULL) < 0) {
        Py_XDECREF(frame);
        Py_DECREF(dict);
        return NULL;
    }
    Py_DECREF(dict);
    *d = dict;
    return frame;
}

/* Set d[key] = value unless value is None. */
static int
set_present(PyObject *d, PyObject *key, PyObject *value)
{
    return value == Py_None ? 0 : PyDict_SetItem(d, key, value);
}

/* The stream's slots this path reads, as new references (NULL-terminated order below). */
enum { RID, XID, SID, MEDIA, OUTPUT, META, N_FIELDS };

static int
read_fields(PyObject *s, PyObject **v)
{
    PyObject *names[N_FIELDS] = {ot.a_rid, ot.a_xid, ot.a_stream_id, ot.a_media_urn, ot.a_output,
                                 ot.a_meta};
    for (int i = 0; i < N_FIELDS; i++) {
        if ((v[i] = PyObject_GetAttr(s, names[i])) == NULL) {
            for (int j = 0; j < i; j++)
                Py_CLEAR(v[j]);
            return -1;
        }
    }
    return 0;
}

static void
drop_fields(PyObject **v)
{
    for (int i = 0; i < N_FIELDS; i++)
        Py_CLEAR(v[i]);
}

/* An attribute compared by identity with want: 1 same, 0 not, -1 error. */
static int
attr_is(PyObject *o, PyObject *name, PyObject *want)
{
    PyObject *v = PyObject_GetAttr(o, name);
    if (v == NULL)
        return -1;
    int same = v == want;
    Py_DECREF(v);
    return same;
}

PyObject *
open_small(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "open_small(stream, data, now)");
        return NULL;
    }
    if (!ot.configured)
        Py_RETURN_NONE;
    PyObject *s = args[0], *data = args[1], *now = args[2];
    if (!PyBytes_CheckExact(data) || PyBytes_GET_SIZE(data) == 0 ||
        PyBytes_GET_SIZE(data) >= ot.coalesce_bytes)
        Py_RETURN_NONE;
    int ok;
    if ((ok = attr_is(s, ot.a_state, ot.st_new)) != 1 ||
        (ok = attr_is(s, ot.a_coalesce, Py_True)) != 1)
        return ok < 0 ? NULL : Py_NewRef(Py_None);
    PyObject *buf = PyObject_GetAttr(s, ot.a_buf);
    if (buf == NULL)
        return NULL;
    if (!PyByteArray_CheckExact(buf) || PyByteArray_GET_SIZE(buf) != 0) {
        Py_DECREF(buf);
        Py_RETURN_NONE;
    }
    PyObject *v[N_FIELDS], *d = NULL, *frame = NULL, *out = NULL;
    if (read_fields(s, v) < 0) {
        Py_DECREF(buf);
        return NULL;
    }
    /* STREAM_START as build.stream_start(rid, sid, media, xid=, is_sequence=False,
     * unbounded=False, output=, meta=) makes it */
    if ((frame = new_frame(ot.ft_start, v[RID], &d)) == NULL)
        goto fail;
    if (set_present(d, ot.s_meta, v[META]) < 0 || PyDict_SetItem(d, ot.s_stream_id, v[SID]) < 0 ||
        PyDict_SetItem(d, ot.s_media_urn, v[MEDIA]) < 0 ||
        set_present(d, ot.s_routing_id, v[XID]) < 0 ||
        PyDict_SetItem(d, ot.s_is_sequence, Py_False) < 0 ||
        set_present(d, ot.s_output, v[OUTPUT]) < 0)
        goto fail;
    if ((out = PyList_New(1)) == NULL)
        goto fail;
    /* the stream's state, as start() and write_bytes() leave it */
    Py_ssize_t n = PyBytes_GET_SIZE(data);
    if (PyByteArray_Resize(buf, n) < 0)
        goto fail;
    memcpy(PyByteArray_AS_STRING(buf), PyBytes_AS_STRING(data), (size_t)n);
    if (PyObject_SetAttr(s, ot.a_is_sequence, Py_False) < 0 ||
        PyObject_SetAttr(s, ot.a_unbounded, Py_False) < 0 ||
        PyObject_SetAttr(s, ot.a_state, ot.st_open) < 0 ||
        PyObject_SetAttr(s, ot.a_buf_since, now) < 0) {
        PyByteArray_Resize(buf, 0);
        goto fail;
    }
    PyList_SET_ITEM(out, 0, frame);
    drop_fields(v);
    Py_DECREF(buf);
    return out;
fail:
    Py_XDECREF(out);
    Py_XDECREF(frame);
    drop_fields(v);
    Py_DECREF(buf);
    return NULL;
}

PyObject *
close_small(PyObject *module, PyObject *stream)
{
    if (!ot.configured)
        Py_RETURN_NONE;
    PyObject *s = stream;
    int ok = attr_is(s, ot.a_state, ot.st_open);
    if (ok != 1)
        return ok < 0 ? NULL : Py_NewRef(Py_None);
    PyObject *buf = PyObject_GetAttr(s, ot.a_buf), *o = NULL;
    if (buf == NULL)
        return NULL;
    Py_ssize_t n = PyByteArray_CheckExact(buf) ? PyByteArray_GET_SIZE(buf) : 0, max_chunk = 0,
               index = 0;
    if (n > 0) {
        if ((o = PyObject_GetAttr(s, ot.a_max_chunk)) == NULL)
            goto error_buf;
        max_chunk = PyLong_CheckExact(o) ? PyLong_AsSsize_t(o) : -1;
        Py_CLEAR(o);
        if ((o = PyObject_GetAttr(s, ot.a_chunks_sent)) == NULL)
            goto error_buf;
        index = PyLong_CheckExact(o) ? PyLong_AsSsize_t(o) : -1;
        Py_CLEAR(o);
        if (PyErr_Occurred())
            goto error_buf;
    }
    if (n == 0 || n > max_chunk || index < 0) {
        Py_DECREF(buf);
        Py_RETURN_NONE;
    }
    PyObject *unbounded = PyObject_GetAttr(s, ot.a_unbounded);
    if (unbounded == NULL)
        goto error_buf;
    int is_unbounded = PyObject_IsTrue(unbounded);
    Py_DECREF(unbounded);
    if (is_unbounded < 0)
        goto error_buf;
    PyObject *v[N_FIELDS], *d = NULL, *chunk = NULL, *end = NULL, *payload = NULL, *sum = NULL,
                           *idx = NULL, *count = NULL, *out = NULL;
    if (read_fields(s, v) < 0)
        goto error_buf;
    /* the payload: the CBOR head of a byte string of n bytes, then the bytes */
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
    if ((payload = PyBytes_FromStringAndSize(NULL, hl + n)) == NULL)
        goto fail;
    memcpy(PyBytes_AS_STRING(payload), head, (size_t)hl);
    memcpy(PyBytes_AS_STRING(payload) + hl, PyByteArray_AS_STRING(buf), (size_t)n);
    sum = PyLong_FromUnsignedLongLong(
        fnv1a64((const unsigned char *)PyBytes_AS_STRING(payload), hl + n));
    idx = PyLong_FromSsize_t(index);
    count = PyLong_FromSsize_t(index + 1);
    if (sum == NULL || idx == NULL || count == NULL)
        goto fail;
    /* CHUNK as build.chunk(rid, sid, index, payload, xid=) makes it */
    if ((chunk = new_frame(ot.ft_chunk, v[RID], &d)) == NULL)
        goto fail;
    if (PyDict_SetItem(d, ot.s_payload, payload) < 0 ||
        PyDict_SetItem(d, ot.s_stream_id, v[SID]) < 0 ||
        set_present(d, ot.s_routing_id, v[XID]) < 0 ||
        PyDict_SetItem(d, ot.s_chunk_index, idx) < 0 || PyDict_SetItem(d, ot.s_checksum, sum) < 0)
        goto fail;
    /* STREAM_END as build.stream_end(rid, sid, count or None, xid=) makes it */
    if ((end = new_frame(ot.ft_stream_end, v[RID], &d)) == NULL)
        goto fail;
    if (PyDict_SetItem(d, ot.s_stream_id, v[SID]) < 0 ||
        set_present(d, ot.s_routing_id, v[XID]) < 0 ||
        (!is_unbounded && PyDict_SetItem(d, ot.s_chunk_count, count) < 0))
        goto fail;
    if ((out = PyList_New(2)) == NULL)
        goto fail;
    /* the stream's state, as close() leaves it */
    if (PyObject_SetAttr(s, ot.a_chunks_sent, count) < 0 ||
        PyObject_SetAttr(s, ot.a_state, ot.st_closed) < 0 || PyByteArray_Resize(buf, 0) < 0)
        goto fail;
    PyList_SET_ITEM(out, 0, chunk);
    PyList_SET_ITEM(out, 1, end);
    chunk = end = NULL;
    goto done;
fail:
    Py_CLEAR(out);
done:
    Py_XDECREF(chunk);
    Py_XDECREF(end);
    Py_XDECREF(payload);
    Py_XDECREF(sum);
    Py_XDECREF(idx);
    Py_XDECREF(count);
    drop_fields(v);
    Py_DECREF(buf);
    return out;
error_buf:
    Py_DECREF(buf);
    return NULL;
}

/* end_frame(rid, xid, progress, message): a response's END as build.end(rid, xid=xid,
 * progress=progress, message=message) makes it, or None when not configured. */
PyObject *
end_frame(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "end_frame(rid, xid, progress, message)");
        return NULL;
    }
    if (!ot.configured)
        Py_RETURN_NONE;
    PyObject *rid = args[0], *xid = args[1], *message = args[3], *d = NULL;
    PyObject *progress = PyNumber_Float(args[2]);
    if (progress == NULL)
        return NULL;
    PyObject *meta = PyDict_New(), *frame = NULL;
    if (meta == NULL || PyDict_SetItem(meta, ot.s_exit_code, ot.zero) < 0 ||
        PyDict_SetItem(meta, ot.s_progress, progress) < 0 ||
        set_present(meta, ot.s_message, message) < 0)
        goto done;
    if ((frame = new_frame(ot.ft_end, rid, &d)) == NULL)
        goto done;
    if (PyDict_SetItem(d, ot.s_meta, meta) < 0 || PyDict_SetItem(d, ot.s_eof, Py_True) < 0 ||
        set_present(d, ot.s_routing_id, xid) < 0)
        Py_CLEAR(frame);
done:
    Py_DECREF(progress);
    Py_XDECREF(meta);
    return frame;
}

/* configure_outputs(frame_class, frame_types, states, version, coalesce_bytes): the Frame
 * class, (STREAM_START, CHUNK, STREAM_END, END), OutState's (NEW, OPEN, CLOSED), the protocol
 * version and COALESCE_BYTES. */
PyObject *
configure_outputs(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5 || !PyType_Check(args[0]) || !PyTuple_Check(args[1]) ||
        PyTuple_GET_SIZE(args[1]) != 4 || !PyTuple_Check(args[2]) ||
        PyTuple_GET_SIZE(args[2]) != 3 || !PyLong_Check(args[3]) || !PyLong_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError, "configure_outputs(frame_class, frame_types, states, "
                                         "version, coalesce_bytes)");
        return NULL;
    }
    Py_ssize_t coalesce = PyLong_AsSsize_t(args[4]);
    if (coalesce == -1 && PyErr_Occurred())
        return NULL;
    if (ot.s_version == NULL) {
#define INTERN(var, text) \
    if ((ot.var = PyUnicode_InternFromString(text)) == NULL) return NULL
        INTERN(s_version, "version");
        INTERN(s_frame_type, "frame_type");
        INTERN(s_id, "id");
        INTERN(s_seq, "seq");
        INTERN(s_meta, "meta");
        INTERN(s_payload, "payload");
        INTERN(s_stream_id, "stream_id");
        INTERN(s_media_urn, "media_urn");
        INTERN(s_routing_id, "routing_id");
        INTERN(s_is_sequence, "is_sequence");
        INTERN(s_output, "output");
        INTERN(s_chunk_index, "chunk_index");
        INTERN(s_checksum, "checksum");
        INTERN(s_chunk_count, "chunk_count");
        INTERN(s_eof, "eof");
        INTERN(s_exit_code, "exit_code");
        INTERN(s_progress, "progress");
        INTERN(s_message, "message");
        INTERN(a_rid, "rid");
        INTERN(a_xid, "xid");
        INTERN(a_stream_id, "stream_id");
        INTERN(a_media_urn, "media_urn");
        INTERN(a_max_chunk, "max_chunk");
        INTERN(a_is_sequence, "is_sequence");
        INTERN(a_unbounded, "unbounded");
        INTERN(a_output, "output");
        INTERN(a_meta, "meta");
        INTERN(a_coalesce, "coalesce");
        INTERN(a_state, "state");
        INTERN(a_chunks_sent, "chunks_sent");
        INTERN(a_buf, "_buf");
        INTERN(a_buf_since, "_buf_since");
#undef INTERN
        if ((ot.zero = PyLong_FromLong(0)) == NULL)
            return NULL;
    }
    ot.configured = 0;
    Py_XSETREF(ot.frame_class, Py_NewRef(args[0]));
    Py_XSETREF(ot.ft_start, Py_NewRef(PyTuple_GET_ITEM(args[1], 0)));
    Py_XSETREF(ot.ft_chunk, Py_NewRef(PyTuple_GET_ITEM(args[1], 1)));
    Py_XSETREF(ot.ft_stream_end, Py_NewRef(PyTuple_GET_ITEM(args[1], 2)));
    Py_XSETREF(ot.ft_end, Py_NewRef(PyTuple_GET_ITEM(args[1], 3)));
    Py_XSETREF(ot.st_new, Py_NewRef(PyTuple_GET_ITEM(args[2], 0)));
    Py_XSETREF(ot.st_open, Py_NewRef(PyTuple_GET_ITEM(args[2], 1)));
    Py_XSETREF(ot.st_closed, Py_NewRef(PyTuple_GET_ITEM(args[2], 2)));
    Py_XSETREF(ot.version, Py_NewRef(args[3]));
    ot.coalesce_bytes = coalesce;
    ot.configured = 1;
    Py_RETURN_NONE;
}
