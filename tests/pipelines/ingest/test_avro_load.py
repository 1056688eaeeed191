"""A load of an Avro topic end to end: a real kafkalog broker, Spark local[2,4], schemas from a
registry over HTTP, values framed as Confluent's AvroSerializer frames them, written with two
versions of the subject's schema.

The registry is kafkalog's own, served from this process (tests.support.registry_in_process).
Checked: every offset once (the oracle), v1 and v2 values read into v2's columns, the columns'
types as Spark reads them, the bad values quarantined with their reasons, the first registry
address that does not answer skipped, and a registry that answers not at all stopping the run
before Spark starts."""

from __future__ import annotations

import datetime as dt
import decimal
import io
import socket
import uuid
from pathlib import Path
from typing import Any

import fastavro
import pyarrow.parquet as pq
import pytest

from kafkalog.client import Admin, Producer
from kafkalog.schemas.wire import frame
from pipelines.app.runner import check_schemas
from pipelines.config.pipeline import load_spec
from pipelines.errors import SchemaRegistryError
from pipelines.executor.rows import spark_ddl
from pipelines.ingest.run import PipelineRun
from pipelines.schemas.resolved import spec_schemas
from tests.pipelines.harness import oracle, write_spec
from tests.support.kafkalog import BrokerProcess
from tests.support.registry_in_process import LocalRegistry

pytestmark = pytest.mark.slow

V1 = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "qty", "type": "int"},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "note", "type": "string"},
    ],
}
CHANNEL = {"type": "enum", "name": "Channel", "symbols": ["WEB", "APP"]}
V2 = {  # note removed, qty promoted to long, channel added with a default
    **V1,
    "fields": [
        V1["fields"][0],
        {"name": "qty", "type": "long"},
        V1["fields"][2],
        V1["fields"][3],
        {"name": "channel", "type": ["null", CHANNEL], "default": None},
    ],
}
AT = dt.datetime(2026, 11, 28, 9, 30, tzinfo=dt.UTC)


def avro(schema: Any, record: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def closed_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


@pytest.mark.parametrize("writer", ["tasks", "spark"])
def test_an_avro_topic_written_with_two_schema_versions_loads_into_the_latest(
    tmp_path: Path, kafkalog_shared: BrokerProcess, spark: Any, writer: str
) -> None:
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    with LocalRegistry() as sr:
        v1, v2 = sr.register(f"{topic}-value", V1), sr.register(f"{topic}-value", V2)
        bootstrap = kafkalog_shared.bootstrap
        with Admin(bootstrap) as admin:
            admin.create_topic(topic, 2)
        with Producer(bootstrap) as producer:
            for i in range(300):
                amount = decimal.Decimal(i) / 4
                if i % 2:
                    value = frame(v1, avro(V1, {"id": i, "qty": i, "amount": amount, "at": AT, "note": "n"}))
                else:
                    record = {"id": i, "qty": 2**40 + i, "amount": amount, "at": AT, "channel": "APP"}
                    value = frame(v2, avro(V2, record))
                producer.send(topic, value, key=f"order-{i}".encode())
            producer.send(topic, b'{"id": 1}', key=b"json")  # not Avro
            producer.send(topic, frame(99, b"\x02"), key=b"unknown")  # an id of no version
            producer.flush()
        decoder = {
            "format": "avro",
            "registry": {"urls": [closed_url(), sr.url]},  # the first does not answer: the next is asked
            "key_decoder": {"format": "string"},
        }
        spec = load_spec(
            write_spec(
                tmp_path,
                bootstrap,
                tmp_path / "raw",
                topics=[topic],
                decoder=decoder,
                event_time={"field": "at"},
                bad_records={"policy": "quarantine", "max_share": 0.05},
                raw_options={"writer": writer},
            )
        )
        result = PipelineRun(spec, spark).run()
        assert result.status == "committed" and result.manifest is not None
        totals = oracle(tmp_path / "raw", bootstrap)
        assert (totals["rows"], totals["quarantined"]) == (300, 2)
        schemas = spec_schemas(spec, [topic], result.manifest.schemas)
        assert schemas is not None
        frame_ = spark.read.schema(spark_ddl(spec.decoder, schemas)).parquet(
            *[str(tmp_path / "raw" / f.path) for f in result.manifest.files if f.kind == "data"]
        )
    types = dict(frame_.dtypes)
    assert (types["id"], types["qty"], types["amount"], types["at"], types["channel"]) == (
        "bigint", "bigint", "decimal(9,2)", "timestamp", "string",
    )  # fmt: skip
    assert "note" not in types and types["key_decoded"] == "string"
    rows = {r["id"]: r for r in frame_.collect()}
    assert len(rows) == 300
    assert (rows[3]["qty"], rows[3]["channel"], rows[3]["amount"]) == (3, None, decimal.Decimal("0.75"))
    assert (rows[4]["qty"], rows[4]["channel"], rows[4]["key_decoded"]) == (2**40 + 4, "APP", "order-4")
    files = [f.path for f in result.manifest.files if f.kind == "data"]
    assert all("dt=2026-11-28/hour=09" in path for path in files)  # the event time from the payload
    quarantined = [f for f in result.manifest.files if f.kind == "quarantine"]
    reasons = sorted(r["reason"] for f in quarantined for r in pq.read_table(tmp_path / "raw" / f.path).to_pylist())
    assert reasons == ["unknown schema id 99", "wrong magic byte 0x7b"]


def test_a_registry_that_does_not_answer_stops_the_run_before_spark_starts(tmp_path: Path) -> None:
    dead = closed_url()
    decoder = {"format": "avro", "registry": {"urls": [dead], "timeout_ms": 2000}}
    spec = load_spec(write_spec(tmp_path, "127.0.0.1:1", tmp_path / "raw", decoder=decoder, event_time={}))
    with pytest.raises(SchemaRegistryError) as caught:
        check_schemas(spec, ["events"])
    message = str(caught.value)
    assert message.startswith(f"schema registry {dead} did not answer GET /subjects/events-value/versions")
    assert message.endswith("(checked before Spark started: nothing was loaded)") and "\n" not in message
