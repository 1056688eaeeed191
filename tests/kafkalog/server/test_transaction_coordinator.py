"""The transaction coordinator's rules, over its real file store, with a marker writer that records
what it is asked to write (and can be made to fail, as an unreachable broker does)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalog.protocol import ErrorCode
from kafkalog.server.config import TransactionSettings
from kafkalog.server.transactions import TransactionCoordinator, TxnState
from kafkalog.server.transactions.coordinator import Targets
from kafkalog.server.transactions.state import CoordinatorFencedError
from kafkalog.server.transactions.store import FileTransactionStore, StaleEpochError, TransactionStoreError

TXN = "txn-1"
TOPIC = "t"


class RecordingMarkers:
    """Writes nothing; remembers (producer id, epoch, commit, partitions, groups); ``down`` makes
    every target unreachable."""

    def __init__(self) -> None:
        self.written: list[tuple[int, int, bool, frozenset[tuple[str, int]], frozenset[str]]] = []
        self.down = False
        self.fenced = False
        self.coordinator_epochs: list[int] = []

    def write(
        self, producer_id: int, producer_epoch: int, *, commit: bool, coordinator_epoch: int, targets: Targets
    ) -> Targets:
        self.coordinator_epochs.append(coordinator_epoch)
        if self.fenced:
            raise CoordinatorFencedError("a newer coordinator wrote here")
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


def test_a_zombie_cannot_pass_for_the_instance_that_fenced_it(parts) -> None:
    """KIP-360's InitProducerId with the epoch a new instance's InitProducerId bumped is fenced: only
    the producer's own bump may be retried with its old epoch."""
    coordinator, _, _, _ = parts
    zombie = coordinator.init_producer_id(TXN, 10_000)
    new = coordinator.init_producer_id(TXN, 10_000)
    answer = coordinator.init_producer_id(TXN, 10_000, zombie.producer_id, zombie.producer_epoch)
    assert answer.error == ErrorCode.PRODUCER_FENCED
    assert coordinator.add_partitions(TXN, new.producer_id, new.producer_epoch, [(TOPIC, 0)]) == ErrorCode.NONE


def test_kip_360_names_both_id_and_epoch_and_a_new_id_gets_its_new_producer(parts) -> None:
    coordinator, _, _, _ = parts
    assert coordinator.init_producer_id(TXN, 10_000, 5, -1).error == ErrorCode.INVALID_REQUEST
    assert coordinator.init_producer_id(TXN, 10_000, -1, 3).error == ErrorCode.INVALID_REQUEST
    recovered = coordinator.init_producer_id("fresh", 10_000, 999, 4)  # an id the coordinator never had
    assert recovered.error == ErrorCode.NONE and recovered.producer_id != 999 and recovered.producer_epoch == 0


def test_each_coordinator_that_takes_an_id_up_raises_its_epoch_and_marks_with_it(tmp_path: Path) -> None:
    store, clock = FileTransactionStore(tmp_path), Clock()
    first_markers = RecordingMarkers()
    first = _coordinator(store, first_markers, clock)
    producer = first.init_producer_id(TXN, 10_000)
    first.add_partitions(TXN, producer.producer_id, producer.producer_epoch, [(TOPIC, 0)])
    first.end_transaction(TXN, producer.producer_id, producer.producer_epoch, commit=True)
    first.stop()  # stores its Complete
    second_markers = RecordingMarkers()
    second = _coordinator(FileTransactionStore(tmp_path), second_markers, clock)
    assert second.describe(TXN)[1].coordinator_epoch == store.load(TXN).coordinator_epoch == 1  # type: ignore[union-attr]
    second.add_partitions(TXN, producer.producer_id, producer.producer_epoch, [(TOPIC, 0)])
    second.end_transaction(TXN, producer.producer_id, producer.producer_epoch, commit=True)
    assert (first_markers.coordinator_epochs, second_markers.coordinator_epochs) == ([0], [1])


def test_a_coordinator_fenced_by_a_newer_one_lets_the_id_go(parts) -> None:
    coordinator, markers, _, store = parts
    producer = coordinator.init_producer_id(TXN, 10_000)
    coordinator.add_partitions(TXN, producer.producer_id, producer.producer_epoch, [(TOPIC, 0)])
    markers.fenced = True
    coordinator.end_transaction(TXN, producer.producer_id, producer.producer_epoch, commit=True)
    assert TXN not in [record.transactional_id for record in coordinator.listed()]
    assert store.load(TXN).state == TxnState.PREPARE_COMMIT  # type: ignore[union-attr]  # the newer one's to end


def test_when_the_brokers_change_every_record_is_read_again(tmp_path: Path) -> None:
    store, members = FileTransactionStore(tmp_path), ["a"]
    settings = TransactionSettings(max_timeout_ms=60_000, abort_check_interval_ms=1, id_expiration_ms=3_600_000)
    coordinator = TransactionCoordinator(
        settings, store, RecordingMarkers(), coordinates=lambda key: True, next_producer_id=Ids(),
        membership=lambda: tuple(members), clock=Clock(),
    )  # fmt: skip
    producer = coordinator.init_producer_id(TXN, 10_000)
    other = store.load(TXN)
    assert other is not None
    other.producer_epoch = 9  # what another coordinator stored while this one did not coordinate the id
    store.save(other)
    assert coordinator.describe(TXN)[1].producer_epoch == producer.producer_epoch  # the brokers did not change
    members.append("b")
    assert coordinator.describe(TXN)[1].producer_epoch == 9


def test_a_txn_offset_commit_must_belong_to_the_open_transaction(parts) -> None:
    coordinator, _, _, _ = parts
    producer = coordinator.init_producer_id(TXN, 10_000)
    pid, epoch = producer.producer_id, producer.producer_epoch
    assert coordinator.verify_group(TXN, pid, epoch, "g") == ErrorCode.INVALID_TXN_STATE
    coordinator.add_group(TXN, pid, epoch, "g")
    assert coordinator.verify_group(TXN, pid, epoch, "g") == ErrorCode.NONE
    assert coordinator.verify_group(TXN, pid, epoch, "other") == ErrorCode.INVALID_TXN_STATE
    assert coordinator.verify_group(TXN, pid, epoch - 1, "g") == ErrorCode.PRODUCER_FENCED


class Committed:
    """A GroupOffsetStore that remembers commits."""

    def __init__(self) -> None:
        self.commits: list[tuple[str, dict[tuple[str, int], tuple[int, str | None]]]] = []

    def commit(self, group: str, offsets: dict[tuple[str, int], tuple[int, str | None]]) -> None:
        self.commits.append((group, offsets))


def test_staged_offsets_of_an_older_epoch_are_refused_or_dropped(tmp_path: Path) -> None:
    store, into = FileTransactionStore(tmp_path), Committed()
    store.stage_offsets("g", 7, 1, {("t", 0): (5, None)})
    with pytest.raises(StaleEpochError):
        store.stage_offsets("g", 7, 0, {("t", 0): (9, None)})  # a fenced instance
    store.end_offsets("g", 7, 2, commit=True, into=into)  # a marker of another epoch applies nothing
    assert into.commits == [] and store.staged_offsets("g") == {}
    store.stage_offsets("g", 7, 2, {("t", 1): (3, "m")})
    store.stage_offsets("g", 7, 3, {("t", 2): (4, None)})  # a newer epoch: the older one's dropped
    store.end_offsets("g", 7, 3, commit=True, into=into)
    assert into.commits == [("g", {("t", 2): (4, None)})]


def test_ids_too_long_for_a_file_name_are_stored_by_their_hash(tmp_path: Path) -> None:
    coordinator = _coordinator(FileTransactionStore(tmp_path), RecordingMarkers(), Clock())
    long_id = "streams-app-" + "x" * 300
    assert coordinator.init_producer_id(long_id, 10_000).error == ErrorCode.NONE
    assert FileTransactionStore(tmp_path).ids() == [long_id]
