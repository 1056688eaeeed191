"""Log behaviour: append and read, rolling, flushing, offsets before a time, timestamp lookups,
retention by age and size, truncation, and reads racing with retention."""

from __future__ import annotations

import logging
import random
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog.errors import (
    CorruptRecordError,
    InvalidTimestampError,
    LogClosedError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
)
from kafkalog.log import EARLIEST_TIME, LATEST_TIME, Log, LogConfig
from kafkalog.record import Codec, TimestampType, decode_messages, iter_entries

from .helpers import SMALL, FakeClock, fill, message_set, read_all, scan_files


def test_append_assigns_dense_offsets_and_reads_back_every_message(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", SMALL)
    values = fill(log, 300, per_set=7)
    assert log.log_start_offset == 0 and log.log_end_offset == 300
    assert len(log.segments) > 3, "a 4 KiB segment size must have rolled"
    messages = read_all(log)
    assert [m.offset for m in messages] == list(range(300))
    assert [m.value for m in messages] == values
    # every segment file is named by its first offset and starts with it
    for segment in log.segments:
        first = next(iter_entries(segment.log_path.read_bytes()))
        assert first.offset == segment.base_offset
        assert segment.log_path.name == f"{segment.base_offset:020d}.log"


def test_a_new_log_reopens_without_recovery_or_index_rebuilds(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="kafkalog"):
        log = Log(tmp_path / "t-0", SMALL)
        fill(log, 100)
        log.close()
        log = Log(tmp_path / "t-0", SMALL, clean_shutdown=True)
        assert [m.offset for m in read_all(log)] == list(range(100))
    assert not [r.getMessage() for r in caplog.records if "recover" in r.getMessage() or "rebuild" in r.getMessage()]
    for segment in log.segments:
        assert all(ts >= 0 for ts, _ in segment._indexes()[1].all_entries())


def test_read_from_every_offset_starts_at_that_offset(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", SMALL)
    fill(log, 120, per_set=4)
    for offset in range(120):
        assert log.read_messages(offset, 100)[0].offset == offset


def test_read_at_log_end_is_empty_and_outside_the_range_is_an_error(tmp_path: Path) -> None:
    clock = FakeClock()
    log = Log(tmp_path / "t-0", SMALL.__class__(**{**_fields(SMALL), "retention_ms": 1000}), clock=clock)
    fill(log, 200, start_ts=clock.now)
    info = log.read(200, 1000)
    assert info.region is None and info.log_end_offset == 200
    with pytest.raises(OffsetOutOfRangeError) as excinfo:
        log.read(201, 1000)
    assert excinfo.value.log_end_offset == 200 and excinfo.value.error_code == 1
    clock.now += 10_000
    fill(log, 1, start_ts=clock.now)
    assert log.enforce_retention() > 0
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 1000)  # deleted by retention: below the log start
    assert log.read_messages(log.log_start_offset, 100)[0].offset == log.log_start_offset


def _fields(config: LogConfig) -> dict[str, object]:
    return {name: getattr(config, name) for name in config.__dataclass_fields__}


def test_read_region_respects_max_bytes_and_may_end_inside_a_message(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", SMALL)
    fill(log, 50)
    info = log.read(10, 150)
    assert info.region is not None
    with info.region as region:
        data = region.read()
    assert len(data) == 150
    messages = list(decode_messages(data))
    assert messages and messages[0].offset == 10
    assert len(messages) < 3, "150 bytes cannot hold three 100-byte entries: the tail is partial"


def test_min_one_message_returns_a_message_larger_than_max_bytes(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", LogConfig(retention_ms=None))
    log.append(message_set([b"x" * 5000]))
    assert log.read_messages(0, 10)[0].value == b"x" * 5000
    info = log.read(0, 10)
    assert info.region is not None and info.region.length == 10
    info.region.close()


def test_compressed_sets_keep_inner_offsets_and_reads_inside_a_wrapper_start_at_the_offset(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", SMALL)
    for codec in (Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.NONE):
        log.append(message_set([f"{codec.name}-{i}".encode() for i in range(10)], timestamps=[5] * 10, codec=codec))
    assert log.log_end_offset == 40
    for offset in range(40):
        assert log.read_messages(offset, 4096)[0].offset == offset
    assert [m.value for m in read_all(log)][15] == b"SNAPPY-5"


def test_magic_0_messages_are_stored_as_magic_1_with_the_append_time(tmp_path: Path) -> None:
    clock = FakeClock(42_000)
    log = Log(tmp_path / "t-0", SMALL, clock=clock)
    log.append(message_set([b"a", b"b"], magic=0))
    log.append(message_set([b"c", b"d"], magic=0, codec=Codec.GZIP))
    entries = list(iter_entries(log.active_segment.log_path.read_bytes()))
    assert {e.magic for e in entries} == {1}
    messages = read_all(log)
    assert [m.value for m in messages] == [b"a", b"b", b"c", b"d"]
    assert {(m.timestamp, m.timestamp_type) for m in messages} == {(42_000, TimestampType.LOG_APPEND_TIME)}


def test_log_append_time_stamps_every_message(tmp_path: Path) -> None:
    clock = FakeClock(77_000)
    log = Log(tmp_path / "t-0", LogConfig(message_timestamp_type="log_append_time"), clock=clock)
    info = log.append(message_set([b"a", b"b"], timestamps=[1, 2]))
    assert info.log_append_time == 77_000
    assert [m.timestamp for m in read_all(log)] == [77_000, 77_000]


def test_a_rejected_append_leaves_nothing_behind(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", LogConfig(max_message_bytes=500))
    fill(log, 3)
    good = message_set([b"ok"])
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 1
    for data, error in (
        (bytes(bad_crc), CorruptRecordError),
        (message_set([b"x" * 600]), RecordTooLargeError),
        (_with_timestamp(good, -7), InvalidTimestampError),
        (good[:-3], CorruptRecordError),
        (b"", CorruptRecordError),
    ):
        size = log.size_in_bytes
        with pytest.raises(error):
            log.append(data)
        assert log.size_in_bytes == size and log.log_end_offset == 3
    log.append(good)
    assert [m.offset for m in read_all(log)] == [0, 1, 2, 3]


def _with_timestamp(message_set_bytes: bytes, timestamp: int) -> bytes:
    import struct
    import zlib

    data = bytearray(message_set_bytes)
    struct.pack_into(">q", data, 18, timestamp)
    struct.pack_into(">I", data, 12, zlib.crc32(data[16:]))
    return bytes(data)


def test_roll_by_age_uses_the_clock(tmp_path: Path) -> None:
    clock = FakeClock()
    log = Log(tmp_path / "t-0", LogConfig(segment_ms=60_000, retention_ms=None), clock=clock)
    fill(log, 5)
    clock.now += 59_999
    fill(log, 5)
    assert len(log.segments) == 1
    clock.now += 1
    fill(log, 5)
    assert len(log.segments) == 2 and log.active_segment.base_offset == 10


def test_a_set_larger_than_a_segment_gets_a_segment_of_its_own(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", LogConfig(segment_bytes=1024, max_message_bytes=10_000, retention_ms=None))
    fill(log, 3)
    log.append(message_set([b"y" * 3000]))
    fill(log, 3)
    assert [s.base_offset for s in log.segments] == [0, 3, 4]
    assert read_all(log)[3].value == b"y" * 3000


def test_flush_policy_by_count_moves_the_recovery_point(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", LogConfig(flush_messages=10, flush_ms=None, retention_ms=None))
    fill(log, 5)
    assert log.recovery_point == 0
    fill(log, 5)
    assert log.recovery_point == 10
    fill(log, 3)
    assert log.recovery_point == 10
    log.flush()
    assert log.recovery_point == 13


def test_flush_policy_by_time_is_applied_on_append_and_by_maybe_flush(tmp_path: Path) -> None:
    clock = FakeClock()
    log = Log(tmp_path / "t-0", LogConfig(flush_ms=1000, retention_ms=None), clock=clock)
    fill(log, 4)
    assert log.recovery_point == 0
    clock.now += 1000
    log.maybe_flush()
    assert log.recovery_point == 4
    fill(log, 2)
    clock.now += 1500
    fill(log, 1)  # due on this append
    assert log.recovery_point == 7


def test_rolling_flushes_the_sealed_segment(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", SMALL)
    fill(log, 100)
    sealed = log.segments[:-1]
    assert sealed and log.recovery_point >= log.active_segment.base_offset
    for segment in sealed:
        # sealed indexes are trimmed to their entries
        assert segment.index_path.stat().st_size % 8 == 0
        assert segment.index_path.stat().st_size < SMALL.index_max_bytes


def test_offsets_before_follows_the_seeds_get_offsets_before(tmp_path: Path) -> None:
    clock = FakeClock(10_000)
    log = Log(tmp_path / "t-0", SMALL, clock=clock)
    fill(log, 150, start_ts=0)  # timestamps 0..149
    bases = [s.base_offset for s in log.segments]
    assert log.offsets_before(LATEST_TIME, 100) == [150, *reversed(bases)]
    assert log.offsets_before(LATEST_TIME, 1) == [150]
    assert log.offsets_before(EARLIEST_TIME, 5) == [0]
    # segments whose newest message is not after the time, newest first
    newest = [s.max_timestamp for s in log.segments]
    expect = [b for b, t in zip(bases, newest, strict=True) if t <= 80][::-1]
    assert log.offsets_before(80, 100) == expect
    assert log.offsets_before(-5, 10) == []


def _brute_force_first_at_or_after(log: Log, timestamp: int) -> tuple[int, int] | None:
    for message in scan_files(log.directory):
        if message.timestamp >= timestamp:
            return message.offset, message.timestamp
    return None


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    stamps=st.lists(st.integers(min_value=0, max_value=500), min_size=1, max_size=300),
    codecs=st.lists(st.sampled_from([Codec.NONE, Codec.GZIP, Codec.SNAPPY]), min_size=1, max_size=5),
    probes=st.lists(st.integers(min_value=-5, max_value=520), min_size=1, max_size=20),
    set_size=st.integers(min_value=1, max_value=9),
)
def test_offset_for_timestamp_matches_a_brute_force_scan(
    tmp_path_factory: pytest.TempPathFactory, stamps: list[int], codecs: list[Codec], probes: list[int], set_size: int
) -> None:
    """Out-of-order timestamps across many segments and compressed sets: exact to the message."""
    log = Log(tmp_path_factory.mktemp("ts") / "t-0", SMALL)
    for i in range(0, len(stamps), set_size):
        chunk = stamps[i : i + set_size]
        log.append(message_set([b"v" * 30] * len(chunk), timestamps=chunk, codec=codecs[i % len(codecs)]))
    for probe in probes:
        found = log.offset_for_timestamp(probe)
        expect = _brute_force_first_at_or_after(log, probe)
        assert (None if found is None else (found.offset, found.timestamp)) == expect, probe
    log.close()


def test_offset_for_timestamp_before_the_start_and_after_the_end(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", SMALL)
    fill(log, 50, start_ts=1000)
    found = log.offset_for_timestamp(0)
    assert found is not None and found.offset == log.log_start_offset
    assert log.offset_for_timestamp(10**12) is None


def _retention_log(tmp_path: Path, clock: FakeClock, **overrides: object) -> Log:
    config = LogConfig(**{**_fields(SMALL), "retention_ms": 60_000, **overrides})  # type: ignore[arg-type]
    return Log(tmp_path / "t-0", config, clock=clock)


def test_retention_by_age_uses_message_timestamps_not_file_times(tmp_path: Path) -> None:
    clock = FakeClock(1_000_000)
    log = _retention_log(tmp_path, clock)
    fill(log, 100, start_ts=0)  # all very old by message time
    old_segments = log.segments[:-1]
    fill(log, 50, start_ts=clock.now)  # fresh
    for segment in log.segments:  # touching files must not matter
        Path(segment.log_path).touch()
    deleted = log.enforce_retention()
    assert deleted == len(old_segments) and deleted > 0
    assert all(not s.log_path.exists() for s in old_segments)
    assert log.log_start_offset == log.segments[0].base_offset
    assert log.enforce_retention() == 0, "a second pass is a no-op"


def test_retention_by_age_never_deletes_by_mtime(tmp_path: Path) -> None:
    import os

    clock = FakeClock(1_000_000)
    log = _retention_log(tmp_path, clock)
    fill(log, 100, start_ts=clock.now)  # fresh by message time
    for segment in log.segments:
        os.utime(segment.log_path, (0, 0))  # ancient by file time
    assert log.enforce_retention() == 0


def test_retention_when_the_active_segment_expired_rolls_then_deletes(tmp_path: Path) -> None:
    clock = FakeClock(1_000_000)
    log = _retention_log(tmp_path, clock)
    fill(log, 100, start_ts=0)
    segments_before = len(log.segments)
    assert log.enforce_retention() == segments_before, "every segment, the active one included"
    assert log.log_start_offset == 100 and log.log_end_offset == 100
    assert log.active_segment.size == 0 and len(log.segments) == 1
    fill(log, 3, start_ts=clock.now)
    assert [m.offset for m in read_all(log)] == [100, 101, 102]
    assert log.enforce_retention() == 0


def test_retention_by_size_keeps_the_newest_within_the_limit(tmp_path: Path) -> None:
    clock = FakeClock()
    log = _retention_log(tmp_path, clock, retention_ms=None, retention_bytes=10_000)
    fill(log, 400, start_ts=clock.now)
    before = log.size_in_bytes
    deleted = log.enforce_retention()
    assert deleted > 0 and before > 10_000
    assert log.size_in_bytes <= 10_000 + log.segments[0].size
    assert log.size_in_bytes - log.segments[0].size < 10_000, "deleting one more would go below the limit"
    assert log.enforce_retention() == 0
    assert [m.offset for m in read_all(log)][-1] == 399


def test_a_region_stays_readable_after_retention_deletes_its_segment(tmp_path: Path) -> None:
    clock = FakeClock(1_000_000)
    log = _retention_log(tmp_path, clock)
    fill(log, 100, start_ts=0)
    fill(log, 10, start_ts=clock.now)
    info = log.read(0, 1000)
    assert info.region is not None
    assert log.enforce_retention() > 0
    with info.region as region:
        assert next(iter(decode_messages(region.read()))).offset == 0


def test_reads_and_lookups_racing_with_appends_and_retention_never_see_wrong_data(tmp_path: Path) -> None:
    clock = FakeClock(1_000_000)
    log = _retention_log(tmp_path, clock, retention_ms=None, retention_bytes=20_000)
    stop = threading.Event()
    errors: list[BaseException] = []

    def reader() -> None:
        rng = random.Random(7)
        while not stop.is_set():
            try:
                start, end = log.log_start_offset, log.log_end_offset
                if end == start:
                    continue
                offset = rng.randrange(start, end)
                try:
                    messages = log.read_messages(offset, 2000)
                except OffsetOutOfRangeError:
                    continue  # retention moved the start meanwhile
                assert messages and messages[0].offset == offset
                assert all(m.value and m.value.startswith(f"m{m.offset:06d}".encode()) for m in messages)
                latest = log.offsets_before(LATEST_TIME, 3)
                assert latest and latest[0] >= end and latest == sorted(latest, reverse=True)
                found = log.offset_for_timestamp(clock.now + offset % 50)
                assert found is None or found.timestamp >= clock.now + offset % 50
            except BaseException as exc:
                errors.append(exc)
                return

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for thread in threads:
        thread.start()
    for _ in range(60):
        fill(log, 20, start_ts=clock.now)
        log.enforce_retention()
    stop.set()
    for thread in threads:
        thread.join()
    assert not errors, errors[0]
    assert log.log_start_offset > 0


def test_truncate_to_removes_the_tail_and_appends_continue(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", SMALL)
    fill(log, 200)
    log.truncate_to(77)
    assert log.log_end_offset == 77
    assert [m.offset for m in read_all(log)] == list(range(77))
    fill(log, 5)
    assert [m.offset for m in read_all(log)] == list(range(82))
    log.truncate_to(0)
    assert log.log_end_offset == 0 and read_all(log) == []


def test_closed_log_refuses_work(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", SMALL)
    fill(log, 3)
    log.close()
    with pytest.raises(LogClosedError):
        log.append(message_set([b"x"]))


def test_an_open_log_holds_one_descriptor_per_segment(tmp_path: Path) -> None:
    """Its .log only: the indexes live in maps (a broker of 10,000 partitions must fit the usual
    descriptor limits, as Kafka's does)."""

    def descriptors() -> int:
        return len(list(Path("/proc/self/fd").iterdir()))

    before = descriptors()
    config = LogConfig(segment_bytes=4096, index_interval_bytes=256)
    log = Log(tmp_path / "t-0", config)
    fill(log, 200)  # several segments, each with index entries
    segments = len(list((tmp_path / "t-0").glob("*.log")))
    assert segments > 2
    assert descriptors() - before == segments
    assert read_all(log)[-1].offset == 199  # the indexes still answer: lookups go through the maps
    log.close()
    assert descriptors() == before
    reopened = Log(tmp_path / "t-0", config)
    assert descriptors() - before == segments
    assert [m.offset for m in read_all(reopened)] == list(range(200))
    reopened.close()
