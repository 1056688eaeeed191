"""Checking a producer's message set and assigning its offsets, for a log that stores magic 1
message sets (``kafkalog.record.validate`` chooses this or ``batch_validate`` by the log's format).

What a magic 1 log stores is always magic 1 with a timestamp on every message, so that time lookups
and time retention work for every message:
- uncompressed magic 1 entries are checked (size, CRC, key/value lengths, timestamp) and get their
  offsets in place; a message without a timestamp (-1), or every message when the log uses
  log-append time, is stamped with the append time and marked LogAppendTime (CRC rewritten);
- magic 0 entries (old clients) are converted to magic 1, stamped with the append time;
- a compressed wrapper is opened and every inner message checked. When its inner offsets are
  already 0..n-1 (what magic 1 producers send) only the wrapper header changes: its offset becomes
  that of the last inner message and its timestamp the largest inner one (or the append time).
  Otherwise (magic 0 wrappers, odd inner offsets) the inner set is rebuilt and recompressed;
- a magic 2 batch (a current client) is down-converted: to plain entries, or one wrapper of its
  codec. Headers and zstd have no place in magic 1: such a batch is refused
  (UNSUPPORTED_FOR_MESSAGE_FORMAT, UNSUPPORTED_COMPRESSION_TYPE), as Kafka refuses them.
"""

from __future__ import annotations

import zlib

from kafkalog.errors import (
    CorruptRecordError,
    InvalidTimestampError,
    RecordTooLargeError,
    UnsupportedCodecError,
    UnsupportedForMessageFormatError,
)
from kafkalog.record import batch_format as batches
from kafkalog.record import kernels
from kafkalog.record.legacy_builder import MessageSetBuilder, encode_message, frame
from kafkalog.record.legacy_format import ATTRIBUTES_POS, CRC_POS, INT64, MAGIC_POS, TIMESTAMP_POS, UINT32
from kafkalog.record.message import CODEC_MASK, NO_TIMESTAMP, TIMESTAMP_TYPE_MASK, Codec, Entry, Message, TimestampType
from kafkalog.record.reader import corrupt_at, decode_inner, iter_entries, open_wrapper
from kafkalog.record.validated import ValidatedSet


def validate_message_set_for_append(
    data: bytes | bytearray | memoryview,
    next_offset: int,
    *,
    now_ms: int,
    log_append_time: bool,
    max_message_bytes: int,
    index_interval_bytes: int,
    bytes_since_index: int,
    max_decompressed_bytes: int,
) -> ValidatedSet:
    """Check every message of ``data`` and assign offsets from ``next_offset``; the result holds
    magic 1 entries only. Raises as ``validate.validate_for_append``; nothing is half-applied."""
    buf = bytearray(data)
    if not buf:
        raise CorruptRecordError("message set is empty")
    stop = len(buf)
    first_offset = next_offset
    # The common case (uncompressed magic 1, as current clients send) is this one kernel call.
    pos, next_offset, max_ts, offset_of_max, points, bytes_since_index, error = kernels.assign_plain(
        buf, 0, stop, next_offset, max_message_bytes, now_ms, log_append_time, index_interval_bytes, bytes_since_index
    )
    if error is not None:
        raise _error_for(buf, error)
    if pos == stop:
        return ValidatedSet(buf, first_offset, next_offset, max_ts, offset_of_max, points, bytes_since_index)
    # Otherwise: alternate between entries the kernel cannot handle and runs it can.
    view = memoryview(buf)
    out: list[bytes | bytearray | memoryview] = [view[:pos]]
    out_size = pos
    while pos < stop:
        entry = _whole_entry(view, pos, stop)
        if entry.size > max_message_bytes:
            raise RecordTooLargeError(
                f"message of {entry.size} bytes at offset {next_offset} is larger than the limit of {max_message_bytes}"
            )
        rewritten: bytes | memoryview
        if entry.magic == batches.MAGIC:
            rewritten, count, entry_ts = _batch_as_magic_1(
                view, entry, next_offset, now_ms, log_append_time, max_decompressed_bytes
            )
        elif entry.attributes & CODEC_MASK:
            rewritten, count, entry_ts = _wrapper_for_log(
                view, entry, next_offset, now_ms, log_append_time, max_decompressed_bytes
            )
        else:
            rewritten, count, entry_ts = _upconvert_plain(view, entry, next_offset, now_ms)
        last_offset = next_offset + count - 1
        if entry_ts > max_ts:
            max_ts, offset_of_max = entry_ts, last_offset
        if bytes_since_index >= index_interval_bytes:
            points.append((out_size, last_offset, max_ts, offset_of_max))
            bytes_since_index = 0
        bytes_since_index += len(rewritten)
        out.append(rewritten)
        out_size += len(rewritten)
        next_offset += count
        pos = entry.end
        run_start = pos
        pos, next_offset, run_max, run_max_offset, run_points, bytes_since_index, error = kernels.assign_plain(
            buf, pos, stop, next_offset, max_message_bytes, now_ms, log_append_time,
            index_interval_bytes, bytes_since_index,
        )  # fmt: skip
        if error is not None:
            raise _error_for(buf, error)
        shift = out_size - run_start
        for point_pos, point_offset, point_max, point_max_offset in run_points:
            if point_max > max_ts:
                max_ts, offset_of_max = point_max, point_max_offset
            points.append((point_pos + shift, point_offset, max_ts, offset_of_max))
        if run_max > max_ts:
            max_ts, offset_of_max = run_max, run_max_offset
        out.append(view[run_start:pos])
        out_size += pos - run_start
    return ValidatedSet(b"".join(out), first_offset, next_offset, max_ts, offset_of_max, points, bytes_since_index)


def _error_for(buf: bytearray, error: tuple[str, int, str]) -> Exception:
    kind, _, reason = error
    if kind == "too_large":
        return RecordTooLargeError(reason)
    if kind == "timestamp":
        return InvalidTimestampError(reason)
    return corrupt_at(buf, error)


def _whole_entry(view: memoryview, pos: int, stop: int) -> Entry:
    for entry in iter_entries(view, start=pos, end=stop):
        return entry
    raise CorruptRecordError("message set ends inside a message", position=pos)


def _check_timestamps(messages: list[Message], entry: Entry) -> None:
    for message in messages:
        if message.timestamp < NO_TIMESTAMP:
            raise InvalidTimestampError(
                f"timestamp {message.timestamp} of a message in the compressed set at byte {entry.position} "
                "is negative and not -1 (none)"
            )


def _upconvert_plain(view: memoryview, entry: Entry, offset: int, now_ms: int) -> tuple[bytes, int, int]:
    """A magic 0 uncompressed entry, as a magic 1 entry stamped with the append time."""
    (message,) = decode_inner(view[entry.position : entry.end], 0)
    attributes = TimestampType.LOG_APPEND_TIME << 3
    encoded = encode_message(magic=1, attributes=attributes, timestamp=now_ms, key=message.key, value=message.value)
    return frame(offset, encoded), 1, now_ms


def _wrapper_for_log(
    view: memoryview, entry: Entry, first_offset: int, now_ms: int, log_append_time: bool, max_decompressed: int
) -> tuple[bytes | memoryview, int, int]:
    """A compressed entry ready for the log: (bytes, inner message count, wrapper timestamp)."""
    inner = open_wrapper(view, entry, max_decompressed_bytes=max_decompressed)
    _check_timestamps(inner, entry)
    count = len(inner)
    last_offset = first_offset + count - 1
    largest_inner = max(m.timestamp for m in inner) if entry.magic == 1 else NO_TIMESTAMP
    stamp = log_append_time or largest_inner == NO_TIMESTAMP
    wrapper_ts = now_ms if stamp else largest_inner
    if entry.magic == 1 and all(m.offset == i for i, m in enumerate(inner)):
        # Inner offsets already relative: only the wrapper's header changes, in place.
        data = view[entry.position : entry.end]
        INT64.pack_into(data, 0, last_offset)
        # The timestamp type is the log's decision, whatever bit the producer set.
        attributes = (data[ATTRIBUTES_POS] & ~TIMESTAMP_TYPE_MASK) | (TIMESTAMP_TYPE_MASK if stamp else 0)
        if data[ATTRIBUTES_POS] != attributes or INT64.unpack_from(data, TIMESTAMP_POS)[0] != wrapper_ts:
            data[ATTRIBUTES_POS] = attributes
            INT64.pack_into(data, TIMESTAMP_POS, wrapper_ts)
            UINT32.pack_into(data, CRC_POS, zlib.crc32(data[MAGIC_POS:]))
        return data, count, wrapper_ts
    builder = MessageSetBuilder(
        magic=1,
        codec=entry.codec,
        base_offset=first_offset,
        timestamp_type=TimestampType.LOG_APPEND_TIME if stamp else TimestampType.CREATE_TIME,
    )
    for message in inner:
        builder.append(message.value, message.key, now_ms if stamp else message.timestamp)
    return builder.build(), count, wrapper_ts


def _batch_as_magic_1(
    view: memoryview, entry: Entry, first_offset: int, now_ms: int, log_append_time: bool, max_decompressed: int
) -> tuple[bytes, int, int]:
    """A produced magic 2 batch, for a magic 1 log: (bytes, record count, largest timestamp)."""
    header, records = batches.decode_batch(view, entry.position, end=entry.end, max_decompressed=max_decompressed)
    if any(record.headers for record in records):
        raise UnsupportedForMessageFormatError(
            "records with headers need message format v2; this topic stores v1 (message.format.version)"
        )
    if header.codec == Codec.ZSTD:
        raise UnsupportedCodecError("zstd needs message format v2; this topic stores v1")
    _check_timestamps(records, entry)
    stamp = log_append_time or header.timestamp_type == TimestampType.LOG_APPEND_TIME
    stamp = stamp or any(record.timestamp == NO_TIMESTAMP for record in records)
    builder = MessageSetBuilder(
        magic=1,
        codec=header.codec,
        base_offset=first_offset,
        timestamp_type=TimestampType.LOG_APPEND_TIME if stamp else TimestampType.CREATE_TIME,
    )
    for record in records:
        builder.append(record.value, record.key, now_ms if stamp else record.timestamp)
    largest = now_ms if stamp else max(record.timestamp for record in records)
    return builder.build(), len(records), largest


__all__ = ["validate_message_set_for_append"]
