"""Converting stored data down to an older message format, for clients that predate it: magic 2
batches to magic 1 for Fetch v2/v3 (no headers: they are dropped), anything to magic 0 for Fetch
v0/v1 (no timestamps). Compressed entries are recompressed with the same codec, except zstd, which
no older format has: its records go uncompressed. Offsets are kept. Data already in the target
format (or older) is copied as it is."""

from __future__ import annotations

from kafkalog.record import batch as batches
from kafkalog.record.builder import MessageSetBuilder, encode_message, frame
from kafkalog.record.codec import compress
from kafkalog.record.format import CODEC_MASK, LEGACY_CODECS, Codec, Entry, TimestampType
from kafkalog.record.reader import Buffer, decode_all, iter_entries, open_wrapper

_ALL = -(1 << 63)


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


def to_magic_0(data: Buffer) -> bytes:
    """The complete entries of ``data`` as magic 0 (a partial trailing entry is dropped)."""
    return to_magic(data, 0)


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
