"""A whole load of Avro values without processes: the in-memory cluster, the tasks run in-process
(tests.support.in_memory), an .avsc schema file (no registry). The run reads the schema on the
driver, ships it to the tasks as data, and commits rows with the schema's columns and the bad
values quarantined with their reasons, every offset once."""

from __future__ import annotations

import datetime as dt
import io
import json
from pathlib import Path
from typing import Any

import fastavro
import pyarrow.parquet as pq
import pytest

from kafkalog.schemas.wire import frame
from pipelines.config.pipeline import load_spec
from pipelines.ingest.run import PipelineRun
from pipelines.storage import LocalStorage
from tests.pipelines.harness import oracle, write_spec
from tests.support.in_memory import InProcessStager, MemoryCluster

pytestmark = pytest.mark.unit

NOW_MS = 1_795_000_000_000
SCHEMA = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "lines", "type": {"type": "array", "items": "string"}},
    ],
}


def order(i: int) -> bytes:
    import decimal

    record = {
        "id": i,
        "amount": decimal.Decimal(i) / 4,
        "at": dt.datetime(2026, 11, 28, i % 24, tzinfo=dt.UTC),
        "lines": [f"item-{i}"] * (i % 3),
    }
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(SCHEMA), record)
    return out.getvalue()


def test_an_avro_topic_loads_with_the_schema_files_columns(tmp_path: Path) -> None:
    avsc = tmp_path / "order.avsc"
    avsc.write_text(json.dumps(SCHEMA))
    decoder: dict[str, Any] = {"format": "avro", "schema_file": str(avsc), "framed": True}
    spec = load_spec(
        write_spec(
            tmp_path,
            "127.0.0.1:1",
            tmp_path / "raw",
            decoder=decoder,
            event_time={"field": "at"},
            bad_records={"policy": "quarantine", "max_share": 0.5},
        )
    )
    cluster = MemoryCluster()
    cluster.create("events", 2)
    for partition in range(2):
        values = [frame(1, order(partition * 100 + i)) for i in range(20)]
        values[5] = b'{"not": "avro"}'
        values[6] = frame(1, order(6)[:-1])
        cluster.append("events", partition, values, timestamp_ms=NOW_MS)
    job = PipelineRun(
        spec, None, storage=LocalStorage(), stager=InProcessStager(spec, cluster), consumer=cluster.consumer
    )
    result = job.run()
    assert result.status == "committed" and result.manifest is not None
    assert [(s.rows, s.quarantined) for s in result.manifest.splits] == [(18, 2), (18, 2)]
    totals = oracle(tmp_path / "raw")
    assert (totals["rows"], totals["quarantined"]) == (36, 4)
    files = sorted((tmp_path / "raw").glob("dt=*/hour=*/*.parquet"))
    table = pq.read_table(files[0])
    assert table.schema.field("amount").type.precision == 9
    assert str(table.schema.field("lines").type) == "list<element: string not null>"
    rows = {r["id"]: (f.parent.parent.name, f.parent.name, r) for f in files for r in pq.read_table(f).to_pylist()}
    day, hour, row = rows[101]
    assert (day, hour) == ("dt=2026-11-28", "hour=05")  # the event time, from the payload's timestamp
    assert row["lines"] == ["item-101"] * 2 and str(row["amount"]) == "25.25"
    quarantined = sorted(
        r["reason"] for f in (tmp_path / "raw").rglob("*.parquet") if "quarantine" in str(f)
        for r in pq.read_table(f).to_pylist()
    )  # fmt: skip
    assert quarantined == ["truncated Avro payload"] * 2 + ["wrong magic byte 0x7b"] * 2
