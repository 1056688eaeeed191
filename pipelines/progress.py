"""What a run shows while it works and when it ends: live progress per split, a summary table.

Tasks report progress into a local directory (pipelines.executor.source); this side polls it in a thread while
Spark runs. On a terminal each split has a progress bar redrawn in place (rich); otherwise a line
is logged every ``interval`` seconds, which is what Airflow, spark-submit logs and CI want. The
same two forms serve any long work a caller counts itself (``Reporter.work``: producing, copying).
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)

if TYPE_CHECKING:
    from pipelines.executor.splits import Split

log = logging.getLogger(__name__)


def rate(count: float, seconds: float) -> str:
    """``count`` per second over ``seconds``, for people ("-" over spans too short to mean much)."""
    return f"{count / seconds:,.0f}/s" if seconds >= 0.1 else "-"  # shorter spans give absurd rates


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``1 partition``, ``2 partitions`` (``plural`` for nouns that do not take an s)."""
    return f"{count:,} {noun if count == 1 else plural or noun + 's'}"


def log_console() -> Console:
    """Stderr; wide when it is not a terminal (rich's default 80 columns would cut split names and
    paths in logs, where nobody is reading in a narrow window)."""
    return Console(file=sys.stderr, width=None if sys.stderr.isatty() else 200)


class Reporter:
    """Prints notes, progress and summaries (``quiet`` prints nothing: library use and tests)."""

    def __init__(self, *, quiet: bool = False, console: Console | None = None, interval: float = 10.0) -> None:
        self.quiet = quiet
        self.console = console or log_console()
        self.interval = interval

    def note(self, text: str) -> None:
        """A line for people: printed, or when quiet (Airflow tasks, library use) logged at INFO, so
        that a task's log at ``--log-level INFO`` tells what the run did."""
        if self.quiet:
            log.info("%s", text)
        else:
            self.console.print(text, highlight=False)

    @contextlib.contextmanager
    def loading(self, title: str, splits: list[Split], progress_dir: str) -> Iterator[None]:
        """Shows progress while the body (the Spark job) runs: a bar per split on a terminal.
        ``title``: the run that loads (said first)."""
        if self.quiet:
            yield
            return
        total = sum(s.size for s in splits)
        self.note(f"{title}: loading {total:,} messages from {len(splits)} splits")
        stop = threading.Event()
        started = time.monotonic()
        bars = _bars(self.console) if self.console.is_terminal else None
        ids = [bars.add_task(s.name, total=max(s.size, 1), rate="") for s in splits] if bars else []

        def refresh(bars: Progress) -> None:
            progress = read_progress(progress_dir)
            for index, task in enumerate(ids):
                item = progress.get(index, {})
                done = splits[index].size if item.get("done") else item.get("messages", 0)
                bars.update(task, completed=done, rate=rate(item.get("messages", 0), item.get("seconds", 0)))

        def poll() -> None:
            # the first line after one interval, not at once: the tasks have not started reading
            # yet, and a line saying 0 of everything tells nothing (a short load prints none; the
            # run's summary follows it)
            last_line = started
            while not stop.wait(0.5 if bars else 1.0):
                if bars is not None:
                    refresh(bars)
                elif time.monotonic() - last_line >= self.interval:
                    last_line = time.monotonic()
                    self.note(self._line(splits, read_progress(progress_dir), time.monotonic() - started))

        thread = threading.Thread(target=poll, name="pipelines-progress", daemon=True)
        if bars is not None:
            bars.start()
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
            if bars is not None:
                refresh(bars)
                bars.stop()

    @contextlib.contextmanager
    def work(self, description: str, total: int, unit: str = "messages") -> Iterator[Callable[[int], None]]:
        """Progress of one long piece of work the caller counts itself (producing, copying): yields
        ``advance(n)``. A bar on a terminal; elsewhere a plain line every ``interval`` seconds and
        one at the end, which is what logs and CI want."""
        if self.quiet:
            yield lambda n: None
            return
        started = time.monotonic()
        if self.console.is_terminal:
            with _bars(self.console) as bars:
                task = bars.add_task(description, total=max(total, 1), rate="")

                def advance_bar(n: int) -> None:
                    bars.advance(task, n)
                    bars.update(task, rate=rate(bars.tasks[task].completed, time.monotonic() - started))

                yield advance_bar
            return
        counted = [0, started]  # so far, and when the last line was printed

        def advance_line(n: int) -> None:
            counted[0] += n
            now = time.monotonic()
            if now - counted[1] >= self.interval:
                counted[1] = now
                share = 100 * counted[0] / max(total, 1)
                self.note(f"{description}: {counted[0]:,}/{total:,} {unit} ({share:.0f}%)")

        yield advance_line
        elapsed = time.monotonic() - started
        self.note(f"{description}: {counted[0]:,} {unit} in {elapsed:.1f} s ({rate(counted[0], elapsed)})")

    def _line(self, splits: list[Split], progress: dict[int, dict[str, Any]], elapsed: float) -> str:
        messages = sum(p.get("messages", 0) for p in progress.values())
        total = sum(s.size for s in splits)
        done = sum(1 for p in progress.values() if p.get("done"))
        size = sum(p.get("bytes", 0) for p in progress.values()) / 1e6
        return (
            f"progress: {messages:,}/{total:,} messages ({100 * messages / max(total, 1):.0f}%), "
            f"{size:,.1f} MB, {done}/{len(splits)} splits done, {rate(messages, elapsed)} over {elapsed:.0f} s"
        )


def _bars(console: Console) -> Progress:
    """Rich progress bars: name, bar, done/total, percent, rate, elapsed."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TaskProgressColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        console=console,
        refresh_per_second=4,
    )


def read_progress(directory: str) -> dict[int, dict[str, Any]]:
    """Split index → the last progress its task wrote (messages, bytes, seconds, done)."""
    out: dict[int, dict[str, Any]] = {}
    for path in Path(directory).glob("*.json"):
        with contextlib.suppress(OSError, ValueError):
            out[int(path.stem)] = json.loads(path.read_text())
    return out
