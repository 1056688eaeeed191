"""Chooses the implementation of the record kernels: the C one when built, else pure Python.

Set KAFKALOG_PURE_PYTHON=1 to force the pure-Python kernels (tests do, to compare the two).
"""

from __future__ import annotations

import os
from types import ModuleType

from kafkalog.record import _fastpath
from kafkalog.record.format import Message, TimestampType


def _load() -> tuple[ModuleType, bool]:
    if os.environ.get("KAFKALOG_PURE_PYTHON") == "1":
        return _fastpath, False
    try:
        from kafkalog.record import _speedups  # noqa: PLC0415 - optional: absent when not compiled
    except ImportError:
        return _fastpath, False
    return _speedups, True


implementation, NATIVE = _load()
"""The module whose decode_plain / scan_entries / assign_plain the record layer calls."""

for _module in {implementation, _fastpath}:
    _module.configure(Message, TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME)

decode_plain = implementation.decode_plain
scan_entries = implementation.scan_entries
assign_plain = implementation.assign_plain
# magic 2 batches and records (kafkalog.record.batch)
crc32c = implementation.crc32c
decode_records = implementation.decode_records
encode_records = implementation.encode_records
