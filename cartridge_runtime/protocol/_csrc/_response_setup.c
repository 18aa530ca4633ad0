/* The set-up of the host's response path: configure_response checks the classes the engine
 * registers and finds the slots the router reads and writes (see _call_path.py);
 * response_init interns the names it looks up.
 */
#include <string.h>

#include "_response.h"
#include "structmember.h"

static const char *flow_names[F_COUNT] = {"done", "abandoned", "observation", "xid",
                                          "receiver", "frames", "_queued", "events",
                                          "_outputs", "_waiter", "end_meta"};
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
    if (ready_init() < 0)
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
