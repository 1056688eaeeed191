/*
 * What the C kernels of kafkalog.record share (see _fastpath.py, the reference): the constants of
 * the layouts they read, big-endian readers and writers, zlib's CRC-32 of v0/v1 messages, and the
 * functions one file of the extension defines for another (named speedups_*).
 *
 * One extension module, kafkalog.record._speedups, built from one file per job:
 *   _speedups.c          the module: its method table and initialisation
 *   _speedups_message.c  what kernels hand to Python: messages of the configured type, error
 *                        triples, index points
 *   _speedups_crc32c.c   CRC-32C of magic 2 batches (SSE4.2, else tables)
 *   _speedups_scan.c     scan_entries: a shallow walk over entries of every magic
 *   _speedups_legacy.c   message format v0/v1 entries: decode_plain, assign_plain
 *   _speedups_batch.c    magic 2 records: decode_records, check_records, assign_batches,
 *                        batch_timestamps, encode_records
 *   _speedups_compact.c  the log cleaner's (its reference is _fastpath_compact.py): the offset
 *                        map, map_get, map_put_records, map_put_batches, filter_records,
 *                        filter_batches. These raise ValueError for bad data, as their twins do.
 *
 * Every kernel takes the same arguments and returns the same values as its Python twin; tests
 * compare the two on the same bytes. Kernels never raise for bad data: they return an error
 * triple (kind, position, reason). All multi-byte fields are big-endian. The CRC of v0/v1 messages
 * is zlib's crc32.
 */
#ifndef KAFKALOG_RECORD_SPEEDUPS_H
#define KAFKALOG_RECORD_SPEEDUPS_H

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

/* A zigzag varint at b[*pos] before end: 1 and the value, or 0 when it runs past end, is longer
 * than 10 bytes or holds more than 64 bits (as _fastpath._varint and _fastpath_compact._varint). */
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

/* _speedups_message.c: the message type and timestamp-type values configure sets */
extern PyObject *speedups_message_type; /* a tuple subclass (kafkalog.record.Message) */
extern PyObject *speedups_create_time;
extern PyObject *speedups_log_append_time;
PyObject *speedups_error_triple(const char *kind, Py_ssize_t pos, PyObject *reason);
PyObject *speedups_make_message(int64_t offset, int64_t ts, PyObject *ts_type, const unsigned char *key,
                                int32_t key_len, const unsigned char *value, int32_t value_len);
int speedups_add_point(PyObject *points, Py_ssize_t pos, int64_t offset, long long max_ts, long long offset_of_max);

/* _speedups_crc32c.c */
void speedups_crc32c_init(void);
uint32_t speedups_crc32c_of(const unsigned char *p, Py_ssize_t n);

/* the kernels, as the method table registers them */
PyObject *speedups_py_configure(PyObject *self, PyObject *args);
PyObject *speedups_py_crc32c(PyObject *self, PyObject *args);
PyObject *speedups_py_scan_entries(PyObject *self, PyObject *args);
PyObject *speedups_py_decode_plain(PyObject *self, PyObject *args);
PyObject *speedups_py_assign_plain(PyObject *self, PyObject *args);
PyObject *speedups_py_decode_records(PyObject *self, PyObject *args);
PyObject *speedups_py_check_records(PyObject *self, PyObject *args);
PyObject *speedups_py_encode_records(PyObject *self, PyObject *args);
PyObject *speedups_py_batch_timestamps(PyObject *self, PyObject *args);
PyObject *speedups_py_assign_batches(PyObject *self, PyObject *args);
PyObject *speedups_py_map_get(PyObject *self, PyObject *args);
PyObject *speedups_py_map_put_records(PyObject *self, PyObject *args);
PyObject *speedups_py_map_put_batches(PyObject *self, PyObject *args);
PyObject *speedups_py_filter_records(PyObject *self, PyObject *args);
PyObject *speedups_py_filter_batches(PyObject *self, PyObject *args);

#endif /* KAFKALOG_RECORD_SPEEDUPS_H */
