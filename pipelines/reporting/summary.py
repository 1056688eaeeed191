"""The table a committed run prints: per split its offsets, rows, quarantined, event times, losses,
and when there are any the offsets that hold no row (transactions' aborted records and markers,
offsets compaction removed)."""

from __future__ import annotations

from rich.table import Table

from pipelines.ledger.records import Manifest
from pipelines.progress import Reporter, rate


def print_summary(reporter: Reporter, manifest: Manifest) -> None:
    """Print ``manifest``'s summary on ``reporter``'s console (nothing when it is quiet)."""
    if reporter.quiet:
        return
    table = Table(title=f"run {manifest.run_id} committed as #{manifest.seq}", title_justify="left")
    for column in ("split", "start", "end", "rows", "quarantined", "event time", "lost"):
        table.add_column(column, justify="left" if column in ("split", "event time") else "right")
    transactions = any(s.aborted or s.control for s in manifest.splits)
    compacted = any(s.compacted for s in manifest.splits)
    if transactions:
        table.add_column("skipped (aborted + markers)", justify="right")
    if compacted:
        table.add_column("compacted", justify="right")
    for s in manifest.splits:
        span = f"{s.min_event_time or '-'} .. {s.max_event_time or '-'}"
        lost = f"[{s.lost_from}, {s.lost_to})" if s.lost_from is not None else ""
        cells = [f"{s.topic}-{s.partition}", str(s.start), str(s.end), f"{s.rows:,}", f"{s.quarantined:,}", span, lost]
        if transactions:
            cells.append(f"{s.aborted:,} + {s.control:,}")
        if compacted:
            cells.append(f"{s.compacted:,}")
        table.add_row(*cells)
    reporter.console.print(table)
    seconds = manifest.stats.get("seconds", 0)
    rows = sum(s.rows for s in manifest.splits)
    reporter.note(
        f"{rows:,} rows in {len([f for f in manifest.files if f.kind == 'data'])} files, "
        f"{manifest.stats.get('bytes', 0) / 1e6:,.1f} MB, {seconds:.1f} s ({rate(rows, seconds)})"
    )
