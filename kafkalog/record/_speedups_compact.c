/*
 * The log cleaner's kernels (kafkalog/record/_fastpath_compact.py is the reference and describes
 * the offset map's layout): map_get, map_put_records, map_put_batches, filter_records,
 * filter_batches. Unlike the other kernels these raise ValueError for bad data, with the messages
 * of their twins, and leave the same bytes behind in the table and in ``out`` when they do.
 *
 * The batch walkers create no Python object per record: records are read in place, kept ones
 * copied into ``out`` (grown once per batch) and a batch whose records all stay is copied as it is.
 */
#include "_speedups.h"

#define SLOT_BYTES 24
#define HEADER_SIZE 61
#define LOG_OVERHEAD 12
#define BATCH_LENGTH_POS 8
#define BATCH_BASE_TS_POS 27
#define BATCH_COUNT_POS 57
#define TRANSACTIONAL_BIT 0x10
#define CONTROL_BIT 0x20
#define EMPTY_OFFSET (-1)

enum { WALK_ERROR = -1, WALK_END = 0, WALK_PLAIN = 1, WALK_SPECIAL = 2 };
enum { STATUS_DONE = 0, STATUS_SPECIAL = 1, STATUS_FULL = 2 };

/* --- the offset map: 24-byte slots of little-endian h1, h2, offset */

static inline uint64_t rd_le64(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}
static inline void wr_le64(unsigned char *p, uint64_t v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    memcpy(p, &v, 8);
}

static inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
static inline uint64_t fmix64(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    k ^= k >> 33;
    return k;
}

/* MurmurHash3_x64_128 of data with seed 0 (Austin Appleby's, as _fastpath_compact.key_hash). */
static inline void key_hash(const unsigned char *data, Py_ssize_t len, uint64_t *out1, uint64_t *out2) {
    const uint64_t c1 = 0x87c37b91114253d5ULL, c2 = 0x4cf5ad432745937fULL;
    uint64_t h1 = 0, h2 = 0, k1 = 0, k2 = 0;
    Py_ssize_t blocks = len / 16;
    for (Py_ssize_t i = 0; i < blocks; i++) {
        k1 = rd_le64(data + i * 16);
        k2 = rd_le64(data + i * 16 + 8);
        k1 *= c1; k1 = rotl64(k1, 31); k1 *= c2; h1 ^= k1;
        h1 = rotl64(h1, 27); h1 += h2; h1 = h1 * 5 + 0x52dce729;
        k2 *= c2; k2 = rotl64(k2, 33); k2 *= c1; h2 ^= k2;
        h2 = rotl64(h2, 31); h2 += h1; h2 = h2 * 5 + 0x38495ab5;
    }
    const unsigned char *tail = data + blocks * 16;
    k1 = k2 = 0;
    switch (len & 15) {
    case 15: k2 ^= (uint64_t)tail[14] << 48; /* fall through */
    case 14: k2 ^= (uint64_t)tail[13] << 40; /* fall through */
    case 13: k2 ^= (uint64_t)tail[12] << 32; /* fall through */
    case 12: k2 ^= (uint64_t)tail[11] << 24; /* fall through */
    case 11: k2 ^= (uint64_t)tail[10] << 16; /* fall through */
    case 10: k2 ^= (uint64_t)tail[9] << 8; /* fall through */
    case 9:
        k2 ^= (uint64_t)tail[8];
        k2 *= c2; k2 = rotl64(k2, 33); k2 *= c1; h2 ^= k2;
        /* fall through */
    case 8: k1 ^= (uint64_t)tail[7] << 56; /* fall through */
    case 7: k1 ^= (uint64_t)tail[6] << 48; /* fall through */
    case 6: k1 ^= (uint64_t)tail[5] << 40; /* fall through */
    case 5: k1 ^= (uint64_t)tail[4] << 32; /* fall through */
    case 4: k1 ^= (uint64_t)tail[3] << 24; /* fall through */
    case 3: k1 ^= (uint64_t)tail[2] << 16; /* fall through */
    case 2: k1 ^= (uint64_t)tail[1] << 8; /* fall through */
    case 1:
        k1 ^= (uint64_t)tail[0];
        k1 *= c1; k1 = rotl64(k1, 31); k1 *= c2; h1 ^= k1;
        break;
    default:
        break;
    }
    h1 ^= (uint64_t)len;
    h2 ^= (uint64_t)len;
    h1 += h2;
    h2 += h1;
    h1 = fmix64(h1);
    h2 = fmix64(h2);
    h1 += h2;
    h2 += h1;
    *out1 = h1;
    *out2 = h2;
}

/* The slot holding (h1, h2), or the empty one where it would go (linear probing from h1 mod
 * slots); NULL when the table has no slot or none of either kind (map_error says which). */
static inline unsigned char *find_slot(unsigned char *table, Py_ssize_t slots, uint64_t h1, uint64_t h2) {
    if (slots <= 0) return NULL;
    Py_ssize_t index = (Py_ssize_t)(h1 % (uint64_t)slots);
    for (Py_ssize_t n = 0; n < slots; n++) {
        unsigned char *slot = table + index * SLOT_BYTES;
        if ((int64_t)rd_le64(slot + 16) == EMPTY_OFFSET || (rd_le64(slot) == h1 && rd_le64(slot + 8) == h2))
            return slot;
        if (++index == slots) index = 0;
    }
    return NULL;
}

static void map_error(Py_ssize_t table_len) {
    if (table_len / SLOT_BYTES < 1)
        PyErr_Format(PyExc_ValueError, "the offset map of %zd bytes has no slot", table_len);
    else
        PyErr_SetString(PyExc_ValueError, "the offset map is full"); /* the caller's max_entries keeps a slot free */
}

/* --- records of a magic 2 batch's (uncompressed) payload */

typedef struct {
    Py_ssize_t start, end, key_pos;
    int64_t ts_delta, offset, key_len, value_len;
} crecord;

static int varint_error(Py_ssize_t at) {
    PyErr_Format(PyExc_ValueError, "a varint runs past its record or beyond 64 bits (byte %zd)", at);
    return -1;
}

/* The record at *pos (before end), as _fastpath_compact._records reads it; 0, or -1 with ValueError. */
static inline int read_record(const unsigned char *b, Py_ssize_t *pos, Py_ssize_t end, int64_t base_offset,
                              crecord *r) {
    Py_ssize_t p = *pos;
    int64_t length, offset_delta;
    r->start = p;
    if (!rd_varint(b, &p, end, &length)) return varint_error(p);
    if (length <= 0 || length > end - p) {
        PyErr_Format(PyExc_ValueError, "a record's length runs past its batch (byte %zd)", r->start);
        return -1;
    }
    r->end = p + (Py_ssize_t)length;
    p += 1; /* attributes */
    if (!rd_varint(b, &p, r->end, &r->ts_delta)) return varint_error(p);
    if (!rd_varint(b, &p, r->end, &offset_delta)) return varint_error(p);
    if (__builtin_add_overflow(base_offset, offset_delta, &r->offset) || r->offset < 0) {
        PyErr_Format(PyExc_ValueError, "a record's offset is out of range (byte %zd)", r->start);
        return -1;
    }
    if (!rd_varint(b, &p, r->end, &r->key_len)) return varint_error(p);
    if (r->key_len < -1 || r->key_len > r->end - p) {
        PyErr_Format(PyExc_ValueError, "a record's key length does not fit in the record (byte %zd)", r->start);
        return -1;
    }
    r->key_pos = p;
    if (r->key_len > 0) p += (Py_ssize_t)r->key_len;
    if (!rd_varint(b, &p, r->end, &r->value_len)) return varint_error(p);
    if (r->value_len < -1 || r->value_len > r->end - p) {
        PyErr_Format(PyExc_ValueError, "a record's value length does not fit in the record (byte %zd)", r->start);
        return -1;
    }
    *pos = r->end; /* headers: not the cleaner's business */
    return 0;
}

static int bad_count(Py_ssize_t count) {
    PyErr_Format(PyExc_ValueError, "a batch cannot hold %zd records", count);
    return -1;
}
static int trailing_bytes(Py_ssize_t extra, Py_ssize_t count) {
    PyErr_Format(PyExc_ValueError, "%zd bytes follow the last of %zd records", extra, count);
    return -1;
}

/* Every record of the payload read, none used: the reference reads them all before it puts one. */
static int check_payload(const unsigned char *b, Py_ssize_t len, Py_ssize_t count, int64_t base_offset) {
    if (count < 0) return bad_count(count);
    Py_ssize_t pos = 0;
    crecord r;
    for (Py_ssize_t i = 0; i < count; i++)
        if (read_record(b, &pos, len, base_offset, &r) < 0) return -1;
    if (pos != len) return trailing_bytes(len - pos, count);
    return 0;
}

/* map_put_records' work: every keyed record put, *used counting the keys held. */
static int put_payload(Py_buffer *table, Py_ssize_t max_entries, Py_ssize_t *used, const unsigned char *b,
                       Py_ssize_t len, Py_ssize_t count, int64_t base_offset) {
    if (check_payload(b, len, count, base_offset) < 0) return -1;
    unsigned char *t = (unsigned char *)table->buf;
    Py_ssize_t slots = table->len / SLOT_BYTES, pos = 0;
    crecord r;
    for (Py_ssize_t i = 0; i < count; i++) {
        read_record(b, &pos, len, base_offset, &r); /* checked above */
        if (r.key_len < 0) continue; /* a compacted log has no keyless record; one written before goes */
        uint64_t h1, h2;
        key_hash(b + r.key_pos, (Py_ssize_t)r.key_len, &h1, &h2);
        unsigned char *slot = find_slot(t, slots, h1, h2);
        if (!slot) { map_error(table->len); return -1; }
        if ((int64_t)rd_le64(slot + 16) == EMPTY_OFFSET) {
            if (*used >= max_entries) {
                PyErr_Format(PyExc_ValueError, "the offset map holds %zd keys: no room for more", max_entries);
                return -1;
            }
            ++*used;
        }
        wr_le64(slot, h1);
        wr_le64(slot + 8, h2);
        wr_le64(slot + 16, (uint64_t)r.offset);
    }
    return 0;
}

/* filter_records' work: the kept records copied to dst (room for len bytes), runs of adjacent
 * ones in one copy. A map without room for a key raises only once every record has been read, as
 * in the reference (which reads them all first). */
static int filter_payload(Py_buffer *table, const unsigned char *b, Py_ssize_t len, Py_ssize_t count,
                          int64_t base_offset, int retain_tombstones, unsigned char *dst, Py_ssize_t *written,
                          Py_ssize_t *kept, int64_t *max_delta) {
    if (count < 0) return bad_count(count);
    unsigned char *t = (unsigned char *)table->buf;
    Py_ssize_t slots = table->len / SLOT_BYTES, pos = 0, w = 0, n = 0;
    Py_ssize_t run_start = 0, run_end = 0; /* kept bytes not copied yet */
    int64_t highest = INT64_MIN;
    int map_failed = 0;
    crecord r;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (read_record(b, &pos, len, base_offset, &r) < 0) return -1;
        if (r.key_len < 0 || (r.value_len < 0 && !retain_tombstones) || map_failed) continue;
        uint64_t h1, h2;
        key_hash(b + r.key_pos, (Py_ssize_t)r.key_len, &h1, &h2);
        const unsigned char *slot = find_slot(t, slots, h1, h2);
        if (!slot) { map_failed = 1; continue; }
        int64_t found = (int64_t)rd_le64(slot + 16);
        if (found != EMPTY_OFFSET && found > r.offset) continue; /* a later record has this key */
        if (r.start != run_end) {
            memcpy(dst + w, b + run_start, (size_t)(run_end - run_start));
            w += run_end - run_start;
            run_start = r.start;
        }
        run_end = r.end;
        n++;
        if (r.ts_delta > highest) highest = r.ts_delta;
    }
    if (pos != len) return trailing_bytes(len - pos, count);
    if (map_failed) { map_error(table->len); return -1; }
    memcpy(dst + w, b + run_start, (size_t)(run_end - run_start));
    *written = w + (run_end - run_start);
    *kept = n;
    *max_delta = highest;
    return 0;
}

/* --- walking batches */

typedef struct {
    Py_ssize_t size;  /* the whole batch's bytes */
    int64_t base_offset, base_ts, max_ts;
    int32_t last_delta, count;
    int attributes;
} cbatch;

static int check_bounds(Py_ssize_t pos, Py_ssize_t stop, Py_ssize_t len) {
    if (0 <= pos && pos <= stop && stop <= len) return 0;
    PyErr_Format(PyExc_ValueError, "positions %zd to %zd lie outside the %zd bytes given", pos, stop, len);
    return -1;
}

/* The entry at pos, as _fastpath_compact._plain_batches sees it: WALK_PLAIN (a whole plain batch,
 * *h filled in), WALK_SPECIAL (a whole entry of another kind), WALK_END (no whole entry) or
 * WALK_ERROR (ValueError set). */
static int next_batch(const unsigned char *b, Py_ssize_t pos, Py_ssize_t stop, cbatch *h) {
    if (stop - pos <= MAGIC_POS) return WALK_END;
    const unsigned char *p = b + pos;
    int32_t length = rd_i32(p + BATCH_LENGTH_POS);
    int magic = p[MAGIC_POS];
    if (magic == 2 && length < BATCH_MIN_LENGTH) {
        PyErr_Format(PyExc_ValueError, "a record batch at byte %zd states a length of %d", pos, (int)length);
        return WALK_ERROR;
    }
    if ((Py_ssize_t)length > stop - pos - LOG_OVERHEAD) return WALK_END; /* partial: the caller reads on */
    if (magic != 2) return WALK_SPECIAL; /* a v0/v1 entry */
    h->size = LOG_OVERHEAD + (Py_ssize_t)length;
    h->base_offset = rd_i64(p);
    h->attributes = (int)(int16_t)(((unsigned)p[BATCH_ATTRIBUTES_POS] << 8) | p[BATCH_ATTRIBUTES_POS + 1]);
    h->last_delta = rd_i32(p + BATCH_LAST_DELTA_POS);
    h->base_ts = rd_i64(p + BATCH_BASE_TS_POS);
    h->max_ts = rd_i64(p + BATCH_MAX_TS_POS);
    h->count = rd_i32(p + BATCH_COUNT_POS);
    if (h->count < 0 || h->last_delta < 0 || (int64_t)h->count > (int64_t)h->last_delta + 1 ||
        h->base_offset > INT64_MAX - h->last_delta) {
        PyErr_Format(PyExc_ValueError,
                     "a record batch at byte %zd states %d records with a last offset delta of %d from base offset %lld",
                     pos, (int)h->count, (int)h->last_delta, (long long)h->base_offset);
        return WALK_ERROR;
    }
    if (h->attributes & (CODEC_MASK | TRANSACTIONAL_BIT | CONTROL_BIT)) return WALK_SPECIAL;
    return WALK_PLAIN;
}

/* A batch header (copied from the original) made to hold ``count`` records of ``records_bytes``
 * after it: length, count, max timestamp (base timestamp -1 when empty, as Kafka writes it) and
 * CRC-32C set anew, as _fastpath_compact.rebuilt_batch. */
static void rebuild_header(unsigned char *dst, Py_ssize_t records_bytes, int32_t count, int64_t max_ts) {
    wr_u32(dst + BATCH_LENGTH_POS, (uint32_t)(HEADER_SIZE - LOG_OVERHEAD + records_bytes));
    if (!count) wr_i64(dst + BATCH_BASE_TS_POS, -1);
    wr_i64(dst + BATCH_MAX_TS_POS, max_ts);
    wr_u32(dst + BATCH_COUNT_POS, (uint32_t)count);
    wr_u32(dst + BATCH_CRC_POS,
           speedups_crc32c_of(dst + BATCH_ATTRIBUTES_POS, HEADER_SIZE - BATCH_ATTRIBUTES_POS + records_bytes));
}

/* out back to ``size`` bytes, keeping the exception being raised. */
static void truncate_out(PyObject *out, Py_ssize_t size) {
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    if (PyByteArray_Resize(out, size) < 0) PyErr_Clear(); /* shrinking: cannot fail in practice */
    PyErr_Restore(type, value, traceback);
}

/* --- the kernels */

/* map_get(table, key) -> int */
PyObject *speedups_py_map_get(PyObject *self, PyObject *args) {
    Py_buffer table, key;
    if (!PyArg_ParseTuple(args, "y*y*", &table, &key)) return NULL;
    uint64_t h1, h2;
    key_hash((const unsigned char *)key.buf, key.len, &h1, &h2);
    const unsigned char *slot = find_slot((unsigned char *)table.buf, table.len / SLOT_BYTES, h1, h2);
    PyObject *result = NULL;
    if (slot)
        result = PyLong_FromLongLong((long long)(int64_t)rd_le64(slot + 16));
    else
        map_error(table.len);
    PyBuffer_Release(&key);
    PyBuffer_Release(&table);
    return result;
}

/* map_put_records(table, max_entries, used, payload, count, base_offset) -> used */
PyObject *speedups_py_map_put_records(PyObject *self, PyObject *args) {
    Py_buffer table, payload;
    Py_ssize_t max_entries, used, count;
    long long base_offset;
    if (!PyArg_ParseTuple(args, "w*nny*nL", &table, &max_entries, &used, &payload, &count, &base_offset)) return NULL;
    int failed = put_payload(&table, max_entries, &used, (const unsigned char *)payload.buf, payload.len, count,
                             (int64_t)base_offset);
    PyBuffer_Release(&payload);
    PyBuffer_Release(&table);
    return failed ? NULL : PyLong_FromSsize_t(used);
}

/* map_put_batches(table, max_entries, used, buf, pos, stop) -> (pos, used, last_offset, status) */
PyObject *speedups_py_map_put_batches(PyObject *self, PyObject *args) {
    Py_buffer table, view;
    Py_ssize_t max_entries, used, pos, stop;
    if (!PyArg_ParseTuple(args, "w*nny*nn", &table, &max_entries, &used, &view, &pos, &stop)) return NULL;
    const unsigned char *b = (const unsigned char *)view.buf;
    PyObject *result = NULL;
    long long last = -1;
    int status = STATUS_DONE;
    if (check_bounds(pos, stop, view.len) < 0) goto done;
    for (;;) {
        cbatch h;
        int kind = next_batch(b, pos, stop, &h);
        if (kind == WALK_ERROR) goto done;
        if (kind == WALK_END) break;
        if (kind == WALK_SPECIAL) { status = STATUS_SPECIAL; break; }
        if (used + (Py_ssize_t)h.count > max_entries) { status = STATUS_FULL; break; }
        if (put_payload(&table, max_entries, &used, b + pos + HEADER_SIZE, h.size - HEADER_SIZE, h.count,
                        h.base_offset) < 0)
            goto done;
        last = h.base_offset + h.last_delta;
        pos += h.size;
    }
    result = Py_BuildValue("(nnLi)", pos, used, last, status);
done:
    PyBuffer_Release(&view);
    PyBuffer_Release(&table);
    return result;
}

/* filter_records(table, payload, count, base_offset, retain_tombstones) -> (bytearray, kept, max_delta) */
PyObject *speedups_py_filter_records(PyObject *self, PyObject *args) {
    Py_buffer table, payload;
    Py_ssize_t count, written = 0, kept = 0;
    long long base_offset;
    int retain;
    int64_t max_delta = INT64_MIN;
    if (!PyArg_ParseTuple(args, "y*y*nLp", &table, &payload, &count, &base_offset, &retain)) return NULL;
    PyObject *result = NULL;
    PyObject *out = PyByteArray_FromStringAndSize(NULL, payload.len);
    if (!out) goto done;
    if (filter_payload(&table, (const unsigned char *)payload.buf, payload.len, count, (int64_t)base_offset, retain,
                       (unsigned char *)PyByteArray_AS_STRING(out), &written, &kept, &max_delta) < 0 ||
        PyByteArray_Resize(out, written) < 0) {
        Py_DECREF(out);
        goto done;
    }
    result = Py_BuildValue("(NnL)", out, kept, (long long)max_delta);
done:
    PyBuffer_Release(&payload);
    PyBuffer_Release(&table);
    return result;
}

/* filter_batches(table, buf, pos, stop, out, retain_tombstones, protected) -> (pos, status, read, kept) */
PyObject *speedups_py_filter_batches(PyObject *self, PyObject *args) {
    Py_buffer table, view;
    Py_ssize_t pos, stop;
    PyObject *out, *protected;
    int retain;
    if (!PyArg_ParseTuple(args, "y*y*nnOpO", &table, &view, &pos, &stop, &out, &retain, &protected)) return NULL;
    const unsigned char *b = (const unsigned char *)view.buf;
    PyObject *result = NULL;
    long long read = 0, kept_total = 0;
    int status = STATUS_DONE;
    if (!PyByteArray_Check(out)) {
        PyErr_Format(PyExc_TypeError, "out must be a bytearray, not %.100s", Py_TYPE(out)->tp_name);
        goto done;
    }
    if (check_bounds(pos, stop, view.len) < 0) goto done;
    for (;;) {
        cbatch h;
        int kind = next_batch(b, pos, stop, &h);
        if (kind == WALK_ERROR) goto done;
        if (kind == WALK_END) break;
        if (kind == WALK_SPECIAL) { status = STATUS_SPECIAL; break; }
        const unsigned char *batch = b + pos;
        Py_ssize_t old = PyByteArray_GET_SIZE(out), written = 0, kept = 0;
        int64_t max_delta = INT64_MIN;
        /* room for the whole batch: what stays is never more */
        if (PyByteArray_Resize(out, old + h.size) < 0) goto done;
        unsigned char *dst = (unsigned char *)PyByteArray_AS_STRING(out) + old;
        if (filter_payload(&table, batch + HEADER_SIZE, h.size - HEADER_SIZE, h.count, h.base_offset, retain,
                           dst + HEADER_SIZE, &written, &kept, &max_delta) < 0) {
            truncate_out(out, old);
            goto done;
        }
        if (kept && kept == h.count) {
            memcpy(dst, batch, HEADER_SIZE); /* the records were copied as they are: so is the batch */
        } else if (kept) {
            int64_t max_ts = h.max_ts; /* stamped with the log-append time: stays */
            if (!(h.attributes & TS_TYPE_BIT) && __builtin_add_overflow(h.base_ts, max_delta, &max_ts)) {
                PyErr_Format(PyExc_ValueError,
                             "the records kept of the record batch at byte %zd have a timestamp out of range", pos);
                truncate_out(out, old);
                goto done;
            }
            memcpy(dst, batch, HEADER_SIZE);
            rebuild_header(dst, written, (int32_t)kept, max_ts);
            if (PyByteArray_Resize(out, old + HEADER_SIZE + written) < 0) goto done;
        } else {
            if (PyByteArray_Resize(out, old) < 0) goto done;
            /* an idempotent producer's last batch stays, empty, for its state */
            PyObject *last = PyLong_FromLongLong((long long)(h.base_offset + h.last_delta));
            if (!last) goto done;
            int in = PySequence_Contains(protected, last);
            Py_DECREF(last);
            if (in < 0) goto done;
            if (in) {
                Py_ssize_t now = PyByteArray_GET_SIZE(out); /* as it was, unless protected's __contains__ wrote */
                if (PyByteArray_Resize(out, now + HEADER_SIZE) < 0) goto done;
                dst = (unsigned char *)PyByteArray_AS_STRING(out) + now;
                memcpy(dst, batch, HEADER_SIZE);
                rebuild_header(dst, 0, 0, h.max_ts);
            }
        }
        read += h.count;
        kept_total += kept;
        pos += h.size;
    }
    result = Py_BuildValue("(niLL)", pos, status, read, kept_total);
done:
    PyBuffer_Release(&view);
    PyBuffer_Release(&table);
    return result;
}
