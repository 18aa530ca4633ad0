/* Optional compiled fast paths for the frame codec (see _codec.py, which owns the rules).
 *
 * Every function here and in _frame_read.c and _frame_write.c handles the common, valid case only and answers None for anything
 * else, so that the pure-Python code in _codec.py decides: it either accepts the frame in
 * a way this file does not cover (keys out of order, CBOR nulls, non-integer keys...) or
 * raises the precise error. The one error raised from here is the one the Python path
 * would raise at the same point, because it comes from the same Python callables
 * (the id constructor, the per-type checks) handed over by configure().
 *
 * Python without a C compiler simply runs without this module: _codec.py falls back to
 * its own code, which gives the same frames and the same bytes.
 */
#include <string.h>

#include "_frames.h"

CodecTables codec;

static PyObject *
configure(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *names[] = {"spec", "dumps", "frame_types",
                            "frame_type_ints", "id_cache", "new_id", "frame_class",
                            "checks", "required", "key_of", "stream_start", "hard_cap",
                            "id_class", "id_cache_max", NULL};
    PyObject *ic2;
    Py_ssize_t icmax;
    PyObject *spec, *du, *ft, *fti, *ic, *ni, *fc, *ck, *rq, *ko, *ss;
    Py_ssize_t cap;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!OO!O!O!OOO!O!O!OnOn", names,
                                     &PyDict_Type, &spec, &du,
                                     &PyDict_Type, &ft, &PyDict_Type, &fti, &PyDict_Type, &ic,
                                     &ni, &fc, &PyDict_Type, &ck, &PyDict_Type, &rq,
                                     &PyDict_Type, &ko, &ss, &cap, &ic2, &icmax))
        return NULL;
    for (int k = 0; k < MAX_KEY; k++) {
        Py_CLEAR(codec.key_name[k]);
        codec.key_kind[k] = -1;
    }
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(spec, &pos, &key, &value)) {
        long k = PyLong_AsLong(key);
        if (k < 0 || k >= MAX_KEY || !PyTuple_Check(value) || PyTuple_GET_SIZE(value) != 2) {
            PyErr_SetString(PyExc_ValueError, "spec: key out of range or bad entry");
            return NULL;
        }
        PyObject *name = PyTuple_GET_ITEM(value, 0);
        long kind = PyLong_AsLong(PyTuple_GET_ITEM(value, 1));
        if (!PyUnicode_CheckExact(name) || kind < K_INT || kind > K_CHECKSUM) {
            PyErr_SetString(PyExc_ValueError, "spec: bad name or kind");
            return NULL;
        }
        Py_INCREF(name);
        PyUnicode_InternInPlace(&name);
        codec.key_name[k] = name;
        codec.key_kind[k] = (int)kind;
    }
#define KEEP(var, val) do { Py_INCREF(val); Py_XSETREF(var, val); } while (0)
    KEEP(codec.dumps, du);
    KEEP(codec.frame_types, ft);
    KEEP(codec.frame_type_ints, fti);
    KEEP(codec.id_cache, ic);
    KEEP(codec.new_id, ni);
    if (!PyType_Check(fc)) {
        PyErr_SetString(PyExc_TypeError, "frame_class must be a class");
        return NULL;
    }
    KEEP(codec.frame_class, fc);
    if (!PyType_Check(ic2)) {
        PyErr_SetString(PyExc_TypeError, "id_class must be a class");
        return NULL;
    }
    KEEP(codec.id_class, ic2);
    codec.id_cache_max = icmax;
    KEEP(codec.checks, ck);
    KEEP(codec.required, rq);
    KEEP(codec.key_of, ko);
    KEEP(codec.stream_start, ss);
#undef KEEP
    codec.hard_cap = cap;
    codec.configured = 1;
    Py_RETURN_NONE;
}

/* 1 when configure() has run; 0 with RuntimeError set. */
static int
ready(void)
{
    if (codec.configured)
        return 1;
    PyErr_SetString(PyExc_RuntimeError, "_speedups.configure() was not called");
    return 0;
}

/* The arguments (buffer, a, b) shared by decode_direct and take_frame: 1 with ``view`` held
 * (the caller releases it), 0 with an exception set. */
static int
buffer_args(PyObject *const *args, Py_ssize_t nargs, const char *usage, Py_buffer *view,
            Py_ssize_t *a, Py_ssize_t *b)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, usage);
        return 0;
    }
    if (!ready())
        return 0;
    *a = PyLong_AsSsize_t(args[1]);
    *b = PyLong_AsSsize_t(args[2]);
    if ((*a == -1 || *b == -1) && PyErr_Occurred())
        return 0;
    return PyObject_GetBuffer(args[0], view, PyBUF_SIMPLE) == 0;
}

static PyObject *
map_to_frame(PyObject *self, PyObject *m)
{
    if (!ready())
        return NULL;
    return frame_from_map(m, 1);
}

/* decode_direct(data, start, stop) -> Frame | None: a frame body read with the direct reader
 * (frame_read), at any size (no cbor2 call; a payload is copied once, straight out of data). */
static PyObject *
decode_direct(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    Py_ssize_t start, stop;
    if (!buffer_args(args, nargs, "decode_direct(data, start, stop)", &view, &start, &stop))
        return NULL;
    if (start < 0 || stop > view.len || start > stop) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "decode_direct: range outside the data");
        return NULL;
    }
    CborReader r = {(const unsigned char *)view.buf + start,
                    (const unsigned char *)view.buf + stop};
    PyObject *result = frame_read(&r);
    PyBuffer_Release(&view);
    return result;
}

/* take_frame(data, offset, max_frame) -> (Frame, end) | None: the frame whose length prefix
 * starts at ``offset`` of ``data`` (bytes or a buffer) and where it ends, for the decoder's
 * in-place path. None when the frame is incomplete, longer than max_frame, or outside the
 * direct reader's subset: the decoder's Python path then decides (and names any error). */
static PyObject *
take_frame(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    Py_ssize_t off, max_frame;
    if (!buffer_args(args, nargs, "take_frame(data, offset, max_frame)", &view, &off, &max_frame))
        return NULL;
    PyObject *result = NULL;
    const unsigned char *base = (const unsigned char *)view.buf;
    if (off < 0 || view.len - off < PREFIX_LEN) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    const unsigned char *p = base + off;
    Py_ssize_t n = ((Py_ssize_t)p[0] << 24) | ((Py_ssize_t)p[1] << 16) | ((Py_ssize_t)p[2] << 8) |
                   (Py_ssize_t)p[3];
    if (n > max_frame || n > view.len - off - PREFIX_LEN) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    Py_ssize_t end = off + PREFIX_LEN + n;
    CborReader r = {p + PREFIX_LEN, base + end};
    PyObject *frame = frame_read(&r);
    if (frame == NULL || frame == Py_None) {
        result = frame;
        goto done;
    }
    PyObject *pos = PyLong_FromSsize_t(end);
    if (pos == NULL) {
        Py_DECREF(frame);
        goto done;
    }
    result = PyTuple_New(2);
    if (result == NULL) {
        Py_DECREF(frame);
        Py_DECREF(pos);
        goto done;
    }
    PyTuple_SET_ITEM(result, 0, frame);
    PyTuple_SET_ITEM(result, 1, pos);
done:
    PyBuffer_Release(&view);
    return result;
}

/* scan_prefixes(data, offset, max_frame) -> int: walk the length prefixes of ``data`` from
 * ``offset`` (each frame's prefix and body, skipped) while a whole prefix is there; the offset
 * of the first prefix not yet complete, or -1 - the offset of the first over ``max_frame``
 * (the decoder's Python loop then names it). */
static PyObject *
scan_prefixes(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    Py_ssize_t scan, max_frame;
    if (!buffer_args(args, nargs, "scan_prefixes(data, offset, max_frame)", &view, &scan,
                     &max_frame))
        return NULL;
    const unsigned char *base = (const unsigned char *)view.buf;
    while (scan >= 0 && view.len - scan >= PREFIX_LEN) {
        const unsigned char *p = base + scan;
        Py_ssize_t n = ((Py_ssize_t)p[0] << 24) | ((Py_ssize_t)p[1] << 16) |
                       ((Py_ssize_t)p[2] << 8) | (Py_ssize_t)p[3];
        if (n > max_frame) {
            scan = -1 - scan;
            break;
        }
        scan += PREFIX_LEN + n;
    }
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(scan);
}

/* take_frames(data, offset, max_frame) -> (list of Frame, end): the frames take_frame would
 * give one after another from ``offset``, in one call (a block of small frames costs one call
 * instead of one per frame). It stops before the first frame take_frame answers None for, and
 * before one that raises unless it is the first (which raises here): the decoder's next call
 * then meets that frame again and decides about it exactly as it would have. */
static PyObject *
take_frames(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    Py_ssize_t off, max_frame;
    if (!buffer_args(args, nargs, "take_frames(data, offset, max_frame)", &view, &off,
                     &max_frame))
        return NULL;
    const unsigned char *base = (const unsigned char *)view.buf;
    PyObject *list = PyList_New(0);
    if (list == NULL)
        goto fail;
    while (off >= 0 && view.len - off >= PREFIX_LEN) {
        const unsigned char *p = base + off;
        Py_ssize_t n = ((Py_ssize_t)p[0] << 24) | ((Py_ssize_t)p[1] << 16) |
                       ((Py_ssize_t)p[2] << 8) | (Py_ssize_t)p[3];
        if (n > max_frame || n > view.len - off - PREFIX_LEN)
            break;
        Py_ssize_t end = off + PREFIX_LEN + n;
        CborReader r = {p + PREFIX_LEN, base + end};
        PyObject *frame = frame_read(&r);
        if (frame == NULL) {
            if (PyList_GET_SIZE(list) == 0)
                goto fail;
            PyErr_Clear();
            break;
        }
        if (frame == Py_None) {
            Py_DECREF(frame);
            break;
        }
        int failed = PyList_Append(list, frame);
        Py_DECREF(frame);
        if (failed)
            goto fail;
        off = end;
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("(Nn)", list, off);
fail:
    Py_XDECREF(list);
    PyBuffer_Release(&view);
    return NULL;
}

/* encode_small(frame_dict, seq, max_frame) -> bytes | None: prefix and body of a frame
 * without a large payload; None when the payload is large or the body exceeds a limit
 * (Python's path then takes over, and names the error). */
PyObject *
encode_small(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyDict_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "encode_small(frame_dict, seq, max_frame)");
        return NULL;
    }
    if (!ready())
        return NULL;
    PyObject *d = args[0];
    Py_ssize_t max_frame = PyLong_AsSsize_t(args[2]);
    if (max_frame == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    PyObject *payload = PyDict_GetItemWithError(d, codec.s_payload);
    if (payload != NULL && payload != Py_None) {
        Py_ssize_t plen = PyObject_Length(payload);
        if (plen < 0) {
            PyErr_Clear();
            Py_RETURN_NONE;
        }
        if (plen >= 4096)
            Py_RETURN_NONE;
    }
    else if (PyErr_Occurred())
        return NULL;
    CborWriter w;
    cbor_writer_init(&w, PREFIX_LEN);
    int rc = frame_write(&w, d, args[1]);
    if (rc == 1) {
        PyObject *wire = frame_prefix_in_place(&w, max_frame);
        cbor_writer_free(&w);
        return wire;
    }
    cbor_writer_free(&w);
    if (rc == 0)
        return NULL;
    /* Outside the direct writer's subset: build the map and let the general writer, or
     * cbor2, encode it (and raise what it raises). */
    PyObject *m = frame_map(d, args[1]);
    if (m == NULL)
        return NULL;
    cbor_writer_init(&w, 0);
    rc = cbor_write_item(&w, m, 0);
    PyObject *wire;
    if (rc == 1)
        wire = frame_prefixed(w.buf, w.len, max_frame);
    else if (rc == 0)
        wire = NULL;
    else {
        /* A value outside the writer's subset: cbor2 encodes it (and raises what it raises). */
        PyObject *body = PyObject_CallOneArg(codec.dumps, m);
        if (body == NULL)
            wire = NULL;
        else if (!PyBytes_CheckExact(body))
            wire = Py_NewRef(Py_None);
        else
            wire = frame_prefixed((const unsigned char *)PyBytes_AS_STRING(body), PyBytes_GET_SIZE(body),
                            max_frame);
        Py_XDECREF(body);
    }
    cbor_writer_free(&w);
    Py_DECREF(m);
    return wire;
}

/* The hash of a MessageId: its value's (ids of equal value are equal, and a bytes id never
 * equals an int one). Installed as MessageId.__hash__ through an instance method, so that
 * hashing an id, which every dict keyed by request id does per frame, runs no Python. */
static PyObject *
id_hash(PyObject *module, PyObject *id)
{
    PyObject *v = PyObject_GetAttr(id, codec.s_value);
    if (v == NULL)
        return NULL;
    Py_hash_t h = PyObject_Hash(v);
    Py_DECREF(v);
    return h == -1 ? NULL : PyLong_FromSsize_t(h);
}

static PyMethodDef id_hash_def = {"__hash__", id_hash, METH_O, "hash(self.value)"};

static PyObject *
id_hash_method(PyObject *module, PyObject *unused)
{
    PyObject *f = PyCFunction_New(&id_hash_def, NULL);
    if (f == NULL)
        return NULL;
    PyObject *m = PyInstanceMethod_New(f);
    Py_DECREF(f);
    return m;
}

static PyMethodDef methods[] = {
    {"id_hash_method", id_hash_method, METH_NOARGS,
     "A MessageId.__hash__ in C: the hash of the id's value."},
    {"configure", (PyCFunction)(void (*)(void))configure, METH_VARARGS | METH_KEYWORDS,
     "Hand over the codec's tables and callables (once, from _codec)."},
    {"map_to_frame", map_to_frame, METH_O,
     "A validated Frame from a decoded map, or None to let the Python path decide."},
    {"decode_direct", (PyCFunction)(void (*)(void))decode_direct, METH_FASTCALL,
     "decode_direct(data, start, stop) -> Frame | None (None: let Python read it)."},
    {"take_frame", (PyCFunction)(void (*)(void))take_frame, METH_FASTCALL,
     "take_frame(data, offset, max_frame) -> (Frame, end) | None (None: let Python read it)."},
    {"scan_prefixes", (PyCFunction)(void (*)(void))scan_prefixes, METH_FASTCALL,
     "scan_prefixes(data, offset, max_frame) -> offset (negative: -1 - a prefix over the limit)."},
    {"take_frames", (PyCFunction)(void (*)(void))take_frames, METH_FASTCALL,
     "take_frames(data, offset, max_frame) -> (frames, end): take_frame over a block."},
    {"encode_small", (PyCFunction)(void (*)(void))encode_small, METH_FASTCALL,
     "encode_small(frame_dict, seq, max_frame) -> bytes | None (small frames only)."},
    {"configure_receiver", (PyCFunction)(void (*)(void))configure_receiver,
     METH_VARARGS | METH_KEYWORDS,
     "Hand over the request receiver's tables and classes (once, from _request_state)."},
    {"receive_fast", (PyCFunction)(void (*)(void))receive_fast, METH_FASTCALL,
     "receive_fast(receiver, frame) -> events | None (None: let Python decide)."},
    {"serve_flow_fast", (PyCFunction)(void (*)(void))serve_flow_fast, METH_FASTCALL,
     "serve_flow_fast(requests, fallback, frame): a request's common valid frame, else "
     "fallback(frame)."},
    {"encode_flow", (PyCFunction)(void (*)(void))encode_flow, METH_FASTCALL,
     "encode_flow(frames, max_frame, out) -> index of the first frame left to Python."},
    {"configure_numbering", configure_numbering, METH_O,
     "Hand over the kind of each frame type code for numbering (once, from _seq)."},
    {"encode_numbered", (PyCFunction)(void (*)(void))encode_numbered, METH_FASTCALL,
     "encode_numbered(counters, closed, max_closed, frames, start, out, max_frame) -> index "
     "of the first frame left to Python."},
    {"configure_response", (PyCFunction)(void (*)(void))configure_response,
     METH_VARARGS | METH_KEYWORDS,
     "Hand over the classes of the host's response path (once, from the engine)."},
    {"route_response", (PyCFunction)(void (*)(void))route_response, METH_FASTCALL,
     "route_response(core, fallback, frame): a response's common valid frame delivered, "
     "else fallback(frame)."},
    {"route_block", (PyCFunction)(void (*)(void))route_block, METH_FASTCALL,
     "route_block(core, data, max_frame) -> the offset of the first frame it left to the "
     "decoder (the frames before it read and routed as route_response routes them)."},
    {"new_receiver", (PyCFunction)(void (*)(void))new_receiver, METH_FASTCALL,
     "new_receiver(rid, xid, initial_credit) -> the BodyReceiver of a call's response."},
    {"ready", ready_value, METH_O, "ready(value) -> an awaitable that gives value at once."},
    {"configure_ids", configure_ids, METH_O,
     "Hand over the OS's random source for new ids (os.urandom)."},
    {"forget_ids", forget_ids, METH_NOARGS, "Drop the random bytes fetched ahead (after fork)."},
    {"new_id", new_id, METH_NOARGS, "new_id() -> a fresh random MessageId, in the id cache."},
    {"int_id", int_id, METH_O, "int_id(n) -> MessageId(n), in the id cache."},
    {"configure_request", (PyCFunction)(void (*)(void))configure_request,
     METH_VARARGS | METH_KEYWORDS,
     "Hand over the frame class and constants of a small request's frames (once)."},
    {"request_frames", (PyCFunction)(void (*)(void))request_frames, METH_FASTCALL,
     "request_frames(rid, xid, cap, inputs, max_chunk, credit, max_total) -> frames | None."},
    {"configure_delivery", (PyCFunction)(void (*)(void))configure_delivery, METH_FASTCALL,
     "Hand over the frame types, event classes and mailbox entries of the session's path."},
    {"deliver_flow", (PyCFunction)(void (*)(void))deliver_flow, METH_FASTCALL,
     "deliver_flow(conn, requests, outbox, ready_table, active, fallback, deliver, frame): a "
     "request's body frame received and delivered, else fallback(frame)."},
    {"queue_frames", (PyCFunction)(void (*)(void))queue_frames, METH_FASTCALL,
     "queue_frames(outbox, stream, frames, chunk_type) -> how many were queued in place."},
    {"configure_outputs", (PyCFunction)(void (*)(void))configure_outputs, METH_FASTCALL,
     "Hand over the frame class, types, stream states and constants of a small output."},
    {"open_small", (PyCFunction)(void (*)(void))open_small, METH_FASTCALL,
     "open_small(stream, data, now) -> [STREAM_START] with data buffered, or None."},
    {"close_small", close_small, METH_O,
     "close_small(stream) -> [CHUNK, STREAM_END] of its buffered bytes, or None."},
    {"end_frame", (PyCFunction)(void (*)(void))end_frame, METH_FASTCALL,
     "end_frame(rid, xid, progress, message) -> a response's END, or None."},
    {"held_while_running", (PyCFunction)(void (*)(void))held_while_running, METH_FASTCALL,
     "held_while_running(outbox, coro) -> coro awaited with outbox held while it runs."},
    {"configure_served", (PyCFunction)(void (*)(void))configure_served, METH_FASTCALL,
     "configure_served(served_class, receiver_class, queued, expect_req, credit_dir)."},
    {"new_served", (PyCFunction)(void (*)(void))new_served, METH_FASTCALL,
     "new_served(rid, xid, cap, handler_urn, handler, pool, initial_credit) -> a ServedRequest."},
    {"slot_maker", (PyCFunction)(void (*)(void))slot_maker, METH_FASTCALL,
     "slot_maker(cls, names) -> what make_slotted makes instances of cls with."},
    {"make_slotted", (PyCFunction)(void (*)(void))make_slotted, METH_FASTCALL,
     "make_slotted(maker, *values) -> an instance with its slots set, no __init__ run."},
    {"install_id_hash", install_id_hash, METH_O,
     "install_id_hash(MessageId) -> bool: its hash slot reads hash(value) straight."},
    {"request_wire", (PyCFunction)(void (*)(void))request_wire, METH_FASTCALL,
     "request_wire(rid, xid, cap, inputs, max_chunk, credit, max_total, max_frame) -> the "
     "request's frames encoded, numbered 0, 1, 2... | None."},
    {"configure_forwarding", configure_forwarding, METH_O,
     "Hand over the frame types a cartridge host forwards (once)."},
    {"relay_to_cartridge", (PyCFunction)(void (*)(void))relay_to_cartridge, METH_FASTCALL,
     "relay_to_cartridge(forwards, fallback, frame): a host forwards a switch's frame."},
    {"relay_to_switch", (PyCFunction)(void (*)(void))relay_to_switch, METH_FASTCALL,
     "relay_to_switch(route, frame): a host forwards a cartridge's frame."},
    {"relay_to_app", (PyCFunction)(void (*)(void))relay_to_app, METH_FASTCALL,
     "relay_to_app(core, fallback, frame): a switch routes a host's response frame."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_speedups",
    "Compiled fast paths of the frame codec (optional; see _codec.py).", -1, methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
#define INTERN(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL
    INTERN(codec.s_value, "value");
    INTERN(codec.s_version, "version");
    INTERN(codec.s_frame_type, "frame_type");
    INTERN(codec.s_id, "id");
    INTERN(codec.s_seq, "seq");
    INTERN(codec.s_output, "output");
    INTERN(codec.s_payload, "payload");
#undef INTERN
    /* Small ints are cached singletons, so key identity tests against these are exact. */
    codec.i_one = PyLong_FromLong(1);
    codec.i_two = PyLong_FromLong(2);
    codec.i_three = PyLong_FromLong(3);
    codec.i_thirteen = PyLong_FromLong(13);
    codec.empty_tuple = PyTuple_New(0);
    if (!codec.i_one || !codec.i_two || !codec.i_three || !codec.i_thirteen || !codec.empty_tuple)
        return NULL;
    if (receiver_init() < 0 || response_init() < 0 || request_init() < 0)
        return NULL;
    return PyModule_Create(&module);
}
