/* A run of outgoing frames queued into the cartridge's outbox in one call (see
 * _plumbing/_outbox.py, FrameOutbox.try_send with EncodeAt.FLUSH, which owns the rules, and
 * runtime/_frames/_wire.py, WireOutput._queue, whose loop this is).
 *
 * queue_frames(outbox, stream, frames, chunk_type) queues frames from the front of the list
 * while FrameOutbox.try_send would (the queue below its bound, the payload bytes since the
 * last yield below yield_bytes), spending one of stream.credit for each frame of chunk_type
 * (stream None: no credit to spend), and returns how many it queued; the rest is for the
 * caller's waiting path. A closed outbox, or any field not of the expected type, stops it
 * before that frame (the caller's Python path then decides). The queue is scheduled for
 * writing once at the end, as the first push outside a hold would.
 */
#include "_frames.h"

static PyObject *s_count, *s_bound, *s_unyielded, *s_yield_bytes, *s_closed, *s_frames, *s_hold,
    *s_kicked, *s_schedule, *s_credit, *s_frame_type, *s_payload;

static int
names(void)
{
    if (s_count != NULL)
        return 0;
#define INTERN(var, text) \
    if ((var = PyUnicode_InternFromString(text)) == NULL) return -1
    INTERN(s_count, "_count");
    INTERN(s_bound, "_bound");
    INTERN(s_unyielded, "_unyielded");
    INTERN(s_yield_bytes, "_yield_bytes");
    INTERN(s_closed, "_closed");
    INTERN(s_frames, "_frames");
    INTERN(s_hold, "_hold");
    INTERN(s_kicked, "_kicked");
    INTERN(s_schedule, "_schedule");
    INTERN(s_credit, "credit");
    INTERN(s_frame_type, "frame_type");
    INTERN(s_payload, "payload");
#undef INTERN
    return 0;
}

/* An int attribute of o as a Py_ssize_t: 1 read, 0 not an exact int, -1 error. */
static int
get_int(PyObject *o, PyObject *name, Py_ssize_t *out)
{
    PyObject *v = PyObject_GetAttr(o, name);
    if (v == NULL)
        return -1;
    int ok = PyLong_CheckExact(v);
    if (ok) {
        *out = PyLong_AsSsize_t(v);
        if (*out == -1 && PyErr_Occurred())
            ok = -1;
    }
    Py_DECREF(v);
    return ok;
}

static int
set_int(PyObject *o, PyObject *name, Py_ssize_t value)
{
    PyObject *v = PyLong_FromSsize_t(value);
    if (v == NULL)
        return -1;
    int r = PyObject_SetAttr(o, name, v);
    Py_DECREF(v);
    return r;
}

PyObject *
queue_frames(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4 || !PyList_CheckExact(args[2])) {
        PyErr_SetString(PyExc_TypeError, "queue_frames(outbox, stream, frames, chunk_type)");
        return NULL;
    }
    if (names() < 0)
        return NULL;
    PyObject *outbox = args[0], *stream = args[1], *frames = args[2], *chunk_type = args[3];
    Py_ssize_t count, bound, unyielded, yield_bytes, hold, credit = 0;
    int ok;
    if ((ok = get_int(outbox, s_count, &count)) <= 0 ||
        (ok = get_int(outbox, s_bound, &bound)) <= 0 ||
        (ok = get_int(outbox, s_unyielded, &unyielded)) <= 0 ||
        (ok = get_int(outbox, s_yield_bytes, &yield_bytes)) <= 0 ||
        (ok = get_int(outbox, s_hold, &hold)) <= 0 ||
        (stream != Py_None && (ok = get_int(stream, s_credit, &credit)) <= 0))
        return ok < 0 ? NULL : PyLong_FromLong(0);
    PyObject *closed = PyObject_GetAttr(outbox, s_closed);
    if (closed == NULL)
        return NULL;
    int open = closed == Py_False;
    Py_DECREF(closed);
    PyObject *queue = open ? PyObject_GetAttr(outbox, s_frames) : NULL;
    if (queue == NULL)
        return open ? NULL : PyLong_FromLong(0);
    if (!PyList_CheckExact(queue)) {
        Py_DECREF(queue);
        return PyLong_FromLong(0);
    }
    Py_ssize_t n = PyList_GET_SIZE(frames), i = 0, spent = 0;
    PyObject *result = NULL;
    int failed = 0; /* an error after frames were queued: the counts are still written back */
    for (; i < n; i++) {
        PyObject *f = PyList_GET_ITEM(frames, i);
        if (count >= bound)
            break;
        PyObject *ft = PyObject_GetAttr(f, s_frame_type);
        if (ft == NULL) {
            failed = 1;
            break;
        }
        int is_chunk = ft == chunk_type;
        Py_DECREF(ft);
        if (is_chunk && stream != Py_None && credit - spent <= 0)
            break;
        PyObject *payload = PyObject_GetAttr(f, s_payload);
        if (payload == NULL) {
            failed = 1;
            break;
        }
        Py_ssize_t size = 0;
        if (payload != Py_None) {
            size = PyObject_Length(payload);
            Py_DECREF(payload);
            if (size < 0) {
                failed = 1;
                break;
            }
            if (unyielded + size >= yield_bytes)
                break;
        }
        else {
            Py_DECREF(payload);
        }
        if (PyList_Append(queue, f) < 0) {
            failed = 1;
            break;
        }
        unyielded += size;
        count++;
        if (is_chunk && stream != Py_None)
            spent++;
    }
    if (i > 0) {
        PyObject *et = NULL, *ev = NULL, *tb = NULL;
        if (failed)
            PyErr_Fetch(&et, &ev, &tb);
        int wrote = set_int(outbox, s_count, count) == 0 &&
                    set_int(outbox, s_unyielded, unyielded) == 0 &&
                    (!spent || set_int(stream, s_credit, credit - spent) == 0);
        if (failed) {
            if (wrote) {
                PyErr_Restore(et, ev, tb);
            }
            else {
                Py_XDECREF(et);
                Py_XDECREF(ev);
                Py_XDECREF(tb);
            }
            goto done;
        }
        if (!wrote)
            goto done;
        if (!hold) {
            PyObject *kicked = PyObject_GetAttr(outbox, s_kicked);
            if (kicked == NULL)
                goto done;
            int idle = !PyObject_IsTrue(kicked);
            Py_DECREF(kicked);
            if (idle) {
                PyObject *r = PyObject_CallMethodNoArgs(outbox, s_schedule);
                if (r == NULL)
                    goto done;
                Py_DECREF(r);
            }
        }
    }
    if (!failed)
        result = PyLong_FromSsize_t(i);
done:
    Py_DECREF(queue);
    return result;
}
