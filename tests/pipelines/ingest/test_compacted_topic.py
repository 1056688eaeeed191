"""A compacted topic, loaded: the broker's log cleaner has removed older records of keys written
over and left gaps in the offsets (an idempotent producer's batch it emptied whole, batches it
thinned in the middle and at the end); a tombstone deletes a key. Two runs load it, the first
ending and the second beginning inside a gap; a third pipeline loads it whole, reading uncommitted,
with the raw decoder and Spark's writer. Every row must equal what a consumer reading the compacted
topic from its start sees (offsets, keys, values, the tombstone flag), every other offset must be
counted as compacted, and the recipe of docs/pipelines.md ("Reading a compacted topic") must give
the latest value of each key with the delete applied.

``broker`` names the session fixture of a broker that compacts quickly (a cleaner that looks for
work every half second: tests.support.fixtures); BROKERS lists those the test runs on.
"""

from __future__ import annotations

import itertools
import json
import re
import time
import uuid
from pathlib import Path
from typing import Any

import confluent_kafka
import pyarrow.parquet as pq
import pytest
import yaml

from kafkalog.client import Admin, SimpleConsumer
from pipelines.config.pipeline import PipelineSpec, load_spec
from pipelines.executor.rows import spark_ddl
from pipelines.ingest.run import PipelineRun
from pipelines.ledger.records import Manifest
from pipelines.ledger.state import PipelineState
from pipelines.reporting.report import build_report, write_report
from pipelines.storage import LocalStorage
from tests.pipelines.harness import REPO, oracle, write_spec

pytestmark = [pytest.mark.integration, pytest.mark.slow]

BROKERS = ("kafka4", "kafkalog_shared")
"""The session fixtures of the brokers whose cleaners compact the topic (tests.support.fixtures)."""

TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.ms": "100",  # a record appended 100 ms after a segment began starts the next one
    "min.cleanable.dirty.ratio": "0.01",  # any closed segment with a record written over is cleaned
    "min.compaction.lag.ms": "0",
}
"""The topic's tombstones stay (``delete.retention.ms`` is left at its day): the test reads them."""

WRITES: list[tuple[str, str | None, str]] = [
    *((f"k{i}", f"a{i}", "p0") for i in range(5)),  # 0-4: p0's one batch, all of it written over below
    *((f"k{i}", f"a{i}", "p1") for i in range(5, 10)),  # 5-9: k6 and k7 written over: a batch thinned
    *((f"k{i}", f"b{i}", "plain") for i in range(5)),  # 10-14: k0, k1, k4 written over: its tail goes
    ("k0", "c0", "plain"),  # 15
    ("k1", "c1", "plain"),  # 16
    ("k6", None, "plain"),  # 17: a tombstone: k6 is deleted
    ("k7", "c7", "plain"),  # 18
    ("k4", "c4", "plain"),  # 19
    ("end", "end", "plain"),  # 20: alone in the active segment, which the cleaner never touches
]
"""(key, value, producer) in offset order; None: a tombstone. p0 and p1 are idempotent producers:
Kafka keeps a batch its cleaner emptied when it is its producer's last (for the producer's
sequence), as an empty batch whose offsets a fetch steps over."""

SEGMENTS = (0, 5, 10, 15, 20)
"""Where each segment begins, each written as one batch per producer (flushed before the next
segment, which begins once segment.ms has passed)."""

SPLIT_LIMIT = 11
"""The first run loads [0, 11), whose first and last offsets the cleaner removed (0: p0's batch,
10: k0 written over at 15); the second loads [11, 21), beginning in a gap too (11: k1)."""


def _producer(bootstrap: str, idempotent: bool) -> Any:
    return confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": idempotent, "linger.ms": 5, "acks": "all"}
    )


def _produce(bootstrap: str, topic: str) -> None:
    producers = {
        "p0": _producer(bootstrap, True),
        "p1": _producer(bootstrap, True),
        "plain": _producer(bootstrap, False),
    }
    for first, end in itertools.pairwise([*SEGMENTS, len(WRITES)]):
        time.sleep(0.25)  # past segment.ms: this segment's first record begins a new segment
        (name,) = {name for _, _, name in WRITES[first:end]}
        for key, value, _ in WRITES[first:end]:
            producers[name].produce(
                topic, None if value is None else json.dumps({"v": value}).encode(), key.encode(), 0
            )
        producers[name].flush(30)  # in order across producers: offset == index in WRITES
    del producers  # librdkafka's threads end with their producers, before the broker does


def _survivors() -> dict[int, tuple[str, str | None]]:
    """Offset → (key, value) of each key's last record: what a fully compacted log keeps."""
    last = {key: offset for offset, (key, _, _) in enumerate(WRITES)}
    return {offset: (WRITES[offset][0], WRITES[offset][1]) for offset in sorted(last.values())}


def _compacted_view(bootstrap: str, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record a consumer reads from the start of partition 0."""
    with SimpleConsumer(bootstrap, isolation="read_committed") as consumer:
        end = consumer.latest_offset(topic, 0)
        return [(m.offset, m.key, m.value) for m in consumer.messages(topic, 0, 0, end)]


def _wait_for_the_cleaner(bootstrap: str, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    expected = list(_survivors())
    deadline = time.monotonic() + 60
    while True:
        view = _compacted_view(bootstrap, topic)
        if [offset for offset, _, _ in view] == expected:
            return view
        assert time.monotonic() < deadline, f"the log was not compacted in 60 s: offsets {[o for o, _, _ in view]}"
        time.sleep(0.25)


def _rows(raw: Path, columns: list[str]) -> list[dict[str, Any]]:
    state = PipelineState(LocalStorage(), str(raw))
    rows = [
        row
        for manifest in state.generation_manifests()
        for item in manifest.files
        if item.kind == "data"
        for row in pq.read_table(state.path(item.path), columns=columns).to_pylist()
    ]
    return sorted(rows, key=lambda row: int(row["offset"]))


def _recipe() -> str:
    """The SQL of the ``latest_per_key`` transform docs/pipelines.md gives."""
    text = (REPO / "docs" / "pipelines.md").read_text()
    blocks = [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", text, re.S) if "latest_per_key" in b]
    assert len(blocks) == 1, "docs/pipelines.md gives one latest_per_key transform"
    (step,) = blocks[0]["transforms"]
    assert step["name"] == "latest_per_key" and step["depends_on"] == ["raw"]
    return str(step["sql"])


def _spec(tmp_path: Path, bootstrap: str, topic: str, name: str, **overrides: Any) -> PipelineSpec:
    source = {"bootstrap": bootstrap, "retry_ms": 20_000, "fetch_max_bytes": 64, **overrides.pop("source", {})}
    path = write_spec(tmp_path, bootstrap, tmp_path / name, name=name, topics=[topic], event_time={}, source=source,
                      **overrides)  # fmt: skip
    return load_spec(path)


@pytest.mark.parametrize("broker", BROKERS)
def test_a_compacted_topic_loads_as_a_consumer_reads_it_with_its_gaps_counted(
    tmp_path: Path, request: pytest.FixtureRequest, spark: Any, broker: str
) -> None:
    bootstrap = request.getfixturevalue(broker).bootstrap
    topic = f"compacted-{uuid.uuid4().hex[:8]}"
    with Admin(bootstrap) as admin:
        admin.create_topic(topic, 1, configs=TOPIC_CONFIGS)
    _produce(bootstrap, topic)
    view = _wait_for_the_cleaner(bootstrap, topic)
    removed = sorted(set(range(len(WRITES))) - set(_survivors()))
    assert {0, SPLIT_LIMIT - 1, SPLIT_LIMIT} <= set(removed)

    # JSON, read committed (the default), two runs: [0, 11) and [11, 20), a fetch of 64 bytes at a
    # time (a batch at most: the batch the cleaner emptied comes back alone)
    spec = _spec(tmp_path, bootstrap, topic, "changes", decoder={"format": "json", "schema": {"v": "string"}},
                 limits={"max_messages_per_split": SPLIT_LIMIT})  # fmt: skip
    manifests: list[Manifest] = []
    for _ in range(2):
        result = PipelineRun(spec, spark).run()
        assert result.status == "committed" and result.manifest is not None, result
        manifests.append(result.manifest)
    assert PipelineRun(spec, spark).run().status == "up-to-date"
    splits = [s for m in manifests for s in m.splits]
    assert [(s.start, s.end) for s in splits] == [(0, SPLIT_LIMIT), (SPLIT_LIMIT, len(WRITES))]
    for s in splits:
        in_split = [o for o in removed if s.start <= o < s.end]
        assert s.compacted == len(in_split) == s.end - s.start - s.rows - s.aborted - s.control, s
        assert (s.quarantined, s.aborted, s.control, s.lost_from) == (0, 0, 0, None), s
    rows = _rows(tmp_path / "changes", ["offset", "key", "v", "tombstone"])
    assert [(r["offset"], r["key"], r["v"], r["tombstone"]) for r in rows] == [
        (offset, key, None if value is None else json.loads(value)["v"], value is None) for offset, key, value in view
    ]
    assert oracle(tmp_path / "changes", bootstrap)["skipped"] == len(
        removed
    )  # every offset once, keys as on the broker
    state = PipelineState(LocalStorage(), str(tmp_path / "changes"))
    report = build_report(spec, state, 1)
    assert (report["totals"]["compacted"], report["splits"][0]["compacted"]) == (splits[0].compacted,) * 2
    _, html = write_report(spec, state, 1)
    assert re.search(r"<b>8</b>compacted away", Path(html).read_text()), "the HTML report shows the count"

    # the latest value per key, the delete applied: the recipe of docs/pipelines.md over the raw layer
    files = [state.path(f.path) for m in manifests for f in m.files if f.kind == "data"]
    spark.read.schema(spark_ddl(spec.decoder)).option("basePath", state.root).parquet(*files).createOrReplaceTempView(
        "raw"
    )
    latest = {r["key"].decode(): r["v"] for r in spark.sql(_recipe()).collect()}
    final = {key: value for key, value, _ in WRITES}
    assert latest == {key: value for key, value in final.items() if value is not None}
    assert "k6" not in latest and final["k6"] is None

    # the whole range at once, reading uncommitted (the fetch then walks batches without the
    # committed filter), the raw decoder (the values as the broker keeps them), Spark's writer
    # (the compacted ranges staged by a Spark job and reconciled with Spark)
    whole = _spec(tmp_path, bootstrap, topic, "whole", decoder={"format": "raw"},
                  source={"isolation": "read_uncommitted"}, raw_options={"writer": "spark"})  # fmt: skip
    result = PipelineRun(whole, spark).run()
    assert result.manifest is not None
    ((start, end, rows_loaded, compacted),) = [(s.start, s.end, s.rows, s.compacted) for s in result.manifest.splits]
    assert (start, end, rows_loaded, compacted) == (0, len(WRITES), len(view), len(removed))
    raw_rows = _rows(tmp_path / "whole", ["offset", "key", "value", "tombstone"])
    assert [(r["offset"], r["key"], r["value"], r["tombstone"]) for r in raw_rows] == [
        (offset, key, value, value is None) for offset, key, value in view
    ]
