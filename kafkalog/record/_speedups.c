/*
 * The extension module kafkalog.record._speedups: its method table and its initialisation. The
 * kernels live in the _speedups_*.c files that _speedups.h lists, one job each.
 */
#include "_speedups.h"

static PyMethodDef methods[] = {
    {"configure", speedups_py_configure, METH_VARARGS, "Set the message tuple type and the timestamp-type values."},
    {"decode_plain", speedups_py_decode_plain, METH_VARARGS, "See kafkalog.record._fastpath.decode_plain."},
    {"scan_entries", speedups_py_scan_entries, METH_VARARGS, "See kafkalog.record._fastpath.scan_entries."},
    {"assign_plain", speedups_py_assign_plain, METH_VARARGS, "See kafkalog.record._fastpath.assign_plain."},
    {"crc32c", speedups_py_crc32c, METH_VARARGS, "See kafkalog.record._fastpath.crc32c."},
    {"decode_records", speedups_py_decode_records, METH_VARARGS, "See kafkalog.record._fastpath.decode_records."},
    {"check_records", speedups_py_check_records, METH_VARARGS, "See kafkalog.record._fastpath.check_records."},
    {"encode_records", speedups_py_encode_records, METH_VARARGS, "See kafkalog.record._fastpath.encode_records."},
    {"batch_timestamps", speedups_py_batch_timestamps, METH_VARARGS, "See kafkalog.record._fastpath.batch_timestamps."},
    {"assign_batches", speedups_py_assign_batches, METH_VARARGS, "See kafkalog.record._fastpath.assign_batches."},
    {"map_get", speedups_py_map_get, METH_VARARGS, "See kafkalog.record._fastpath_compact.map_get."},
    {"map_put_records", speedups_py_map_put_records, METH_VARARGS, "See kafkalog.record._fastpath_compact.map_put_records."},
    {"map_put_batches", speedups_py_map_put_batches, METH_VARARGS, "See kafkalog.record._fastpath_compact.map_put_batches."},
    {"filter_records", speedups_py_filter_records, METH_VARARGS, "See kafkalog.record._fastpath_compact.filter_records."},
    {"filter_batches", speedups_py_filter_batches, METH_VARARGS, "See kafkalog.record._fastpath_compact.filter_batches."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_speedups", "C kernels of kafkalog.record.", -1, methods};

PyMODINIT_FUNC PyInit__speedups(void) {
    speedups_crc32c_init();
    return PyModule_Create(&module);
}
