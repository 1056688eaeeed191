"""Progress on long work: bars on a terminal, plain lines in logs and CI, nothing when quiet.

The loading view reads the progress files the load tasks write (pipelines/executor/source.py); here they are
written the same way by hand while the view runs, so the test needs no Spark."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

from rich.console import Console

from pipelines.executor.splits import Split
from pipelines.ledger.records import Plan
from pipelines.progress import Reporter, counted, read_progress

SPLITS = [Split("events", 0, 1, 0, 400), Split("events", 1, 1, 100, 300)]
PLAN = Plan("p", 3, "run-x", "now", "fp", tuple(SPLITS))


def _console(terminal: bool) -> tuple[Console, io.StringIO]:
    sink = io.StringIO()
    return Console(file=sink, force_terminal=terminal, width=120, color_system=None), sink


def _write(directory: Path, index: int, messages: int, *, done: bool) -> None:
    (directory / f"{index}.json").write_text(
        json.dumps({"messages": messages, "bytes": messages * 100, "seconds": 1.5, "done": done})
    )


def _load_with_progress(reporter: Reporter, directory: Path) -> None:
    with reporter.loading(f"run {PLAN.run_id} (#{PLAN.seq})", SPLITS, str(directory)):
        _write(directory, 0, 150, done=False)
        time.sleep(1.3)  # the view polls every 0.5 s (terminal) / 1 s (logs)
        _write(directory, 0, 400, done=True)
        _write(directory, 1, 200, done=True)
        time.sleep(1.3)


def test_loading_draws_a_bar_per_split_on_a_terminal(tmp_path: Path) -> None:
    console, sink = _console(terminal=True)
    _load_with_progress(Reporter(console=console), tmp_path)
    out = sink.getvalue()
    assert "events-0" in out and "events-1" in out
    assert "150/400" in out  # a bar was drawn while the split was under way
    assert "400/400" in out and "200/200" in out  # and the last frame shows both done
    assert "\x1b[" in out  # redrawn in place with cursor movements


def test_loading_prints_plain_lines_in_logs(tmp_path: Path) -> None:
    console, sink = _console(terminal=False)
    _load_with_progress(Reporter(console=console, interval=1.0), tmp_path)
    lines = sink.getvalue().splitlines()
    assert lines[0] == "run run-x (#3): loading 600 messages from 2 splits"
    progress = [line for line in lines if line.startswith("progress: ")]
    assert progress, lines
    assert any("150/600 messages (25%)" in line for line in progress)
    assert all("\x1b[" not in line for line in lines)  # no escape codes in a log


def test_a_load_shorter_than_the_interval_prints_no_empty_progress_line(tmp_path: Path) -> None:
    # the first line comes one interval after the start: at once, it could only say "0 of all"
    console, sink = _console(terminal=False)
    with Reporter(console=console, interval=5.0).loading("run run-x (#3)", SPLITS, str(tmp_path)):
        time.sleep(1.3)  # past the view's first poll
    assert sink.getvalue().splitlines() == ["run run-x (#3): loading 600 messages from 2 splits"]


def test_counted_work_bar_and_lines_and_quiet() -> None:
    console, sink = _console(terminal=True)
    with Reporter(console=console).work("producing", 3000, "views") as advance:
        for _ in range(3):
            advance(1000)
    assert "3000/3000" in sink.getvalue()

    console, sink = _console(terminal=False)
    with Reporter(console=console, interval=0.0).work("producing", 3000, "views") as advance:
        for _ in range(3):
            advance(1000)
    lines = sink.getvalue().splitlines()
    assert lines[:3] == [
        "producing: 1,000/3,000 views (33%)",
        "producing: 2,000/3,000 views (67%)",
        "producing: 3,000/3,000 views (100%)",
    ]
    assert lines[3].startswith("producing: 3,000 views in ")

    console, sink = _console(terminal=True)
    with Reporter(quiet=True, console=console).work("producing", 10) as advance:
        advance(10)
    assert sink.getvalue() == ""


def test_read_progress_skips_files_being_replaced(tmp_path: Path) -> None:
    _write(tmp_path, 0, 5, done=False)
    (tmp_path / "1.json").write_text('{"messages": 3')  # caught half-written: skipped, not fatal
    seen = read_progress(str(tmp_path))
    assert list(seen) == [0] and seen[0]["messages"] == 5


def test_counts_agree_with_their_noun() -> None:
    assert [counted(n, "partition") for n in (0, 1, 2, 1500)] == [
        "0 partitions", "1 partition", "2 partitions", "1,500 partitions"
    ]  # fmt: skip
    assert counted(1, "entry", "entries") == "1 entry" and counted(3, "entry", "entries") == "3 entries"
