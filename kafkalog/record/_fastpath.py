"""The three per-message kernels of the record layer, in pure Python.

This module is the reference: the C extension ``_speedups`` (``_speedups*.c``) implements the same
three functions with the same arguments and the same results, and ``kafkalog.record.kernels`` picks
the C version when it is built.
Tests feed both the same bytes and require equal results. Kernels never raise for bad data: they
stop and return an error triple ``(kind, position, reason)`` so that callers raise the right error
with context. ``kind`` is one of "corrupt", "too_large", "timestamp".

Only complete, uncompressed entries are handled here; whoever calls a kernel deals with what it
stopped at (compressed wrappers, other magics, a partial trailing entry).
"""

from __future__ import annotations

import struct
import zlib
from typing import Any, NamedTuple

from crc32c import crc32c as _crc32c

from kafkalog.record._fastpath_compact import (  # the log cleaner's kernels, kept in their own file
    filter_batches,
    filter_records,
    map_get,
    map_put_batches,
    map_put_records,
)

__all__ = ["filter_batches", "filter_records", "map_get", "map_put_batches", "map_put_records"]

ErrorTriple = tuple[str, int, str]
IndexPoints = list[tuple[int, int, int, int]]

_V0 = struct.Struct(">qiIbbi")  # offset, size, crc, magic, attributes, key length
_V1 = struct.Struct(">qiIbbqi")  # offset, size, crc, magic, attributes, timestamp, key length
_PREFIX = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")
_ATTR_TS = struct.Struct(">bq")

_V0_MIN = 26  # smallest complete entry of magic 0 (null key, null value)
_BATCH_MIN_LENGTH = 49  # magic 2: a batch's length field counts at least its own header's rest
_BATCH_CRC_POS = 17
_BATCH_ATTRIBUTES_POS = 21
_BATCH_LAST_DELTA_POS = 23
_BATCH_MAX_TS_POS = 35
_V1_MIN = 34
_MAGIC_POS = 16
_CODEC_MASK = 0x07
_TS_TYPE_BIT = 0x08

_message_type: Any = tuple
_create_time: Any = 0
_log_append_time: Any = 1


def crc32c(data: Any) -> int:
    """The CRC-32C (Castagnoli) of a bytes-like object: magic 2 batches carry it."""
    return int(_crc32c(data))


def configure(message_type: Any, create_time: Any, log_append_time: Any) -> None:
    """Set the tuple subclass that decode_plain builds and the two timestamp-type values."""
    global _message_type, _create_time, _log_append_time
    _message_type, _create_time, _log_append_time = message_type, create_time, log_append_time


def _check_lengths(view: memoryview, key_pos: int, end: int, key_length: int) -> tuple[int, int, str]:
    """Return (value_pos, value_length, "") or (0, 0, reason) when key/value lengths lie."""
    if key_length == -1:
        value_length_pos = key_pos
    elif 0 <= key_length <= end - key_pos - 4:
        value_length_pos = key_pos + key_length
    else:
        return 0, 0, f"key length {key_length} does not fit in the message"
    value_length = _I32.unpack_from(view, value_length_pos)[0]
    value_pos = value_length_pos + 4
    if (value_length == -1 and value_pos == end) or (value_length >= 0 and value_pos + value_length == end):
        return value_pos, value_length, ""
    return 0, 0, f"value length {value_length} does not match the message size"


def decode_plain(
    buf: Any, pos: int, stop: int, verify_crc: bool, min_offset: int, required_magic: int, max_count: int
) -> tuple[list[Any], int, ErrorTriple | None]:
    """Decode complete uncompressed entries of ``buf[pos:stop]`` into message tuples.

    Stops after ``max_count`` entries, or at a compressed entry, an entry of another magic than
    ``required_magic`` (-1: any), an unknown magic, a partial entry, or ``stop``; returns
    (messages, stop position, error). Messages with offset < ``min_offset`` are skipped (but
    counted).
    """
    view = memoryview(buf)
    out: list[Any] = []
    make = _message_type
    crc32 = zlib.crc32
    count = 0
    while stop - pos >= _V0_MIN and count < max_count:
        magic = view[pos + _MAGIC_POS]
        if required_magic not in (-1, magic) or magic > 1:
            break
        if magic == 1:
            if stop - pos < _V1_MIN:
                break
            offset, size, crc, _, attributes, timestamp, key_length = _V1.unpack_from(view, pos)
            key_pos = pos + _V1_MIN - 4
        else:
            offset, size, crc, _, attributes, key_length = _V0.unpack_from(view, pos)
            timestamp = -1
            key_pos = pos + _V0_MIN - 4
        end = pos + 12 + size
        if end > stop or key_pos + 4 > end or attributes & _CODEC_MASK:
            break
        if magic < 2 and verify_crc and crc32(view[pos + _MAGIC_POS : end]) != crc:
            return out, pos, ("corrupt", pos, "CRC mismatch")
        value_pos, value_length, reason = _check_lengths(view, key_pos, end, key_length)
        if reason:
            return out, pos, ("corrupt", pos, reason)
        if offset >= min_offset:
            key = None if key_length == -1 else bytes(view[key_pos : key_pos + key_length])
            value = None if value_length == -1 else bytes(view[value_pos:end])
            ts_type = _log_append_time if magic == 1 and attributes & _TS_TYPE_BIT else _create_time
            out.append(tuple.__new__(make, (offset, timestamp, ts_type, key, value, ())))
        count += 1
        pos = end
    return out, pos, None


def scan_entries(
    buf: Any, pos: int, stop: int, verify_crc: bool, min_next_offset: int, index_interval: int, bytes_since_index: int
) -> tuple[int, int, int, int, int, IndexPoints, int, ErrorTriple | None]:
    """Walk shallow entries of ``buf[pos:stop]`` (wrappers are not opened), validating each.

    Checks: a size possible for its magic, a known magic, the CRC (with ``verify_crc``), and offsets
    that rise strictly, the first one at least ``min_next_offset``. Records an index point
    ``(position, offset, max timestamp so far, offset of that max)`` at an entry when at least
    ``index_interval`` bytes passed since the last point (``bytes_since_index`` carries that count
    in and out; start with a value >= index_interval to index the first entry). "So far" covers
    this call's entries up to and including the indexed one.

    Returns (stop position, entries, last offset, max timestamp, offset of max timestamp,
    index points, bytes since index, error). The stop position is ``stop`` when everything was
    valid, the start of a partial trailing entry, or the start of the invalid entry when error is set.
    Offsets are -1 and the max timestamp -1 when nothing was seen.
    """
    view = memoryview(buf)
    entries = 0
    last_offset = -1
    max_timestamp = -1
    offset_of_max = -1
    points: IndexPoints = []
    floor = min_next_offset
    crc32 = zlib.crc32

    def stopped(reason: str) -> tuple[int, int, int, int, int, IndexPoints, int, ErrorTriple]:
        """The result of a scan that stops at ``pos`` on an invalid entry."""
        error = ("corrupt", pos, reason)
        return pos, entries, last_offset, max_timestamp, offset_of_max, points, bytes_since_index, error

    while stop - pos >= 12:
        offset, size = _I64.unpack_from(view, pos)[0], _I32.unpack_from(view, pos + 8)[0]
        if size < 14:
            return stopped(f"message size {size} is below the minimum")
        end = pos + 12 + size
        if end > stop:
            break
        _, _, crc, magic, _ = _PREFIX.unpack_from(view, pos)
        last = offset  # a magic 2 batch counts by its last offset, as a v0/v1 wrapper stores it
        if magic == 2:
            if size < _BATCH_MIN_LENGTH:
                return stopped(f"record batch length {size} is below the magic 2 minimum")
            last_delta = _I32.unpack_from(view, pos + _BATCH_LAST_DELTA_POS)[0]
            if last_delta < 0:
                return stopped(f"record batch last offset delta {last_delta} is negative")
            stored_crc = _U32.unpack_from(view, pos + _BATCH_CRC_POS)[0]
            if verify_crc and crc32c(view[pos + _BATCH_ATTRIBUTES_POS : end]) != stored_crc:
                return stopped("CRC-32C mismatch")
            timestamp = _I64.unpack_from(view, pos + _BATCH_MAX_TS_POS)[0]
            last = offset + last_delta
        elif magic == 1:
            if size < _V1_MIN - 12:
                return stopped(f"message size {size} is below the magic 1 minimum")
            timestamp = _I64.unpack_from(view, pos + 18)[0]
        elif magic == 0:
            timestamp = -1
        else:
            return stopped(f"unknown magic byte {magic}")
        if magic < 2 and verify_crc and crc32(view[pos + _MAGIC_POS : end]) != crc:
            return stopped("CRC mismatch")
        if offset < floor:
            return stopped(f"offset {offset} is not above the previous offset {floor - 1}")
        if timestamp > max_timestamp:
            max_timestamp, offset_of_max = timestamp, last
        if bytes_since_index >= index_interval:
            points.append((pos, last, max_timestamp, offset_of_max))
            bytes_since_index = 0
        bytes_since_index += end - pos
        entries += 1
        last_offset = last
        floor = last + 1
        pos = end
    return pos, entries, last_offset, max_timestamp, offset_of_max, points, bytes_since_index, None


def assign_plain(
    buf: bytearray,
    pos: int,
    stop: int,
    next_offset: int,
    max_entry_bytes: int,
    now_ms: int,
    log_append_time: bool,
    index_interval: int,
    bytes_since_index: int,
) -> tuple[int, int, int, int, IndexPoints, int, ErrorTriple | None]:
    """Validate complete uncompressed magic 1 entries of ``buf[pos:stop]`` and assign offsets in place.

    Each entry gets offset ``next_offset`` (then +1). An entry whose timestamp is -1, or every entry
    when ``log_append_time``, is stamped with ``now_ms`` as log-append time (CRC rewritten).
    Stops at anything else (another magic, a compressed entry, a partial entry).

    Returns (stop position, next offset, max timestamp, offset of max timestamp, index points,
    bytes since index, error), with index points as in scan_entries.
    """
    view = memoryview(buf)
    max_timestamp = -1
    offset_of_max = -1
    points: IndexPoints = []
    crc32 = zlib.crc32
    while stop - pos >= _V1_MIN:
        _, size, crc, magic, attributes, timestamp, key_length = _V1.unpack_from(view, pos)
        if magic != 1 or attributes & _CODEC_MASK:
            break
        end = pos + 12 + size
        if end > stop:
            break
        if size < _V1_MIN - 12:
            return (
                pos,
                next_offset,
                max_timestamp,
                offset_of_max,
                points,
                bytes_since_index,
                ("corrupt", pos, f"message size {size} is below the magic 1 minimum"),
            )
        if end - pos > max_entry_bytes:
            return (
                pos,
                next_offset,
                max_timestamp,
                offset_of_max,
                points,
                bytes_since_index,
                ("too_large", pos, f"message of {end - pos} bytes is larger than the limit of {max_entry_bytes}"),
            )
        if crc32(view[pos + _MAGIC_POS : end]) != crc:
            return (
                pos,
                next_offset,
                max_timestamp,
                offset_of_max,
                points,
                bytes_since_index,
                ("corrupt", pos, "CRC mismatch"),
            )
        _, _, reason = _check_lengths(view, pos + _V1_MIN - 4, end, key_length)
        if reason:
            return pos, next_offset, max_timestamp, offset_of_max, points, bytes_since_index, ("corrupt", pos, reason)
        if timestamp < -1:
            return (
                pos,
                next_offset,
                max_timestamp,
                offset_of_max,
                points,
                bytes_since_index,
                ("timestamp", pos, f"timestamp {timestamp} is negative and not -1 (none)"),
            )
        if log_append_time or timestamp == -1:
            timestamp = now_ms
            _ATTR_TS.pack_into(buf, pos + 17, attributes | _TS_TYPE_BIT, timestamp)
            _U32.pack_into(buf, pos + 12, crc32(view[pos + _MAGIC_POS : end]))
        _I64.pack_into(buf, pos, next_offset)
        if timestamp > max_timestamp:
            max_timestamp, offset_of_max = timestamp, next_offset
        if bytes_since_index >= index_interval:
            points.append((pos, next_offset, max_timestamp, offset_of_max))
            bytes_since_index = 0
        bytes_since_index += end - pos
        next_offset += 1
        pos = end
    return pos, next_offset, max_timestamp, offset_of_max, points, bytes_since_index, None


# --------------------------------------------------------------------------- magic 2 records
# The records of one record batch (kafkalog.record.batch_format has the layout): decoded into messages
# with headers, or encoded from (key, value, timestamp, headers) items.

_MAX_VARINT_BYTES = 10
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1


def _varint(view: memoryview, pos: int, end: int) -> tuple[int, int]:
    """(value, next position) of the zigzag varint at ``pos``; (0, -1) if it runs past ``end`` or
    is longer than a varlong can be."""
    shift = 0
    result = 0
    limit = min(end, pos + _MAX_VARINT_BYTES)
    while pos < limit:
        byte = view[pos]
        pos += 1
        if shift == 63 and byte > 1:  # beyond 64 bits
            return 0, -1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
    return 0, -1


class _RecordHead(NamedTuple):
    """The fields of one record up to its headers, as decode_records and check_records read them."""

    end: int
    timestamp_delta: int
    offset_delta: int
    key: tuple[int, int]  # (position, length; -1: null)
    value: tuple[int, int]
    header_count: int
    headers_at: int


def _record_head(view: memoryview, pos: int, end: int, previous_delta: int, max_delta: int) -> _RecordHead | str:
    """The record at ``pos`` read up to its header count (its offset delta must lie in
    (``previous_delta``, ``max_delta``]); or why it is malformed."""
    length, pos = _varint(view, pos, end)
    if pos < 0 or length < 0 or length > end - pos:
        return "a record's length runs past the batch"
    record_end = pos + length
    if pos >= record_end:
        return "a record is empty"
    pos += 1  # attributes: unused
    timestamp_delta, pos = _varint(view, pos, record_end)
    if pos < 0:
        return "a record's timestamp delta runs past the record"
    offset_delta, pos = _varint(view, pos, record_end)
    if pos < 0 or not previous_delta < offset_delta <= max_delta:
        return f"a record's offset delta is out of order or range ({offset_delta})"
    fields = []
    for what in ("key", "value"):
        size, pos = _varint(view, pos, record_end)
        if pos < 0 or size < -1 or size > record_end - pos:
            return f"a record's {what} length does not fit in the record"
        fields.append((pos, size))
        pos += max(size, 0)
    header_count, pos = _varint(view, pos, record_end)
    if pos < 0 or header_count < 0 or header_count > record_end - pos:
        return "a record's header count does not fit in the record"
    return _RecordHead(record_end, timestamp_delta, offset_delta, fields[0], fields[1], header_count, pos)


def decode_records(
    buf: Any,
    count: int,
    base_offset: int,
    base_timestamp: int,
    max_timestamp: int,
    last_offset_delta: int,
    log_append_time: bool,
) -> tuple[list[Any], ErrorTriple | None]:
    """Decode exactly ``count`` records filling ``buf``; (messages, None) or ([], error triple).

    Offset deltas must increase and stay within ``last_offset_delta``; with ``log_append_time``
    every message reports ``max_timestamp``.
    """
    view = memoryview(buf)
    end = len(view)
    make = _message_type
    ts_type = _log_append_time if log_append_time else _create_time
    out: list[Any] = []
    pos = 0
    previous_delta = -1
    for _ in range(count):
        start = pos
        head = _record_head(view, pos, end, previous_delta, last_offset_delta)
        if isinstance(head, str):
            return [], ("corrupt", start, head)
        record_end, pos = head.end, head.headers_at
        timestamp_delta, offset_delta, header_count = head.timestamp_delta, head.offset_delta, head.header_count
        previous_delta = offset_delta
        fields = [None if size == -1 else bytes(view[at : at + size]) for at, size in (head.key, head.value)]
        headers: list[tuple[str, bytes | None]] = []
        for _ in range(header_count):
            key_size, pos = _varint(view, pos, record_end)
            if pos < 0 or key_size < 0 or key_size > record_end - pos:
                return [], ("corrupt", start, "a header key length does not fit in the record")
            try:
                key = str(view[pos : pos + key_size], "utf-8")
            except UnicodeDecodeError:
                return [], ("corrupt", start, "a header key is not UTF-8")
            pos += key_size
            value_size, pos = _varint(view, pos, record_end)
            if pos < 0 or value_size < -1 or value_size > record_end - pos:
                return [], ("corrupt", start, "a header value length does not fit in the record")
            if value_size == -1:
                headers.append((key, None))
            else:
                headers.append((key, bytes(view[pos : pos + value_size])))
                pos += value_size
        if pos != record_end:
            return [], ("corrupt", start, "a record's fields do not add up to its length")
        timestamp = max_timestamp if log_append_time else base_timestamp + timestamp_delta
        if not _INT64_MIN <= timestamp <= _INT64_MAX:
            return [], ("corrupt", start, "a record's timestamp is out of range")
        out.append(
            tuple.__new__(make, (base_offset + offset_delta, timestamp, ts_type, fields[0], fields[1], tuple(headers)))
        )
    if pos != end:
        return [], ("corrupt", pos, f"{end - pos} bytes follow the last of {count} records")
    return out, None


def check_records(
    buf: Any, count: int, base_timestamp: int, log_append_time: bool
) -> tuple[int, bool, ErrorTriple | None]:
    """Check exactly ``count`` records filling ``buf`` as a producer must write them, building no
    message: (max timestamp, whether a record has none (-1), None), or (0, False, error triple).

    The checks are ``decode_records``' (every length within its record, header keys UTF-8,
    timestamps within 64 bits) with offset deltas exactly 0..count-1; with ``log_append_time`` the
    records' own timestamps are not looked at (the batch is stamped whole). A timestamp below -1 is
    an error of kind "timestamp", reported only when the records are otherwise whole, so that
    damage is always "corrupt" whatever it hides.
    """
    view = memoryview(buf)
    end = len(view)
    pos = 0
    max_timestamp = _INT64_MIN
    missing = False
    bad_timestamp: ErrorTriple | None = None
    previous_delta = -1
    for _ in range(count):
        start = pos
        # rising and at most count - 1: over count records, exactly 0..count-1 (and where decoding fails)
        head = _record_head(view, pos, end, previous_delta, count - 1)
        if isinstance(head, str):
            return 0, False, ("corrupt", start, head)
        record_end, pos = head.end, head.headers_at
        timestamp_delta, header_count, previous_delta = head.timestamp_delta, head.header_count, head.offset_delta
        for _ in range(header_count):
            key_size, pos = _varint(view, pos, record_end)
            if pos < 0 or key_size < 0 or key_size > record_end - pos:
                return 0, False, ("corrupt", start, "a header key length does not fit in the record")
            try:
                str(view[pos : pos + key_size], "utf-8")
            except UnicodeDecodeError:
                return 0, False, ("corrupt", start, "a header key is not UTF-8")
            pos += key_size
            value_size, pos = _varint(view, pos, record_end)
            if pos < 0 or value_size < -1 or value_size > record_end - pos:
                return 0, False, ("corrupt", start, "a header value length does not fit in the record")
            pos += max(value_size, 0)
        if pos != record_end:
            return 0, False, ("corrupt", start, "a record's fields do not add up to its length")
        if log_append_time:
            continue
        timestamp = base_timestamp + timestamp_delta
        if not _INT64_MIN <= timestamp <= _INT64_MAX:
            return 0, False, ("corrupt", start, "a record's timestamp is out of range")
        if timestamp == -1:
            missing = True
        elif timestamp < -1 and bad_timestamp is None:
            bad_timestamp = ("timestamp", start, f"timestamp {timestamp} is negative and not -1 (none)")
        max_timestamp = max(max_timestamp, timestamp)
    if pos != end:
        return 0, False, ("corrupt", pos, f"{end - pos} bytes follow the last of {count} records")
    if bad_timestamp is not None:
        return 0, False, bad_timestamp
    return max_timestamp, missing, None


def _append_varint(out: bytearray, value: int) -> None:
    zigzag = (value << 1) ^ (value >> 63)
    while zigzag >= 0x80:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)


def assign_batches(
    buf: bytearray,
    pos: int,
    stop: int,
    next_offset: int,
    max_entry_bytes: int,
    now_ms: int,
    log_append_time: bool,
    index_interval: int,
    bytes_since_index: int,
    decompress: Any,
) -> tuple[int, int, int, int, IndexPoints, int]:
    """The broker's fast path for produced record batches: whole magic 2 batches of
    ``buf[pos:stop]`` checked (counts, CRC-32C, every record through check_records, a compressed
    batch's records as ``decompress(codec, records)`` returns them) and given their offsets in
    place, LogAppendTime stamped where due (CRC recomputed). Stops before the first entry it does
    not take as it is (another format, compressed when ``decompress`` is None or raises, over
    ``max_entry_bytes``, anything wrong): the caller's full path goes on from there and names the
    error. Returns (pos, next_offset, max_ts, offset_of_max, index points relative to the first
    pos, bytes_since_index)."""
    if pos < 0 or stop > len(buf) or pos > stop:
        raise ValueError("assign_batches: pos and stop must lie within the buffer")
    start = pos
    max_ts, offset_of_max = -1, -1
    points: IndexPoints = []
    since = bytes_since_index
    while stop - pos >= 12 + _BATCH_MIN_LENGTH:
        length = _I32.unpack_from(buf, pos + 8)[0]
        if length < _BATCH_MIN_LENGTH or length > stop - pos - 12:
            break
        size = 12 + length
        if buf[pos + _MAGIC_POS] != 2 or size > max_entry_bytes:
            break
        attributes = int.from_bytes(buf[pos + _BATCH_ATTRIBUTES_POS : pos + _BATCH_ATTRIBUTES_POS + 2], "big")
        codec = attributes & _CODEC_MASK
        if codec and decompress is None:
            break
        last_delta = _I32.unpack_from(buf, pos + _BATCH_LAST_DELTA_POS)[0]
        count = _I32.unpack_from(buf, pos + 57)[0]
        if count <= 0 or last_delta != count - 1:
            break
        if (
            _crc32c(bytes(buf[pos + _BATCH_ATTRIBUTES_POS : pos + size]))
            != _U32.unpack_from(buf, pos + _BATCH_CRC_POS)[0]
        ):
            break
        base_ts = _I64.unpack_from(buf, pos + 27)[0]
        batch_max_ts = _I64.unpack_from(buf, pos + _BATCH_MAX_TS_POS)[0]
        stamped_by_producer = bool(attributes & _TS_TYPE_BIT)
        records: Any = bytes(buf[pos + 61 : pos + size])
        if codec:
            try:
                records = decompress(codec, memoryview(records))
            except Exception:  # the full path decompresses it again and names the error
                break
        records_max, missing, error = check_records(records, count, base_ts, stamped_by_producer)
        if error is not None:
            break
        stamp = log_append_time or stamped_by_producer or missing
        new_attributes = attributes | _TS_TYPE_BIT if stamp else attributes
        new_max = now_ms if stamp else records_max
        _I64.pack_into(buf, pos, next_offset)
        if new_attributes != attributes or new_max != batch_max_ts:
            buf[pos + _BATCH_ATTRIBUTES_POS : pos + _BATCH_ATTRIBUTES_POS + 2] = new_attributes.to_bytes(2, "big")
            _I64.pack_into(buf, pos + _BATCH_MAX_TS_POS, new_max)
            _U32.pack_into(buf, pos + _BATCH_CRC_POS, _crc32c(bytes(buf[pos + _BATCH_ATTRIBUTES_POS : pos + size])))
        last_offset = next_offset + count - 1
        if new_max > max_ts:
            max_ts, offset_of_max = new_max, last_offset
        if since >= index_interval:
            points.append((pos - start, last_offset, max_ts, offset_of_max))
            since = 0
        since += size
        next_offset += count
        pos += size
    return pos, next_offset, max_ts, offset_of_max, points, since


def batch_timestamps(items: Any) -> tuple[int, int]:
    """(base, max) of a batch of ``items`` (key, value, timestamp, headers): its first and its
    largest timestamp other than -1, or -1 for both when none is given."""
    given = []
    for item in items:
        if not isinstance(item, tuple) or len(item) != 4:
            raise TypeError("a record to encode is a (key, value, timestamp, headers) tuple")
        if item[2] != -1:
            given.append(item[2])
    return (given[0], max(given)) if given else (-1, -1)


def encode_records(items: Any, base_timestamp: int) -> bytearray:
    """The Records bytes of ``items`` (key, value, timestamp, headers), offset deltas 0, 1, ...;
    a timestamp of -1 is stored as ``base_timestamp``."""
    out = bytearray()
    body = bytearray()
    for offset_delta, (key, value, timestamp, headers) in enumerate(items):
        body.clear()
        body.append(0)  # attributes
        _append_varint(body, (base_timestamp if timestamp == -1 else timestamp) - base_timestamp)
        _append_varint(body, offset_delta)
        for field in (key, value):
            if field is None:
                body.append(1)  # zigzag(-1)
            else:
                _append_varint(body, len(field))
                body += field
        _append_varint(body, len(headers))
        for header_key, header_value in headers:
            if not isinstance(header_key, str):
                raise TypeError(f"a header key must be a str, not {type(header_key).__name__}")
            encoded = header_key.encode()
            _append_varint(body, len(encoded))
            body += encoded
            if header_value is None:
                body.append(1)
            else:
                _append_varint(body, len(header_value))
                body += header_value
        _append_varint(out, len(body))
        out += body
    return out
