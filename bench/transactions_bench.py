"""Reading committed data, on Apache Kafka 4.x and on kafkalog: what the filter of aborted transactions and
markers costs our consumer and the loader's task, beside the same work without it, in one run.

``python -m bench.transactions_bench [--messages N] [--per-transaction N] [--repeat N] [--brokers kafka4,kafkalog]``

Each broker (Kafka 4.x in KRaft mode; kafkalog) holds two topics of the same JSON events, one partition each:
``plain`` (an idempotent producer, no transactions) and ``txn`` (librdkafka's transactional
producer, ``--per-transaction`` messages a transaction, every fifth transaction aborted). The JVM is
warmed first: rounds of fetching the whole ``plain`` topic until two successive rounds agree within
5% (at least three, at most ten), so no figure is a cold broker's.

Measured, each the median of ``--repeat`` runs, alternating the two sides of a ratio:

- ``read_committed_fetch``: our SimpleConsumer reading ``txn`` whole, read committed (aborted
  records and markers left out, kafkalog.client.committed), in offsets per second, against the
  same consumer reading the same topic read uncommitted: the filter's cost per offset.
- ``task_from_transactions``: the loader's task read path (SplitTask.chunks: fetch, decode into
  Arrow, event time; no Spark, one core) over ``txn`` read committed, in rows per second, against
  the same over ``plain``: a load from a transactional topic against a load from a plain one.

The output ends with ``RESULT`` lines (docs/benchmarks.md, "Transactions").
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import confluent_kafka

from bench.results import print_results, result
from kafkalog.client import Admin, SimpleConsumer
from pipelines.config.pipeline import BadRecords, Decoder, EventTime, Source
from pipelines.executor.source import SplitTask
from pipelines.executor.splits import Split
from tests.support.kafka4 import Kafka4Process
from tests.support.kafkalog import BrokerProcess


def event(i: int) -> bytes:
    return json.dumps({"user_id": i, "event": "click", "amount": i / 10, "ts": "2026-11-21T08:00:00Z"}).encode()


def write(bootstrap: str, topic: str, messages: int, per_transaction: int | None) -> int:
    """``messages`` events into ``topic`` (partition 0): in transactions of ``per_transaction``, every
    fifth aborted, or (None) plainly; the number of committed events."""
    config = {"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 1000}
    if per_transaction is not None:
        config["transactional.id"] = f"bench-{topic}"
    producer = confluent_kafka.Producer(config)
    committed = 0
    if per_transaction is None:
        for i in range(messages):
            producer.produce(topic, event(i), partition=0)
            if i % 10_000 == 0:
                producer.poll(0)
        producer.flush(60)
        return messages
    producer.init_transactions(30)
    for number, first in enumerate(range(0, messages, per_transaction)):
        count = min(per_transaction, messages - first)
        producer.begin_transaction()
        for i in range(first, first + count):
            producer.produce(topic, event(i), partition=0)
        producer.flush(60)  # every record acknowledged before the transaction ends
        if number % 5 == 4:
            producer.abort_transaction(60)
        else:
            producer.commit_transaction(60)
            committed += count
    return committed


def read_whole(bootstrap: str, topic: str, isolation: str) -> int:
    """Every offset of ``topic`` read once; the offsets walked (messages and skipped)."""
    with SimpleConsumer(bootstrap, isolation=isolation, max_bytes=1 << 20) as consumer:  # type: ignore[arg-type]
        end = consumer.latest_offsets([(topic, 0)])[(topic, 0)]
        offset = 0
        while offset < end:
            offset = consumer.fetch(topic, 0, offset).next_offset(offset)
        return end


def task_rows(bootstrap: str, topic: str, end: int) -> int:
    source = Source(bootstrap=(bootstrap,), fetch_max_bytes=1 << 20)
    decoder = Decoder(format="json", schema={"user_id": "long", "event": "string", "amount": "double", "ts": "string"})
    task = SplitTask(
        source, decoder, EventTime(field="ts"), BadRecords(), Split(topic, 0, -1, 0, end), brokers=[bootstrap]
    )
    return sum(table.num_rows for table, _, _ in task.chunks())


def paired(first: Callable[[], float], second: Callable[[], float], repeat: int) -> tuple[float, float]:
    """Medians of ``repeat`` runs of each, alternating (first, second, first, ...)."""
    a, b = [], []
    for _ in range(repeat):
        a.append(first())
        b.append(second())
    return statistics.median(a), statistics.median(b)


def per_second(count: Callable[[], int]) -> Callable[[], float]:
    def run() -> float:
        began = time.perf_counter()
        done = count()
        return done / (time.perf_counter() - began)

    return run


def warm(bootstrap: str, topic: str) -> list[float]:
    """Fetch rounds of ``topic`` until two successive ones agree within 5% (3 to 10 rounds)."""
    rounds: list[float] = []
    measure = per_second(lambda: read_whole(bootstrap, topic, "read_uncommitted"))
    while len(rounds) < 10:
        rounds.append(measure())
        if len(rounds) >= 3 and abs(rounds[-1] - rounds[-2]) <= 0.05 * max(rounds[-2:]):
            break
    return rounds


def measure(name: str, bootstrap: str, args: argparse.Namespace) -> None:
    """Both ratios on one broker, its results suffixed with ``name`` (Kafka 4.x's unsuffixed, as
    first recorded)."""
    suffix = "" if name == "kafka4" else f"_{name}"
    with Admin(bootstrap) as admin:
        for topic in ("plain", "txn"):
            admin.create_topic(topic, 1, {"retention.ms": "-1"})
    plain = write(bootstrap, "plain", args.messages, None)
    committed = write(bootstrap, "txn", args.messages, args.per_transaction)
    with SimpleConsumer(bootstrap) as consumer:
        txn_end = consumer.latest_offset("txn", 0)
    print(f"{name}: plain: {plain:,} events; txn: {committed:,} committed of {args.messages:,} ({txn_end:,} offsets)")
    rounds = warm(bootstrap, "plain")
    print(f"{name}: warm-up, offsets/s per round:", ", ".join(f"{r:,.0f}" for r in rounds))

    committed_rate, uncommitted_rate = paired(
        per_second(lambda: read_whole(bootstrap, "txn", "read_committed")),
        per_second(lambda: read_whole(bootstrap, "txn", "read_uncommitted")),
        args.repeat,
    )
    print(f"{name}: fetch txn read committed:   {committed_rate:12,.0f} offsets/s")
    print(f"{name}: fetch txn read uncommitted: {uncommitted_rate:12,.0f} offsets/s")
    result(f"read_committed_fetch_offsets_per_s{suffix}", committed_rate, "offsets/s")
    result(f"read_uncommitted_fetch_offsets_per_s{suffix}", uncommitted_rate, "offsets/s")
    result(f"read_committed_vs_uncommitted{suffix}", committed_rate / uncommitted_rate, "ratio")

    with SimpleConsumer(bootstrap) as consumer:
        plain_end = consumer.latest_offset("plain", 0)
    txn_rows, plain_rows = paired(
        per_second(lambda: task_rows(bootstrap, "txn", txn_end)),
        per_second(lambda: task_rows(bootstrap, "plain", plain_end)),
        args.repeat,
    )
    print(f"{name}: task from txn (committed rows): {txn_rows:12,.0f} rows/s")
    print(f"{name}: task from plain:                {plain_rows:12,.0f} rows/s")
    result(f"task_rows_per_s_transactional_topic{suffix}", txn_rows, "rows/s")
    result(f"task_rows_per_s_plain_topic{suffix}", plain_rows, "rows/s")
    result(f"task_from_transactions_vs_plain{suffix}", txn_rows / plain_rows, "ratio")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--per-transaction", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--brokers", default="kafka4,kafkalog", help="which brokers, comma-separated")
    args = parser.parse_args()
    brokers = args.brokers.split(",")
    unknown = set(brokers) - {"kafka4", "kafkalog"}
    if unknown:
        parser.error(f"--brokers: unknown {sorted(unknown)} (kafka4, kafkalog)")
    with tempfile.TemporaryDirectory(prefix="transactions-bench-") as root:
        for name in brokers:
            if name == "kafka4":
                kafka4 = Kafka4Process(Path(root) / "kafka4").start()
                try:
                    measure(name, kafka4.bootstrap, args)
                finally:
                    kafka4.stop()
            else:
                with BrokerProcess(Path(root) / "kafkalog") as kafkalog:
                    measure(name, kafkalog.bootstrap, args)
    print_results()


if __name__ == "__main__":
    main()
