/*
 * The kernels of magic 2 records (kafkalog/record/batch_format.py has the layout): decode_records,
 * check_records, assign_batches, batch_timestamps, encode_records.
 */
#include "_speedups.h"

/* A magic 2 record: a message whose headers tuple is given (stolen). */
static PyObject *make_record(int64_t offset, int64_t ts, PyObject *ts_type, const unsigned char *key, int32_t key_len,
                             const unsigned char *value, int32_t value_len, PyObject *headers) {
    PyObject *m = speedups_make_message(offset, ts, ts_type, key, key_len, value, value_len);
    if (!m) { Py_DECREF(headers); return NULL; }
    Py_SETREF(((PyTupleObject *)m)->ob_item[5], headers);
    return m;
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
PyObject *speedups_py_decode_records(PyObject *self, PyObject *args) {
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
    PyObject *ts_type = log_append ? speedups_log_append_time : speedups_create_time;
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
PyObject *speedups_py_check_records(PyObject *self, PyObject *args) {
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
PyObject *speedups_py_assign_batches(PyObject *self, PyObject *args) {
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
        if (speedups_crc32c_of(p + BATCH_ATTRIBUTES_POS, size - BATCH_ATTRIBUTES_POS) != rd_u32(p + BATCH_CRC_POS)) break;
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
        PyObject *checked = speedups_py_check_records(NULL, check_args);
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
            wr_u32(p + BATCH_CRC_POS, speedups_crc32c_of(p + BATCH_ATTRIBUTES_POS, size - BATCH_ATTRIBUTES_POS));
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
PyObject *speedups_py_batch_timestamps(PyObject *self, PyObject *args) {
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
PyObject *speedups_py_encode_records(PyObject *self, PyObject *args) {
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
