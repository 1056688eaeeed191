"""A hanging transaction, on kafkalog and on Kafka 4.x: a producer begins a transaction and goes
silent. Behind it another producer commits. A read-committed consumer and the loader both stop at
the last stable offset (the hanging transaction's first offset), the report and ``pipelines status``
name the split held back; once the coordinator aborts the transaction at its timeout, both go on and
load the records committed behind it, and never the hanging one's."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import confluent_kafka
import pyarrow.parquet as pq
import pytest

from kafkalog.client import Admin, SimpleConsumer
from pipelines.config.pipeline import load_spec
from pipelines.ingest.run import PipelineRun
from pipelines.ledger.state import PipelineState
from pipelines.reporting.report import build_report
from pipelines.storage import LocalStorage
from tests.pipelines.harness import oracle, write_spec

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TIMEOUT_MS = 15_000
"""The hanging producer's transaction.timeout.ms."""


def _producer(bootstrap: str, timeout_ms: int = 60_000) -> Any:
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"hang-{uuid.uuid4().hex[:8]}",
            "transaction.timeout.ms": timeout_ms,
            "linger.ms": 0,
        }
    )
    producer.init_transactions(30)
    return producer


def _committed_values(bootstrap: str, topic: str) -> list[bytes]:
    with SimpleConsumer(bootstrap, isolation="read_committed") as consumer:
        end = consumer.latest_offset(topic, 0)
        return [m.value or b"" for m in consumer.messages(topic, 0, 0, end)]


def _loaded(raw: Path) -> list[int]:
    state = PipelineState(LocalStorage(), str(raw))
    values = []
    for manifest in state.generation_manifests():
        for item in manifest.files:
            if item.kind == "data":
                values += pq.read_table(state.path(item.path), columns=["user_id"]).column("user_id").to_pylist()
    return sorted(values)


def _event(i: int) -> bytes:
    return b'{"user_id": %d, "event": "click", "amount": 1.0, "ts": "2026-11-21T08:00:00Z"}' % i


@pytest.mark.parametrize("peer", ["kafkalog_shared", "kafka4"])
def test_a_hanging_transaction_holds_readers_at_the_lso_until_its_timeout(
    tmp_path: Path, request: pytest.FixtureRequest, spark: Any, peer: str
) -> None:
    bootstrap = request.getfixturevalue(peer).bootstrap
    topic = f"hang-{uuid.uuid4().hex[:8]}"
    with Admin(bootstrap) as admin:
        admin.create_topic(topic, 1, configs={"retention.ms": "-1"})
    before = _producer(bootstrap)
    before.begin_transaction()
    for i in range(3):
        before.produce(topic, _event(i), partition=0)
    before.commit_transaction(30)  # offsets 0-2, marker 3
    hanging = _producer(bootstrap, TIMEOUT_MS)
    hanging.begin_transaction()
    for i in range(100, 105):
        hanging.produce(topic, _event(i), partition=0)
    hanging.flush(30)  # offsets 4-8 appended, the transaction left open
    behind = _producer(bootstrap)
    behind.begin_transaction()
    for i in range(10, 14):
        behind.produce(topic, _event(i), partition=0)
    behind.commit_transaction(30)  # offsets 9-12, marker 13: committed, but behind the open transaction
    opened = time.monotonic()

    assert _committed_values(bootstrap, topic) == [_event(i) for i in range(3)]
    raw = tmp_path / "raw"
    spec = load_spec(write_spec(tmp_path, bootstrap, raw, topics=[topic], event_time={}))
    first = PipelineRun(spec, spark).run().manifest
    assert first is not None
    (split,) = first.splits
    assert (split.end, split.rows, split.control) == (4, 3, 1), split
    held = build_report(spec, PipelineState(LocalStorage(), str(raw)), first.seq)["held_back"]
    assert [(h["split"], h["last_stable_offset"]) for h in held] == [(f"{topic}-0", 4)]
    assert time.monotonic() - opened < TIMEOUT_MS / 1000, "the load took longer than the timeout: nothing shown"

    deadline = time.monotonic() + 60
    while len(_committed_values(bootstrap, topic)) < 7:  # the coordinator aborts it at its timeout
        assert time.monotonic() < deadline, "the hanging transaction was never aborted"
        time.sleep(0.2)
    assert _committed_values(bootstrap, topic) == [_event(i) for i in (0, 1, 2, 10, 11, 12, 13)]
    second = PipelineRun(spec, spark).run().manifest
    assert second is not None
    (split,) = second.splits
    assert (split.start, split.end, split.rows, split.aborted, split.control) == (4, 15, 4, 5, 2), split
    assert _loaded(raw) == [0, 1, 2, 10, 11, 12, 13]
    oracle(raw, bootstrap)
    # reading uncommitted: the aborted records too, never a marker (skipped and counted as such)
    everything = load_spec(
        write_spec(tmp_path, bootstrap, tmp_path / "raw-all", name="everything", topics=[topic], event_time={},
                   source={"bootstrap": bootstrap, "isolation": "read_uncommitted"})
    )  # fmt: skip
    whole = PipelineRun(everything, spark).run().manifest
    assert whole is not None
    (split,) = whole.splits
    assert (split.end, split.rows, split.quarantined, split.aborted, split.control) == (15, 12, 0, 0, 3), split
    assert _loaded(tmp_path / "raw-all") == [0, 1, 2, 10, 11, 12, 13, 100, 101, 102, 103, 104]
    with pytest.raises(confluent_kafka.KafkaException):  # the hanging producer was fenced
        hanging.commit_transaction(10)
    del before, hanging, behind  # librdkafka's threads end with their producers, before the broker
