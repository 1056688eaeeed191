"""Recovery from damaged files (reliability matrix rows E2-E7, E10): torn tails at every byte,
garbage appended, bit flips in flushed data, damaged indexes, stray files, bad checkpoints, and
two managers on one directory."""

from __future__ import annotations

import logging
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog.errors import CorruptSegmentError, LogDirLockedError
from kafkalog.log import Log, LogConfig, LogManager
from kafkalog.log.checkpoint import RECOVERY_POINT_FILE
from kafkalog.log.manager import CLEAN_SHUTDOWN_FILE
from kafkalog.record import iter_entries

from .helpers import SMALL, fill, flip_bit, message_set, read_all, truncate

SEALED = LogConfig(segment_bytes=2048, index_interval_bytes=128, retention_ms=None, flush_ms=None, message_format=1)


def _crashed_copy(source: Path, target: Path) -> Path:
    """A copy of a log directory as a crash would leave it (the source log is still open)."""
    shutil.copytree(source, target)
    return target


def _entry_bounds(path: Path) -> list[tuple[int, int, int]]:
    return [(e.offset, e.position, e.end) for e in iter_entries(path.read_bytes())]


def test_torn_tail_at_every_byte_of_the_last_messages_recovers_the_prefix(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    live = Log(tmp_path / "live" / "t-0", SMALL)
    values = fill(live, 30, per_set=1)
    live.flush()
    active = live.active_segment.log_path
    bounds = _entry_bounds(active)
    last_three = bounds[-3:]
    first_cut_offset = last_three[0][0]
    for cut in range(last_three[0][1], last_three[-1][2]):
        copy = tmp_path / f"cut{cut}" / "t-0"
        _crashed_copy(live.directory, copy)
        truncate(copy / active.name, cut)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="kafkalog"):
            log = Log(copy, SMALL, recovery_point=first_cut_offset)
        survivors = [offset for offset, _, end in bounds if end <= cut]
        expect_end = survivors[-1] + 1
        assert log.log_end_offset == expect_end, cut
        assert [m.value for m in read_all(log)] == values[:expect_end]
        valid_end = max(end for _, _, end in bounds if end <= cut)
        if cut != valid_end:
            warnings = [r.getMessage() for r in caplog.records if "truncating" in r.getMessage()]
            assert warnings, "recovery reports what it truncated"
            assert active.name in warnings[0]
            assert f"truncating {cut - valid_end} bytes at byte position {valid_end}" in warnings[0]
        info = log.append(message_set([b"after"]))
        assert info.first_offset == expect_end
        log.close()
        shutil.rmtree(copy.parent)
    live.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sizes=st.lists(st.integers(min_value=0, max_value=300), min_size=1, max_size=40),
    cut_fraction=st.floats(min_value=0, max_value=1),
)
def test_torn_tail_property(tmp_path_factory: pytest.TempPathFactory, sizes: list[int], cut_fraction: float) -> None:
    root = tmp_path_factory.mktemp("torn")
    live = Log(root / "t-0", SMALL)
    for size in sizes:
        live.append(message_set([b"z" * size]))
    active = live.active_segment
    cut = active.size - int(cut_fraction * active.size)
    live.close()
    truncate(active.log_path, cut)
    log = Log(root / "t-0", SMALL, recovery_point=active.base_offset)
    expect = [o for o, _, end in _entry_bounds(active.log_path) if end <= cut]
    assert log.log_end_offset == (expect[-1] + 1 if expect else active.base_offset)
    assert [m.offset for m in read_all(log)] == list(range(log.log_end_offset))
    log.close()


@pytest.mark.parametrize("garbage", ["zeros-1", "zeros-4096", "random-1", "random-1024", "random-4096"])
def test_garbage_appended_to_the_active_segment_and_its_index_is_cut_away(tmp_path: Path, garbage: str) -> None:
    kind, _, size = garbage.partition("-")
    junk = bytes(int(size)) if kind == "zeros" else random.Random(int(size)).randbytes(int(size))
    live = Log(tmp_path / "t-0", SMALL)
    values = fill(live, 60)
    active = live.active_segment
    live.close()
    with active.log_path.open("ab") as f:
        f.write(junk)
    with active.index_path.open("ab") as f:
        f.write(junk)
    with active.time_index_path.open("ab") as f:
        f.write(junk)
    log = Log(tmp_path / "t-0", SMALL, recovery_point=active.base_offset)
    assert log.corruption is None
    assert [m.value for m in read_all(log)] == values
    assert log.active_segment.size == active.size
    assert log.append(message_set([b"next"])).first_offset == 60


def test_zero_length_frames_are_invalid(tmp_path: Path) -> None:
    live = Log(tmp_path / "t-0", SMALL)
    fill(live, 3)
    path = live.active_segment.log_path
    live.close()
    # offset 3, size 0, then zeros: a frame that a naive walker would accept forever
    with path.open("ab") as f:
        f.write((3).to_bytes(8, "big") + bytes(4) + bytes(64))
    log = Log(tmp_path / "t-0", SMALL, recovery_point=0)
    assert log.log_end_offset == 3


def _sealed_log(tmp_path: Path) -> tuple[Log, list[bytes]]:
    log = Log(tmp_path / "t-0", SEALED)
    values = fill(log, 120)
    assert len(log.segments) >= 4
    return log, values


@pytest.mark.parametrize("reopen", ["unclean", "clean"])
def test_bit_flip_in_a_sealed_segment_quarantines_and_is_never_truncated(tmp_path: Path, reopen: str) -> None:
    log, values = _sealed_log(tmp_path)
    victim = log.segments[1]
    entries = _entry_bounds(victim.log_path)
    bad_offset, bad_position, _ = entries[len(entries) // 2]
    sizes = {s.log_path: s.size for s in log.segments}
    log.close()
    flip_bit(victim.log_path, bad_position + 40)  # inside the value: a CRC mismatch
    reopened = Log(tmp_path / "t-0", SEALED, recovery_point=0, clean_shutdown=(reopen == "clean"))
    if reopen == "clean":
        assert reopened.corruption is None  # not scanned yet: found on first read or verify()
        with pytest.raises(CorruptSegmentError):
            reopened.read_messages(bad_offset)
    corruption = reopened.corruption
    assert corruption is not None
    assert corruption.path == str(victim.log_path)
    assert corruption.position == bad_position and corruption.offset == bad_offset
    assert str(victim.log_path) in str(corruption) and f"offset {bad_offset}" in str(corruption)
    # never silently truncated: every file keeps its size
    assert {s.log_path: s.size for s in reopened.segments} == sizes
    assert {p: p.stat().st_size for p in sizes} == sizes
    # what precedes the bad message is served; the bad message never is
    assert [m.value for m in reopened.read_messages(victim.base_offset, 100_000)] == values[
        victim.base_offset : bad_offset
    ]
    with pytest.raises(CorruptSegmentError):
        reopened.read_messages(bad_offset)
    info = reopened.read(victim.base_offset, 100_000)
    assert info.region is not None and info.region.position + info.region.length <= bad_position
    info.region.close()
    # other segments stay readable; the partition refuses appends until an operator acts
    later = reopened.segments[2].base_offset
    assert reopened.read_messages(later)[0].value == values[later]
    with pytest.raises(CorruptSegmentError):
        reopened.append(message_set([b"more"]))
    # the operator's way out: cut the log before the bad message
    reopened.truncate_to(bad_offset)
    assert reopened.corruption is None and reopened.log_end_offset == bad_offset
    assert reopened.append(message_set([b"more"])).first_offset == bad_offset


def test_bit_flip_with_on_corruption_fail_refuses_to_open(tmp_path: Path) -> None:
    log, _ = _sealed_log(tmp_path)
    victim = log.segments[2]
    _, position, _ = _entry_bounds(victim.log_path)[0]
    log.close()
    flip_bit(victim.log_path, position + 20)
    config = LogConfig(**{**{k: getattr(SEALED, k) for k in SEALED.__dataclass_fields__}, "on_corruption": "fail"})
    with pytest.raises(CorruptSegmentError, match=victim.log_path.name):
        Log(tmp_path / "t-0", config, recovery_point=0)


def test_corruption_below_the_recovery_point_in_the_active_segment_is_not_truncated(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", LogConfig(retention_ms=None, flush_ms=None, message_format=1))
    fill(log, 40)
    log.flush()
    path = log.active_segment.log_path
    _, position, _ = _entry_bounds(path)[10]
    log.close()
    size = path.stat().st_size
    flip_bit(path, position + 35)
    reopened = Log(tmp_path / "t-0", LogConfig(retention_ms=None, message_format=1), recovery_point=40)
    assert reopened.corruption is not None and reopened.corruption.offset == 10
    assert path.stat().st_size == size


def test_an_offset_rewritten_below_its_predecessor_is_detected(tmp_path: Path) -> None:
    log, _ = _sealed_log(tmp_path)
    victim = log.segments[1]
    offset, position, _ = _entry_bounds(victim.log_path)[3]
    log.close()
    with victim.log_path.open("r+b") as f:  # the offset is outside the CRC: only order checks see it
        f.seek(position)
        f.write((offset - 2).to_bytes(8, "big"))
    reopened = Log(tmp_path / "t-0", SEALED, recovery_point=0)
    assert reopened.corruption is not None
    assert reopened.corruption.position == position
    assert "not above the previous offset" in reopened.corruption.reason


def _snapshot(log: Log) -> tuple[list[tuple[int, bytes | None]], list[object]]:
    reads = [(m.offset, m.value) for m in (log.read_messages(i, 200)[0] for i in range(log.log_end_offset))]
    lookups = [log.offset_for_timestamp(t) for t in range(990, 1000 + log.log_end_offset + 10, 7)]
    return reads, lookups


DAMAGE = {
    "missing": lambda p: p.unlink(),
    "two spaces": lambda p: p.write_bytes(b"  "),
    "truncated": lambda p: truncate(p, max(0, p.stat().st_size - 5)),
    "junk appended": lambda p: p.write_bytes(p.read_bytes() + random.Random(1).randbytes(96)),
    "garbage": lambda p: p.write_bytes(random.Random(2).randbytes(p.stat().st_size)),
    "zeros": lambda p: p.write_bytes(bytes(p.stat().st_size)),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
@pytest.mark.parametrize("which", ["index", "timeindex", "both"])
@pytest.mark.parametrize("reopen", ["clean", "unclean"])
def test_damaged_indexes_are_rebuilt_and_answers_do_not_change(
    tmp_path: Path, damage: str, which: str, reopen: str
) -> None:
    log, _ = _sealed_log(tmp_path)
    before = _snapshot(log)
    log.close()
    for segment in log.segments:
        targets = {
            "index": [segment.index_path],
            "timeindex": [segment.time_index_path],
            "both": [segment.index_path, segment.time_index_path],
        }[which]
        for path in targets:
            if path.exists():
                DAMAGE[damage](path)
    reopened = Log(tmp_path / "t-0", SEALED, recovery_point=0, clean_shutdown=(reopen == "clean"))
    assert reopened.corruption is None
    assert _snapshot(reopened) == before
    assert reopened.append(message_set([b"x"])).first_offset == 120


def test_a_stale_longer_index_is_detected(tmp_path: Path) -> None:
    log, _ = _sealed_log(tmp_path)
    segment = log.segments[1]
    longer = segment.index_path.read_bytes()
    longer_time = segment.time_index_path.read_bytes()
    before_cut = _snapshot(log)[0][: segment.base_offset + 5]
    log.truncate_to(segment.base_offset + 5)
    log.close()
    segment.index_path.write_bytes(longer)
    segment.time_index_path.write_bytes(longer_time)
    reopened = Log(tmp_path / "t-0", SEALED, clean_shutdown=True)
    assert _snapshot(reopened)[0] == before_cut
    assert reopened.append(message_set([b"x"])).first_offset == segment.base_offset + 5


def test_stray_files_are_removed_or_ignored(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    log, values = _sealed_log(tmp_path)
    log.close()
    directory = tmp_path / "t-0"
    (directory / "00000000000000099999.index").write_bytes(bytes(16))
    (directory / "00000000000000099999.timeindex").write_bytes(bytes(24))
    (directory / "00000000000000000000.log.deleted").write_bytes(b"old")
    (directory / "00000000000000000007.index.deleted").write_bytes(b"old")
    (directory / "leader-epoch-checkpoint.tmp").write_bytes(b"half")
    (directory / "notes.txt").write_text("an operator's note")
    (directory / "12.log").write_bytes(b"not a segment name")
    with caplog.at_level(logging.WARNING, logger="kafkalog"):
        reopened = Log(directory, SEALED, clean_shutdown=True)
    names = {p.name for p in directory.iterdir()}
    assert "00000000000000099999.index" not in names and "00000000000000099999.timeindex" not in names
    assert not any(n.endswith((".deleted", ".tmp")) for n in names)
    assert {"notes.txt", "12.log"} <= names, "unknown files are left alone"
    assert [m.value for m in read_all(reopened)] == values
    assert any("notes.txt" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("damage", ["three bytes", "garbage", "wrong count", "missing"])
def test_a_bad_checkpoint_means_full_recovery_and_nothing_lost(tmp_path: Path, damage: str) -> None:
    with LogManager([tmp_path], SEALED) as manager:
        values = fill(manager.get_or_create_log("orders", 0), 80)
    (tmp_path / CLEAN_SHUTDOWN_FILE).unlink()  # as if it had crashed
    checkpoint = tmp_path / RECOVERY_POINT_FILE
    if damage == "three bytes":
        truncate(checkpoint, 3)
    elif damage == "garbage":
        checkpoint.write_bytes(b"\x00\xff nonsense\n")
    elif damage == "wrong count":
        checkpoint.write_text("0\n5\norders 0 80\n")
    else:
        checkpoint.unlink()
    (tmp_path / (RECOVERY_POINT_FILE + ".tmp")).write_text("0\n1\norders 0 9")  # a half-written new one
    with LogManager([tmp_path], SEALED) as manager:
        log = manager.get_log("orders", 0)
        assert log is not None and [m.value for m in read_all(log)] == values
    assert not (tmp_path / (RECOVERY_POINT_FILE + ".tmp")).exists()
    assert (tmp_path / RECOVERY_POINT_FILE).read_text() == "0\n1\norders 0 80\n"


@pytest.mark.integration
def test_two_log_managers_cannot_share_a_data_dir(tmp_path: Path) -> None:
    with LogManager([tmp_path / "a", tmp_path / "b"]) as first:
        log = first.get_or_create_log("t", 0)
        log.append(message_set([b"one"]))
        with pytest.raises(LogDirLockedError, match="in use"):
            LogManager([tmp_path / "b"])
        script = (
            "import sys\nfrom kafkalog.log import LogManager\n"
            "try:\n    LogManager([sys.argv[1]])\nexcept Exception as e:\n"
            "    print(type(e).__name__, e)\n    sys.exit(3)\n"
        )
        other = subprocess.run(
            [sys.executable, "-c", script, str(tmp_path / "a")], capture_output=True, text=True, check=False
        )
        assert other.returncode == 3 and "LogDirLockedError" in other.stdout, other.stdout + other.stderr
        # the first is unaffected
        log.append(message_set([b"two"]))
        assert [m.value for m in read_all(log)] == [b"one", b"two"]
    with LogManager([tmp_path / "b"]):
        pass  # released on close


def test_a_partition_found_in_two_data_dirs_is_an_error(tmp_path: Path) -> None:
    with LogManager([tmp_path / "a"]) as m:
        m.get_or_create_log("t", 0).append(message_set([b"x"]))
    shutil.copytree(tmp_path / "a" / "t-0", tmp_path / "b" / "t-0")
    with pytest.raises(Exception, match="t-0 is in both"):
        LogManager([tmp_path / "a", tmp_path / "b"])


def test_unclean_shutdown_of_a_manager_recovers_every_partition(tmp_path: Path) -> None:
    manager = LogManager([tmp_path], SMALL)
    values = {p: fill(manager.get_or_create_log("t", p), 50 + p) for p in range(3)}
    for p in range(3):
        manager.get_log("t", p).flush()  # type: ignore[union-attr]
    paths = {p: manager.get_log("t", p).active_segment.log_path for p in range(3)}  # type: ignore[union-attr]
    manager._release()  # the process "dies": the lock goes, nothing else happens
    truncate(paths[1], paths[1].stat().st_size - 7)  # one torn message
    with LogManager([tmp_path], SMALL) as reopened:
        assert [m.value for m in read_all(reopened.get_log("t", 0))] == values[0]  # type: ignore[arg-type]
        assert [m.value for m in read_all(reopened.get_log("t", 1))] == values[1][:-1]  # type: ignore[arg-type]
        assert [m.value for m in read_all(reopened.get_log("t", 2))] == values[2]  # type: ignore[arg-type]
