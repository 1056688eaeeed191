"""Schema'd topics end to end with every peer real: values written by confluent-kafka's own
serializers (AvroSerializer, JSONSerializer, ProtobufSerializer, registering their schemas as
producers do) against
``kafkalog registry``, which keeps its state on the same cluster; the topics on kafkalog and on
Apache Kafka 4.x; loaded by ``PipelineRun`` through a schema evolution (v1; v2 adds a field with a
default; v3 removes one), the second load's driver killed mid-run and run again.

Checked per broker and format: every offset exactly once (the oracle), each run's columns as its
reader schema says (the added column filled with its default for older values, the removed one no
longer read), the values as the producer sent them, the reader schema each manifest recorded
(subject, version, id as the registry numbered them)."""

from __future__ import annotations

import json
import os
import random
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import pyarrow.parquet as pq
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from kafkalog.client import Admin
from pipelines import faults
from pipelines.config.pipeline import PipelineSpec, load_spec
from pipelines.ingest.run import PipelineRun
from pipelines.ledger.state import PipelineState
from pipelines.storage import LocalStorage
from tests.pipelines.harness import oracle, run_cli, start_run, write_spec
from tests.support.kafka4 import Kafka4Process
from tests.support.kafkalog import BrokerProcess
from tests.support.schema_registry import RegistryProcess, protobuf_class

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# ------------------------------------------------------------------ the schemas, three versions

AVRO_V1 = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "qty", "type": "int"},
        {"name": "note", "type": "string"},
    ],
}
AVRO_V2 = {**AVRO_V1, "fields": [*AVRO_V1["fields"], {"name": "channel", "type": "string", "default": "web"}]}
AVRO_V3 = {**AVRO_V1, "fields": [f for f in AVRO_V2["fields"] if f["name"] != "note"]}


def _json_schema(*properties: str, closed: bool = True) -> dict[str, Any]:
    types = {"id": "integer", "qty": "integer", "note": "string", "channel": "string"}
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Order",
        "type": "object",
        "additionalProperties": not closed,
        "properties": {name: {"type": types[name]} for name in properties},
        "required": ["id"],
    }


# Backward compatibility in JSON Schema, as Confluent's registry judges it: a property is added to
# a closed model (an open one may already hold it with another type), and removed by opening the
# model (a closed one would refuse the older values that still carry it).
JSON_V1 = _json_schema("id", "qty", "note")
JSON_V2 = _json_schema("id", "qty", "note", "channel")
JSON_V3 = _json_schema("id", "qty", "channel", closed=False)

PROTO_V1 = (
    'syntax = "proto3";\npackage shop;\nmessage Order {\n  int64 id = 1;\n  int32 qty = 2;\n  string note = 3;\n}\n'
)
PROTO_V2 = PROTO_V1.replace("  string note = 3;\n", "  string note = 3;\n  string channel = 4;\n")
PROTO_V3 = PROTO_V2.replace("  string note = 3;\n", "  reserved 3;\n")

VERSIONS: dict[str, tuple[Any, Any, Any]] = {
    "avro": (AVRO_V1, AVRO_V2, AVRO_V3),
    "json_schema": (JSON_V1, JSON_V2, JSON_V3),
    "protobuf": (PROTO_V1, PROTO_V2, PROTO_V3),
}
OLDER_VALUES_CHANNEL = {"avro": "web", "json_schema": None, "protobuf": ""}
"""What a v1 value reads as in v2's ``channel``: Avro's reader default; null where JSON Schema has no
field; Protobuf's proto3 default (a scalar without ``optional`` is never null)."""


def record(version: int, i: int) -> dict[str, Any]:
    """The i-th order as written with schema version ``version`` (1, 2 or 3)."""
    out: dict[str, Any] = {"id": i, "qty": i % 7}
    if version < 3:
        out["note"] = f"n{i}"
    if version > 1:
        out["channel"] = "app" if i % 2 else "shop"
    return out


# ------------------------------------------------------------------ the peers


class Cluster:
    """A broker and a ``kafkalog registry`` keeping its state on it."""

    def __init__(self, name: str, bootstrap: str, registry: RegistryProcess) -> None:
        self.name = name
        self.bootstrap = bootstrap
        self.registry = registry


@pytest.fixture(scope="module")
def clusters(
    tmp_path_factory: pytest.TempPathFactory, kafkalog_shared: BrokerProcess, kafka4: Kafka4Process
) -> Iterator[dict[str, Cluster]]:
    """A registry on each of the session's brokers, each in a topic and group of its own."""
    directory = tmp_path_factory.mktemp("registries")
    suffix = uuid.uuid4().hex[:8]
    started: dict[str, Cluster] = {}
    try:
        for name, bootstrap in (("kafkalog", kafkalog_shared.bootstrap), ("kafka4", kafka4.bootstrap)):
            registry = RegistryProcess(
                directory, name, bootstrap=bootstrap, topic=f"_schemas-{suffix}", group=f"registry-{suffix}"
            ).start()
            started[name] = Cluster(name, bootstrap, registry)
        yield started
    finally:
        for cluster in started.values():
            cluster.registry.stop()


def produce(cluster: Cluster, topic: str, fmt: str, version: int, ids: range) -> None:
    """``ids`` as orders of schema ``version``, serialized (and the schema registered) by
    confluent-kafka's serializer for ``fmt``, sent by librdkafka."""
    schema = VERSIONS[fmt][version - 1]
    with SchemaRegistryClient({"url": cluster.registry.url}) as client:
        if fmt == "avro":
            serialize = AvroSerializer(client, json.dumps(schema))
        elif fmt == "json_schema":
            serialize = JSONSerializer(json.dumps(schema), client)
        else:
            order = protobuf_class(schema, "shop.Order")
            to_bytes = ProtobufSerializer(order, client, {"use.deprecated.format": False})
            serialize = lambda value, context: to_bytes(order(**value), context)  # noqa: E731
        producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 5})
        context = SerializationContext(topic, MessageField.VALUE)
        for i in ids:
            producer.produce(topic, key=b"%d" % i, value=serialize(record(version, i), context))
        assert producer.flush(30) == 0


def spec_for(tmp_path: Path, cluster: Cluster, topic: str, fmt: str) -> PipelineSpec:
    decoder = {"format": fmt, "registry": {"urls": [cluster.registry.url]}}
    return load_spec(
        write_spec(
            tmp_path,
            cluster.bootstrap,
            tmp_path / "raw",
            name=f"orders_{fmt}",
            topics=[topic],
            decoder=decoder,
            event_time={},
            bad_records={"policy": "fail"},
            raw_options={"writer": "tasks"},
        )
    )


def committed_columns(raw: Path, seq: int) -> tuple[set[str], list[dict[str, Any]]]:
    """The payload columns the files of run ``seq`` hold, and their rows."""
    manifest = PipelineState(LocalStorage(), str(raw)).manifest(seq)
    tables = [pq.read_table(raw / f.path) for f in manifest.files if f.kind == "data"]
    assert tables, f"run {seq} wrote no data file"
    names = set(tables[0].schema.names)
    assert all(set(t.schema.names) == names for t in tables), "one run's files share one schema"
    rows = [row for table in tables for row in table.to_pylist()]
    return names & {"id", "qty", "note", "channel"}, rows


# ------------------------------------------------------------------ the test


@pytest.mark.parametrize("fmt", ["avro", "json_schema", "protobuf"])
@pytest.mark.parametrize("broker", ["kafkalog", "kafka4"])
def test_a_topic_through_three_schema_versions_loads_every_record_once_into_each_runs_columns(
    tmp_path: Path, clusters: dict[str, Cluster], spark: Any, broker: str, fmt: str
) -> None:
    cluster = clusters[broker]
    topic = f"orders.{fmt}.{uuid.uuid4().hex[:8]}"
    with Admin(cluster.bootstrap) as admin:
        admin.create_topic(topic, 2)
    spec = spec_for(tmp_path, cluster, topic, fmt)
    raw = tmp_path / "raw"

    # v1: the first run reads v1's columns
    produce(cluster, topic, fmt, 1, range(60))
    first = PipelineRun(spec, spark).run()
    assert first.status == "committed" and first.manifest is not None
    subject = f"{topic}-value"
    recorded = first.manifest.schemas
    assert json.dumps(recorded).count(subject) >= 1 and '"version": 1' in json.dumps(recorded)
    columns, rows = committed_columns(raw, 1)
    assert columns == {"id", "qty", "note"}
    assert sorted((r["id"], r["qty"], r["note"]) for r in rows) == [(i, i % 7, f"n{i}") for i in range(60)]

    # v2 adds channel (default "web"): the second run's driver dies with its splits staged, the
    # task workers killed after 10 rows each before that; the run again commits them once
    produce(cluster, topic, fmt, 1, range(60, 80))
    produce(cluster, topic, fmt, 2, range(80, 140))
    with faults.simulated_crash("load.after_staging"), pytest.raises(faults.Crash):
        PipelineRun(spec, spark, task_faults="exit_after_rows@10").run()
    second = PipelineRun(spec, spark).run()
    assert second.status == "committed" and second.manifest is not None
    assert '"version": 2' in json.dumps(second.manifest.schemas)
    columns, rows = committed_columns(raw, 2)
    assert columns == {"id", "qty", "note", "channel"}
    expected = [(i, f"n{i}", OLDER_VALUES_CHANNEL[fmt]) for i in range(60, 80)]
    expected += [(i, f"n{i}", "app" if i % 2 else "shop") for i in range(80, 140)]
    assert sorted((r["id"], r["note"], r["channel"]) for r in rows) == expected

    # v3 removes note: the third run no longer reads it
    produce(cluster, topic, fmt, 3, range(140, 170))
    third = PipelineRun(spec, spark).run()
    assert third.status == "committed" and third.manifest is not None
    assert '"version": 3' in json.dumps(third.manifest.schemas)
    columns, rows = committed_columns(raw, 3)
    assert "channel" in columns and {"id", "qty"} <= columns
    assert sorted((r["id"], r["channel"]) for r in rows) == [(i, "app" if i % 2 else "shop") for i in range(140, 170)]
    assert all(r.get("note") is None for r in rows)

    assert PipelineRun(spec, spark).run().status == "up-to-date"
    totals = oracle(raw, cluster.bootstrap)
    assert (totals["rows"], totals["quarantined"]) == (170, 0)


def test_avro_loads_sigkilled_at_random_instants_leave_every_record_once(
    tmp_path: Path, clusters: dict[str, Cluster]
) -> None:
    """A ``pipelines run`` driver (its own Spark) killed with SIGKILL at a random moment while it
    plans, fetches and decodes Avro, commits or publishes; then runs until up to date: every record
    once, the values as written, whichever run read them. (Every crash point of the commit protocol
    is tested by name elsewhere; this is the instant nobody chose.)"""
    cluster = clusters["kafkalog"]
    topic = f"orders.killed.{uuid.uuid4().hex[:8]}"
    with Admin(cluster.bootstrap) as admin:
        admin.create_topic(topic, 3)
    produce(cluster, topic, "avro", 1, range(3000))
    produce(cluster, topic, "avro", 2, range(3000, 6000))
    spec = write_spec(
        tmp_path,
        cluster.bootstrap,
        tmp_path / "raw",
        name="orders_killed",
        topics=[topic],
        decoder={"format": "avro", "registry": {"urls": [cluster.registry.url]}},
        event_time={},
        bad_records={"policy": "fail"},
        raw_options={"writer": "tasks"},
    )
    load = start_run(spec, tmp_path / "killed.log")
    time.sleep(random.Random().uniform(4.0, 18.0))  # from the driver's start to its end, on this machine
    os.killpg(load.pid, signal.SIGKILL)
    load.wait(30)
    said = ""
    for _ in range(3):  # a run finishes what the killed one stored first; the next finds nothing new
        final = run_cli("run", str(spec), "--master", "local[2]", timeout=600)
        said += final.stdout + final.stderr
        assert final.returncode == 0, said[-3000:]
        if "up to date" in final.stdout + final.stderr:
            break
    else:
        raise AssertionError(f"three runs did not bring the pipeline up to date: {said[-3000:]}")
    raw = tmp_path / "raw"
    totals = oracle(raw, cluster.bootstrap)
    assert (totals["rows"], totals["quarantined"]) == (6000, 0)
    rows = [
        r for path in raw.rglob("*.parquet") if "_pipeline" not in path.parts for r in pq.read_table(path).to_pylist()
    ]
    assert sorted(r["id"] for r in rows) == list(range(6000))
    assert all(r["note"] == f"n{r['id']}" and r["qty"] == r["id"] % 7 for r in rows)
