/*
 * C versions of the three per-message kernels of kafkalog.record (see _fastpath.py, the reference).
 *
 * Every function here takes the same arguments and returns the same values as its Python twin;
 * tests compare the two on the same bytes. Kernels never raise for bad data: they return an error
 * triple (kind, position, reason). All multi-byte fields are big-endian. The CRC is zlib's crc32.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <zlib.h>

#define V0_MIN 26
#define V1_MIN 34
#define MAGIC_POS 16
#define CODEC_MASK 0x07
#define TS_TYPE_BIT 0x08

static PyObject *message_type = NULL; /* a tuple subclass (kafkalog.record.Message) */
static PyObject *create_time = NULL;
static PyObject *log_append_time = NULL;

static inline int32_t rd_i32(const unsigned char *p) {
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3]);
}
static inline uint32_t rd_u32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}
static inline int64_t rd_i64(const unsigned char *p) {
    return (int64_t)(((uint64_t)rd_u32(p) << 32) | (uint64_t)rd_u32(p + 4));
}
static inline void wr_u32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24); p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8); p[3] = (unsigned char)v;
}
static inline void wr_i64(unsigned char *p, int64_t v) {
    wr_u32(p, (uint32_t)((uint64_t)v >> 32));
    wr_u32(p + 4, (uint32_t)((uint64_t)v & 0xffffffffu));
}
static inline uint32_t crc_of(const unsigned char *p, Py_ssize_t n) {
    /* zlib's crc32 takes a uInt length: feed it in chunks so huge entries stay correct. */
    uLong crc = crc32(0L, Z_NULL, 0);
    while (n > 0) {
        uInt chunk = n > (Py_ssize_t)0x40000000 ? 0x40000000u : (uInt)n;
        crc = crc32(crc, p, chunk);
        p += chunk; n -= chunk;
    }
    return (uint32_t)crc;
}

static PyObject *error_triple(const char *kind, Py_ssize_t pos, PyObject *reason) {
    if (reason == NULL) return NULL;
    PyObject *t = Py_BuildValue("(snN)", kind, pos, reason);
    return t;
}

/* Check key/value lengths of one message; on success set *value_pos and *value_len, return NULL with
 * *ok = 1; on failure return a new reason string and *ok = 0. */
static PyObject *check_lengths(const unsigned char *b, Py_ssize_t key_pos, Py_ssize_t end, int32_t key_len,
                               Py_ssize_t *value_pos, int32_t *value_len, int *ok) {
    Py_ssize_t vlen_pos;
    *ok = 0;
    if (key_len == -1) {
        vlen_pos = key_pos;
    } else if (key_len >= 0 && (Py_ssize_t)key_len <= end - key_pos - 4) {
        vlen_pos = key_pos + key_len;
    } else {
        return PyUnicode_FromFormat("key length %d does not fit in the message", (int)key_len);
    }
    int32_t vlen = rd_i32(b + vlen_pos);
    Py_ssize_t vpos = vlen_pos + 4;
    if ((vlen == -1 && vpos == end) || (vlen >= 0 && vpos + (Py_ssize_t)vlen == end)) {
        *value_pos = vpos; *value_len = vlen; *ok = 1;
        return NULL;
    }
    return PyUnicode_FromFormat("value length %d does not match the message size", (int)vlen);
}

static PyObject *py_configure(PyObject *self, PyObject *args) {
    PyObject *mt, *ct, *lat;
    if (!PyArg_ParseTuple(args, "OOO", &mt, &ct, &lat)) return NULL;
    if (!PyType_Check(mt) || !PyType_IsSubtype((PyTypeObject *)mt, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "message_type must be a tuple subclass");
        return NULL;
    }
    Py_XSETREF(message_type, Py_NewRef(mt));
    Py_XSETREF(create_time, Py_NewRef(ct));
    Py_XSETREF(log_append_time, Py_NewRef(lat));
    Py_RETURN_NONE;
}

static PyObject *make_message(int64_t offset, int64_t ts, PyObject *ts_type, const unsigned char *key,
                              int32_t key_len, const unsigned char *value, int32_t value_len) {
    PyObject *o = PyLong_FromLongLong(offset);
    PyObject *t = PyLong_FromLongLong(ts);
    PyObject *k = key_len < 0 ? Py_NewRef(Py_None) : PyBytes_FromStringAndSize((const char *)key, key_len);
    PyObject *v = value_len < 0 ? Py_NewRef(Py_None) : PyBytes_FromStringAndSize((const char *)value, value_len);
    if (!o || !t || !k || !v) goto fail;
    PyTypeObject *type = (PyTypeObject *)(message_type ? message_type : (PyObject *)&PyTuple_Type);
    PyObject *m = type->tp_alloc(type, 5);
    if (!m) goto fail;
    PyTuple_SET_ITEM(m, 0, o);
    PyTuple_SET_ITEM(m, 1, t);
    PyTuple_SET_ITEM(m, 2, Py_NewRef(ts_type));
    PyTuple_SET_ITEM(m, 3, k);
    PyTuple_SET_ITEM(m, 4, v);
    /* A message holds only ints, bytes, None and an enum member: it can never be part of a
     * reference cycle, so the cyclic GC need not track it (CPython untracks such tuples too,
     * lazily). Untracking here keeps decoding large fetches from triggering costly collections. */
    if (PyObject_IS_GC(m)) PyObject_GC_UnTrack(m);
    return m;
fail:
    Py_XDECREF(o); Py_XDECREF(t); Py_XDECREF(k); Py_XDECREF(v);
    return NULL;
}

/* decode_plain(buf, pos, stop, verify_crc, min_offset, required_magic, max_count) -> (list, pos, error) */
static PyObject *py_decode_plain(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos, stop;
    int verify_crc, required_magic;
    long long min_offset;
    Py_ssize_t max_count, count = 0;
    if (!PyArg_ParseTuple(args, "y*nnpLin", &view, &pos, &stop, &verify_crc, &min_offset, &required_magic,
                          &max_count))
        return NULL;
    if (create_time == NULL) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_RuntimeError, "configure() was not called");
        return NULL;
    }
    if (pos < 0 || stop > view.len || pos > stop) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "pos/stop outside the buffer");
        return NULL;
    }
    const unsigned char *b = (const unsigned char *)view.buf;
    PyObject *out = PyList_New(0);
    PyObject *error = NULL;
    if (!out) goto fail;
    while (stop - pos >= V0_MIN && count < max_count) {
        unsigned magic = b[pos + MAGIC_POS];
        if ((required_magic != -1 && (int)magic != required_magic) || magic > 1) break;
        int64_t offset = rd_i64(b + pos);
        int32_t size = rd_i32(b + pos + 8);
        uint32_t crc = rd_u32(b + pos + 12);
        unsigned attributes = b[pos + 17];
        int64_t ts;
        int32_t key_len;
        Py_ssize_t key_pos;
        if (magic == 1) {
            if (stop - pos < V1_MIN) break;
            ts = rd_i64(b + pos + 18);
            key_len = rd_i32(b + pos + 26);
            key_pos = pos + V1_MIN - 4;
        } else {
            ts = -1;
            key_len = rd_i32(b + pos + 18);
            key_pos = pos + V0_MIN - 4;
        }
        Py_ssize_t end = pos + 12 + (Py_ssize_t)size;
        if (end > stop || key_pos + 4 > end || (attributes & CODEC_MASK)) break;
        if (verify_crc && crc_of(b + pos + MAGIC_POS, end - pos - MAGIC_POS) != crc) {
            error = error_triple("corrupt", pos, PyUnicode_FromString("CRC mismatch"));
            if (!error) goto fail;
            break;
        }
        Py_ssize_t value_pos = 0;
        int32_t value_len = 0;
        int ok;
        PyObject *reason = check_lengths(b, key_pos, end, key_len, &value_pos, &value_len, &ok);
        if (!ok) {
            error = error_triple("corrupt", pos, reason);
            if (!error) goto fail;
            break;
        }
        if (offset >= min_offset) {
            PyObject *ts_type = (magic == 1 && (attributes & TS_TYPE_BIT)) ? log_append_time : create_time;
            PyObject *m = make_message(offset, ts, ts_type, b + key_pos, key_len, b + value_pos, value_len);
            if (!m) goto fail;
            int rc = PyList_Append(out, m);
            Py_DECREF(m);
            if (rc < 0) goto fail;
        }
        count++;
        pos = end;
    }
    PyBuffer_Release(&view);
    if (error == NULL) error = Py_NewRef(Py_None);
    return Py_BuildValue("(NnN)", out, pos, error);
fail:
    PyBuffer_Release(&view);
    Py_XDECREF(out);
    Py_XDECREF(error);
    return NULL;
}

static int add_point(PyObject *points, Py_ssize_t pos, int64_t offset, long long max_ts, long long offset_of_max) {
    PyObject *p = Py_BuildValue("(nLLL)", pos, (long long)offset, max_ts, offset_of_max);
    if (!p) return -1;
    int rc = PyList_Append(points, p);
    Py_DECREF(p);
    return rc;
}

/* scan_entries(buf, pos, stop, verify_crc, min_next_offset, index_interval, bytes_since_index)
 *   -> (pos, entries, last_offset, max_ts, offset_of_max, points, bytes_since_index, error) */
static PyObject *py_scan_entries(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos, stop, index_interval, since;
    int verify_crc;
    long long floor;
    if (!PyArg_ParseTuple(args, "y*nnpLnn", &view, &pos, &stop, &verify_crc, &floor, &index_interval, &since))
        return NULL;
    if (pos < 0 || stop > view.len || pos > stop) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "pos/stop outside the buffer");
        return NULL;
    }
    const unsigned char *b = (const unsigned char *)view.buf;
    long long entries = 0, last_offset = -1, max_ts = -1, offset_of_max = -1;
    PyObject *points = PyList_New(0);
    PyObject *error = NULL;
    if (!points) goto fail;
    while (stop - pos >= 12) {
        int64_t offset = rd_i64(b + pos);
        int32_t size = rd_i32(b + pos + 8);
        if (size < 14) {
            error = error_triple("corrupt", pos, PyUnicode_FromFormat("message size %d is below the minimum", (int)size));
            if (!error) goto fail;
            break;
        }
        Py_ssize_t end = pos + 12 + (Py_ssize_t)size;
        if (end > stop) break;
        uint32_t crc = rd_u32(b + pos + 12);
        signed char magic = (signed char)b[pos + MAGIC_POS];
        int64_t ts;
        if (magic == 1) {
            if (size < V1_MIN - 12) {
                error = error_triple("corrupt", pos,
                    PyUnicode_FromFormat("message size %d is below the magic 1 minimum", (int)size));
                if (!error) goto fail;
                break;
            }
            ts = rd_i64(b + pos + 18);
        } else if (magic == 0) {
            ts = -1;
        } else {
            error = error_triple("corrupt", pos, PyUnicode_FromFormat("unknown magic byte %d", (int)magic));
            if (!error) goto fail;
            break;
        }
        if (verify_crc && crc_of(b + pos + MAGIC_POS, end - pos - MAGIC_POS) != crc) {
            error = error_triple("corrupt", pos, PyUnicode_FromString("CRC mismatch"));
            if (!error) goto fail;
            break;
        }
        if (offset < floor) {
            error = error_triple("corrupt", pos,
                PyUnicode_FromFormat("offset %lld is not above the previous offset %lld",
                                     (long long)offset, floor - 1));
            if (!error) goto fail;
            break;
        }
        if (ts > max_ts) { max_ts = ts; offset_of_max = offset; }
        if (since >= index_interval) {
            if (add_point(points, pos, offset, max_ts, offset_of_max) < 0) goto fail;
            since = 0;
        }
        since += end - pos;
        entries++;
        last_offset = offset;
        floor = offset + 1;
        pos = end;
    }
    PyBuffer_Release(&view);
    if (error == NULL) error = Py_NewRef(Py_None);
    return Py_BuildValue("(nLLLLNnN)", pos, entries, last_offset, max_ts, offset_of_max, points, since, error);
fail:
    PyBuffer_Release(&view);
    Py_XDECREF(points);
    Py_XDECREF(error);
    return NULL;
}

/* assign_plain(buf, pos, stop, next_offset, max_entry_bytes, now_ms, log_append_time, index_interval,
 *              bytes_since_index) -> (pos, next_offset, max_ts, offset_of_max, points, since, error) */
static PyObject *py_assign_plain(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos, stop, max_entry, index_interval, since;
    long long next_offset, now_ms;
    int log_append;
    if (!PyArg_ParseTuple(args, "w*nnLnLpnn", &view, &pos, &stop, &next_offset, &max_entry, &now_ms, &log_append,
                          &index_interval, &since))
        return NULL;
    if (pos < 0 || stop > view.len || pos > stop) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "pos/stop outside the buffer");
        return NULL;
    }
    unsigned char *b = (unsigned char *)view.buf;
    long long max_ts = -1, offset_of_max = -1;
    PyObject *points = PyList_New(0);
    PyObject *error = NULL;
    if (!points) goto fail;
    while (stop - pos >= V1_MIN) {
        int32_t size = rd_i32(b + pos + 8);
        uint32_t crc = rd_u32(b + pos + 12);
        signed char magic = (signed char)b[pos + MAGIC_POS];
        unsigned char attributes = b[pos + 17];
        int64_t ts = rd_i64(b + pos + 18);
        int32_t key_len = rd_i32(b + pos + 26);
        if (magic != 1 || (attributes & CODEC_MASK)) break;
        Py_ssize_t end = pos + 12 + (Py_ssize_t)size;
        if (end > stop) break;
        if (size < V1_MIN - 12) {
            error = error_triple("corrupt", pos,
                PyUnicode_FromFormat("message size %d is below the magic 1 minimum", (int)size));
            if (!error) goto fail;
            break;
        }
        if (end - pos > max_entry) {
            error = error_triple("too_large", pos,
                PyUnicode_FromFormat("message of %zd bytes is larger than the limit of %zd", end - pos, max_entry));
            if (!error) goto fail;
            break;
        }
        if (crc_of(b + pos + MAGIC_POS, end - pos - MAGIC_POS) != crc) {
            error = error_triple("corrupt", pos, PyUnicode_FromString("CRC mismatch"));
            if (!error) goto fail;
            break;
        }
        Py_ssize_t value_pos;
        int32_t value_len;
        int ok;
        PyObject *reason = check_lengths(b, pos + V1_MIN - 4, end, key_len, &value_pos, &value_len, &ok);
        if (!ok) {
            error = error_triple("corrupt", pos, reason);
            if (!error) goto fail;
            break;
        }
        if (ts < -1) {
            error = error_triple("timestamp", pos,
                PyUnicode_FromFormat("timestamp %lld is negative and not -1 (none)", (long long)ts));
            if (!error) goto fail;
            break;
        }
        if (log_append || ts == -1) {
            ts = now_ms;
            b[pos + 17] = (unsigned char)(attributes | TS_TYPE_BIT);
            wr_i64(b + pos + 18, ts);
            wr_u32(b + pos + 12, crc_of(b + pos + MAGIC_POS, end - pos - MAGIC_POS));
        }
        wr_i64(b + pos, next_offset);
        if (ts > max_ts) { max_ts = ts; offset_of_max = next_offset; }
        if (since >= index_interval) {
            if (add_point(points, pos, next_offset, max_ts, offset_of_max) < 0) goto fail;
            since = 0;
        }
        since += end - pos;
        next_offset++;
        pos = end;
    }
    PyBuffer_Release(&view);
    if (error == NULL) error = Py_NewRef(Py_None);
    return Py_BuildValue("(nLLLNnN)", pos, next_offset, max_ts, offset_of_max, points, since, error);
fail:
    PyBuffer_Release(&view);
    Py_XDECREF(points);
    Py_XDECREF(error);
    return NULL;
}

static PyMethodDef methods[] = {
    {"configure", py_configure, METH_VARARGS, "Set the message tuple type and the timestamp-type values."},
    {"decode_plain", py_decode_plain, METH_VARARGS, "See kafkalog.record._fastpath.decode_plain."},
    {"scan_entries", py_scan_entries, METH_VARARGS, "See kafkalog.record._fastpath.scan_entries."},
    {"assign_plain", py_assign_plain, METH_VARARGS, "See kafkalog.record._fastpath.assign_plain."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_speedups", "C kernels of kafkalog.record.", -1, methods};

PyMODINIT_FUNC PyInit__speedups(void) { return PyModule_Create(&module); }
