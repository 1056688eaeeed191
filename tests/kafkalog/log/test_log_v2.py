"""A log of message format v2: record batches appended with their offsets, read from any offset
(a read starts at the batch holding it), recovered and re-indexed after a crash, searched by time,
truncated and expired by batch; and a partition that holds both formats."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest

from kafkalog.errors import OffsetOutOfRangeError
from kafkalog.log import EARLIEST_TIME, Log, LogConfig
from kafkalog.record import Codec, TimestampType, decode_messages, iter_entries
from kafkalog.record.batch_format import RecordInput, encode_batch, read_header

from .helpers import SMALL, FakeClock, message_set, read_all

V2 = dataclasses.replace(SMALL, message_format=2)


def fill_batches(log: Log, count: int, *, per_batch: int = 6, start_ts: int = 1000, seed: int = 1) -> list[bytes]:
    """Append ``count`` records in batches of every codec; each value names its offset."""
    rng = random.Random(seed)
    values: list[bytes] = []
    while len(values) < count:
        n = min(per_batch, count - len(values))
        first = log.log_end_offset
        records = [
            RecordInput(
                b"k%d" % (first + i), b"v%06d" % (first + i), start_ts + first + i, [("n", b"%d" % (first + i))]
            )
            for i in range(n)
        ]
        log.append(encode_batch(records, codec=rng.choice(list(Codec))))
        values += [r.value for r in records if r.value is not None]
    return values


def test_batches_keep_their_offsets_headers_and_are_read_from_any_offset(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", V2)
    values = fill_batches(log, 400)
    assert log.log_end_offset == 400 and len(log.segments) > 2
    messages = read_all(log)
    assert [m.value for m in messages] == values and [m.offset for m in messages] == list(range(400))
    assert all(m.headers == (("n", b"%d" % m.offset),) for m in messages)
    for offset in (0, 1, 5, 6, 7, 100, 399):  # inside batches too: the read starts at the batch
        region = log.read(offset, 1 << 20).region
        assert region is not None
        with region:
            data = region.read()
        first = read_header(data)
        assert first.base_offset <= offset <= first.last_offset
        assert next(decode_messages(data, min_offset=offset)).offset == offset
    for segment in log.segments:  # every segment starts with the batch of its base offset
        assert read_header(segment.log_path.read_bytes()).base_offset == segment.base_offset
        assert {e.magic for e in iter_entries(segment.log_path.read_bytes())} == {2}


def test_recovery_after_a_torn_write_keeps_the_whole_batches_before_it(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", V2)
    fill_batches(log, 60)
    active = log.active_segment.log_path
    log.close()
    size = active.stat().st_size
    with active.open("r+b") as f:  # the last batch half written
        f.truncate(size - 20)
    reopened = Log(tmp_path / "t-0", V2)
    assert reopened.log_end_offset == 54  # 60 records in batches of 6: the last one is gone whole
    assert [m.offset for m in read_all(reopened)] == list(range(54))
    # the indexes were rebuilt from the batches: reads from anywhere still land right
    for offset in range(0, 54, 5):
        region = reopened.read(offset, 1 << 20).region
        assert region is not None
        with region:
            assert next(decode_messages(region.read(), min_offset=offset)).offset == offset
    reopened.append(encode_batch([RecordInput(b"after", b"recovery", 5000)]))
    assert read_all(reopened)[-1].offset == 54


def test_time_lookups_are_exact_to_the_record(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", V2)
    rng = random.Random(7)
    stamps: list[int] = []
    for _ in range(40):
        batch = [rng.randrange(0, 10_000) for _ in range(rng.randrange(1, 8))]
        log.append(encode_batch([RecordInput(None, b"x" * 30, ts) for ts in batch]))
        stamps += batch
    for target in [0, 1, 5000, 9999, 10_000, *rng.sample(range(10_000), 20)]:
        expected = next(((o, t) for o, t in enumerate(stamps) if t >= target), None)
        found = log.offset_for_timestamp(target)
        assert (None if found is None else (found.offset, found.timestamp)) == expected, target


def test_the_largest_timestamp_is_found_to_the_record(tmp_path: Path) -> None:
    """ListOffsets v7's MAX_TIMESTAMP: the first record holding the largest timestamp, even when it
    sits inside a batch (not at its end) and later batches or segments repeat the same timestamp."""
    log = Log(tmp_path / "t-0", V2)
    assert log.offset_of_max_timestamp() is None  # an empty log
    rng = random.Random(11)
    stamps: list[int] = []
    for round_ in range(60):
        batch = [rng.randrange(0, 5_000) for _ in range(rng.randrange(1, 8))]
        log.append(encode_batch([RecordInput(None, b"y" * 40, ts) for ts in batch], codec=rng.choice(list(Codec))))
        stamps += batch
        if round_ % 10 == 9:
            found = log.offset_of_max_timestamp()
            assert found is not None
            largest = max(stamps)
            assert (found.offset, found.timestamp) == (stamps.index(largest), largest)
    assert len(log.segments) > 2


def test_truncation_drops_the_batch_holding_the_offset_and_retention_goes_by_batch_time(tmp_path: Path) -> None:
    clock = FakeClock(10_000)
    log = Log(tmp_path / "t-0", dataclasses.replace(V2, retention_ms=5000), clock=clock)
    fill_batches(log, 60, start_ts=1000)
    log.truncate_to(33)  # inside the batch 30..35
    assert log.log_end_offset == 30
    log.append(encode_batch([RecordInput(b"new", b"x", 1_100)]))
    assert [m.offset for m in read_all(log)][-2:] == [29, 30]
    clock.now = 1_100 + 5000 + 1  # segments whose newest record is older than 5 s go
    assert log.enforce_retention() >= 1 and log.log_start_offset > 0


def test_a_partition_holding_both_formats(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = Log(directory, SMALL)  # written as v1 first...
    log.append(message_set([b"old-0", b"old-1"], timestamps=[1, 2]))
    log.close()
    log = Log(directory, V2)  # ... then its topic switched to v2
    log.append(encode_batch([RecordInput(b"k", b"new-2", 3, [("h", b"v")])]))
    log.append(message_set([b"old-style-3"], timestamps=[4], codec=Codec.GZIP))  # up-converted now
    log.close()
    log = Log(directory, V2)
    messages = read_all(log)
    assert [(m.offset, m.value) for m in messages] == [(0, b"old-0"), (1, b"old-1"), (2, b"new-2"), (3, b"old-style-3")]
    assert messages[2].headers == (("h", b"v"),)
    magics = [e.magic for s in log.segments for e in iter_entries(s.log_path.read_bytes())]
    assert magics == [1, 1, 2, 2]
    assert log.offset_for_timestamp(3).offset == 2  # type: ignore[union-attr]
    stamped = Log(tmp_path / "u-0", dataclasses.replace(V2, message_timestamp_type="log_append_time"))
    stamped.append(encode_batch([RecordInput(b"k", b"v", 1)]))
    (only,) = read_all(stamped)
    assert only.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert stamped.active_segment.log_path.stat().st_size > 0


def test_delete_records_moves_the_log_start_durably(tmp_path: Path) -> None:
    """DeleteRecords: offsets below the new start are gone (reads, ListOffsets' earliest, time
    lookups), whole segments below it deleted, and the start survives a restart and a crash."""
    config = LogConfig(segment_bytes=400, retention_ms=None, flush_ms=None)
    log = Log(tmp_path, config)
    for i in range(30):
        log.append(encode_batch([(None, b"v%02d" % i + b"." * 40, 1_700_000_000_000 + i, ())]))
    segments_before = len(log.segments)
    assert log.delete_records_before(17) == 17
    assert log.log_start_offset == 17
    assert len(log.segments) < segments_before  # the segments wholly below 17 are deleted
    assert log.segments[0].base_offset <= 17
    with pytest.raises(OffsetOutOfRangeError):
        log.read(16, 1000)
    assert [m.offset for m in log.read_messages(17)][:1] == [17]
    assert log.offsets_before(EARLIEST_TIME, 1) == [17]
    found = log.offset_for_timestamp(1_700_000_000_000)  # the oldest timestamp: the first kept record
    assert found is not None and found.offset == 17
    assert log.delete_records_before(5) == 17  # below the start: nothing changes
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(31)
    log.close()
    assert Log(tmp_path, config, clean_shutdown=True).log_start_offset == 17
    crashed = Log(tmp_path, config, clean_shutdown=False, recovery_point=0)
    assert crashed.log_start_offset == 17
    assert crashed.delete_records_before(30) == 30  # everything: an empty log that goes on at 30
    assert crashed.log_end_offset == 30
    assert crashed.append(encode_batch([(None, b"next", -1, ())])).first_offset == 30


def test_delete_records_to_the_end_after_a_roll_keeps_the_empty_active_segment(tmp_path: Path) -> None:
    log = Log(tmp_path, LogConfig(segment_bytes=400, retention_ms=None, flush_ms=None))
    log.append(encode_batch([(None, b"v", -1, ())]))
    log.roll()  # the active segment is empty, at the log end
    active = log.active_segment
    assert log.delete_records_before(1) == 1
    assert log.segments == (active,) and log.log_end_offset == 1
    assert log.append(encode_batch([(None, b"next", -1, ())])).first_offset == 1
