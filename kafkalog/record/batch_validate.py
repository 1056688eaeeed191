"""Checking what a producer sent and assigning its offsets, for a log that stores magic 2 batches.

The counterpart of ``kafkalog.record.legacy_validate`` (which keeps magic 1 logs);
``kafkalog.record.validate`` calls this for v2 ones. What a v2 log stores is always record batches:
- a produced batch is checked whole (its header, CRC-32C, every record: kafkalog.record.batch_format)
  and written as it came, in place: only BaseOffset (not covered by the CRC), and when the timestamps
  change MaxTimestamp and the timestamp-type bit (the CRC is then recomputed). Its records' offset
  deltas must be 0, 1, ... (as every producer writes them);
- with log-append time, or when a record carries no timestamp (-1), the batch becomes a
  log-append-time batch stamped with the append time, as Kafka does;
- v0/v1 message sets (clients of the 0.9/0.10 era) are up-converted: each compressed wrapper to one
  batch of the same codec, each run of plain entries to one uncompressed batch; magic 0 messages
  get the append time.
Index points are one per batch where due, at the batch's last offset (a reader looks a batch up by
its last offset, as a wrapper's).

What current producers send, record batches, is checked and given its offsets by one C kernel
(``kernels.assign_batches``) that stops before anything else; the Python path below goes on from
there and raises every error, so the kernel changes nothing but speed (a property test holds it to
that on whole, damaged, cut and mixed sets).
"""

from __future__ import annotations

from collections.abc import Iterator

from kafkalog.errors import CorruptRecordError, InvalidTimestampError, RecordTooLargeError
from kafkalog.record import batch_format as batches
from kafkalog.record import codec as codecs
from kafkalog.record import kernels
from kafkalog.record.batch_format import RecordInput
from kafkalog.record.message import CODEC_MASK, NO_TIMESTAMP, Codec, Entry, Message, TimestampType
from kafkalog.record.reader import decode_all, iter_entries
from kafkalog.record.validated import ValidatedSet

_ALL = -(1 << 63)


def validate_batches_for_append(
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
    """Check every batch (or message) of ``data`` and assign offsets from ``next_offset``; the result
    holds magic 2 batches only. Raises as ``validate.validate_for_append``; nothing is half-applied."""
    buf = bytearray(data)
    if not buf:
        raise CorruptRecordError("message set is empty")
    view = memoryview(buf)
    first_offset = next_offset

    # What current producers send (uncompressed batches) is one kernel call; it stops before
    # anything else, which the loop below takes from there.
    def decompress(codec: int, records: memoryview) -> bytes | memoryview:
        return codecs.decompress(Codec(codec), records, magic=batches.MAGIC, max_size=max_decompressed_bytes)

    fast_end, next_offset, max_ts, offset_of_max, points, bytes_since_index = kernels.assign_batches(
        buf, 0, len(buf), next_offset, max_message_bytes, now_ms, log_append_time, index_interval_bytes,
        bytes_since_index, decompress,
    )  # fmt: skip
    if fast_end == len(buf):
        return ValidatedSet(buf, first_offset, next_offset, max_ts, offset_of_max, points, bytes_since_index)
    out: list[bytes | bytearray | memoryview] = [view[:fast_end]] if fast_end else []
    out_size = fast_end
    pending_plain: list[Message] = []  # a run of uncompressed v0/v1 messages: one batch

    def emit(chunk: bytes | bytearray | memoryview, last_offset: int, chunk_max_ts: int) -> None:
        nonlocal out_size, max_ts, offset_of_max, bytes_since_index
        if len(chunk) > max_message_bytes:
            raise RecordTooLargeError(
                f"record batch of {len(chunk)} bytes at offset {last_offset} is larger than the limit of "
                f"{max_message_bytes}"
            )
        if chunk_max_ts > max_ts:
            max_ts, offset_of_max = chunk_max_ts, last_offset
        if bytes_since_index >= index_interval_bytes:
            points.append((out_size, last_offset, max_ts, offset_of_max))
            bytes_since_index = 0
        bytes_since_index += len(chunk)
        out.append(chunk)
        out_size += len(chunk)

    def flush_plain() -> None:
        nonlocal next_offset
        if pending_plain:
            chunk, count, chunk_max = _batch_of(pending_plain, next_offset, Codec.NONE, now_ms, log_append_time)
            emit(chunk, next_offset + count - 1, chunk_max)
            next_offset += count
            pending_plain.clear()

    chunk: bytes | memoryview
    for entry in _whole_entries(view, fast_end):
        if entry.magic == batches.MAGIC:
            flush_plain()
            chunk, count, chunk_max = _batch_in_place(
                view, entry.position, entry.end, next_offset, now_ms, log_append_time, max_decompressed_bytes
            )
            emit(chunk, next_offset + count - 1, chunk_max)
            next_offset += count
            continue
        messages = decode_all(
            view[entry.position : entry.end], min_offset=_ALL, max_decompressed_bytes=max_decompressed_bytes
        )
        _check_timestamps(messages, entry.position)
        stamped = [m if entry.magic == 1 else m._replace(timestamp=NO_TIMESTAMP) for m in messages]
        if entry.attributes & CODEC_MASK:
            flush_plain()
            chunk, count, chunk_max = _batch_of(stamped, next_offset, entry.codec, now_ms, log_append_time)
            emit(chunk, next_offset + count - 1, chunk_max)
            next_offset += count
        else:
            pending_plain.extend(stamped)
    flush_plain()
    return ValidatedSet(b"".join(out), first_offset, next_offset, max_ts, offset_of_max, points, bytes_since_index)


def _whole_entries(view: memoryview, start: int) -> Iterator[Entry]:
    """Every entry of a produced set from ``start`` on, each checked on its own (a producer's
    batches all start at offset 0: offsets need not rise); the set must end with a whole entry."""
    pos = start
    while pos < len(view):
        entry = next(iter_entries(view, start=pos), None)
        if entry is None:
            raise CorruptRecordError("message set ends inside a message", position=pos)
        yield entry
        pos = entry.end


def _check_timestamps(messages: list[Message], position: int) -> None:
    for message in messages:
        if message.timestamp < NO_TIMESTAMP:
            raise InvalidTimestampError(
                f"timestamp {message.timestamp} of a message at byte {position} is negative and not -1 (none)"
            )


def _batch_in_place(
    view: memoryview, start: int, end: int, base_offset: int, now_ms: int, log_append_time: bool, max_decompressed: int
) -> tuple[memoryview, int, int]:
    """A produced batch checked and given its offsets: (its bytes, record count, max timestamp).

    The records are checked in one pass of the record kernel without a Python object per record
    (the broker's cost per produced message is this check)."""
    header = batches.read_header(view, start, end)
    batches.check_crc(view, header)
    if header.records_count == 0 or header.last_offset_delta != header.records_count - 1:
        raise CorruptRecordError(
            f"a produced record batch must hold records with offset deltas 0..n-1: {header.records_count} "
            f"records, last offset delta {header.last_offset_delta}",
            position=start,
        )
    payload = batches.records_payload(view, header, max_decompressed=max_decompressed)
    stamped_by_producer = header.timestamp_type == TimestampType.LOG_APPEND_TIME
    records_max, missing, error = kernels.check_records(
        payload, header.records_count, header.base_timestamp, stamped_by_producer
    )
    if error is not None:
        kind, where, reason = error
        if kind == "timestamp":
            raise InvalidTimestampError(f"{reason}: a record of the batch at byte {start}")
        raise CorruptRecordError(
            f"record batch at offset {header.base_offset}: {reason} (byte {where} of its records)",
            offset=header.base_offset,
            position=start,
        )
    stamp = log_append_time or stamped_by_producer or missing
    chunk = view[start:end]
    batches.set_base_offset(chunk, 0, base_offset)  # type: ignore[arg-type]
    attributes = header.attributes | batches.TIMESTAMP_TYPE_BIT if stamp else header.attributes
    max_timestamp = now_ms if stamp else records_max
    if attributes != header.attributes or max_timestamp != header.max_timestamp:
        batches.BATCH_HEADER.pack_into(
            chunk, 0, base_offset, header.length, header.partition_leader_epoch, batches.MAGIC, 0, attributes,
            header.last_offset_delta, header.base_timestamp, max_timestamp, header.producer_id,
            header.producer_epoch, header.base_sequence, header.records_count,
        )  # fmt: skip
        crc = kernels.crc32c(chunk[batches.ATTRIBUTES_POS :])
        chunk[batches.CRC_POS : batches.CRC_POS + 4] = int(crc).to_bytes(4, "big")
    return chunk, header.records_count, max_timestamp


def _batch_of(
    messages: list[Message], base_offset: int, codec: Codec, now_ms: int, log_append_time: bool
) -> tuple[bytes, int, int]:
    """v0/v1 messages as one batch: (its bytes, record count, max timestamp)."""
    stamp = log_append_time or any(m.timestamp == NO_TIMESTAMP for m in messages)
    records = [RecordInput(m.key, m.value, now_ms if stamp else m.timestamp) for m in messages]
    data = batches.encode_batch(
        records,
        base_offset=base_offset,
        codec=codec,
        timestamp_type=TimestampType.LOG_APPEND_TIME if stamp else TimestampType.CREATE_TIME,
    )
    return data, len(records), now_ms if stamp else max(m.timestamp for m in messages)
