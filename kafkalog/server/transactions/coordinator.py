"""The transaction coordinator: what InitProducerId (with a transactional id), AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn, DescribeTransactions and ListTransactions do to a transactional id's state.

Rules (Kafka's, transaction version 1):
- A transactional id has one producer id; each InitProducerId bumps its epoch, fencing every older
  instance (PRODUCER_FENCED on their next request). An id whose epoch would pass 32766 gets a new
  producer id. A transaction still open when a new instance initialises is aborted first, with the
  bumped epoch, and the new instance is told CONCURRENT_TRANSACTIONS until the abort is written.
- A transaction begins with its first AddPartitionsToTxn or AddOffsetsToTxn; it ends with EndTxn:
  the decision (PrepareCommit/PrepareAbort) is stored, then a marker goes to every partition and
  group of the transaction (kafkalog.server.transactions.markers), then CompleteCommit/CompleteAbort
  is stored. Between the two the id answers CONCURRENT_TRANSACTIONS, so the producer's next
  transaction never overtakes the markers of its last.
- A transaction open longer than its timeout is aborted by the coordinator with a bumped epoch
  (the producer, a zombie by then, is fenced).
- Every change is stored (kafkalog.server.transactions.store) before the request that made it is
  answered; a coordinator that restarts (or takes over an id after a failover) reads the stored
  state, writes the markers of every decision stored but not completed, and times out what was open.
  One change is stored later, by the timer: Complete*, once the markers are written. Nothing waits
  on it (the next AddPartitionsToTxn stores a newer state anyway), and losing it in a crash costs
  only markers written again from the stored Prepare* (a marker that finds no open transaction
  ends nothing): so EndTxn's answer waits for one stored write, not two.

Markers to this broker's partitions are written before EndTxn is answered, so a producer that saw
its commit succeed finds its records readable at once; markers that must cross to other brokers are
written by the timer thread when they cannot be at once.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from kafkalog.errors import KafkalogError
from kafkalog.protocol import ErrorCode
from kafkalog.server.config import TransactionSettings
from kafkalog.server.transactions.state import (
    MAX_EPOCH,
    NO_EPOCH,
    NO_PRODUCER_ID,
    CoordinatorFencedError,
    TransactionMetadata,
    TxnState,
)

logger = logging.getLogger(__name__)

_TICK_S = 0.2
_RELOAD_EVERY_S = 5.0
"""How often the timer looks in the store for ids this broker has come to coordinate (a failover)."""


@dataclass(frozen=True, slots=True)
class Targets:
    """Where a transaction's markers still have to go."""

    partitions: frozenset[tuple[str, int]]
    groups: frozenset[str]

    def __bool__(self) -> bool:
        return bool(self.partitions or self.groups)


class RecordStore(Protocol):
    """Where the records are kept (kafkalog.server.transactions.store); each call raises a
    KafkalogError with the error code to answer when the store cannot serve it."""

    def load(self, transactional_id: str) -> TransactionMetadata | None: ...

    def ids(self) -> list[str]: ...

    def save(self, record: TransactionMetadata) -> None: ...

    def delete(self, transactional_id: str) -> None: ...


class MarkerWriter(Protocol):
    """Writes a transaction's markers; returns the targets it could not reach yet (retried later).
    Raises CoordinatorFencedError if a partition has heard from a newer coordinator of the id."""

    def write(
        self, producer_id: int, producer_epoch: int, *, commit: bool, coordinator_epoch: int, targets: Targets
    ) -> Targets: ...


@dataclass(frozen=True, slots=True)
class Initialized:
    """InitProducerId's answer."""

    error: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_EPOCH


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


class TransactionCoordinator:
    """The transactional ids this broker coordinates (see the module doc). Thread-safe: one lock over
    the records; markers are written outside it, one completion per id at a time."""

    def __init__(
        self,
        settings: TransactionSettings,
        store: RecordStore,
        markers: MarkerWriter,
        *,
        coordinates: Callable[[str], bool],
        next_producer_id: Callable[[], int],
        membership: Callable[[], object] = lambda: None,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.settings = settings
        self.store = store
        self.markers = markers
        self.coordinates = coordinates
        self.next_producer_id = next_producer_id
        self.membership = membership
        """The live brokers (anything comparable): when they change, which ids this broker
        coordinates may have changed, and every record kept is read again from the store."""
        self._members = membership()
        self.clock = clock
        self._lock = threading.RLock()
        self._records: dict[str, TransactionMetadata] = {}
        self._unwritten: dict[str, Targets] = {}
        """Per id in Prepare*: the markers not written yet (all of them until the first attempt)."""
        self._completing: set[str] = set()
        self._unsaved: set[str] = set()
        """Ids whose kept record (Complete*) is newer than the stored one: the timer stores them."""
        self._stopping = threading.Event()
        self._timer: threading.Thread | None = None
        self._last_reload = 0.0
        self._last_timeout_check = 0

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self._reload()
        self._timer = threading.Thread(target=self._run_timer, name="kafkalog-txn-coordinator", daemon=True)
        self._timer.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._timer is not None:
            self._timer.join(5)
        self._save_unsaved()

    def _run_timer(self) -> None:
        while not self._stopping.wait(_TICK_S):
            try:
                self.tick()
            except Exception:  # a bug here must not stop every transaction's timeouts for good
                logger.exception("transaction coordinator timer failed")

    def tick(self) -> None:
        """Write pending markers, abort transactions past their timeout, forget expired ids, and
        pick up ids this broker has come to coordinate."""
        self._save_unsaved()  # (forgets every record first if the live brokers changed)
        if time.monotonic() - self._last_reload >= _RELOAD_EVERY_S:
            self._reload()
        now = self.clock()
        with self._lock:
            records = list(self._records.values())
        check_timeouts = now - self._last_timeout_check >= self.settings.abort_check_interval_ms
        if check_timeouts:
            self._last_timeout_check = now
        for record in records:
            if not self.coordinates(record.transactional_id):
                continue  # another broker's now (forgotten at the next reload)
            if record.state.preparing:
                self._complete(record.transactional_id)
            elif check_timeouts and record.state == TxnState.ONGOING and now - record.start_ms > record.timeout_ms:
                self._abort_timed_out(record.transactional_id, now)
            elif check_timeouts and record.state.ended and now - record.update_ms > self.settings.id_expiration_ms:
                self._expire(record.transactional_id, now)

    def _reload(self) -> None:
        self._last_reload = time.monotonic()
        try:
            ids = self.store.ids()
        except KafkalogError as exc:
            logger.warning("cannot list stored transactions: %s", exc)
            return
        with self._lock:
            for known in [i for i in self._records if not self.coordinates(i)]:
                del self._records[known]  # another broker coordinates it now
                self._unwritten.pop(known, None)
                self._unsaved.discard(known)
            for transactional_id in ids:
                if transactional_id not in self._records and self.coordinates(transactional_id):
                    try:
                        self._get(transactional_id)
                    except KafkalogError as exc:
                        logger.warning("cannot load transaction %r: %s", transactional_id, exc)

    # ------------------------------------------------------------------ records

    def _check_membership(self) -> None:
        """Forget every record kept if the live brokers changed (see ``membership``). Under the lock."""
        members = self.membership()
        if members != self._members:
            self._members = members
            self._records.clear()
            self._unwritten.clear()
            self._unsaved.clear()

    def _get(self, transactional_id: str) -> TransactionMetadata | None:
        """The id's record. Read from the store the first time, this coordinator takes the id up:
        the record's coordinator epoch is raised and stored at once, so the markers and writes of
        the coordinator before it are refused from now on. Under the lock."""
        self._check_membership()
        record = self._records.get(transactional_id)
        if record is None:
            record = self.store.load(transactional_id)
            if record is not None:
                record.coordinator_epoch += 1
                self.store.save(record)
                self._records[transactional_id] = record
        return record

    def _let_go(self, transactional_id: str) -> None:
        """A newer coordinator has the id: keep nothing of it. Under the lock."""
        self._records.pop(transactional_id, None)
        self._unwritten.pop(transactional_id, None)
        self._unsaved.discard(transactional_id)

    def _store(self, record: TransactionMetadata) -> None:
        """Make ``record`` the id's state: stored first, then kept. Under the lock; on a store
        error the previous state stays (and a coordinator fenced by a newer one lets the id go)."""
        if not self.coordinates(record.transactional_id):
            self._let_go(record.transactional_id)
            raise CoordinatorFencedError(f"this broker no longer coordinates {record.transactional_id!r}")
        record.update_ms = self.clock()
        try:
            self.store.save(record)
        except CoordinatorFencedError:
            self._let_go(record.transactional_id)
            raise
        self._records[record.transactional_id] = record
        self._unsaved.discard(record.transactional_id)

    def _keep(self, record: TransactionMetadata) -> None:
        """Make ``record`` the id's state now and store it at the timer's next tick (Complete*
        only: see the module doc). Under the lock."""
        record.update_ms = self.clock()
        self._records[record.transactional_id] = record
        self._unsaved.add(record.transactional_id)

    def _save_unsaved(self) -> None:
        with self._lock:
            self._check_membership()
            for transactional_id in sorted(self._unsaved):
                record = self._records.get(transactional_id)
                try:
                    if record is not None:
                        self._store(record)
                except CoordinatorFencedError:
                    continue  # let go by _store
                except KafkalogError as exc:
                    logger.warning("cannot store the transaction of %r: %s (retried)", transactional_id, exc)
                    continue
                self._unsaved.discard(transactional_id)

    def _check_producer(
        self, transactional_id: str, producer_id: int, epoch: int
    ) -> tuple[int, TransactionMetadata | None]:
        """(error, record) for a request of an initialised producer. Under the lock."""
        if not self.coordinates(transactional_id):
            return ErrorCode.NOT_COORDINATOR, None
        record = self._get(transactional_id)
        if record is None or record.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, record
        if epoch != record.producer_epoch:
            return ErrorCode.PRODUCER_FENCED, record
        return ErrorCode.NONE, record

    # ------------------------------------------------------------------ InitProducerId

    def init_producer_id(
        self, transactional_id: str, timeout_ms: int, producer_id: int = NO_PRODUCER_ID, epoch: int = NO_EPOCH
    ) -> Initialized:
        """The producer id and (bumped) epoch of a new instance of ``transactional_id``; with
        ``producer_id``/``epoch`` (KIP-360) only if they are the id's current or previous ones."""
        if (producer_id == NO_PRODUCER_ID) != (epoch == NO_EPOCH):
            return Initialized(ErrorCode.INVALID_REQUEST)  # KIP-360 names both, or neither
        if not self.coordinates(transactional_id):
            return Initialized(ErrorCode.NOT_COORDINATOR)
        if not 0 < timeout_ms <= self.settings.max_timeout_ms:
            return Initialized(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        with self._lock:
            try:
                record = self._get(transactional_id)
                if record is None:
                    record = TransactionMetadata(transactional_id, self.next_producer_id(), NO_EPOCH, timeout_ms)
                if record.state.preparing or transactional_id in self._completing:
                    return Initialized(ErrorCode.CONCURRENT_TRANSACTIONS)
                if producer_id != NO_PRODUCER_ID and record.producer_epoch != NO_EPOCH:
                    # (an id just made: its new producer id is the answer, as Kafka gives it to a
                    # producer recovering from UNKNOWN_PRODUCER_ID)
                    known = producer_id == record.producer_id and epoch in (record.producer_epoch, record.last_epoch)
                    if not known:
                        return Initialized(ErrorCode.PRODUCER_FENCED)
                    if epoch == record.last_epoch != NO_EPOCH and record.state.ended:
                        # a retry of the InitProducerId that bumped it: the same answer again
                        return Initialized(ErrorCode.NONE, record.producer_id, record.producer_epoch)
                if record.state == TxnState.ONGOING:
                    self._prepare(record, commit=False, bump_epoch=True)
                    fencing = record.transactional_id
                else:
                    fencing = None
                    bumped = dataclasses.replace(record, partitions=set(), groups=set(), start_ms=-1)
                    # KIP-360's own bump may be retried with the epoch it bumped; a new instance's
                    # may not: no older instance may pass for it
                    bumped.last_epoch = record.producer_epoch if producer_id != NO_PRODUCER_ID else NO_EPOCH
                    if record.producer_epoch + 1 >= MAX_EPOCH - 1:
                        bumped.producer_id, bumped.producer_epoch, bumped.last_epoch = (
                            self.next_producer_id(),
                            0,
                            NO_EPOCH,
                        )
                    else:
                        bumped.producer_epoch = record.producer_epoch + 1
                    bumped.timeout_ms, bumped.state = timeout_ms, TxnState.EMPTY
                    self._store(bumped)
            except KafkalogError as exc:
                logger.warning("InitProducerId of %r: %s", transactional_id, exc)
                return Initialized(int(getattr(exc, "error_code", ErrorCode.COORDINATOR_NOT_AVAILABLE)))
        if fencing is not None:
            logger.info("transactional id %r: a new instance fences the open transaction; aborting it", fencing)
            self._complete(fencing, claimed=True)
            return Initialized(ErrorCode.CONCURRENT_TRANSACTIONS)
        return Initialized(ErrorCode.NONE, bumped.producer_id, bumped.producer_epoch)

    # ------------------------------------------------------------------ adding to a transaction

    def add_partitions(
        self, transactional_id: str, producer_id: int, epoch: int, partitions: Iterable[tuple[str, int]]
    ) -> int:
        """Add ``partitions`` to the producer's transaction (beginning it); the error code."""
        return self._add(transactional_id, producer_id, epoch, partitions=set(partitions), groups=set())

    def add_group(self, transactional_id: str, producer_id: int, epoch: int, group: str) -> int:
        """Add ``group``'s offsets to the producer's transaction (beginning it); the error code."""
        return self._add(transactional_id, producer_id, epoch, partitions=set(), groups={group})

    def _add(
        self, transactional_id: str, producer_id: int, epoch: int, *, partitions: set[tuple[str, int]], groups: set[str]
    ) -> int:
        with self._lock:
            try:
                error, record = self._check_producer(transactional_id, producer_id, epoch)
                if error != ErrorCode.NONE or record is None:
                    return error
                if record.state.preparing or transactional_id in self._completing:
                    return ErrorCode.CONCURRENT_TRANSACTIONS
                if record.state not in (
                    TxnState.ONGOING,
                    TxnState.EMPTY,
                    TxnState.COMPLETE_COMMIT,
                    TxnState.COMPLETE_ABORT,
                ):
                    return ErrorCode.INVALID_TXN_STATE
                if record.state == TxnState.ONGOING and partitions <= record.partitions and groups <= record.groups:
                    return ErrorCode.NONE  # nothing new: nothing to store
                if record.state == TxnState.ONGOING:
                    added = dataclasses.replace(
                        record, partitions=record.partitions | partitions, groups=record.groups | groups
                    )
                else:
                    added = dataclasses.replace(
                        record, partitions=set(partitions), groups=set(groups), start_ms=self.clock()
                    )
                added.state = TxnState.ONGOING
                self._store(added)
            except KafkalogError as exc:
                logger.warning("adding to the transaction of %r: %s", transactional_id, exc)
                return int(getattr(exc, "error_code", ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return ErrorCode.NONE

    def verify(
        self, transactional_id: str, producer_id: int, epoch: int, partitions: Iterable[tuple[str, int]]
    ) -> dict[tuple[str, int], int]:
        """KIP-890 part 1: for each partition, NONE if the producer's open transaction has it, else
        why not (a transactional write to it is then refused). Nothing changes."""
        wanted = list(partitions)
        with self._lock:
            try:
                error, record = self._check_producer(transactional_id, producer_id, epoch)
            except KafkalogError as exc:
                return dict.fromkeys(wanted, int(getattr(exc, "error_code", ErrorCode.COORDINATOR_NOT_AVAILABLE)))
            if error != ErrorCode.NONE or record is None:
                return dict.fromkeys(wanted, error)
            if record.state.preparing or transactional_id in self._completing:
                return dict.fromkeys(wanted, ErrorCode.CONCURRENT_TRANSACTIONS)  # Kafka's: retried
            ongoing = record.state == TxnState.ONGOING
            return {
                p: ErrorCode.NONE if ongoing and p in record.partitions else ErrorCode.INVALID_TXN_STATE for p in wanted
            }

    def verify_group(self, transactional_id: str, producer_id: int, epoch: int, group: str) -> int:
        """Whether a TxnOffsetCommit of the producer for ``group`` belongs to its open transaction
        (AddOffsetsToTxn added the group): NONE, or why not. Nothing changes."""
        with self._lock:
            try:
                error, record = self._check_producer(transactional_id, producer_id, epoch)
            except KafkalogError as exc:
                return int(getattr(exc, "error_code", ErrorCode.COORDINATOR_NOT_AVAILABLE))
            if error != ErrorCode.NONE or record is None:
                return error
            if record.state == TxnState.ONGOING and group in record.groups:
                return ErrorCode.NONE
            return ErrorCode.INVALID_TXN_STATE

    # ------------------------------------------------------------------ EndTxn

    def end_transaction(self, transactional_id: str, producer_id: int, epoch: int, *, commit: bool) -> int:
        """Commit or abort the producer's transaction; the error code. Answered once the decision is
        stored and the markers to this broker's partitions are written."""
        with self._lock:
            try:
                error, record = self._check_producer(transactional_id, producer_id, epoch)
                if error != ErrorCode.NONE or record is None:
                    return error
                state = record.state
                wanted = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
                done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
                if state.preparing or transactional_id in self._completing:
                    return ErrorCode.CONCURRENT_TRANSACTIONS if state in (wanted, done) else ErrorCode.INVALID_TXN_STATE
                if state == done:
                    return ErrorCode.NONE  # a retry of an end that was written
                if state != TxnState.ONGOING:
                    return ErrorCode.INVALID_TXN_STATE
                self._prepare(record, commit=commit, bump_epoch=False)
            except KafkalogError as exc:
                logger.warning("ending the transaction of %r: %s", transactional_id, exc)
                return int(getattr(exc, "error_code", ErrorCode.COORDINATOR_NOT_AVAILABLE))
        self._complete(transactional_id, claimed=True)
        return ErrorCode.NONE

    def _prepare(self, record: TransactionMetadata, *, commit: bool, bump_epoch: bool) -> None:
        """Store the decision and claim its completion for the caller, who must then call
        ``_complete(..., claimed=True)``: so the timer cannot write the markers meanwhile and let
        EndTxn answer before they are written. Under the lock."""
        prepared = dataclasses.replace(record, partitions=set(record.partitions), groups=set(record.groups))
        prepared.state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        if bump_epoch and record.producer_epoch + 1 < MAX_EPOCH:
            prepared.last_epoch, prepared.producer_epoch = record.producer_epoch, record.producer_epoch + 1
        self._store(prepared)
        self._unwritten[record.transactional_id] = Targets(frozenset(prepared.partitions), frozenset(prepared.groups))
        self._completing.add(record.transactional_id)

    def _complete(self, transactional_id: str, *, claimed: bool = False) -> None:
        """Write the markers of a stored decision; once all are written, store Complete*. Unless
        ``claimed`` (by ``_prepare``), only if no other thread is completing it."""
        with self._lock:
            record = self._records.get(transactional_id)
            if not claimed and transactional_id in self._completing:
                return
            if record is None or not record.state.preparing or not self.coordinates(transactional_id):
                self._completing.discard(transactional_id)
                return  # (an id another broker coordinates now is that broker's to complete)
            self._completing.add(transactional_id)
            targets = self._unwritten.get(transactional_id) or Targets(
                frozenset(record.partitions), frozenset(record.groups)
            )
        try:
            commit = record.state == TxnState.PREPARE_COMMIT
            left = self.markers.write(
                record.producer_id,
                record.producer_epoch,
                commit=commit,
                coordinator_epoch=record.coordinator_epoch,
                targets=targets,
            )
            with self._lock:
                if self._records.get(transactional_id) is not record:
                    return  # let go meanwhile (the brokers changed): the next coordinator completes it
                if left:
                    self._unwritten[transactional_id] = left
                    logger.info(
                        "transaction of %r: %d marker(s) wait for their broker",
                        transactional_id,
                        len(left.partitions) + len(left.groups),
                    )
                    return
                completed = dataclasses.replace(record, partitions=set(), groups=set(), start_ms=-1)
                completed.state = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
                self._keep(completed)
                self._unwritten.pop(transactional_id, None)
        except CoordinatorFencedError as exc:
            logger.warning("letting transactional id %r go: %s", transactional_id, exc)
            with self._lock:
                self._let_go(transactional_id)
        except KafkalogError as exc:
            logger.warning("completing the transaction of %r: %s (retried)", transactional_id, exc)
        finally:
            with self._lock:
                self._completing.discard(transactional_id)

    def _abort_timed_out(self, transactional_id: str, now: int) -> None:
        with self._lock:
            record = self._records.get(transactional_id)
            if record is None or record.state != TxnState.ONGOING or now - record.start_ms <= record.timeout_ms:
                return
            logger.warning(
                "aborting the transaction of %r (producer %d epoch %d): open %d ms, longer than its timeout %d ms",
                transactional_id, record.producer_id, record.producer_epoch, now - record.start_ms, record.timeout_ms,
            )  # fmt: skip
            try:
                self._prepare(record, commit=False, bump_epoch=True)
            except KafkalogError as exc:
                logger.warning("cannot abort the transaction of %r: %s (retried)", transactional_id, exc)
                return
        self._complete(transactional_id, claimed=True)

    def _expire(self, transactional_id: str, now: int) -> None:
        with self._lock:
            record = self._records.get(transactional_id)
            if record is None or not record.state.ended or now - record.update_ms <= self.settings.id_expiration_ms:
                return
            if not self.coordinates(transactional_id):
                return  # another broker's now
            try:
                self.store.delete(transactional_id)
            except KafkalogError as exc:
                logger.warning("cannot forget transactional id %r: %s", transactional_id, exc)
                return
            del self._records[transactional_id]
            self._unsaved.discard(transactional_id)
            logger.info("forgot transactional id %r: unused for %d ms", transactional_id, now - record.update_ms)

    # ------------------------------------------------------------------ describing

    def describe(self, transactional_id: str) -> tuple[int, TransactionMetadata | None]:
        """(error, a copy of the record) for DescribeTransactions."""
        if not self.coordinates(transactional_id):
            return ErrorCode.NOT_COORDINATOR, None
        with self._lock:
            try:
                record = self._get(transactional_id)
            except KafkalogError as exc:
                return int(getattr(exc, "error_code", ErrorCode.COORDINATOR_NOT_AVAILABLE)), None
            if record is None:
                return ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None
            return ErrorCode.NONE, dataclasses.replace(
                record, partitions=set(record.partitions), groups=set(record.groups)
            )

    def listed(self) -> list[TransactionMetadata]:
        """Every id this broker coordinates (ListTransactions), as copies."""
        with self._lock:
            return [
                dataclasses.replace(r, partitions=set(r.partitions), groups=set(r.groups))
                for i, r in sorted(self._records.items())
                if self.coordinates(i)
            ]
