"""Converting stored message sets (magic 1) to magic 0, for clients whose fetch version predates
timestamps (Fetch v0/v1). Compressed sets are recompressed with the same codec; offsets are kept."""

from __future__ import annotations

from kafkalog.record.builder import encode_message, frame
from kafkalog.record.codec import compress
from kafkalog.record.format import CODEC_MASK
from kafkalog.record.reader import Buffer, decode_all, iter_entries, open_wrapper

_ALL = -(1 << 63)


def to_magic_0(data: Buffer) -> bytes:
    """The complete entries of ``data`` as magic 0 (a partial trailing entry is dropped)."""
    view = memoryview(data)
    out: list[bytes] = []
    for entry in iter_entries(view):
        if entry.magic == 0:
            out.append(bytes(view[entry.position : entry.end]))
            continue
        if not entry.attributes & CODEC_MASK:
            (message,) = decode_all(view[entry.position : entry.end], min_offset=_ALL)
            encoded = encode_message(magic=0, attributes=0, timestamp=-1, key=message.key, value=message.value)
            out.append(frame(entry.offset, encoded))
            continue
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
        out.append(frame(entry.offset, wrapper))
    return b"".join(out)
