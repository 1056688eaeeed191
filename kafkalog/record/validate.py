"""Checking a producer's message set and assigning its offsets, before it is appended to a log.

A log stores one message format (a topic setting): magic 2 record batches (the default;
``kafkalog.record.batch_validate``), or magic 1 message sets (``kafkalog.record.legacy_validate``).
This is the one entry point a log calls; it hands the data to the module of the log's format, and
each accepts what any producer sends (every magic), converting it to the format the log stores.
"""

from __future__ import annotations

from kafkalog.record import batch_format as batches
from kafkalog.record.batch_validate import validate_batches_for_append
from kafkalog.record.codec import DEFAULT_MAX_DECOMPRESSED_BYTES
from kafkalog.record.legacy_validate import validate_message_set_for_append
from kafkalog.record.validated import ValidatedSet

MESSAGE_FORMATS = (1, 2)
"""What a log may store: magic 1 message sets, or magic 2 record batches (the default)."""


def validate_for_append(
    data: bytes | bytearray | memoryview,
    next_offset: int,
    *,
    now_ms: int,
    log_append_time: bool = False,
    max_message_bytes: int = 1_000_012,
    index_interval_bytes: int = 4096,
    bytes_since_index: int = 0,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
    message_format: int = 1,
) -> ValidatedSet:
    """Check every message of ``data`` and assign offsets from ``next_offset``, for a log that
    stores ``message_format`` (1 or 2).

    Raises CorruptRecordError (bad size, CRC, magic, lengths, codec payload, a partial trailing
    message), RecordTooLargeError (an entry over ``max_message_bytes``, or a payload expanding
    beyond ``max_decompressed_bytes``) or InvalidTimestampError. Nothing is half-applied: on error
    the caller appends nothing.
    """
    if message_format == batches.MAGIC:
        return validate_batches_for_append(
            data, next_offset, now_ms=now_ms, log_append_time=log_append_time, max_message_bytes=max_message_bytes,
            index_interval_bytes=index_interval_bytes, bytes_since_index=bytes_since_index,
            max_decompressed_bytes=max_decompressed_bytes,
        )  # fmt: skip
    if message_format != 1:
        raise ValueError(f"message format must be one of {MESSAGE_FORMATS}, not {message_format}")
    return validate_message_set_for_append(
        data, next_offset, now_ms=now_ms, log_append_time=log_append_time, max_message_bytes=max_message_bytes,
        index_interval_bytes=index_interval_bytes, bytes_since_index=bytes_since_index,
        max_decompressed_bytes=max_decompressed_bytes,
    )  # fmt: skip


__all__ = ["MESSAGE_FORMATS", "ValidatedSet", "validate_for_append"]
