"""A process killed at named points inside append, roll, flush, retention, checkpoint and shutdown
(os._exit, like SIGKILL) leaves a log that reopens with every acknowledged message at its offset,
dense offsets, and appends that continue (reliability matrix rows E1, E7, E8, E12)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from kafkalog.log import LogManager
from kafkalog.log.checkpoint import RECOVERY_POINT_FILE, read_checkpoint
from kafkalog.log.faults import CRASH_EXIT_CODE
from kafkalog.log.manager import CLEAN_SHUTDOWN_FILE
from kafkalog.record import MessageSetBuilder

from .crash_child import CONFIG, value
from .helpers import read_all, run_crash_child

CHILD = Path(__file__).with_name("crash_child.py")

POINTS = [
    "segment.append.after_write@40",
    "segment.append.after_index@41",
    "log.flush.after_fsync@5",
    "log.roll.before_seal@3",
    "log.roll.after_seal@3",
    "log.roll.after_create@3",
    "log.retention.before_delete@2",
    "segment.delete.after_rename@2",
    "segment.delete.after_unlink@4",
    "checkpoint.tmp_written@6",
    "checkpoint.tmp_synced@6",
    "checkpoint.renamed@6",
    "manager.close.before_marker",
]


def run_child(data_dir: Path, crash_at: str | None) -> tuple[int, list[tuple[int, int]]]:
    done = run_crash_child(CHILD, data_dir, crash_at)
    acks = [
        (int(a), int(b)) for _, a, b in (line.split() for line in done.stdout.splitlines() if line.startswith("ACK"))
    ]
    return done.returncode, acks


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize("crash_at", POINTS)
def test_a_crash_at_any_point_loses_no_acknowledged_message(
    tmp_path: Path, crash_at: str, caplog: pytest.LogCaptureFixture
) -> None:
    code, acks = run_child(tmp_path, crash_at)
    assert code == CRASH_EXIT_CODE, f"the child never reached {crash_at}"
    assert acks, "something was acknowledged before the crash"
    last_acked = acks[-1][1]
    checkpoint = read_checkpoint(tmp_path / RECOVERY_POINT_FILE)  # old or new, never half-written
    assert (tmp_path / RECOVERY_POINT_FILE).read_text().count("\n") == 2 + len(checkpoint)
    with caplog.at_level(logging.INFO, logger="kafkalog"), LogManager([tmp_path], CONFIG) as manager:
        assert any("recovering" in r.getMessage() for r in caplog.records), "an unclean stop is recovered"
        assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
        log = manager.get_log("crash", 0)
        assert log is not None and log.corruption is None
        messages = read_all(log)
        offsets = [m.offset for m in messages]
        assert offsets == list(range(log.log_start_offset, log.log_end_offset)), "offsets are dense"
        assert all(m.value == value(m.offset) for m in messages), "every message sits at its own offset"
        # acknowledged messages that retention did not delete are all there; at most the append in
        # flight when the process died is there too, whole or not at all
        assert log.log_end_offset in (last_acked + 1, last_acked + 4)
        assert log.log_start_offset <= last_acked + 1
        names = {p.name for p in log.directory.iterdir()}
        assert not any(n.endswith((".deleted", ".tmp")) for n in names)
        assert {n.split(".")[0] for n in names} == {f"{s.base_offset:020d}" for s in log.segments}
        end = log.log_end_offset
        builder = MessageSetBuilder()
        builder.append(value(end))
        assert log.append(builder.build()).first_offset == end


@pytest.mark.integration
def test_clean_shutdown_marker_skips_recovery_and_is_removed_before_writes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    code, acks = run_child(tmp_path, None)
    assert code == 0 and acks
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    with caplog.at_level(logging.INFO, logger="kafkalog"), LogManager([tmp_path], CONFIG) as manager:
        assert not any("recovering" in r.getMessage() for r in caplog.records), "a clean stop needs no recovery"
        assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists(), "removed before anything can be appended"
        log = manager.get_log("crash", 0)
        assert log is not None and log.log_end_offset == acks[-1][1] + 1
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    # a crash after a clean start is recovered again: the marker is gone while the broker runs
    code, _ = run_child(tmp_path, "segment.append.after_write@3")
    assert code == CRASH_EXIT_CODE
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="kafkalog"), LogManager([tmp_path], CONFIG):
        assert any("recovering" in r.getMessage() for r in caplog.records)
