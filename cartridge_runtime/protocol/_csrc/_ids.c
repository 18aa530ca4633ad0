/* Message ids made and hashed in C: new_id (a random version 4 UUID from a pool of the OS's
 * bytes), int_id (a small-uint routing id), both put in the decoder's id cache as
 * MessageId.new and share_id do; install_id_hash (MessageId's hash slot reading hash(value)
 * straight from its slot).
 */
#include <string.h>

#include "_frames.h"
#include "structmember.h"

/* Random bytes for new ids, fetched ahead from the OS (os.urandom, handed over by
 * configure_ids); taken 16 at a time under the GIL, so no two ids share bytes. */
#define ID_POOL 4096
static PyObject *id_urandom;
static unsigned char id_pool[ID_POOL];
static Py_ssize_t id_left;

/* configure_ids(urandom): the OS's random source; the pool starts empty. */
PyObject *
configure_ids(PyObject *module, PyObject *urandom)
{
    if (!PyCallable_Check(urandom)) {
        PyErr_SetString(PyExc_TypeError, "configure_ids(urandom)");
        return NULL;
    }
    Py_INCREF(urandom);
    Py_XSETREF(id_urandom, urandom);
    id_left = 0;
    Py_RETURN_NONE;
}

/* forget_ids(): drop the pool (a forked child must not hand out its parent's ids). */
PyObject *
forget_ids(PyObject *module, PyObject *unused)
{
    id_left = 0;
    Py_RETURN_NONE;
}

/* new_id() -> MessageId: a fresh random UUID (version 4), put in the decoder's id cache, as
 * MessageId.new does. */
PyObject *
new_id(PyObject *module, PyObject *unused)
{
    if (id_urandom == NULL || !codec.configured) {
        PyErr_SetString(PyExc_RuntimeError, "new_id: not configured");
        return NULL;
    }
    if (id_left < 16) {
        PyObject *fresh = PyObject_CallFunction(id_urandom, "n", (Py_ssize_t)ID_POOL);
        if (fresh == NULL)
            return NULL;
        if (!PyBytes_Check(fresh) || PyBytes_GET_SIZE(fresh) != ID_POOL) {
            Py_DECREF(fresh);
            PyErr_SetString(PyExc_RuntimeError, "new_id: the random source gave a short read");
            return NULL;
        }
        memcpy(id_pool, PyBytes_AS_STRING(fresh), ID_POOL);
        Py_DECREF(fresh);
        id_left = ID_POOL;
    }
    unsigned char b[16];
    memcpy(b, id_pool + (ID_POOL - id_left), 16);
    id_left -= 16;
    b[6] = (unsigned char)((b[6] & 0x0F) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3F) | 0x80);
    PyObject *value = PyBytes_FromStringAndSize((const char *)b, 16);
    if (value == NULL)
        return NULL;
    PyTypeObject *t = (PyTypeObject *)codec.id_class;
    PyObject *mid = t->tp_alloc(t, 0);
    if (mid == NULL || PyObject_GenericSetAttr(mid, codec.s_value, value) < 0) {
        Py_XDECREF(mid);
        Py_DECREF(value);
        return NULL;
    }
    if (PyDict_GET_SIZE(codec.id_cache) >= codec.id_cache_max)
        PyDict_Clear(codec.id_cache);
    int rc = PyDict_SetItem(codec.id_cache, value, mid);
    Py_DECREF(value);
    if (rc < 0) {
        Py_DECREF(mid);
        return NULL;
    }
    return mid;
}

/* int_id(n) -> MessageId(n) for an unsigned integer n, put in the id cache (share_id). */
PyObject *
int_id(PyObject *module, PyObject *value)
{
    if (!codec.configured || !PyLong_CheckExact(value) || Py_SIZE(value) < 0) {
        PyErr_SetString(PyExc_TypeError, "int_id(n): n is an unsigned int");
        return NULL;
    }
    PyTypeObject *t = (PyTypeObject *)codec.id_class;
    PyObject *mid = t->tp_alloc(t, 0);
    if (mid == NULL || PyObject_GenericSetAttr(mid, codec.s_value, value) < 0) {
        Py_XDECREF(mid);
        return NULL;
    }
    if (PyDict_GET_SIZE(codec.id_cache) >= codec.id_cache_max)
        PyDict_Clear(codec.id_cache);
    if (PyDict_SetItem(codec.id_cache, value, mid) < 0) {
        Py_DECREF(mid);
        return NULL;
    }
    return mid;
}

/* The offset of MessageId's value slot, once install_id_hash found it. */
static Py_ssize_t id_value_offset = -1;

/* MessageId's tp_hash: hash(self.value), read from its slot (what id_hash_method gives, with
 * no method looked up and called per hash). */
static Py_hash_t
id_tp_hash(PyObject *self)
{
    PyObject *v = *(PyObject **)((char *)self + id_value_offset);
    if (v == NULL) {
        PyErr_SetString(PyExc_AttributeError, "value");
        return -1;
    }
    return PyObject_Hash(v);
}

/* install_id_hash(id_class) -> bool: id_class's hash slot made id_tp_hash, when its __hash__
 * is already the compiled hash(value) (id_hash_method) and value is a plain slot; the same
 * hash values, so dicts keyed by ids made before stay valid. False: nothing changed. */
PyObject *
install_id_hash(PyObject *module, PyObject *cls)
{
    if (!PyType_Check(cls) || !(((PyTypeObject *)cls)->tp_flags & Py_TPFLAGS_HEAPTYPE))
        Py_RETURN_FALSE;
    PyTypeObject *t = (PyTypeObject *)cls;
    PyObject *key = PyUnicode_InternFromString("value");
    if (key == NULL)
        return NULL;
    PyObject *d = _PyType_Lookup(t, key);
    Py_DECREF(key);
    if (d == NULL || !Py_IS_TYPE(d, &PyMemberDescr_Type) ||
        ((PyMemberDescrObject *)d)->d_member->type != T_OBJECT_EX)
        Py_RETURN_FALSE;
    PyObject *h = PyDict_GetItemString(t->tp_dict, "__hash__");
    PyObject *f = h != NULL && PyInstanceMethod_Check(h) ? PyInstanceMethod_GET_FUNCTION(h) : NULL;
    const char *doc = f != NULL && PyCFunction_Check(f) ? ((PyCFunctionObject *)f)->m_ml->ml_doc
                                                        : NULL;
    if (doc == NULL || strcmp(doc, "hash(self.value)") != 0)
        Py_RETURN_FALSE; /* not the compiled hash(value) (id_hash_method): leave it */
    id_value_offset = ((PyMemberDescrObject *)d)->d_member->offset;
    t->tp_hash = id_tp_hash;
    PyType_Modified(t);
    Py_RETURN_TRUE;
}

