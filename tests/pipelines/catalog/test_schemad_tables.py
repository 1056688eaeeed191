"""A raw layer of Avro values found by name in the embedded metastore: the types schema'd payloads
bring (decimal, date, local timestamps, map, nested structs, arrays, unions as structs of members)
become a Hive table Spark SQL reads, through the CLI, as a user runs it."""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
from pathlib import Path

import fastavro
import pytest

from kafkalog.client import Admin, Producer
from tests.pipelines.harness import run_cli, write_spec
from tests.support.kafkalog import BrokerProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SCHEMA = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "tags", "type": {"type": "map", "values": "long"}},
        {"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line",
                                                              "fields": [{"name": "sku", "type": "string"}]}}},
        {"name": "either", "type": ["null", "int", "string"], "default": None},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
    ],
}  # fmt: skip


def test_an_avro_raw_layer_is_a_table_by_name(tmp_path: Path, kafkalog_shared: BrokerProcess) -> None:
    avsc = tmp_path / "order.avsc"
    avsc.write_text(json.dumps(SCHEMA))
    parsed = fastavro.parse_schema(SCHEMA)
    topic = "schemad-orders"
    bootstrap = kafkalog_shared.bootstrap
    with Admin(bootstrap) as admin:
        admin.create_topic(topic, 1)
    with Producer(bootstrap) as producer:
        for i in range(3):
            record = {
                "id": i,
                "amount": decimal.Decimal(i) + decimal.Decimal("0.25"),
                "day": dt.date(2026, 11, 28),
                "local": dt.datetime(2026, 11, 28, 10, 0, 0),
                "at": dt.datetime(2026, 11, 28, 9, 0, tzinfo=dt.UTC),
                "tags": {"t": i},
                "lines": [{"sku": f"s{i}"}],
                "either": i if i % 2 else f"x{i}",
                "kind": "B",
            }
            out = io.BytesIO()
            fastavro.schemaless_writer(out, parsed, record)
            producer.send(topic, out.getvalue(), key=str(i).encode())
        producer.flush()
    spec = write_spec(
        tmp_path, bootstrap, tmp_path / "raw", name="schemad_orders", topics=[topic],
        decoder={"format": "avro", "schema_file": str(avsc)}, event_time={"field": "at"},
        tables={"metastore": "auto"},
    )  # fmt: skip
    ran = run_cli("run", str(spec), "--master", "local[2]")
    assert ran.returncode == 0, ran.stderr[-3000:]
    query = (
        "SELECT id, amount, day, local, at, tags['t'] AS t, lines[0].sku AS sku, either.member0 AS n, "
        "either.member1 AS s, kind FROM schemad_orders_raw ORDER BY id"
    )
    asked = run_cli("sql", str(spec), query, "--json")
    assert asked.returncode == 0, asked.stderr[-3000:]
    rows = [json.loads(line) for line in asked.stdout.strip().splitlines()]
    assert [(r["id"], r["amount"], r["day"], r["t"], r["sku"], r["n"], r["s"], r["kind"]) for r in rows] == [
        (0, "0.25", "2026-11-28", 0, "s0", None, "x0", "B"),
        (1, "1.25", "2026-11-28", 1, "s1", 1, None, "B"),
        (2, "2.25", "2026-11-28", 2, "s2", None, "x2", "B"),
    ]
    assert rows[0]["local"].startswith("2026-11-28 10:00:00")  # the wall-clock time, held as that time in UTC
    described = run_cli("sql", str(spec), "DESCRIBE schemad_orders_raw", "--json")
    assert described.returncode == 0, described.stderr[-3000:]
    types = {r["col_name"]: r["data_type"] for r in map(json.loads, described.stdout.strip().splitlines())}
    assert (types["amount"], types["day"], types["local"], types["tags"]) == (
        "decimal(9,2)", "date", "timestamp", "map<string,bigint>",
    )  # fmt: skip
