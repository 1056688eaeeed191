/*
 * kafkalog.schemas._protobuf_columns: runs a compiled Protobuf reader program
 * (kafkalog.schemas.protobuf_program) over a chunk of payloads, straight into column buffers.
 * Protobuf's own parser (upb, through google.protobuf) is the reference the tests hold it to.
 *
 * decode(values, header, code, columns) -> (columns, bad, others): the values that start with `header`
 * (a Confluent frame: magic byte, schema id, message indexes) are decoded from the byte after it;
 * `others` are the indexes of those that do not (None among them), left for the caller to unframe
 * and decode with their own header. Every value is untrusted: every read is
 * checked against the end of the value (or of the message it is in), every length against the bytes
 * left, varints stop at 10 bytes, unknown groups nest at most MAX_GROUP_DEPTH deep, offsets stop at
 * INT32_MAX. A message is read by field number in two steps: a scan that appends repeated fields'
 * items as they come and notes where each other field's last occurrence is, then the fields in
 * order, each from its noted place or absent (null, or its zero value). A value that fails is rolled
 * back out of every column. The code is checked once before the chunk (node bounds, ops, columns),
 * so a malformed program is a ValueError, never a read out of bounds. The GIL is released while the
 * chunk decodes.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* kafkalog.schemas.protobuf_program: Op, Label, Kind */
enum {
    OP_INT32 = 1, OP_INT64, OP_UINT32, OP_UINT64, OP_SINT32, OP_SINT64, OP_FIXED32, OP_SFIXED32, OP_FIXED64,
    OP_SFIXED64, OP_FLOAT, OP_DOUBLE, OP_BOOL, OP_STRING, OP_BYTES, OP_ENUM, OP_MESSAGE, OP_TIME, OP_RAW,
    OP_LAST = OP_RAW,
};
enum { L_ONE = 0, L_PRESENCE, L_REPEATED, L_MAP };
enum { K_BOOLEAN = 1, K_INT32, K_INT64, K_FLOAT32, K_FLOAT64, K_BINARY, K_DECIMAL128, K_STRUCT, K_LIST, K_MAP };
#define MAP_ENTRY (-2) /* protobuf_program.MAP_ENTRY: a node of a map entry, without a struct column */
enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_SGROUP = 3, WT_EGROUP = 4, WT_I32 = 5 };

#define FIELD_INTS 8 /* protobuf_program.FIELD_INTS */
#define MAX_FIELDS 4096
#define MAX_DEPTH 80
#define MAX_GROUP_DEPTH 64
#define REASON_SIZE 200
/* column values one payload may make: absent fields make their defaults and nulls, so a few bytes
   of empty repeated messages could otherwise make millions of them */
#define MAX_VALUES_PER_PAYLOAD (1 << 24)

enum { OK = 0, BAD = -1, NOMEM = -2 };

typedef struct {
    uint8_t *p;
    size_t len, cap;
} Buf;

typedef struct {
    int kind;
    int first_child, nchildren;
    size_t length, nulls;
    Buf valid, data, offsets;
} Col;

typedef struct {
    size_t length, nulls, valid, data, offsets;
} Mark;

typedef struct {
    const int32_t *code;
    Col *cols;
    int ncols;
    int *child_index;
    const uint8_t *buf;
    int64_t budget; /* column values this payload may still make */
    char reason[REASON_SIZE];
} Decoder;

/* -- buffers and columns (as in _avro_columns.c) --------------------------------------------------- */

static int buf_reserve(Buf *b, size_t extra) {
    if (b->cap - b->len >= extra) return OK;
    if (extra > SIZE_MAX - b->len) return NOMEM;
    size_t need = b->len + extra, cap = b->cap ? b->cap : 64;
    while (cap < need) {
        if (cap > SIZE_MAX / 2) return NOMEM;
        cap *= 2;
    }
    uint8_t *p = PyMem_RawRealloc(b->p, cap);
    if (p == NULL) return NOMEM;
    b->p = p;
    b->cap = cap;
    return OK;
}

static inline int buf_put(Buf *b, const void *src, size_t n) {
    if (b->cap - b->len < n && buf_reserve(b, n) != OK) return NOMEM;
    if (n) memcpy(b->p + b->len, src, n);
    b->len += n;
    return OK;
}

static inline int buf_zeros(Buf *b, size_t n) {
    if (b->cap - b->len < n && buf_reserve(b, n) != OK) return NOMEM;
    memset(b->p + b->len, 0, n);
    b->len += n;
    return OK;
}

static int bad(Decoder *d, const char *format, ...) {
    va_list args;
    va_start(args, format);
    vsnprintf(d->reason, REASON_SIZE, format, args);
    va_end(args);
    return BAD;
}

static int set_bit(Col *c, int valid) {
    size_t i = c->length;
    if (c->valid.p == NULL) {
        if (valid) return OK;
        size_t bytes = i / 8 + 1;
        if (buf_reserve(&c->valid, bytes) != OK) return NOMEM;
        memset(c->valid.p, 0xff, bytes);
        c->valid.len = bytes;
    } else if (i / 8 >= c->valid.len) {
        if (buf_zeros(&c->valid, i / 8 + 1 - c->valid.len) != OK) return NOMEM;
    }
    if (valid)
        c->valid.p[i / 8] |= (uint8_t)(1u << (i % 8));
    else
        c->valid.p[i / 8] &= (uint8_t)~(1u << (i % 8));
    return OK;
}

static inline int slot(Col *c) {
    if (c->valid.p != NULL && set_bit(c, 1) != OK) return NOMEM;
    c->length++;
    return OK;
}

static int add_offset(Decoder *d, Col *c, size_t value) {
    if (value > INT32_MAX) return bad(d, "a column of the chunk exceeds %d values or bytes", INT32_MAX);
    int32_t v = (int32_t)value;
    return buf_put(&c->offsets, &v, 4);
}

static inline int put(Col *c, const void *src, size_t n) {
    if (buf_put(&c->data, src, n) != OK) return NOMEM;
    return slot(c);
}

static int put_bytes(Decoder *d, Col *c, const uint8_t *src, size_t n) {
    if (buf_put(&c->data, src, n) != OK) return NOMEM;
    if (slot(c) != OK) return NOMEM;
    return add_offset(d, c, c->data.len);
}

static int width_of(int kind) {
    switch (kind) {
        case K_BOOLEAN: return 1;
        case K_INT32: case K_FLOAT32: return 4;
        case K_INT64: case K_FLOAT64: return 8;
        case K_DECIMAL128: return 16;
        default: return 0;
    }
}

/* the last offset of an offsets column (0 before the first) */
static inline int32_t last_offset(const Col *c) {
    int32_t last;
    memcpy(&last, c->offsets.p + c->offsets.len - 4, 4);
    return last;
}

/* a null in the column, and placeholders in its children (an Arrow struct's children run beside it) */
static int put_null(Decoder *d, int col) {
    Col *c = &d->cols[col];
    int rc;
    if (--d->budget < 0) return bad(d, "the payload makes more than %d column values", MAX_VALUES_PER_PAYLOAD);
    if (set_bit(c, 0) != OK) return NOMEM;
    c->length++;
    c->nulls++;
    switch (c->kind) {
        case K_STRUCT:
            for (int k = 0; k < c->nchildren; k++)
                if ((rc = put_null(d, d->child_index[c->first_child + k])) != OK) return rc;
            return OK;
        case K_LIST: case K_MAP: case K_BINARY: {
            int32_t last = last_offset(c);
            return buf_put(&c->offsets, &last, 4);
        }
        default: return buf_zeros(&c->data, (size_t)width_of(c->kind));
    }
}

/* the zero value of a scalar column: 0, false, "" */
static int put_zero(Decoder *d, int col) {
    Col *c = &d->cols[col];
    if (c->kind == K_BINARY) {
        if (slot(c) != OK) return NOMEM;
        return add_offset(d, c, c->data.len);
    }
    if (buf_zeros(&c->data, (size_t)width_of(c->kind)) != OK) return NOMEM;
    return slot(c);
}

/* -- reading -------------------------------------------------------------------------------------- */

static inline int read_varint(Decoder *d, size_t *pos, size_t end, uint64_t *out) {
    size_t p = *pos;
    uint64_t r = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (p >= end) return bad(d, "truncated varint at byte %zu", *pos);
        uint8_t b = d->buf[p++];
        r |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = r;
            *pos = p;
            return OK;
        }
    }
    return bad(d, "varint longer than 10 bytes at byte %zu", *pos);
}

/* a field's tag: a varint of at most 5 bytes (as protobuf reads them), its field number not 0 */
static inline int read_tag(Decoder *d, size_t *pos, size_t end, uint64_t *out) {
    size_t at = *pos;
    if (read_varint(d, pos, end, out) != OK) return BAD;
    if (*pos - at > 5 || *out >> 32 || (*out >> 3) == 0) return bad(d, "invalid tag at byte %zu", at);
    return OK;
}

static inline int read_length(Decoder *d, size_t *pos, size_t end, size_t *out) {
    size_t at = *pos;
    uint64_t n = 0;
    if (read_varint(d, pos, end, &n) != OK) return BAD;
    if (n > end - *pos)
        return bad(d, "length %llu at byte %zu exceeds the %zu bytes left", (unsigned long long)n, at, end - *pos);
    *out = (size_t)n;
    return OK;
}

/* strict UTF-8, as Python's decoder judges it */
static int utf8_valid(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        if (n - i >= 8) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (!(w & 0x8080808080808080ULL)) {
                i += 8;
                continue;
            }
        }
        uint8_t b = s[i];
        if (b < 0x80) {
            i++;
        } else if (b >= 0xc2 && b <= 0xdf) {
            if (n - i < 2 || (s[i + 1] & 0xc0) != 0x80) return 0;
            i += 2;
        } else if (b >= 0xe0 && b <= 0xef) {
            if (n - i < 3 || (s[i + 1] & 0xc0) != 0x80 || (s[i + 2] & 0xc0) != 0x80) return 0;
            if ((b == 0xe0 && s[i + 1] < 0xa0) || (b == 0xed && s[i + 1] > 0x9f)) return 0;
            i += 3;
        } else if (b >= 0xf0 && b <= 0xf4) {
            if (n - i < 4 || (s[i + 1] & 0xc0) != 0x80 || (s[i + 2] & 0xc0) != 0x80 || (s[i + 3] & 0xc0) != 0x80)
                return 0;
            if ((b == 0xf0 && s[i + 1] < 0x90) || (b == 0xf4 && s[i + 1] > 0x8f)) return 0;
            i += 4;
        } else {
            return 0;
        }
    }
    return 1;
}

/* the wire type an op's values have (unpacked) */
static int wire_of(int op) {
    switch (op) {
        case OP_FIXED32: case OP_SFIXED32: case OP_FLOAT: return WT_I32;
        case OP_FIXED64: case OP_SFIXED64: case OP_DOUBLE: return WT_I64;
        case OP_STRING: case OP_BYTES: case OP_MESSAGE: case OP_TIME: case OP_RAW: return WT_LEN;
        default: return WT_VARINT;
    }
}

/* skips the value of a field of wire type wt at *pos (an unknown field) */
static int skip_value(Decoder *d, size_t *pos, size_t end, int wt, uint32_t number, int depth) {
    uint64_t v = 0;
    size_t n = 0;
    switch (wt) {
        case WT_VARINT: return read_varint(d, pos, end, &v);
        case WT_I64: case WT_I32: {
            size_t w = wt == WT_I64 ? 8 : 4;
            if (w > end - *pos) return bad(d, "truncated at byte %zu", *pos);
            *pos += w;
            return OK;
        }
        case WT_LEN:
            if (read_length(d, pos, end, &n) != OK) return BAD;
            *pos += n;
            return OK;
        case WT_SGROUP:
            if (depth >= MAX_GROUP_DEPTH) return bad(d, "groups nested deeper than %d at byte %zu", MAX_GROUP_DEPTH, *pos);
            for (;;) {
                size_t at = *pos;
                uint64_t tag = 0;
                if (*pos >= end) return bad(d, "group %u not ended at byte %zu", number, *pos);
                if (read_tag(d, pos, end, &tag) != OK) return BAD;
                int inner = (int)(tag & 7);
                if (inner == WT_EGROUP) {
                    if ((uint32_t)(tag >> 3) != number) return bad(d, "mismatched end of group at byte %zu", at);
                    return OK;
                }
                if (skip_value(d, pos, end, inner, (uint32_t)(tag >> 3), depth + 1) != OK) return BAD;
            }
        default: return bad(d, "invalid wire type %d at byte %zu", wt, *pos);
    }
}

static int read_message(Decoder *d, int node, size_t begin, size_t end, int depth);

/* whether a closed enum (its numbers at `table`, in order) names `value`; an open one names all */
static int enum_names(const int32_t *code, int32_t table, uint64_t value) {
    if (table <= 0) return 1;
    int32_t number = (int32_t)(uint32_t)value, lo = 0, hi = code[table] - 1;
    while (lo <= hi) {
        int32_t mid = lo + (hi - lo) / 2, at = code[table + 1 + mid];
        if (at == number) return 1;
        if (at < number)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return 0;
}

/* seconds (1) and nanos (2) of a Timestamp or Duration into microseconds, floored */
static int read_time(Decoder *d, Col *c, size_t pos, size_t end) {
    int64_t seconds = 0, nanos = 0;
    while (pos < end) {
        size_t at = pos;
        uint64_t tag = 0, v = 0;
        if (read_tag(d, &pos, end, &tag) != OK) return BAD;
        uint32_t number = (uint32_t)(tag >> 3);
        int wt = (int)(tag & 7);
        if ((number == 1 || number == 2) && wt == WT_VARINT) {
            if (read_varint(d, &pos, end, &v) != OK) return BAD;
            if (number == 1)
                seconds = (int64_t)v;
            else
                nanos = (int64_t)(int32_t)(uint32_t)v;
        } else if (wt == WT_EGROUP) {
            return bad(d, "unexpected end of group at byte %zu", at);
        } else if (skip_value(d, &pos, end, wt, number, 0) != OK) {
            return BAD;
        }
    }
    /* floor(seconds * 1e6 + nanos / 1000), in 128 bits where the product could overflow */
    __int128 total = (__int128)seconds * 1000000 + (nanos >= 0 ? nanos / 1000 : -((-nanos + 999) / 1000));
    if (total > INT64_MAX || total < INT64_MIN) return bad(d, "a time of %lld seconds is out of range", (long long)seconds);
    int64_t micros = (int64_t)total;
    return put(c, &micros, 8);
}

/* one value of op at *pos (its wire type checked by the caller) into column c */
static int read_value(Decoder *d, const int32_t *f, int col, size_t *pos, size_t end, int depth) {
    Col *c = &d->cols[col];
    int op = f[1];
    uint64_t v = 0;
    switch (op) {
        case OP_INT32: case OP_ENUM: case OP_SINT32: case OP_UINT32: case OP_INT64: case OP_SINT64: case OP_UINT64:
        case OP_BOOL: {
            if (read_varint(d, pos, end, &v) != OK) return BAD;
            if (op == OP_ENUM && !enum_names(d->code, f[5], v)) return OK; /* not a value: as protobuf drops it */
            if (op == OP_INT32 || op == OP_ENUM) {
                int32_t x = (int32_t)(uint32_t)v;
                return put(c, &x, 4);
            }
            if (op == OP_SINT32) {
                uint32_t u = (uint32_t)v;
                int32_t x = (int32_t)((u >> 1) ^ (~(u & 1) + 1));
                return put(c, &x, 4);
            }
            if (op == OP_UINT32) {
                int64_t x = (int64_t)(uint32_t)v;
                return put(c, &x, 8);
            }
            if (op == OP_INT64) {
                int64_t x = (int64_t)v;
                return put(c, &x, 8);
            }
            if (op == OP_SINT64) {
                int64_t x = (int64_t)((v >> 1) ^ (~(v & 1) + 1));
                return put(c, &x, 8);
            }
            if (op == OP_BOOL) {
                uint8_t x = v != 0;
                return put(c, &x, 1);
            }
            uint8_t out[16] = {0};
            memcpy(out, &v, 8); /* little-endian hosts only (setup.py builds on x86-64 and arm64) */
            return put(c, out, 16);
        }
        case OP_FIXED32: case OP_SFIXED32: case OP_FLOAT: {
            if (4 > end - *pos) return bad(d, "truncated at byte %zu", *pos);
            const uint8_t *s = d->buf + *pos;
            *pos += 4;
            if (op == OP_FIXED32) {
                uint32_t u;
                memcpy(&u, s, 4);
                int64_t x = u;
                return put(c, &x, 8);
            }
            return put(c, s, 4);
        }
        case OP_FIXED64: case OP_SFIXED64: case OP_DOUBLE: {
            if (8 > end - *pos) return bad(d, "truncated at byte %zu", *pos);
            const uint8_t *s = d->buf + *pos;
            *pos += 8;
            if (op == OP_FIXED64) {
                uint8_t out[16] = {0};
                memcpy(out, s, 8);
                return put(c, out, 16);
            }
            return put(c, s, 8);
        }
        default: break;
    }
    size_t n = 0;
    if (read_length(d, pos, end, &n) != OK) return BAD;
    size_t at = *pos;
    *pos += n;
    switch (op) {
        case OP_STRING:
            if (!utf8_valid(d->buf + at, n)) return bad(d, "invalid UTF-8 in the string at byte %zu", at);
            return put_bytes(d, c, d->buf + at, n);
        case OP_BYTES: case OP_RAW:
            return put_bytes(d, c, d->buf + at, n);
        case OP_TIME:
            return read_time(d, c, at, at + n);
        case OP_MESSAGE:
            return read_message(d, f[5], at, at + n, depth + 1);
        default:
            return bad(d, "unknown op %d", op);
    }
}

/* the items of a repeated field at *pos: one, or a packed run of them */
static int read_items(Decoder *d, const int32_t *f, int wt, size_t *pos, size_t end, int depth) {
    if (wt == wire_of(f[1])) return read_value(d, f, f[4], pos, end, depth);
    /* packed (the caller checked wt == WT_LEN and that the field is packable) */
    size_t n = 0;
    if (read_length(d, pos, end, &n) != OK) return BAD;
    size_t stop = *pos + n;
    while (*pos < stop)
        if (read_value(d, f, f[4], pos, stop, depth) != OK) return BAD;
    return OK;
}

/* the message at [begin, end) read by the node at `node` */
static int read_message(Decoder *d, int node, size_t begin, size_t end, int depth) {
    const int32_t *code = d->code;
    int struct_col = code[node], nfields = code[node + 1], rc;
    const int32_t *fields = code + node + 2;
    size_t stack_places[64];
    size_t *places = stack_places;
    if (depth > MAX_DEPTH) return bad(d, "messages nested deeper than %d", MAX_DEPTH);
    d->budget -= 1 + nfields;
    if (d->budget < 0) return bad(d, "the payload makes more than %d column values", MAX_VALUES_PER_PAYLOAD);
    if (nfields > 64) {
        places = PyMem_RawMalloc(sizeof(size_t) * (size_t)nfields);
        if (places == NULL) return NOMEM;
    }
    for (int k = 0; k < nfields; k++) places[k] = SIZE_MAX;
    size_t pos = begin;
    int hint = 0, unknown = 0;
    rc = OK;
    /* the scan: repeated items appended as they come, the others' last places noted */
    while (pos < end) {
        size_t at = pos;
        uint64_t tag = 0;
        if ((rc = read_tag(d, &pos, end, &tag)) != OK) goto done;
        uint32_t number = (uint32_t)(tag >> 3);
        int wt = (int)(tag & 7);
        if (wt == WT_EGROUP) {
            rc = bad(d, "unexpected end of group at byte %zu", at);
            goto done;
        }
        int k = -1;
        if (hint < nfields && (uint32_t)fields[hint * FIELD_INTS] == number) {
            k = hint;
        } else {
            for (int j = 0; j < nfields; j++)
                if ((uint32_t)fields[j * FIELD_INTS] == number) {
                    k = j;
                    break;
                }
        }
        const int32_t *f = k >= 0 ? fields + k * FIELD_INTS : NULL;
        if (f != NULL) hint = k + 1;
        if (f != NULL && f[2] >= L_REPEATED) {
            if (wt == wire_of(f[1]) || (wt == WT_LEN && f[6])) {
                if (f[2] == L_MAP)
                    rc = read_value(d, f, f[3], &pos, end, depth); /* its entry: the key and value columns */
                else
                    rc = read_items(d, f, wt, &pos, end, depth);
                if (rc != OK) goto done;
                continue;
            }
        } else if (f != NULL && wt == wire_of(f[1])) {
            if ((f[1] == OP_MESSAGE || f[1] == OP_TIME || f[1] == OP_RAW) && places[k] != SIZE_MAX) {
                rc = bad(d, "message field %u occurs twice at byte %zu (merging is not supported)", number, at);
                goto done;
            }
            if (f[1] == OP_ENUM && f[5] > 0) { /* a closed enum: a number it does not name leaves the field as it was */
                size_t peek = pos;
                uint64_t v = 0;
                if ((rc = read_varint(d, &peek, end, &v)) != OK) goto done;
                if (!enum_names(d->code, f[5], v)) {
                    pos = peek;
                    unknown = 1;
                    continue;
                }
            }
            places[k] = pos;
            if (f[7] >= 0) /* a oneof member: the others are unset */
                for (int j = 0; j < nfields; j++)
                    if (j != k && fields[j * FIELD_INTS + 7] == f[7]) places[j] = SIZE_MAX;
        } else {
            unknown = 1; /* a field the reader lacks, or of another wire type than its own */
        }
        if ((rc = skip_value(d, &pos, end, wt, number, 0)) != OK) goto done;
    }
    /* a map entry with a field the reader does not know: out of its map, as protobuf keeps it */
    if (struct_col == MAP_ENTRY && unknown) goto done;
    /* the fields in order */
    if (struct_col >= 0 && (rc = slot(&d->cols[struct_col])) != OK) goto done;
    for (int k = 0; k < nfields; k++) {
        const int32_t *f = fields + k * FIELD_INTS;
        int label = f[2], col = f[3];
        if (label >= L_REPEATED) {
            Col *c = &d->cols[col];
            Col *child = &d->cols[d->child_index[c->first_child + c->nchildren - 1]];
            if ((rc = slot(c)) != OK || (rc = add_offset(d, c, child->length)) != OK) goto done;
        } else if (places[k] != SIZE_MAX) {
            size_t at = places[k];
            if ((rc = read_value(d, f, col, &at, end, depth)) != OK) goto done;
        } else if (label == L_PRESENCE) {
            if ((rc = put_null(d, col)) != OK) goto done;
        } else if (f[1] == OP_MESSAGE) {
            if ((rc = read_message(d, f[5], end, end, depth + 1)) != OK) goto done; /* its empty message */
        } else if (f[1] == OP_TIME) {
            int64_t zero = 0;
            if ((rc = put(&d->cols[col], &zero, 8)) != OK) goto done;
        } else if ((rc = put_zero(d, col)) != OK) {
            goto done;
        }
    }
done:
    if (places != stack_places) PyMem_RawFree(places);
    return rc;
}

/* -- the program's check -------------------------------------------------------------------------- */

/* whether the node at pc and the nodes it names are well formed: bounds, ops, labels, columns */
static int verify(const int32_t *code, Py_ssize_t ncode, int ncols, const Col *cols, int32_t pc, int depth) {
    if (depth > MAX_DEPTH || pc < 0 || pc + 2 > ncode) return 0;
    int32_t struct_col = code[pc], nfields = code[pc + 1];
    if (struct_col < MAP_ENTRY || struct_col >= ncols || (struct_col >= 0 && cols[struct_col].kind != K_STRUCT)) return 0;
    if (nfields < 0 || nfields > MAX_FIELDS || pc + 2 + (Py_ssize_t)nfields * FIELD_INTS > ncode) return 0;
    for (int k = 0; k < nfields; k++) {
        const int32_t *f = code + pc + 2 + k * FIELD_INTS;
        int op = f[1], label = f[2], col = f[3], elem = f[4];
        if (f[0] <= 0 || op < OP_INT32 || op > OP_LAST || label < L_ONE || label > L_MAP) return 0;
        if (col < 0 || col >= ncols) return 0;
        if (label == L_MAP) {
            if (cols[col].kind != K_MAP || cols[col].nchildren != 2 || op != OP_MESSAGE) return 0;
        } else if (label == L_REPEATED) {
            if (cols[col].kind != K_LIST || cols[col].nchildren != 1 || elem < 0 || elem >= ncols) return 0;
        }
        int target = label >= L_REPEATED ? elem : col;
        if (label != L_MAP) {
            int kind = cols[target].kind;
            switch (op) {
                case OP_INT32: case OP_SINT32: case OP_SFIXED32: case OP_ENUM: if (kind != K_INT32) return 0; break;
                case OP_INT64: case OP_SINT64: case OP_SFIXED64: case OP_UINT32: case OP_FIXED32: case OP_TIME:
                    if (kind != K_INT64) return 0;
                    break;
                case OP_UINT64: case OP_FIXED64: if (kind != K_DECIMAL128) return 0; break;
                case OP_FLOAT: if (kind != K_FLOAT32) return 0; break;
                case OP_DOUBLE: if (kind != K_FLOAT64) return 0; break;
                case OP_BOOL: if (kind != K_BOOLEAN) return 0; break;
                case OP_STRING: case OP_BYTES: case OP_RAW: if (kind != K_BINARY) return 0; break;
                default: break;
            }
        }
        if (op == OP_ENUM && f[5] != 0) {
            if (f[5] < 0 || (Py_ssize_t)f[5] + 1 > ncode || code[f[5]] < 0 ||
                (Py_ssize_t)f[5] + 1 + code[f[5]] > ncode)
                return 0;
        }
        if (op == OP_MESSAGE) {
            /* nodes are a tree (inlined at each use): the depth bound ends any cycle */
            if (f[5] <= 0 || f[5] == pc || !verify(code, ncode, ncols, cols, f[5], depth + 1)) return 0;
        }
    }
    return 1;
}

/* -- the module ----------------------------------------------------------------------------------- */

static void free_cols(Col *cols, int ncols) {
    if (cols == NULL) return;
    for (int k = 0; k < ncols; k++) {
        PyMem_RawFree(cols[k].valid.p);
        PyMem_RawFree(cols[k].data.p);
        PyMem_RawFree(cols[k].offsets.p);
    }
    PyMem_RawFree(cols);
}

static PyObject *maybe_bytes(const Buf *b, int present) {
    if (!present) Py_RETURN_NONE;
    return PyBytes_FromStringAndSize((const char *)b->p, (Py_ssize_t)b->len);
}

static PyObject *column_tuple(const Col *c) {
    int has_offsets = c->kind == K_BINARY || c->kind == K_LIST || c->kind == K_MAP;
    int has_data = c->kind != K_STRUCT && c->kind != K_LIST && c->kind != K_MAP;
    PyObject *validity = NULL, *one = NULL, *two = NULL;
    if (c->nulls) {
        size_t bytes = (c->length + 7) / 8;
        validity = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)bytes);
        if (validity == NULL) return NULL;
        char *v = PyBytes_AS_STRING(validity);
        size_t have = c->valid.len < bytes ? c->valid.len : bytes;
        memcpy(v, c->valid.p, have);
        memset(v + have, 0xff, bytes - have);
        if (c->length % 8) v[bytes - 1] &= (char)((1u << (c->length % 8)) - 1); /* no bits past the end */
    } else {
        validity = Py_NewRef(Py_None);
    }
    if (has_offsets) {
        one = maybe_bytes(&c->offsets, 1);
        two = c->kind == K_BINARY ? maybe_bytes(&c->data, 1) : Py_NewRef(Py_None);
    } else {
        one = has_data ? maybe_bytes(&c->data, 1) : Py_NewRef(Py_None);
        two = Py_NewRef(Py_None);
    }
    if (one == NULL || two == NULL) {
        Py_XDECREF(validity);
        Py_XDECREF(one);
        Py_XDECREF(two);
        return NULL;
    }
    return Py_BuildValue("(nnNNN)", (Py_ssize_t)c->length, (Py_ssize_t)c->nulls, validity, one, two);
}

typedef struct {
    Py_ssize_t index;
    char reason[REASON_SIZE];
} Bad;

static PyObject *py_decode(PyObject *self, PyObject *args) {
    PyObject *values_obj, *code_obj, *columns_obj, *values = NULL, *columns = NULL, *bad_list = NULL, *result = NULL;
    PyObject *others_list = NULL;
    const char *header;
    Py_ssize_t start;
    Py_ssize_t *others = NULL, nothers = 0;
    int32_t *code = NULL;
    Col *cols = NULL;
    int *child_index = NULL, ncols = 0, failed = OK;
    const uint8_t **ptrs = NULL;
    size_t *lens = NULL;
    Py_buffer *views = NULL;
    Py_ssize_t n = 0, nviews = 0, ncode = 0;
    Bad *bads = NULL;
    size_t nbad = 0, bad_cap = 0;
    Mark *marks = NULL;
    (void)self;
    if (!PyArg_ParseTuple(args, "Oy#OO", &values_obj, &header, &start, &code_obj, &columns_obj)) return NULL;
    /* the code */
    PyObject *code_seq = PySequence_Fast(code_obj, "code must be a sequence of ints");
    if (code_seq == NULL) return NULL;
    ncode = PySequence_Fast_GET_SIZE(code_seq);
    code = PyMem_Malloc(sizeof(int32_t) * (size_t)(ncode + 1));
    if (code == NULL) {
        Py_DECREF(code_seq);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < ncode; i++) {
        long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(code_seq, i));
        if ((v == -1 && PyErr_Occurred()) || v < INT32_MIN || v > INT32_MAX) {
            Py_DECREF(code_seq);
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "malformed decoding program");
            goto done;
        }
        code[i] = (int32_t)v;
    }
    Py_DECREF(code_seq);
    /* the columns: (kind, parent) each, parents before their children */
    PyObject *col_seq = PySequence_Fast(columns_obj, "columns must be a sequence");
    if (col_seq == NULL) goto done;
    Py_ssize_t ncols_big = PySequence_Fast_GET_SIZE(col_seq);
    if (ncols_big < 1 || ncols_big > 1000000) {
        Py_DECREF(col_seq);
        PyErr_SetString(PyExc_ValueError, "malformed decoding program");
        goto done;
    }
    ncols = (int)ncols_big;
    cols = PyMem_RawCalloc((size_t)ncols, sizeof(Col));
    child_index = PyMem_RawCalloc((size_t)ncols, sizeof(int));
    int *parents = PyMem_RawCalloc((size_t)ncols, sizeof(int));
    int *counts = PyMem_RawCalloc((size_t)ncols + 1, sizeof(int));
    if (cols == NULL || child_index == NULL || parents == NULL || counts == NULL) {
        PyMem_RawFree(parents);
        PyMem_RawFree(counts);
        Py_DECREF(col_seq);
        PyErr_NoMemory();
        goto done;
    }
    int ok = 1;
    for (int k = 0; k < ncols && ok; k++) {
        int kind = 0, parent = 0;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(col_seq, k), "ii", &kind, &parent)) {
            ok = -1;
            break;
        }
        if (kind < K_BOOLEAN || kind > K_MAP || parent >= k || parent < -1 || (k > 0 && parent < 0) ||
            (k == 0 && parent != -1))
            ok = 0;
        cols[k].kind = kind;
        parents[k] = parent;
        if (parent >= 0) counts[parent]++;
    }
    Py_DECREF(col_seq);
    if (ok == 1) {
        int at = 0;
        for (int k = 0; k < ncols; k++) {
            cols[k].first_child = at;
            at += counts[k];
            counts[k] = 0;
        }
        for (int k = 1; k < ncols; k++) {
            Col *p = &cols[parents[k]];
            child_index[p->first_child + counts[parents[k]]++] = k;
            p->nchildren++;
        }
        for (int k = 0; k < ncols; k++) {
            int kind = cols[k].kind;
            if ((kind == K_LIST && cols[k].nchildren != 1) || (kind == K_MAP && cols[k].nchildren != 2) ||
                (kind != K_STRUCT && kind != K_LIST && kind != K_MAP && cols[k].nchildren != 0))
                ok = 0;
            if ((kind == K_LIST || kind == K_MAP || kind == K_BINARY) && buf_zeros(&cols[k].offsets, 4) != OK) ok = -2;
        }
    }
    PyMem_RawFree(parents);
    PyMem_RawFree(counts);
    if (ok == -2) {
        PyErr_NoMemory();
        goto done;
    }
    if (ok != 1 || cols[0].kind != K_STRUCT || !verify(code, ncode, ncols, cols, 0, 0) || code[0] != 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "malformed decoding program");
        goto done;
    }
    /* the values: a tuple of our own keeps them alive while the GIL is released */
    if ((values = PySequence_Tuple(values_obj)) == NULL) goto done;
    n = PyTuple_GET_SIZE(values);
    ptrs = PyMem_Calloc((size_t)n + 1, sizeof(*ptrs));
    lens = PyMem_Calloc((size_t)n + 1, sizeof(*lens));
    views = PyMem_Calloc((size_t)n + 1, sizeof(*views));
    marks = PyMem_Calloc((size_t)ncols, sizeof(Mark));
    others = PyMem_Calloc((size_t)n + 1, sizeof(*others));
    if (ptrs == NULL || lens == NULL || views == NULL || marks == NULL || others == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PyTuple_GET_ITEM(values, i);
        if (v == Py_None) {
            ptrs[i] = NULL; /* a message without a value: the caller's */
        } else if (PyBytes_Check(v)) {
            ptrs[i] = (const uint8_t *)PyBytes_AS_STRING(v);
            lens[i] = (size_t)PyBytes_GET_SIZE(v);
        } else {
            if (PyObject_GetBuffer(v, &views[nviews], PyBUF_SIMPLE) != 0) goto done;
            ptrs[i] = views[nviews].buf;
            lens[i] = (size_t)views[nviews].len;
            nviews++;
        }
    }
    Decoder d = {code, cols, ncols, child_index, NULL, 0, {0}};
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        if (ptrs[i] == NULL || lens[i] < (size_t)start || memcmp(ptrs[i], header, (size_t)start) != 0) {
            others[nothers++] = i;
            continue;
        }
        for (int k = 0; k < ncols; k++) {
            marks[k].length = cols[k].length;
            marks[k].nulls = cols[k].nulls;
            marks[k].valid = cols[k].valid.len;
            marks[k].data = cols[k].data.len;
            marks[k].offsets = cols[k].offsets.len;
        }
        d.buf = ptrs[i];
        d.budget = MAX_VALUES_PER_PAYLOAD;
        int rc = read_message(&d, 0, (size_t)start, lens[i], 0);
        if (rc == OK) continue;
        if (rc == NOMEM) {
            failed = NOMEM;
            break;
        }
        for (int k = 0; k < ncols; k++) {
            cols[k].length = marks[k].length;
            cols[k].nulls = marks[k].nulls;
            cols[k].data.len = marks[k].data;
            cols[k].offsets.len = marks[k].offsets;
            if (cols[k].valid.p != NULL && marks[k].valid == 0 && cols[k].nulls == 0) {
                /* the bitmap was made by this value: before it every slot was valid */
                PyMem_RawFree(cols[k].valid.p);
                cols[k].valid.p = NULL;
                cols[k].valid.len = cols[k].valid.cap = 0;
            }
        }
        if (nbad == bad_cap) {
            size_t cap = bad_cap ? bad_cap * 2 : 16;
            Bad *grown = PyMem_RawRealloc(bads, cap * sizeof(Bad));
            if (grown == NULL) {
                failed = NOMEM;
                break;
            }
            bads = grown;
            bad_cap = cap;
        }
        bads[nbad].index = i;
        memcpy(bads[nbad].reason, d.reason, REASON_SIZE);
        nbad++;
    }
    Py_END_ALLOW_THREADS
    if (failed == NOMEM) {
        PyErr_NoMemory();
        goto done;
    }
    if ((columns = PyList_New(ncols)) == NULL) goto done;
    for (int k = 0; k < ncols; k++) {
        PyObject *t = column_tuple(&cols[k]);
        if (t == NULL) goto done;
        PyList_SET_ITEM(columns, k, t);
    }
    if ((bad_list = PyList_New((Py_ssize_t)nbad)) == NULL) goto done;
    for (size_t k = 0; k < nbad; k++) {
        PyObject *t = Py_BuildValue("(ns)", bads[k].index, bads[k].reason);
        if (t == NULL) goto done;
        PyList_SET_ITEM(bad_list, (Py_ssize_t)k, t);
    }
    if ((others_list = PyList_New(nothers)) == NULL) goto done;
    for (Py_ssize_t k = 0; k < nothers; k++) {
        PyObject *t = PyLong_FromSsize_t(others[k]);
        if (t == NULL) goto done;
        PyList_SET_ITEM(others_list, k, t);
    }
    result = PyTuple_Pack(3, columns, bad_list, others_list);
done:
    for (Py_ssize_t i = 0; i < nviews; i++) PyBuffer_Release(&views[i]);
    PyMem_Free(views);
    PyMem_Free(ptrs);
    PyMem_Free(lens);
    PyMem_Free(marks);
    PyMem_Free(others);
    PyMem_RawFree(bads);
    PyMem_Free(code);
    free_cols(cols, ncols);
    PyMem_RawFree(child_index);
    Py_XDECREF(values);
    Py_XDECREF(columns);
    Py_XDECREF(bad_list);
    Py_XDECREF(others_list);
    return result;
}

static PyMethodDef methods[] = {
    {"decode", py_decode, METH_VARARGS, "See kafkalog.schemas.protobuf_program.decode."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_protobuf_columns", "The C kernel of Protobuf decoding into columns.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__protobuf_columns(void) { return PyModule_Create(&module); }
