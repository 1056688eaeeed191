/*
 * C versions of the per-message kernels of kafkalog.record (see _fastpath.py, the reference): three
 * for message format v0/v1 entries, two for the records of a magic 2 batch.
 *
 * Every function here takes the same arguments and returns the same values as its Python twin;
 * tests compare the two on the same bytes. Kernels never raise for bad data: they return an error
 * triple (kind, position, reason). All multi-byte fields are big-endian. The CRC is zlib's crc32.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <zlib.h>

#define V0_MIN 26
#define V1_MIN 34
#define MAGIC_POS 16
#define CODEC_MASK 0x07
#define TS_TYPE_BIT 0x08
/* magic 2 record batches (kafkalog/record/batch_format.py has the layout) */
#define BATCH_MIN_LENGTH 49
#define BATCH_CRC_POS 17
#define BATCH_ATTRIBUTES_POS 21
#define BATCH_LAST_DELTA_POS 23
#define BATCH_MAX_TS_POS 35

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

/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) of magic 2 batches: SSE4.2's crc32
 * instruction where the processor has it, else slicing-by-8 tables.
 *
 * One crc32 instruction waits for the one before it (3 cycles), but the processor can start one
 * every cycle: so a long buffer is taken in three streams at once, each over its own third of a
 * block, and the three registers are joined. Joining uses the CRC's linearity: the register
 * after A||B is (register after A) * x^(8*|B|) mod P, xor the register of B started from 0; the
 * multiplication by a fixed x^(8*L) is a table per byte of the register (shift_tables). */
#define CRC_LONG 8192
#define CRC_SHORT 256
static uint32_t crc32c_table[8][256];
static int crc32c_hardware = 0;

static uint32_t crc32c_long_shift[4][256];
static uint32_t crc32c_short_shift[4][256];

/* a * b modulo the polynomial, both reflected (bit 31 is x^0) */
static uint32_t crc32c_multiply(uint32_t a, uint32_t b) {
    uint32_t product = 0;
    for (uint32_t bit = 1u << 31; bit != 0; bit >>= 1) {
        if (a & bit) product ^= b;
        b = b & 1 ? (b >> 1) ^ 0x82F63B78u : b >> 1;
    }
    return product;
}

/* tables that multiply a register by x^(8 * length) (appending ``length`` zero bytes) */
static void crc32c_shift_tables(uint32_t tables[4][256], Py_ssize_t length) {
    uint32_t factor = 1u << 31; /* x^0 */
    for (Py_ssize_t i = 0; i < length; i++) /* times x^8 per zero byte */
        for (int k = 0; k < 8; k++) factor = factor & 1 ? (factor >> 1) ^ 0x82F63B78u : factor >> 1;
    for (uint32_t i = 0; i < 256; i++)
        for (int k = 0; k < 4; k++) tables[k][i] = crc32c_multiply(factor, i << (8 * k));
}

static inline uint32_t crc32c_shift(uint32_t tables[4][256], uint32_t crc) {
    return tables[0][crc & 0xFF] ^ tables[1][(crc >> 8) & 0xFF] ^ tables[2][(crc >> 16) & 0xFF] ^ tables[3][crc >> 24];
}

static void crc32c_init(void) {
    crc32c_shift_tables(crc32c_long_shift, CRC_LONG);
    crc32c_shift_tables(crc32c_short_shift, CRC_SHORT);
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc32c_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc32c_table[t][i] = (crc32c_table[t - 1][i] >> 8) ^ crc32c_table[0][crc32c_table[t - 1][i] & 0xFF];
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    crc32c_hardware = __builtin_cpu_supports("sse4.2");
#endif
}

static uint32_t crc32c_software(uint32_t crc, const unsigned char *p, Py_ssize_t n) {
    while (n >= 8) {
        uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
        uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
        crc = crc32c_table[7][lo & 0xFF] ^ crc32c_table[6][(lo >> 8) & 0xFF] ^ crc32c_table[5][(lo >> 16) & 0xFF] ^
              crc32c_table[4][lo >> 24] ^ crc32c_table[3][hi & 0xFF] ^ crc32c_table[2][(hi >> 8) & 0xFF] ^
              crc32c_table[1][(hi >> 16) & 0xFF] ^ crc32c_table[0][hi >> 24];
        p += 8; n -= 8;
    }
    while (n-- > 0) crc = (crc >> 8) ^ crc32c_table[0][(crc ^ *p++) & 0xFF];
    return crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("sse4.2"))) static inline uint64_t crc32c_sse42_streams(
    uint64_t c, const unsigned char *p, Py_ssize_t block, uint32_t shift[4][256]) {
    uint64_t c1 = 0, c2 = 0;
    for (const unsigned char *end = p + block; p < end; p += 8) {
        uint64_t w0, w1, w2;
        memcpy(&w0, p, 8);
        memcpy(&w1, p + block, 8);
        memcpy(&w2, p + 2 * block, 8);
        c = __builtin_ia32_crc32di(c, w0);
        c1 = __builtin_ia32_crc32di(c1, w1);
        c2 = __builtin_ia32_crc32di(c2, w2);
    }
    return crc32c_shift(shift, crc32c_shift(shift, (uint32_t)c) ^ (uint32_t)c1) ^ (uint32_t)c2;
}

__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(uint32_t crc, const unsigned char *p, Py_ssize_t n) {
    uint64_t c = crc;
    for (; n >= 3 * CRC_LONG; p += 3 * CRC_LONG, n -= 3 * CRC_LONG)
        c = crc32c_sse42_streams(c, p, CRC_LONG, crc32c_long_shift);
    for (; n >= 3 * CRC_SHORT; p += 3 * CRC_SHORT, n -= 3 * CRC_SHORT)
        c = crc32c_sse42_streams(c, p, CRC_SHORT, crc32c_short_shift);
    while (n >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        c = __builtin_ia32_crc32di(c, word);
        p += 8; n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n-- > 0) c32 = __builtin_ia32_crc32qi(c32, *p++);
    return c32;
}
#endif

static uint32_t crc32c_of(const unsigned char *p, Py_ssize_t n) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (crc32c_hardware) return crc32c_sse42(0xFFFFFFFFu, p, n) ^ 0xFFFFFFFFu;
#endif
    return crc32c_software(0xFFFFFFFFu, p, n) ^ 0xFFFFFFFFu;
}

/* crc32c(data) -> int: the CRC-32C of a bytes-like object. */
static PyObject *py_crc32c(PyObject *self, PyObject *args) {
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "y*", &view)) return NULL;
    uint32_t crc;
    if (view.len < (1 << 20)) {
        /* under a megabyte the CRC takes microseconds: giving the GIL away would cost more, for
           taking it back waits for another busy thread's switch interval (5 ms) */
        crc = crc32c_of((const unsigned char *)view.buf, view.len);
    } else {
        Py_BEGIN_ALLOW_THREADS
        crc = crc32c_of((const unsigned char *)view.buf, view.len);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(crc);
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

/* A magic 2 record: a message whose headers tuple is given (stolen). */
static PyObject *make_record(int64_t offset, int64_t ts, PyObject *ts_type, const unsigned char *key, int32_t key_len,
                             const unsigned char *value, int32_t value_len, PyObject *headers) {
    PyObject *m = make_message(offset, ts, ts_type, key, key_len, value, value_len);
    if (!m) { Py_DECREF(headers); return NULL; }
    Py_SETREF(((PyTupleObject *)m)->ob_item[5], headers);
    return m;
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
        if (magic < 2 && verify_crc && crc_of(b + pos + MAGIC_POS, end - pos - MAGIC_POS) != crc) {
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
        int64_t ts, last = offset;
        if (magic == 2) {
            if (size < BATCH_MIN_LENGTH) {
                error = error_triple("corrupt", pos,
                    PyUnicode_FromFormat("record batch length %d is below the magic 2 minimum", (int)size));
                if (!error) goto fail;
                break;
            }
            int32_t last_delta = rd_i32(b + pos + BATCH_LAST_DELTA_POS);
            if (last_delta < 0) {
                error = error_triple("corrupt", pos,
                    PyUnicode_FromFormat("record batch last offset delta %d is negative", (int)last_delta));
                if (!error) goto fail;
                break;
            }
            if (verify_crc &&
                crc32c_of(b + pos + BATCH_ATTRIBUTES_POS, end - pos - BATCH_ATTRIBUTES_POS) != rd_u32(b + pos + BATCH_CRC_POS)) {
                error = error_triple("corrupt", pos, PyUnicode_FromString("CRC-32C mismatch"));
                if (!error) goto fail;
                break;
            }
            ts = rd_i64(b + pos + BATCH_MAX_TS_POS);
            last = offset + last_delta;
        } else if (magic == 1) {
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
        if (magic < 2 && verify_crc && crc_of(b + pos + MAGIC_POS, end - pos - MAGIC_POS) != crc) {
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
        /* a magic 2 batch counts by its last offset, as a v0/v1 wrapper stores it */
        if (ts > max_ts) { max_ts = ts; offset_of_max = last; }
        if (since >= index_interval) {
            if (add_point(points, pos, last, max_ts, offset_of_max) < 0) goto fail;
            since = 0;
        }
        since += end - pos;
        entries++;
        last_offset = last;
        floor = last + 1;
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

/* ------------------------------------------------------------------ magic 2 records */

/* A zigzag varint at b[*pos] before end: 1 and the value, or 0 when it runs past end, is longer
 * than 10 bytes or holds more than 64 bits (as _fastpath._varint). */
static inline int rd_varint(const unsigned char *b, Py_ssize_t *pos, Py_ssize_t end, int64_t *out) {
    uint64_t result = 0;
    int shift = 0;
    Py_ssize_t p = *pos, limit = end < p + 10 ? end : p + 10;
    while (p < limit) {
        unsigned char byte = b[p++];
        if (shift == 63 && byte > 1) return 0;
        result |= (uint64_t)(byte & 0x7F) << shift;
        if (byte < 0x80) {
            *out = (int64_t)(result >> 1) ^ -(int64_t)(result & 1);
            *pos = p;
            return 1;
        }
        shift += 7;
    }
    return 0;
}

static PyObject *record_error(Py_ssize_t pos, const char *reason) {
    return Py_BuildValue("([](snN))", "corrupt", pos, PyUnicode_FromString(reason));
}

/* The fields of one record up to its headers, as decode_records and check_records both read them. */
typedef struct {
    Py_ssize_t end;           /* where the record ends */
    int64_t ts_delta, offset_delta, header_count;
    int64_t sizes[2];         /* key and value lengths, -1 for null */
    Py_ssize_t field_pos[2];  /* where the key and the value start */
} record_head;

/* Read the record at *pos (in b[..end)) up to its header count, advancing *pos to its first header;
 * its offset delta must lie in (previous_delta, max_delta]. Returns NULL, or the error triple
 * ([], (kind, position, reason)) of the first thing wrong (NULL with an exception set on failure). */
static PyObject *read_record_head(const unsigned char *b, Py_ssize_t *pos, Py_ssize_t end, int64_t previous_delta,
                                  int64_t max_delta, record_head *r, int *bad) {
    Py_ssize_t start = *pos;
    int64_t length;
    *bad = 1;
    r->offset_delta = 0; /* 0: as _fastpath on a bad varint */
    if (!rd_varint(b, pos, end, &length) || length < 0 || length > end - *pos)
        return record_error(start, "a record's length runs past the batch");
    r->end = *pos + (Py_ssize_t)length;
    if (*pos >= r->end) return record_error(start, "a record is empty");
    *pos += 1; /* attributes: unused */
    if (!rd_varint(b, pos, r->end, &r->ts_delta))
        return record_error(start, "a record's timestamp delta runs past the record");
    if (!rd_varint(b, pos, r->end, &r->offset_delta) ||
        !(previous_delta < r->offset_delta && r->offset_delta <= max_delta)) {
        PyObject *reason = PyUnicode_FromFormat("a record's offset delta is out of order or range (%lld)",
                                                (long long)r->offset_delta);
        return reason ? Py_BuildValue("([](snN))", "corrupt", start, reason) : NULL;
    }
    static const char *const what[2] = {"a record's key length does not fit in the record",
                                        "a record's value length does not fit in the record"};
    for (int f = 0; f < 2; f++) {
        if (!rd_varint(b, pos, r->end, &r->sizes[f]) || r->sizes[f] < -1 || r->sizes[f] > r->end - *pos)
            return record_error(start, what[f]);
        r->field_pos[f] = *pos;
        if (r->sizes[f] > 0) *pos += (Py_ssize_t)r->sizes[f];
    }
    if (!rd_varint(b, pos, r->end, &r->header_count) || r->header_count < 0 || r->header_count > r->end - *pos)
        return record_error(start, "a record's header count does not fit in the record");
    *bad = 0;
    return NULL;
}

/* decode_records(buf, count, base_offset, base_timestamp, max_timestamp, last_offset_delta,
 *                log_append_time) -> (messages, None) | ([], error) */
static PyObject *py_decode_records(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t count;
    long long base_offset, base_ts, max_ts, last_delta;
    int log_append;
    if (!PyArg_ParseTuple(args, "y*nLLLLp", &view, &count, &base_offset, &base_ts, &max_ts, &last_delta,
                          &log_append))
        return NULL;
    const unsigned char *b = (const unsigned char *)view.buf;
    Py_ssize_t end = view.len, pos = 0;
    PyObject *out = PyList_New(0);
    PyObject *result = NULL;
    PyObject *ts_type = log_append ? log_append_time : create_time;
    int64_t previous_delta = -1;
    if (!out) goto done;
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t start = pos;
        record_head r;
        int bad;
        result = read_record_head(b, &pos, end, previous_delta, (int64_t)last_delta, &r, &bad);
        if (bad) goto done;
        previous_delta = r.offset_delta;
        Py_ssize_t record_end = r.end;
        int64_t ts_delta = r.ts_delta, offset_delta = r.offset_delta, header_count = r.header_count;
        int64_t *sizes = r.sizes;
        Py_ssize_t *field_pos = r.field_pos;
        PyObject *headers = PyTuple_New((Py_ssize_t)header_count);
        if (!headers) goto done;
        for (Py_ssize_t h = 0; h < (Py_ssize_t)header_count; h++) {
            int64_t key_size, value_size;
            const char *bad = NULL;
            PyObject *key = NULL, *value = NULL;
            if (!rd_varint(b, &pos, record_end, &key_size) || key_size < 0 || key_size > record_end - pos) {
                bad = "a header key length does not fit in the record";
            } else {
                key = PyUnicode_DecodeUTF8((const char *)b + pos, (Py_ssize_t)key_size, "strict");
                if (!key) {
                    if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) { Py_DECREF(headers); goto done; }
                    PyErr_Clear();
                    bad = "a header key is not UTF-8";
                } else {
                    pos += (Py_ssize_t)key_size;
                    if (!rd_varint(b, &pos, record_end, &value_size) || value_size < -1 || value_size > record_end - pos) {
                        bad = "a header value length does not fit in the record";
                    } else if (value_size == -1) {
                        value = Py_NewRef(Py_None);
                    } else {
                        value = PyBytes_FromStringAndSize((const char *)b + pos, (Py_ssize_t)value_size);
                        pos += (Py_ssize_t)value_size;
                    }
                }
            }
            if (bad) {
                Py_XDECREF(key);
                Py_DECREF(headers);
                result = record_error(start, bad);
                goto done;
            }
            if (!value) { Py_DECREF(key); Py_DECREF(headers); goto done; }
            PyObject *pair = PyTuple_Pack(2, key, value);
            Py_DECREF(key); Py_DECREF(value);
            if (!pair) { Py_DECREF(headers); goto done; }
            PyTuple_SET_ITEM(headers, h, pair);
        }
        if (pos != record_end) {
            Py_DECREF(headers);
            result = record_error(start, "a record's fields do not add up to its length");
            goto done;
        }
        int64_t timestamp;
        if (log_append) {
            timestamp = max_ts;
        } else if (__builtin_add_overflow((int64_t)base_ts, ts_delta, &timestamp)) {
            Py_DECREF(headers);
            result = record_error(start, "a record's timestamp is out of range");
            goto done;
        }
        PyObject *m = make_record((int64_t)base_offset + offset_delta, timestamp, ts_type, b + field_pos[0],
                                  (int32_t)(sizes[0] < 0 ? -1 : sizes[0]), b + field_pos[1],
                                  (int32_t)(sizes[1] < 0 ? -1 : sizes[1]), headers);
        if (!m) goto done;
        int appended = PyList_Append(out, m);
        Py_DECREF(m);
        if (appended < 0) goto done;
    }
    if (pos != end) {
        PyObject *reason = PyUnicode_FromFormat("%zd bytes follow the last of %zd records", end - pos, count);
        result = reason ? Py_BuildValue("([](snN))", "corrupt", pos, reason) : NULL;
        goto done;
    }
    result = Py_BuildValue("(OO)", out, Py_None);
done:
    Py_XDECREF(out);
    PyBuffer_Release(&view);
    return result;
}

/* check_records(buf, count, base_timestamp, log_append_time)
 *     -> (max_timestamp, missing_timestamp, None) | (0, False, error): see _fastpath.check_records. */
static PyObject *py_check_records(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t count;
    long long base_ts;
    int log_append;
    if (!PyArg_ParseTuple(args, "y*nLp", &view, &count, &base_ts, &log_append)) return NULL;
    const unsigned char *b = (const unsigned char *)view.buf;
    Py_ssize_t end = view.len, pos = 0;
    PyObject *result = NULL;
    int64_t max_ts = INT64_MIN, bad_ts = 0;
    int missing = 0;
    Py_ssize_t bad_ts_pos = -1;
    int64_t previous_delta = -1;
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t start = pos;
        record_head r;
        int bad;
        /* rising and at most count - 1: over count records, exactly 0..count-1 (and where decoding fails) */
        result = read_record_head(b, &pos, end, previous_delta, (int64_t)count - 1, &r, &bad);
        if (bad) goto failed;
        previous_delta = r.offset_delta;
        Py_ssize_t record_end = r.end;
        int64_t ts_delta = r.ts_delta, header_count = r.header_count;
        for (int64_t h = 0; h < header_count; h++) {
            int64_t key_size, value_size;
            if (!rd_varint(b, &pos, record_end, &key_size) || key_size < 0 || key_size > record_end - pos) {
                result = record_error(start, "a header key length does not fit in the record");
                goto failed;
            }
            PyObject *key = PyUnicode_DecodeUTF8((const char *)b + pos, (Py_ssize_t)key_size, "strict");
            if (!key) {
                if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) goto failed;
                PyErr_Clear();
                result = record_error(start, "a header key is not UTF-8");
                goto failed;
            }
            Py_DECREF(key);
            pos += (Py_ssize_t)key_size;
            if (!rd_varint(b, &pos, record_end, &value_size) || value_size < -1 || value_size > record_end - pos) {
                result = record_error(start, "a header value length does not fit in the record");
                goto failed;
            }
            if (value_size > 0) pos += (Py_ssize_t)value_size;
        }
        if (pos != record_end) {
            result = record_error(start, "a record's fields do not add up to its length");
            goto failed;
        }
        if (log_append) continue;
        int64_t timestamp;
        if (__builtin_add_overflow((int64_t)base_ts, ts_delta, &timestamp)) {
            result = record_error(start, "a record's timestamp is out of range");
            goto failed;
        }
        if (timestamp == -1) {
            missing = 1;
        } else if (timestamp < -1 && bad_ts_pos < 0) {
            bad_ts = timestamp;
            bad_ts_pos = start;
        }
        if (timestamp > max_ts) max_ts = timestamp;
    }
    if (pos != end) {
        PyObject *reason = PyUnicode_FromFormat("%zd bytes follow the last of %zd records", end - pos, count);
        result = reason ? Py_BuildValue("(iON)", 0, Py_False, Py_BuildValue("(snN)", "corrupt", pos, reason)) : NULL;
        goto done;
    }
    if (bad_ts_pos >= 0) {
        PyObject *reason = PyUnicode_FromFormat("timestamp %lld is negative and not -1 (none)", (long long)bad_ts);
        result = reason ? Py_BuildValue("(iON)", 0, Py_False, Py_BuildValue("(snN)", "timestamp", bad_ts_pos, reason))
                        : NULL;
        goto done;
    }
    result = Py_BuildValue("(LOO)", (long long)max_ts, missing ? Py_True : Py_False, Py_None);
    goto done;
failed:
    /* record_error built ([], (kind, pos, reason)): hand back (0, False, (kind, pos, reason)) */
    if (result) {
        PyObject *error = PyTuple_GET_ITEM(result, 1);
        PyObject *reshaped = Py_BuildValue("(iOO)", 0, Py_False, error);
        Py_DECREF(result);
        result = reshaped;
    }
done:
    PyBuffer_Release(&view);
    return result;
}

static inline Py_ssize_t varint_size(int64_t value) {
    uint64_t z = ((uint64_t)value << 1) ^ (uint64_t)(value >> 63);
    Py_ssize_t n = 1;
    while (z >= 0x80) { z >>= 7; n++; }
    return n;
}
static inline unsigned char *wr_varint(unsigned char *p, int64_t value) {
    uint64_t z = ((uint64_t)value << 1) ^ (uint64_t)(value >> 63);
    while (z >= 0x80) { *p++ = (unsigned char)((z & 0x7F) | 0x80); z >>= 7; }
    *p++ = (unsigned char)z;
    return p;
}

/* One field of a record to encode: bytes-like or None (length -1). */
typedef struct { Py_buffer view; int present; } field_t;

static int get_field(PyObject *obj, field_t *f) {
    f->present = 0;
    if (obj == Py_None) return 0;
    if (PyObject_GetBuffer(obj, &f->view, PyBUF_SIMPLE) < 0) return -1;
    f->present = 1;
    return 0;
}
static void release_field(field_t *f) { if (f->present) PyBuffer_Release(&f->view); f->present = 0; }
static inline Py_ssize_t field_len(const field_t *f) { return f->present ? f->view.len : -1; }

/* assign_batches(buf, pos, stop, next_offset, max_entry_bytes, now_ms, log_append_time, index_interval,
   bytes_since_index, decompress) -> (pos, next_offset, max_ts, offset_of_max, points, bytes_since_index)

   The broker's fast path for produced record batches: whole magic 2 batches of the bytearray from
   ``pos`` on, each checked (its header's counts, CRC-32C, every record through check_records, a
   compressed batch's records as ``decompress(codec, records)`` returns them) and given its offsets
   in place, with LogAppendTime stamped where due (the CRC then recomputed). It stops before the
   first entry it does not take as it is: another format, a compressed batch when ``decompress`` is
   None or raises, one over ``max_entry_bytes``, or anything wrong. The caller's full path goes on
   from there and names the error, so this kernel never reports one. Index points as assign_plain's,
   their positions relative to ``pos``. */
static PyObject *py_assign_batches(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos, stop, max_entry, index_interval, since;
    long long next_offset, now_ms;
    int log_append;
    PyObject *decompress;
    if (!PyArg_ParseTuple(args, "w*nnLnLpnnO", &view, &pos, &stop, &next_offset, &max_entry, &now_ms, &log_append,
                          &index_interval, &since, &decompress))
        return NULL;
    if (pos < 0 || stop > view.len || pos > stop) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "assign_batches: pos and stop must lie within the buffer");
        return NULL;
    }
    unsigned char *b = (unsigned char *)view.buf;
    Py_ssize_t start = pos;
    long long max_ts = -1, offset_of_max = -1;
    PyObject *points = PyList_New(0);
    if (!points) { PyBuffer_Release(&view); return NULL; }
    while (stop - pos >= 12 + BATCH_MIN_LENGTH) {
        unsigned char *p = b + pos;
        int32_t length = rd_i32(p + 8);
        if (length < BATCH_MIN_LENGTH || length > stop - pos - 12) break;
        Py_ssize_t size = 12 + (Py_ssize_t)length;
        if (p[MAGIC_POS] != 2 || size > max_entry) break;
        unsigned int attributes = ((unsigned int)p[BATCH_ATTRIBUTES_POS] << 8) | p[BATCH_ATTRIBUTES_POS + 1];
        unsigned int codec = attributes & CODEC_MASK;
        if (codec && decompress == Py_None) break;
        int32_t last_delta = rd_i32(p + BATCH_LAST_DELTA_POS);
        int32_t count = rd_i32(p + 57);
        if (count <= 0 || last_delta != count - 1) break;
        if (crc32c_of(p + BATCH_ATTRIBUTES_POS, size - BATCH_ATTRIBUTES_POS) != rd_u32(p + BATCH_CRC_POS)) break;
        int64_t base_ts = rd_i64(p + 27), batch_max_ts = rd_i64(p + BATCH_MAX_TS_POS);
        int stamped_by_producer = (attributes & TS_TYPE_BIT) != 0;
        PyObject *records = PyMemoryView_FromMemory((char *)p + 61, size - 61, PyBUF_READ);
        if (!records) goto fail;
        if (codec) {
            PyObject *plain = PyObject_CallFunction(decompress, "IN", codec, records);
            if (!plain) {
                if (!PyErr_ExceptionMatches(PyExc_Exception)) goto fail;
                PyErr_Clear(); /* the full path decompresses it again and names the error */
                break;
            }
            records = plain;
        }
        PyObject *check_args = Py_BuildValue("(NnLO)", records, (Py_ssize_t)count, (long long)base_ts,
                                             stamped_by_producer ? Py_True : Py_False);
        if (!check_args) goto fail;
        PyObject *checked = py_check_records(NULL, check_args);
        Py_DECREF(check_args);
        if (!checked) goto fail;
        int ok = PyTuple_GET_ITEM(checked, 2) == Py_None;
        long long records_max = ok ? PyLong_AsLongLong(PyTuple_GET_ITEM(checked, 0)) : 0;
        int missing = ok && PyTuple_GET_ITEM(checked, 1) == Py_True;
        Py_DECREF(checked);
        if (!ok) break;
        if (records_max == -1 && PyErr_Occurred()) goto fail;
        int stamp = log_append || stamped_by_producer || missing;
        unsigned int new_attributes = stamp ? attributes | TS_TYPE_BIT : attributes;
        int64_t new_max = stamp ? (int64_t)now_ms : (int64_t)records_max;
        wr_i64(p, next_offset);
        if (new_attributes != attributes || new_max != batch_max_ts) {
            p[BATCH_ATTRIBUTES_POS] = (unsigned char)(new_attributes >> 8);
            p[BATCH_ATTRIBUTES_POS + 1] = (unsigned char)new_attributes;
            wr_i64(p + BATCH_MAX_TS_POS, new_max);
            wr_u32(p + BATCH_CRC_POS, crc32c_of(p + BATCH_ATTRIBUTES_POS, size - BATCH_ATTRIBUTES_POS));
        }
        long long last_offset = next_offset + count - 1;
        if (new_max > max_ts) { max_ts = new_max; offset_of_max = last_offset; }
        if (since >= index_interval) {
            PyObject *point = Py_BuildValue("(nLLL)", pos - start, last_offset, max_ts, offset_of_max);
            if (!point || PyList_Append(points, point) < 0) { Py_XDECREF(point); goto fail; }
            Py_DECREF(point);
            since = 0;
        }
        since += size;
        next_offset += count;
        pos += size;
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("(nLLLNn)", pos, next_offset, max_ts, offset_of_max, points, since);
fail:
    Py_DECREF(points);
    PyBuffer_Release(&view);
    return NULL;
}

/* batch_timestamps(items) -> (base, max): the first and the largest timestamp other than -1 (-1 when
   none is given); items: (key, value, timestamp, headers) */
static PyObject *py_batch_timestamps(PyObject *self, PyObject *args) {
    PyObject *items_obj;
    if (!PyArg_ParseTuple(args, "O", &items_obj)) return NULL;
    PyObject *items = PySequence_Fast(items_obj, "items must be a sequence");
    if (!items) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(items);
    long long base = -1, highest = -1;
    int seen = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(items, i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 4) {
            PyErr_SetString(PyExc_TypeError, "a record to encode is a (key, value, timestamp, headers) tuple");
            Py_DECREF(items);
            return NULL;
        }
        long long ts = PyLong_AsLongLong(PyTuple_GET_ITEM(item, 2));
        if (ts == -1 && PyErr_Occurred()) { Py_DECREF(items); return NULL; }
        if (ts == -1) continue;
        if (!seen) { base = highest = ts; seen = 1; }
        else if (ts > highest) highest = ts;
    }
    Py_DECREF(items);
    return Py_BuildValue("LL", base, highest);
}

/* encode_records(items, base_timestamp) -> bytearray; items: (key, value, timestamp, headers) */
static PyObject *py_encode_records(PyObject *self, PyObject *args) {
    PyObject *items_obj;
    long long base_ts;
    if (!PyArg_ParseTuple(args, "OL", &items_obj, &base_ts)) return NULL;
    PyObject *items = PySequence_Fast(items_obj, "items must be a sequence");
    if (!items) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(items);
    PyObject *out = PyByteArray_FromStringAndSize(NULL, 0);
    if (!out) { Py_DECREF(items); return NULL; }
    Py_ssize_t used = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(items, i);
        PyObject *key_obj, *value_obj, *ts_obj, *headers_obj;
        if (!PyArg_ParseTuple(item, "OOOO", &key_obj, &value_obj, &ts_obj, &headers_obj)) goto fail;
        long long ts = PyLong_AsLongLong(ts_obj);
        if (ts == -1 && PyErr_Occurred()) goto fail;
        PyObject *headers = PySequence_Fast(headers_obj, "headers must be a sequence");
        if (!headers) goto fail;
        Py_ssize_t hn = PySequence_Fast_GET_SIZE(headers);
        field_t key, value;
        key.present = value.present = 0;
        if (get_field(key_obj, &key) < 0 || get_field(value_obj, &value) < 0) {
            release_field(&key); Py_DECREF(headers); goto fail;
        }
        int64_t ts_delta = (ts == -1 ? base_ts : ts) - base_ts;
        Py_ssize_t body = 1 + varint_size(ts_delta) + varint_size(i) + varint_size(field_len(&key)) +
                          (key.present ? key.view.len : 0) + varint_size(field_len(&value)) +
                          (value.present ? value.view.len : 0) + varint_size(hn);
        /* header keys encoded once, kept for the second pass */
        PyObject *encoded_keys = PyTuple_New(hn);
        field_t *hvalues = hn ? PyMem_Calloc((size_t)hn, sizeof(field_t)) : NULL;
        int bad = !encoded_keys || (hn && !hvalues);
        for (Py_ssize_t h = 0; !bad && h < hn; h++) {
            PyObject *pair = PySequence_Fast_GET_ITEM(headers, h);
            PyObject *hkey, *hvalue;
            if (!PyArg_ParseTuple(pair, "OO", &hkey, &hvalue)) { bad = 1; break; }
            if (!PyUnicode_Check(hkey)) {
                PyErr_Format(PyExc_TypeError, "a header key must be a str, not %.100s", Py_TYPE(hkey)->tp_name);
                bad = 1;
                break;
            }
            PyObject *k = PyUnicode_AsUTF8String(hkey);
            if (!k) { bad = 1; break; }
            PyTuple_SET_ITEM(encoded_keys, h, k);
            if (get_field(hvalue, &hvalues[h]) < 0) { bad = 1; break; }
            body += varint_size(PyBytes_GET_SIZE(k)) + PyBytes_GET_SIZE(k) + varint_size(field_len(&hvalues[h])) +
                    (hvalues[h].present ? hvalues[h].view.len : 0);
        }
        if (!bad) {
            Py_ssize_t need = varint_size(body) + body;
            if (PyByteArray_Resize(out, used + need) < 0) {
                bad = 1;
            } else {
                unsigned char *p = (unsigned char *)PyByteArray_AS_STRING(out) + used;
                p = wr_varint(p, body);
                *p++ = 0;
                p = wr_varint(p, ts_delta);
                p = wr_varint(p, i);
                field_t *fields[2] = {&key, &value};
                for (int f = 0; f < 2; f++) {
                    p = wr_varint(p, field_len(fields[f]));
                    if (fields[f]->present) { memcpy(p, fields[f]->view.buf, (size_t)fields[f]->view.len); p += fields[f]->view.len; }
                }
                p = wr_varint(p, hn);
                for (Py_ssize_t h = 0; h < hn; h++) {
                    PyObject *k = PyTuple_GET_ITEM(encoded_keys, h);
                    p = wr_varint(p, PyBytes_GET_SIZE(k));
                    memcpy(p, PyBytes_AS_STRING(k), (size_t)PyBytes_GET_SIZE(k));
                    p += PyBytes_GET_SIZE(k);
                    p = wr_varint(p, field_len(&hvalues[h]));
                    if (hvalues[h].present) { memcpy(p, hvalues[h].view.buf, (size_t)hvalues[h].view.len); p += hvalues[h].view.len; }
                }
                used += need;
            }
        }
        for (Py_ssize_t h = 0; hvalues && h < hn; h++) release_field(&hvalues[h]);
        PyMem_Free(hvalues);
        Py_XDECREF(encoded_keys);
        release_field(&key);
        release_field(&value);
        Py_DECREF(headers);
        if (bad) goto fail;
    }
    Py_DECREF(items);
    return out;
fail:
    Py_DECREF(items);
    Py_DECREF(out);
    return NULL;
}

static PyMethodDef methods[] = {
    {"configure", py_configure, METH_VARARGS, "Set the message tuple type and the timestamp-type values."},
    {"decode_plain", py_decode_plain, METH_VARARGS, "See kafkalog.record._fastpath.decode_plain."},
    {"scan_entries", py_scan_entries, METH_VARARGS, "See kafkalog.record._fastpath.scan_entries."},
    {"assign_plain", py_assign_plain, METH_VARARGS, "See kafkalog.record._fastpath.assign_plain."},
    {"crc32c", py_crc32c, METH_VARARGS, "See kafkalog.record._fastpath.crc32c."},
    {"decode_records", py_decode_records, METH_VARARGS, "See kafkalog.record._fastpath.decode_records."},
    {"check_records", py_check_records, METH_VARARGS, "See kafkalog.record._fastpath.check_records."},
    {"encode_records", py_encode_records, METH_VARARGS, "See kafkalog.record._fastpath.encode_records."},
    {"batch_timestamps", py_batch_timestamps, METH_VARARGS, "See kafkalog.record._fastpath.batch_timestamps."},
    {"assign_batches", py_assign_batches, METH_VARARGS, "See kafkalog.record._fastpath.assign_batches."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_speedups", "C kernels of kafkalog.record.", -1, methods};

PyMODINIT_FUNC PyInit__speedups(void) {
    crc32c_init();
    return PyModule_Create(&module);
}
