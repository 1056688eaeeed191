"""Read committed: what a consumer at ``isolation_level=1`` keeps of a fetched record set.

Role: Kafka's consumer-side filter of transactions (the Java consumer's CompletedFetch), applied to
the bytes one partition's Fetch answer carried and the messages decoded from them. A broker
serving read-committed fetches stops at the last stable offset and lists the aborted transactions
that touch what it sent (producer id, first offset); it still sends the batches of aborted
transactions and the control batches (transaction markers). Here, walking the record set's
entries in order:

- an aborted transaction whose first offset is at or before a batch's last offset makes its
  producer "aborted" from then on, until that producer's ABORT marker;
- a transactional batch of an aborted producer is skipped (``aborted``);
- every control batch is skipped (``control``): a COMMIT or ABORT marker is never a message.

Invariants: the messages kept are exactly those of non-control batches not skipped as aborted, in
their order; every skipped batch is reported as one ``Skipped`` range of the offsets it held, so a
caller accounting for offsets (the loader's reconciliation) can tell a gap from a loss. Entries of
message sets (magic 0 and 1) predate transactions and are always kept. The walk reads each entry's
fixed header only; the records of a control batch are decoded (one marker each).
"""

from __future__ import annotations

import heapq
import struct
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from operator import attrgetter
from typing import Literal, NamedTuple

from kafkalog.errors import CorruptRecordError
from kafkalog.record import Message
from kafkalog.record.batch_format import (
    CONTROL_BIT,
    LOG_OVERHEAD,
    MAGIC,
    MAGIC_POS,
    MIN_BATCH_LENGTH,
    NO_PRODUCER_ID,
    TRANSACTIONAL_BIT,
    decode_batch,
)

Isolation = Literal["read_uncommitted", "read_committed"]
"""A consumer's isolation level, as Kafka's ``isolation.level`` spells it."""

ISOLATION_LEVELS: dict[str, int] = {"read_uncommitted": 0, "read_committed": 1}
"""The wire value of each (Fetch v4+, ListOffsets v2+)."""

ABORT = 0
COMMIT = 1
"""The control record types of a transaction marker (the key's second int16)."""

_ENTRY_START = struct.Struct(">qi")  # base offset, length: alike for message sets and record batches
_BATCH_FIELDS = struct.Struct(">hi")  # attributes, last offset delta (at byte 21 of a batch)
_ATTRIBUTES_POS = 21
_PRODUCER_ID = struct.Struct(">q")
_PRODUCER_ID_POS = 43
_CONTROL_KEY = struct.Struct(">hh")  # version, type


class Skipped(NamedTuple):
    """Offsets [first, last] of one batch a read-committed consumer does not return, and why."""

    first: int
    last: int
    reason: Literal["aborted", "control"]

    @property
    def offsets(self) -> int:
        return self.last - self.first + 1


class Committed(NamedTuple):
    """What a read-committed consumer keeps of a fetched record set."""

    messages: list[Message]
    skipped: tuple[Skipped, ...]
    last_offset: int
    """The last offset of the complete entries walked, kept or skipped (-1: none)."""


def control_type(message: Message) -> int:
    """ABORT or COMMIT, from a control record's key; CorruptRecordError if it is not a marker."""
    if message.key is None or len(message.key) < _CONTROL_KEY.size:
        raise CorruptRecordError(f"the control record at offset {message.offset} has no marker key")
    _version, kind = _CONTROL_KEY.unpack_from(message.key)
    return int(kind)


def committed_only(
    data: bytes | memoryview, messages: list[Message], aborted: Sequence[tuple[int, int]] | None
) -> Committed:
    """The messages of ``data`` (as decoded, in offset order) a read-committed consumer returns,
    the batches it skips, and the last offset walked. ``aborted``: the fetch answer's
    ``aborted_transactions`` as (producer id, first offset) pairs (None or empty: none)."""
    view = memoryview(data)
    pending = sorted((first, producer) for producer, first in (aborted or ()))
    aborted_producers: set[int] = set()
    skipped: list[Skipped] = []
    last_offset = -1
    pos = 0
    while pos + LOG_OVERHEAD <= len(view):
        base, length = _ENTRY_START.unpack_from(view, pos)
        end = pos + LOG_OVERHEAD + length
        if length < 0 or end > len(view):
            break  # a partial trailing entry: the broker cut the set at its size limit
        if length < MIN_BATCH_LENGTH or view[pos + MAGIC_POS] != MAGIC:
            last_offset = max(last_offset, base)  # a message set entry: its offset is its last message's
            pos = end
            continue
        attributes, last_delta = _BATCH_FIELDS.unpack_from(view, pos + _ATTRIBUTES_POS)
        last = base + last_delta
        last_offset = last
        (producer,) = _PRODUCER_ID.unpack_from(view, pos + _PRODUCER_ID_POS)
        control = bool(attributes & CONTROL_BIT)
        if producer != NO_PRODUCER_ID:
            while pending and pending[0][0] <= last:
                aborted_producers.add(heapq.heappop(pending)[1])
            if control and producer in aborted_producers and _is_abort(view, pos, end):
                aborted_producers.discard(producer)
            elif attributes & TRANSACTIONAL_BIT and not control and producer in aborted_producers:
                skipped.append(Skipped(base, last, "aborted"))
        if control:
            skipped.append(Skipped(base, last, "control"))
        pos = end
    if not skipped:
        return Committed(messages, (), last_offset)
    return Committed(_without(messages, skipped), tuple(skipped), last_offset)


def holds_transactions(data: bytes | memoryview) -> bool:
    """Whether ``data`` (a fetched record set) holds a transactional or control batch: what a
    read-committed consumer may have to leave out, and what a producer cannot send on as stored.
    Reads each entry's fixed header only; a partial trailing entry is not looked at."""
    view = memoryview(data)
    pos = 0
    while pos + LOG_OVERHEAD <= len(view):
        _, length = _ENTRY_START.unpack_from(view, pos)
        end = pos + LOG_OVERHEAD + length
        if length < 0 or end > len(view):
            return False
        if length >= MIN_BATCH_LENGTH and view[pos + MAGIC_POS] == MAGIC:
            attributes, _ = _BATCH_FIELDS.unpack_from(view, pos + _ATTRIBUTES_POS)
            if attributes & (TRANSACTIONAL_BIT | CONTROL_BIT):
                return True
        pos = end
    return False


def _is_abort(view: memoryview, pos: int, end: int) -> bool:
    _, records = decode_batch(view, pos, end=end, verify_crc=False)  # the decode checked the CRC
    return any(control_type(record) == ABORT for record in records)


def _without(messages: list[Message], skipped: list[Skipped]) -> list[Message]:
    """``messages`` without those inside a skipped range (both in offset order): the kept runs
    between the ranges, found by binary search (a fetch holds thousands of messages and a few
    batches left out; a loop over every message cost a third of the fetch)."""
    kept: list[Message] = []
    at = 0
    for gap in skipped:
        begin = bisect_left(messages, gap.first, lo=at, key=_OFFSET)
        kept += messages[at:begin]
        at = bisect_right(messages, gap.last, lo=begin, key=_OFFSET)
    kept += messages[at:]
    return kept


_OFFSET = attrgetter("offset")
