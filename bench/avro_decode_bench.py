"""Avro values to Arrow on one core, beside the JSON path, on the same events in one run.

``python -m bench.avro_decode_bench [--events N] [--repeat N] [--quick]``. The events have 8 fields
(two strings, a long, an int, a double, an enum, a nullable string, a timestamp-micros). Measured,
each the median of ``--repeat`` runs, in events per second:
- ``avro_kernel``: Confluent-framed Avro values decoded by kafkalog.schemas.avro_columns (the C
  kernel when built) into column buffers, then wrapped as an Arrow table by
  pipelines.executor.payloads.avro_arrow;
- ``json_path``: the same events as JSON lines through ``pyarrow.json.read_json`` with an explicit
  schema (what the loader's JSON decoder does with a chunk);
- ``fastavro``: fastavro's ``schemaless_reader`` per value, then ``pa.Table.from_pylist``;
- ``avro_task`` and ``json_task``: the loader's task path end to end, a chunk of message values to
  its Arrow table of columns: ``decoder.format: avro`` (pipelines.executor.payloads.avro_values:
  frames read, values grouped by schema id, the kernel, Arrow, the bad values' checks) and
  ``decoder.format: json`` (pipelines.executor.payloads.json_values) on the same events.
``avro_vs_json`` is the ratio of the first two, ``avro_task_vs_json_task`` of the last two (the goal
is 1.0 or more).
"""

from __future__ import annotations

import argparse
import io
import json
import random
import statistics
import struct
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.json as pj

from bench.results import print_results, result
from kafkalog.schemas import avro
from kafkalog.schemas.avro_columns import NATIVE, decode
from kafkalog.schemas.avro_program import compile_program
from pipelines.config.pipeline import Decoder
from pipelines.executor.payloads.avro_arrow import to_arrow
from pipelines.executor.payloads.avro_values import AvroValues
from pipelines.executor.payloads.json_values import JsonValues
from pipelines.schemas.resolved import SubjectSchemas

SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "Ev",
    "namespace": "bench",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "user", "type": "long"},
        {"name": "url", "type": "string"},
        {"name": "ms", "type": "int"},
        {"name": "score", "type": "double"},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["VIEW", "CLICK", "BUY"]}},
        {"name": "ref", "type": ["null", "string"], "default": None},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    ],
}
JSON_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("user", pa.int64()),
        ("url", pa.string()),
        ("ms", pa.int32()),
        ("score", pa.float64()),
        ("kind", pa.string()),
        ("ref", pa.string()),
        ("at", pa.int64()),  # JSON numbers do not read as timestamps: the JSON path gets the micros
    ]
)
AT = 1_700_000_000_000_000
DECLARED = {"id": "string", "user": "long", "url": "string", "ms": "int", "score": "double", "kind": "string"}
DECLARED |= {"ref": "string", "at": "long"}
"""The JSON decoder's declared schema of the same fields."""


def events(n: int) -> list[dict[str, Any]]:
    rnd = random.Random(1)
    return [
        {
            "id": f"ev-{i}",
            "user": rnd.randrange(10**9),
            "url": f"https://example.com/p/{rnd.randrange(10**6)}",
            "ms": rnd.randrange(5000),
            "score": rnd.random(),
            "kind": ("VIEW", "CLICK", "BUY")[i % 3],
            "ref": None if i % 3 else f"r{i}",
            "at": AT + i,
        }
        for i in range(n)
    ]


def framed(rows: list[dict[str, Any]], parsed: Any) -> list[bytes]:
    out = []
    for row in rows:
        buffer = io.BytesIO()
        buffer.write(b"\x00" + struct.pack(">I", 1))
        fastavro.schemaless_writer(buffer, parsed, row)
        out.append(buffer.getvalue())
    return out


def rate(n: int, run: Callable[[], pa.Table], repeat: int) -> float:
    def once() -> float:
        began = time.perf_counter()
        table = run()
        elapsed = time.perf_counter() - began
        assert table.num_rows == n, table.num_rows
        return n / elapsed

    once()  # warm-up
    return statistics.median(once() for _ in range(repeat))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 20,000 events, 1 repeat")
    args = parser.parse_args(argv)
    if args.quick:
        args.events, args.repeat = 20_000, 1
    n, repeat = args.events, args.repeat
    rows = events(n)
    parsed = fastavro.parse_schema(SCHEMA)
    values = framed(rows, parsed)
    lines = b"\n".join(json.dumps(r).encode() for r in rows)
    schema = avro.parse(json.dumps(SCHEMA))
    program = compile_program(schema, schema)
    print(
        f"{n:,} events, Avro {sum(map(len, values)) / n:.0f} B, JSON {len(lines) / n:.0f} B on average;"
        f" C kernel: {NATIVE}; median of {repeat}"
    )

    def avro_kernel() -> pa.Table:
        [decoded] = decode(values, 5, program)
        assert not decoded.bad, decoded.bad[:3]
        return to_arrow(decoded.columns, program.columns).table

    def json_path() -> pa.Table:
        options = pj.ReadOptions(block_size=len(lines) + 1)
        parse = pj.ParseOptions(explicit_schema=JSON_SCHEMA, unexpected_field_behavior="ignore")
        return pj.read_json(io.BytesIO(lines), read_options=options, parse_options=parse)

    def fastavro_path() -> pa.Table:
        decoded = [fastavro.schemaless_reader(io.BytesIO(memoryview(v)[5:]), parsed, None) for v in values]
        return pa.Table.from_pylist(decoded, schema=JSON_SCHEMA.set(7, pa.field("at", pa.timestamp("us", "UTC"))))

    avro_values = AvroValues(
        Decoder(format="avro", schema_file=Path("bench.avsc")),
        SubjectSchemas("AVRO", json.dumps(SCHEMA), "ev-value", 1, 1, {1: json.dumps(SCHEMA)}),
    )
    json_values = JsonValues(Decoder(format="json", schema=DECLARED))
    json_messages = [json.dumps(r).encode() for r in rows]

    def avro_task() -> pa.Table:
        pieces, bad = avro_values.parse(values)
        assert not bad, bad[:3]
        return pa.concat_tables(p.table for p in pieces)

    def json_task() -> pa.Table:
        pieces, bad = json_values.parse(json_messages)
        assert not bad, bad[:3]
        return pa.concat_tables(p.table for p in pieces)

    task = avro_task().slice(0, 1000)
    task = task.set_column(7, "at", task["at"].cast(pa.int64()))
    assert task.to_pylist() == json_task().slice(0, 1000).to_pylist(), "the task paths disagree"
    ours = avro_kernel()
    ours = ours.set_column(7, "at", ours["at"].cast(pa.int64())).slice(0, 1000)
    assert ours.to_pylist() == json_path().slice(0, 1000).to_pylist(), "the paths disagree"
    kernel = rate(n, avro_kernel, repeat)
    json_rate = rate(n, json_path, repeat)
    result("avro_kernel", kernel, "events/s")
    result("json_path", json_rate, "events/s")
    result("fastavro", rate(n, fastavro_path, repeat), "events/s")
    result("avro_vs_json", kernel / json_rate, "x")
    avro_task_rate = rate(n, avro_task, repeat)
    json_task_rate = rate(n, json_task, repeat)
    result("avro_task", avro_task_rate, "events/s")
    result("json_task", json_task_rate, "events/s")
    result("avro_task_vs_json_task", avro_task_rate / json_task_rate, "x")
    print_results()


if __name__ == "__main__":
    main()
