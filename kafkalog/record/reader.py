"""Reading message sets and record batches: shallow entries (headers only) and deep decoding into
Messages. A stream may mix magic 0/1 entries and magic 2 batches (a partition written before and
after its format changed): every reader here takes each entry as its magic says.

A message set read from a log or a fetch response may end inside a message (reads are cut at a
byte limit): both readers stop cleanly before such a partial trailing entry. Anything else that is
not a valid message raises CorruptRecordError naming the offset and byte position.
"""

from __future__ import annotations

from collections.abc import Iterator

from kafkalog.errors import CorruptRecordError, UnsupportedCodecError
from kafkalog.record import batch_format as batches
from kafkalog.record import kernels
from kafkalog.record.codec import DEFAULT_MAX_DECOMPRESSED_BYTES, decompress
from kafkalog.record.legacy_format import INT32, KEY_LENGTH_POS, LOG_OVERHEAD, MESSAGE_PREFIX, MESSAGE_V0_OVERHEAD
from kafkalog.record.legacy_format import INT64 as _INT64
from kafkalog.record.message import CODEC_MASK, NO_TIMESTAMP, TIMESTAMP_TYPE_MASK, Codec, Entry, Message, TimestampType

Buffer = bytes | bytearray | memoryview

_ANY_MAGIC = -1
_NO_FLOOR = -(1 << 63)
_CODECS = frozenset((Codec.GZIP, Codec.SNAPPY, Codec.LZ4))
_BATCH = 4096  # messages decoded per kernel call: bounds the memory a lazy reader holds


def corrupt_at(buf: Buffer, error: tuple[str, int, str]) -> CorruptRecordError:
    """Turn a kernel's error triple into a CorruptRecordError naming offset and position."""
    _, position, reason = error
    offset = _INT64.unpack_from(buf, position)[0] if len(buf) - position >= 8 else None
    return CorruptRecordError(reason, offset=offset, position=position)


def iter_entries(buf: Buffer, *, start: int = 0, end: int | None = None, verify_crc: bool = True) -> Iterator[Entry]:
    """Yield the shallow entries of ``buf[start:end]``, stopping before a partial trailing entry.

    Compressed wrappers are yielded as one entry (not opened). Raises CorruptRecordError for an
    impossible size, an unknown magic, offsets that do not rise, or (with ``verify_crc``) a CRC
    mismatch.
    """
    stop = len(buf) if end is None else end
    pos = start
    floor = _NO_FLOOR
    while stop - pos >= LOG_OVERHEAD:
        size = INT32.unpack_from(buf, pos + 8)[0]
        if size < MESSAGE_V0_OVERHEAD:  # zero or negative sizes included: never a message
            offset = _INT64.unpack_from(buf, pos)[0]
            raise CorruptRecordError(f"message size {size} is below the minimum", offset=offset, position=pos)
        entry_end = pos + LOG_OVERHEAD + size
        if entry_end > stop:
            return  # partial trailing entry: the read was cut inside it
        # Validate exactly this entry, with the same rules recovery applies.
        error = kernels.scan_entries(buf, pos, min(entry_end, stop), verify_crc, floor, 1 << 62, 0)[7]
        if error is not None:
            raise corrupt_at(buf, error)
        entry = _entry(buf, pos, entry_end)
        yield entry
        floor = entry.offset + 1
        pos = entry_end


def last_entry_offset(buf: Buffer) -> int:
    """The last offset of the complete entries of ``buf`` (-1: none), from their headers alone: a
    record batch counts by its base offset plus its last offset delta, which a compacted log keeps
    when the cleaner removed the batch's last records or all of them (an empty batch is kept for
    its producer's sequence). A reader that advances past it skips only offsets no record holds.
    CRCs are not checked: call it on a set that was decoded (and so checked) already."""
    view = memoryview(buf)
    return int(kernels.scan_entries(view, 0, len(view), False, _NO_FLOOR, 1 << 62, 0)[2])


def first_codec(buf: Buffer) -> int:
    """The codec of the first entry of ``buf`` (0 when too little of it is there to tell): a v0/v1
    entry's attributes byte follows its magic, a batch's 16-bit attributes follow its CRC."""
    if len(buf) <= batches.ATTRIBUTES_POS + 1:
        return 0
    if buf[batches.MAGIC_POS] == batches.MAGIC:
        return int(buf[batches.ATTRIBUTES_POS + 1]) & CODEC_MASK
    return int(buf[17]) & CODEC_MASK


def _entry(buf: Buffer, pos: int, end: int) -> Entry:
    offset, _, crc, magic, attributes = MESSAGE_PREFIX.unpack_from(buf, pos)
    if magic == batches.MAGIC:
        header = batches.read_header(buf, pos, end)
        return Entry(header.last_offset, pos, end - pos, header.crc, magic, header.attributes, header.max_timestamp)
    timestamp = _INT64.unpack_from(buf, pos + 18)[0] if magic == 1 else NO_TIMESTAMP
    return Entry(offset, pos, end - pos, crc, magic, attributes, timestamp)


def decode_messages(
    buf: Buffer,
    *,
    verify_crc: bool = True,
    min_offset: int = 0,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> Iterator[Message]:
    """Yield every logical message of a message set, opening compressed wrappers.

    Messages with an offset below ``min_offset`` are skipped (a read that starts inside a
    compressed wrapper returns the wrapper's earlier messages too). Stops before a partial trailing
    entry; raises CorruptRecordError for anything invalid, including a partial inner entry.
    """
    for batch in decode_batches(
        buf, verify_crc=verify_crc, min_offset=min_offset, max_decompressed_bytes=max_decompressed_bytes
    ):
        yield from batch


def decode_all(
    buf: Buffer,
    *,
    verify_crc: bool = True,
    min_offset: int = 0,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> list[Message]:
    """decode_messages as one list: the fastest way to decode a whole fetched region."""
    out: list[Message] = []
    for batch in decode_batches(
        buf, verify_crc=verify_crc, min_offset=min_offset, max_decompressed_bytes=max_decompressed_bytes
    ):
        out += batch
    return out


def decode_batches(
    buf: Buffer,
    *,
    verify_crc: bool = True,
    min_offset: int = 0,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> Iterator[list[Message]]:
    """The messages of decode_messages, in lists of up to a few thousand (no per-message yield)."""
    view = memoryview(buf)
    stop = len(view)
    pos = 0
    while True:
        # Runs of uncompressed entries go through the kernel; it stops at anything else.
        start = pos
        messages, pos, error = kernels.decode_plain(view, pos, stop, verify_crc, min_offset, _ANY_MAGIC, _BATCH)
        if messages:
            yield messages
        if error is not None:
            raise corrupt_at(view, error)
        if pos != start:
            continue  # a full batch, or the run ended: look again from here
        entry = _entry_at(view, pos, verify_crc)
        if entry is None:
            return  # the end, or a partial trailing entry
        if entry.magic == batches.MAGIC:
            _, records = batches.decode_batch(
                view, pos, end=entry.end, verify_crc=False, max_decompressed=max_decompressed_bytes
            )  # the CRC was checked by the shallow scan
            yield (
                [record for record in records if record.offset >= min_offset]
                if records and records[0].offset < min_offset
                else records
            )
            pos = entry.end
            continue
        if entry.attributes & CODEC_MASK == 0:
            raise CorruptRecordError("message cannot be decoded", offset=entry.offset, position=pos)
        yield list(_decode_wrapper(view, entry, verify_crc, min_offset, max_decompressed_bytes))
        pos = entry.end


def _entry_at(view: memoryview, pos: int, verify_crc: bool) -> Entry | None:
    """The complete, valid entry at ``pos``; None at the end or before a partial trailing entry."""
    for entry in iter_entries(view, start=pos, verify_crc=verify_crc):
        return entry
    return None


def _decode_wrapper(
    view: memoryview, entry: Entry, verify_crc: bool, min_offset: int, max_decompressed_bytes: int
) -> Iterator[Message]:
    """Decode the inner messages of one compressed wrapper entry, with absolute offsets."""
    messages = open_wrapper(view, entry, verify_crc=verify_crc, max_decompressed_bytes=max_decompressed_bytes)
    # Magic 1 inner offsets are relative: the wrapper carries the absolute offset of the last one.
    shift = entry.offset - messages[-1].offset if entry.magic == 1 else 0
    log_append = entry.magic == 1 and entry.attributes & TIMESTAMP_TYPE_MASK
    for message in messages:
        offset = message.offset + shift
        if offset < min_offset:
            continue
        if log_append:
            yield Message(offset, entry.timestamp, TimestampType.LOG_APPEND_TIME, message.key, message.value)
        else:
            yield message._replace(offset=offset)


def open_wrapper(
    view: memoryview,
    entry: Entry,
    *,
    verify_crc: bool = True,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> list[Message]:
    """Decompress and decode a wrapper's inner messages as stored (offsets not made absolute)."""
    if entry.attributes & CODEC_MASK not in _CODECS:
        raise UnsupportedCodecError(
            f"unknown compression codec {entry.attributes & CODEC_MASK}", offset=entry.offset, position=entry.position
        )
    try:
        inner = decompress(
            entry.codec, wrapper_payload(view, entry), magic=entry.magic, max_size=max_decompressed_bytes
        )
        messages = decode_inner(inner, entry.magic, verify_crc=verify_crc)
    except CorruptRecordError as exc:
        raise CorruptRecordError(
            f"compressed message set is invalid: {exc}", offset=entry.offset, position=entry.position
        ) from exc
    if not messages:
        raise CorruptRecordError("compressed message holds no messages", offset=entry.offset, position=entry.position)
    return messages


def decode_inner(inner: Buffer, magic: int, *, verify_crc: bool = True) -> list[Message]:
    """Decode a decompressed inner message set: complete, uncompressed entries of one magic."""
    view = memoryview(inner)
    stop = len(view)
    messages: list[Message]
    messages, pos, error = kernels.decode_plain(view, 0, stop, verify_crc, _NO_FLOOR, magic, stop)
    if error is not None:
        raise corrupt_at(view, error)
    if pos == stop:
        return messages
    entry = _entry_at(view, pos, verify_crc)  # raises for a corrupt entry
    if entry is None:
        raise CorruptRecordError("inner message is truncated", position=pos)
    if entry.magic != magic:
        raise CorruptRecordError(f"inner message has magic {entry.magic} inside a magic {magic} wrapper", position=pos)
    raise CorruptRecordError("inner message is itself compressed", offset=entry.offset, position=pos)


def wrapper_payload(view: memoryview, entry: Entry) -> memoryview:
    """The compressed bytes (the Value) of a wrapper entry, checked against the entry's bounds."""
    key_length_pos = entry.position + KEY_LENGTH_POS[entry.magic]
    key_length = INT32.unpack_from(view, key_length_pos)[0]
    value_length_pos = key_length_pos + 4 + max(key_length, 0)
    if key_length < -1 or value_length_pos + 4 > entry.end:
        raise CorruptRecordError(
            f"key length {key_length} does not fit in the message", offset=entry.offset, position=entry.position
        )
    value_length = INT32.unpack_from(view, value_length_pos)[0]
    if value_length < 0 or value_length_pos + 4 + value_length != entry.end:
        raise CorruptRecordError(
            f"value length {value_length} does not match the message size", offset=entry.offset, position=entry.position
        )
    return view[value_length_pos + 4 : entry.end]


__all__ = [
    "corrupt_at",
    "decode_all",
    "decode_batches",
    "decode_inner",
    "decode_messages",
    "first_codec",
    "iter_entries",
    "open_wrapper",
    "wrapper_payload",
]
