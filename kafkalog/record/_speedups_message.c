/*
 * What the kernels hand back to Python: messages of the tuple type that configure sets (with its
 * two timestamp-type values), error triples, index points. Shared by the v0/v1 and magic 2 kernels.
 */
#include "_speedups.h"

PyObject *speedups_message_type = NULL; /* a tuple subclass (kafkalog.record.Message) */
PyObject *speedups_create_time = NULL;
PyObject *speedups_log_append_time = NULL;

PyObject *speedups_error_triple(const char *kind, Py_ssize_t pos, PyObject *reason) {
    if (reason == NULL) return NULL;
    PyObject *t = Py_BuildValue("(snN)", kind, pos, reason);
    return t;
}

PyObject *speedups_py_configure(PyObject *self, PyObject *args) {
    PyObject *mt, *ct, *lat;
    if (!PyArg_ParseTuple(args, "OOO", &mt, &ct, &lat)) return NULL;
    if (!PyType_Check(mt) || !PyType_IsSubtype((PyTypeObject *)mt, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "message_type must be a tuple subclass");
        return NULL;
    }
    Py_XSETREF(speedups_message_type, Py_NewRef(mt));
    Py_XSETREF(speedups_create_time, Py_NewRef(ct));
    Py_XSETREF(speedups_log_append_time, Py_NewRef(lat));
    Py_RETURN_NONE;
}

PyObject *speedups_make_message(int64_t offset, int64_t ts, PyObject *ts_type, const unsigned char *key,
                                       int32_t key_len, const unsigned char *value, int32_t value_len) {
    PyObject *o = PyLong_FromLongLong(offset);
    PyObject *t = PyLong_FromLongLong(ts);
    PyObject *k = key_len < 0 ? Py_NewRef(Py_None) : PyBytes_FromStringAndSize((const char *)key, key_len);
    PyObject *v = value_len < 0 ? Py_NewRef(Py_None) : PyBytes_FromStringAndSize((const char *)value, value_len);
    if (!o || !t || !k || !v) goto fail;
    PyTypeObject *type = (PyTypeObject *)(speedups_message_type ? speedups_message_type : (PyObject *)&PyTuple_Type);
    PyObject *m = type->tp_alloc(type, 6);
    if (!m) goto fail;
    PyTuple_SET_ITEM(m, 0, o);
    PyTuple_SET_ITEM(m, 1, t);
    PyTuple_SET_ITEM(m, 2, Py_NewRef(ts_type));
    PyTuple_SET_ITEM(m, 3, k);
    PyTuple_SET_ITEM(m, 4, v);
    PyTuple_SET_ITEM(m, 5, PyTuple_New(0)); /* headers: none before magic 2 (the shared empty tuple) */
    /* A message holds only ints, bytes, None and an enum member: it can never be part of a
     * reference cycle, so the cyclic GC need not track it (CPython untracks such tuples too,
     * lazily). Untracking here keeps decoding large fetches from triggering costly collections. */
    if (PyObject_IS_GC(m)) PyObject_GC_UnTrack(m);
    return m;
fail:
    Py_XDECREF(o); Py_XDECREF(t); Py_XDECREF(k); Py_XDECREF(v);
    return NULL;
}

int speedups_add_point(PyObject *points, Py_ssize_t pos, int64_t offset, long long max_ts, long long offset_of_max) {
    PyObject *p = Py_BuildValue("(nLLL)", pos, (long long)offset, max_ts, offset_of_max);
    if (!p) return -1;
    int rc = PyList_Append(points, p);
    Py_DECREF(p);
    return rc;
}
