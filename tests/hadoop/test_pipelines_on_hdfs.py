"""The whole pipeline on a real HDFS: the raw layer and the warehouse on the MiniDFSCluster.

Spark (the session's driver and its executors) reads and writes them as ``hdfs://`` through Hadoop
RPC; the commit protocol's driver steps go through Hadoop's FileSystem in the driver's JVM; the
tools that run without Spark (status, offsets, report, location, rewind --abandon, gc) go through
WebHDFS (``raw.webhdfs_url``). The checks read back through WebHDFS with pyarrow: the oracle (every
offset once, the manifest the only switch) and the published tables against rows computed in
Python from the events sent.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from demo.tables import published_rows
from pipelines.config.pipeline import load_spec
from pipelines.flow.run import FlowRun
from pipelines.ingest.run import PipelineRun
from pipelines.ledger.state import PipelineState
from pipelines.replay.gc import current_locations
from pipelines.replay.run import Replay
from pipelines.replay.target import RewindTarget
from pipelines.storage.webhdfs import WebHdfsStorage
from tests.hadoop.on_hdfs import hdfs_directory, move_to_hdfs, webhdfs
from tests.pipelines.flow_harness import example_spec, expected_hourly_pages, send
from tests.pipelines.harness import oracle, produce, run_cli, write_spec
from tests.pipelines.replay.test_replay import batch
from tests.support.hadoop import HadoopCluster
from tests.support.kafkalog import BrokerProcess

pytestmark = pytest.mark.integration


def _load_and_publish(path: Path, spark: Any) -> None:
    spec = load_spec(path)
    assert PipelineRun(spec, spark).run().status == "committed"
    flow = FlowRun(spec, spark)
    flow.run_all(flow.seq_for(None))


def _hourly(rows: list[dict[str, Any]]) -> dict[tuple[str, str, str], tuple[int, int]]:
    found = {(r["dt"], r["hour"], r["page"]): (r["views"], r["users"]) for r in rows}
    assert len(found) == len(rows), "a (dt, hour, page) row appears twice"
    return found


def _current(path: Path, storage: WebHdfsStorage, output: str) -> list[dict[str, Any]]:
    spec = load_spec(path)
    return published_rows(storage, current_locations(spec, PipelineState(storage, spec.raw.path))[output])


def test_load_transform_publish_replay_and_gc_on_hdfs(
    tmp_path: Path, broker: BrokerProcess, spark: Any, hadoop: HadoopCluster
) -> None:
    root = hdfs_directory(hadoop, "page-views")
    events = batch(0)
    send(broker.bootstrap, "web.page_views", events)
    path = move_to_hdfs(example_spec(tmp_path, "page_views", broker.bootstrap), hadoop, root)
    storage = webhdfs(hadoop)
    before = run_cli("status", str(path))
    assert before.returncode == 0 and "no run committed yet" in before.stdout, before.stderr
    _load_and_publish(path, spark)
    first_end = PipelineState(storage, f"{root}/raw").manifest(1).end_offsets()
    events += batch(1)
    send(broker.bootstrap, "web.page_views", batch(1))
    _load_and_publish(path, spark)

    # the data: every offset once, only what manifests list is visible; the tables are right
    totals = oracle(f"{root}/raw", broker.bootstrap, storage=storage)
    assert totals["rows"] + totals["quarantined"] == len(events) and totals["seqs"] == [1, 2]
    assert _hourly(_current(path, storage, "hourly_page_views")) == expected_hourly_pages(events)
    assert {r["dt"] for r in _current(path, storage, "user_sessions")} == {"2026-05-04"}

    # the tools, without Spark, over WebHDFS
    status = run_cli("status", str(path), "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["last_run"]["seq"] == 2
    offsets = run_cli("offsets", str(path), "--json")
    assert offsets.returncode == 0, offsets.stderr
    assert sum(item["offset"] for item in json.loads(offsets.stdout)) == len(events)
    report = run_cli("report", str(path), "--json")
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout)["run"]["seq"] == 2
    html = run_cli("report", str(path))
    assert html.returncode == 0 and f"{root}/raw/_pipeline/reports/0000000002.html" in html.stdout, html.stderr
    assert storage.read_bytes(f"{root}/raw/_pipeline/reports/0000000002.html").startswith(b"<!")

    # a replay from the middle of the first run: a new generation, switched by its manifest alone.
    # The files the rewind cuts are rewritten with the rows before it, in the form Spark wrote them
    manifest = Replay(load_spec(path), spark).run(RewindTarget(offsets={k: v // 2 for k, v in first_end.items()}))
    assert (manifest.kind, manifest.generation, manifest.seq) == ("replay", 1, 3)
    where = run_cli("location", str(path), "--output", "hourly_page_views")
    assert where.stdout.strip() == f"{root}/warehouse/hourly_page_views/_generations/000001", where.stderr
    assert _hourly(_current(path, storage, "hourly_page_views")) == expected_hourly_pages(events)
    generation_0 = published_rows(storage, f"{root}/warehouse/hourly_page_views")
    assert _hourly(generation_0) == expected_hourly_pages(events), "generation 0 is whole until gc"

    collected = run_cli("gc", str(path))
    assert collected.returncode == 0, collected.stderr
    assert f"deleted {root}/raw/dt=2026-05-04" in collected.stdout
    assert f"deleted {root}/warehouse/user_sessions/dt=2026-05-04" in collected.stdout
    assert not [e for e in storage.list(f"{root}/raw") if e.name.startswith("dt=")]
    assert published_rows(storage, f"{root}/warehouse/hourly_page_views") == []
    assert _hourly(_current(path, storage, "hourly_page_views")) == expected_hourly_pages(events)
    state = PipelineState(storage, f"{root}/raw")
    offsets: Counter[tuple[str, int, int]] = Counter()
    for manifest in state.generation_manifests():  # generation 1: the replay's files and the load's kept ones
        for item in manifest.files:
            table = pq.read_table(pa.BufferReader(storage.read_bytes(state.path(item.path))))
            offsets.update(zip(*(table[c].to_pylist() for c in ("topic", "partition", "offset")), strict=True))
    assert set(offsets.values()) == {1} and len(offsets) == len(events), "every message once in generation 1"

    # a second replay dies before its commit; `rewind --abandon` (over WebHDFS) drops what it wrote
    published = _current(path, storage, "hourly_page_views")
    crashed = run_cli(
        "rewind", str(path), "--to-run", state.manifest(1).run_id, env={"PIPELINES_CRASH_AT": "replay.before_commit"}
    )
    assert crashed.returncode == 137, crashed.stderr[-2000:]
    assert storage.exists(f"{root}/raw/_generations/000002")
    assert _current(path, storage, "hourly_page_views") == published
    dropped = run_cli("rewind", str(path), "--abandon")
    assert dropped.returncode == 0 and "dropped the replay to run" in dropped.stdout, dropped.stderr
    assert not storage.exists(f"{root}/raw/_generations/000002")
    assert not storage.exists(f"{root}/warehouse/hourly_page_views/_generations/000002")
    assert PipelineState(storage, f"{root}/raw").pending_plan() is None
    assert PipelineRun(load_spec(path), spark).run().status == "up-to-date"  # scheduled runs go on
    assert _hourly(_current(path, storage, "hourly_page_views")) == expected_hourly_pages(events)


def _committed_files(storage: WebHdfsStorage, raw: str) -> set[str]:
    state = PipelineState(storage, raw)
    return {item.path for seq in state.committed_seqs() for item in state.manifest(seq).files}


def test_readers_listing_while_a_load_writes_see_only_whole_committed_files(
    tmp_path: Path, broker: BrokerProcess, spark: Any, hadoop: HadoopCluster
) -> None:
    """While a load writes (its files open on HDFS, their length still growing), a reader lists the
    raw layer again and again: every Parquet file it finds outside ``_pipeline`` is listed by a
    committed manifest and reads whole. The NameNode confirms files were open while it listed."""
    root = hdfs_directory(hadoop, "listing")
    raw = f"{root}/raw"
    produce(broker.bootstrap, "events", 3000)
    source = {"bootstrap": broker.bootstrap, "fetch_max_bytes": 1024}  # small fetches: a long write
    path = move_to_hdfs(write_spec(tmp_path, broker.bootstrap, tmp_path / "raw", source=source), hadoop, root)
    storage = webhdfs(hadoop)
    assert PipelineRun(load_spec(path), spark).run().status == "committed"
    open_while_listing: set[str] = set()
    problems: list[str] = []

    def read_while_loading(stop: threading.Event) -> None:
        reader = webhdfs(hadoop)
        while not stop.is_set():
            open_while_listing.update(hadoop.open_files(raw))
            committed = _committed_files(reader, raw)
            for item in reader.walk_files(raw):
                relative = item.path[len(raw) + 1 :]
                if relative.startswith("_pipeline/") or not relative.endswith(".parquet"):
                    continue
                if relative not in committed and relative not in _committed_files(reader, raw):
                    problems.append(f"visible before its manifest: {relative}")
                try:
                    pq.read_table(pa.BufferReader(reader.read_bytes(item.path)))
                except Exception as exc:  # any failure to read a visible file is the finding
                    problems.append(f"{relative}: unreadable: {exc}")

    # a load, with the reader listing throughout, until the reader has caught a write in progress
    # (a busy machine can finish one load between two listings; three loads never did)
    loads = 0
    while loads < 3 and not [f for f in open_while_listing if "/_pipeline/staging/" in f]:
        produce(broker.bootstrap, "events", 3000, first=3000 * (loads + 1))
        stop = threading.Event()
        reader = threading.Thread(target=read_while_loading, args=(stop,))
        reader.start()
        try:
            status = PipelineRun(load_spec(path), spark).run().status
        finally:
            stop.set()
            reader.join(60)
        loads += 1
        assert status == "committed"
        assert not problems, problems[:5]
    assert [f for f in open_while_listing if "/_pipeline/staging/" in f], "the reader never overlapped a write"
    totals = oracle(raw, broker.bootstrap, storage=storage)
    assert totals["rows"] == 3000 * (loads + 1) and totals["seqs"] == list(range(1, loads + 2))
    assert hadoop.open_files(root) == [], "a lease outlived the run"
