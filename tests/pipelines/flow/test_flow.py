"""Transforms → validate → publish on the example pipelines, with a real broker, real Spark and
real great-expectations. Expected warehouse rows are computed from the produced events in Python."""

from __future__ import annotations

import io
import json
import re
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from rich.console import Console

from demo.examples import metrics, page_views
from pipelines.config.pipeline import load_spec
from pipelines.errors import FlowError, ValidationError
from pipelines.flow.expect import CheckResult, Loaded, LoadedCheck, Validation
from pipelines.flow.run import FlowRun
from pipelines.flow.validation import note_validation, validation_line
from pipelines.ingest.run import PipelineRun
from pipelines.progress import Reporter
from pipelines.storage import LocalStorage
from tests.pipelines.flow_harness import (
    example_spec,
    expected_hourly_pages,
    expected_sessions,
    send,
    snapshot,
    table_rows,
)
from tests.pipelines.harness import run_cli
from tests.support.kafkalog import BrokerProcess

START = datetime(2026, 5, 4, 21, 10, tzinfo=UTC)  # the views run past midnight into the next day


def load_and_validate(spec: Any, spark: Any) -> tuple[FlowRun, int]:
    """A load committed, its steps run and its outputs validated: everything but the publish."""
    assert PipelineRun(spec, spark).run().status == "committed"
    flow = FlowRun(spec, spark)
    seq = flow.seq_for(None)
    for step in ("sessions", "hourly_pages"):
        flow.run_step(seq, step)
    flow.validate(seq)
    return flow, seq


def load_and_flow(spec_path: Path, spark: Any, reporter: Reporter | None = None) -> tuple[FlowRun, int]:
    spec = load_spec(spec_path)
    result = PipelineRun(spec, spark).run()
    assert result.status == "committed"
    flow = FlowRun(spec, spark, reporter=reporter)
    seq = flow.seq_for(None)
    flow.run_all(seq)
    return flow, seq


def hourly_pages(tmp_path: Path) -> dict[tuple[str, str, str], tuple[int, int]]:
    rows = table_rows(tmp_path / "warehouse" / "hourly_page_views")
    found = {(r["dt"], r["hour"], r["page"]): (r["views"], r["users"]) for r in rows}
    assert len(found) == len(rows), "a (dt, hour, page) row appears twice"
    return found


def test_page_views_end_to_end_with_quarantine_and_reruns_that_change_nothing(
    tmp_path: Path, broker: BrokerProcess, spark: Any
) -> None:
    events = list(page_views(START, 400, bad_page_every=250))
    send(broker.bootstrap, "web.page_views", events)
    spec_path = example_spec(tmp_path, "page_views", broker.bootstrap)
    console = Console(file=io.StringIO(), width=400)
    flow, seq = load_and_flow(spec_path, spark, Reporter(console=console))

    assert hourly_pages(tmp_path) == expected_hourly_pages(events)
    sessions: dict[tuple[int, str], list[int]] = defaultdict(list)
    for row in table_rows(tmp_path / "warehouse" / "user_sessions"):
        sessions[(row["user_id"], row["dt"])].append(row["pages"])
    assert {k: (len(v), sum(v)) for k, v in sessions.items()} == expected_sessions(events)
    assert len({dt for _, dt in sessions}) == 2  # both days

    # the one bad page is kept aside with its reason, counted in the validation record
    (quarantined,) = list((tmp_path / "warehouse" / "hourly_page_views" / "_quarantine").rglob("*.parquet"))
    bad = pq.read_table(quarantined).to_pylist()
    assert [r["page"] for r in bad] == ["javascript:void(0)"]
    assert "regex(page ~ ^/)" in bad[0]["reason"]
    record = json.loads(
        (tmp_path / "raw" / "_pipeline" / "flow" / f"{seq:06d}" / "validation" / "hourly_page_views.json").read_text()
    )
    assert record["quarantined"] == 1 and record["success"] is True and record["on_failure"] == "quarantine"
    # the checks on the rows as loaded say what was set aside and why; GX's, on the rows kept, all pass
    kept = len(expected_hourly_pages(events))
    assert (record["loaded"]["rows"], record["loaded"]["failing"], record["rows"]) == (kept + 1, 1, kept)
    assert [(c["expectation"], c["unexpected"], c["quarantined"]) for c in record["loaded"]["checks"]] == [
        ("not_null(page)", 0, 0),
        ("regex(page ~ ^/)", 1, 1),
        ("between(views, 1..)", 0, 0),
        ("unique(dt, hour, page)", 0, 0),
    ]
    assert record["loaded"]["checks"][1]["samples"] == [{"value": '"javascript:void(0)"', "rows": 1}]
    assert all(c["success"] and c["observed"] == f"0 of {kept:,} rows" for c in record["checks"])
    sessions_rows = sum(n for n, _ in expected_sessions(events).values())
    printed = console.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert f"output user_sessions: {sessions_rows:,} rows as loaded pass all 4 checks" in printed
    assert (
        f"output hourly_page_views: {kept + 1:,} rows as loaded, 1 quarantined (regex(page ~ ^/) fails 1); "
        f"the {kept:,} rows kept pass all 4 checks"
    ) in printed
    for output in ("hourly_page_views", "user_sessions"):
        leftovers = [p.name for p in (tmp_path / "warehouse" / output).iterdir() if p.name in ("_staging", "_trash")]
        assert all(not any((tmp_path / "warehouse" / output / name).rglob("*.parquet")) for name in leftovers)

    # every stage again, alone and all together: nothing changes
    before = snapshot(tmp_path / "warehouse")
    for step in ("sessions", "hourly_pages"):
        flow.run_step(seq, step)
    flow.validate(seq)
    flow.publish(seq)
    flow.run_all(seq)
    assert PipelineRun(load_spec(spec_path), spark).run().status == "up-to-date"
    assert snapshot(tmp_path / "warehouse") == before


def test_late_data_recomputes_exactly_the_partitions_it_touches(
    tmp_path: Path, broker: BrokerProcess, spark: Any
) -> None:
    first = list(page_views(START, 300, seed=3))
    send(broker.bootstrap, "web.page_views", first)
    spec_path = example_spec(tmp_path, "page_views", broker.bootstrap)
    load_and_flow(spec_path, spark)
    before = snapshot(tmp_path / "warehouse" / "hourly_page_views")

    # late views, all in the first hour of the first day: only that day is recomputed (a daily
    # output makes the scope whole days), every other day stays byte for byte as it was
    late = list(page_views(START, 40, seed=4))
    late = [e for e in late if e["ts"][:13] == first[0]["ts"][:13]]
    assert late
    send(broker.bootstrap, "web.page_views", late)
    flow, seq = load_and_validate(load_spec(spec_path), spark)
    # publishing moves files: `pipelines run --stage publish` starts no JVM, and finds no Java here
    nowhere = str(tmp_path / "no-java")
    published = run_cli("run", str(spec_path), "--stage", "publish", env={"PATH": nowhere, "JAVA_HOME": nowhere})
    assert published.returncode == 0, published.stderr[-3000:]
    assert flow.published(seq)
    assert hourly_pages(tmp_path) == expected_hourly_pages(first + late)
    after = snapshot(tmp_path / "warehouse" / "hourly_page_views")
    second_day = {k: v for k, v in before.items() if "dt=2026-05-05" in k}
    assert second_day and all(after.get(k) == v for k, v in second_day.items())
    assert before != after


def test_a_failing_expectation_under_policy_fail_publishes_nothing(
    tmp_path: Path, broker: BrokerProcess, spark: Any
) -> None:
    send(broker.bootstrap, "ops.metrics", list(metrics(START, 200, cpu_spike_at=7)))
    # the spike makes one service-hour's average impossible
    spec_path = example_spec(tmp_path, "ops_metrics", broker.bootstrap)
    spec = load_spec(spec_path)
    assert PipelineRun(spec, spark).run().status == "committed"
    flow = FlowRun(spec, spark)
    seq = flow.seq_for(None)
    with pytest.raises(
        ValidationError,
        match=r"service_hourly of run #1: 1 expectation failed: "
        r"between\(cpu_max, 0..100\): 1 of \d+ rows, e\.g\. 250\.0 \(nothing of this run is published\)",
    ):
        flow.run_all(seq)
    assert table_rows(tmp_path / "warehouse" / "service_hourly") == []
    record = json.loads(
        (tmp_path / "raw" / "_pipeline" / "flow" / "000001" / "validation" / "service_hourly.json").read_text()
    )
    assert record["success"] is False and record["on_failure"] == "fail" and record["quarantined"] == 0
    # policy fail: GX judged the rows as loaded; the record adds what the failing rows held
    (cpu,) = [c for c in record["loaded"]["checks"] if c["expectation"] == "between(cpu_max, 0..100)"]
    assert (cpu["unexpected"], cpu["samples"], cpu["quarantined"]) == (1, [{"value": "250.0", "rows": 1}], None)
    assert record["loaded"]["rows"] == record["rows"]
    with pytest.raises(Exception, match="was not validated"):
        flow.publish(seq)


def test_ops_metrics_percentiles_per_service_and_hour(tmp_path: Path, broker: BrokerProcess, spark: Any) -> None:
    samples = list(metrics(START, 720))  # 2 hours of 10-second samples
    send(broker.bootstrap, "ops.metrics", samples)
    load_and_flow(example_spec(tmp_path, "ops_metrics", broker.bootstrap), spark)
    rows = table_rows(tmp_path / "warehouse" / "service_hourly")
    by_key = {(r["dt"], r["hour"], r["service"]): r for r in rows}
    expected: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for s in samples:
        moment = datetime.fromtimestamp(s["ts"] / 1000, tz=UTC)
        expected[(moment.strftime("%Y-%m-%d"), moment.strftime("%H"), s["service"])].append(s)
    assert set(by_key) == set(expected)
    for key, group in expected.items():
        row = by_key[key]
        assert row["samples"] == len(group)
        assert row["cpu_max"] == max(s["cpu"] for s in group)
        assert row["cpu_avg"] == pytest.approx(sum(s["cpu"] for s in group) / len(group))
        latencies = sorted(s["latency_ms"] for s in group)
        assert row["latency_p50_ms"] == pytest.approx(latencies[(len(latencies) - 1) // 2], rel=0.05)
        assert row["latency_p50_ms"] <= row["latency_p95_ms"] <= row["latency_p99_ms"] <= latencies[-1]


def test_a_publish_that_dies_midway_is_completed_by_the_next_one(
    tmp_path: Path, broker: BrokerProcess, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = list(page_views(START, 150, seed=5))
    send(broker.bootstrap, "web.page_views", events)
    spec = load_spec(example_spec(tmp_path, "page_views", broker.bootstrap))
    flow, seq = load_and_validate(spec, spark)
    renames = {"n": 0}
    original = LocalStorage.rename

    def dies_in_the_second_output(self: LocalStorage, src: str, dst: str) -> bool:
        renames["n"] += 1
        if renames["n"] == 8:  # plan, 2 days and the marker of user_sessions; plan and 2 hours of the other
            raise OSError(5, "Input/output error")
        return original(self, src, dst)

    with monkeypatch.context() as patched:
        patched.setattr(LocalStorage, "rename", dies_in_the_second_output)
        with pytest.raises(FlowError, match="Input/output error"):
            flow.publish(seq)
    assert not flow.published(seq)
    assert renames["n"] == 8
    flow.publish(seq)
    assert flow.published(seq)
    assert hourly_pages(tmp_path) == expected_hourly_pages(events)
    for output in ("hourly_page_views", "user_sessions"):
        base = tmp_path / "warehouse" / output
        assert not list((base / "_staging").rglob("*.parquet")) and not list((base / "_trash").rglob("*.parquet"))


class ReadersByName:
    """Readers by name as publish sees them (pipelines.flow.publish.Readers), without a metastore: what
    publish does to the directories for them (a copy of the staged rows swapped in, the staged rows
    kept until every partition is in place) is what the test below is about."""

    def __init__(self) -> None:
        self.shown: list[str] = []

    def shows(self, output: Any, generation: int) -> bool:
        return True

    def stage(self, output: Any, generation: int, locations: dict[Any, str], removed: list[Any]) -> None:
        self.shown.append("stage")

    def settle(self, output: Any, generation: int, locations: dict[Any, str], removed: list[Any]) -> None:
        self.shown.append("settle")


def test_a_publish_that_dies_while_deleting_its_staged_rows_loses_nothing_when_run_again(
    tmp_path: Path, broker: BrokerProcess, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every partition was in place when the staged rows began to be deleted: publishing again
    only cleans up. (It swapped the half-deleted staged rows into place, over the published ones.)"""
    events = list(page_views(START, 150, seed=6))
    send(broker.bootstrap, "web.page_views", events)
    spec = load_spec(example_spec(tmp_path, "page_views", broker.bootstrap))
    flow, seq = load_and_validate(spec, spark)
    flow.readers = ReadersByName()  # publish keeps the staged rows whole for them until the end
    original = LocalStorage.delete

    def dies_half_way_through_the_staged_rows(self: LocalStorage, path: str, *, recursive: bool = False) -> bool:
        if re.search(r"/_staging/[^/]+-\d{6}$", path):  # a run's staged rows (not their copies)
            for file in sorted(Path(path).rglob("*.parquet"))[::2]:
                file.unlink()  # some of them gone, as a crash in the middle leaves it
            raise OSError(5, "Input/output error")
        return original(self, path, recursive=recursive)

    with monkeypatch.context() as patched:
        patched.setattr(LocalStorage, "delete", dies_half_way_through_the_staged_rows)
        with pytest.raises((FlowError, OSError), match="Input/output error"):
            flow.publish(seq)
    assert not flow.published(seq)
    assert flow.readers.shown == ["stage", "settle"]  # the first output was in place when it died
    flow.publish(seq)
    assert flow.published(seq)
    # publishing again only cleaned the first up, then published the second
    assert flow.readers.shown == ["stage", "settle", "stage", "settle"]
    assert hourly_pages(tmp_path) == expected_hourly_pages(events)


def test_a_flow_catches_up_loads_whose_flow_never_ran_and_empty_runs_do_nothing(
    tmp_path: Path, broker: BrokerProcess, spark: Any
) -> None:
    first = list(page_views(START, 120, seed=6))
    send(broker.bootstrap, "web.page_views", first)
    spec = load_spec(example_spec(tmp_path, "page_views", broker.bootstrap))
    assert PipelineRun(spec, spark).run(run_id="one").status == "committed"  # its flow never runs
    later = list(page_views(datetime(2026, 5, 6, 8, 0, tzinfo=UTC), 60, seed=7))
    send(broker.bootstrap, "web.page_views", later)
    assert PipelineRun(spec, spark).run(run_id="two").status == "committed"
    flow = FlowRun(spec, spark)
    assert flow.covered(2) == [1, 2]
    flow.run_all(flow.seq_for("two"))
    assert hourly_pages(tmp_path) == expected_hourly_pages(first + later)
    assert flow.published(1) and flow.published(2) and flow.covered(1) == []
    before = snapshot(tmp_path / "warehouse")
    flow.run_all(flow.seq_for("one"))  # superseded: nothing to do
    # a run that finds nothing new is recorded; its stages target the newest load, published already
    assert PipelineRun(spec, spark).run(run_id="three").status == "up-to-date"
    assert flow.seq_for("three") == 2
    flow.run_all(2)
    assert PipelineRun(spec, spark).run(run_id="three").status == "already-committed"
    assert snapshot(tmp_path / "warehouse") == before


def test_the_validation_line_names_what_failed_as_loaded_and_prints_as_written() -> None:
    checks = ("not_null(page)", "regex(page ~ ^[a-z/]+$)", "row_count(1..)")
    kept = Validation("hourly", 98, True, tuple(CheckResult(c, True, 0, "0 of 98 rows") for c in checks))
    loaded = Loaded(
        100,
        2,
        (
            LoadedCheck(checks[0], 1, (), 1),
            LoadedCheck(checks[1], 2, (), 2),
            LoadedCheck(checks[2], None, (), None),
        ),
    )
    line = validation_line("hourly", Validation(kept.output, kept.rows, True, kept.checks, loaded))
    assert line == (
        "output hourly: 100 rows as loaded, 2 quarantined (not_null(page) fails 1, regex(page ~ ^[a-z/]+$) fails 2); "
        "the 98 rows kept pass all 3 checks"
    )
    clean = Loaded(100, 0, tuple(LoadedCheck(c, 0, (), 0) for c in checks[:2]))
    assert validation_line("hourly", Validation("hourly", 100, True, kept.checks[:2], clean)) == (
        "output hourly: 100 rows as loaded pass all 2 checks, none quarantined"
    )
    assert validation_line("sessions", Validation("sessions", 7, True, kept.checks[:1])) == (
        "output sessions: 7 rows as loaded pass its 1 check"
    )
    assert (
        validation_line("raw_copy", Validation("raw_copy", 7, True, ())) == "output raw_copy: 7 rows (no expectations)"
    )
    # printed as written (rich would take [a-z/] for markup and drop it), and logged as written
    console = Console(file=io.StringIO(), width=400)
    note_validation(Reporter(console=console), "hourly", Validation(kept.output, kept.rows, True, kept.checks, loaded))
    assert console.file.getvalue().strip() == line  # type: ignore[attr-defined]
