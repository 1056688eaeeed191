"""Idempotent producers' batches in the log: a retried batch is appended once, across segment rolls,
clean restarts and crashes (the state rebuilt from snapshots and the log); gaps and fenced epochs
are refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalog.errors import UnsupportedForMessageFormatError
from kafkalog.log import Log, LogConfig
from kafkalog.log.producer_state import (
    SNAPSHOT_SUFFIX,
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
    ProducerBatch,
    ProducerStateManager,
    producer_batch,
)
from kafkalog.record.batch_format import encode_batch

from .helpers import FakeClock, message_set

pytestmark = pytest.mark.unit

CONFIG = LogConfig(segment_bytes=1024, retention_ms=None, flush_ms=None)


def batch(producer: int, epoch: int, sequence: int, count: int = 3, tag: str = "") -> bytes:
    records = [(None, f"{producer}/{epoch}/{sequence + i}{tag}".encode(), 1_700_000_000_000, ()) for i in range(count)]
    return encode_batch(records, producer_id=producer, producer_epoch=epoch, base_sequence=sequence)


def values(log: Log) -> list[bytes]:
    return [m.value or b"" for m in log.read_messages(0, 1 << 20)]


def test_a_retried_batch_is_appended_once_and_answered_with_its_offsets(tmp_path: Path) -> None:
    log = Log(tmp_path, CONFIG)
    first = log.append(batch(7, 0, 0))
    second = log.append(batch(7, 0, 3))
    again = log.append(batch(7, 0, 0))  # the acknowledgement of the first was lost: a retry
    assert (again.first_offset, again.last_offset) == (first.first_offset, first.last_offset) == (0, 2)
    assert log.append(batch(7, 0, 3)).first_offset == second.first_offset == 3
    assert log.log_end_offset == 6
    assert values(log) == [b"7/0/%d" % i for i in range(6)]


def test_only_the_last_five_batches_are_remembered(tmp_path: Path) -> None:
    log = Log(tmp_path, CONFIG)
    for n in range(6):
        log.append(batch(1, 0, n, count=1))
    assert log.append(batch(1, 0, 1, count=1)).first_offset == 1  # one of the last five
    with pytest.raises(OutOfOrderSequenceError, match="expected 6"):
        log.append(batch(1, 0, 0, count=1))  # older than that: not a retry we can recognise


@pytest.mark.parametrize(
    ("sent", "error", "message"),
    [
        ([(0, 0), (0, 5)], OutOfOrderSequenceError, "sequence 5, expected 3"),  # a gap: a batch was lost
        ([(0, 4)], OutOfOrderSequenceError, "unknown here and its batch starts at sequence 4"),
        ([(1, 0), (0, 3)], InvalidProducerEpochError, "epoch 0 is older than its current epoch 1"),
        ([(0, 0), (1, 3)], OutOfOrderSequenceError, "starts epoch 1 at sequence 3"),
    ],
)
def test_gaps_and_fenced_epochs_are_refused(
    tmp_path: Path, sent: list[tuple[int, int]], error: type[Exception], message: str
) -> None:
    log = Log(tmp_path, CONFIG)
    *fine, wrong = sent
    for epoch, sequence in fine:
        log.append(batch(9, epoch, sequence))
    end = log.log_end_offset
    with pytest.raises(error, match=message):
        log.append(batch(9, *wrong))
    assert log.log_end_offset == end  # nothing appended


def test_a_new_epoch_starts_over_at_sequence_zero(tmp_path: Path) -> None:
    log = Log(tmp_path, CONFIG)
    log.append(batch(2, 0, 0))
    assert log.append(batch(2, 1, 0)).first_offset == 3
    assert log.append(batch(2, 1, 3)).first_offset == 6


def test_producers_are_independent_and_plain_batches_untouched(tmp_path: Path) -> None:
    log = Log(tmp_path, CONFIG)
    log.append(batch(1, 0, 0))
    log.append(batch(2, 0, 0))
    log.append(encode_batch([(None, b"plain", -1, ())]))
    log.append(encode_batch([(None, b"plain", -1, ())]))  # no producer id: appended every time
    log.append(message_set([b"old client"]))
    assert log.append(batch(1, 0, 0)).first_offset == 0
    assert log.append(batch(2, 0, 0)).first_offset == 3
    assert log.log_end_offset == 9


@pytest.mark.parametrize("clean", [True, False])
def test_a_retry_after_a_restart_is_still_recognised(tmp_path: Path, clean: bool) -> None:
    """Across segment rolls (snapshots) and a clean close (a snapshot at the end) or a crash (the
    state rebuilt from the newest snapshot and the batches after it)."""
    clock = FakeClock()
    log = Log(tmp_path, CONFIG, clock=clock)
    for sequence in range(0, 60, 3):
        log.append(batch(5, 0, sequence, tag="-" * 40))  # ~100 bytes each: several rolls of 1 KiB
    assert len(log.segments) > 2
    assert list(tmp_path.glob(f"*{SNAPSHOT_SUFFIX}"))
    end = log.log_end_offset
    if clean:
        log.close()
    else:  # a crash: no close, no final snapshot; the segments are as the process left them
        log.flush()
        for segment in log.segments:
            segment.close()
    reopened = Log(tmp_path, CONFIG, clock=clock, clean_shutdown=clean, recovery_point=end)
    assert reopened.append(batch(5, 0, 57, tag="-" * 40)).first_offset == 57
    assert reopened.append(batch(5, 0, 54, tag="-" * 40)).first_offset == 54
    assert reopened.log_end_offset == end
    assert reopened.append(batch(5, 0, 60)).first_offset == end


def test_snapshots_beyond_the_log_end_and_unreadable_ones_are_set_aside(tmp_path: Path) -> None:
    log = Log(tmp_path, CONFIG)
    log.append(batch(3, 0, 0))
    log.close()
    (tmp_path / f"{99:020d}{SNAPSHOT_SUFFIX}").write_text("{}")  # describes data that is not there
    (tmp_path / f"{3:020d}{SNAPSHOT_SUFFIX}").write_text("not json")
    reopened = Log(tmp_path, CONFIG, clean_shutdown=True)
    assert reopened.append(batch(3, 0, 0)).first_offset == 0  # rebuilt from the log
    assert not (tmp_path / f"{99:020d}{SNAPSHOT_SUFFIX}").exists()
    assert (tmp_path / f"{3:020d}{SNAPSHOT_SUFFIX}.unreadable").exists()


def test_truncation_forgets_what_was_cut(tmp_path: Path) -> None:
    log = Log(tmp_path, CONFIG)
    log.append(batch(4, 0, 0))
    log.append(batch(4, 0, 3))
    log.truncate_to(3)
    with pytest.raises(OutOfOrderSequenceError):
        log.append(batch(4, 0, 6))
    assert log.append(batch(4, 0, 3)).first_offset == 3  # appended again: the first copy was cut


def test_expired_producers_are_forgotten_at_the_next_snapshot(tmp_path: Path) -> None:
    clock = FakeClock()
    log = Log(tmp_path, LogConfig(segment_bytes=1024, producer_id_expiration_ms=1000), clock=clock)
    log.append(batch(8, 0, 0))
    clock.now += 5000
    log.roll()
    log.append(encode_batch([(None, b"x", -1, ())]))
    log.roll()  # a snapshot: producer 8 is forgotten
    with pytest.raises(OutOfOrderSequenceError, match="unknown here"):
        log.append(batch(8, 0, 3))


def test_a_v1_topic_refuses_idempotent_batches(tmp_path: Path) -> None:
    log = Log(tmp_path, LogConfig(message_format=1))
    with pytest.raises(UnsupportedForMessageFormatError, match="message format v2"):
        log.append(batch(1, 0, 0))


def test_sequences_wrap_around(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path, expiration_ms=1000)
    near_end = ProducerBatch(1, 0, 2**31 - 2, 2)
    state.appended(near_end, 100, 101, 0)
    assert near_end.last_sequence == 2**31 - 1
    assert state.check(ProducerBatch(1, 0, 0, 1)) is None  # after 2**31 - 1 comes 0 again
    with pytest.raises(OutOfOrderSequenceError, match="expected 0"):
        state.check(ProducerBatch(1, 0, 1, 1))


def test_producer_batch_reads_only_single_idempotent_batches() -> None:
    one = batch(6, 2, 10, count=4)
    assert producer_batch(one) == ProducerBatch(6, 2, 10, 4)
    assert producer_batch(one + one) is None  # two batches: not one producer's retry unit
    assert producer_batch(encode_batch([(None, b"v", -1, ())])) is None
    assert producer_batch(message_set([b"v"])) is None
