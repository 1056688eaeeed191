/*
 * The kernels of message format v0/v1 (magic 0 and 1) entries: decode_plain and assign_plain
 * (kafkalog/record/legacy_format.py has the layout).
 */
#include "_speedups.h"

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

/* decode_plain(buf, pos, stop, verify_crc, min_offset, required_magic, max_count) -> (list, pos, error) */
PyObject *speedups_py_decode_plain(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos, stop;
    int verify_crc, required_magic;
    long long min_offset;
    Py_ssize_t max_count, count = 0;
    if (!PyArg_ParseTuple(args, "y*nnpLin", &view, &pos, &stop, &verify_crc, &min_offset, &required_magic,
                          &max_count))
        return NULL;
    if (speedups_create_time == NULL) {
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
            error = speedups_error_triple("corrupt", pos, PyUnicode_FromString("CRC mismatch"));
            if (!error) goto fail;
            break;
        }
        Py_ssize_t value_pos = 0;
        int32_t value_len = 0;
        int ok;
        PyObject *reason = check_lengths(b, key_pos, end, key_len, &value_pos, &value_len, &ok);
        if (!ok) {
            error = speedups_error_triple("corrupt", pos, reason);
            if (!error) goto fail;
            break;
        }
        if (offset >= min_offset) {
            PyObject *ts_type = (magic == 1 && (attributes & TS_TYPE_BIT)) ? speedups_log_append_time : speedups_create_time;
            PyObject *m = speedups_make_message(offset, ts, ts_type, b + key_pos, key_len, b + value_pos, value_len);
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

/* assign_plain(buf, pos, stop, next_offset, max_entry_bytes, now_ms, log_append_time, index_interval,
 *              bytes_since_index) -> (pos, next_offset, max_ts, offset_of_max, points, since, error) */
PyObject *speedups_py_assign_plain(PyObject *self, PyObject *args) {
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
            error = speedups_error_triple("corrupt", pos,
                PyUnicode_FromFormat("message size %d is below the magic 1 minimum", (int)size));
            if (!error) goto fail;
            break;
        }
        if (end - pos > max_entry) {
            error = speedups_error_triple("too_large", pos,
                PyUnicode_FromFormat("message of %zd bytes is larger than the limit of %zd", end - pos, max_entry));
            if (!error) goto fail;
            break;
        }
        if (crc_of(b + pos + MAGIC_POS, end - pos - MAGIC_POS) != crc) {
            error = speedups_error_triple("corrupt", pos, PyUnicode_FromString("CRC mismatch"));
            if (!error) goto fail;
            break;
        }
        Py_ssize_t value_pos;
        int32_t value_len;
        int ok;
        PyObject *reason = check_lengths(b, pos + V1_MIN - 4, end, key_len, &value_pos, &value_len, &ok);
        if (!ok) {
            error = speedups_error_triple("corrupt", pos, reason);
            if (!error) goto fail;
            break;
        }
        if (ts < -1) {
            error = speedups_error_triple("timestamp", pos,
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
            if (speedups_add_point(points, pos, next_offset, max_ts, offset_of_max) < 0) goto fail;
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
