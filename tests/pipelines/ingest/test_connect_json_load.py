"""A load of a topic written by Kafka Connect's JsonConverter with schemas (Kafka 4.x's connect-json,
a Java program building Connect Structs: tests/support/java/ConnectJsonProducer.java) from a real
kafkalog broker, with ``decoder.format: connect_json`` and the Connect schema the converter wrote
as the schema file. Checked: every offset once (the oracle), and each column's Spark type and each
value equal to what the Java side put in: every primitive, Decimal, Date, Time, Timestamp, an
optional field that is null, a nested struct, an array and a map."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from kafkalog.client import Admin, SimpleConsumer
from pipelines.config.pipeline import load_spec
from pipelines.executor.rows import spark_ddl
from pipelines.ingest.run import PipelineRun
from pipelines.schemas.resolved import spec_schemas
from tests.pipelines.harness import oracle, write_spec
from tests.support.kafkalog import BrokerProcess
from tests.support.registry_java import connect_json_produce, connect_value

pytestmark = [pytest.mark.integration, pytest.mark.slow]

COUNT = 40
SPARK_TYPES = {
    "i8": "tinyint", "i16": "smallint", "i32": "int", "i64": "bigint", "f32": "float", "f64": "double",
    "flag": "boolean", "name": "string", "blob": "binary", "amount": "decimal(38,2)", "day": "date",
    "at_time": "bigint", "at": "timestamp", "maybe": "string", "inner": "struct<a:string,b:int>",
    "list": "array<int>", "tags": "map<string,bigint>",
}  # fmt: skip


def _as_python(row: Any) -> dict[str, Any]:
    """A Spark row's payload columns as plain Python (structs as dicts, binary as bytes)."""
    values = row.asDict(recursive=True)
    out = {name: values[name] for name in SPARK_TYPES}
    out["blob"] = bytes(out["blob"])
    out["at"] = out["at"].astimezone(connect_value(0)["at"].tzinfo)
    return out


def test_a_topic_written_by_connects_json_converter_loads_with_its_types(
    tmp_path: Path, kafkalog_shared: BrokerProcess, spark: Any
) -> None:
    bootstrap = kafkalog_shared.bootstrap
    topic = f"connect-{uuid.uuid4().hex[:8]}"
    with Admin(bootstrap) as admin:
        admin.create_topic(topic, 1)
    assert connect_json_produce(bootstrap, topic, COUNT, tmp_path) == list(range(COUNT))
    with SimpleConsumer(bootstrap) as consumer:
        first = next(iter(consumer.messages(topic, 0, 0, 1)))
    envelope = json.loads(first.value or b"null")
    assert set(envelope) == {"schema", "payload"}
    schema_file = tmp_path / "everything.json"
    schema_file.write_text(json.dumps(envelope["schema"]))  # the Connect schema as the converter wrote it

    decoder = {"format": "connect_json", "schema_file": str(schema_file)}
    spec = load_spec(
        write_spec(tmp_path, bootstrap, tmp_path / "raw", topics=[topic], decoder=decoder, event_time={"field": "at"})
    )
    result = PipelineRun(spec, spark).run()
    assert result.status == "committed" and result.manifest is not None
    totals = oracle(tmp_path / "raw", bootstrap)
    assert (totals["rows"], totals["quarantined"]) == (COUNT, 0)

    schemas = spec_schemas(spec, [topic], result.manifest.schemas)
    loaded = spark.read.schema(spark_ddl(spec.decoder, schemas)).parquet(
        *[str(tmp_path / "raw" / f.path) for f in result.manifest.files if f.kind == "data"]
    )
    types = dict(loaded.dtypes)
    assert {name: types[name] for name in SPARK_TYPES} == SPARK_TYPES
    rows = {row["offset"]: _as_python(row) for row in loaded.collect()}
    assert sorted(rows) == list(range(COUNT))
    for i in range(COUNT):
        assert rows[i] == connect_value(i), f"record {i}"
