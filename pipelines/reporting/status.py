"""What ``pipelines status`` says: the last committed run and any run planned but not committed.

Role: render, from the ledger's newest manifest and pending plan, the few lines an operator reads
first (rows, quarantined, recorded data loss, the current generation, what the next run will
finish), or the same as one JSON document for scripts. Reads nothing itself: the caller opens the
state.
"""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console

from pipelines.ledger.records import Manifest, Plan


def status_document(name: str, latest: Manifest | None, pending: Plan | None) -> dict[str, Any]:
    """``pipelines status --json``: the pipeline's name, its last manifest and its pending plan as
    stored (null when there is none)."""
    return {
        "pipeline": name,
        "last_run": None if latest is None else json.loads(latest.dumps()),
        "pending_plan": None if pending is None else pending.to_json(),
    }


def print_status(console: Console, name: str, raw_path: str, latest: Manifest | None, pending: Plan | None) -> None:
    """``pipelines status``: a line for the last committed run (and one per recorded data loss),
    the current generation after a replay, and what a pending plan needs to finish."""
    if latest is None:
        console.print(f"{name}: no run committed yet ({raw_path})")
    else:
        rows = sum(s.rows for s in latest.splits)
        quarantined = sum(s.quarantined for s in latest.splits)
        console.print(
            f"{name}: last run {latest.run_id} committed as #{latest.seq} at {latest.committed_at}: "
            f"{rows:,} rows, {quarantined:,} quarantined, {len(latest.files)} files",
            highlight=False,
        )
        lost = [s for s in latest.splits if s.lost_from is not None]
        for s in lost:
            console.print(f"  data loss recorded: {s.topic}-{s.partition} offsets [{s.lost_from}, {s.lost_to})")
    if latest is not None and latest.generation:
        console.print(
            f"generation {latest.generation} is current (a replay switched to it); readers find it with "
            "`pipelines location`",
            highlight=False,
        )
    if pending is not None and pending.kind == "replay":
        console.print(
            f"pending: a replay to {pending.target} (#{pending.seq}) planned {pending.created_at} did not commit; "
            "run `pipelines rewind` again to finish it or `pipelines rewind --abandon` to drop it",
            highlight=False,
        )
    elif pending is not None:
        console.print(
            f"pending: run {pending.run_id} (#{pending.seq}) planned {pending.created_at}, {pending.total:,} "
            "messages, not committed; the next run completes it",
            highlight=False,
        )
