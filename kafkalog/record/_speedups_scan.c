/*
 * scan_entries: a shallow walk over whole entries of every magic (v0/v1 messages and magic 2
 * batches): sizes, magics, CRCs, rising offsets, timestamps and index points, nothing decoded.
 */
#include "_speedups.h"

/* scan_entries(buf, pos, stop, verify_crc, min_next_offset, index_interval, bytes_since_index)
 *   -> (pos, entries, last_offset, max_ts, offset_of_max, points, bytes_since_index, error) */
PyObject *speedups_py_scan_entries(PyObject *self, PyObject *args) {
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
            error = speedups_error_triple("corrupt", pos, PyUnicode_FromFormat("message size %d is below the minimum", (int)size));
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
                error = speedups_error_triple("corrupt", pos,
                    PyUnicode_FromFormat("record batch length %d is below the magic 2 minimum", (int)size));
                if (!error) goto fail;
                break;
            }
            int32_t last_delta = rd_i32(b + pos + BATCH_LAST_DELTA_POS);
            if (last_delta < 0) {
                error = speedups_error_triple("corrupt", pos,
                    PyUnicode_FromFormat("record batch last offset delta %d is negative", (int)last_delta));
                if (!error) goto fail;
                break;
            }
            if (verify_crc &&
                speedups_crc32c_of(b + pos + BATCH_ATTRIBUTES_POS, end - pos - BATCH_ATTRIBUTES_POS) != rd_u32(b + pos + BATCH_CRC_POS)) {
                error = speedups_error_triple("corrupt", pos, PyUnicode_FromString("CRC-32C mismatch"));
                if (!error) goto fail;
                break;
            }
            ts = rd_i64(b + pos + BATCH_MAX_TS_POS);
            last = offset + last_delta;
        } else if (magic == 1) {
            if (size < V1_MIN - 12) {
                error = speedups_error_triple("corrupt", pos,
                    PyUnicode_FromFormat("message size %d is below the magic 1 minimum", (int)size));
                if (!error) goto fail;
                break;
            }
            ts = rd_i64(b + pos + 18);
        } else if (magic == 0) {
            ts = -1;
        } else {
            error = speedups_error_triple("corrupt", pos, PyUnicode_FromFormat("unknown magic byte %d", (int)magic));
            if (!error) goto fail;
            break;
        }
        if (magic < 2 && verify_crc && crc_of(b + pos + MAGIC_POS, end - pos - MAGIC_POS) != crc) {
            error = speedups_error_triple("corrupt", pos, PyUnicode_FromString("CRC mismatch"));
            if (!error) goto fail;
            break;
        }
        if (offset < floor) {
            error = speedups_error_triple("corrupt", pos,
                PyUnicode_FromFormat("offset %lld is not above the previous offset %lld",
                                     (long long)offset, floor - 1));
            if (!error) goto fail;
            break;
        }
        /* a magic 2 batch counts by its last offset, as a v0/v1 wrapper stores it */
        if (ts > max_ts) { max_ts = ts; offset_of_max = last; }
        if (since >= index_interval) {
            if (speedups_add_point(points, pos, last, max_ts, offset_of_max) < 0) goto fail;
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

