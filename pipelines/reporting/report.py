"""The run report: what one committed run did, as JSON for machines and an HTML page for people.

Role: a view over the pipeline's state, nothing more. Everything in a report is read from what the
run committed (its manifest and plan) and what its flow recorded (validation results, publish
markers); building one needs no Spark and no broker, so ``pipelines report`` can (re)build the
report of any run at any time, and a report can never disagree with the state it describes.

Layout, beside the state (see pipelines.ledger.paths)::

    _pipeline/reports/<seq>.json     the document (format REPORT_FORMAT; keys below)
    _pipeline/reports/<seq>.html     the same for a browser: one self-contained file, no scripts

Invariant: a report is derived data. Rewriting it (the flow stages rewrite it as they finish)
replaces the previous version; losing it loses nothing (``pipelines report`` rebuilds it).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from datetime import UTC, datetime, timedelta
from importlib import resources
from typing import Any

import jinja2
import markupsafe

from pipelines.config.pipeline import PipelineSpec
from pipelines.errors import CommitError, PipelineError
from pipelines.layout import generation_dir, partition_of
from pipelines.ledger.paths import published_marker, report_base, validation_record
from pipelines.ledger.records import Manifest
from pipelines.ledger.state import PipelineState
from pipelines.reporting.status import held_back

REPORT_FORMAT = 1


def report_paths(state: PipelineState, seq: int) -> tuple[str, str]:
    """(JSON, HTML) paths of run ``seq``'s report."""
    base = report_base(state.root, seq)
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
            "aborted": sum(s["aborted"] for s in splits),
            "markers": sum(s["markers"] for s in splits),
            "compacted": sum(s["compacted"] for s in splits),
            "filtered": sum(s["filtered"] for s in splits),
            "lost": sum(s["lost"]["messages"] for s in splits if s["lost"]),
            "lag": sum(s["lag"] for s in splits if s["lag"] is not None),
        },
        "splits": splits,
        "held_back": held_back(state, manifest),
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
                "aborted": result.aborted,
                "markers": result.control,
                "compacted": result.compacted,
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
    """One output's part in run ``manifest.seq``: validated? published where? which checks, on the
    rows as loaded and on the rows great-expectations validated?"""

    output = next(o for o in spec.outputs if o.name == name)
    marker = _read_json(state, published_marker(spec.raw.path, manifest.seq, name))
    # a flow covers every load since the last published one, and records its results under the newest
    target = int(marker["target"]) if marker and "target" in marker else manifest.seq
    validation = _read_json(state, validation_record(state.root, target, name))
    return output_view(
        name,
        path=generation_dir(output.path, manifest.generation),
        on_failure=output.on_failure,
        flow_run=target,
        quarantine_path=f"{output.path.rstrip('/')}/_quarantine/seq={target:06d}",
        marker=marker,
        record=validation,
    )


def output_view(
    name: str,
    *,
    path: str,
    on_failure: str,
    flow_run: int,
    quarantine_path: str,
    marker: dict[str, Any] | None,
    record: dict[str, Any] | None,
) -> dict[str, Any]:
    """An output's part of the report from its publish marker and validation record (either may be
    missing; a record written before a key existed gives None there, shown as unknown).
    ``on_failure``: the spec's, for a record that does not say."""
    if marker is not None:
        status = "published"
    elif record is None:
        status = "not run"
    elif record.get("success") is False:
        status = "failed"
    else:
        status = "validated"
    record = record or {}
    on_failure = str(record.get("on_failure") or on_failure)
    loaded = record.get("loaded") if isinstance(record.get("loaded"), dict) else None
    rows = record.get("rows")
    return {
        "name": name,
        "path": path,
        "status": status,
        "flow_run": flow_run,
        "on_failure": on_failure,
        # the rows great-expectations validated, whose results are checks[].success/unexpected/observed:
        # under quarantine the rows kept (what is published), under fail the rows as loaded
        "validated": "kept" if on_failure == "quarantine" else "loaded",
        "rows": rows,
        # the output's step rows before any quarantine (None: a record older than this key)
        "rows_loaded": loaded.get("rows") if loaded else (rows if on_failure == "fail" else None),
        "failing": loaded.get("failing") if loaded else None,
        "quarantined": record.get("quarantined", 0),
        "quarantine_path": quarantine_path,
        "error": record.get("error"),
        "partitions": len((marker or {}).get("partitions", [])),
        "checks": _checks(record, loaded, on_failure),
    }


def _checks(record: dict[str, Any], loaded: dict[str, Any] | None, on_failure: str) -> list[dict[str, Any]]:
    """Each expectation of a validation record, in spec order: GX's result on the rows it validated
    (``success``, ``unexpected``, ``observed``; None where GX did not run) and, under ``loaded``, the
    check on the rows as loaded (``unexpected``, ``samples``, ``quarantined``; None where unknown:
    not a row check, or a record written before these were kept)."""
    validated = [c for c in record.get("checks") or [] if isinstance(c, dict)]
    as_loaded = [c for c in (loaded or {}).get("checks") or [] if isinstance(c, dict)]
    names = [c.get("expectation") for c in validated or as_loaded]
    by_name = {c.get("expectation"): c for c in reversed(as_loaded)}  # the first of a name wins
    same_order = [c.get("expectation") for c in as_loaded] == names
    checks = []
    for index, name in enumerate(names):
        gx = validated[index] if validated else {}
        mine = as_loaded[index] if same_order else by_name.get(name, {})
        unexpected = mine.get("unexpected")
        if not mine and on_failure == "fail" and not str(gx.get("observed", "")).startswith(("row count", "error:")):
            unexpected = gx.get("unexpected")  # an older record of policy fail: GX validated the rows as loaded
        samples = mine.get("samples")
        checks.append(
            {
                "expectation": name,
                "success": gx.get("success"),
                "unexpected": gx.get("unexpected"),
                "observed": gx.get("observed"),
                "loaded": {
                    "unexpected": unexpected,
                    "samples": None if samples is None else [_sample(s) for s in samples if isinstance(s, dict)],
                    "quarantined": mine.get("quarantined"),
                },
            }
        )
    return checks


_SAMPLE_CHARS = 80  # as pipelines.flow.expect.SAMPLE_CHARS: a record is read as untrusted as its values


def _sample(sample: dict[str, Any]) -> dict[str, Any]:
    value = str(sample.get("value"))
    rows = sample.get("rows")
    return {
        "value": value if len(value) <= _SAMPLE_CHARS else value[: _SAMPLE_CHARS - 1] + "…",
        "rows": rows if isinstance(rows, int) else None,
    }


def render_html(document: dict[str, Any]) -> str:
    """The report as one self-contained HTML page (inline CSS and SVG; every value escaped)."""
    template = resources.files("pipelines.reporting").joinpath("templates/run_report.html").read_text(encoding="utf-8")
    environment = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    environment.filters["event_span"] = event_span
    environment.filters["breakable"] = breakable
    return environment.from_string(template).render(report=document, chart=chart(document["rows_per_hour"]))


def breakable(text: object) -> markupsafe.Markup:
    """``text`` escaped, with a line-break opportunity after each ``.``, ``_``, ``/`` and ``=``: a
    long topic name wraps between its parts, not anywhere."""
    return markupsafe.Markup(re.sub(r"([._/=])", r"\1<wbr>", str(markupsafe.escape(text))))


def event_span(low: str | None, high: str | None) -> tuple[str, str]:
    """A split's event-time range, short: ``("11-25 18:07", "11-26 17:46")`` (UTC, to the minute;
    the second without its date when on the same day). The report's JSON keeps the full values."""
    first, last = _moment(low), _moment(high)
    if first is None or last is None:
        return low or "-", high or "-"
    end = last.strftime("%H:%M") if last.date() == first.date() else last.strftime("%m-%d %H:%M")
    return first.strftime("%m-%d %H:%M"), end


def _moment(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment.astimezone(UTC) if moment.tzinfo else moment


# ---------------------------------------------------------------------------------- the rows-per-hour plot
#
# Drawn as inline SVG (no scripts, see the module doc) twice, for a wide page and for a phone; the
# page's CSS shows one. Labels are placed from their width as estimated here (CHAR em per character,
# wider than the digits and letters of the usual sans fonts), so they never overlap whatever the span.

CHART_WIDTHS = {"wide": 1180, "narrow": 340}
_FONT = 11  # px, the labels' font size (the template's CSS says the same)
_CHAR = 0.66  # em: an upper bound of a label character's width in the sans fonts a browser picks
_GAP = 12  # px between two labels
_HOUR_STEPS = (1, 2, 3, 4, 6, 12)  # hours between hour labels: divisors of a day, so midnight is one
_DAY_STEPS = (1, 2, 7, 14, 28, 56, 112, 364)  # days between date labels (7 and more: on Mondays)
_MAX_SLOT = 56.0  # px: the widest an hour gets (a run of a few hours is not stretched over the page)
_MONDAY = datetime(2024, 1, 1, tzinfo=UTC)


def _text_width(text: str) -> float:
    return len(text) * _CHAR * _FONT


def chart(hours: list[dict[str, Any]]) -> dict[str, Any]:
    """The rows-per-hour plot, for the template: one hour slot from the first hour with rows to the
    last (hours without rows are gaps), per width of ``CHART_WIDTHS`` a geometry (bars, axis labels,
    y gridlines at round values), and the span in words. An hour that is not ``YYYY-MM-DDTHH:MM``
    is left out and counted (``unreadable``)."""
    readable: list[tuple[datetime, int]] = []
    for hour in hours:
        try:  # from the raw layer's directory names (dt=…/hour=…), which nothing else checks
            readable.append(
                (datetime.strptime(str(hour["hour"]), "%Y-%m-%dT%H:%M").replace(tzinfo=UTC), int(hour["rows"]))
            )
        except ValueError:
            continue
    unreadable = len(hours) - len(readable)
    if not readable:
        return {"hours": 0, "unreadable": unreadable}
    first, last = min(m for m, _ in readable), max(m for m, _ in readable)
    slots = int((last - first).total_seconds() // 3600) + 1
    rows: dict[int, int] = {}
    for moment, count in readable:
        index = int((moment - first).total_seconds() // 3600)
        rows[index] = rows.get(index, 0) + count
    plots = {name: _plot(first, slots, rows, width) for name, width in CHART_WIDTHS.items()}
    return {
        "hours": slots,
        "unreadable": unreadable,
        "empty": slots - len(rows),
        "first": first.strftime("%Y-%m-%d %H:00"),
        "last": (last + timedelta(hours=1)).strftime("%Y-%m-%d %H:00"),
        "top": max(rows.values()),
        **plots,
    }


def _plot(first: datetime, slots: int, rows: dict[int, int], width: int, height: int = 210) -> dict[str, Any]:
    """The geometry of one plot ``width`` px wide: bars at their hour, labels that fit."""
    ticks = _y_ticks(max(rows.values()))
    hour_label, date_label = _text_width("00:00"), _text_width("Nov 26")
    y_label = max(_text_width(f"{t:,}") for t in ticks)
    left = max(y_label + 10, hour_label / 2 + 4)
    right = hour_label / 2 + 4
    slot = min((width - left - right) / slots, _MAX_SLOT)
    width = round(left + slots * slot + right)  # narrower when the hours are few
    top, bottom = 26, height - 42
    scale = (bottom - top) / ticks[-1]

    def x(index: float) -> float:
        return round(left + index * slot, 1)

    gap = 1.0 if slot >= 4 else 0.0
    bars = []
    for index, count in sorted(rows.items()):
        tall = count * scale
        hour = first + timedelta(hours=index)
        bars.append(
            {
                "x": round(left + index * slot + gap / 2, 2),
                "y": round(bottom - tall, 1),
                "width": round(max(slot - gap, 0.5), 2),
                "height": round(tall, 1),
                "title": f"{hour:%Y-%m-%d %H:00} UTC: {count:,} rows",
            }
        )
    grid = [{"y": round(bottom - t * scale, 1), "label": f"{t:,}"} for t in ticks]

    # hour labels on the first row, at hour boundaries (the last boundary ends the last hour)
    hour_step = next((s for s in _HOUR_STEPS if s * slot >= hour_label + _GAP), None)
    boundaries = [(i, first + timedelta(hours=i)) for i in range(slots + 1)]
    hour_ticks = [
        {"x": x(i), "label": f"{moment:%H}:00"}
        for i, moment in boundaries
        if hour_step is not None and moment.hour % hour_step == 0
    ]
    # dates on the row below (the first row when there are no hour labels), from each day boundary
    # shown, and the first day's from the plot's start unless the next date is too close
    day_step = next((s for s in _DAY_STEPS if s * 24 * slot >= date_label + _GAP), _DAY_STEPS[-1])
    midnights = [
        (i, moment)
        for i, moment in boundaries
        if moment.hour == 0
        and ((moment - _MONDAY).days % day_step == 0 if day_step >= 7 else moment.toordinal() % day_step == 0)
    ]
    dates: list[dict[str, Any]] = []
    if not midnights or midnights[0][0] > 0:
        dates.append({"x": x(0), "label": f"{first:%b %d}", "tick": False})
    for i, moment in midnights:
        start = x(i)
        if start + date_label > width:  # no room after the last boundary: end at the plot's edge
            start = width - date_label
        if dates and start < dates[-1]["x"] + date_label + _GAP:
            if dates[-1]["tick"]:
                continue
            dates.pop()  # the first day's label gives way to the next boundary's
        dates.append({"x": round(start, 1), "label": f"{moment:%b %d}", "tick": True, "at": x(i)})
    rows_y = (bottom + 17, bottom + 33) if hour_ticks else (bottom + 17, bottom + 17)
    return {
        "width": width,
        "height": height,
        "left": round(left, 1),
        "top": top,
        "right": x(slots),
        "bottom": bottom,
        "bars": bars,
        "grid": grid,
        "hour_ticks": hour_ticks,
        "dates": dates,
        "hour_y": rows_y[0],
        "date_y": rows_y[1],
    }


def _y_ticks(top: int, count: int = 4) -> list[int]:
    """0 and round values up to the first at or above ``top``, about ``count`` steps of 1, 2 or 5 times 10^n."""
    raw = max(top, 1) / count
    magnitude = 10 ** math.floor(math.log10(raw)) if raw >= 1 else 1
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    step = max(int(step), 1)
    return list(range(0, -(-max(top, 1) // step) * step + 1, step))


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
