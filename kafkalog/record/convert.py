"""Converting data between message formats. Down, for clients that predate a format: magic 2
batches to magic 1 for Fetch v2/v3 (no headers: they are dropped), anything to magic 0 for Fetch
v0/v1 (no timestamps). Compressed entries are recompressed with the same codec, except zstd, which
no older format has: its records go uncompressed. Offsets are kept. Data already in the target
format (or older) is copied as it is. Up (``to_batches``), for brokers that take only record
batches (Kafka 4.x): message sets become batches."""

from __future__ import annotations

from kafkalog.record import batch_format as batches
from kafkalog.record.batch_format import RecordInput
from kafkalog.record.codec import compress
from kafkalog.record.legacy_builder import MessageSetBuilder, encode_message, frame
from kafkalog.record.legacy_format import LEGACY_CODECS
from kafkalog.record.message import CODEC_MASK, Codec, Entry, TimestampType
from kafkalog.record.reader import Buffer, decode_all, iter_entries, open_wrapper

_ALL = -(1 << 63)
DEFAULT_MAX_BATCH_BYTES = 256 * 1024
"""Up-converted runs of plain messages are cut into batches of about this size: well under the
1 MB that brokers accept per batch by default (max.message.bytes)."""


def needs_conversion(data: Buffer, magic: int) -> bool:
    """Whether ``data`` holds an entry newer than ``magic`` (a shallow look at each entry's magic)."""
    return any(entry.magic > magic for entry in iter_entries(data, verify_crc=False))


def to_magic(data: Buffer, magic: int) -> bytes:
    """The complete entries of ``data`` in format ``magic`` (0 or 1) or older; a partial trailing
    entry is dropped."""
    if magic not in (0, 1):
        raise ValueError(f"can convert to magic 0 or 1, not {magic}")
    view = memoryview(data)
    out: list[bytes] = []
    for entry in iter_entries(view):
        if entry.magic <= magic:
            out.append(bytes(view[entry.position : entry.end]))
        elif entry.magic == batches.MAGIC:
            out.append(_batch_as(view, entry, magic))
        else:
            out.append(_magic_1_as_0(view, entry))
    return b"".join(out)


def to_batches(data: Buffer, *, max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES) -> bytes:
    """The complete entries of ``data`` as record batches (magic 2), for a broker that takes only
    those: each v0/v1 compressed wrapper becomes one batch of its codec, each run of plain
    messages batches of about ``max_batch_bytes`` at most (a broker limits the size of a batch as
    it did that of a message); batches pass unchanged. Offsets start at 0 (the broker assigns its
    own); a message without a timestamp (magic 0) keeps none (-1)."""
    view = memoryview(data)
    out: list[bytes] = []
    plain: list[RecordInput] = []
    plain_bytes = 0

    def flush_plain() -> None:
        nonlocal plain_bytes
        if plain:
            out.append(batches.encode_batch(plain))
            plain.clear()
            plain_bytes = 0

    for entry in iter_entries(view):
        if entry.magic == batches.MAGIC:
            flush_plain()
            out.append(bytes(view[entry.position : entry.end]))
            continue
        records = [
            RecordInput(m.key, m.value, m.timestamp)
            for m in decode_all(view[entry.position : entry.end], min_offset=_ALL)
        ]
        if entry.attributes & CODEC_MASK:
            flush_plain()
            out.append(batches.encode_batch(records, codec=entry.codec))
            continue
        if plain and plain_bytes + entry.size > max_batch_bytes:
            flush_plain()
        plain.extend(records)
        plain_bytes += entry.size
    flush_plain()
    return b"".join(out)


def _batch_as(view: memoryview, entry: Entry, magic: int) -> bytes:
    header, records = batches.decode_batch(view, entry.position, end=entry.end, verify_crc=False)
    if not records:
        return b""  # an empty batch (all its records compacted away) has nothing to say to old clients
    codec = header.codec if header.codec in LEGACY_CODECS else Codec.NONE
    if records[-1].offset - records[0].offset != len(records) - 1:
        codec = Codec.NONE  # offsets with gaps (compaction) cannot be inner offsets of one wrapper
    log_append = magic == 1 and header.timestamp_type == TimestampType.LOG_APPEND_TIME  # magic 0 has no time
    if codec == Codec.NONE:
        attributes = (TimestampType.LOG_APPEND_TIME << 3) if log_append else 0
        return b"".join(
            frame(
                record.offset,
                encode_message(
                    magic=magic, attributes=attributes, timestamp=record.timestamp, key=record.key, value=record.value
                ),
            )
            for record in records
        )
    builder = MessageSetBuilder(
        magic=magic,
        codec=codec,
        base_offset=records[0].offset,
        timestamp_type=TimestampType.LOG_APPEND_TIME if log_append else TimestampType.CREATE_TIME,
    )
    for record in records:
        builder.append(record.value, record.key, record.timestamp)
    return builder.build()


def _magic_1_as_0(view: memoryview, entry: Entry) -> bytes:
    if not entry.attributes & CODEC_MASK:
        (message,) = decode_all(view[entry.position : entry.end], min_offset=_ALL)
        encoded = encode_message(magic=0, attributes=0, timestamp=-1, key=message.key, value=message.value)
        return frame(entry.offset, encoded)
    inner = open_wrapper(view, entry)
    shift = entry.offset - inner[-1].offset  # magic 1 inner offsets are relative
    inner_set = b"".join(
        frame(m.offset + shift, encode_message(magic=0, attributes=0, timestamp=-1, key=m.key, value=m.value))
        for m in inner
    )
    wrapper = encode_message(
        magic=0,
        attributes=entry.attributes & CODEC_MASK,
        timestamp=-1,
        key=None,
        value=compress(entry.codec, inner_set, magic=0),
    )
    return frame(entry.offset, wrapper)
