"""Protobuf values to Arrow on one core, beside the JSON path, on the same events in one run.

``python -m bench.protobuf_decode_bench [--events N] [--repeat N] [--quick]``. The events have 8
fields, as bench.avro_decode_bench's (two strings, an int64, an int32, a double, an enum, an
optional string, a Timestamp). Measured, each the median of ``--repeat`` runs, in events per
second, a chunk of 20,000 values at a time (as the loader's tasks decode them):
- ``protobuf_kernel``: Confluent-framed Protobuf values through the loader's decoder
  (pipelines.executor.payloads.protobuf_values) into an Arrow table, with the C kernel
  (kafkalog.schemas.protobuf_program);
- ``protobuf_twin``: the same decoder on the kernel's pure-Python twin (where the C one is not built);
- ``protobuf_upb``: the same decoder on protobuf's own parser (what reads proto2 groups);
- ``json_decoder``: the same events as JSON values through the loader's JSON decoder
  (pipelines.executor.payloads.json_values: Arrow's JSON reader, an explicit schema; the time an
  ISO 8601 string parsed into a timestamp);
- ``json_read``: the JSON lines read by ``pyarrow.json.read_json`` alone, the time as a number (what
  bench.avro_decode_bench calls the JSON path).
``protobuf_vs_json`` is protobuf_kernel / json_decoder, ``protobuf_vs_json_read`` protobuf_kernel /
json_read (the goal is 1.0 or more).
"""

from __future__ import annotations

import argparse
import io
import json
import random
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.json as pj
from google.protobuf import message_factory

from bench.results import print_results, result
from kafkalog.schemas import _protobuf_columns_py, protobuf_program
from kafkalog.schemas.wire import frame
from pipelines.config.pipeline import Decoder, Registry
from pipelines.executor.payloads.json_values import JsonValues
from pipelines.executor.payloads.protobuf_values import ProtobufValues
from pipelines.schemas.protobuf_columns import protobuf_columns
from pipelines.schemas.resolved import SubjectSchemas

PROTO = """syntax = "proto3";
package bench;
import "google/protobuf/timestamp.proto";
message Ev {
  enum Kind { VIEW = 0; CLICK = 1; BUY = 2; }
  string id = 1; int64 user = 2; string url = 3; int32 ms = 4; double score = 5; Kind kind = 6;
  optional string ref = 7; google.protobuf.Timestamp at = 8;
}
"""
JSON_FIELDS = {"id": "string", "user": "long", "url": "string", "ms": "int", "score": "double", "kind": "string",
               "ref": "string", "at": "timestamp"}  # fmt: skip
AT = 1_700_000_000
CHUNK = 20_000


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


def rate(n: int, run: Callable[[], int], repeat: int) -> float:
    def once() -> float:
        began = time.perf_counter()
        rows = run()
        elapsed = time.perf_counter() - began
        assert rows == n, rows
        return n / elapsed

    once()  # warm-up
    return statistics.median(once() for _ in range(repeat))


def chunked(decoder: Any, values: Sequence[bytes]) -> Callable[[], int]:
    def run() -> int:
        rows = 0
        for at in range(0, len(values), CHUNK):
            pieces, bad = decoder.parse(values[at : at + CHUNK])
            assert not bad, bad[:3]
            rows += sum(p.table.num_rows for p in pieces)
        return rows

    return run


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
    cls = message_factory.GetMessageClass(protobuf_columns(PROTO).descriptor)
    values: list[bytes] = []
    for row in rows:
        message: Any = cls(**{k: v for k, v in row.items() if k != "at" and v is not None})
        message.at.seconds = row["at"]
        values.append(frame(1, message.SerializeToString(), [0]))
    texts: list[bytes] = [
        json.dumps({**r, "at": f"2023-11-14T22:{(r['at'] - AT) // 60 % 60:02d}:{(r['at'] - AT) % 60:02d}Z"}).encode()
        for r in rows
    ]
    ours = ProtobufValues(
        Decoder(format="protobuf", registry=Registry(urls=("http://sr:8081",))),
        SubjectSchemas("PROTOBUF", PROTO, "bench-value", 1, 1, {1: PROTO}),
    )
    upb = ProtobufValues(ours.decoder, ours.schemas)
    upb._program = None  # protobuf's own parser, as where the kernel is not built
    theirs = JsonValues(Decoder(format="json", schema=JSON_FIELDS))
    lines = b"\n".join(json.dumps(r).encode() for r in rows)
    read_schema = pa.schema([(k, pa.int64() if k == "at" else v.type) for k, v in zip(
        JSON_FIELDS, theirs.schema, strict=True)])  # fmt: skip

    def json_read() -> int:
        options = pj.ReadOptions(block_size=len(lines) + 1)
        parse = pj.ParseOptions(explicit_schema=read_schema, unexpected_field_behavior="ignore")
        return int(pj.read_json(io.BytesIO(lines), read_options=options, parse_options=parse).num_rows)

    print(
        f"{n:,} events, Protobuf {sum(map(len, values)) / n:.0f} B, JSON {sum(map(len, texts)) / n:.0f} B "
        f"on average; C kernel: {protobuf_program.NATIVE}; median of {repeat}"
    )
    kernel_rate = rate(n, chunked(ours, values), repeat)
    json_rate = rate(n, chunked(theirs, texts), repeat)
    read_rate = rate(n, json_read, repeat)
    result("protobuf_kernel", kernel_rate, "events/s")
    result("protobuf_upb", rate(n, chunked(upb, values), repeat), "events/s")
    native = protobuf_program.implementation
    protobuf_program.implementation = _protobuf_columns_py  # the twin, as where the C kernel is not built
    try:
        result("protobuf_twin", rate(n // 10, chunked(ours, values[: n // 10]), 1), "events/s")
    finally:
        protobuf_program.implementation = native
    result("json_decoder", json_rate, "events/s")
    result("json_read", read_rate, "events/s")
    result("protobuf_vs_json", kernel_rate / json_rate, "x")
    result("protobuf_vs_json_read", kernel_rate / read_rate, "x")
    print_results()


if __name__ == "__main__":
    main()
