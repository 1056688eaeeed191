"""Chooses the implementation of the record kernels: the C one when built, else pure Python.

Set KAFKALOG_PURE_PYTHON=1 to force the pure-Python kernels (tests do, to compare the two).
"""

from __future__ import annotations

import os
from types import ModuleType

from kafkalog.record import _fastpath
from kafkalog.record.message import Message, TimestampType


def _load() -> tuple[ModuleType, bool, str]:
    if os.environ.get("KAFKALOG_PURE_PYTHON") == "1":
        return _fastpath, False, "KAFKALOG_PURE_PYTHON=1"
    try:
        from kafkalog.record import _speedups  # noqa: PLC0415 - optional: absent when not compiled
    except ImportError as exc:
        return _fastpath, False, f"the C kernels did not import: {exc}"
    return _speedups, True, ""


implementation, NATIVE, WHY_PURE = _load()
"""The module whose decode_plain / scan_entries / assign_plain the record layer calls; whether it is
the C one; if not, why."""

KERNELS = "C" if NATIVE else "pure Python"
"""Which record kernels this process runs, as brokers, jobs and tasks log it."""


def describe() -> str:
    """One line for a log: which kernels run here, and why not the C ones if they do not."""
    return f"record kernels: {KERNELS}" + (f" ({WHY_PURE})" if WHY_PURE else "")


for _module in {implementation, _fastpath}:
    _module.configure(Message, TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME)

decode_plain = implementation.decode_plain
scan_entries = implementation.scan_entries
assign_plain = implementation.assign_plain
# magic 2 batches and records (kafkalog.record.batch_format)
crc32c = implementation.crc32c
decode_records = implementation.decode_records
check_records = implementation.check_records
encode_records = implementation.encode_records
batch_timestamps = implementation.batch_timestamps
assign_batches = implementation.assign_batches
# the log cleaner's (kafkalog.record._fastpath_compact: the offset map's layout, what stays)
map_get = implementation.map_get
map_put_records = implementation.map_put_records
map_put_batches = implementation.map_put_batches
filter_records = implementation.filter_records
filter_batches = implementation.filter_batches
