"""Transactions in the log (KIP-98): transactional batches hold the last stable offset until their
producer's marker; aborts are entries of the segment's .txnindex (Kafka's 34-byte layout) that
survive clean and unclean restarts, retention, DeleteRecords and truncation; fencing, refused
control batches, reads bounded by max_offset, and the producer snapshot's format versions;
verification guards (a check with the coordinator that a marker overtook opens no transaction); a
.txnindex entry that cannot be written quarantines the log until a reopening rebuilds it."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from kafkalog.errors import InvalidRecordError, StorageError, UnsupportedForMessageFormatError
from kafkalog.log import Log, LogConfig, LogManager
from kafkalog.log.faults import CRASH_EXIT_CODE
from kafkalog.log.producer_state import (
    SNAPSHOT_SUFFIX,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    ProducerState,
    TransactionCoordinatorFencedError,
)
from kafkalog.log.txn_index import AbortedTxn, TxnIndexEntry
from kafkalog.record.batch_control import decode_marker, encode_marker
from kafkalog.record.batch_format import check_crc, decode_batch, encode_batch, iter_headers

from .helpers import FakeClock, message_set
from .txn_crash_child import CONFIG as CHILD_CONFIG

CONFIG = LogConfig(segment_bytes=1024, retention_ms=None, flush_ms=None)


def txn(producer: int, sequence: int, count: int = 2, *, epoch: int = 0, transactional: bool = True) -> bytes:
    records = [(None, f"{producer}/{sequence + i}".encode(), 1_700_000_000_000, ()) for i in range(count)]
    return encode_batch(
        records, producer_id=producer, producer_epoch=epoch, base_sequence=sequence, transactional=transactional
    )


def plain(value: bytes = b"plain") -> bytes:
    return encode_batch([(None, value, 1_700_000_000_000, ())])


def txnindex(log: Log) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(log.directory.glob("*.txnindex"))}


def entries(log: Log) -> list[TxnIndexEntry]:
    return [e for s in log.segments for e in s.txn_index.entries]


# ---------------------------------------------------------------------------------- last stable offset


@pytest.mark.unit
def test_the_last_stable_offset_follows_the_oldest_open_transaction_across_producers(tmp_path: Path) -> None:
    log = Log(tmp_path, CONFIG)
    log.append(plain())  # 0
    assert log.last_stable_offset == log.log_end_offset == 1
    log.append(txn(1, 0))  # 1-2: producer 1 opens at 1
    assert log.last_stable_offset == 1
    log.append(txn(2, 0))  # 3-4: producer 2 opens at 3
    log.append(plain())  # 5: other writes do not move it
    log.append(txn(1, 2))  # 6-7: still producer 1's first transaction
    assert log.last_stable_offset == 1
    assert log.append_marker(1, 0, commit=True, coordinator_epoch=0).first_offset == 8
    assert log.last_stable_offset == 3  # producer 2's is the oldest open one now
    log.append(txn(1, 4))  # 9-10: producer 1 opens a second transaction, after producer 2's
    assert log.last_stable_offset == 3
    log.append_marker(2, 0, commit=False, coordinator_epoch=0)  # 11
    assert log.last_stable_offset == 9
    log.append_marker(1, 0, commit=False, coordinator_epoch=0)  # 12
    assert log.last_stable_offset == log.log_end_offset == 13
    assert log.read(0, 1 << 20).last_stable_offset == 13
    assert entries(log) == [TxnIndexEntry(2, 3, 11, 9), TxnIndexEntry(1, 9, 12, 13)]
    assert [(s.producer_id, s.current_txn_start_offset) for s in log.producer_states()] == [(1, -1), (2, -1)]


@pytest.mark.unit
def test_markers_are_kafkas_control_batches(tmp_path: Path) -> None:
    log = Log(tmp_path, CONFIG, clock=FakeClock(1_700_000_000_123))
    log.append(txn(5, 0))
    info = log.append_marker(5, 3, commit=True, coordinator_epoch=7)
    with log.read(info.first_offset, 1 << 20).region as region:  # type: ignore[union-attr]
        data = region.read()
    (header,) = list(iter_headers(data))
    check_crc(data, header)  # a CRC-32C a Kafka consumer accepts
    assert header.control and header.transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (5, 3, -1)
    assert (header.base_offset, header.records_count, header.max_timestamp) == (2, 1, 1_700_000_000_123)
    _, (record,) = decode_batch(data)
    assert record.key == struct.pack(">hh", 0, 1)  # version 0, COMMIT
    assert record.value == struct.pack(">hi", 0, 7)  # version 0, coordinator epoch
    assert decode_marker(data) == (True, 7)
    assert decode_marker(encode_marker(5, 3, commit=False, coordinator_epoch=1, timestamp=0)) == (False, 1)


@pytest.mark.unit
def test_a_marker_without_an_open_transaction_is_written_and_ends_nothing(tmp_path: Path) -> None:
    log = Log(tmp_path, CONFIG, clock=FakeClock())
    log.append(plain())
    assert log.append_marker(9, 0, commit=False, coordinator_epoch=0).first_offset == 1
    assert log.last_stable_offset == log.log_end_offset == 2
    assert entries(log) == [] and txnindex(log) == {}
    assert log.producer_states() == [ProducerState(9, 0, -1, log.clock(), 0, -1)]


# ---------------------------------------------------------------------------------- refusals and fencing


@pytest.mark.unit
def test_clients_may_not_write_control_batches(tmp_path: Path) -> None:
    log = Log(tmp_path, CONFIG)
    forged = encode_marker(4, 0, commit=True, coordinator_epoch=0, timestamp=1)  # a producer's id
    anonymous = encode_batch([(None, b"x", 1, ())], control=True)  # no producer, behind a plain batch
    for data in (forged, plain() + anonymous):
        with pytest.raises(InvalidRecordError, match="clients may not write control records") as refused:
            log.append(data)
        assert refused.value.error_code == 87
    with pytest.raises(InvalidRecordError, match="alone, with its producer id"):
        log.append(plain() + txn(4, 0))  # a transactional batch must be its producer's single batch
    with pytest.raises(InvalidRecordError, match="clients may not write control records"):
        Log(tmp_path / "v1", LogConfig(message_format=1)).append(anonymous)
    assert log.log_end_offset == 0


@pytest.mark.unit
def test_a_non_transactional_batch_inside_a_transaction_is_refused(tmp_path: Path) -> None:
    log = Log(tmp_path, CONFIG)
    log.append(txn(3, 0))
    with pytest.raises(InvalidTxnStateError, match="open since offset 0") as refused:
        log.append(txn(3, 2, transactional=False))
    assert refused.value.error_code == 48
    assert log.append(txn(3, 0)).first_offset == 0  # a retry is still answered
    log.append_marker(3, 0, commit=True, coordinator_epoch=0)
    assert log.append(txn(3, 2, transactional=False)).first_offset == 3  # after the marker: fine


@pytest.mark.unit
def test_fenced_epochs_of_producers_and_coordinators(tmp_path: Path) -> None:
    log = Log(tmp_path, CONFIG)
    log.append(txn(6, 0, epoch=1))
    log.append_marker(6, 2, commit=False, coordinator_epoch=4)  # the coordinator bumped the epoch
    with pytest.raises(InvalidProducerEpochError, match="epoch 1 is older than its current epoch 2") as old_data:
        log.append(txn(6, 2, epoch=1))
    with pytest.raises(InvalidProducerEpochError, match="epoch 1, older than its current epoch 2") as old_marker:
        log.append_marker(6, 1, commit=True, coordinator_epoch=4)
    with pytest.raises(TransactionCoordinatorFencedError, match="coordinator epoch 3") as old_coordinator:
        log.append_marker(6, 2, commit=True, coordinator_epoch=3)
    assert (old_data.value.error_code, old_marker.value.error_code, old_coordinator.value.error_code) == (47, 47, 52)
    assert log.log_end_offset == 3
    assert log.append(txn(6, 0, epoch=2)).first_offset == 3  # the new epoch starts at sequence 0
    assert log.last_stable_offset == 3


@pytest.mark.unit
def test_a_higher_epoch_keeps_the_open_transaction(tmp_path: Path) -> None:
    log = Log(tmp_path, CONFIG)
    log.append(txn(2, 0, epoch=0))
    log.append(txn(2, 0, epoch=1))  # the same transaction, after an epoch bump (KIP-360)
    assert log.last_stable_offset == 0
    log.append_marker(2, 1, commit=False, coordinator_epoch=0)
    assert entries(log) == [TxnIndexEntry(2, 0, 4, 5)]


# ---------------------------------------------------------------------------------- verification guards


@pytest.mark.unit
def test_a_marker_between_the_verification_and_the_append_refuses_the_append(tmp_path: Path) -> None:
    log = Log(tmp_path, CONFIG)
    guard = log.verification_guard(5)  # the leader, before asking the coordinator
    assert log.verification_guard(5) is guard  # a second request of the same producer shares it
    # the coordinator said yes; the client then timed out and aborted: the marker comes first
    log.append_marker(5, 0, commit=False, coordinator_epoch=0)
    with pytest.raises(InvalidTxnStateError, match="after the coordinator verified") as refused:
        log.append(txn(5, 0), verification_guard=guard)
    assert refused.value.error_code == 48
    assert log.last_stable_offset == log.log_end_offset == 1  # nothing opened: nothing hangs
    assert [s.current_txn_start_offset for s in log.producer_states()] == [-1]
    fresh = log.verification_guard(5)  # the next transaction verifies anew
    assert fresh is not guard
    assert log.append(txn(5, 0), verification_guard=fresh).first_offset == 1
    assert log.last_stable_offset == 1
    # a batch continuing the open transaction needs no current guard, whatever it carries
    assert log.append(txn(5, 2), verification_guard=guard).first_offset == 3
    log.append_marker(5, 0, commit=True, coordinator_epoch=0)
    assert log.last_stable_offset == log.log_end_offset == 6


@pytest.mark.unit
def test_truncation_drops_the_guards_and_no_guard_checks_nothing(tmp_path: Path) -> None:
    log = Log(tmp_path, CONFIG)
    log.append(plain())
    guard = log.verification_guard(7)
    log.truncate_to(0)  # the check may be about what was cut away
    with pytest.raises(InvalidTxnStateError):
        log.append(txn(7, 0), verification_guard=guard)
    assert log.log_end_offset == 0
    assert log.append(txn(7, 0)).first_offset == 0  # no guard: the caller verified nothing (another coordinator)
    assert log.last_stable_offset == 0


@pytest.mark.unit
def test_a_v1_topic_has_no_markers(tmp_path: Path) -> None:
    log = Log(tmp_path, LogConfig(message_format=1))
    with pytest.raises(UnsupportedForMessageFormatError, match="markers need message format v2"):
        log.append_marker(1, 0, commit=True, coordinator_epoch=0)


# ---------------------------------------------------------------------------------- the aborted index


@pytest.mark.unit
def test_aborts_are_kafka_txnindex_entries_in_the_segment_of_their_marker(tmp_path: Path) -> None:
    log = Log(tmp_path, CONFIG)
    log.append(txn(1, 0))  # 0-1, first segment
    while len(log.segments) == 1:
        log.append(plain(b"-" * 100))
    log.append_marker(1, 0, commit=False, coordinator_epoch=0)
    marker = log.log_end_offset - 1
    name = f"{log.active_segment.base_offset:020d}.txnindex"
    assert txnindex(log) == {name: struct.pack(">hqqqq", 0, 1, 0, marker, marker + 1)}
    assert len(txnindex(log)[name]) == 34
    assert log.aborted_transactions(0, 1) == [AbortedTxn(1, 0)]  # found from the first segment on
    assert log.aborted_transactions(2, marker) == [AbortedTxn(1, 0)]
    assert log.aborted_transactions(marker + 1, marker + 5) == []  # after its marker
    assert log.aborted_transactions(0, 0) == []


@pytest.mark.unit
def test_the_search_stops_where_an_entry_says_no_later_abort_can_reach(tmp_path: Path) -> None:
    log = Log(tmp_path, CONFIG)
    log.append(txn(1, 0))  # 0-1
    log.append(txn(2, 0))  # 2-3
    log.append_marker(1, 0, commit=False, coordinator_epoch=0)  # 4: LSO after it is 2 (producer 2)
    log.append_marker(2, 0, commit=False, coordinator_epoch=0)  # 5
    log.append(txn(3, 0))  # 6-7
    log.append_marker(3, 0, commit=False, coordinator_epoch=0)  # 8
    assert entries(log) == [TxnIndexEntry(1, 0, 4, 2), TxnIndexEntry(2, 2, 5, 6), TxnIndexEntry(3, 6, 8, 9)]
    assert log.aborted_transactions(0, 2) == [AbortedTxn(1, 0)]
    assert log.aborted_transactions(0, 3) == [AbortedTxn(1, 0), AbortedTxn(2, 2)]
    assert log.aborted_transactions(5, 7) == [AbortedTxn(2, 2), AbortedTxn(3, 6)]


@pytest.mark.unit
@pytest.mark.parametrize("clean", [True, False])
def test_aborted_entries_and_open_transactions_survive_a_restart(tmp_path: Path, clean: bool) -> None:
    clock = FakeClock()
    log = Log(tmp_path, CONFIG, clock=clock)
    for round_number in range(6):  # several segments, snapshots at each roll
        producer = 10 + round_number
        log.append(txn(producer, 0, count=5))
        log.append(plain(b"-" * 200))
        log.append_marker(producer, 0, commit=round_number % 2 == 0, coordinator_epoch=0)
    log.roll()
    log.append(txn(98, 0))
    log.append(txn(99, 0))  # left open
    open_at = log.log_end_offset - 2
    log.append_marker(98, 0, commit=False, coordinator_epoch=0)  # aborted after the last snapshot
    assert len(log.segments) > 2
    before, files, end = entries(log), txnindex(log), log.log_end_offset
    assert len(before) == 4
    if clean:
        log.close()
    else:  # a crash: the last snapshot is from the last roll, the segments as the process left them
        log.flush()
        for segment in log.segments:
            segment.close()
        # the active segment's entry was lost with the page cache, and a torn write left 2 bytes
        log.active_segment.txn_index_path.write_bytes(b"\x00\x01")
    reopened = Log(tmp_path, CONFIG, clock=clock, clean_shutdown=clean, recovery_point=end)
    assert entries(reopened) == before
    assert txnindex(reopened) == files
    assert reopened.last_stable_offset == open_at
    reopened.append_marker(99, 0, commit=False, coordinator_epoch=0)
    assert reopened.aborted_transactions(open_at, open_at + 1) == [AbortedTxn(98, open_at - 2), AbortedTxn(99, open_at)]


@pytest.mark.unit
def test_an_entry_whose_marker_was_lost_is_dropped(tmp_path: Path) -> None:
    log = Log(tmp_path, CONFIG)
    log.append(txn(1, 0))
    log.append_marker(1, 0, commit=False, coordinator_epoch=0)
    marker_at = log.active_segment.size - len(encode_marker(1, 0, commit=False, coordinator_epoch=0, timestamp=0))
    log.flush()
    for segment in log.segments:
        segment.close()
    os.truncate(log.active_segment.log_path, marker_at + 10)  # the marker torn, its entry kept
    reopened = Log(tmp_path, CONFIG, recovery_point=0)
    assert reopened.log_end_offset == 2
    assert entries(reopened) == [] and txnindex(reopened) == {}
    assert reopened.last_stable_offset == 0  # open again: its coordinator writes the marker again


@pytest.mark.unit
def test_a_lost_or_unreadable_txnindex_is_rebuilt_from_the_log(tmp_path: Path) -> None:
    log = Log(tmp_path, CONFIG)
    log.append(txn(1, 0))
    log.append_marker(1, 0, commit=False, coordinator_epoch=0)
    log.roll()
    log.append(plain())
    log.close()
    (index,) = tmp_path.glob("*.txnindex")
    good = index.read_bytes()
    index.write_bytes(b"\x00\x07" + good[2:])  # an unknown version
    (tmp_path / f"{77:020d}.txnindex").write_bytes(good)  # no segment of its own: removed
    reopened = Log(tmp_path, CONFIG, clean_shutdown=True)
    assert index.read_bytes() == good
    assert not (tmp_path / f"{77:020d}.txnindex").exists()
    assert reopened.aborted_transactions(0, 2) == [AbortedTxn(1, 0)]


@pytest.mark.unit
def test_an_entry_that_cannot_be_written_quarantines_the_log_until_it_is_reopened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = Log(tmp_path, CONFIG)
    log.append(plain())  # 0
    log.append(txn(1, 0))  # 1-2
    segment = log.active_segment

    def full_disk(entry: TxnIndexEntry) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(segment.txn_index, "append", full_disk)
    with pytest.raises(StorageError, match="producer 1 at offsets 1-3 is not in") as failed:
        log.append_marker(1, 0, commit=False, coordinator_epoch=0)  # 3: written, its entry not
    assert failed.value.error_code == 56  # KAFKA_STORAGE_ERROR
    assert log.index_failure is failed.value
    monkeypatch.undo()
    # the next append would move the LSO past an abort no reader could find: refused, as are
    # markers and read-committed reads; the LSO stays below the transaction
    for refused in (
        lambda: log.append(plain()),
        lambda: log.append_marker(2, 0, commit=True, coordinator_epoch=0),
        lambda: log.read(0, 1 << 20, max_offset=log.last_stable_offset),
        lambda: log.aborted_transactions(0, 4),
    ):
        with pytest.raises(StorageError) as again:
            refused()
        assert again.value is failed.value
    assert (log.last_stable_offset, log.log_end_offset) == (1, 4)
    assert log.read(0, 1 << 20).region is not None  # reading uncommitted needs no index
    log.close()  # takes no producer snapshot past the marker: the reopening must replay it

    reopened = Log(tmp_path, CONFIG, clean_shutdown=True)
    assert reopened.index_failure is None
    assert entries(reopened) == [TxnIndexEntry(1, 1, 3, 4)]
    assert reopened.aborted_transactions(0, 4) == [AbortedTxn(1, 1)]
    assert reopened.last_stable_offset == reopened.log_end_offset == 4
    reopened.append(plain())
    assert reopened.last_stable_offset == 5


# ---------------------------------------------------------------------------------- deletion and truncation


@pytest.mark.unit
def test_retention_and_delete_records_take_the_txnindex_with_the_segment(tmp_path: Path) -> None:
    log = Log(tmp_path, LogConfig(segment_bytes=1024, retention_ms=None, flush_ms=None, retention_bytes=1500))
    log.append(txn(1, 0))
    log.append_marker(1, 0, commit=False, coordinator_epoch=0)
    first = log.segments[0].txn_index_path
    assert first.exists()
    while len(log.segments) < 4:
        log.append(plain(b"-" * 300))
    assert log.enforce_retention() > 0
    assert not first.exists()
    assert log.aborted_transactions(log.log_start_offset, log.log_end_offset) == []
    log.append(txn(2, 0))
    log.append_marker(2, 0, commit=False, coordinator_epoch=0)
    second = log.active_segment.txn_index_path
    log.roll()
    log.delete_records_before(log.log_end_offset)
    assert not second.exists()
    assert txnindex(log) == {}


@pytest.mark.unit
def test_the_log_start_bounds_the_last_stable_offset(tmp_path: Path) -> None:
    log = Log(tmp_path, CONFIG)
    log.append(txn(1, 0))  # a transaction left hanging
    log.append(plain())
    log.delete_records_before(2)
    assert log.last_stable_offset == log.log_start_offset == 2
    assert log.read(2, 1 << 20, max_offset=log.last_stable_offset).region is None


@pytest.mark.unit
def test_truncation_trims_the_index_and_reopens_what_it_cut_the_end_of(tmp_path: Path) -> None:
    log = Log(tmp_path, CONFIG)
    log.append(txn(1, 0))  # 0-1
    log.append_marker(1, 0, commit=False, coordinator_epoch=0)  # 2
    log.append(txn(2, 0))  # 3-4
    log.append_marker(2, 0, commit=False, coordinator_epoch=0)  # 5
    log.truncate_to(5)  # producer 2's abort is cut: its transaction is open again
    assert entries(log) == [TxnIndexEntry(1, 0, 2, 3)]
    assert log.last_stable_offset == 3
    assert len(next(iter(txnindex(log).values()))) == 34
    log.truncate_to(2)
    assert entries(log) == [] and txnindex(log) == {}
    assert log.last_stable_offset == 0
    log.append_marker(1, 0, commit=True, coordinator_epoch=0)
    assert log.last_stable_offset == log.log_end_offset == 3


# ---------------------------------------------------------------------------------- reading below an offset


@pytest.mark.unit
def test_reads_stop_before_max_offset_at_batch_boundaries(tmp_path: Path) -> None:
    log = Log(tmp_path, LogConfig(segment_bytes=1 << 20, index_interval_bytes=64, retention_ms=None, flush_ms=None))
    for n in range(10):
        log.append(plain(b"%d" % n) if n % 3 else txn(n, 0, count=3))
    boundaries = [h.base_offset for h in iter_headers(_read_all(log))] + [log.log_end_offset]
    assert boundaries == [0, 3, 4, 5, 8, 9, 10, 13, 14, 15, 18]
    for i, start in enumerate(boundaries[:-1]):
        for stop in boundaries[i:]:
            info = log.read(start, 1 << 20, max_offset=stop)
            if stop == start:
                assert info.region is None and info.upper_bound_offset == start
                continue
            assert info.region is not None
            with info.region as region:
                got = [(h.base_offset, h.last_offset) for h in iter_headers(region.read())]
            assert got[0][0] == start and got[-1][1] == stop - 1, (start, stop)
            assert stop - 1 < info.upper_bound_offset <= stop
    inside = log.read(1, 1 << 20, max_offset=3)  # from inside a batch: the batch holding it
    assert inside.region is not None and inside.region.position == 0
    inside.region.close()
    small = log.read(0, 10, min_one_message=True, max_offset=18)  # min_one_message: the whole first
    assert small.region is not None and small.region.length == len(txn(0, 0, count=3))
    assert small.upper_bound_offset <= 18
    small.region.close()
    assert log.read(5, 1 << 20, max_offset=4).region is None  # at or past max_offset: nothing


def _read_all(log: Log) -> bytes:
    info = log.read(0, 1 << 20)
    assert info.region is not None
    with info.region as region:
        return region.read()


@pytest.mark.unit
def test_read_info_says_the_last_stable_offset_and_a_bound_past_its_region(tmp_path: Path) -> None:
    log = Log(tmp_path, LogConfig(segment_bytes=1 << 20, index_interval_bytes=1, retention_ms=None, flush_ms=None))
    for _ in range(4):
        log.append(plain(b"x" * 50))
    log.append(txn(1, 0))  # 4-5
    log.append(plain())  # 6
    size = len(plain(b"x" * 50))
    info = log.read(0, 2 * size + 10)  # two batches and part of a third
    assert (info.log_end_offset, info.last_stable_offset) == (7, 4)
    assert info.region is not None
    info.region.close()
    assert info.upper_bound_offset == 3  # every batch is indexed: the first one after the region's end
    assert log.read(0, 1 << 20, max_offset=4).upper_bound_offset == 4


# ---------------------------------------------------------------------------------- producer snapshots


@pytest.mark.unit
def test_a_version_1_snapshot_is_still_read(tmp_path: Path) -> None:
    log = Log(tmp_path, CONFIG)
    log.append(txn(4, 0, transactional=False))
    log.close()
    (snapshot,) = tmp_path.glob(f"*{SNAPSHOT_SUFFIX}")
    document = json.loads(snapshot.read_bytes())
    assert document["format_version"] == 2
    assert document["producers"]["4"]["txn_first_offset"] == -1
    version_1 = {
        "format_version": 1,
        "offset": document["offset"],
        "producers": {"4": {"epoch": 0, "last_append_ms": 5, "batches": [[0, 1, 0, 1]]}},
    }
    snapshot.write_text(json.dumps(version_1))
    reopened = Log(tmp_path, CONFIG, clean_shutdown=True)
    assert reopened.append(txn(4, 0, transactional=False)).first_offset == 0  # a retry, known from v1
    assert reopened.producer_states() == [ProducerState(4, 0, 1, 5, -1, -1)]


@pytest.mark.unit
def test_an_open_transaction_never_expires(tmp_path: Path) -> None:
    clock = FakeClock()
    log = Log(tmp_path, LogConfig(segment_bytes=1024, producer_id_expiration_ms=1000), clock=clock)
    log.append(txn(1, 0))
    log.append(txn(2, 0, transactional=False))
    clock.now += 5000
    log.roll()
    log.append(plain())
    log.roll()  # a snapshot: producer 2 is forgotten, producer 1's transaction keeps it
    assert [s.producer_id for s in log.producer_states()] == [1]
    assert log.last_stable_offset == 0
    log.append_marker(1, 0, commit=True, coordinator_epoch=0)
    assert log.last_stable_offset == log.log_end_offset


@pytest.mark.unit
def test_message_sets_of_old_clients_are_untouched(tmp_path: Path) -> None:
    log = Log(tmp_path, CONFIG)
    log.append(message_set([b"a", b"b"], magic=1))
    log.append(txn(1, 0))
    log.append(message_set([b"c"], magic=0))
    assert log.last_stable_offset == 2
    assert log.log_end_offset == 5


# ---------------------------------------------------------------------------------- crashes

CRASH_CHILD = Path(__file__).with_name("txn_crash_child.py")


def expected_index(log: Log) -> tuple[list[TxnIndexEntry], int]:
    """The aborted-transaction entries and the last stable offset that the batches on disk imply,
    worked out from the segment files alone (an oracle independent of the log's state machine)."""
    opened: dict[int, int] = {}
    found = []
    for path in sorted(log.directory.glob("*.log")):
        data = path.read_bytes()
        for header in iter_headers(data):
            if header.control:
                first = opened.pop(header.producer_id, None)
                if first is not None and not decode_marker(data, header.position).commit:
                    stable = min(opened.values(), default=header.base_offset + 1)
                    found.append(TxnIndexEntry(header.producer_id, first, header.base_offset, stable))
            elif header.transactional:
                opened.setdefault(header.producer_id, header.base_offset)
    return found, min(opened.values(), default=log.log_end_offset)


def run_child(data_dir: Path, crash_at: str) -> int:
    env = {**os.environ, "PYTHONPATH": str(Path.cwd()), "KAFKALOG_CRASH_AT": crash_at}
    done = subprocess.run(
        [sys.executable, str(CRASH_CHILD), str(data_dir)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode not in (0, CRASH_EXIT_CODE):
        pytest.fail(f"child failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.returncode


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize(
    "crash_at",
    [
        "log.marker.after_append@11",  # an abort marker written, its index entry not
        "txnindex.append.after_write@5",  # the entry written, the state not yet updated
        "log.roll.after_seal@4",
        "producers.renamed@3",
        "log.flush.after_fsync@6",
    ],
)
def test_a_crash_around_a_marker_leaves_a_whole_transaction_state(tmp_path: Path, crash_at: str) -> None:
    assert run_child(tmp_path, crash_at) == CRASH_EXIT_CODE, f"the child never reached {crash_at}"
    with LogManager([tmp_path], CHILD_CONFIG) as manager:
        log = manager.get_log("txn", 0)
        assert log is not None and log.corruption is None
        want, stable = expected_index(log)
        assert want, "aborts happened before the crash"
        assert entries(log) == want
        assert log.last_stable_offset == stable
        for segment in log.segments:  # each entry in the segment of its marker; the file as the memory
            assert all(segment.base_offset <= e.last_offset < segment.next_offset for e in segment.txn_index.entries)
            raw = segment.txn_index_path.read_bytes() if segment.txn_index_path.exists() else b""
            assert raw == b"".join(struct.pack(">hqqqq", 0, *e) for e in segment.txn_index.entries)
        for producer in (1, 2):  # whatever was open is ended when its coordinator writes the marker again
            log.append_marker(producer, 0, commit=False, coordinator_epoch=0)
        assert log.last_stable_offset == log.log_end_offset
        assert entries(log) == expected_index(log)[0]
