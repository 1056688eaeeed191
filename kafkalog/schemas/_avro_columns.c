/*
 * kafkalog.schemas._avro_columns: runs a compiled Avro decoding program (kafkalog.schemas.avro_program)
 * over a chunk of values, straight into column buffers. The pure-Python twin, _avro_columns_py.py, is
 * the reference: same columns, same bad reasons, byte for byte (the tests hold this file to it).
 *
 * decode(values, start, code, layout[, piece_bytes]) -> (columns, bad, stop). Every value is untrusted:
 * every read is checked against the value's end, every length and block count against the bytes left
 * before any memory is taken for it, varints stop at 10 bytes (5 for an int: its values, an enum's and
 * a union's index), and every write is charged before it is made against the bytes of columns the
 * value may make (avro_program.value_output_limit: a null placeholder or a union's other members make
 * bytes from none) and those the piece may take (piece_bytes): a value past its own bound is bad, one
 * that would pass the piece's (or an int32 offset) ends the piece before it, at `stop`, and the caller
 * decodes the rest in a further call. A value that fails is rolled back out of every column (each
 * column's lengths are marked at the row's start). The code is checked once before the chunk (node
 * sizes, operands, each op against its column's kind and width, a union's member among its union's
 * columns, nesting) and the layout too (kinds, parents, widths, nesting at most MAX_LAYOUT_DEPTH, so
 * put_null's recursion is bounded), so a malformed program is a ValueError, never a read or write out
 * of bounds. The GIL is released while the
 * chunk decodes: the values are held by the sequence the caller passed (and buffer views of any
 * that are not bytes), and the decoder touches only memory of its own (PyMem_Raw*).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* the instructions and column kinds of kafkalog.schemas.avro_program (Op, Kind) */
enum {
    OP_NULL = 0, OP_SET_NULL, OP_BOOLEAN, OP_INT, OP_INT_LONG, OP_LONG, OP_INT_FLOAT, OP_LONG_FLOAT,
    OP_FLOAT, OP_INT_DOUBLE, OP_LONG_DOUBLE, OP_FLOAT_DOUBLE, OP_DOUBLE, OP_BYTES, OP_STRING, OP_FIXED,
    OP_DECIMAL_BYTES, OP_DECIMAL_FIXED, OP_ENUM, OP_RECORD, OP_ARRAY, OP_MAP, OP_UNION, OP_PICK,
    OP_SKIP_NOTHING, OP_SKIP_BOOLEAN, OP_SKIP_VARINT, OP_SKIP_4, OP_SKIP_8, OP_SKIP_BYTES, OP_SKIP_FIXED,
    OP_SKIP_RECORD, OP_SKIP_ARRAY, OP_SKIP_MAP, OP_INLINE,
};
enum {
    K_NULL = 0, K_BOOLEAN, K_INT32, K_INT64, K_FLOAT32, K_FLOAT64, K_BINARY, K_FIXED, K_STRUCT, K_LIST,
    K_MAP, K_CONST,
};

#define MAX_EMPTY_ITEMS (1 << 20) /* avro_program.MAX_EMPTY_ITEMS */
#define MAX_VALUE_OUTPUT ((size_t)64 << 20) /* avro_program.MAX_VALUE_OUTPUT */
#define OUTPUT_PER_BYTE 256                 /* avro_program.OUTPUT_PER_BYTE */
#define OUTPUT_SLACK ((size_t)16 << 10)     /* avro_program.OUTPUT_SLACK */
#define MAX_PIECE_OUTPUT ((size_t)256 << 20) /* avro_program.MAX_PIECE_OUTPUT */
#define MAX_CODE_DEPTH 300   /* avro_program.MAX_CODE_DEPTH */
#define MAX_LAYOUT_DEPTH 128 /* avro_program.MAX_COLUMN_DEPTH */
#define LONG_BYTES 10
#define INT_BYTES 5
#define MAX_WIDTH (1 << 20) /* avro_program.MAX_FIXED_SIZE */
#define REASON_SIZE 200

/* SPLIT: the value does not fit beside the values already in the columns: they end the piece, and
   the value begins the next (its verdict is its own, never its neighbours') */
enum { OK = 0, BAD = -1, NOMEM = -2, SPLIT = -3 };

typedef struct {
    uint8_t *p;
    size_t len, cap;
} Buf;

typedef struct {
    int kind, width;
    int first_child, nchildren; /* into Decoder.child_index */
    size_t length, nulls;
    Buf valid; /* an Arrow bitmap, made at the first null (p == NULL before) */
    Buf data;
    Buf offsets; /* int32: binary, list and map columns */
} Col;

typedef struct {
    size_t length, nulls, data, offsets;
} Mark;

typedef struct {
    const int32_t *code;
    const uint8_t *pool; /* the code's ints as bytes: an INLINE default is read from there */
    Col *cols;
    int ncols;
    int *child_index;
    const uint8_t *buf;
    size_t end;
    uint64_t budget;
    size_t room;       /* bytes of columns the value may still make (its limit: value_limit) */
    size_t value_limit;
    size_t piece_room; /* bytes of columns the piece may still take (of piece_limit) */
    size_t piece_limit;
    size_t piece_rows; /* values the piece holds */
    char reason[REASON_SIZE];
} Decoder;

/* -- buffers ------------------------------------------------------------------------------------ */

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

/* -- columns -------------------------------------------------------------------------------------- */

/* the bytes of columns a write makes, counted before it is made (avro_program's cost: a slot 1 byte,
   a null column's slot 4, an offset 4, and the bytes of the value): the value past its limit is bad,
   a piece past its own ends before the value */
static inline int charge(Decoder *d, size_t n) {
    if (n > d->room) return bad(d, "the value would expand to more than %zu bytes of columns", d->value_limit);
    if (n > d->piece_room) {
        if (d->piece_rows) return SPLIT;
        return bad(d, "the value would expand to more than %zu bytes of columns", d->piece_limit);
    }
    d->room -= n;
    d->piece_room -= n;
    return OK;
}

/* the validity bit of the column's next slot (the slot itself is counted by the caller) */
static int set_bit(Col *c, int valid) {
    size_t i = c->length;
    if (c->valid.p == NULL) {
        if (valid) return OK;
        /* the first null: every slot before it was valid */
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

/* a valid slot, its cost charged by the caller */
static inline int slot_charged(Col *c) {
    if (c->valid.p != NULL && set_bit(c, 1) != OK) return NOMEM;
    c->length++;
    return OK;
}

static inline int slot(Decoder *d, Col *c) {
    int rc = charge(d, c->kind == K_NULL ? 4 : 1);
    if (rc != OK) return rc;
    if (c->valid.p != NULL && set_bit(c, 1) != OK) return NOMEM;
    c->length++;
    return OK;
}

/* an offset, its cost charged by the caller */
static int offset_charged(Decoder *d, Col *c, size_t value) {
    if (value > INT32_MAX) {
        if (d->piece_rows) return SPLIT;
        return bad(d, "the value alone makes a column exceed %d values or bytes", INT32_MAX);
    }
    int32_t v = (int32_t)value;
    return buf_put(&c->offsets, &v, 4);
}

/* a value of n bytes: the bytes and a slot */
static inline int put(Decoder *d, Col *c, const void *src, size_t n) {
    int rc = charge(d, n + 1);
    if (rc != OK) return rc;
    if (buf_put(&c->data, src, n) != OK) return NOMEM;
    return slot_charged(c);
}

/* a binary value: the bytes, a slot and an offset */
static int put_bytes(Decoder *d, Col *c, const uint8_t *src, size_t n) {
    int rc = charge(d, n + 5);
    if (rc != OK) return rc;
    if (buf_put(&c->data, src, n) != OK) return NOMEM;
    if (slot_charged(c) != OK) return NOMEM;
    return offset_charged(d, c, c->data.len);
}

static int fixed_width(int kind) {
    switch (kind) {
        case K_BOOLEAN: return 1;
        case K_INT32: case K_FLOAT32: return 4;
        case K_INT64: case K_FLOAT64: return 8;
        default: return 0;
    }
}

/* a null in the column, and placeholders in its children (an Arrow struct's children run beside it) */
static int put_null(Decoder *d, int col) {
    Col *c = &d->cols[col];
    int rc;
    if (c->kind == K_CONST) return OK;
    size_t cost = c->kind == K_NULL ? 4 : c->kind == K_FIXED ? 1 + (size_t)c->width
                : (c->kind == K_LIST || c->kind == K_MAP || c->kind == K_BINARY) ? 5 : 1 + (size_t)fixed_width(c->kind);
    if ((rc = charge(d, cost)) != OK) return rc;
    if (c->kind == K_NULL) {
        c->length++;
        c->nulls++;
        return OK;
    }
    if (set_bit(c, 0) != OK) return NOMEM;
    c->length++;
    c->nulls++;
    switch (c->kind) {
        case K_STRUCT:
            for (int k = 0; k < c->nchildren; k++)
                if ((rc = put_null(d, d->child_index[c->first_child + k])) != OK) return rc;
            return OK;
        case K_LIST: case K_MAP: case K_BINARY: {
            int32_t last;
            memcpy(&last, c->offsets.p + c->offsets.len - 4, 4);
            return buf_put(&c->offsets, &last, 4);
        }
        case K_FIXED: return buf_zeros(&c->data, (size_t)c->width);
        default: return buf_zeros(&c->data, (size_t)fixed_width(c->kind));
    }
}

/* -- reading -------------------------------------------------------------------------------------- */

/* a zigzag varint of at most `most` bytes */
static inline int read_varint(Decoder *d, size_t *pos, int64_t *out, int most) {
    size_t p = *pos;
    uint64_t r = 0;
    for (int shift = 0; shift < 7 * most; shift += 7) {
        if (p >= d->end) return bad(d, "truncated at byte %zu", *pos);
        uint8_t b = d->buf[p++];
        r |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = (int64_t)((r >> 1) ^ (~(r & 1) + 1));
            *pos = p;
            return OK;
        }
    }
    return bad(d, "varint too long at byte %zu", *pos);
}

static inline int read_long(Decoder *d, size_t *pos, int64_t *out) { return read_varint(d, pos, out, LONG_BYTES); }

static inline int read_int(Decoder *d, size_t *pos, int32_t *out) {
    size_t at = *pos;
    int64_t v = 0;
    if (read_varint(d, pos, &v, INT_BYTES) != OK) return BAD;
    if (v < INT32_MIN || v > INT32_MAX) return bad(d, "int %lld out of range at byte %zu", (long long)v, at);
    *out = (int32_t)v;
    return OK;
}

static inline int take(Decoder *d, size_t pos, size_t n) {
    if (n > d->end - pos) return bad(d, "truncated at byte %zu", pos);
    return OK;
}

static inline int read_length(Decoder *d, size_t *pos, size_t *out) {
    size_t at = *pos;
    int64_t n = 0;
    if (read_long(d, pos, &n) != OK) return BAD;
    if (n < 0) return bad(d, "negative length %lld at byte %zu", (long long)n, at);
    if ((uint64_t)n > d->end - *pos)
        return bad(d, "length %lld at byte %zu exceeds the %zu bytes left", (long long)n, at, d->end - *pos);
    *out = (size_t)n;
    return OK;
}

/* strict UTF-8, as Python's decoder judges it: no overlong forms, no surrogates, nothing past U+10FFFF */
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

/* a block's item count (0: the end), its byte size (-1: not given), the position of its items */
static int read_block(Decoder *d, size_t *pos, int64_t min_bytes, uint64_t *count, int64_t *size, size_t *size_at) {
    size_t at = *pos;
    int64_t n = 0;
    if (read_long(d, pos, &n) != OK) return BAD;
    *size = -1;
    if (n < 0) {
        *count = (uint64_t)(-(n + 1)) + 1;
        *size_at = *pos;
        if (read_long(d, pos, size) != OK) return BAD;
        if (*size < 0) return bad(d, "negative length %lld at byte %zu", (long long)*size, *size_at);
    } else {
        *count = (uint64_t)n;
    }
    size_t left = d->end - *pos;
    if (min_bytes > 0) {
        if (*count > left / (uint64_t)min_bytes)
            return bad(d, "block of %llu items at byte %zu exceeds the %zu bytes left", (unsigned long long)*count, at,
                       left);
    } else {
        if (*count > d->budget)
            return bad(d, "block of %llu items at byte %zu exceeds %d items of no bytes", (unsigned long long)*count,
                       at, MAX_EMPTY_ITEMS);
        d->budget -= *count;
    }
    return OK;
}

/* -- the interpreter ------------------------------------------------------------------------------ */

static int run(Decoder *d, int pc, size_t *pos);

static int run_children(Decoder *d, int pc, int stop, size_t *pos) {
    int rc;
    while (pc < stop) {
        if ((rc = run(d, pc, pos)) != OK) return rc;
        pc += d->code[pc + 1];
    }
    return OK;
}

static int collection(Decoder *d, int pc, size_t *pos) {
    const int32_t *code = d->code;
    int op = code[pc], rc;
    int writes = op == OP_ARRAY || op == OP_MAP, is_map = op == OP_MAP || op == OP_SKIP_MAP;
    int head = pc + 2 + (writes ? 1 : 0) + (op == OP_MAP ? 1 : 0);
    int64_t min_bytes = code[head];
    int item = head + 1;
    Col *key = op == OP_MAP ? &d->cols[code[pc + 3]] : NULL;
    for (;;) {
        uint64_t count = 0;
        int64_t size = -1;
        size_t size_at = 0;
        if ((rc = read_block(d, pos, min_bytes, &count, &size, &size_at)) != OK) return rc;
        if (count == 0) break;
        if (!writes && size >= 0) {
            if ((uint64_t)size > d->end - *pos)
                return bad(d, "length %lld at byte %zu exceeds the %zu bytes left", (long long)size, size_at,
                           d->end - *pos);
            *pos += (size_t)size;
            continue;
        }
        for (uint64_t k = 0; k < count; k++) {
            if (is_map) {
                size_t n = 0;
                if ((rc = read_length(d, pos, &n)) != OK) return rc;
                if (key != NULL) {
                    if (!utf8_valid(d->buf + *pos, n)) return bad(d, "invalid UTF-8 in the string at byte %zu", *pos);
                    if ((rc = put_bytes(d, key, d->buf + *pos, n)) != OK) return rc;
                }
                *pos += n;
            }
            if ((rc = run(d, item, pos)) != OK) return rc;
        }
    }
    if (writes) {
        Col *c = &d->cols[code[pc + 2]];
        Col *child = &d->cols[d->child_index[c->first_child + c->nchildren - 1]];
        if ((rc = charge(d, 5)) != OK) return rc; /* a slot and an offset */
        if (slot_charged(c) != OK) return NOMEM;
        return offset_charged(d, c, child->length);
    }
    return OK;
}

static int decimal(Decoder *d, Col *c, const uint8_t *s, size_t n, size_t at, int width) {
    uint8_t out[64];
    size_t w = (size_t)width;
    if (n > w) {
        uint8_t fill = (s[0] & 0x80) ? 0xff : 0;
        for (size_t k = 0; k < n - w; k++)
            if (s[k] != fill) return bad(d, "decimal of %zu bytes at byte %zu does not fit %d bits", n, at, 8 * width);
        if ((s[n - w] ^ fill) & 0x80)
            return bad(d, "decimal of %zu bytes at byte %zu does not fit %d bits", n, at, 8 * width);
        s += n - w;
        n = w;
    }
    uint8_t fill = (n && (s[0] & 0x80)) ? 0xff : 0;
    for (size_t k = 0; k < w; k++) out[k] = k < n ? s[n - 1 - k] : fill;
    return put(d, c, out, w);
}

static int run(Decoder *d, int pc, size_t *pos) {
    const int32_t *code = d->code;
    Col *c = NULL;
    int op = code[pc], rc;
    if (op <= OP_DECIMAL_FIXED || op == OP_ENUM || op == OP_RECORD) c = &d->cols[code[pc + 2]];
    switch (op) {
        case OP_NULL:
            return slot(d, c);
        case OP_SET_NULL:
            return put_null(d, code[pc + 2]);
        case OP_BOOLEAN: {
            if (take(d, *pos, 1) != OK) return BAD;
            uint8_t v = d->buf[*pos] ? 1 : 0;
            *pos += 1;
            return put(d, c, &v, 1);
        }
        case OP_INT: case OP_INT_LONG: case OP_INT_FLOAT: case OP_INT_DOUBLE: {
            int32_t v = 0;
            if (read_int(d, pos, &v) != OK) return BAD;
            if (op == OP_INT) return put(d, c, &v, 4);
            if (op == OP_INT_LONG) {
                int64_t l = v;
                return put(d, c, &l, 8);
            }
            if (op == OP_INT_FLOAT) {
                float f = (float)(double)v;
                return put(d, c, &f, 4);
            }
            double g = (double)v;
            return put(d, c, &g, 8);
        }
        case OP_LONG: case OP_LONG_FLOAT: case OP_LONG_DOUBLE: {
            int64_t v = 0;
            if (read_long(d, pos, &v) != OK) return BAD;
            if (op == OP_LONG) return put(d, c, &v, 8);
            double g = (double)v;
            if (op == OP_LONG_DOUBLE) return put(d, c, &g, 8);
            float f = (float)g;
            return put(d, c, &f, 4);
        }
        case OP_FLOAT: case OP_FLOAT_DOUBLE: {
            if (take(d, *pos, 4) != OK) return BAD;
            const uint8_t *s = d->buf + *pos;
            *pos += 4;
            if (op == OP_FLOAT) return put(d, c, s, 4);
            float f;
            memcpy(&f, s, 4);
            double g = (double)f;
            return put(d, c, &g, 8);
        }
        case OP_DOUBLE:
            if (take(d, *pos, 8) != OK) return BAD;
            *pos += 8;
            return put(d, c, d->buf + *pos - 8, 8);
        case OP_BYTES: case OP_STRING: {
            size_t n = 0;
            if (read_length(d, pos, &n) != OK) return BAD;
            const uint8_t *s = d->buf + *pos;
            if (op == OP_STRING && !utf8_valid(s, n)) return bad(d, "invalid UTF-8 in the string at byte %zu", *pos);
            *pos += n;
            return put_bytes(d, c, s, n);
        }
        case OP_FIXED: {
            size_t n = (size_t)code[pc + 3];
            if (take(d, *pos, n) != OK) return BAD;
            *pos += n;
            return put_bytes(d, c, d->buf + *pos - n, n);
        }
        case OP_DECIMAL_BYTES: case OP_DECIMAL_FIXED: {
            size_t n = 0, at;
            int width;
            if (op == OP_DECIMAL_BYTES) {
                if (read_length(d, pos, &n) != OK) return BAD;
                width = code[pc + 3];
            } else {
                n = (size_t)code[pc + 3];
                width = code[pc + 4];
                if (take(d, *pos, n) != OK) return BAD;
            }
            at = *pos;
            *pos += n;
            return decimal(d, c, d->buf + at, n, at, width);
        }
        case OP_ENUM: {
            size_t at = *pos;
            int64_t index = 0;
            if (read_varint(d, pos, &index, INT_BYTES) != OK) return BAD;
            int32_t symbols = code[pc + 3];
            if (index < 0 || index >= symbols)
                return bad(d, "enum index %lld out of range (%d symbols) at byte %zu", (long long)index, symbols, at);
            return put(d, c, &code[pc + 4 + index], 4);
        }
        case OP_RECORD:
            if ((rc = slot(d, c)) != OK) return rc;
            return run_children(d, pc + 3, pc + code[pc + 1], pos);
        case OP_SKIP_RECORD:
            return run_children(d, pc + 2, pc + code[pc + 1], pos);
        case OP_ARRAY: case OP_MAP: case OP_SKIP_ARRAY: case OP_SKIP_MAP:
            return collection(d, pc, pos);
        case OP_UNION: {
            size_t at = *pos;
            int64_t index = 0;
            int32_t branches = code[pc + 2];
            if (read_varint(d, pos, &index, INT_BYTES) != OK) return BAD;
            if (index < 0 || index >= branches)
                return bad(d, "union branch %lld out of range (%d branches) at byte %zu", (long long)index, branches,
                           at);
            return run(d, pc + code[pc + 3 + index], pos);
        }
        case OP_PICK: {
            Col *s = &d->cols[code[pc + 2]];
            int member = code[pc + 3];
            if ((rc = slot(d, s)) != OK) return rc;
            for (int k = 0; k < s->nchildren; k++) {
                int child = d->child_index[s->first_child + k];
                if (child != member && (rc = put_null(d, child)) != OK) return rc;
            }
            return run(d, pc + 4, pos);
        }
        case OP_INLINE: { /* a default: its node reads the bytes in the code, then the value goes on */
            size_t n = (size_t)code[pc + 2], at = 0;
            const uint8_t *saved = d->buf;
            size_t saved_end = d->end;
            d->buf = d->pool + pc + 3;
            d->end = n;
            rc = run(d, pc + 3 + (int)n, &at);
            d->buf = saved;
            d->end = saved_end;
            if (rc != OK) return rc;
            if (at != n) return bad(d, "%zu bytes of a default left unread", n - at);
            return OK;
        }
        case OP_SKIP_NOTHING:
            return OK;
        case OP_SKIP_BOOLEAN: case OP_SKIP_4: case OP_SKIP_8: case OP_SKIP_FIXED: {
            size_t n = op == OP_SKIP_BOOLEAN ? 1 : op == OP_SKIP_4 ? 4 : op == OP_SKIP_8 ? 8 : (size_t)code[pc + 2];
            if (take(d, *pos, n) != OK) return BAD;
            *pos += n;
            return OK;
        }
        case OP_SKIP_VARINT: {
            int64_t ignored;
            return read_long(d, pos, &ignored);
        }
        case OP_SKIP_BYTES: {
            size_t n = 0;
            if (read_length(d, pos, &n) != OK) return BAD;
            *pos += n;
            return OK;
        }
        default:
            return bad(d, "unknown instruction %d", op); /* verify() lets none through */
    }
}

/* -- the program's check -------------------------------------------------------------------------- */

typedef struct {
    const int32_t *code;
    int ncols;
    const Col *cols;
    const int *child_index;
} Check;

static int col_ok(const Check *k, int32_t col) { return col >= 0 && col < k->ncols; }

/* column `col` exists, is of `kind` and (width >= 0) that many bytes wide */
static int col_is(const Check *k, int32_t col, int kind, int64_t width) {
    if (!col_ok(k, col) || k->cols[col].kind != kind) return 0;
    return width < 0 || k->cols[col].width == width;
}

/* the column kind an op that writes one value writes to (-1: not such an op) */
static int kind_of(int op) {
    switch (op) {
        case OP_NULL: return K_NULL;
        case OP_BOOLEAN: return K_BOOLEAN;
        case OP_INT: return K_INT32;
        case OP_INT_LONG: case OP_LONG: return K_INT64;
        case OP_INT_FLOAT: case OP_LONG_FLOAT: case OP_FLOAT: return K_FLOAT32;
        case OP_INT_DOUBLE: case OP_LONG_DOUBLE: case OP_FLOAT_DOUBLE: case OP_DOUBLE: return K_FLOAT64;
        case OP_BYTES: case OP_STRING: return K_BINARY;
        default: return -1;
    }
}

/* `member` is one of the columns of the union's struct column `col` */
static int is_child(const Check *k, int32_t col, int32_t member) {
    const Col *c = &k->cols[col];
    for (int i = 0; i < c->nchildren; i++)
        if (k->child_index[c->first_child + i] == member) return 1;
    return 0;
}

/* whether the node at pc is well formed within [pc, stop): sizes, operands and columns in range */
static int verify(const Check *k, int64_t pc, int64_t stop, int depth) {
    const int32_t *code = k->code;
    if (depth > MAX_CODE_DEPTH || pc < 0 || pc + 2 > stop) return 0;
    int op = code[pc];
    int64_t size = code[pc + 1], end = pc + size;
    if (size < 2 || end > stop) return 0;
    switch (op) {
        case OP_NULL: case OP_BOOLEAN: case OP_INT: case OP_INT_LONG: case OP_LONG:
        case OP_INT_FLOAT: case OP_LONG_FLOAT: case OP_FLOAT: case OP_INT_DOUBLE: case OP_LONG_DOUBLE:
        case OP_FLOAT_DOUBLE: case OP_DOUBLE: case OP_BYTES: case OP_STRING:
            return size == 3 && col_is(k, code[pc + 2], kind_of(op), -1);
        case OP_SET_NULL:
            return size == 3 && col_ok(k, code[pc + 2]);
        case OP_FIXED:
            return size == 4 && code[pc + 3] >= 0 && col_is(k, code[pc + 2], K_BINARY, -1);
        case OP_DECIMAL_BYTES:
            return size == 4 && code[pc + 3] >= 1 && code[pc + 3] <= 64 && col_is(k, code[pc + 2], K_FIXED, code[pc + 3]);
        case OP_DECIMAL_FIXED:
            return size == 5 && code[pc + 3] >= 0 && code[pc + 4] >= 1 && code[pc + 4] <= 64 &&
                   col_is(k, code[pc + 2], K_FIXED, code[pc + 4]);
        case OP_ENUM:
            return size >= 4 && code[pc + 3] >= 0 && size == 4 + (int64_t)code[pc + 3] &&
                   col_is(k, code[pc + 2], K_INT32, -1);
        case OP_RECORD: case OP_SKIP_RECORD: {
            int64_t at = pc + (op == OP_RECORD ? 3 : 2);
            if (at > end || (op == OP_RECORD && !col_is(k, code[pc + 2], K_STRUCT, -1))) return 0;
            while (at < end) {
                if (!verify(k, at, end, depth + 1)) return 0;
                at += code[at + 1];
            }
            return at == end;
        }
        case OP_ARRAY: case OP_MAP: case OP_SKIP_ARRAY: case OP_SKIP_MAP: {
            int writes = op == OP_ARRAY || op == OP_MAP;
            int64_t head = pc + 2 + (writes ? 1 : 0) + (op == OP_MAP ? 1 : 0);
            if (head + 1 >= end || code[head] < 0) return 0;
            if (op == OP_ARRAY && (!col_is(k, code[pc + 2], K_LIST, -1) || k->cols[code[pc + 2]].nchildren != 1))
                return 0;
            if (op == OP_MAP) { /* the key is the map's first column of two, a binary one */
                const Col *m = col_is(k, code[pc + 2], K_MAP, -1) ? &k->cols[code[pc + 2]] : NULL;
                if (m == NULL || m->nchildren != 2 || k->child_index[m->first_child] != code[pc + 3] ||
                    !col_is(k, code[pc + 3], K_BINARY, -1))
                    return 0;
            }
            return verify(k, head + 1, end, depth + 1) && head + 1 + code[head + 2] == end;
        }
        case OP_UNION: {
            if (pc + 3 > end) return 0; /* the branch count is within the node before it is read */
            int64_t branches = code[pc + 2];
            if (branches < 0 || size < 3 + branches) return 0;
            for (int64_t b = 0; b < branches; b++) {
                int64_t at = pc + code[pc + 3 + b];
                if (at < pc + 3 + branches || !verify(k, at, end, depth + 1)) return 0;
            }
            return 1;
        }
        case OP_PICK: /* the member must be one of the union's columns: the others get nulls */
            return size > 4 && col_is(k, code[pc + 2], K_STRUCT, -1) && is_child(k, code[pc + 2], code[pc + 3]) &&
                   verify(k, pc + 4, end, depth + 1) && 4 + code[pc + 5] == size;
        case OP_INLINE: {
            int64_t n = pc + 2 < end ? code[pc + 2] : -1;
            if (n < 0 || n > end - pc - 5) return 0;
            for (int64_t i = 0; i < n; i++)
                if (code[pc + 3 + i] < 0 || code[pc + 3 + i] > 0xff) return 0;
            return verify(k, pc + 3 + n, end, depth + 1) && pc + 3 + n + code[pc + 4 + n] == end;
        }
        case OP_SKIP_NOTHING: case OP_SKIP_BOOLEAN: case OP_SKIP_VARINT: case OP_SKIP_4: case OP_SKIP_8:
        case OP_SKIP_BYTES:
            return size == 2;
        case OP_SKIP_FIXED:
            return size == 3 && code[pc + 2] >= 0;
        default:
            return 0;
    }
}

/* -- the module function -------------------------------------------------------------------------- */

typedef struct {
    Py_ssize_t index;
    char reason[REASON_SIZE];
} Bad;

static void free_cols(Col *cols, int ncols) {
    if (cols == NULL) return;
    for (int i = 0; i < ncols; i++) {
        PyMem_RawFree(cols[i].valid.p);
        PyMem_RawFree(cols[i].data.p);
        PyMem_RawFree(cols[i].offsets.p);
    }
    PyMem_RawFree(cols);
}

static PyObject *bytes_or_none(const uint8_t *p, size_t n) {
    return PyBytes_FromStringAndSize(n ? (const char *)p : "", (Py_ssize_t)n);
}

static PyObject *column_tuple(Col *c) {
    if (c->kind == K_CONST) return Py_BuildValue("(iiOOO)", 0, 0, Py_None, Py_None, Py_None);
    if (c->kind == K_NULL) return Py_BuildValue("(nnOOO)", (Py_ssize_t)c->length, (Py_ssize_t)c->length, Py_None,
                                                Py_None, Py_None);
    PyObject *validity = Py_None, *one = Py_None, *two = Py_None;
    Py_INCREF(Py_None);
    Py_INCREF(Py_None);
    Py_INCREF(Py_None);
    if (c->nulls) {
        size_t bytes = (c->length + 7) / 8;
        if (c->length % 8) c->valid.p[bytes - 1] &= (uint8_t)((1u << (c->length % 8)) - 1);
        Py_DECREF(validity);
        validity = bytes_or_none(c->valid.p, bytes);
    }
    if (c->kind == K_BINARY || c->kind == K_LIST || c->kind == K_MAP) {
        Py_DECREF(one);
        one = bytes_or_none(c->offsets.p, c->offsets.len);
        if (c->kind == K_BINARY) {
            Py_DECREF(two);
            two = bytes_or_none(c->data.p, c->data.len);
        }
    } else if (c->kind != K_STRUCT) {
        Py_DECREF(one);
        one = bytes_or_none(c->data.p, c->data.len);
    }
    PyObject *out = NULL;
    if (validity && one && two) out = Py_BuildValue("(nnOOO)", (Py_ssize_t)c->length, (Py_ssize_t)c->nulls, validity, one, two);
    Py_XDECREF(validity);
    Py_XDECREF(one);
    Py_XDECREF(two);
    return out;
}

static int32_t *read_code(PyObject *obj, Py_ssize_t *n) {
    PyObject *seq = PySequence_Fast(obj, "code must be a sequence of ints");
    if (seq == NULL) return NULL;
    *n = PySequence_Fast_GET_SIZE(seq);
    if (*n >= INT32_MAX / 2) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "code too long");
        return NULL;
    }
    int32_t *code = PyMem_Malloc(sizeof(int32_t) * (size_t)(*n + 1));
    if (code == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < *n; i++) {
        long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
        if (v == -1 && PyErr_Occurred()) goto fail;
        if (v < INT32_MIN || v > INT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "code holds an int beyond 32 bits");
            goto fail;
        }
        code[i] = (int32_t)v;
    }
    Py_DECREF(seq);
    return code;
fail:
    Py_DECREF(seq);
    PyMem_Free(code);
    return NULL;
}

/* the columns of the layout ((kind, parent, width) each, a parent before its children), with each
 * column's children listed in child_index */
static Col *read_layout(PyObject *obj, int *ncols, int **child_index) {
    PyObject *seq = PySequence_Fast(obj, "layout must be a sequence of (kind, parent, width)");
    if (seq == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    Col *cols = NULL;
    int *parents = NULL, *children = NULL, *depths = NULL;
    if (n < 1 || n > 1000000) {
        PyErr_SetString(PyExc_ValueError, "layout must hold 1 to 1000000 columns");
        goto fail;
    }
    cols = PyMem_RawCalloc((size_t)n, sizeof(Col));
    parents = PyMem_Calloc((size_t)n, sizeof(int));
    depths = PyMem_Calloc((size_t)n, sizeof(int));
    children = PyMem_RawCalloc((size_t)n, sizeof(int));
    if (cols == NULL || parents == NULL || children == NULL || depths == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        int kind, parent, width;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "iii;layout entries are (kind, parent, width)",
                              &kind, &parent, &width))
            goto fail;
        if (kind < K_NULL || kind > K_CONST || parent < -1 || parent >= i || width < 0 || width > MAX_WIDTH) {
            PyErr_Format(PyExc_ValueError, "invalid layout entry %zd", i);
            goto fail;
        }
        depths[i] = parent >= 0 ? depths[parent] + 1 : 1;
        if (depths[i] > MAX_LAYOUT_DEPTH) {
            PyErr_Format(PyExc_ValueError, "layout nests columns deeper than %d", MAX_LAYOUT_DEPTH);
            goto fail;
        }
        cols[i].kind = kind;
        cols[i].width = width;
        parents[i] = parent;
        if (parent >= 0) cols[parent].nchildren++;
    }
    /* children of each column, in order: counting sort by parent */
    int at = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        cols[i].first_child = at;
        at += cols[i].nchildren;
        cols[i].nchildren = 0;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        int p = parents[i];
        if (p >= 0) children[cols[p].first_child + cols[p].nchildren++] = (int)i;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        int k = cols[i].kind;
        if (k == K_BINARY || k == K_LIST || k == K_MAP) {
            int32_t zero = 0;
            if (buf_put(&cols[i].offsets, &zero, 4) != OK) {
                PyErr_NoMemory();
                goto fail;
            }
        }
    }
    PyMem_Free(parents);
    PyMem_Free(depths);
    Py_DECREF(seq);
    *ncols = (int)n;
    *child_index = children;
    return cols;
fail:
    free_cols(cols, (int)n);
    PyMem_Free(parents);
    PyMem_Free(depths);
    PyMem_RawFree(children);
    Py_DECREF(seq);
    return NULL;
}

static PyObject *py_decode(PyObject *self, PyObject *args) {
    PyObject *values_obj, *code_obj, *layout_obj;
    Py_ssize_t start, ncode = 0, piece_bytes = (Py_ssize_t)MAX_PIECE_OUTPUT;
    (void)self;
    if (!PyArg_ParseTuple(args, "OnOO|n:decode", &values_obj, &start, &code_obj, &layout_obj, &piece_bytes))
        return NULL;
    if (start < 0) {
        PyErr_SetString(PyExc_ValueError, "start must not be negative");
        return NULL;
    }
    if (piece_bytes < 1) {
        PyErr_SetString(PyExc_ValueError, "piece_bytes must be positive");
        return NULL;
    }
    PyObject *values = NULL, *result = NULL, *columns = NULL, *bad_list = NULL;
    int32_t *code = NULL;
    uint8_t *pool = NULL;
    Col *cols = NULL;
    int ncols = 0, *child_index = NULL;
    const uint8_t **ptrs = NULL;
    size_t *lens = NULL;
    Py_buffer *views = NULL;
    Py_ssize_t nviews = 0, n = 0;
    Bad *bads = NULL;
    size_t nbad = 0, bad_cap = 0;
    int failed = OK;

    if ((code = read_code(code_obj, &ncode)) == NULL) goto done;
    if ((cols = read_layout(layout_obj, &ncols, &child_index)) == NULL) goto done;
    Check check = {code, ncols, cols, child_index};
    if (ncode < 2 || !verify(&check, 0, ncode, 0) || code[1] != ncode) {
        PyErr_SetString(PyExc_ValueError, "malformed decoding program");
        goto done;
    }
    if ((pool = PyMem_RawMalloc((size_t)ncode + 1)) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < ncode; i++) pool[i] = (uint8_t)code[i]; /* verify() saw INLINE's bytes in 0-255 */
    /* a tuple of its own (a list's items copied, each referenced): the values stay alive while the
       GIL is released, whatever another thread does to the caller's list meanwhile */
    if ((values = PySequence_Tuple(values_obj)) == NULL) goto done;
    n = PySequence_Fast_GET_SIZE(values);
    ptrs = PyMem_Calloc((size_t)n + 1, sizeof(*ptrs));
    lens = PyMem_Calloc((size_t)n + 1, sizeof(*lens));
    views = PyMem_Calloc((size_t)n + 1, sizeof(*views));
    if (ptrs == NULL || lens == NULL || views == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PySequence_Fast_GET_ITEM(values, i);
        if (PyBytes_Check(v)) {
            ptrs[i] = (const uint8_t *)PyBytes_AS_STRING(v);
            lens[i] = (size_t)PyBytes_GET_SIZE(v);
        } else {
            if (PyObject_GetBuffer(v, &views[nviews], PyBUF_SIMPLE) != 0) goto done;
            ptrs[i] = views[nviews].buf;
            lens[i] = (size_t)views[nviews].len;
            nviews++;
        }
    }

    Mark *marks = PyMem_Calloc((size_t)ncols, sizeof(Mark));
    if (marks == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Decoder d = {code, pool, cols, ncols, child_index, NULL, 0, 0, 0, 0, (size_t)piece_bytes, (size_t)piece_bytes, 0, {0}};
    Py_ssize_t stop = n;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n && failed == OK; i++) {
        size_t piece_room = d.piece_room;
        for (int k = 0; k < ncols; k++) {
            marks[k].length = cols[k].length;
            marks[k].nulls = cols[k].nulls;
            marks[k].data = cols[k].data.len;
            marks[k].offsets = cols[k].offsets.len;
        }
        int rc;
        if (lens[i] < (size_t)start) {
            rc = bad(&d, "value shorter than %zd bytes", start);
        } else {
            d.buf = ptrs[i];
            d.end = lens[i];
            d.budget = MAX_EMPTY_ITEMS;
            d.value_limit = lens[i] >= (MAX_VALUE_OUTPUT - OUTPUT_SLACK) / OUTPUT_PER_BYTE
                                ? MAX_VALUE_OUTPUT
                                : OUTPUT_SLACK + OUTPUT_PER_BYTE * lens[i];
            d.room = d.value_limit;
            size_t pos = (size_t)start;
            rc = run(&d, 0, &pos);
            if (rc == OK && pos != d.end) rc = bad(&d, "%zu bytes left after the record", d.end - pos);
        }
        if (rc == OK) {
            d.piece_rows++;
            continue;
        }
        if (rc == NOMEM) {
            failed = NOMEM;
            break;
        }
        for (int k = 0; k < ncols; k++) {
            cols[k].length = marks[k].length;
            cols[k].nulls = marks[k].nulls;
            cols[k].data.len = marks[k].data;
            cols[k].offsets.len = marks[k].offsets;
        }
        d.piece_room = piece_room;
        if (rc == SPLIT) { /* the piece ends before this value: the caller decodes from it again */
            stop = i;
            break;
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
    PyMem_Free(marks);
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
    PyObject *stop_obj = PyLong_FromSsize_t(stop);
    if (stop_obj == NULL) goto done;
    result = PyTuple_Pack(3, columns, bad_list, stop_obj);
    Py_DECREF(stop_obj);
done:
    for (Py_ssize_t i = 0; i < nviews; i++) PyBuffer_Release(&views[i]);
    PyMem_Free(views);
    PyMem_Free(ptrs);
    PyMem_Free(lens);
    PyMem_RawFree(bads);
    PyMem_Free(code);
    PyMem_RawFree(pool);
    free_cols(cols, ncols);
    PyMem_RawFree(child_index);
    Py_XDECREF(values);
    Py_XDECREF(columns);
    Py_XDECREF(bad_list);
    return result;
}

static PyMethodDef methods[] = {
    {"decode", py_decode, METH_VARARGS, "See kafkalog.schemas._avro_columns_py.decode."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_avro_columns", "The C kernel of Avro decoding into columns.", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__avro_columns(void) { return PyModule_Create(&module); }
