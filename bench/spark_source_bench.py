"""The load job beside Spark's own Kafka source, on kafkalog and on Apache Kafka 4.x, in one run.

The same ``--messages`` JSON events (bench/load_bench.py's: ~250 bytes, 40 ms of event time apart)
go to topic ``events`` (4 partitions) on a ``kafkalog broker`` and on Apache Kafka 4.x (KRaft, one
JVM), both produced by confluent-kafka. On one local[2] SparkSession (started before any timing, with
spark-sql-kafka from Maven Central on its class path), per broker, alternately, ``--runs`` times:

- ours: ``PipelineRun(load_spec(yaml), spark).run()`` end to end into a fresh raw layer (plan,
  load with Spark, reconcile, commit);
- Spark's source: what a user writes with Spark alone, ``spark.read.format("kafka")`` from the
  earliest to the latest offsets, ``from_json`` with the same schema, the same event-time partition
  columns (dt, hour) and topic/partition/offset, ``write.partitionBy("dt", "hour").parquet`` (snappy,
  as ours). It commits nothing: a failed or repeated run loses or doubles rows, which ours does not.

Each contender's first run per broker is a warm-up (not counted: the JVM's JIT and Python workers).
Then the pyarrow ceiling: the same events already in memory, ``pyarrow.json.read_json`` with an
explicit schema into snappy Parquet, 100,000 a file (no broker, no Spark). Ratios are of medians.
Ours must have run the C record kernels in its tasks (the manifest says which ran; checked).

    .venv/bin/python -m bench.spark_source_bench [--messages N] [--runs R] [--quick]
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from bench.load_bench import PARTITIONS, SCHEMA, events, run_ours, write_spec
from bench.results import print_results, result

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TOPIC = "events"
CHUNK = 100_000
SPARK_TYPES = {"long": "bigint", "string": "string", "double": "double"}


def produce_events(bootstrap: str, count: int) -> float:
    """Create ``events`` and send events 0..count-1 (event i to partition i % 4) with confluent-kafka;
    the seconds it took. Raises unless the broker holds exactly ``count``."""
    return produce_values(bootstrap, TOPIC, events, count)


def produce_values(bootstrap: str, topic: str, values: Callable[[int, int], Iterable[bytes]], count: int) -> float:
    """Create ``topic`` and send ``values(lo, hi)`` block by block (value i to partition i % 4) with
    confluent-kafka; the seconds it took. Raises unless the broker holds exactly ``count``."""
    import confluent_kafka
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        future.result(30)
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20, "acks": 1}
    )
    started = time.perf_counter()
    for lo in range(0, count, CHUNK):
        for i, value in enumerate(values(lo, min(lo + CHUNK, count)), start=lo):
            while True:
                try:
                    producer.produce(topic, value, partition=i % PARTITIONS)
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.poll(0)
    if producer.flush(120):
        raise RuntimeError(f"{topic}: messages were still unsent after two minutes")
    elapsed = time.perf_counter() - started
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-check"})
    held = sum(
        consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p), timeout=10)[1]
        for p in range(PARTITIONS)
    )
    consumer.close()
    if held != count:
        raise RuntimeError(f"{bootstrap}: the topic holds {held} messages, {count} were sent")
    return elapsed


def run_spark_source(spark: Any, bootstrap: str, out: Path) -> tuple[float, int]:
    """(seconds, rows written) of Spark's Kafka source into partitioned Parquet; rows are counted
    afterwards, outside the time."""
    from pyspark.sql import functions as F

    schema = ", ".join(f"{name} {SPARK_TYPES[kind]}" for name, kind in SCHEMA.items())
    started = time.perf_counter()
    frame = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", TOPIC)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )
    event_time = F.to_timestamp(F.col("ts"))
    parsed = (
        frame.select(F.from_json(F.col("value").cast("string"), schema).alias("e"), "topic", "partition", "offset")
        .select("e.*", "topic", "partition", "offset")
        .where(F.col("user_id").isNotNull())
        .withColumn("dt", F.date_format(event_time, "yyyy-MM-dd"))
        .withColumn("hour", F.hour(event_time))
    )
    parsed.write.mode("error").partitionBy("dt", "hour").parquet(str(out))
    elapsed = time.perf_counter() - started
    return elapsed, spark.read.parquet(str(out)).count()


def pyarrow_ceiling(count: int, out: Path) -> float:
    """Seconds pyarrow alone takes to parse ``count`` events (in memory, joined by newlines, 100,000
    at a time) with the explicit schema and write them as snappy Parquet."""
    import pyarrow as pa
    import pyarrow.json as pa_json
    import pyarrow.parquet as pq

    types = {"long": pa.int64(), "string": pa.string(), "double": pa.float64()}
    options = pa_json.ParseOptions(explicit_schema=pa.schema([(n, types[k]) for n, k in SCHEMA.items()]))
    blocks = [b"\n".join(events(lo, min(lo + CHUNK, count))) for lo in range(0, count, CHUNK)]
    out.mkdir(parents=True)
    started = time.perf_counter()
    for number, block in enumerate(blocks):
        table = pa_json.read_json(io.BytesIO(block), parse_options=options)
        pq.write_table(table, out / f"part-{number:05d}.parquet", compression="snappy")
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=2_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--brokers", default="kafkalog,kafka4", help="comma-separated: kafkalog, kafka4")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 100,000 messages, 1 run")
    args = parser.parse_args(argv)
    if args.quick:
        args.messages, args.runs = 100_000, 1
    count = args.messages

    from pipelines.app.session import local_session
    from tests.support.installed import SPARK_KAFKA_LIBS
    from tests.support.installed import jars as jars_of
    from tests.support.kafka4 import Kafka4Process
    from tests.support.kafkalog import BrokerProcess

    root = Path(tempfile.mkdtemp(prefix="pipelines-spark-source-bench-"))
    names = [name.strip() for name in args.brokers.split(",") if name.strip()]
    print(
        f"# the load job vs Spark's Kafka source: {count:,} JSON events of ~250 bytes, {PARTITIONS} partitions, "
        f"local[2]; brokers {', '.join(names)}; {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f}"
    )
    brokers: dict[str, Any] = {}
    try:
        for name in names:
            if name == "kafkalog":
                brokers[name] = BrokerProcess(root / "kafkalog", default_partitions=PARTITIONS).start()
            elif name == "kafka4":
                brokers[name] = Kafka4Process(
                    root / "kafka4", **{"log.flush.interval.ms": 1000, "log.flush.scheduler.interval.ms": 1000}
                ).start()
            else:
                raise SystemExit(f"error: unknown broker {name!r} (kafkalog, kafka4)")
            print(f"{name}: produced {count:,} events in {produce_events(brokers[name].bootstrap, count):.1f} s")
        spark_jars = ",".join(str(jar) for jar in jars_of(SPARK_KAFKA_LIBS))
        spark = local_session("local[2]", "spark-source-bench", {"spark.jars": spark_jars})
        rates: dict[str, dict[str, float]] = {}
        for name, broker in brokers.items():
            ours_times: list[float] = []
            spark_times: list[float] = []
            for rep in range(args.runs + 1):  # the first of each is the warm-up
                spec = write_spec(root, broker.bootstrap, root / f"raw-{name}-{rep}", TOPIC, f"{name}_{rep}")
                seconds, rows, outcome = run_ours(spark, spec)
                if outcome.status != "committed" or rows != count:
                    raise RuntimeError(f"ours on {name}: {outcome.status}, {rows} rows committed, wanted {count}")
                task_kernels = outcome.manifest.stats.get("task_kernels")
                if task_kernels != ["C"]:
                    raise RuntimeError(f"ours on {name}: the tasks ran the {task_kernels} record kernels, not C")
                shutil.rmtree(root / f"raw-{name}-{rep}")
                theirs, written = run_spark_source(spark, broker.bootstrap, root / f"spark-{name}-{rep}")
                shutil.rmtree(root / f"spark-{name}-{rep}")
                if written != count:
                    raise RuntimeError(f"Spark's source on {name} wrote {written} rows, wanted {count}")
                label = "warm-up" if rep == 0 else f"run {rep}"
                print(
                    f"{name} {label}: ours {seconds:.2f} s ({count / seconds:,.0f} rows/s, task kernels C), "
                    f"Spark's Kafka source {theirs:.2f} s ({count / theirs:,.0f} rows/s)"
                )
                if rep:
                    ours_times.append(seconds)
                    spark_times.append(theirs)
            rates[name] = {
                "ours": count / statistics.median(ours_times),
                "spark": count / statistics.median(spark_times),
            }
        spark.stop()
        ceiling_times = []
        for rep in range(args.runs):
            ceiling_times.append(pyarrow_ceiling(count, root / f"ceiling-{rep}"))
            shutil.rmtree(root / f"ceiling-{rep}")
        ceiling = count / statistics.median(ceiling_times)
        print(f"pyarrow JSON -> Parquet alone: {ceiling:,.0f} rows/s (median of {args.runs})")
        result("spark_source_pyarrow_ceiling", ceiling, "rows/s")
        for name, figures in rates.items():
            ratio = figures["ours"] / figures["spark"]
            print(
                f"{name}: ours {figures['ours']:,.0f} rows/s, Spark's Kafka source {figures['spark']:,.0f} rows/s: "
                f"ratio {ratio:.2f} (goal >= 1.5); ours / the pyarrow ceiling {figures['ours'] / ceiling:.2f} "
                "(goal >= 0.5)"
            )
            result(f"spark_source_rows_per_s_ours_{name}", figures["ours"], "rows/s")
            result(f"spark_source_rows_per_s_spark_{name}", figures["spark"], "rows/s")
            result(f"spark_source_ratio_{name}", ratio, "ratio")
            result(f"spark_source_ours_vs_ceiling_{name}", figures["ours"] / ceiling, "ratio")
    finally:
        for broker in brokers.values():
            broker.stop()
        shutil.rmtree(root, ignore_errors=True)
    print_results()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
