"""What a run shows while it works and when it ends: live progress per split, a summary table.

Tasks report progress into a local directory (source.py); this side polls it in a thread while
Spark runs. On a terminal the table is redrawn in place (rich); otherwise a line is logged every
``interval`` seconds, which is what Airflow and spark-submit logs want.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.live import Live
from rich.table import Table

if TYPE_CHECKING:
    from pipelines.plan import Plan, Split
    from pipelines.state import Manifest


def _rate(count: float, seconds: float) -> str:
    return f"{count / seconds:,.0f}/s" if seconds > 0 else "-"


class Reporter:
    """Prints notes, progress and summaries (``quiet`` prints nothing: library use and tests)."""

    def __init__(self, *, quiet: bool = False, console: Console | None = None, interval: float = 10.0) -> None:
        self.quiet = quiet
        self.console = console or Console(file=sys.stderr)
        self.interval = interval

    def note(self, text: str) -> None:
        if not self.quiet:
            self.console.print(text, highlight=False)

    @contextlib.contextmanager
    def loading(self, plan: Plan, splits: list[Split], progress_dir: str, spark: Any) -> Iterator[None]:
        """Shows progress while the body (the Spark job) runs."""
        if self.quiet:
            yield
            return
        self.note(f"run {plan.run_id} (#{plan.seq}): loading {plan.total:,} messages from {len(splits)} splits")
        stop = threading.Event()
        started = time.monotonic()
        live = Live(console=self.console, auto_refresh=False) if self.console.is_terminal else None

        def poll() -> None:
            last_line = 0.0
            while not stop.wait(0.5 if live else 1.0):
                table = self._table(splits, _read_progress(progress_dir), time.monotonic() - started)
                if live is not None:
                    live.update(table, refresh=True)
                elif time.monotonic() - last_line >= self.interval:
                    last_line = time.monotonic()
                    self.note(self._line(splits, _read_progress(progress_dir), time.monotonic() - started))

        thread = threading.Thread(target=poll, name="pipelines-progress", daemon=True)
        if live is not None:
            live.start()
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
            if live is not None:
                live.update(self._table(splits, _read_progress(progress_dir), time.monotonic() - started))
                live.stop()

    def _table(self, splits: list[Split], progress: dict[int, dict[str, Any]], elapsed: float) -> Table:
        table = Table(title=f"loading ({elapsed:.0f} s)", title_justify="left")
        for column in ("split", "offsets", "messages", "MB", "rate", "done"):
            table.add_column(column, justify="left" if column in ("split", "offsets") else "right")
        for index, split in enumerate(splits):
            item = progress.get(index, {})
            messages = item.get("messages", 0)
            table.add_row(
                split.name,
                f"{split.start}..{split.end}",
                f"{messages:,}/{split.size:,}",
                f"{item.get('bytes', 0) / 1e6:,.1f}",
                _rate(messages, item.get("seconds", 0)),
                "yes" if item.get("done") else f"{100 * messages / max(split.size, 1):.0f}%",
            )
        return table

    def _line(self, splits: list[Split], progress: dict[int, dict[str, Any]], elapsed: float) -> str:
        messages = sum(p.get("messages", 0) for p in progress.values())
        total = sum(s.size for s in splits)
        done = sum(1 for p in progress.values() if p.get("done"))
        size = sum(p.get("bytes", 0) for p in progress.values()) / 1e6
        return (
            f"progress: {messages:,}/{total:,} messages ({100 * messages / max(total, 1):.0f}%), "
            f"{size:,.1f} MB, {done}/{len(splits)} splits done, {_rate(messages, elapsed)} over {elapsed:.0f} s"
        )

    def summary(self, manifest: Manifest) -> None:
        if self.quiet:
            return
        table = Table(title=f"run {manifest.run_id} committed as #{manifest.seq}", title_justify="left")
        for column in ("split", "start", "end", "rows", "quarantined", "event time", "lost"):
            table.add_column(column, justify="left" if column in ("split", "event time") else "right")
        for s in manifest.splits:
            span = f"{s.min_event_time or '-'} .. {s.max_event_time or '-'}"
            lost = f"[{s.lost_from}, {s.lost_to})" if s.lost_from is not None else ""
            table.add_row(
                f"{s.topic}-{s.partition}", str(s.start), str(s.end), f"{s.rows:,}", f"{s.quarantined:,}", span, lost
            )
        self.console.print(table)
        seconds = manifest.stats.get("seconds", 0)
        rows = sum(s.rows for s in manifest.splits)
        self.note(
            f"{rows:,} rows in {len([f for f in manifest.files if f.kind == 'data'])} files, "
            f"{manifest.stats.get('bytes', 0) / 1e6:,.1f} MB, {seconds:.1f} s ({_rate(rows, seconds)})"
        )


def _read_progress(directory: str) -> dict[int, dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    for path in Path(directory).glob("*.json"):
        with contextlib.suppress(OSError, ValueError):
            out[int(path.stem)] = json.loads(path.read_text())
    return out
