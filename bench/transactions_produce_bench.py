"""Transactional produce with librdkafka (confluent-kafka), into kafkalog and into Apache Kafka 4.x,
in one run: transactions of 100 and of 1,000 200-byte messages, every one committed.

``python -m bench.transactions_produce_bench [--brokers B,B] [--messages N] [--repeat N] [--kafkalog-fsync]``

Each broker runs on loopback with its data on the same disk, fsyncing at most once a second. One
producer per run (a transactional id of its own; InitProducerId is not measured): for each
transaction, begin, produce its messages to partition 0, commit (the commit flushes them first);
``--messages`` in all. Measured per broker and transaction size, the median of ``--repeat`` runs
(the brokers alternate run by run): messages per second, the median commit (EndTxn) latency,
and the broker's CPU seconds per million messages (from /proc/<pid>/stat). Before measuring,
produce rounds of 100-message transactions warm each broker (Kafka's JVM above all) until two
successive rounds agree within 5% (at least five, at most fifteen).

``--brokers`` picks the brokers (default both); the ratios kafkalog / Kafka 4.x are printed when
both ran. Ends with ``RESULT <name> <value> <unit>`` lines (docs/benchmarks.md, "Transactional
produce").
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import confluent_kafka

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.broker_bench import cpu_seconds
from bench.results import print_results, result
from kafkalog.client import Admin
from tests.support.kafka4 import Kafka4Process
from tests.support.kafkalog import BrokerProcess

MESSAGE = b"x" * 200
SIZES = (100, 1000)
"""Messages per transaction."""
BROKERS = ("kafka4", "kafkalog")
TIMEOUT = 30.0
"""Seconds any one client call may take before the run fails (init, commit)."""


class Run(NamedTuple):
    rate: float
    """Messages per second, from the first begin to the last commit's answer."""
    commit_ms: float
    """The median commit latency (commit_transaction flushes the transaction's messages first)."""
    broker_cpu: float
    """The broker's CPU seconds per million messages."""


class Broker(NamedTuple):
    bootstrap: str
    pid: int


def produce(broker: Broker, per_transaction: int, messages: int) -> Run:
    """``messages`` in committed transactions of ``per_transaction`` into a new topic."""
    topic = f"txn-{per_transaction}-{uuid.uuid4().hex[:8]}"
    with Admin(broker.bootstrap) as admin:
        admin.create_topic(topic, 1)
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": f"bench-{topic}", "linger.ms": 5,
         "batch.num.messages": 10_000}
    )  # fmt: skip
    try:
        producer.init_transactions(TIMEOUT)
    except confluent_kafka.KafkaException as e:
        raise SystemExit(
            f"init_transactions on {broker.bootstrap} failed (does the broker serve transactions?): {e}"
        ) from None
    commits: list[float] = []
    cpu = cpu_seconds(broker.pid)
    began = time.perf_counter()
    for first in range(0, messages, per_transaction):
        producer.begin_transaction()
        for _ in range(min(per_transaction, messages - first)):
            producer.produce(topic, MESSAGE, partition=0)
        committing = time.perf_counter()
        producer.commit_transaction(TIMEOUT)  # flushes the transaction's messages first
        commits.append(time.perf_counter() - committing)
    elapsed = time.perf_counter() - began
    cpu = cpu_seconds(broker.pid) - cpu
    producer.flush(TIMEOUT)
    return Run(messages / elapsed, statistics.median(commits) * 1000, cpu / messages * 1e6)


def warm(name: str, broker: Broker, messages: int) -> list[float]:
    """Rounds of 100-message transactions until two successive ones agree within 5% (5 to 15: Kafka's
    JVM was still getting faster after the third, a round being a few seconds)."""
    rounds: list[float] = []
    while len(rounds) < 15:
        rounds.append(produce(broker, 100, messages).rate)
        if len(rounds) >= 5 and abs(rounds[-1] - rounds[-2]) <= 0.05 * max(rounds[-2:]):
            break
    print(f"{name} warm-up, msgs/s per round: {', '.join(f'{r:,.0f}' for r in rounds)}")
    return rounds


def medians(runs: list[Run]) -> Run:
    return Run(*(statistics.median(field) for field in zip(*runs, strict=True)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", default=",".join(BROKERS), help="comma-separated: kafka4, kafkalog")
    parser.add_argument("--messages", type=int, default=100_000, help="messages per run")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--kafkalog-fsync", action="store_true", help="kafkalog fsyncs each coordinator record (transactions.fsync)"
    )
    args = parser.parse_args(argv)
    names = [name for name in args.brokers.split(",") if name]
    if not names or any(name not in BROKERS for name in names):
        parser.error(f"--brokers takes a comma-separated list of {', '.join(BROKERS)}")
    root = Path(tempfile.mkdtemp(prefix="transactions-produce-bench-"))
    # Kafka 4.x fsyncs only when its scheduler looks (default: never): once a second, like kafkalog
    flush_once_a_second: dict[str, object] = {"log.flush.interval.ms": 1000, "log.flush.scheduler.interval.ms": 1000}
    kafka4 = Kafka4Process(root / "kafka4", **flush_once_a_second)
    ours = BrokerProcess(
        root / "kafkalog",
        default_partitions=1,
        log={"flush_ms": 1000},
        transactions={"fsync": args.kafkalog_fsync},
    )
    starts: dict[str, Callable[[], Broker]] = {
        "kafka4": lambda: _started_kafka4(kafka4),
        "kafkalog": lambda: _started_ours(ours),
    }
    print(f"# librdkafka {confluent_kafka.libversion()[0]} transactional produce, 200-byte messages, one partition")
    try:
        brokers = {name: starts[name]() for name in names}
        for name, broker in brokers.items():
            warm(name, broker, args.messages // 5)
        for size in SIZES:
            runs: dict[str, list[Run]] = {name: [] for name in names}
            for _ in range(args.repeat):
                for name, broker in brokers.items():
                    runs[name].append(produce(broker, size, args.messages))
            for name in names:
                median = medians(runs[name])
                print(f"{name:9} {size:>5} a transaction: {median.rate:>10,.0f} msgs/s, "
                      f"commit {median.commit_ms:6.2f} ms, broker {median.broker_cpu:6.2f} CPU s/M msgs")  # fmt: skip
                result(f"txn_produce_{name}_per_txn{size}", median.rate, "msgs/s")
                result(f"txn_commit_ms_{name}_per_txn{size}", median.commit_ms, "ms")
                result(f"txn_produce_{name}_per_txn{size}_broker_cpu", median.broker_cpu, "s/M msgs")
            if len(names) == 2:
                ratio = medians(runs["kafkalog"]).rate / medians(runs["kafka4"]).rate
                print(f"{'':9} {size:>5} a transaction: kafkalog / Kafka 4.x {ratio:.2f}")
                result(f"txn_produce_ratio_vs_kafka4_per_txn{size}", ratio, "ratio")
    finally:
        if ours.process is not None and ours.process.poll() is None:
            ours.stop()
        kafka4.stop()
        shutil.rmtree(root, ignore_errors=True)
    print_results()
    return 0


def _started_kafka4(kafka4: Kafka4Process) -> Broker:
    kafka4.start()
    assert kafka4.process is not None
    return Broker(kafka4.bootstrap, kafka4.process.pid)


def _started_ours(ours: BrokerProcess) -> Broker:
    ours.start()
    assert ours.process is not None
    return Broker(ours.bootstrap, ours.process.pid)


if __name__ == "__main__":
    sys.exit(main())
