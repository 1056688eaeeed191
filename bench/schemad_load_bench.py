"""Loads of schema'd payloads, in one run: the same events as Avro (Confluent-framed, the schema in
``kafkalog registry``), as Protobuf (framed likewise) and as plain JSON, each loaded by the load job;
and the Avro topic read by Spark's own Kafka source with spark-avro's ``from_avro``.

The events are bench/load_bench.py's (~250 bytes as JSON; seven fields: a long, a double, five
strings), each format holding the same values. Topics of 4 partitions on one ``kafkalog broker``,
produced by confluent-kafka before any timing; the registry (``kafkalog registry``, its state on the
same broker) holds the Avro and Protobuf schemas. On one local[2] SparkSession (spark-sql-kafka and
spark-avro from Maven Central on its class path), alternately, ``--runs`` times after one warm-up
round that is not counted (the JVM's JIT, the Python workers):

- ours, per format: ``PipelineRun(load_spec(yaml), spark).run()`` end to end into a fresh raw layer
  (plan, fetch and decode in the tasks, reconcile, commit), event time from the ``ts`` field;
- Spark's source + ``from_avro``: what a user writes with Spark alone for a Confluent-framed Avro
  topic: ``spark.read.format("kafka")`` earliest to latest, the 5-byte frame cut off
  (``substring(value, 6)``: spark-avro reads no registry framing), ``from_avro`` with the schema's
  JSON, the same dt/hour partition columns and topic/partition/offset, ``partitionBy("dt",
  "hour").parquet`` (snappy, as ours). It commits nothing and checks no schema id.

Ratios are of medians: Avro / JSON and Protobuf / JSON (goal >= 1.0: binary payloads should cost no
more to decode than JSON), ours on Avro / Spark's source + from_avro (goal >= 1.5).

    .venv/bin/python -m bench.schemad_load_bench [--messages N] [--runs R] [--quick]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import yaml

from bench.load_bench import PARTITIONS, SCHEMA, events, run_ours
from bench.results import print_results, result
from bench.spark_source_bench import produce_values

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

CHUNK = 100_000
AVRO_TYPES = {"long": "long", "string": "string", "double": "double"}
AVRO_SCHEMA = {
    "type": "record",
    "name": "Event",
    "namespace": "bench",
    "fields": [{"name": name, "type": AVRO_TYPES[kind]} for name, kind in SCHEMA.items()],
}
PROTO_TYPES = {"long": "int64", "string": "string", "double": "double"}
PROTO_FIELDS = "".join(
    f"  {PROTO_TYPES[kind]} {name} = {number};\n" for number, (name, kind) in enumerate(SCHEMA.items(), start=1)
)
PROTO_SCHEMA = f'syntax = "proto3";\npackage bench;\n\nmessage Event {{\n{PROTO_FIELDS}}}\n'
SPARK_TYPES = {"long": "bigint", "string": "string", "double": "double"}


# ---------------------------------------------------------------------------------------------- the topics


def avro_values(schema_id: int) -> Callable[[int, int], list[bytes]]:
    """Events lo..hi-1 as Confluent-framed Avro of :data:`AVRO_SCHEMA` with id ``schema_id``."""
    import fastavro

    from kafkalog.schemas.wire import frame

    parsed = fastavro.parse_schema(AVRO_SCHEMA)

    def values(lo: int, hi: int) -> list[bytes]:
        out = []
        for event in events(lo, hi):
            buffer = io.BytesIO()
            fastavro.schemaless_writer(buffer, parsed, json.loads(event))
            out.append(frame(schema_id, buffer.getvalue()))
        return out

    return values


def protobuf_values(schema_id: int) -> Callable[[int, int], list[bytes]]:
    """Events lo..hi-1 as Confluent-framed Protobuf of :data:`PROTO_SCHEMA` (message index [0])."""
    from kafkalog.schemas.wire import frame
    from tests.support.schema_registry import protobuf_class

    message = protobuf_class(PROTO_SCHEMA, "bench.Event")

    def values(lo: int, hi: int) -> list[bytes]:
        return [frame(schema_id, message(**json.loads(e)).SerializeToString(), [0]) for e in events(lo, hi)]

    return values


def registered(call: Callable[..., Any], url: str, subject: str, text: str, schema_type: str = "AVRO") -> int:
    """The id the registry at ``url`` gives ``text`` registered under ``subject``."""
    status, body = call(url, "POST", f"/subjects/{subject}/versions", {"schema": text, "schemaType": schema_type})
    if status != 200:
        raise RuntimeError(f"registering {subject}: HTTP {status} {body}")
    return int(body["id"])


# ---------------------------------------------------------------------------------------------- the loads


def write_spec(directory: Path, name: str, bootstrap: str, topic: str, decoder: dict[str, Any]) -> Path:
    spec = {
        "name": name,
        "source": {"bootstrap": bootstrap},
        "topics": [topic],
        "decoder": decoder,
        "event_time": {"field": "ts", "format": "iso8601"},
        "raw": {"path": str(directory / f"raw-{name}"), "writer": "auto"},
    }
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def run_from_avro(spark: Any, bootstrap: str, topic: str, out: Path) -> tuple[float, int]:
    """(seconds, rows written) of Spark's Kafka source + from_avro into partitioned Parquet."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    started = time.perf_counter()
    frame = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )
    payload = F.expr("substring(value, 6, length(value) - 5)")
    event_time = F.to_timestamp(F.col("ts"))
    parsed = (
        frame.select(from_avro(payload, json.dumps(AVRO_SCHEMA)).alias("e"), "topic", "partition", "offset")
        .select("e.*", "topic", "partition", "offset")
        .withColumn("dt", F.date_format(event_time, "yyyy-MM-dd"))
        .withColumn("hour", F.hour(event_time))
    )
    parsed.write.mode("error").partitionBy("dt", "hour").parquet(str(out))
    elapsed = time.perf_counter() - started
    return elapsed, spark.read.parquet(str(out)).count()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--formats", default="json,avro,protobuf", help="comma-separated: json, avro, protobuf")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 50,000 messages, 1 run")
    args = parser.parse_args(argv)
    if args.quick:
        args.messages, args.runs = 50_000, 1
    count = args.messages
    formats = [name.strip() for name in args.formats.split(",") if name.strip()]
    if not set(formats) <= {"json", "avro", "protobuf"} or "json" not in formats:
        raise SystemExit("error: --formats takes json (always) and avro, protobuf")

    from pipelines.app.session import local_session
    from tests.support.installed import SCHEMA_PEER_LIBS, SPARK_KAFKA_LIBS, require_jar
    from tests.support.installed import jars as jars_of
    from tests.support.kafkalog import BrokerProcess
    from tests.support.schema_registry import RegistryProcess, call

    root = Path(tempfile.mkdtemp(prefix="pipelines-schemad-bench-"))
    print(
        f"# loads of schema'd payloads: {count:,} events ({', '.join(formats)}), {PARTITIONS} partitions, "
        f"local[2]; {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f}"
    )
    broker = BrokerProcess(root / "kafkalog", default_partitions=PARTITIONS).start()
    registry = None
    try:
        registry = RegistryProcess(root / "registry", "registry", bootstrap=broker.bootstrap).start()
        registry_decoder = {"registry": {"urls": [registry.url]}}
        decoders: dict[str, dict[str, Any]] = {}
        for fmt in formats:
            topic = f"events_{fmt}"
            if fmt == "json":
                values: Callable[[int, int], Iterable[bytes]] = events
                decoders[fmt] = {"format": "json", "schema": SCHEMA, "required": ["user_id"]}
            elif fmt == "avro":
                values = avro_values(registered(call, registry.url, f"{topic}-value", json.dumps(AVRO_SCHEMA)))
                decoders[fmt] = {"format": "avro", **registry_decoder}
            else:
                values = protobuf_values(registered(call, registry.url, f"{topic}-value", PROTO_SCHEMA, "PROTOBUF"))
                decoders[fmt] = {"format": "protobuf", **registry_decoder}
            print(
                f"{topic}: produced {count:,} events in {produce_values(broker.bootstrap, topic, values, count):.1f} s"
            )

        spark_jars = [*jars_of(SPARK_KAFKA_LIBS), require_jar("spark-avro_2.13-*.jar", "spark-avro", SCHEMA_PEER_LIBS)]
        spark = local_session("local[2]", "schemad-load-bench", {"spark.jars": ",".join(map(str, spark_jars))})
        times: dict[str, list[float]] = {fmt: [] for fmt in formats}
        if "avro" in formats:
            times["spark_from_avro"] = []
        for rep in range(args.runs + 1):  # the first round is the warm-up
            label = "warm-up" if rep == 0 else f"run {rep}"
            line = []
            for fmt in formats:
                spec = write_spec(root, f"{fmt}_{rep}", broker.bootstrap, f"events_{fmt}", decoders[fmt])
                seconds, rows, outcome = run_ours(spark, spec)
                if outcome.status != "committed" or rows != count:
                    raise RuntimeError(f"ours on {fmt}: {outcome.status}, {rows} rows committed, wanted {count}")
                shutil.rmtree(root / f"raw-{fmt}_{rep}")
                line.append(f"ours {fmt} {seconds:.2f} s")
                if rep:
                    times[fmt].append(seconds)
            if "avro" in formats:
                seconds, written = run_from_avro(spark, broker.bootstrap, "events_avro", root / f"spark-{rep}")
                shutil.rmtree(root / f"spark-{rep}")
                if written != count:
                    raise RuntimeError(f"Spark's source + from_avro wrote {written} rows, wanted {count}")
                line.append(f"Spark's source + from_avro {seconds:.2f} s")
                if rep:
                    times["spark_from_avro"].append(seconds)
            print(f"{label}: " + ", ".join(line))
        spark.stop()

        rates = {name: count / statistics.median(values_) for name, values_ in times.items()}
        for name, rate in rates.items():
            print(f"{name}: {rate:,.0f} rows/s (median of {args.runs})")
            result(f"schemad_load_rows_per_s_{name}", rate, "rows/s")
        for fmt in ("avro", "protobuf"):
            if fmt in rates:
                ratio = rates[fmt] / rates["json"]
                print(f"ours {fmt} / ours json: {ratio:.2f} (goal >= 1.0)")
                result(f"schemad_load_{fmt}_vs_json", ratio, "ratio")
        if "avro" in rates:
            ratio = rates["avro"] / rates["spark_from_avro"]
            print(f"ours avro / Spark's Kafka source + from_avro: {ratio:.2f} (goal >= 1.5)")
            result("schemad_load_avro_vs_spark_from_avro", ratio, "ratio")
    finally:
        if registry is not None:
            registry.stop()
        broker.stop()
        shutil.rmtree(root, ignore_errors=True)
    print_results()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
