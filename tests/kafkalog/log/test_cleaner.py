"""The log cleaner on real logs (kafkalog.log.cleaner): the latest record of every key stays at its
offset and the rest goes, leaving gaps that reads step over; tombstones and emptied transaction
markers stay for delete.retention.ms, then go; aborted transactional data goes, committed stays;
an idempotent producer's last batch stays (emptied) and the producer goes on after a reopening;
open transactions, the active segment and messages younger than min.compaction.lag.ms are never
cleaned; a map too small for the dirty section cleans it in several passes to the same result;
compressed, LogAppendTime and pre-v2 entries; the checkpoint; retention by policy; and the cleaner
thread working while appends go on."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest

from kafkalog.log import EARLIEST_TIME, Log, LogConfig, LogManager
from kafkalog.log.cleaner.cleaner import CLEANER_CHECKPOINT_FILE, LogCleaner
from kafkalog.log.cleaner.offset_map import MIN_MAP_BYTES, OffsetMap
from kafkalog.log.cleaner.settings import CleanerSettings
from kafkalog.log.producer_state import SNAPSHOT_SUFFIX
from kafkalog.record import Codec, Message
from kafkalog.record.batch_format import RecordInput, encode_batch, iter_headers
from kafkalog.record.message import TimestampType

from .helpers import FakeClock, message_set, read_all

NOW = 1_700_000_000_000
DAY = 86_400_000
COMPACT = LogConfig(
    segment_bytes=1500, index_interval_bytes=200, retention_ms=None, flush_ms=None, cleanup_policy="compact",
    delete_retention_ms=DAY,
)  # fmt: skip


def keyed(key: bytes, value: bytes | None, *, timestamp: int = NOW, **batch: object) -> bytes:
    return encode_batch([RecordInput(key, value, timestamp)], **batch)  # type: ignore[arg-type]


def cleaner_of(log: Log, *, map_bytes: int = 64 * MIN_MAP_BYTES, clock: FakeClock | None = None) -> LogCleaner:
    settings = CleanerSettings(dedupe_buffer_bytes=map_bytes)
    return LogCleaner(settings, lambda: [(("t", 0), log, log.directory.parent)], [log.directory.parent],
                      clock=clock or FakeClock(NOW))  # fmt: skip


def clean_fully(cleaner: LogCleaner, now: int = NOW) -> int:
    passes = 0
    while cleaner.clean_once(now) is not None:
        passes += 1
        assert passes < 100
    return passes


def latest(
    history: list[tuple[int, bytes, bytes | None]], *, tombstones: bool = True
) -> dict[bytes, tuple[int, bytes | None]]:
    view: dict[bytes, tuple[int, bytes | None]] = {}
    for offset, key, value in history:
        view[key] = (offset, value)
    return {k: v for k, v in view.items() if tombstones or v[1] is not None}


def as_view(messages: list[Message]) -> dict[bytes, tuple[int, bytes | None]]:
    view: dict[bytes, tuple[int, bytes | None]] = {}
    for message in messages:
        assert message.key is not None
        view[message.key] = (message.offset, message.value)
    return view


def write(
    log: Log, count: int, keys: int, *, seed: int = 1, tombstone_every: int = 0
) -> list[tuple[int, bytes, bytes | None]]:
    rng = random.Random(seed)
    history = []
    for i in range(count):
        key = b"key-%03d" % rng.randrange(keys)
        value = None if tombstone_every and i % tombstone_every == tombstone_every - 1 else b"value-%05d" % i
        offset = log.append(keyed(key, value)).first_offset
        history.append((offset, key, value))
    return history


def test_the_latest_record_of_each_key_stays_at_its_offset_and_reads_step_over_the_gaps(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", COMPACT, clock=FakeClock(NOW))
    history = write(log, 400, 30, tombstone_every=17)
    end, segments_before = log.log_end_offset, len(log.segments)
    assert clean_fully(cleaner_of(log)) == 1
    messages = read_all(log)
    active = log.active_segment.base_offset
    cleaned = [m for m in messages if m.offset < active]
    sealed_history = [h for h in history if h[0] < active]
    assert as_view(cleaned) == latest(sealed_history), "one record per key below the active segment: its latest"
    assert as_view(messages) == latest(history), "tombstones younger than delete.retention.ms stay"
    assert [m.offset for m in messages] == sorted({m.offset for m in messages}), "offsets rise"
    assert [m.offset for m in messages if m.offset >= active] == list(range(active, end)), "the active one is whole"
    assert log.log_start_offset == 0 and log.log_end_offset == end
    assert log.offsets_before(EARLIEST_TIME, 1) == [0], "emptied segments do not move the earliest offset"
    assert len(log.segments) <= segments_before
    gap = next(o for o in range(active) if o not in {m.offset for m in cleaned})
    first = log.read_messages(gap)[0]
    assert first.offset > gap and first.offset == min(m.offset for m in messages if m.offset > gap)
    log.close()
    reopened = Log(tmp_path / "t-0", COMPACT, clean_shutdown=False)  # recovery scans the cleaned segments
    assert as_view(read_all(reopened)) == latest(history) and reopened.corruption is None
    assert reopened.log_end_offset == end
    names = {p.suffix for p in reopened.directory.iterdir()}
    assert not names & {".cleaned", ".swap", ".deleted", ".tmp"}
    reopened.close()


def test_tombstones_and_superseded_values_go_after_delete_retention(tmp_path: Path) -> None:
    clock = FakeClock(NOW)
    config = LogConfig(**{**_fields(COMPACT), "min_cleanable_dirty_ratio": 0.01})  # one new record is enough
    log = Log(tmp_path / "t-0", config, clock=clock)
    history = write(log, 300, 20, tombstone_every=5)
    log.roll()
    cleaner = cleaner_of(log, clock=clock)
    clean_fully(cleaner)
    assert any(m.value is None for m in read_all(log)), "within delete.retention.ms the deletes stay"
    log.append(keyed(b"late", b"x", timestamp=NOW + 2 * DAY))  # the dirty section a later pass reads
    log.roll()
    clean_fully(cleaner, NOW + 2 * DAY)
    view = as_view(read_all(log))
    assert view == {**latest(history, tombstones=False), b"late": (300, b"x")}, "deleted keys are gone for good"


def test_an_idempotent_producers_last_batch_stays_emptied_and_it_goes_on_after_a_reopening(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", COMPACT, clock=FakeClock(NOW))
    for sequence in range(3):
        log.append(keyed(b"k", b"p%d" % sequence, producer_id=7, producer_epoch=0, base_sequence=sequence))
    for i in range(40):
        log.append(keyed(b"k", b"later-%d" % i))  # supersedes every record the producer wrote
    log.roll()
    assert clean_fully(cleaner_of(log)) == 1
    batches = [h for s in log.segments for h in _headers(s.log_path)]
    mine = [h for h in batches if h.producer_id == 7]
    assert [(h.base_sequence, h.records_count) for h in mine] == [(2, 0)], "only its last batch, with no records"
    assert b"p2" not in {m.value for m in read_all(log)}
    log.close()
    for snapshot in (tmp_path / "t-0").glob(f"*{SNAPSHOT_SUFFIX}"):
        snapshot.unlink()  # the state is rebuilt from the log alone
    reopened = Log(tmp_path / "t-0", COMPACT)
    assert reopened.append(keyed(b"k", b"p3", producer_id=7, producer_epoch=0, base_sequence=3)).first_offset >= 43
    reopened.close()


def test_aborted_data_goes_committed_stays_and_open_transactions_are_not_cleaned(tmp_path: Path) -> None:
    clock = FakeClock(NOW)
    log = Log(tmp_path / "t-0", LogConfig(**{**_fields(COMPACT), "min_cleanable_dirty_ratio": 0.01}), clock=clock)

    def txn_batch(producer: int, sequence: int, key: bytes, value: bytes) -> bytes:
        return keyed(key, value, producer_id=producer, producer_epoch=0, base_sequence=sequence, transactional=True)

    log.append(txn_batch(1, 0, b"a", b"committed"))
    log.append_marker(1, 0, commit=True, coordinator_epoch=0)
    log.append(txn_batch(2, 0, b"b", b"aborted"))
    abort = log.append_marker(2, 0, commit=False, coordinator_epoch=0).first_offset
    log.append(txn_batch(2, 1, b"b2", b"then committed"))  # the producer's last batch is this one
    log.append_marker(2, 0, commit=True, coordinator_epoch=0)
    log.roll()
    log.append(txn_batch(3, 0, b"c", b"open"))  # holds the last stable offset
    log.roll()
    log.append(keyed(b"d", b"after"))
    cleaner = cleaner_of(log, clock=clock)
    clean_fully(cleaner)
    markers = {h.base_offset for s in log.segments for h in _headers(s.log_path) if h.control}
    values = {m.key: m.value for m in read_all(log) if m.offset not in markers}
    assert values == {b"a": b"committed", b"b2": b"then committed", b"c": b"open", b"d": b"after"}, "aborted: gone"
    markers = {h.base_offset for s in log.segments for h in _headers(s.log_path) if h.control}
    assert abort in markers, "the abort marker stays within delete.retention.ms"
    assert [e.producer_id for s in log.segments for e in s.txn_index.entries] == [2]
    assert log.aborted_transactions(0, log.log_end_offset)[0].producer_id == 2
    segment_of_open = next(s for s in log.segments if s.base_offset <= 6 < s.next_offset)
    assert log.last_stable_offset == 6 and segment_of_open.base_offset == 6
    assert [m.value for m in read_all(log) if m.offset >= 6] == [b"open", b"after"], "above the LSO: untouched"
    log.append_marker(3, 0, commit=True, coordinator_epoch=0)
    log.roll()  # a dirty section for the next pass, past the horizon
    clean_fully(cleaner, NOW + 2 * DAY)
    markers = {h.base_offset for s in log.segments for h in _headers(s.log_path) if h.control}
    assert abort not in markers, "past the horizon, a marker whose data is gone goes"
    assert 1 in markers and abort + 2 in markers, "a commit marker whose data stays, stays"
    assert not [e for s in log.segments for e in s.txn_index.entries]
    assert log.last_stable_offset == log.log_end_offset


def test_young_messages_wait_for_min_compaction_lag(tmp_path: Path) -> None:
    config = LogConfig(**{**_fields(COMPACT), "min_compaction_lag_ms": 60_000})
    log = Log(tmp_path / "t-0", config, clock=FakeClock(NOW))
    write(log, 100, 5)
    log.roll()
    cleaner = cleaner_of(log)
    assert cleaner.clean_once(NOW + 1000) is None, "every segment is younger than the lag"
    assert len(read_all(log)) == 100
    assert cleaner.clean_once(NOW + 61_000) is not None
    assert len(read_all(log)) == 5


def test_a_map_too_small_cleans_in_several_passes_to_the_same_result(tmp_path: Path) -> None:
    config = LogConfig(**{**_fields(COMPACT), "segment_bytes": 20_000, "min_cleanable_dirty_ratio": 0.01})
    small = Log(tmp_path / "small" / "t-0", config, clock=FakeClock(NOW))  # each its own checkpoint
    big = Log(tmp_path / "big" / "t-0", config, clock=FakeClock(NOW))
    rng = random.Random(3)
    for i in range(4000):
        batch = encode_batch([RecordInput(b"k%05d" % rng.randrange(2500), b"v%d" % i, NOW)])
        small.append(batch)
        big.append(batch)
    small.roll()
    big.roll()
    small_cleaner = cleaner_of(small, map_bytes=MIN_MAP_BYTES)
    assert clean_fully(small_cleaner) > 1, "the map holds fewer keys than the log has"
    assert small_cleaner.map_memory_bytes == MIN_MAP_BYTES, "memory stays within the configured bound"
    assert clean_fully(cleaner_of(big)) == 1
    assert as_view(read_all(small)) == as_view(read_all(big))
    assert len(read_all(small)) == len(as_view(read_all(small))), "one record per key"
    with pytest.raises(Exception, match="at least"):
        OffsetMap(MIN_MAP_BYTES - 1)


def test_compressed_log_append_time_and_message_set_entries(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", COMPACT, clock=FakeClock(NOW))
    log.append(message_set([b"old"], keys=[b"legacy"], timestamps=[NOW]))  # v1 in, converted to a batch
    records = [RecordInput(b"k%d" % (i % 4), b"gz-%d" % i, NOW + i) for i in range(12)]
    log.append(encode_batch(records, codec=Codec.GZIP))
    log.append(encode_batch(records[:3], codec=Codec.ZSTD, timestamp_type=TimestampType.LOG_APPEND_TIME))
    log.roll()
    clean_fully(cleaner_of(log))
    messages = read_all(log)
    assert {m.key: m.value for m in messages} == {b"legacy": b"old", b"k0": b"gz-0", b"k1": b"gz-1",
                                                  b"k2": b"gz-2", b"k3": b"gz-11"}  # fmt: skip
    headers = [h for s in log.segments for h in _headers(s.log_path)]
    assert {h.codec for h in headers} >= {Codec.GZIP, Codec.ZSTD}, "a batch keeps its codec"
    gzip = next(h for h in headers if h.codec == Codec.GZIP)
    assert gzip.records_count == 1 and gzip.max_timestamp == NOW + 11, "max timestamp of what stayed"


def test_retention_follows_the_policy(tmp_path: Path) -> None:
    for policy, kept in (("compact", 60), ("compact,delete", 0), ("delete", 0)):
        config = LogConfig(**{**_fields(COMPACT), "cleanup_policy": policy, "retention_ms": 1000})
        log = Log(tmp_path / f"{policy.replace(',', '_')}-0", config, clock=FakeClock(NOW))
        write(log, 60, 60)
        log.roll()
        log.enforce_retention(NOW + 10_000)
        assert len(read_all(log)) == kept, policy


def test_the_checkpoint_keeps_where_the_next_pass_starts(tmp_path: Path) -> None:
    with LogManager(
        [tmp_path], COMPACT, cleaner=CleanerSettings(dedupe_buffer_bytes=MIN_MAP_BYTES), clock=FakeClock(NOW)
    ) as manager:
        log = manager.get_or_create_log("t", 0)
        write(log, 200, 10)
        log.roll()
        result = manager.cleaner.clean_once(NOW)
        assert result is not None and result.map_end == log.active_segment.base_offset
        assert manager.cleaner.clean_once(NOW) is None, "nothing dirty any more"
    text = (tmp_path / CLEANER_CHECKPOINT_FILE).read_text().split("\n")
    assert text[2] == f"t 0 {result.map_end}"
    with LogManager([tmp_path], COMPACT, clock=FakeClock(NOW)) as manager:
        assert manager.cleaner.first_dirty(("t", 0)) == result.map_end
        manager.delete_logs("t")
        assert manager.cleaner.first_dirty(("t", 0)) == 0


def test_the_cleaner_thread_cleans_while_appends_go_on(tmp_path: Path) -> None:
    settings = CleanerSettings(dedupe_buffer_bytes=MIN_MAP_BYTES * 8, backoff_ms=20)
    config = LogConfig(**{**_fields(COMPACT), "min_cleanable_dirty_ratio": 0.2})
    with LogManager([tmp_path], config, cleaner=settings) as manager:
        log = manager.get_or_create_log("t", 0)
        manager.start_maintenance(interval_ms=50)
        history: list[tuple[int, bytes, bytes | None]] = []
        stop = threading.Event()
        problems: list[BaseException] = []

        def read_while_cleaning() -> None:
            try:
                while not stop.is_set():
                    messages = read_all(log)
                    offsets = [m.offset for m in messages]
                    assert offsets == sorted(set(offsets))
            except BaseException as exc:
                problems.append(exc)

        reader = threading.Thread(target=read_while_cleaning)
        reader.start()
        try:
            for i in range(3000):
                key = b"k%02d" % (i % 40)
                history.append((log.append(keyed(key, b"v%d" % i)).first_offset, key, b"v%d" % i))
                if manager.cleaner.passes >= 3 and i > 1500:
                    break
        finally:
            stop.set()
            reader.join()
        assert not problems, problems
        assert manager.cleaner.passes >= 1, "the thread cleaned while appends went on"
        assert as_view(read_all(log)) == latest(history)
        assert len(read_all(log)) < len(history)


def _headers(path: Path) -> list:  # type: ignore[type-arg]
    return list(iter_headers(path.read_bytes()))


def _fields(config: LogConfig) -> dict[str, object]:
    return {name: getattr(config, name) for name in config.__dataclass_fields__}


def test_a_committed_transaction_after_an_aborted_one_of_its_producer_stays(tmp_path: Path) -> None:
    clock = FakeClock(NOW)
    log = Log(tmp_path / "t-0", LogConfig(**{**_fields(COMPACT), "min_cleanable_dirty_ratio": 0.01}), clock=clock)

    def txn_batch(sequence: int, key: bytes, value: bytes) -> bytes:
        return keyed(key, value, producer_id=1, producer_epoch=0, base_sequence=sequence, transactional=True)

    log.append(keyed(b"y", b"old-y"))
    log.append(txn_batch(0, b"x", b"aborted"))
    log.append_marker(1, 0, commit=False, coordinator_epoch=0)  # the abort marker stays (its horizon)
    log.roll()
    log.append(txn_batch(1, b"y", b"committed-y"))
    log.append_marker(1, 0, commit=True, coordinator_epoch=0)
    cleaner = cleaner_of(log, clock=clock)
    clean_fully(cleaner)
    log.roll()
    log.append(keyed(b"z", b"z"))
    log.roll()
    clean_fully(cleaner)
    markers = {h.base_offset for s in log.segments for h in _headers(s.log_path) if h.control}
    assert {m.key: m.value for m in read_all(log) if m.offset not in markers} == {b"y": b"committed-y", b"z": b"z"}


def test_deletes_stay_through_their_first_pass_whatever_their_timestamps_and_past_a_full_map(tmp_path: Path) -> None:
    old = NOW - 3 * DAY  # written long ago, as a mirror or a restore writes them
    config = LogConfig(**{**_fields(COMPACT), "segment_bytes": 1_000_000, "min_cleanable_dirty_ratio": 0.0})
    log = Log(tmp_path / "t-0", config, clock=FakeClock(NOW))
    log.append(encode_batch([RecordInput(b"victim", b"alive", old)]))
    for first in range(0, 1000, 100):  # more keys than the smallest map holds
        log.append(encode_batch([RecordInput(b"k%07d" % j, b"v", old) for j in range(first, first + 100)]))
    log.append(encode_batch([RecordInput(b"victim", None, old), RecordInput(b"gone", None, old)]))
    log.roll()
    cleaner = cleaner_of(log, map_bytes=MIN_MAP_BYTES)
    first_pass = cleaner.clean_once(NOW)
    assert first_pass is not None and first_pass.map_end < 1001, "the map filled before the delete"
    victim = [m.value for m in read_all(log) if m.key == b"victim"]
    assert victim[-1] is None, "the delete stays: the key is not back"
    clean_fully(cleaner, NOW)
    assert {m.key: m.value for m in read_all(log) if m.key in (b"victim", b"gone")} == {b"victim": None, b"gone": None}
    log.append(encode_batch([RecordInput(b"later", b"x", NOW)]))
    log.roll()
    clean_fully(cleaner, NOW + 2 * DAY)  # a day after the passes that first cleaned them
    assert not [m for m in read_all(log) if m.key in (b"victim", b"gone")], "gone a delete.retention.ms later"


def test_an_emptied_transactional_last_batch_keeps_its_marker_and_the_stable_offset_moves(tmp_path: Path) -> None:
    clock = FakeClock(NOW)
    log = Log(tmp_path / "t-0", LogConfig(**{**_fields(COMPACT), "min_cleanable_dirty_ratio": 0.01}), clock=clock)
    log.append(keyed(b"k", b"txn", producer_id=9, producer_epoch=0, base_sequence=0, transactional=True))
    log.append_marker(9, 0, commit=True, coordinator_epoch=0)
    log.append(keyed(b"k", b"newer"))  # supersedes the producer's only record
    log.roll()
    cleaner = cleaner_of(log, clock=clock)
    clean_fully(cleaner)
    log.append(keyed(b"other", b"x"))
    log.roll()
    clean_fully(cleaner, NOW + 2 * DAY)
    assert [(h.producer_id, h.control) for h in _headers(log.segments[0].log_path)][:2] == [(9, False), (9, True)]
    end = log.log_end_offset
    log.close()
    for snapshot in (tmp_path / "t-0").glob(f"*{SNAPSHOT_SUFFIX}"):
        snapshot.unlink()
    reopened = Log(tmp_path / "t-0", log.config, clock=clock)  # the state replayed from the log alone
    assert reopened.last_stable_offset == reopened.log_end_offset == end
    reopened.close()


def test_a_deleted_topic_and_a_truncation_in_or_out_of_the_broker_start_the_cleaner_over(tmp_path: Path) -> None:
    settings = CleanerSettings(dedupe_buffer_bytes=MIN_MAP_BYTES)
    config = LogConfig(**{**_fields(COMPACT), "min_cleanable_dirty_ratio": 0.01})
    with LogManager([tmp_path], config, cleaner=settings, clock=FakeClock(NOW)) as manager:
        write(manager.get_or_create_log("t", 0), 200, 10)
        manager.get_or_create_log("t", 0).roll()
        assert manager.cleaner.clean_once(NOW) is not None
        manager.delete_logs("t")
    with LogManager([tmp_path], config, cleaner=settings, clock=FakeClock(NOW)) as manager:
        log = manager.get_or_create_log("t", 0)  # the same name again: nothing of the old one applies
        log.append(keyed(b"K", b"v1"))
        log.append(keyed(b"K", None))
        log.roll()
        assert manager.cleaner.clean_once(NOW) is not None
        log.append(keyed(b"later", b"x"))
        log.roll()
        clean_fully(manager.cleaner, NOW + 2 * DAY)
        assert [m.key for m in read_all(log)] == [b"later"], "the old value did not come back"
        write(log, 60, 5)
        log.roll()
        clean_fully(manager.cleaner, NOW + 2 * DAY)
        present = {m.offset for m in read_all(log)}
        gap = next(o for o in range(min(present) + 2, log.log_end_offset) if o not in present and o - 1 not in present)
        log.truncate_to(gap)  # into a gap: offsets below it are never given out again
        assert log.log_end_offset == gap and log.append(keyed(b"new", b"n")).first_offset == gap
        log.append(keyed(b"new", None))
        log.roll()
        assert clean_fully(manager.cleaner, NOW + 2 * DAY) <= 2, "passes that make progress, then none"
        assert manager.cleaner.first_dirty(("t", 0)) == log.active_segment.base_offset
        assert [m.value for m in read_all(log) if m.key == b"new"] == [None], "its delete stays its first pass"
    log_dir = tmp_path / "t-0"
    offline = Log(log_dir, config)  # as `kafkalog log truncate` does, the broker stopped
    offline.truncate_to(gap - 1)
    offline.close()
    with LogManager([tmp_path], config, cleaner=settings, clock=FakeClock(NOW)) as manager:
        log = manager.get_or_create_log("t", 0)
        assert log.log_end_offset == gap - 1, "the end a truncation left is kept across a reopening"
        assert manager.cleaner.first_dirty(("t", 0)) <= gap - 1
        log.append(keyed(b"back", b"v"))
        log.append(keyed(b"back", None))
        log.roll()
        clean_fully(manager.cleaner, NOW + 4 * DAY)
        assert [m.value for m in read_all(log) if m.key == b"back"] == [None], "not judged by the old notes"


def test_tombstones_go_on_a_log_written_and_cleaned_all_the_time(tmp_path: Path) -> None:
    config = LogConfig(**{**_fields(COMPACT), "segment_bytes": 1_000_000, "min_cleanable_dirty_ratio": 0.0})
    log = Log(tmp_path / "t-0", config, clock=FakeClock(NOW))
    log.append(keyed(b"k", b"v"))
    log.append(keyed(b"k", None))
    log.roll()
    cleaner = cleaner_of(log)
    for half_day in range(5):  # every pass merges the cleaned segment and the new one into one
        log.append(keyed(b"other", b"%d" % half_day))
        log.roll()
        clean_fully(cleaner, NOW + half_day * DAY // 2)
    assert [m.key for m in read_all(log)] == [b"other"], "the delete went a day after its first pass"
    (tmp_path / "cleaner-horizons").write_text("[]")  # damaged: ignored, never fatal
    assert cleaner_of(log).horizon_offset(("t", 0), log, NOW) == 0
