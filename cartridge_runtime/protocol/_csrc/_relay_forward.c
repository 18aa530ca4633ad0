/* Compiled forwarding of a cartridge host (see relay/_forward.py, which names the rules, and
 * engine/_relay/_switch_end.py, which owns the table).
 *
 * A host relays each body frame of a request between the switch's socket and the
 * cartridge's pipe with only its id and routing id rewritten (and, toward the cartridge, its
 * seq renumbered on the cartridge's flow): RLY-18. These two functions do that for the common
 * frames of a request whose route is joined, encoding the rewritten frame straight onto the
 * outbox that is held for the block being dispatched. Everything else, every unusual case
 * included, goes to the Python path before anything has changed, and Python decides.
 *
 * to_cartridge(forwards, fallback, frame): a frame from the switch. forwards maps the
 * switch's request id to (new id, new routing id, counters, closed, max_closed, outbox,
 * connection, batch): the cartridge's numbering (SeqAssigner's dicts, keyed by raw values),
 * its outbox, and the link's batch(connection), which holds that outbox for the block.
 *
 * to_app(core, fallback, frame), in a switch: see below.
 *
 * to_switch(route, frame): a frame from the cartridge. route is (link, id, routing id,
 * switch end, outbox, batch, max_frame, fallback, close); the frame keeps its seq (a host's
 * frames keep theirs on the link); after the END, close() ends the link as its own on_frame
 * would.
 */
#include "_frames.h"

static struct {
    int configured;
    PyObject *ft_start, *ft_chunk, *ft_stream_end, *ft_end;
    PyObject *s_frame_type, *s_id, *s_routing_id, *s_seq, *s_value, *s_dict, *s_out, *s_count,
        *s_hold, *s_closed, *s_max_frame, *s_done, *s_death, *s_flows, *s_frames, *s_popitem;
} fw;

/* An int attribute of o; -1 with an exception (or when it is not an int). */
static Py_ssize_t
int_attr(PyObject *o, PyObject *name)
{
    PyObject *v = PyObject_GetAttr(o, name);
    if (v == NULL)
        return -1;
    Py_ssize_t n = PyLong_Check(v) ? PyLong_AsSsize_t(v) : -1;
    Py_DECREF(v);
    if (n == -1 && !PyErr_Occurred())
        PyErr_SetString(PyExc_TypeError, "relay forwarding: an int attribute that is not one");
    return n;
}

/* Whether attribute name of o is (identically) want: 1, 0, or -1 with an exception. */
static int
attr_is(PyObject *o, PyObject *name, PyObject *want)
{
    PyObject *v = PyObject_GetAttr(o, name);
    if (v == NULL)
        return -1;
    Py_DECREF(v); /* compared by identity only */
    return v == want;
}

/* Make sure outbox is held for the block being dispatched: batch(arg) when it is not.
 * 1 held, 0 not (outside a block), -1 an exception. */
static int
held(PyObject *outbox, PyObject *batch, PyObject *arg)
{
    Py_ssize_t n = int_attr(outbox, fw.s_hold);
    if (n < 0)
        return -1;
    if (n > 0)
        return 1;
    PyObject *r = PyObject_CallOneArg(batch, arg);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    n = int_attr(outbox, fw.s_hold);
    return n < 0 ? -1 : n > 0;
}

/* A copy of the frame's dict with id and routing id rewritten; NULL with no exception when
 * the frame is unusual (no routing id to replace, a new one that is None). */
static PyObject *
rewritten(PyObject *frame, PyObject *new_id, PyObject *new_xid)
{
    if (new_xid == Py_None)
        return NULL;
    PyObject *d = PyObject_GetAttr(frame, fw.s_dict);
    if (d == NULL)
        return NULL;
    if (!PyDict_CheckExact(d)) {
        Py_DECREF(d);
        return NULL;
    }
    PyObject *old = PyDict_GetItemWithError(d, fw.s_routing_id);
    if (old == NULL || old == Py_None) {
        Py_DECREF(d);
        return NULL;
    }
    PyObject *copy = PyDict_Copy(d);
    Py_DECREF(d);
    if (copy == NULL)
        return NULL;
    if (PyDict_SetItem(copy, fw.s_id, new_id) < 0 ||
        PyDict_SetItem(copy, fw.s_routing_id, new_xid) < 0) {
        Py_DECREF(copy);
        return NULL;
    }
    return copy;
}

/* Queue wire bytes on outbox as its push would: onto _out, one more frame counted. */
static int
queue_wire(PyObject *outbox, PyObject *wire)
{
    PyObject *out = PyObject_GetAttr(outbox, fw.s_out);
    if (out == NULL)
        return -1;
    int rc = PyList_Check(out) ? PyList_Append(out, wire) : -1;
    Py_DECREF(out);
    if (rc < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "relay forwarding: an outbox queue that is not a list");
        return -1;
    }
    Py_ssize_t count = int_attr(outbox, fw.s_count);
    if (count < 0)
        return -1;
    PyObject *more = PyLong_FromSsize_t(count + 1);
    if (more == NULL)
        return -1;
    rc = PyObject_SetAttr(outbox, fw.s_count, more);
    Py_DECREF(more);
    return rc;
}

static PyObject *
fall_back(PyObject *fallback, PyObject *frame)
{
    if (PyErr_Occurred())
        return NULL;
    return PyObject_CallOneArg(fallback, frame);
}

/* to_cartridge(forwards, fallback, frame) -> None: see the top of the file. */
PyObject *
relay_to_cartridge(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyDict_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "to_cartridge(forwards, fallback, frame)");
        return NULL;
    }
    PyObject *forwards = args[0], *fallback = args[1], *frame = args[2];
    if (!fw.configured || PyDict_GET_SIZE(forwards) == 0)
        return PyObject_CallOneArg(fallback, frame);
    PyObject *ft = PyObject_GetAttr(frame, fw.s_frame_type);
    if (ft == NULL)
        return NULL;
    Py_DECREF(ft); /* compared by identity; the enum member outlives this call */
    int terminal = ft == fw.ft_end;
    if (!terminal && ft != fw.ft_chunk && ft != fw.ft_start && ft != fw.ft_stream_end)
        return PyObject_CallOneArg(fallback, frame);
    PyObject *fid = PyObject_GetAttr(frame, fw.s_id);
    if (fid == NULL)
        return NULL;
    PyObject *entry = PyDict_GetItemWithError(forwards, fid);
    Py_DECREF(fid);
    if (entry == NULL || !PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 8)
        return fall_back(fallback, frame);
    Py_INCREF(entry);
    PyObject *new_id = PyTuple_GET_ITEM(entry, 0), *new_xid = PyTuple_GET_ITEM(entry, 1),
             *counters = PyTuple_GET_ITEM(entry, 2), *closed = PyTuple_GET_ITEM(entry, 3),
             *outbox = PyTuple_GET_ITEM(entry, 5), *conn = PyTuple_GET_ITEM(entry, 6),
             *batch = PyTuple_GET_ITEM(entry, 7);
    Py_ssize_t max_closed = PyLong_AsSsize_t(PyTuple_GET_ITEM(entry, 4));
    PyObject *d = NULL, *key = NULL, *rv = NULL, *xv = NULL, *seq = NULL, *wire = NULL,
             *max_frame = NULL, *result = NULL;
    int taken = 0;
    if (max_closed < 0 || !PyDict_Check(counters))
        goto done;
    int ok = attr_is(outbox, fw.s_closed, Py_False);
    if (ok != 1)
        goto done;
    if ((ok = held(outbox, batch, conn)) != 1)
        goto done;
    if ((d = rewritten(frame, new_id, new_xid)) == NULL)
        goto done;
    if ((rv = PyObject_GetAttr(new_id, fw.s_value)) == NULL ||
        (xv = PyObject_GetAttr(new_xid, fw.s_value)) == NULL ||
        (key = PyTuple_Pack(2, rv, xv)) == NULL)
        goto done;
    int straggler = PyDict_Contains(closed, key);
    if (straggler != 0)
        goto done; /* Python counts it (or raises what Contains raised) */
    PyObject *n = PyDict_GetItemWithError(counters, key);
    if (n == NULL && PyErr_Occurred())
        goto done;
    seq = n != NULL ? Py_NewRef(n) : PyLong_FromLong(0);
    if (seq == NULL || (max_frame = PyObject_GetAttr(conn, fw.s_max_frame)) == NULL)
        goto done;
    PyObject *call[3] = {d, seq, max_frame};
    wire = encode_small(NULL, call, 3);
    if (wire == NULL || wire == Py_None) {
        PyErr_Clear(); /* Python encodes it, or raises the error by name */
        goto done;
    }
    /* Taken: number the flow as SeqAssigner.number does, then queue. */
    if (terminal) {
        if (PyDict_DelItem(counters, key) < 0)
            PyErr_Clear(); /* a flow that never counted: pop(key, 0) */
        if (PyObject_SetItem(closed, key, Py_None) < 0)
            goto error;
        if (PyObject_Length(closed) > max_closed) {
            PyObject *gone = PyObject_CallMethodObjArgs(closed, fw.s_popitem, Py_False, NULL);
            if (gone == NULL)
                goto error;
            Py_DECREF(gone);
        }
    }
    else {
        PyObject *next = PyNumber_Add(seq, codec.i_one);
        if (next == NULL)
            goto error;
        int set = PyDict_SetItem(counters, key, next);
        Py_DECREF(next);
        if (set < 0)
            goto error;
    }
    if (queue_wire(outbox, wire) < 0)
        goto error;
    taken = 1;
done:
    if (!taken)
        result = fall_back(fallback, frame);
    else
        result = Py_NewRef(Py_None);
    goto out;
error:
    result = NULL;
out:
    Py_XDECREF(d);
    Py_XDECREF(rv);
    Py_XDECREF(xv);
    Py_XDECREF(key);
    Py_XDECREF(seq);
    Py_XDECREF(wire);
    Py_XDECREF(max_frame);
    Py_DECREF(entry);
    return result;
}

/* to_switch(route, frame) -> None: see the top of the file. */
PyObject *
relay_to_switch(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyTuple_Check(args[0]) || PyTuple_GET_SIZE(args[0]) != 9) {
        PyErr_SetString(PyExc_TypeError, "to_switch(route, frame)");
        return NULL;
    }
    PyObject *route = args[0], *frame = args[1];
    PyObject *link = PyTuple_GET_ITEM(route, 0), *new_id = PyTuple_GET_ITEM(route, 1),
             *new_xid = PyTuple_GET_ITEM(route, 2), *end = PyTuple_GET_ITEM(route, 3),
             *outbox = PyTuple_GET_ITEM(route, 4), *batch = PyTuple_GET_ITEM(route, 5),
             *max_frame = PyTuple_GET_ITEM(route, 6), *fallback = PyTuple_GET_ITEM(route, 7),
             *close = PyTuple_GET_ITEM(route, 8);
    if (!fw.configured)
        return PyObject_CallOneArg(fallback, frame);
    PyObject *ft = PyObject_GetAttr(frame, fw.s_frame_type);
    if (ft == NULL)
        return NULL;
    Py_DECREF(ft);
    int terminal = ft == fw.ft_end;
    if (!terminal && ft != fw.ft_chunk && ft != fw.ft_start && ft != fw.ft_stream_end)
        return PyObject_CallOneArg(fallback, frame);
    PyObject *d = NULL, *flows = NULL, *seq = NULL, *wire = NULL, *count = NULL;
    int taken = 0, ok;
    if ((ok = attr_is(link, fw.s_done, Py_False)) != 1 ||
        (ok = attr_is(end, fw.s_death, Py_None)) != 1 ||
        (ok = attr_is(outbox, fw.s_closed, Py_False)) != 1)
        goto done;
    if ((flows = PyObject_GetAttr(end, fw.s_flows)) == NULL)
        goto done;
    /* a peer call of the host's under the same id: the Python path tells them apart */
    if (!PyDict_Check(flows) || (ok = PyDict_Contains(flows, new_id)) != 0)
        goto done;
    if ((ok = held(outbox, batch, end)) != 1)
        goto done;
    if ((d = rewritten(frame, new_id, new_xid)) == NULL)
        goto done;
    seq = PyDict_GetItemWithError(d, fw.s_seq);
    if (seq == NULL)
        goto done;
    Py_INCREF(seq);
    PyObject *call[3] = {d, seq, max_frame};
    wire = encode_small(NULL, call, 3);
    if (wire == NULL || wire == Py_None) {
        PyErr_Clear();
        goto done;
    }
    if ((count = PyObject_GetAttr(link, fw.s_frames)) == NULL || !PyLong_CheckExact(count))
        goto done;
    /* Taken: the link saw one more frame (its activity watch), then queue. */
    PyObject *more = PyNumber_Add(count, codec.i_one);
    if (more == NULL)
        goto error;
    int set = PyObject_SetAttr(link, fw.s_frames, more);
    Py_DECREF(more);
    if (set < 0 || queue_wire(outbox, wire) < 0)
        goto error;
    if (terminal) {
        PyObject *r = PyObject_CallNoArgs(close);
        if (r == NULL)
            goto error;
        Py_DECREF(r);
    }
    taken = 1;
done:
    Py_XDECREF(d);
    Py_XDECREF(flows);
    Py_XDECREF(seq);
    Py_XDECREF(wire);
    Py_XDECREF(count);
    if (!taken)
        return fall_back(fallback, frame);
    Py_RETURN_NONE;
error:
    Py_XDECREF(d);
    Py_XDECREF(flows);
    Py_XDECREF(seq);
    Py_XDECREF(wire);
    Py_XDECREF(count);
    return NULL;
}

/* to_app(core, fallback, frame) -> None: a host's response frame for a call of the switch's
 * application: route_response (_response.c) routes it into the call's flow as a cartridge's
 * own response frame is routed, except the END, which ends the switch's route first (the
 * fallback's). core holds only the flows of calls routed to that host. */
PyObject *
relay_to_app(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "to_app(core, fallback, frame)");
        return NULL;
    }
    if (!fw.configured)
        return PyObject_CallOneArg(args[1], args[2]);
    PyObject *ft = PyObject_GetAttr(args[2], fw.s_frame_type);
    if (ft == NULL)
        return NULL;
    Py_DECREF(ft);
    if (ft == fw.ft_end)
        return PyObject_CallOneArg(args[1], args[2]);
    return route_response(module, args, 3);
}

/* configure_forwarding(frame_types): (STREAM_START, CHUNK, STREAM_END, END). */
PyObject *
configure_forwarding(PyObject *module, PyObject *fts)
{
    if (!PyTuple_Check(fts) || PyTuple_GET_SIZE(fts) != 4) {
        PyErr_SetString(PyExc_TypeError, "configure_forwarding((STREAM_START, CHUNK, STREAM_END, END))");
        return NULL;
    }
#define INTERN(var, text) \
    if (fw.var == NULL && (fw.var = PyUnicode_InternFromString(text)) == NULL) return NULL
    INTERN(s_frame_type, "frame_type");
    INTERN(s_id, "id");
    INTERN(s_routing_id, "routing_id");
    INTERN(s_seq, "seq");
    INTERN(s_value, "value");
    INTERN(s_dict, "__dict__");
    INTERN(s_out, "_out");
    INTERN(s_count, "_count");
    INTERN(s_hold, "_hold");
    INTERN(s_closed, "_closed");
    INTERN(s_max_frame, "max_frame");
    INTERN(s_done, "done");
    INTERN(s_death, "death");
    INTERN(s_flows, "_flows");
    INTERN(s_frames, "frames");
    INTERN(s_popitem, "popitem");
#undef INTERN
#define KEEP(var, i) do { PyObject *v = PyTuple_GET_ITEM(fts, i); Py_INCREF(v); Py_XSETREF(fw.var, v); } while (0)
    KEEP(ft_start, 0);
    KEEP(ft_chunk, 1);
    KEEP(ft_stream_end, 2);
    KEEP(ft_end, 3);
#undef KEEP
    fw.configured = 1;
    Py_RETURN_NONE;
}
