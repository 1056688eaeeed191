"""The cleaner killed at every step of a pass and of a swap (os._exit at its crash points, like a
SIGKILL): the log reopens whole, every key's latest value is at its offset, offsets rise, a read
from any offset carries on from the next record there is, no file of the pass is left, and a next
pass finishes the job."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalog.log import LogManager
from kafkalog.log.cleaner.swap import INTENT_FILE
from kafkalog.log.faults import CRASH_EXIT_CODE
from kafkalog.record.batch_format import RecordInput, encode_batch

from .cleaner_crash_child import CONFIG, EXTRA, NOW, history
from .helpers import read_all, run_crash_child

CHILD = Path(__file__).with_name("cleaner_crash_child.py")

POINTS = [
    "cleaner.clean.after_write",
    "cleaner.clean.after_write@3",
    "cleaner.swap.after_swap_rename@2",
    "cleaner.swap.tmp_written",
    "cleaner.swap.tmp_synced@2",
    "cleaner.swap.renamed",
    "cleaner.swap.after_delete_rename@2",
    "cleaner.swap.after_delete@2",
    "cleaner.swap.after_final_rename@2",
    "cleaner.swap.before_intent_removed@3",
    "cleaner.horizons.tmp_written",  # a pass done, its note of when half written
    "segment.append.after_write@100",  # while the log is written, before any pass
]


def run_child(data_dir: Path, crash_at: str | None) -> int:
    return run_crash_child(CHILD, data_dir, crash_at).returncode


def latest_written(count: int) -> dict[bytes, tuple[int, bytes | None]]:
    view: dict[bytes, tuple[int, bytes | None]] = {}
    for offset, (key, value) in enumerate(history()[:count]):
        view[key] = (offset, value)
    return view


@pytest.mark.integration
@pytest.mark.parametrize("crash_at", POINTS)
def test_a_cleaner_killed_at_any_step_leaves_a_whole_log_and_the_next_pass_finishes(
    tmp_path: Path, crash_at: str
) -> None:
    assert run_child(tmp_path, crash_at) == CRASH_EXIT_CODE, f"the child never reached {crash_at}"
    with LogManager([tmp_path], CONFIG) as manager:
        log = manager.get_log("crash", 0)
        assert log is not None and log.corruption is None
        names = {p.name for p in log.directory.iterdir()}
        assert not [n for n in names if n.endswith((".cleaned", ".swap", ".deleted", ".tmp")) or n == INTENT_FILE]
        assert {n.split(".")[0] for n in names if not n.endswith(".producers")} == {
            f"{s.base_offset:020d}" for s in log.segments
        }, "every file belongs to a segment of the log"
        messages = read_all(log)
        offsets = [m.offset for m in messages]
        assert offsets == sorted(set(offsets)), "offsets rise"
        written = latest_written(log.log_end_offset)
        view = {m.key: (m.offset, m.value) for m in messages if m.key not in EXTRA}
        live = {k: v for k, v in written.items() if v[1] is not None}
        assert {k: v for k, v in view.items() if v[1] is not None} == live, "every key's latest value, at its offset"
        for offset in range(log.log_end_offset):  # a consumer at any offset carries on
            following = [o for o in offsets if o >= offset]
            found = log.read_messages(offset)
            assert (found[0].offset if found else None) == (following[0] if following else None), offset
    assert run_child(tmp_path, None) == 0  # the same child finishes: writes the rest if the crash was early, cleans
    with LogManager([tmp_path], CONFIG) as manager:
        log = manager.get_log("crash", 0)
        assert log is not None
        messages = [m for m in read_all(log) if m.offset < log.active_segment.base_offset]
        keys = [m.key for m in messages]
        assert len(keys) == len(set(keys)), "cleaned to one record per key"
        assert all(m.value is not None for m in messages), "tombstones gone (delete.retention.ms 0)"
        assert log.log_end_offset >= len(history()) or crash_at.startswith("segment."), log.log_end_offset
        end = log.log_end_offset
        assert log.append(encode_batch([RecordInput(b"after", b"x", NOW)])).first_offset == end
