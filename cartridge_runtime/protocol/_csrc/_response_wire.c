/* The host's response path straight from the bytes: route_block reads the frames at the
 * front of a block the cartridge wrote into their fields, as the codec's reader would read
 * them (_frame_read.c), and routes each as route_response routes the Frame the decoder
 * makes (_response.c), with no Frame made, up to the first frame it does not take whole. The
 * reading takes only the plain case (the keys of the four kinds of a small response, in wire
 * order, values of the types the reader stores, ids the decoder's cache holds); anything
 * else stops it before that frame, which the decoder and the Python path then read.
 */
#include <string.h>

#include "_response.h"

/* Wire keys of the fields a response frame of the four kinds may carry (others: Python). */
enum { W_VERSION, W_TYPE, W_ID, W_SEQ, W_META, W_PAYLOAD, W_EOF, W_SID, W_MEDIA, W_ROUTING,
       W_INDEX, W_COUNT, W_SUM, W_ISSEQ, W_UNB, W_OUTPUT, W_FIELDS };
static const char *wire_names[W_FIELDS] = {"version", "frame_type", "id", "seq", "meta",
                                           "payload", "eof", "stream_id", "media_urn",
                                           "routing_id", "chunk_index", "chunk_count",
                                           "checksum", "is_sequence", "unbounded", "output"};
/* The names END's meta is checked for (interned with the table). */
static PyObject *s_exit_code, *s_progress, *s_message;
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
    if ((s_exit_code = PyUnicode_InternFromString("exit_code")) == NULL ||
        (s_progress = PyUnicode_InternFromString("progress")) == NULL ||
        (s_message = PyUnicode_InternFromString("message")) == NULL) {
        PyErr_Clear();
        return 0;
    }
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
    PyObject *v = PyDict_GetItemWithError(meta, s_exit_code);
    if (v != NULL && v != Py_None && !PyLong_CheckExact(v))
        return 0;
    v = v == NULL && PyErr_Occurred() ? NULL : PyDict_GetItemWithError(meta, s_progress);
    if (v != NULL && v != Py_None && !PyLong_CheckExact(v) && !PyFloat_CheckExact(v))
        return 0;
    v = v == NULL && PyErr_Occurred() ? NULL : PyDict_GetItemWithError(meta, s_message);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
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
            taken = response_route(args[0], &fr);
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
