"""What ``pipelines status`` says: the last committed run and any run planned but not committed.

Role: render, from the ledger's newest manifest and pending plan, the few lines an operator reads
first (rows, quarantined, recorded data loss, what transactions skipped and held back, the offsets
compaction removed, the current generation, what the next run will finish), or the same as one
JSON document for scripts. The renderers read nothing themselves; ``held_back`` reads the earlier
manifests it needs from the state the caller opened (the run report shows the same).
"""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console

from pipelines.ledger.records import Manifest, Plan
from pipelines.ledger.state import PipelineState


def status_document(
    name: str, latest: Manifest | None, pending: Plan | None, held: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """``pipelines status --json``: the pipeline's name, its last manifest and its pending plan as
    stored (null when there is none), and the splits an open transaction held back when the last
    run planned (``held_back``)."""
    return {
        "pipeline": name,
        "last_run": None if latest is None else json.loads(latest.dumps()),
        "pending_plan": None if pending is None else pending.to_json(),
        "held_back": held or [],
    }


def print_status(
    console: Console,
    name: str,
    raw_path: str,
    latest: Manifest | None,
    pending: Plan | None,
    held: list[dict[str, Any]] | None = None,
) -> None:
    """``pipelines status``: a line for the last committed run (and one per recorded data loss, one
    for what transactions skipped, one for what compaction removed, one per split an open
    transaction holds back), the current generation after a replay, and what a pending plan needs
    to finish."""
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
        skipped = sum(s.aborted + s.control for s in latest.splits)
        if skipped:
            aborted = sum(s.aborted for s in latest.splits)
            console.print(
                f"  transactions: {aborted:,} records of aborted ones and {skipped - aborted:,} markers skipped",
                highlight=False,
            )
        compacted = sum(s.compacted for s in latest.splits)
        if compacted:
            console.print(
                f"  compacted: {compacted:,} offsets held no record any more (the log cleaner removed them: "
                "not data loss)",
                highlight=False,
            )
        for h in held or []:
            console.print(
                f"  held back: {h['split']} loads up to its last stable offset {h['last_stable_offset']:,}, "
                f"{h['offsets']:,} offsets short of its log end {h['log_end']:,}, since run #{h['since_run']} "
                f"({h['since']}): a transaction is open (kafka-transactions --find-hanging names its producer)",
                highlight=False,
            )
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


def held_back(state: PipelineState, manifest: Manifest) -> list[dict[str, Any]]:
    """The splits whose last stable offset lagged their log end when the run planned: a
    transaction still open holds the rest back (a "hanging" one, if it stays so). For each: how
    many offsets, and since when (the first of the consecutive runs before this one that planned
    the split at the same last stable offset while it lagged)."""
    held = []
    for split in manifest.plan.splits:
        if split.last_stable is None or split.log_end is None or split.log_end <= split.last_stable:
            continue
        since = manifest
        for seq in reversed([s for s in state.committed_seqs() if s < manifest.seq]):
            earlier = next((s for s in state.manifest(seq).plan.splits if s.key == split.key), None)
            if (
                earlier is None
                or earlier.last_stable != split.last_stable
                or (earlier.log_end or 0) <= split.last_stable
            ):
                break
            since = state.manifest(seq)
        held.append(
            {
                "split": split.name,
                "last_stable_offset": split.last_stable,
                "log_end": split.log_end,
                "offsets": split.log_end - split.last_stable,
                "since": since.plan.created_at,
                "since_run": since.seq,
            }
        )
    return held
