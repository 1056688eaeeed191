"""The run report: what one committed run did, as JSON for machines and an HTML page for people.

Role: a view over the pipeline's state, nothing more. Everything in a report is read from what the
run committed (its manifest and plan) and what its flow recorded (validation results, publish
markers); building one needs no Spark and no broker, so ``pipelines report`` can (re)build the
report of any run at any time, and a report can never disagree with the state it describes.

Layout, beside the state (see pipelines.ingest.state)::

    _pipeline/reports/<seq>.json     the document (format REPORT_FORMAT; keys below)
    _pipeline/reports/<seq>.html     the same for a browser: one self-contained file, no scripts

Invariant: a report is derived data. Rewriting it (the flow stages rewrite it as they finish)
replaces the previous version; losing it loses nothing (``pipelines report`` rebuilds it).
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from importlib import resources
from typing import Any

import jinja2

from pipelines.config.pipeline import PipelineSpec
from pipelines.errors import CommitError, PipelineError
from pipelines.ingest.state import Manifest, PipelineState
from pipelines.layout import generation_dir, partition_of, published_marker

REPORT_FORMAT = 1


def report_paths(state: PipelineState, seq: int) -> tuple[str, str]:
    """(JSON, HTML) paths of run ``seq``'s report."""
    base = f"{state.meta}/reports/{seq:010d}"
    return f"{base}.json", f"{base}.html"


def build_report(spec: PipelineSpec, state: PipelineState, seq: int) -> dict[str, Any]:
    """The report document of committed run ``seq`` (CommitError if there is no such run)."""
    if seq not in state.committed_seqs():
        raise CommitError(f"pipeline {spec.name}: no committed run #{seq} under {state.meta}/manifests")
    manifest = state.manifest(seq)
    splits = _splits(manifest)
    outputs = [_output(spec, state, manifest, output.name) for output in spec.outputs]
    return {
        "format": REPORT_FORMAT,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "pipeline": spec.name,
        "description": spec.description,
        "run": {
            "seq": manifest.seq,
            "run_id": manifest.run_id,
            "kind": manifest.kind,
            "target": manifest.plan.target or None,
            "generation": manifest.generation,
            "planned_at": manifest.plan.created_at,
            "committed_at": manifest.committed_at,
            "seconds": manifest.stats.get("seconds"),
        },
        "raw": {
            "path": generation_dir(spec.raw.path, manifest.generation),
            "files": sum(1 for f in manifest.files if f.kind == "data"),
            "quarantine_files": sorted(state.path(f.path) for f in manifest.files if f.kind == "quarantine"),
            "bytes": manifest.stats.get("bytes", 0),
        },
        "totals": {
            "messages": sum(s["messages"] for s in splits),
            "rows": sum(s["rows"] for s in splits),
            "quarantined": sum(s["quarantined"] for s in splits),
            "filtered": sum(s["filtered"] for s in splits),
            "lost": sum(s["lost"]["messages"] for s in splits if s["lost"]),
            "lag": sum(s["lag"] for s in splits if s["lag"] is not None),
        },
        "splits": splits,
        "rows_per_hour": rows_per_hour(manifest),
        # a replay's manifest lists every raw file of the generation it made (state.Manifest.kind)
        "rows_per_hour_scope": "generation" if manifest.kind == "replay" else "run",
        "data_loss": data_loss_ledger(state, seq),
        "outputs": outputs,
    }


def _splits(manifest: Manifest) -> list[dict[str, Any]]:
    planned = {s.key: s for s in manifest.plan.splits}
    seconds = manifest.stats.get("split_seconds", {})
    out = []
    for result in manifest.splits:
        split = planned.get((result.topic, result.partition))
        log_end = None if split is None else split.log_end
        lost = None
        if result.lost_from is not None and result.lost_to is not None:
            lost = {"from": result.lost_from, "to": result.lost_to, "messages": result.lost_to - result.lost_from}
        out.append(
            {
                "split": f"{result.topic}-{result.partition}",
                "topic": result.topic,
                "partition": result.partition,
                "leader": None if split is None else split.leader,
                "start": result.start,
                "end": result.end,
                "messages": result.end - result.start,
                "rows": result.rows,
                "quarantined": result.quarantined,
                "filtered": result.filtered,
                "log_end": log_end,
                "lag": None if log_end is None else max(log_end - result.end, 0),
                "seconds": seconds.get(f"{result.topic}:{result.partition}"),
                "min_event_time": result.min_event_time,
                "max_event_time": result.max_event_time,
                "lost": lost,
            }
        )
    return out


def rows_per_hour(manifest: Manifest) -> list[dict[str, Any]]:
    """Rows the run's data files hold per event-time hour (``dt=…/hour=…``), oldest first."""

    counts: Counter[str] = Counter()
    for item in manifest.files:
        where = partition_of(item.path) if item.kind == "data" else None
        if where is not None:
            counts[f"{where[0]}T{where[1]}:00"] += item.rows
    return [{"hour": hour, "rows": counts[hour]} for hour in sorted(counts)]


def data_loss_ledger(state: PipelineState, up_to: int) -> list[dict[str, Any]]:
    """Every range of messages the pipeline skipped because retention deleted them before they
    were loaded, over all committed runs up to ``up_to``: the whole history, not just this run."""
    ledger = []
    for seq in state.committed_seqs():
        if seq > up_to:
            break
        manifest = state.manifest(seq)
        for s in manifest.splits:
            if s.lost_from is not None and s.lost_to is not None:
                ledger.append(
                    {
                        "seq": seq,
                        "run_id": manifest.run_id,
                        "split": f"{s.topic}-{s.partition}",
                        "from": s.lost_from,
                        "to": s.lost_to,
                        "messages": s.lost_to - s.lost_from,
                        "committed_at": manifest.committed_at,
                    }
                )
    return ledger


def _read_json(state: PipelineState, path: str) -> dict[str, Any] | None:
    if not state.storage.exists(path):
        return None
    try:
        document = json.loads(state.storage.read_bytes(path))
    except ValueError as exc:
        raise CommitError(f"{path}: unreadable JSON: {exc}") from exc
    return document if isinstance(document, dict) else None


def _output(spec: PipelineSpec, state: PipelineState, manifest: Manifest, name: str) -> dict[str, Any]:
    """One output's part in run ``manifest.seq``: validated? published where? which checks?"""

    output = next(o for o in spec.outputs if o.name == name)
    marker = _read_json(state, published_marker(spec.raw.path, manifest.seq, name))
    # a flow covers every load since the last published one, and records its results under the newest
    target = int(marker["target"]) if marker and "target" in marker else manifest.seq
    validation = _read_json(state, f"{state.meta}/flow/{target:06d}/validation/{name}.json")
    if marker is not None:
        status = "published"
    elif validation is None:
        status = "not run"
    elif validation.get("success") is False:
        status = "failed"
    else:
        status = "validated"
    checks = (validation or {}).get("checks", [])
    return {
        "name": name,
        "path": generation_dir(output.path, manifest.generation),
        "status": status,
        "flow_run": target,
        "rows": (validation or {}).get("rows"),
        "quarantined": (validation or {}).get("quarantined", 0),
        "quarantine_path": f"{output.path.rstrip('/')}/_quarantine/seq={target:06d}",
        "error": (validation or {}).get("error"),
        "partitions": len((marker or {}).get("partitions", [])),
        "checks": [
            {
                "expectation": c.get("expectation"),
                "success": c.get("success"),
                "unexpected": c.get("unexpected"),
                "observed": c.get("observed"),
            }
            for c in checks
        ],
    }


def render_html(document: dict[str, Any]) -> str:
    """The report as one self-contained HTML page (inline CSS and SVG; every value escaped)."""
    template = resources.files("pipelines.reporting").joinpath("templates/run_report.html").read_text(encoding="utf-8")
    environment = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    return environment.from_string(template).render(report=document, chart=_chart(document["rows_per_hour"]))


def _chart(hours: list[dict[str, Any]], width: int = 760, height: int = 180) -> dict[str, Any]:
    """Bar geometry for the rows-per-hour plot (the template draws it as SVG)."""
    top = max((h["rows"] for h in hours), default=0)
    slot = width / max(len(hours), 1)
    label_every = max(1, round(len(hours) / 12))  # about a dozen labels, whatever the span
    bars = []
    for index, hour in enumerate(hours):
        tall = 0.0 if top == 0 else (height - 20) * hour["rows"] / top
        bars.append(
            {
                "x": round(index * slot + 1, 1),
                "y": round(height - tall, 1),
                "width": round(max(slot - 2, 1), 1),
                "height": round(tall, 1),
                "label": hour["hour"].replace("T", " ") if index % label_every == 0 else "",
                "title": f"{hour['hour']}: {hour['rows']:,} rows",
            }
        )
    return {"width": width, "height": height, "bars": bars, "top": top}


def write_report(spec: PipelineSpec, state: PipelineState, seq: int) -> tuple[str, str]:
    """Build and store run ``seq``'s report; returns its (JSON, HTML) paths."""
    document = build_report(spec, state, seq)
    json_path, html_path = report_paths(state, seq)
    for path, data in (
        (json_path, json.dumps(document, indent=1, sort_keys=True).encode()),
        (html_path, render_html(document).encode()),
    ):
        # derived data (see the module doc): replacing the previous version is the point
        state.storage.delete(path)
        state.storage.write_new(path, data)
    return json_path, html_path


def try_write_report(spec: PipelineSpec, state: PipelineState, seq: int) -> tuple[str, str] | str:
    """write_report, for the end of a job: a report that cannot be written must not fail a run that
    committed; returns the paths, or the reason it was not written."""
    try:
        return write_report(spec, state, seq)
    except (PipelineError, OSError, jinja2.TemplateError) as exc:
        return f"the report of run #{seq} was not written: {exc}"
