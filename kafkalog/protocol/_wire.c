/* The protocol's generic codec in C: the same walk as kafkalog.protocol.types, over a schema
 * compiled to nested tuples (kafkalog.protocol.compiled.program).
 *
 * Role: requests and responses of every API decode and encode here when this module is built;
 * kafkalog.protocol.types stays the reference and the only place errors are worded. Whatever the
 * reference refuses, these functions refuse too (decode answers None, encode None) and the caller
 * runs the reference, which names the fault; whatever they take, they give exactly the reference's
 * result (tests/kafkalog/protocol/test_compiled.py holds both to that on every schema).
 *
 * A program is a tuple whose first item is a type code:
 *   (scalar code,)
 *   (ARRAY | COMPACT_ARRAY, nullable, element min size, element program)
 *   (STRUCT, names, programs, defaults, tagged)   tagged: None, or ((tag, name, program), ...)
 *                                                 in rising tag order (a flexible structure)
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

enum {
    T_INT8 = 1, T_INT16, T_INT32, T_INT64, T_BOOLEAN, T_STRING, T_NULLABLE_STRING, T_BYTES, T_RECORDS,
    T_UVARINT, T_COMPACT_STRING, T_COMPACT_NULLABLE_STRING, T_COMPACT_BYTES, T_COMPACT_NULLABLE_BYTES,
    T_COMPACT_RECORDS, T_UUID, T_ARRAY = 20, T_COMPACT_ARRAY = 21, T_STRUCT = 22,
};

static PyObject *REQUIRED = NULL; /* the reference's marker of a field without a default */
static PyObject *LENGTH = NULL;   /* "length": the size of a region (a log FileRegion) */

/* ------------------------------------------------------------------ decoding */

typedef struct {
    const unsigned char *buf;
    Py_ssize_t pos, end;
    PyObject *view; /* the frame's memoryview: records decode to slices of it, as the reference's */
} Rd;

/* Every decoder returns a new reference, or NULL: the bytes are not what the reference takes (or
 * memory ran out); decode() then answers None, and the caller runs the reference. */

static int take(Rd *r, Py_ssize_t count, Py_ssize_t *start) {
    if (count < 0 || count > r->end - r->pos) return -1;
    *start = r->pos;
    r->pos += count;
    return 0;
}

static int read_uvarint(Rd *r, uint32_t *out) {
    uint64_t result = 0;
    int shift = 0;
    for (int i = 0; i < 5; i++) {
        if (r->pos >= r->end) return -1;
        unsigned char byte = r->buf[r->pos++];
        result |= (uint64_t)(byte & 0x7F) << shift;
        if (byte < 0x80) {
            if (result > 0xFFFFFFFFull) return -1;
            *out = (uint32_t)result;
            return 0;
        }
        shift += 7;
    }
    return -1;
}

static int64_t be(const unsigned char *p, int size) {
    uint64_t v = 0;
    for (int i = 0; i < size; i++) v = (v << 8) | p[i];
    if (size < 8 && (v >> (size * 8 - 1)) & 1) v |= ~0ull << (size * 8); /* sign */
    return (int64_t)v;
}

static PyObject *decode_value(PyObject *program, Rd *r);

static PyObject *utf8(Rd *r, Py_ssize_t length) {
    Py_ssize_t start;
    if (take(r, length, &start) < 0) return NULL;
    return PyUnicode_DecodeUTF8((const char *)r->buf + start, length, NULL);
}

static PyObject *slice(Rd *r, Py_ssize_t length, int as_view) {
    Py_ssize_t start;
    if (take(r, length, &start) < 0) return NULL;
    if (as_view) return PySequence_GetSlice(r->view, start, start + length);
    return PyBytes_FromStringAndSize((const char *)r->buf + start, length);
}

static PyObject *decode_array(PyObject *program, Rd *r, int64_t count) {
    Py_ssize_t min_size = PyLong_AsSsize_t(PyTuple_GET_ITEM(program, 2));
    PyObject *element = PyTuple_GET_ITEM(program, 3);
    if (min_size < 1) min_size = 1;
    if (count * (int64_t)min_size > (int64_t)(r->end - r->pos)) return NULL;
    PyObject *list = PyList_New((Py_ssize_t)count);
    if (list == NULL) return NULL;
    for (Py_ssize_t i = 0; i < (Py_ssize_t)count; i++) {
        PyObject *item = decode_value(element, r);
        if (item == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, item);
    }
    return list;
}

static PyObject *decode_struct(PyObject *program, Rd *r) {
    PyObject *names = PyTuple_GET_ITEM(program, 1);
    PyObject *programs = PyTuple_GET_ITEM(program, 2);
    PyObject *tagged = PyTuple_GET_ITEM(program, 4);
    Py_ssize_t n = PyTuple_GET_SIZE(names);
    PyObject *out = PyDict_New();
    if (out == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *value = decode_value(PyTuple_GET_ITEM(programs, i), r);
        if (value == NULL || PyDict_SetItem(out, PyTuple_GET_ITEM(names, i), value) < 0) {
            Py_XDECREF(value);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(value);
    }
    if (tagged == Py_None) return out;
    uint32_t count;
    if (read_uvarint(r, &count) < 0 || (int64_t)count > (r->end - r->pos) / 2) goto fail;
    int64_t previous = -1;
    for (uint32_t i = 0; i < count; i++) {
        uint32_t tag, size;
        Py_ssize_t start;
        if (read_uvarint(r, &tag) < 0 || (int64_t)tag <= previous) goto fail;
        previous = tag;
        if (read_uvarint(r, &size) < 0 || take(r, (Py_ssize_t)size, &start) < 0) goto fail;
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(tagged); k++) {
            PyObject *field = PyTuple_GET_ITEM(tagged, k);
            if (PyLong_AsLong(PyTuple_GET_ITEM(field, 0)) != (long)tag) continue;
            Rd inner = {r->buf, start, start + (Py_ssize_t)size, r->view};
            PyObject *value = decode_value(PyTuple_GET_ITEM(field, 2), &inner);
            if (value == NULL) goto fail;
            if (inner.pos != inner.end || PyDict_SetItem(out, PyTuple_GET_ITEM(field, 1), value) < 0) {
                Py_DECREF(value);
                goto fail;
            }
            Py_DECREF(value);
            break;
        }
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

static PyObject *decode_value(PyObject *program, Rd *r) {
    long code = PyLong_AsLong(PyTuple_GET_ITEM(program, 0));
    Py_ssize_t start;
    uint32_t stored;
    int64_t length;
    switch (code) {
    case T_INT8:
        if (take(r, 1, &start) < 0) return NULL;
        return PyLong_FromLongLong(be(r->buf + start, 1));
    case T_INT16:
        if (take(r, 2, &start) < 0) return NULL;
        return PyLong_FromLongLong(be(r->buf + start, 2));
    case T_INT32:
        if (take(r, 4, &start) < 0) return NULL;
        return PyLong_FromLongLong(be(r->buf + start, 4));
    case T_INT64:
        if (take(r, 8, &start) < 0) return NULL;
        return PyLong_FromLongLong(be(r->buf + start, 8));
    case T_BOOLEAN:
        if (take(r, 1, &start) < 0) return NULL;
        return PyBool_FromLong(r->buf[start] != 0);
    case T_STRING:
    case T_NULLABLE_STRING:
        if (take(r, 2, &start) < 0) return NULL;
        length = be(r->buf + start, 2);
        if (length < 0) {
            if (length == -1 && code == T_NULLABLE_STRING) Py_RETURN_NONE;
            return NULL;
        }
        return utf8(r, (Py_ssize_t)length);
    case T_BYTES:
    case T_RECORDS:
        if (take(r, 4, &start) < 0) return NULL;
        length = be(r->buf + start, 4);
        if (length == -1) Py_RETURN_NONE;
        return slice(r, (Py_ssize_t)length, code == T_RECORDS);
    case T_UVARINT:
        if (read_uvarint(r, &stored) < 0) return NULL;
        return PyLong_FromUnsignedLong(stored);
    case T_COMPACT_STRING:
    case T_COMPACT_NULLABLE_STRING:
        if (read_uvarint(r, &stored) < 0) return NULL;
        if (stored == 0) {
            if (code == T_COMPACT_NULLABLE_STRING) Py_RETURN_NONE;
            return NULL;
        }
        return utf8(r, (Py_ssize_t)stored - 1);
    case T_COMPACT_BYTES:
    case T_COMPACT_NULLABLE_BYTES:
    case T_COMPACT_RECORDS:
        if (read_uvarint(r, &stored) < 0) return NULL;
        if (stored == 0) {
            if (code != T_COMPACT_BYTES) Py_RETURN_NONE;
            return NULL;
        }
        return slice(r, (Py_ssize_t)stored - 1, code == T_COMPACT_RECORDS);
    case T_UUID:
        return slice(r, 16, 0);
    case T_ARRAY:
        if (take(r, 4, &start) < 0) return NULL;
        length = be(r->buf + start, 4);
        if (length < 0) {
            if (length == -1 && PyObject_IsTrue(PyTuple_GET_ITEM(program, 1))) Py_RETURN_NONE;
            return NULL;
        }
        return decode_array(program, r, length);
    case T_COMPACT_ARRAY:
        if (read_uvarint(r, &stored) < 0) return NULL;
        if (stored == 0) {
            if (PyObject_IsTrue(PyTuple_GET_ITEM(program, 1))) Py_RETURN_NONE;
            return NULL;
        }
        return decode_array(program, r, (int64_t)stored - 1);
    case T_STRUCT:
        return decode_struct(program, r);
    default:
        return NULL;
    }
}

/* decode(program, frame, pos, end) -> (value, pos after it), or None: the reference must read it */
static PyObject *wire_decode(PyObject *self, PyObject *args) {
    PyObject *program, *view;
    Py_ssize_t pos, end;
    if (!PyArg_ParseTuple(args, "O!O!nn", &PyTuple_Type, &program, &PyMemoryView_Type, &view, &pos, &end))
        return NULL;
    Py_buffer buffer;
    if (PyObject_GetBuffer(view, &buffer, PyBUF_SIMPLE) < 0) { /* released, or not contiguous */
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    if (pos < 0 || end < pos || end > buffer.len) {
        PyBuffer_Release(&buffer);
        Py_RETURN_NONE;
    }
    Rd r = {(const unsigned char *)buffer.buf, pos, end, view};
    PyObject *value = decode_value(program, &r);
    PyBuffer_Release(&buffer);
    if (value == NULL) {
        if (PyErr_Occurred() && PyErr_ExceptionMatches(PyExc_MemoryError)) return NULL;
        PyErr_Clear(); /* not UTF-8, say: the reference reads it again and names the fault */
        Py_RETURN_NONE;
    }
    return Py_BuildValue("(Nn)", value, r.pos);
}

/* ------------------------------------------------------------------ encoding */

typedef struct {
    char *data;
    Py_ssize_t len, cap;
    PyObject *chunks; /* bytes runs and regions, as the reference's Writer.finish gives them */
    Py_ssize_t total;
} Wr;

static int reserve(Wr *w, Py_ssize_t more) {
    if (w->len + more <= w->cap) return 0;
    Py_ssize_t cap = w->cap ? w->cap : 256;
    while (cap < w->len + more) cap *= 2;
    char *data = PyMem_Realloc(w->data, (size_t)cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    w->data = data;
    w->cap = cap;
    return 0;
}

static int put(Wr *w, const void *data, Py_ssize_t size) {
    if (reserve(w, size) < 0) return -1;
    memcpy(w->data + w->len, data, (size_t)size);
    w->len += size;
    w->total += size;
    return 0;
}

static int put_be(Wr *w, int64_t value, int size) {
    unsigned char out[8];
    for (int i = size - 1; i >= 0; i--) {
        out[i] = (unsigned char)(value & 0xFF);
        value >>= 8;
    }
    return put(w, out, size);
}

static int put_uvarint(Wr *w, uint64_t value) {
    unsigned char out[10];
    int n = 0;
    while (value >= 0x80) {
        out[n++] = (unsigned char)((value & 0x7F) | 0x80);
        value >>= 7;
    }
    out[n++] = (unsigned char)value;
    return put(w, out, n);
}

static int flush_pending(Wr *w) {
    if (w->len == 0) return 0;
    PyObject *run = PyBytes_FromStringAndSize(w->data, w->len);
    if (run == NULL) return -1;
    int failed = PyList_Append(w->chunks, run);
    Py_DECREF(run);
    w->len = 0;
    return failed;
}

/* A region (a log FileRegion): its own chunk, passed through unread; -1 if it has no length. */
static int region_length(PyObject *region, Py_ssize_t *length) {
    PyObject *size = PyObject_GetAttr(region, LENGTH);
    if (size == NULL) return -1;
    *length = PyLong_AsSsize_t(size);
    Py_DECREF(size);
    if (*length < 0) return -1;
    return 0;
}

static int encode_value(PyObject *program, PyObject *value, Wr *w);

static int in_range(PyObject *value, int64_t low, int64_t high, int64_t *out) {
    if (!PyLong_Check(value)) return -1;
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred()) || v < low || v > high) return -1;
    *out = v;
    return 0;
}

static int put_string(Wr *w, PyObject *value, int compact) {
    if (!PyUnicode_Check(value)) return -1;
    Py_ssize_t size;
    const char *data = PyUnicode_AsUTF8AndSize(value, &size);
    if (data == NULL || size > 32767) return -1;
    if ((compact ? put_uvarint(w, (uint64_t)size + 1) : put_be(w, size, 2)) < 0) return -1;
    return put(w, data, size);
}

/* bytes-like inline: length (int32, or compact as N + 1), then the bytes */
static int put_bytes(Wr *w, PyObject *value, int compact) {
    Py_buffer buffer;
    if (PyObject_GetBuffer(value, &buffer, PyBUF_SIMPLE) < 0) return -1;
    /* the reference writes len(value), which counts items: other than bytes, declined */
    int failed = PyObject_Length(value) != buffer.len || buffer.len > INT32_MAX ||
                 (compact ? put_uvarint(w, (uint64_t)buffer.len + 1) : put_be(w, buffer.len, 4)) < 0 ||
                 put(w, buffer.buf, buffer.len) < 0;
    PyBuffer_Release(&buffer);
    return failed ? -1 : 0;
}

static int put_records(Wr *w, PyObject *value, int compact) {
    if (value == Py_None) return compact ? put_uvarint(w, 0) : put_be(w, -1, 4);
    if (PyBytes_Check(value) || PyByteArray_Check(value) || PyMemoryView_Check(value))
        return put_bytes(w, value, compact);
    Py_ssize_t length;
    if (region_length(value, &length) < 0 || length > INT32_MAX) return -1;
    if ((compact ? put_uvarint(w, (uint64_t)length + 1) : put_be(w, length, 4)) < 0) return -1;
    if (flush_pending(w) < 0 || PyList_Append(w->chunks, value) < 0) return -1;
    w->total += length;
    return 0;
}

static int encode_struct(PyObject *program, PyObject *value, Wr *w) {
    if (!PyDict_Check(value)) return -1;
    PyObject *names = PyTuple_GET_ITEM(program, 1);
    PyObject *programs = PyTuple_GET_ITEM(program, 2);
    PyObject *defaults = PyTuple_GET_ITEM(program, 3);
    PyObject *tagged = PyTuple_GET_ITEM(program, 4);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); i++) {
        PyObject *field = PyDict_GetItemWithError(value, PyTuple_GET_ITEM(names, i));
        if (field == NULL) {
            if (PyErr_Occurred()) return -1;
            field = PyTuple_GET_ITEM(defaults, i);
            if (field == REQUIRED) return -1;
        }
        if (encode_value(PyTuple_GET_ITEM(programs, i), field, w) < 0) return -1;
    }
    if (tagged == Py_None) return 0;
    Py_ssize_t count = 0, n = PyTuple_GET_SIZE(tagged);
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *field = PyDict_GetItemWithError(value, PyTuple_GET_ITEM(PyTuple_GET_ITEM(tagged, k), 1));
        if (field == NULL && PyErr_Occurred()) return -1;
        count += field != NULL && field != Py_None;
    }
    if (put_uvarint(w, (uint64_t)count) < 0) return -1;
    for (Py_ssize_t k = 0; k < n && count; k++) {
        PyObject *spec = PyTuple_GET_ITEM(tagged, k);
        PyObject *field = PyDict_GetItemWithError(value, PyTuple_GET_ITEM(spec, 1));
        if (field == NULL && PyErr_Occurred()) return -1;
        if (field == NULL || field == Py_None) continue;
        Py_INCREF(field); /* held: the dict may change while the fields before it are encoded */
        Wr inner = {NULL, 0, 0, NULL, 0};
        inner.chunks = PyList_New(0);
        if (inner.chunks == NULL) return -1;
        int failed = encode_value(PyTuple_GET_ITEM(spec, 2), field, &inner) < 0 ||
                     PyList_GET_SIZE(inner.chunks) != 0 || /* a region inside a tagged field */
                     put_uvarint(w, (uint64_t)PyLong_AsUnsignedLong(PyTuple_GET_ITEM(spec, 0))) < 0 ||
                     put_uvarint(w, (uint64_t)inner.len) < 0 || put(w, inner.data, inner.len) < 0;
        PyMem_Free(inner.data);
        Py_DECREF(inner.chunks);
        Py_DECREF(field);
        if (failed) return -1;
    }
    return 0;
}

static int encode_array(PyObject *program, PyObject *value, Wr *w, int compact) {
    if (value == Py_None) {
        if (!PyObject_IsTrue(PyTuple_GET_ITEM(program, 1))) return -1;
        return compact ? put_uvarint(w, 0) : put_be(w, -1, 4);
    }
    if (!PyList_Check(value) && !PyTuple_Check(value)) return -1; /* any other sized iterable: the reference */
    Py_ssize_t n = PySequence_Fast_GET_SIZE(value);
    if (n > INT32_MAX || (compact ? put_uvarint(w, (uint64_t)n + 1) : put_be(w, n, 4)) < 0) return -1;
    PyObject *element = PyTuple_GET_ITEM(program, 3);
    for (Py_ssize_t i = 0; i < n; i++) {
        /* an element's own code (a __bool__, a region's length) may change the list: read each
         * item again, and decline if the count written no longer holds */
        if (PySequence_Fast_GET_SIZE(value) != n) return -1;
        if (encode_value(element, PySequence_Fast_GET_ITEM(value, i), w) < 0) return -1;
    }
    return PySequence_Fast_GET_SIZE(value) == n ? 0 : -1;
}

static int encode_one(PyObject *program, PyObject *value, Wr *w);

/* ``value`` is often borrowed from a dict or a list, and encoding it may run Python code (a
 * __bool__, a region's length) that changes them: it is held while it is encoded. */
static int encode_value(PyObject *program, PyObject *value, Wr *w) {
    Py_INCREF(value);
    int result = encode_one(program, value, w);
    Py_DECREF(value);
    return result;
}

static int encode_one(PyObject *program, PyObject *value, Wr *w) {
    long code = PyLong_AsLong(PyTuple_GET_ITEM(program, 0));
    int64_t v;
    int truth;
    switch (code) {
    case T_INT8:
        return in_range(value, INT8_MIN, INT8_MAX, &v) < 0 ? -1 : put_be(w, v, 1);
    case T_INT16:
        return in_range(value, INT16_MIN, INT16_MAX, &v) < 0 ? -1 : put_be(w, v, 2);
    case T_INT32:
        return in_range(value, INT32_MIN, INT32_MAX, &v) < 0 ? -1 : put_be(w, v, 4);
    case T_INT64:
        return in_range(value, INT64_MIN, INT64_MAX, &v) < 0 ? -1 : put_be(w, v, 8);
    case T_BOOLEAN:
        truth = PyObject_IsTrue(value);
        return truth < 0 ? -1 : put(w, truth ? "\x01" : "\x00", 1);
    case T_STRING:
    case T_NULLABLE_STRING:
        if (value == Py_None) return code == T_NULLABLE_STRING ? put_be(w, -1, 2) : -1;
        return put_string(w, value, 0);
    case T_COMPACT_STRING:
    case T_COMPACT_NULLABLE_STRING:
        if (value == Py_None) return code == T_COMPACT_NULLABLE_STRING ? put_uvarint(w, 0) : -1;
        return put_string(w, value, 1);
    case T_BYTES:
        return value == Py_None ? put_be(w, -1, 4) : put_bytes(w, value, 0);
    case T_COMPACT_BYTES:
    case T_COMPACT_NULLABLE_BYTES:
        if (value == Py_None) return code == T_COMPACT_NULLABLE_BYTES ? put_uvarint(w, 0) : -1;
        return put_bytes(w, value, 1);
    case T_RECORDS:
    case T_COMPACT_RECORDS:
        return put_records(w, value, code == T_COMPACT_RECORDS);
    case T_UVARINT:
        return in_range(value, 0, 0xFFFFFFFFll, &v) < 0 ? -1 : put_uvarint(w, (uint64_t)v);
    case T_UUID: {
        Py_buffer buffer;
        if (PyObject_GetBuffer(value, &buffer, PyBUF_SIMPLE) < 0) return -1;
        int failed = buffer.len != 16 || PyObject_Length(value) != 16 || put(w, buffer.buf, 16) < 0;
        PyBuffer_Release(&buffer);
        return failed ? -1 : 0;
    }
    case T_ARRAY:
    case T_COMPACT_ARRAY:
        return encode_array(program, value, w, code == T_COMPACT_ARRAY);
    case T_STRUCT:
        return encode_struct(program, value, w);
    default:
        return -1;
    }
}

/* encode(program, value) -> (chunks, size) as the reference's Writer ends (runs of bytes, regions
 * apart), or None: the reference must encode it (and name what is wrong, if anything is) */
static PyObject *wire_encode(PyObject *self, PyObject *args) {
    PyObject *program, *value;
    if (!PyArg_ParseTuple(args, "O!O", &PyTuple_Type, &program, &value)) return NULL;
    Wr w = {NULL, 0, 0, NULL, 0};
    w.chunks = PyList_New(0);
    if (w.chunks == NULL) return NULL;
    int failed = encode_value(program, value, &w) < 0 || flush_pending(&w) < 0;
    PyMem_Free(w.data);
    if (failed) {
        Py_DECREF(w.chunks);
        if (PyErr_Occurred() && PyErr_ExceptionMatches(PyExc_MemoryError)) return NULL;
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    return Py_BuildValue("(Nn)", w.chunks, w.total);
}

/* configure(required): the reference's marker of a field that has no default */
static PyObject *wire_configure(PyObject *self, PyObject *required) {
    Py_XINCREF(required);
    Py_XSETREF(REQUIRED, required);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"decode", wire_decode, METH_VARARGS, "decode(program, frame, pos, end) -> (value, pos) or None"},
    {"encode", wire_encode, METH_VARARGS, "encode(program, value) -> (chunks, size) or None"},
    {"configure", wire_configure, METH_O, "configure(required)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_wire", NULL, -1, methods};

PyMODINIT_FUNC PyInit__wire(void) {
    LENGTH = PyUnicode_InternFromString("length");
    if (LENGTH == NULL) return NULL;
    return PyModule_Create(&module);
}
