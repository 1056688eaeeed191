"""What each producer last appended to one partition: idempotence (a retried batch is appended once)
and its open transaction (KIP-98).

An idempotent producer numbers its batches per partition: a producer id and epoch, and a base
sequence counting records from 0. Per producer the log keeps its epoch and its last five batches
(first and last sequence, first and last offset), as Kafka does, because a producer has at most five
requests in flight:
- a batch whose sequences equal one of those five is a retry of an appended batch: it is not
  appended again, and its first append's offsets are the answer (DuplicateBatch);
- otherwise its base sequence must follow the producer's last one (0 for a new producer or a new,
  higher epoch), else OutOfOrderSequenceError; an epoch lower than the producer's is
  InvalidProducerEpochError (a fenced, older instance).

A transactional producer's first transactional batch opens its transaction at the batch's first
offset; the transaction stays open until a marker (a control batch the coordinator has the leader
write: Log.append_marker) commits or aborts it. While it is open the producer may not write a
non-transactional batch (InvalidTxnStateError), it never expires, and the partition's last stable
offset stays at or below the first offset of the oldest open transaction. A marker from an older
epoch is refused (InvalidProducerEpochError), as is one from an older coordinator epoch
(TransactionCoordinatorFencedError); one for a producer with nothing open is accepted and ends
nothing. This module is a state machine over batches and markers: the log writes the markers and
the aborted-transaction index (kafkalog.log.txn_index) from what it answers (CompletedTxn).

Verification guards (KIP-890 part 1, Kafka's VerificationGuard): the leader asks the transaction
coordinator whether the producer's open transaction has this partition before appending, and the
append comes later, under the log's lock. Between the two a marker may end that transaction (the
client timed out and aborted): appended after it, the batch would open a transaction the coordinator
does not know, and no marker would ever close it. So the leader takes a guard (``verification_guard``)
before asking; a marker for the producer, a truncation, or an append of its transactional batch
drops it (as Kafka's); and a batch that would open a transaction here is refused
(InvalidTxnStateError) when it carries a guard that is no longer the current one. A batch
continuing a transaction open here needs none. Guards live in memory only: a restart ends every
request that held one.

Durability: the state is a function of the log (each batch carries its producer id, epoch and base
sequence; each marker its decision), saved as a snapshot ``<offset>.producers`` beside the segments
when a segment is rolled and when the log closes, and rebuilt on load from the latest snapshot at
or below the log end plus the batches and markers after it. So a broker SIGKILLed after appending a
batch but before answering knows the batch when the producer retries it.

    <offset, 20 digits>.producers (JSON): {"format_version": 2, "offset": N,
      "producers": {"<id>": {"epoch": E, "last_append_ms": T, "coordinator_epoch": C,
                             "txn_first_offset": F (-1: no open transaction),
                             "batches": [[first_seq, last_seq, first_offset, last_offset], ...]}}}

Format version 1 (no transactions: coordinator_epoch and txn_first_offset absent, read as -1) is
still read.
"""

from __future__ import annotations

import json
import logging
import os
import struct
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from kafkalog.errors import CorruptRecordError, LogError
from kafkalog.log.files import write_atomically
from kafkalog.record.batch_control import decode_marker

logger = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".producers"
FORMAT_VERSION = 2
_READABLE_VERSIONS = (1, 2)
BATCHES_KEPT = 5
"""A producer has at most five requests in flight: a retry is always one of its last five batches."""
SNAPSHOTS_KEPT = 2
_MAX_SEQUENCE = 2**31 - 1
_HEADER = struct.Struct(">qiibIhiqqqhii")
"""A record batch header (kafkalog.record.batch_format): base offset, length, leader epoch, magic, CRC,
attributes, last offset delta, base and max timestamp, producer id and epoch, base sequence, count."""
_TRANSACTIONAL_BIT = 0x10
_CONTROL_BIT = 0x20
NO_OFFSET = -1


class OutOfOrderSequenceError(LogError):
    """A batch's base sequence does not follow the producer's last one (a gap: something was lost)."""

    error_code = 45  # OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpochError(LogError):
    """A batch from an older epoch of a producer that has moved on (a fenced instance)."""

    error_code = 47  # INVALID_PRODUCER_EPOCH


class InvalidTxnStateError(LogError):
    """A producer with an open transaction wrote a batch outside it (a non-transactional one)."""

    error_code = 48  # INVALID_TXN_STATE


class TransactionCoordinatorFencedError(LogError):
    """A marker from a coordinator older than the last one that wrote this producer's marker."""

    error_code = 52  # TRANSACTION_COORDINATOR_FENCED


class ProducerSnapshotError(LogError):
    """A producer state snapshot cannot be read (it is set aside and the state rebuilt from the log)."""


class ProducerBatch(NamedTuple):
    """Who wrote a batch and which records it holds, from its header."""

    producer_id: int
    epoch: int
    first_sequence: int
    record_count: int
    transactional: bool = False
    control: bool = False
    """Set by a client: refused (only the log writes control batches, through append_marker)."""

    @property
    def last_sequence(self) -> int:
        return (self.first_sequence + self.record_count - 1) % (_MAX_SEQUENCE + 1)


class MarkerBatch(NamedTuple):
    """A transaction marker found in the log (on replay): who it ends, and how."""

    producer_id: int
    epoch: int
    commit: bool
    coordinator_epoch: int


class CompletedTxn(NamedTuple):
    """A transaction a marker ended: its producer, first offset, the marker's offset, and the
    partition's last stable offset after it (what an aborted one's index entry records)."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
    aborted: bool


class ProducerState(NamedTuple):
    """One producer as DescribeProducers tells it."""

    producer_id: int
    epoch: int
    last_sequence: int
    """The last sequence it appended (-1: none in this epoch)."""
    last_timestamp: int
    """When it last appended (ms; replayed from the log: its batches' largest timestamp)."""
    coordinator_epoch: int
    """The epoch of the coordinator that wrote its last marker (-1: none)."""
    current_txn_start_offset: int
    """The first offset of its open transaction (-1: none)."""


class VerificationGuard:
    """The token of one check with the transaction coordinator (see the module doc): an append
    carrying it may open its producer's transaction only while it is still the current guard."""

    __slots__ = ("created_ms", "producer_id")

    def __init__(self, producer_id: int, created_ms: int) -> None:
        self.producer_id = producer_id
        self.created_ms = created_ms

    def __repr__(self) -> str:
        return f"VerificationGuard(producer {self.producer_id}, {id(self):#x})"


class DuplicateBatch(NamedTuple):
    """The first append of a batch that came again: where it landed."""

    first_offset: int
    last_offset: int


@dataclass
class _Producer:
    epoch: int
    last_append_ms: int
    batches: deque[tuple[int, int, int, int]] = field(default_factory=lambda: deque(maxlen=BATCHES_KEPT))
    """(first sequence, last sequence, first offset, last offset), oldest first."""
    coordinator_epoch: int = -1
    txn_first_offset: int = NO_OFFSET
    """The first offset of its open transaction (NO_OFFSET: none)."""

    def new_epoch(self, epoch: int, now_ms: int) -> _Producer:
        """The producer in a higher epoch: its batches forgotten (sequences start over), its open
        transaction and coordinator epoch kept (a bumped producer still ends what it opened)."""
        return _Producer(
            epoch, now_ms, coordinator_epoch=self.coordinator_epoch, txn_first_offset=self.txn_first_offset
        )


def producer_batch(data: bytes | bytearray | memoryview) -> ProducerBatch | None:
    """The producer of ``data`` if it is exactly one record batch of an idempotent producer (a
    producer id >= 0); None for anything else (v0/v1 message sets, batches without a producer)."""
    if len(data) < _HEADER.size or data[16] != 2:
        return None
    fields = _HEADER.unpack_from(data)
    producer_id, epoch, sequence, count = fields[9], fields[10], fields[11], fields[12]
    if producer_id < 0 or fields[1] + 12 != len(data):
        return None
    attributes = fields[5]
    return ProducerBatch(
        producer_id, epoch, sequence, count, bool(attributes & _TRANSACTIONAL_BIT), bool(attributes & _CONTROL_BIT)
    )


class ProducerStateManager:
    """The producer state of one partition log (see the module doc). Not thread-safe: the log calls
    it under its own lock."""

    def __init__(self, directory: Path, *, expiration_ms: int) -> None:
        self.directory = directory
        self.expiration_ms = expiration_ms
        """A producer that appended nothing for this long is forgotten at the next snapshot."""
        self._producers: dict[int, _Producer] = {}
        self._open: dict[int, int] = {}
        """Producer id -> first offset of each open transaction, oldest first (transactions open
        in offset order, and the order survives deletions)."""
        self._guards: dict[int, VerificationGuard] = {}
        """Producer id -> its current verification guard (see the module doc)."""

    def __len__(self) -> int:
        return len(self._producers)

    # ------------------------------------------------------------------ appending

    def check(
        self, batch: ProducerBatch, *, verification_guard: VerificationGuard | None = None
    ) -> DuplicateBatch | None:
        """Before appending ``batch``: its first append if it is a retry, None if it may be appended;
        raises OutOfOrderSequenceError or InvalidProducerEpochError if it may not, and
        InvalidTxnStateError if it would open a transaction with a ``verification_guard`` that is no
        longer current (None: the caller verified nothing, e.g. the coordinator is another broker)."""
        duplicate = self._check_sequence(batch)
        if duplicate is None and verification_guard is not None:
            self._check_verified(batch, verification_guard)
        return duplicate

    def verification_guard(self, producer_id: int, now_ms: int) -> VerificationGuard:
        """The producer's current guard, created if it has none (taken before asking the coordinator)."""
        guard = self._guards.get(producer_id)
        if guard is None:
            guard = self._guards[producer_id] = VerificationGuard(producer_id, now_ms)
        return guard

    def _check_verified(self, batch: ProducerBatch, guard: VerificationGuard) -> None:
        if not batch.transactional:
            return
        known = self._producers.get(batch.producer_id)
        if known is not None and known.txn_first_offset != NO_OFFSET:
            return  # it continues a transaction open here: the coordinator knows this partition
        if self._guards.get(batch.producer_id) is not guard:
            raise InvalidTxnStateError(
                f"producer {batch.producer_id}: its transaction ended (a marker) after the coordinator "
                "verified this partition and before the batch was appended: it may not open another"
            )

    def _check_sequence(self, batch: ProducerBatch) -> DuplicateBatch | None:
        known = self._producers.get(batch.producer_id)
        if known is None:
            if batch.first_sequence != 0:
                raise OutOfOrderSequenceError(
                    f"producer {batch.producer_id} is unknown here and its batch starts at sequence "
                    f"{batch.first_sequence}, not 0"
                )
            return None
        if batch.epoch < known.epoch:
            raise InvalidProducerEpochError(
                f"producer {batch.producer_id} epoch {batch.epoch} is older than its current epoch {known.epoch}"
            )
        if batch.epoch > known.epoch:
            self._check_in_transaction(batch, known)
            if batch.first_sequence != 0:
                raise OutOfOrderSequenceError(
                    f"producer {batch.producer_id} starts epoch {batch.epoch} at sequence {batch.first_sequence}, not 0"
                )
            return None
        for first_sequence, last_sequence, first_offset, last_offset in known.batches:
            if (first_sequence, last_sequence) == (batch.first_sequence, batch.last_sequence):
                return DuplicateBatch(first_offset, last_offset)
        self._check_in_transaction(batch, known)
        expected = (known.batches[-1][1] + 1) % (_MAX_SEQUENCE + 1) if known.batches else 0
        if batch.first_sequence != expected:
            raise OutOfOrderSequenceError(
                f"producer {batch.producer_id} epoch {batch.epoch}: batch at sequence {batch.first_sequence}, "
                f"expected {expected}"
            )
        return None

    @staticmethod
    def _check_in_transaction(batch: ProducerBatch, known: _Producer) -> None:
        if known.txn_first_offset != NO_OFFSET and not batch.transactional:
            raise InvalidTxnStateError(
                f"producer {batch.producer_id} has a transaction open since offset {known.txn_first_offset} "
                "and sent a non-transactional batch"
            )

    def appended(self, batch: ProducerBatch, first_offset: int, last_offset: int, now_ms: int) -> None:
        """Record that ``batch`` now occupies ``first_offset``..``last_offset`` (a transactional one
        opens its producer's transaction there if none is open)."""
        known = self._producers.get(batch.producer_id)
        if known is None:
            known = self._producers[batch.producer_id] = _Producer(batch.epoch, now_ms)
        elif batch.epoch > known.epoch:
            known = self._producers[batch.producer_id] = known.new_epoch(batch.epoch, now_ms)
        known.last_append_ms = max(known.last_append_ms, now_ms)
        known.batches.append((batch.first_sequence, batch.last_sequence, first_offset, last_offset))
        if batch.transactional:
            # the guard has served: the transaction is open here now, and its batches need none
            self._guards.pop(batch.producer_id, None)
            if known.txn_first_offset == NO_OFFSET:
                known.txn_first_offset = first_offset
                self._open[batch.producer_id] = first_offset

    # ------------------------------------------------------------------ transactions

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int) -> None:
        """Before writing a marker: raises InvalidProducerEpochError for an older producer epoch,
        TransactionCoordinatorFencedError for an older coordinator epoch."""
        known = self._producers.get(producer_id)
        if known is None:
            return
        if epoch < known.epoch:
            raise InvalidProducerEpochError(
                f"a marker for producer {producer_id} epoch {epoch}, older than its current epoch {known.epoch}"
            )
        if coordinator_epoch < known.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"a marker for producer {producer_id} from coordinator epoch {coordinator_epoch}, older than "
                f"the {known.coordinator_epoch} of its last marker"
            )

    def marker_appended(self, marker: MarkerBatch, offset: int, now_ms: int) -> CompletedTxn | None:
        """Record the marker at ``offset``: the producer's open transaction ends (returned, with the
        last stable offset after it); None when nothing was open (the marker ends nothing)."""
        known = self._producers.get(marker.producer_id)
        if known is None:
            known = self._producers[marker.producer_id] = _Producer(marker.epoch, now_ms)
        elif marker.epoch > known.epoch:
            known = self._producers[marker.producer_id] = known.new_epoch(marker.epoch, now_ms)
        known.last_append_ms = max(known.last_append_ms, now_ms)
        known.coordinator_epoch = marker.coordinator_epoch
        # a check made before this marker is about the transaction it ended: no batch may open
        # another transaction on the strength of it
        self._guards.pop(marker.producer_id, None)
        first = known.txn_first_offset
        if first == NO_OFFSET:
            return None
        known.txn_first_offset = NO_OFFSET
        del self._open[marker.producer_id]
        stable = self.first_unstable_offset()
        return CompletedTxn(
            marker.producer_id, first, offset, offset + 1 if stable is None else stable, not marker.commit
        )

    def last_batch_offsets(self) -> set[int]:
        """The last offset of each producer's last batch: the cleaner keeps those batches (empty if
        need be), so that a reload finds each producer's epoch and last sequence."""
        return {p.batches[-1][3] for p in self._producers.values() if p.batches}

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction (None: none is open)."""
        return next(iter(self._open.values()), None)

    def states(self) -> list[ProducerState]:
        """Every producer known, by id."""
        return [
            ProducerState(
                pid,
                p.epoch,
                p.batches[-1][1] if p.batches else -1,
                p.last_append_ms,
                p.coordinator_epoch,
                p.txn_first_offset,
            )
            for pid, p in sorted(self._producers.items())
        ]

    # ------------------------------------------------------------------ snapshots

    def _snapshots(self) -> list[tuple[int, Path]]:
        found = []
        for path in self.directory.glob(f"*{SNAPSHOT_SUFFIX}"):
            stem = path.name[: -len(SNAPSHOT_SUFFIX)]
            if stem.isdigit():
                found.append((int(stem), path))
        return sorted(found)

    def take_snapshot(self, offset: int, now_ms: int) -> None:
        """Save the state as of ``offset`` (the log end: every batch below it is included), forget
        expired producers, keep the newest SNAPSHOTS_KEPT snapshots."""
        self._producers = {
            pid: p
            for pid, p in self._producers.items()
            if now_ms - p.last_append_ms < self.expiration_ms or p.txn_first_offset != NO_OFFSET
        }  # a producer with an open transaction is kept: its transaction holds the last stable offset
        # a guard whose check found the partition not in the transaction is never used: dropped as
        # an idle producer is (an append that still carries it is refused, as after a marker)
        self._guards = {pid: g for pid, g in self._guards.items() if now_ms - g.created_ms < self.expiration_ms}
        document = {
            "format_version": FORMAT_VERSION,
            "offset": offset,
            "producers": {
                str(pid): {
                    "epoch": p.epoch,
                    "last_append_ms": p.last_append_ms,
                    "coordinator_epoch": p.coordinator_epoch,
                    "txn_first_offset": p.txn_first_offset,
                    "batches": [list(b) for b in p.batches],
                }
                for pid, p in sorted(self._producers.items())
            },
        }
        path = self.directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"
        write_atomically(path, json.dumps(document).encode(), crash_prefix="producers")
        for _, old in self._snapshots()[:-SNAPSHOTS_KEPT]:
            old.unlink(missing_ok=True)

    def load(self, log_end_offset: int) -> int:
        """Take the newest readable snapshot at or below ``log_end_offset`` (snapshots above it
        describe data that recovery cut away: deleted); return the offset from which the log's
        batches must be replayed with ``replay``."""
        self._producers = {}
        self._open = {}
        self._guards = {}
        for offset, path in reversed(self._snapshots()):
            if offset > log_end_offset:
                logger.info("removing producer snapshot %s: beyond the log end %d", path, log_end_offset)
                path.unlink(missing_ok=True)
                continue
            try:
                self._producers = _read_snapshot(path)
            except ProducerSnapshotError as exc:
                logger.warning("%s; rebuilding the producer state from the log", exc)
                path.rename(path.with_name(path.name + ".unreadable"))
                continue
            opened = sorted((p.txn_first_offset, pid) for pid, p in self._producers.items() if p.txn_first_offset >= 0)
            self._open = {pid: first for first, pid in opened}
            return offset
        return 0

    def replay(self, entries: Iterable[tuple[ProducerBatch | MarkerBatch, int, int, int]]) -> list[CompletedTxn]:
        """Apply (batch or marker, first offset, last offset, max timestamp) of what was appended
        after the snapshot, in order; return the transactions the markers ended."""
        completed = []
        for entry, first_offset, last_offset, timestamp in entries:
            if isinstance(entry, MarkerBatch):
                done = self.marker_appended(entry, first_offset, timestamp)
                if done is not None:
                    completed.append(done)
            else:
                self.appended(entry, first_offset, last_offset, timestamp)
        return completed

    def truncate(self) -> None:
        """The log lost data (truncation): the state is rebuilt by the caller from what remains;
        every guard is dropped (a check made before may be about a transaction cut away)."""
        self._producers = {}
        self._open = {}
        self._guards = {}
        for _, path in self._snapshots():
            path.unlink(missing_ok=True)


def _read_snapshot(path: Path) -> dict[int, _Producer]:
    try:
        document = json.loads(path.read_bytes())
        if document.get("format_version") not in _READABLE_VERSIONS:
            raise ValueError(f"unknown format_version {document.get('format_version')!r}")
        producers = {}
        for pid, entry in document["producers"].items():
            producer = _Producer(
                int(entry["epoch"]),
                int(entry["last_append_ms"]),
                coordinator_epoch=int(entry.get("coordinator_epoch", -1)),  # absent in version 1
                txn_first_offset=int(entry.get("txn_first_offset", NO_OFFSET)),
            )
            for first_seq, last_seq, first_offset, last_offset in entry["batches"][-BATCHES_KEPT:]:
                producer.batches.append((int(first_seq), int(last_seq), int(first_offset), int(last_offset)))
            producers[int(pid)] = producer
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ProducerSnapshotError(f"producer snapshot {path} is unreadable: {exc}") from exc
    return producers


def batches_in_file(
    fd: int, start: int, end: int, min_offset: int
) -> Iterable[tuple[ProducerBatch | MarkerBatch, int, int, int]]:
    """(producer batch or marker, first offset, last offset, max timestamp) of every idempotent or
    transactional record batch and every transaction marker in bytes ``start``..``end`` of a
    segment file whose last offset is at least ``min_offset``, read header by header (the log was
    validated when it was loaded; a marker's one record is read and decoded)."""
    position = start
    chunk = b""
    chunk_start = start
    while position + 17 <= end:
        if position + min(_HEADER.size, end - position) > chunk_start + len(chunk):
            chunk_start = position
            chunk = os.pread(fd, min(4 << 20, end - position), position)
            if len(chunk) < 17:
                return
        at = position - chunk_start
        size = int.from_bytes(chunk[at + 8 : at + 12], "big", signed=True) + 12
        if size < 12:
            return
        if chunk[at + 16] == 2 and at + _HEADER.size <= len(chunk):
            fields = _HEADER.unpack_from(chunk, at)
            base_offset, attributes, delta, max_timestamp, producer_id = (
                fields[0],
                fields[5],
                fields[6],
                fields[8],
                fields[9],
            )
            last_offset = base_offset + delta
            if producer_id >= 0 and last_offset >= min_offset:
                if not attributes & _CONTROL_BIT:
                    transactional = bool(attributes & _TRANSACTIONAL_BIT)
                    # a batch's sequences span its offset deltas: an idempotent producer's batch
                    # the cleaner emptied keeps them (Kafka counts a batch's sequences the same way)
                    batch = ProducerBatch(producer_id, fields[10], fields[11], delta + 1, transactional)
                    yield batch, base_offset, last_offset, max_timestamp
                else:
                    marker = _marker_at(fd, position, size, producer_id, fields[10])
                    if marker is not None:
                        yield marker, base_offset, last_offset, max_timestamp
        position += size


def _marker_at(fd: int, position: int, size: int, producer_id: int, epoch: int) -> MarkerBatch | None:
    try:
        marker = decode_marker(os.pread(fd, size, position))
    except CorruptRecordError as exc:
        # the log accepted it (only the log writes control batches): a marker it cannot read again
        # is damage that verification reports; the transaction it ended stays open
        logger.error("a transaction marker of producer %d is unreadable: %s", producer_id, exc)  # noqa: TRY400 (the reason is the message)
        return None
    return MarkerBatch(producer_id, epoch, marker.commit, marker.coordinator_epoch)
