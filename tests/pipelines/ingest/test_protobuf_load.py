"""A load of a Protobuf topic end to end: a real kafkalog broker, Spark local[2,4], schemas from a
registry over HTTP, values framed by confluent-kafka's own ProtobufSerializer, written with two
versions of the subject's schema.

The registry is kafkalog's own, served from the test process (tests.support.registry_in_process),
holding what the Python serializer registers: the base64 FileDescriptorProto of the message's file.
The serializer runs with ``use.latest.version`` (the test registers each version itself, to know its
id), so the values of each version are produced while it is the latest. The
message read is the file's second (``registry.record``), so the values carry message indexes
``[1]``. Checked: every offset once (the oracle), v1 and v2 values read by field number into v2's
columns, the columns' types as Spark reads them, and the bad values quarantined with their reasons."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import uuid
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import message_factory

from kafkalog.client import Admin, Producer
from kafkalog.schemas.wire import frame
from pipelines.config.pipeline import load_spec
from pipelines.executor.rows import spark_ddl
from pipelines.ingest.run import PipelineRun
from pipelines.schemas.protobuf_columns import protobuf_columns
from pipelines.schemas.resolved import spec_schemas
from tests.pipelines.harness import oracle, write_spec
from tests.support.kafkalog import BrokerProcess
from tests.support.registry_in_process import LocalRegistry

pytestmark = pytest.mark.slow

HEAD = """syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
message Other { string x = 1; }
"""
V1 = (
    HEAD
    + """message Order {
  enum Channel { WEB = 0; APP = 1; }
  message Line { string sku = 1; int32 qty = 2; }
  int64 id = 1; int32 qty = 2; string note = 3; google.protobuf.Timestamp at = 4; Channel channel = 5;
  repeated Line lines = 6; map<string, int64> tags = 7; uint64 big = 8;
  oneof pay { string card = 9; int64 cash = 10; }
}
"""
)
V2 = (
    HEAD
    + """message Order {
  enum Channel { WEB = 0; APP = 1; }
  message Line { string sku = 1; int32 qty = 2; }
  reserved 3;
  int64 id = 1; int32 qty = 2; google.protobuf.Timestamp at = 4; Channel channel = 5;
  repeated Line lines = 6; map<string, int64> tags = 7; uint64 big = 8;
  oneof pay { string card = 9; int64 cash = 10; }
  optional string coupon = 11; google.protobuf.Int32Value rating = 12;
}
"""
)
AT = dt.datetime(2026, 11, 28, 9, 30, 0, 250_000, tzinfo=dt.UTC)


def order_class(text: str) -> Any:
    return message_factory.GetMessageClass(protobuf_columns(text, message="shop.Order").descriptor)


def registered(cls: Any) -> str:
    """What confluent-kafka's ProtobufSerializer registers: its message's file, base64."""
    return base64.b64encode(cls.DESCRIPTOR.file.serialized_pb).decode()


def serializer(client: SchemaRegistryClient, cls: Any) -> Any:
    return ProtobufSerializer(cls, client, {"auto.register.schemas": False, "use.latest.version": True})


def fill(message: Any, i: int) -> Any:
    message.id, message.qty, message.channel, message.big = i, i % 5, i % 2, 2**64 - 1 - i
    message.at.FromDatetime(AT)
    message.lines.add(sku=f"s{i}", qty=1)
    message.tags["k"] = i
    if i % 3:
        message.card = f"c{i}"
    return message


@pytest.mark.parametrize("writer", ["tasks", "spark"])
def test_a_protobuf_topic_from_the_python_serializer_loads_into_the_latest_version(
    tmp_path: Path, kafkalog_shared: BrokerProcess, spark: Any, writer: str
) -> None:
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    subject = f"{topic}-value"
    ctx = SerializationContext(topic, MessageField.VALUE)
    bootstrap = kafkalog_shared.bootstrap
    with Admin(bootstrap) as admin:
        admin.create_topic(topic, 2)
    with LocalRegistry() as sr, SchemaRegistryClient({"url": sr.url}) as client:
        old, new = order_class(V1), order_class(V2)
        v1 = sr.register(subject, registered(old), "PROTOBUF")
        to_v1 = serializer(client, old)
        values = [to_v1(fill(old(note="gone"), i), ctx) for i in range(0, 200, 2)]
        v2 = sr.register(subject, registered(new), "PROTOBUF")
        client.clear_latest_caches()  # the serializer asks for the latest version again
        to_v2 = serializer(client, new)
        for i in range(1, 200, 2):
            message = fill(new(), i)
            if i % 4 == 1:
                message.coupon = ""  # present: "" and not null
                message.rating.value = i
            values.append(to_v2(message, ctx))
        assert {v[1:5] for v in values} == {v1.to_bytes(4, "big"), v2.to_bytes(4, "big")}
        assert all(v[5:7] == b"\x02\x02" for v in values)  # message indexes [1]: shop.Order
        with Producer(bootstrap) as producer:
            for i, value in enumerate(values):
                producer.send(topic, value, key=f"order-{i}".encode())
            producer.send(topic, b'{"id": 1}', key=b"json")
            producer.send(topic, frame(99, b"", [1]), key=b"unknown")
            producer.send(topic, frame(v2, b"\x0a\x01x", [0]), key=b"other")  # shop.Other
            producer.send(topic, frame(v2, b"\x08\x96", [1]), key=b"truncated")  # id: a varint cut short
            producer.flush()
        decoder = {"format": "protobuf", "registry": {"urls": [sr.url], "record": "shop.Order"}}
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
        assert (totals["rows"], totals["quarantined"]) == (200, 4)
        schemas = spec_schemas(spec, [topic], result.manifest.schemas)
        assert schemas is not None
        assert result.manifest.schemas["values"][topic] == {"subject": subject, "version": 2, "id": v2}
        frame_ = spark.read.schema(spark_ddl(spec.decoder, schemas)).parquet(
            *[str(tmp_path / "raw" / f.path) for f in result.manifest.files if f.kind == "data"]
        )
    types = dict(frame_.dtypes)
    assert {k: types[k] for k in ("id", "qty", "at", "channel", "lines", "tags", "big", "card", "cash", "coupon",
                                  "rating")} == {
        "id": "bigint", "qty": "int", "at": "timestamp", "channel": "string",
        "lines": "array<struct<sku:string,qty:int>>", "tags": "map<string,bigint>", "big": "decimal(20,0)",
        "card": "string", "cash": "bigint", "coupon": "string", "rating": "int",
    }  # fmt: skip
    assert "note" not in types
    rows = {r["id"]: r.asDict(recursive=True) for r in frame_.collect()}
    assert sorted(rows) == list(range(200))
    v1_row, v2_row = rows[4], rows[5]
    assert (v1_row["qty"], v1_row["channel"], v1_row["coupon"], v1_row["rating"]) == (4, "WEB", None, None)
    assert (v1_row["card"], v1_row["cash"], v1_row["big"]) == ("c4", None, decimal.Decimal(2**64 - 5))
    assert (v2_row["coupon"], v2_row["rating"], v2_row["channel"]) == ("", 5, "APP")
    assert v2_row["lines"] == [{"sku": "s5", "qty": 1}] and v2_row["tags"] == {"k": 5}
    assert rows[6]["card"] is None and rows[7]["rating"] is None
    assert v1_row["at"].replace(tzinfo=None) == AT.astimezone().replace(tzinfo=None)  # Spark's session zone
    files = [f.path for f in result.manifest.files if f.kind == "data"]
    assert all("dt=2026-11-28/hour=09" in path for path in files)  # the event time from the payload
    quarantined = [f for f in result.manifest.files if f.kind == "quarantine"]
    reasons = sorted(r["reason"] for f in quarantined for r in pq.read_table(tmp_path / "raw" / f.path).to_pylist())
    assert reasons[0].startswith("corrupt Protobuf payload")
    assert reasons[1:] == [
        "message indexes [0] name shop.Other, not the reader's shop.Order",
        "unknown schema id 99",
        "wrong magic byte 0x7b",
    ]
