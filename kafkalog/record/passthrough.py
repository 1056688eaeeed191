"""Taking a fetched message set as it is, to write it elsewhere unchanged (a mirror's fast path).

A fetch returns whole entries as the source stored them: decoding every message and encoding it
again only to send the same bytes on costs a mirror most of its time. ``stored_entries`` checks the
set shallowly instead (sizes, magic, every entry's CRC, rising offsets: a compressed wrapper's CRC
covers its compressed payload) and returns the complete entries to forward.

The one case that cannot go as it is: a read that starts inside a compressed wrapper (or inside a
record batch, compressed or not) gets its earlier messages too. That first entry is opened and its
messages from the requested offset on are returned decoded (``head``); the entries after it still
go as stored.
"""

from __future__ import annotations

from typing import NamedTuple

from kafkalog.record import batch_format as batches
from kafkalog.record import kernels
from kafkalog.record.codec import DEFAULT_MAX_DECOMPRESSED_BYTES
from kafkalog.record.legacy_format import ATTRIBUTES_POS, INT32, INT64, LOG_OVERHEAD, SIZE_POS
from kafkalog.record.message import CODEC_MASK, Message
from kafkalog.record.reader import Buffer, corrupt_at, decode_all

_NO_FLOOR = -(1 << 63)
_NEVER_INDEX = 1 << 62


class StoredEntries(NamedTuple):
    """The complete entries of a fetched set from ``start`` on: ``head`` (decoded, only when the set
    began inside a compressed wrapper), then ``data`` as stored. ``last_offset`` is the offset of the
    last message of either (-1: nothing complete was fetched)."""

    head: list[Message]
    data: memoryview
    last_offset: int


def stored_entries(
    buf: Buffer, start: int, *, max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES
) -> StoredEntries:
    """Check ``buf`` shallowly and split it (see the module doc); raises CorruptRecordError naming
    the offset and position of an invalid entry. A partial trailing entry is left out."""
    view = memoryview(buf)
    stop, _, last_offset, _, _, _, _, error = kernels.scan_entries(view, 0, len(view), True, _NO_FLOOR, _NEVER_INDEX, 0)
    if error is not None:
        raise corrupt_at(view, error)
    pos = 0
    # Entries wholly before ``start`` (counted by their last offset: a wrapper stores its last
    # message's, a batch its base): skipped.
    while pos < stop and _last_offset(view, pos) < start:
        pos = _entry_end(view, pos)
    head: list[Message] = []
    if pos < stop:
        end = _entry_end(view, pos)
        # a batch starting before ``start``, or (v0/v1) a compressed wrapper, may hold earlier messages
        if batches.is_batch(view, pos):
            holds_earlier = INT64.unpack_from(view, pos)[0] < start
        else:
            holds_earlier = bool(view[pos + ATTRIBUTES_POS] & CODEC_MASK)
        if holds_earlier:
            opened = decode_all(view[pos:end], min_offset=_NO_FLOOR, max_decompressed_bytes=max_decompressed_bytes)
            if opened and opened[0].offset < start:
                head = [message for message in opened if message.offset >= start]
                pos = end
    return StoredEntries(head, view[pos:stop], last_offset if (head or pos < stop) else -1)


def _last_offset(view: memoryview, pos: int) -> int:
    stored: int = INT64.unpack_from(view, pos)[0]
    if batches.is_batch(view, pos):
        delta: int = INT32.unpack_from(view, pos + batches.LAST_OFFSET_DELTA_POS)[0]
        return stored + delta
    return stored


def _entry_end(view: memoryview, pos: int) -> int:
    size: int = INT32.unpack_from(view, pos + SIZE_POS)[0]
    return pos + LOG_OVERHEAD + size
