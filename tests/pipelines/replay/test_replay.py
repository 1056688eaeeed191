"""Rewind and replay (reliability rows S6-S7) on the page_views example with a real broker, real
Spark and real great-expectations: a transform bug fixed by a replay gives the outputs a fresh load
with the fixed code gives, each row once; a replay killed before its commit leaves the old
generation whole and is finished by running it again; scheduled runs wait for a replay and go on
from the committed offsets after it; a time resolves to the offsets a scan of the message
timestamps finds; rewind offsets deleted by retention follow the pipeline's policy."""

from __future__ import annotations

import json
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from demo.examples import page_views
from kafkalog.client import Admin, Producer, SimpleConsumer
from pipelines.config.pipeline import load_spec
from pipelines.errors import ConcurrentRunError, ReplayError
from pipelines.flow.run import FlowRun
from pipelines.ingest.run import PipelineRun
from pipelines.ledger.state import PipelineState
from pipelines.replay.gc import current_locations, garbage
from pipelines.replay.plan import plan_replay
from pipelines.replay.run import Replay
from pipelines.replay.target import RewindTarget
from pipelines.storage import LocalStorage
from tests.pipelines.flow_harness import example_spec, expected_hourly_pages, send, snapshot, table_rows
from tests.pipelines.harness import run_cli
from tests.pipelines.ingest.test_load import _delete_oldest_segments, _restart
from tests.support.kafkalog import BrokerProcess

START = datetime(2026, 5, 4, 6, 0, tzinfo=UTC)
BUGGY_SQL = (
    "SELECT page, COUNT(*) + 1 AS views, COUNT(DISTINCT user_id) AS users, dt, hour FROM raw GROUP BY dt, hour, page"
)


def spec_file(tmp_path: Path, bootstrap: str, *, buggy: bool = False, root: str = "", **changes: Any) -> Path:
    """page_views under ``tmp_path/root``; ``buggy``: hourly_pages counts one view too many."""
    base = tmp_path / root if root else tmp_path
    base.mkdir(parents=True, exist_ok=True)
    path = example_spec(base, "page_views", bootstrap, **changes)
    if buggy:
        data = yaml.safe_load(path.read_text())
        for step in data["transforms"]:
            if step["name"] == "hourly_pages":
                step["sql"] = BUGGY_SQL
        path = path.with_name("page_views_buggy.yaml")  # same pipeline, same paths; other code
        path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def load_and_publish(path: Path, spark: Any) -> None:
    spec = load_spec(path)
    result = PipelineRun(spec, spark).run()
    assert result.status == "committed", result
    flow = FlowRun(spec, spark)
    flow.run_all(flow.seq_for(None))


def batch(k: int) -> list[dict[str, Any]]:
    return list(page_views(START + timedelta(hours=5 * k), 150, seed=k + 1))


def current_rows(path: Path, output: str) -> list[dict[str, Any]]:
    spec = load_spec(path)
    where = current_locations(spec, PipelineState(LocalStorage(), spec.raw.path))[output]
    return sorted(table_rows(Path(where)), key=lambda r: json.dumps(r, sort_keys=True, default=str))


def hourly(rows: list[dict[str, Any]]) -> dict[tuple[str, str, str], tuple[int, int]]:
    found = {(r["dt"], r["hour"], r["page"]): (r["views"], r["users"]) for r in rows}
    assert len(found) == len(rows), "a (dt, hour, page) row appears twice"
    return found


def raw_offsets(path: Path) -> Counter[tuple[str, int, int]]:
    """(topic, partition, offset) of every raw row of the current generation, counted."""
    import pyarrow.parquet as pq

    spec = load_spec(path)
    state = PipelineState(LocalStorage(), spec.raw.path)
    seen: Counter[tuple[str, int, int]] = Counter()
    for manifest in state.generation_manifests():
        for item in manifest.files:
            if item.kind == "data":
                table = pq.read_table(state.path(item.path), columns=["topic", "partition", "offset"])
                seen.update(zip(*(table[c].to_pylist() for c in ("topic", "partition", "offset")), strict=True))
    return seen


def generation_0(path: Path) -> dict[str, str]:
    """The published files of generation 0 (outside every ``_`` directory), by content."""
    return {k: v for k, v in snapshot(path).items() if not any(part.startswith("_") for part in k.split("/"))}


def test_a_transform_bug_fixed_by_a_replay_then_scheduled_runs_go_on(
    tmp_path: Path, broker: BrokerProcess, spark: Any
) -> None:
    events = batch(0)
    send(broker.bootstrap, "web.page_views", events)
    good, buggy = spec_file(tmp_path, broker.bootstrap), spec_file(tmp_path, broker.bootstrap, buggy=True)
    load_and_publish(good, spark)
    rewind_to = int(time.time() * 1000)  # the bug ships here: runs 2 and 3 use it
    for k in (1, 2):
        time.sleep(0.01)
        events += batch(k)
        send(broker.bootstrap, "web.page_views", batch(k))
        load_and_publish(buggy, spark)
    assert hourly(current_rows(good, "hourly_page_views")) != expected_hourly_pages(events)
    generation_0_before, raw_before = generation_0(tmp_path / "warehouse"), generation_0(tmp_path / "raw")

    manifest = Replay(load_spec(good), spark).run(RewindTarget(time_ms=rewind_to))
    assert (manifest.kind, manifest.generation, manifest.seq) == ("replay", 1, 4)

    # the fixed code over every row from the rewind on; each row once; what a fresh load gives
    fresh = spec_file(tmp_path, broker.bootstrap, root="fresh")
    load_and_publish(fresh, spark)
    assert hourly(current_rows(good, "hourly_page_views")) == expected_hourly_pages(events)
    for output in ("hourly_page_views", "user_sessions"):
        assert current_rows(good, output) == current_rows(fresh, output), output
    offsets = raw_offsets(good)
    assert set(offsets.values()) == {1} and len(offsets) == len(events), "every message once in the raw layer"
    # generation 0 is untouched (readers of the roots still see it, whole) until gc
    assert generation_0(tmp_path / "warehouse") == generation_0_before
    assert generation_0(tmp_path / "raw") == raw_before

    # a scheduled run after the replay: from the committed offsets, into the current generation
    events += batch(3)
    send(broker.bootstrap, "web.page_views", batch(3))
    load_and_publish(good, spark)
    state = PipelineState(LocalStorage(), str(tmp_path / "raw"))
    latest = state.latest()
    assert latest is not None and latest.generation == 1 and latest.kind == "load"
    assert {s.start for s in latest.plan.splits} <= set(manifest.offsets.values())
    assert hourly(current_rows(good, "hourly_page_views")) == expected_hourly_pages(events)
    offsets = raw_offsets(good)
    assert set(offsets.values()) == {1} and len(offsets) == len(events)

    # history, location, gc
    history = run_cli("offsets", str(good), "--history", "--json")
    assert history.returncode == 0, history.stderr
    kinds = [(h["seq"], h["kind"], h["generation"]) for h in json.loads(history.stdout)]
    assert kinds == [(1, "load", 0), (2, "load", 0), (3, "load", 0), (4, "replay", 1), (5, "load", 1)]
    where = run_cli("location", str(good), "--output", "hourly_page_views")
    assert where.stdout.strip() == str(tmp_path / "warehouse" / "hourly_page_views" / "_generations" / "000001")
    doomed = garbage(load_spec(good), state)
    assert doomed and all("_generations" not in p for p in doomed)
    collected = run_cli("gc", str(good))
    assert collected.returncode == 0, collected.stderr
    assert not any((tmp_path / "raw").glob("dt=*")) and not any((tmp_path / "warehouse" / "user_sessions").glob("dt=*"))
    assert hourly(current_rows(good, "hourly_page_views")) == expected_hourly_pages(events)


def test_a_replay_killed_before_its_commit_leaves_the_old_generation_and_finishes_when_run_again(
    tmp_path: Path, broker: BrokerProcess, spark: Any
) -> None:
    events = batch(0)
    send(broker.bootstrap, "web.page_views", events)
    good = spec_file(tmp_path, broker.bootstrap)
    load_and_publish(good, spark)
    rewind_to = int(time.time() * 1000)
    time.sleep(0.01)
    events += batch(1)
    send(broker.bootstrap, "web.page_views", batch(1))
    load_and_publish(good, spark)
    published = generation_0(tmp_path / "warehouse")
    rows = current_rows(good, "hourly_page_views")
    moment = datetime.fromtimestamp(rewind_to / 1000, UTC).isoformat()

    dry = run_cli("rewind", str(good), "--to-time", moment, "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    plan = json.loads(dry.stdout)
    assert plan["messages"] == len(batch(1)) and plan["generation"] == 1
    assert {s["action"] for s in plan["splits"]} == {"reload"}
    assert plan["outputs"]["user_sessions"] == [["2026-05-04"]]

    crashed = run_cli("rewind", str(good), "--to-time", moment, env={"PIPELINES_CRASH_AT": "replay.before_commit"})
    assert crashed.returncode == 137, crashed.stderr[-2000:]
    # the old generation: current, whole, readable; the new one invisible
    assert generation_0(tmp_path / "warehouse") == published
    assert current_rows(good, "hourly_page_views") == rows
    status = run_cli("status", str(good))
    assert "a replay to time" in status.stdout and "did not commit" in status.stdout, status.stdout
    # a scheduled run waits for the replay (exit 3 in the CLI), loading nothing
    events += batch(2)
    send(broker.bootstrap, "web.page_views", batch(2))
    with pytest.raises(ConcurrentRunError, match=r"a replay .* is in progress"):
        PipelineRun(load_spec(good), spark).run()
    # another target is refused while this replay is unfinished; the same one finishes it
    with pytest.raises(ReplayError, match="did not finish"):
        Replay(load_spec(good), spark).run(RewindTarget(offsets={("web.page_views", 0): 0}))
    manifest = Replay(load_spec(good), spark).run(RewindTarget(time_ms=rewind_to))
    assert manifest.generation == 1 and manifest.seq == 3
    assert current_rows(good, "hourly_page_views") == rows, "same code, same rows: only the generation changed"
    # the scheduled run now goes on from the committed offsets
    load_and_publish(good, spark)
    assert hourly(current_rows(good, "hourly_page_views")) == expected_hourly_pages(events)
    offsets = raw_offsets(good)
    assert set(offsets.values()) == {1} and len(offsets) == len(events)


def test_a_time_resolves_to_the_offsets_a_scan_of_message_timestamps_finds(
    tmp_path: Path, broker: BrokerProcess, spark: Any
) -> None:
    """ListOffsets by time, per split, against the first offset whose timestamp is at or after T
    found by reading every message (timestamps not in order within a partition included)."""
    base = int(time.time() * 1000) - 300_000  # recent: time retention keeps it
    with Admin(broker.bootstrap) as admin:
        admin.create_topic("web.page_views", 2)
    views = list(page_views(START, 120))
    with Producer(broker.bootstrap, linger_ms=0) as producer:
        for i, view in enumerate(views):
            stamp = base + 1000 * i + (5_500 if i % 7 == 3 else 0)  # every 7th message 5.5 s late
            producer.send("web.page_views", json.dumps(view).encode(), partition=i % 2, timestamp=stamp).result()
    good = spec_file(tmp_path, broker.bootstrap)
    load_and_publish(good, spark)
    spec = load_spec(good)
    state = PipelineState(LocalStorage(), spec.raw.path)
    with SimpleConsumer(broker.bootstrap) as consumer:
        stamps = {p: [(m.offset, m.timestamp) for m in consumer.messages("web.page_views", p, 0, 60)] for p in (0, 1)}
        for when in (base - 1, base, base + 3_000, base + 3_001, base + 59_999, base + 61_000, base + 200_000):
            plan = plan_replay(spec, state, consumer, RewindTarget(time_ms=when))
            for split in plan.splits:
                scan = next((o for o, ts in stamps[split.partition] if ts >= when), 60)
                assert split.wanted == scan, (when, split)
                assert split.messages == 60 - scan


@pytest.mark.parametrize("policy", ["fail", "earliest", "latest"])
def test_a_rewind_into_deleted_offsets_follows_the_policy(tmp_path: Path, spark: Any, policy: str) -> None:

    with BrokerProcess(tmp_path / "broker", log={"segment_bytes": 4096}) as broker:
        with Admin(broker.bootstrap) as admin:
            admin.create_topic("web.page_views", 1)
        views = list(page_views(START, 300))
        for first in range(0, 300, 25):  # small batches: the log rolls 4 KiB segments between them
            send(broker.bootstrap, "web.page_views", views[first : first + 25], partitions=1)
        good = spec_file(tmp_path, broker.bootstrap, on_offset_out_of_range=policy)
        load_and_publish(good, spark)
        before = current_rows(good, "hourly_page_views")
        broker.stop()
        earliest = _delete_oldest_segments(tmp_path / "broker" / "web.page_views-0", 150)
        assert 0 < earliest <= 150
        _restart(broker)
        target = RewindTarget(offsets={("web.page_views", 0): 0})
        replay = Replay(load_spec(good), spark)
        (split,) = replay.plan(target).splits
        if policy == "fail":
            assert split.action == "fail" and f"earliest {earliest}" in split.note
            with pytest.raises(ReplayError, match=rf"web.page_views-0: offsets 0..{earliest - 1} are no longer"):
                replay.run(target)
            assert PipelineState(LocalStorage(), str(tmp_path / "raw")).current_generation() == 0
            return
        manifest = replay.run(target)
        if policy == "latest":  # the split is not replayed: nothing to do, no new generation
            assert split.action == "not-replayed" and (manifest.kind, manifest.generation) == ("load", 0)
        else:
            assert split.action == "keep-deleted" and manifest.generation == 1
            assert [(s.start, s.end) for s in manifest.splits] == [(earliest, 300)]
        # nothing lost: the rows of the deleted offsets are kept from the old generation
        offsets = raw_offsets(good)
        assert set(offsets.values()) == {1} and len(offsets) == 300
        assert current_rows(good, "hourly_page_views") == before
