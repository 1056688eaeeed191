"""The transaction coordinator's rules, over its real file store, with a marker writer that records
what it is asked to write (and can be made to fail, as an unreachable broker does)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalog.protocol import ErrorCode
from kafkalog.server.config import TransactionSettings
from kafkalog.server.transactions import TransactionCoordinator, TxnState
from kafkalog.server.transactions.coordinator import Targets
from kafkalog.server.transactions.store import FileTransactionStore, TransactionStoreError

TXN = "txn-1"
TOPIC = "t"


class RecordingMarkers:
    """Writes nothing; remembers (producer id, epoch, commit, partitions, groups); ``down`` makes
    every target unreachable."""

    def __init__(self) -> None:
        self.written: list[tuple[int, int, bool, frozenset[tuple[str, int]], frozenset[str]]] = []
        self.down = False

    def write(self, producer_id: int, producer_epoch: int, *, commit: bool, targets: Targets) -> Targets:
        if self.down:
            return targets
        self.written.append((producer_id, producer_epoch, commit, targets.partitions, targets.groups))
        return Targets(frozenset(), frozenset())


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


class Ids:
    def __init__(self) -> None:
        self.next = 100

    def __call__(self) -> int:
        self.next += 1
        return self.next


@pytest.fixture
def parts(tmp_path: Path) -> tuple[TransactionCoordinator, RecordingMarkers, Clock, FileTransactionStore]:
    store = FileTransactionStore(tmp_path)
    markers, clock = RecordingMarkers(), Clock()
    coordinator = _coordinator(store, markers, clock)
    return coordinator, markers, clock, store


def _coordinator(
    store: FileTransactionStore, markers: RecordingMarkers, clock: Clock, ids: Ids | None = None
) -> TransactionCoordinator:
    settings = TransactionSettings(max_timeout_ms=60_000, abort_check_interval_ms=1, id_expiration_ms=3_600_000)
    return TransactionCoordinator(
        settings, store, markers, coordinates=lambda key: True, next_producer_id=ids or Ids(), clock=clock
    )


def test_each_instance_gets_the_next_epoch_of_one_producer_id(parts) -> None:
    coordinator, _, _, _ = parts
    first = coordinator.init_producer_id(TXN, 10_000)
    second = coordinator.init_producer_id(TXN, 10_000)
    assert first.error == second.error == ErrorCode.NONE
    assert (first.producer_id, first.producer_epoch) == (101, 0)
    assert (second.producer_id, second.producer_epoch) == (101, 1)
    # the first instance is fenced
    assert coordinator.add_partitions(TXN, 101, 0, [(TOPIC, 0)]) == ErrorCode.PRODUCER_FENCED


def test_a_timeout_beyond_the_maximum_is_refused(parts) -> None:
    coordinator, _, _, store = parts
    assert coordinator.init_producer_id(TXN, 60_001).error == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert coordinator.init_producer_id(TXN, 0).error == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert store.ids() == []


def test_commit_writes_a_marker_to_every_partition_and_group_then_completes(parts) -> None:
    coordinator, markers, _, store = parts
    producer = coordinator.init_producer_id(TXN, 10_000)
    pid, epoch = producer.producer_id, producer.producer_epoch
    assert coordinator.add_partitions(TXN, pid, epoch, [(TOPIC, 0), (TOPIC, 1)]) == ErrorCode.NONE
    assert coordinator.add_group(TXN, pid, epoch, "g") == ErrorCode.NONE
    assert coordinator.describe(TXN)[1].state == TxnState.ONGOING
    assert coordinator.end_transaction(TXN, pid, epoch, commit=True) == ErrorCode.NONE
    assert markers.written == [(pid, epoch, True, frozenset({(TOPIC, 0), (TOPIC, 1)}), frozenset({"g"}))]
    assert coordinator.describe(TXN)[1].state == TxnState.COMPLETE_COMMIT
    assert store.load(TXN).state == TxnState.PREPARE_COMMIT  # type: ignore[union-attr]  # Complete: the timer's
    coordinator.tick()
    stored = store.load(TXN)
    assert stored is not None and stored.state == TxnState.COMPLETE_COMMIT and not stored.partitions
    # a retried commit is answered again; an abort of it is a state error; so is ending nothing
    assert coordinator.end_transaction(TXN, pid, epoch, commit=True) == ErrorCode.NONE
    assert coordinator.end_transaction(TXN, pid, epoch, commit=False) == ErrorCode.INVALID_TXN_STATE
    assert len(markers.written) == 1


def test_requests_of_unknown_ids_wrong_producers_and_empty_transactions(parts) -> None:
    coordinator, markers, _, _ = parts
    assert coordinator.add_partitions("nobody", 1, 0, [(TOPIC, 0)]) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    producer = coordinator.init_producer_id(TXN, 10_000)
    assert (
        coordinator.add_partitions(TXN, producer.producer_id + 1, 0, [(TOPIC, 0)])
        == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    )
    assert coordinator.end_transaction(TXN, producer.producer_id, 0, commit=True) == ErrorCode.INVALID_TXN_STATE
    assert coordinator.end_transaction(TXN, producer.producer_id, 5, commit=True) == ErrorCode.PRODUCER_FENCED
    assert markers.written == []


def test_a_new_instance_aborts_the_open_transaction_with_a_bumped_epoch(parts) -> None:
    coordinator, markers, _, _ = parts
    old = coordinator.init_producer_id(TXN, 10_000)
    coordinator.add_partitions(TXN, old.producer_id, old.producer_epoch, [(TOPIC, 0)])
    assert coordinator.init_producer_id(TXN, 10_000).error == ErrorCode.CONCURRENT_TRANSACTIONS
    assert markers.written == [(old.producer_id, old.producer_epoch + 1, False, frozenset({(TOPIC, 0)}), frozenset())]
    new = coordinator.init_producer_id(TXN, 10_000)  # the client's retry
    assert new.error == ErrorCode.NONE and new.producer_epoch == old.producer_epoch + 2
    assert (
        coordinator.end_transaction(TXN, old.producer_id, old.producer_epoch, commit=True) == ErrorCode.PRODUCER_FENCED
    )


def test_unwritten_markers_hold_the_id_until_the_timer_writes_them(parts) -> None:
    coordinator, markers, _, store = parts
    producer = coordinator.init_producer_id(TXN, 10_000)
    pid, epoch = producer.producer_id, producer.producer_epoch
    coordinator.add_partitions(TXN, pid, epoch, [(TOPIC, 0)])
    markers.down = True
    assert coordinator.end_transaction(TXN, pid, epoch, commit=True) == ErrorCode.NONE  # the decision is stored
    assert store.load(TXN).state == TxnState.PREPARE_COMMIT  # type: ignore[union-attr]
    assert coordinator.add_partitions(TXN, pid, epoch, [(TOPIC, 1)]) == ErrorCode.CONCURRENT_TRANSACTIONS
    assert coordinator.end_transaction(TXN, pid, epoch, commit=True) == ErrorCode.CONCURRENT_TRANSACTIONS
    assert coordinator.end_transaction(TXN, pid, epoch, commit=False) == ErrorCode.INVALID_TXN_STATE
    markers.down = False
    coordinator.tick()  # writes the markers
    coordinator.tick()  # stores Complete
    assert store.load(TXN).state == TxnState.COMPLETE_COMMIT  # type: ignore[union-attr]
    assert coordinator.add_partitions(TXN, pid, epoch, [(TOPIC, 1)]) == ErrorCode.NONE


def test_a_restarted_coordinator_finishes_a_stored_decision(tmp_path: Path) -> None:
    store, markers, clock = FileTransactionStore(tmp_path), RecordingMarkers(), Clock()
    first = _coordinator(store, markers, clock)
    producer = first.init_producer_id(TXN, 10_000)
    first.add_partitions(TXN, producer.producer_id, producer.producer_epoch, [(TOPIC, 3)])
    markers.down = True
    first.end_transaction(TXN, producer.producer_id, producer.producer_epoch, commit=False)
    # a new process over the same files
    markers = RecordingMarkers()
    second = _coordinator(FileTransactionStore(tmp_path), markers, clock)
    second.tick()
    assert markers.written == [
        (producer.producer_id, producer.producer_epoch, False, frozenset({(TOPIC, 3)}), frozenset())
    ]
    assert second.describe(TXN)[1].state == TxnState.COMPLETE_ABORT


def test_a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced(parts) -> None:
    coordinator, markers, clock, _ = parts
    producer = coordinator.init_producer_id(TXN, 5_000)
    pid, epoch = producer.producer_id, producer.producer_epoch
    coordinator.add_partitions(TXN, pid, epoch, [(TOPIC, 0)])
    clock.now += 4_000
    coordinator.tick()
    assert markers.written == []
    clock.now += 2_000
    coordinator.tick()
    assert markers.written == [(pid, epoch + 1, False, frozenset({(TOPIC, 0)}), frozenset())]
    assert coordinator.describe(TXN)[1].state == TxnState.COMPLETE_ABORT
    assert coordinator.end_transaction(TXN, pid, epoch, commit=True) == ErrorCode.PRODUCER_FENCED


def test_verify_answers_for_the_partitions_of_the_open_transaction_only(parts) -> None:
    coordinator, _, _, _ = parts
    producer = coordinator.init_producer_id(TXN, 10_000)
    pid, epoch = producer.producer_id, producer.producer_epoch
    assert coordinator.verify(TXN, pid, epoch, [(TOPIC, 0)]) == {(TOPIC, 0): ErrorCode.INVALID_TXN_STATE}
    coordinator.add_partitions(TXN, pid, epoch, [(TOPIC, 0)])
    assert coordinator.verify(TXN, pid, epoch, [(TOPIC, 0), (TOPIC, 1)]) == {
        (TOPIC, 0): ErrorCode.NONE,
        (TOPIC, 1): ErrorCode.INVALID_TXN_STATE,
    }
    assert coordinator.verify(TXN, pid, epoch - 1, [(TOPIC, 0)]) == {(TOPIC, 0): ErrorCode.PRODUCER_FENCED}


def test_kip_360_init_with_the_current_producer_keeps_the_id(parts) -> None:
    coordinator, _, _, _ = parts
    first = coordinator.init_producer_id(TXN, 10_000)
    bumped = coordinator.init_producer_id(TXN, 10_000, first.producer_id, first.producer_epoch)
    assert (bumped.producer_id, bumped.producer_epoch) == (first.producer_id, first.producer_epoch + 1)
    retried = coordinator.init_producer_id(TXN, 10_000, first.producer_id, first.producer_epoch)
    assert retried == bumped  # the same answer to a retry
    assert coordinator.init_producer_id(TXN, 10_000, first.producer_id + 7, 0).error == ErrorCode.PRODUCER_FENCED


def test_an_idle_id_expires(parts) -> None:
    coordinator, _, clock, store = parts
    coordinator.init_producer_id(TXN, 10_000)
    clock.now += 3_600_001
    coordinator.tick()
    assert store.ids() == [] and coordinator.describe(TXN)[0] == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND


def test_a_store_that_fails_leaves_the_state_as_it_was(parts, monkeypatch: pytest.MonkeyPatch) -> None:
    coordinator, _, _, store = parts
    producer = coordinator.init_producer_id(TXN, 10_000)

    def fail(record: object) -> None:
        raise TransactionStoreError("disk full")

    monkeypatch.setattr(store, "save", fail)
    error = coordinator.add_partitions(TXN, producer.producer_id, producer.producer_epoch, [(TOPIC, 0)])
    assert error == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert coordinator.describe(TXN)[1].state == TxnState.EMPTY


def test_a_corrupt_record_is_an_error_not_a_new_producer(tmp_path: Path) -> None:
    store = FileTransactionStore(tmp_path)
    (store.directory / f"{TXN.encode().hex()}.json").write_text("{not json")
    coordinator = _coordinator(store, RecordingMarkers(), Clock())
    assert coordinator.init_producer_id(TXN, 10_000).error == ErrorCode.COORDINATOR_NOT_AVAILABLE


def test_verify_while_the_markers_are_written_says_concurrent_transactions(parts) -> None:
    coordinator, markers, _, _ = parts
    producer = coordinator.init_producer_id(TXN, 10_000)
    pid, epoch = producer.producer_id, producer.producer_epoch
    coordinator.add_partitions(TXN, pid, epoch, [(TOPIC, 0)])
    markers.down = True
    coordinator.end_transaction(TXN, pid, epoch, commit=True)
    assert coordinator.verify(TXN, pid, epoch, [(TOPIC, 0)]) == {(TOPIC, 0): ErrorCode.CONCURRENT_TRANSACTIONS}


def test_complete_lost_in_a_crash_writes_the_markers_again_and_ends_the_same(tmp_path: Path) -> None:
    """Complete* is stored by the timer: a coordinator killed before finds the stored Prepare* and
    writes the same markers again, ending as the first would have."""
    store, markers, clock = FileTransactionStore(tmp_path), RecordingMarkers(), Clock()
    first = _coordinator(store, markers, clock)
    producer = first.init_producer_id(TXN, 10_000)
    first.add_partitions(TXN, producer.producer_id, producer.producer_epoch, [(TOPIC, 2)])
    assert first.end_transaction(TXN, producer.producer_id, producer.producer_epoch, commit=True) == ErrorCode.NONE
    again = RecordingMarkers()  # the first process dies here, before its timer stored Complete
    second = _coordinator(FileTransactionStore(tmp_path), again, clock)
    second.tick()
    assert again.written == markers.written
    second.tick()
    assert FileTransactionStore(tmp_path).load(TXN).state == TxnState.COMPLETE_COMMIT  # type: ignore[union-attr]


def test_a_graceful_stop_stores_what_the_timer_had_not(tmp_path: Path) -> None:
    store = FileTransactionStore(tmp_path)
    coordinator = _coordinator(store, RecordingMarkers(), Clock())
    producer = coordinator.init_producer_id(TXN, 10_000)
    coordinator.add_partitions(TXN, producer.producer_id, producer.producer_epoch, [(TOPIC, 0)])
    coordinator.end_transaction(TXN, producer.producer_id, producer.producer_epoch, commit=False)
    coordinator.stop()
    assert store.load(TXN).state == TxnState.COMPLETE_ABORT  # type: ignore[union-attr]
