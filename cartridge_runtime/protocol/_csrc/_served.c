/* The cartridge connection's record of an incoming request made in one C call (see
 * protocol/_cartridge_state.py, ServedRequest, which owns the behaviour).
 *
 * configure_served(served_class, receiver_class, queued, expect_req, credit_dir) checks the
 * classes: the record keeps exactly its thirteen fields as slots (their offsets are taken
 * from the member descriptors), the receiver keeps its fields in its instance dict.
 *
 * new_served(rid, xid, cap, handler_urn, handler, pool, initial_credit) -> the record, as
 * ServedRequest(...) makes it: every slot set as __init__ sets it, its BodyReceiver made with
 * expect_req=True, its dict filled in the order BodyReceiver.__init__ fills it, without
 * running either __init__. A credit that is not an exact int goes to the Python class.
 */
#include "_frames.h"
#include "structmember.h"

enum {
    R_RID, R_XID, R_CAP, R_HANDLER_URN, R_HANDLER, R_POOL, R_RECEIVER, R_PHASE, R_CANCEL,
    R_INPUT_ERROR, R_TERMINAL_SENT, R_OUTPUTS, R_PEER_IDS, R_COUNT
};
static const char *served_names[R_COUNT] = {
    "rid", "xid", "cap", "handler_urn", "handler", "pool", "receiver", "phase", "cancel",
    "input_error", "terminal_sent", "outputs", "peer_ids"};
static const char *receiver_names[] = {"rid", "xid", "state", "initial_credit", "batch",
                                       "credit_dir", "verify_checksums", "_streams",
                                       "_outgoing", NULL};

static struct {
    int configured;
    PyObject *served_class, *receiver_class, *queued, *expect_req, *credit_dir;
    PyObject *r_names[9];
    Py_ssize_t off[R_COUNT];
} sv;

static Py_ssize_t
slot_offset(PyObject *cls, const char *name)
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

/* Whether cls's own __slots__ are exactly R_COUNT names and its instances have no dict. */
static int
slots_exact(PyObject *cls)
{
    PyObject *slots = PyObject_GetAttrString(cls, "__slots__");
    if (slots == NULL)
        return -1;
    Py_ssize_t n = PySequence_Size(slots);
    Py_DECREF(slots);
    if (n < 0)
        return -1;
    return n == R_COUNT && ((PyTypeObject *)cls)->tp_dictoffset == 0 &&
           ((PyTypeObject *)cls)->tp_weaklistoffset == 0;
}

PyObject *
configure_served(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5 || !PyType_Check(args[0]) || !PyType_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError,
                        "configure_served(served_class, receiver_class, queued, expect_req, "
                        "credit_dir)");
        return NULL;
    }
    sv.configured = 0;
    int exact = slots_exact(args[0]);
    if (exact < 0)
        return NULL;
    if (!exact) {
        PyErr_Format(PyExc_ValueError, "configure_served: %R has other slots", args[0]);
        return NULL;
    }
    for (int i = 0; i < R_COUNT; i++)
        if ((sv.off[i] = slot_offset(args[0], served_names[i])) < 0) {
            PyErr_Format(PyExc_ValueError, "configure_served: %R has no slot %s", args[0],
                         served_names[i]);
            return NULL;
        }
    PyTypeObject *rt = (PyTypeObject *)args[1];
    if (rt->tp_dictoffset == 0) {
        PyErr_Format(PyExc_ValueError, "configure_served: %R keeps no dict", args[1]);
        return NULL;
    }
    for (int i = 0; receiver_names[i] != NULL; i++) {
        PyObject *key = PyUnicode_InternFromString(receiver_names[i]);
        if (key == NULL)
            return NULL;
        PyObject *d = _PyType_Lookup(rt, key);
        if (d != NULL && Py_TYPE(d)->tp_descr_set != NULL) {
            Py_DECREF(key);
            PyErr_Format(PyExc_ValueError, "configure_served: %R shadows %s", args[1],
                         receiver_names[i]);
            return NULL;
        }
        Py_XSETREF(sv.r_names[i], key);
    }
    Py_INCREF(args[0]);
    Py_XSETREF(sv.served_class, args[0]);
    Py_INCREF(args[1]);
    Py_XSETREF(sv.receiver_class, args[1]);
    Py_INCREF(args[2]);
    Py_XSETREF(sv.queued, args[2]);
    Py_INCREF(args[3]);
    Py_XSETREF(sv.expect_req, args[3]);
    Py_INCREF(args[4]);
    Py_XSETREF(sv.credit_dir, args[4]);
    sv.configured = 1;
    Py_RETURN_NONE;
}

static PyObject *
make_receiver(PyObject *rid, PyObject *xid, PyObject *credit)
{
    Py_ssize_t c = PyLong_AsSsize_t(credit);
    if (c == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t half = c >= 0 ? c / 2 : -((-c + 1) / 2); /* Python's floor division */
    PyObject *batch = PyLong_FromSsize_t(half > 1 ? half : 1);
    PyObject *d = PyDict_New(), *streams = PyDict_New(), *outgoing = PyList_New(0);
    PyObject *r = NULL;
    if (batch == NULL || d == NULL || streams == NULL || outgoing == NULL)
        goto done;
    PyObject *values[9] = {rid, xid, sv.expect_req, credit, batch,
                           sv.credit_dir, Py_True, streams, outgoing};
    for (int i = 0; i < 9; i++)
        if (PyDict_SetItem(d, sv.r_names[i], values[i]) < 0)
            goto done;
    PyTypeObject *t = (PyTypeObject *)sv.receiver_class;
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

/* Stores a new reference to v in slot i of o. */
static inline void
put(PyObject *o, int i, PyObject *v)
{
    PyObject **p = (PyObject **)((char *)o + sv.off[i]);
    Py_XSETREF(*p, v);
}

PyObject *
new_served(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError,
                        "new_served(rid, xid, cap, handler_urn, handler, pool, initial_credit)");
        return NULL;
    }
    if (!sv.configured) {
        PyErr_SetString(PyExc_RuntimeError, "new_served: not configured");
        return NULL;
    }
    if (!PyLong_CheckExact(args[6]))
        return PyObject_Vectorcall(sv.served_class, args, 7, NULL);
    PyObject *receiver = make_receiver(args[0], args[1], args[6]);
    if (receiver == NULL)
        return NULL;
    PyObject *outputs = PyDict_New(), *peer_ids = PyList_New(0);
    PyTypeObject *t = (PyTypeObject *)sv.served_class;
    PyObject *o = outputs != NULL && peer_ids != NULL ? t->tp_alloc(t, 0) : NULL;
    if (o == NULL) {
        Py_DECREF(receiver);
        Py_XDECREF(outputs);
        Py_XDECREF(peer_ids);
        return NULL;
    }
    for (int i = 0; i < 6; i++)
        put(o, i, Py_NewRef(args[i])); /* rid ... pool, in argument order */
    put(o, R_RECEIVER, receiver);
    put(o, R_PHASE, Py_NewRef(sv.queued));
    put(o, R_CANCEL, Py_NewRef(Py_None));
    put(o, R_INPUT_ERROR, Py_NewRef(Py_None));
    put(o, R_TERMINAL_SENT, Py_NewRef(Py_False));
    put(o, R_OUTPUTS, outputs);
    put(o, R_PEER_IDS, peer_ids);
    return o;
}

/* slot_maker(cls, names) -> a capsule of cls and the offsets of its slots names, for
 * make_slotted; cls must keep no dict and have no slot outside names (every slot is set). */
#define SLOTTED_MAX 16
typedef struct {
    PyObject *cls;
    Py_ssize_t n;
    Py_ssize_t off[SLOTTED_MAX];
} Slotted;

static void
slotted_free(PyObject *capsule)
{
    Slotted *s = PyCapsule_GetPointer(capsule, "cartridge_runtime.slotted");
    if (s != NULL) {
        Py_XDECREF(s->cls);
        PyMem_Free(s);
    }
}

/* The number of writable object slots of cls and its bases; -1 on error. */
static Py_ssize_t
count_slots(PyTypeObject *cls)
{
    PyObject *mro = cls->tp_mro;
    if (mro == NULL || !PyTuple_Check(mro)) {
        PyErr_SetString(PyExc_TypeError, "slot_maker: a class without an MRO");
        return -1;
    }
    Py_ssize_t count = 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); i++) {
        PyObject *d = ((PyTypeObject *)PyTuple_GET_ITEM(mro, i))->tp_dict;
        PyObject *key, *value;
        Py_ssize_t pos = 0;
        while (d != NULL && PyDict_Next(d, &pos, &key, &value))
            if (Py_IS_TYPE(value, &PyMemberDescr_Type) &&
                !(((PyMemberDescrObject *)value)->d_member->flags & READONLY))
                count++;
    }
    return count;
}

PyObject *
slot_maker(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyType_Check(args[0]) || !PyTuple_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "slot_maker(cls, names: tuple)");
        return NULL;
    }
    PyTypeObject *cls = (PyTypeObject *)args[0];
    Py_ssize_t n = PyTuple_GET_SIZE(args[1]);
    if (n > SLOTTED_MAX || cls->tp_dictoffset != 0) {
        PyErr_Format(PyExc_ValueError, "slot_maker: %R keeps a dict or too many fields", cls);
        return NULL;
    }
    Py_ssize_t all = count_slots(cls);
    if (all < 0)
        return NULL;
    if (all != n) {
        PyErr_Format(PyExc_ValueError, "slot_maker: %R has slots not named", cls);
        return NULL;
    }
    Slotted *s = PyMem_Calloc(1, sizeof(Slotted));
    if (s == NULL)
        return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *name = PyTuple_GET_ITEM(args[1], i);
        const char *text = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
        if (text == NULL || (s->off[i] = slot_offset(args[0], text)) < 0) {
            PyMem_Free(s);
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "slot_maker: %R has no slot %R", cls, name);
            return NULL;
        }
        for (Py_ssize_t j = 0; j < i; j++)
            if (s->off[j] == s->off[i]) {
                PyMem_Free(s);
                PyErr_Format(PyExc_ValueError, "slot_maker: %R named twice", name);
                return NULL;
            }
    }
    s->n = n;
    s->cls = Py_NewRef(args[0]);
    PyObject *capsule = PyCapsule_New(s, "cartridge_runtime.slotted", slotted_free);
    if (capsule == NULL) {
        Py_DECREF(s->cls);
        PyMem_Free(s);
    }
    return capsule;
}

/* make_slotted(maker, *values) -> an instance of the maker's class, its slots set to values
 * in the order slot_maker named them, without running __init__. */
PyObject *
make_slotted(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Slotted *s = nargs >= 1 ? PyCapsule_GetPointer(args[0], "cartridge_runtime.slotted") : NULL;
    if (s == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "make_slotted(maker, *values)");
        return NULL;
    }
    if (nargs - 1 != s->n) {
        PyErr_Format(PyExc_TypeError, "make_slotted: %zd values for %zd fields", nargs - 1,
                     s->n);
        return NULL;
    }
    PyTypeObject *t = (PyTypeObject *)s->cls;
    PyObject *o = t->tp_alloc(t, 0);
    if (o == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < s->n; i++)
        *(PyObject **)((char *)o + s->off[i]) = Py_NewRef(args[i + 1]);
    return o;
}
