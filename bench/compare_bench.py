"""kafkalog beside Apache Kafka 4.x (KRaft) and Apache Kafka 0.9.0.1 on this machine, in one run: every
broker on loopback, data on the same disk, each fsyncing at most once a second. For 200-byte
messages, batches of 1, 50 and 1000: produce and consume throughput with confluent-kafka (librdkafka)
against each broker, the same with kafkalog's own client, and kafkalog's client against
confluent-kafka on the same broker (as librdkafka comes, and idempotent as kafkalog's producer is).
Codecs: none, lz4 and zstd beside Kafka 4.x; none and snappy beside Kafka 0.9 (which predates zstd).
Each figure is a median of ``--repeat`` runs, shown with the broker's CPU seconds per million
messages (from /proc/<pid>/stat), since the client may be the bottleneck. Ratios are ours / theirs.
``--peers`` picks the peers (default both). Ends with ``RESULT <name> <value> <unit>`` lines."""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.results import print_results, result

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.broker_bench import cpu_seconds, fetch_rate, produce_rate
from kafkalog.client import Producer, SimpleConsumer
from tests.support.kafka09 import Kafka09Process
from tests.support.kafka4 import Kafka4Process
from tests.support.kafkalog import BrokerProcess
from tests.support.zookeeper import ZooKeeperProcess

MESSAGE = b"x" * 200
FALLBACK_09 = {"api.version.request": False, "broker.version.fallback": "0.9.0"}
# kafkalog's client is told it talks to 0.9 (as a user would): probing 0.9 with ApiVersions makes its
# network thread throw, and after many probes it stopped answering (seen in this benchmark).
VERSIONS = {"kafkalog": None, "kafka09": "0.9", "kafka4": None}
CODECS = {"kafka09": ("none", "snappy"), "kafka4": ("none", "lz4", "zstd")}
"""The codecs measured beside each peer (batches of 50 and 1000; a batch of 1 is uncompressed)."""
COUNTS = {1: 30_000, 50: 600_000, 1000: 1_500_000}
IDEMPOTENT = {"enable.idempotence": True, "acks": "all"}
"""librdkafka as kafkalog's producer is by default (acks=all is what librdkafka requires with it; on
one broker it waits for nothing more than acks=1)."""
NAMES = {"kafka09": "Apache Kafka 0.9.0.1", "kafka4": "Apache Kafka 4.x (KRaft)"}


def ours_produce(
    bootstrap: str, topic: str, batch: int, codec: str, count: int, pid: int, version: str | None
) -> tuple[float, float]:
    """(messages/s, broker CPU s per million) with kafkalog's Producer."""
    # The default buffer (32 MiB): a larger one lets a million queued messages pile up for the cyclic
    # GC to walk again and again, which measured 2-7x slower than back-pressure does.
    with Producer(
        bootstrap, compression=codec, batch_bytes=batch * 240, linger_ms=0 if batch == 1 else 20, broker_version=version
    ) as producer:
        producer.send(topic, MESSAGE, partition=0).result()
        broker_cpu = cpu_seconds(pid)
        start = time.perf_counter()
        for _ in range(count):
            producer.send(topic, MESSAGE, partition=0)
        producer.flush()
        elapsed = time.perf_counter() - start
    return count / elapsed, (cpu_seconds(pid) - broker_cpu) / count * 1e6


def ours_fetch(bootstrap: str, topic: str, count: int, pid: int, version: str | None) -> tuple[float, float]:
    """(messages/s, broker CPU s per million) reading ``count`` messages with kafkalog's SimpleConsumer."""
    with SimpleConsumer(bootstrap, max_bytes=8 * 1024 * 1024, broker_version=version) as consumer:
        first = consumer.fetch(topic, 0, 0).messages  # connecting is not what is measured
        offset = got = len(first)
        broker_cpu = cpu_seconds(pid)
        start = time.perf_counter()
        while got < count:
            messages = consumer.fetch(topic, 0, offset).messages
            got += len(messages)
            offset = messages[-1].offset + 1
        elapsed = time.perf_counter() - start
    return (got - len(first)) / elapsed, (cpu_seconds(pid) - broker_cpu) / max(got - len(first), 1) * 1e6


def confluent_produce(
    bootstrap: str, topic: str, batch: int, codec: str, count: int, pid: int, extra: dict[str, object]
) -> tuple[float, float]:
    rate, _, broker_cores = produce_rate(bootstrap, topic, batch, codec, count, pid, extra)
    return rate, broker_cores / rate * 1e6


def confluent_fetch(bootstrap: str, topic: str, count: int, pid: int, extra: dict[str, object]) -> tuple[float, float]:
    rate, _, broker_cores = fetch_rate(bootstrap, topic, count, pid, extra)
    return rate, broker_cores / rate * 1e6


def median_of(runs: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--peers", default="kafka4,kafka09", help="comma-separated: kafka4, kafka09")
    args = parser.parse_args(argv)
    peers = [p for p in args.peers.split(",") if p]
    if not peers or any(p not in CODECS for p in peers):
        parser.error(f"--peers takes a comma-separated list of {', '.join(CODECS)}")
    scale = 0.05 if args.quick else 1.0
    repeat = 1 if args.quick else args.repeat
    root = Path(tempfile.mkdtemp(prefix="kafkalog-compare-"))
    zookeeper = ZooKeeperProcess(root / "zk") if "kafka09" in peers else None
    kafka09 = Kafka09Process(root / "kafka09", zookeeper, **{"num.partitions": 1}) if zookeeper else None
    # Kafka 4.x fsyncs only when its scheduler looks (default: never): once a second, like the others
    kafka4 = (
        Kafka4Process(root / "kafka4", **{"log.flush.interval.ms": 1000, "log.flush.scheduler.interval.ms": 1000})
        if "kafka4" in peers
        else None
    )
    ours = BrokerProcess(root / "kafkalog", default_partitions=1, log={"flush_ms": 1000})
    print(
        f"# kafkalog vs {' and '.join(NAMES[p] for p in peers)}, 200-byte messages, one partition, acks=1, "
        "fsync <= 1/s on every broker"
    )
    try:
        ours.start()
        assert ours.process is not None
        brokers: dict[str, tuple[str, int, dict[str, object]]] = {"kafkalog": (ours.bootstrap, ours.process.pid, {})}
        if kafka09 is not None and zookeeper is not None:
            zookeeper.start()
            kafka09.start()
            brokers["kafka09"] = (kafka09.bootstrap, kafka09.pid(), FALLBACK_09)
        if kafka4 is not None:
            kafka4.start()
            assert kafka4.process is not None
            brokers["kafka4"] = (kafka4.bootstrap, kafka4.process.pid, {})
        for batch in (1, 50, 1000):
            codecs = ("none",) if batch == 1 else tuple(dict.fromkeys(c for p in peers for c in CODECS[p]))
            for codec in codecs:
                _produce_case(brokers, peers, batch, codec, int(COUNTS[batch] * scale), repeat)
        _fetch_cases(brokers, peers, int(COUNTS[1000] * scale), repeat)
    finally:
        ours.stop()
        if kafka4 is not None:
            kafka4.stop()
        if kafka09 is not None:
            kafka09.stop()
        if zookeeper is not None:
            zookeeper.stop()
        shutil.rmtree(root, ignore_errors=True)
    print_results()
    return 0


def _produce_case(
    brokers: dict[str, tuple[str, int, dict[str, object]]], peers: list[str], batch: int, codec: str, count: int,
    repeat: int,
) -> None:  # fmt: skip
    """One row: kafkalog and every peer that has ``codec``, each with librdkafka and with ours."""
    here = ["kafkalog", *(p for p in peers if codec in CODECS[p])]
    confluent, own = {}, {}
    for name in here:
        bootstrap, pid, extra = brokers[name]
        confluent[name] = median_of([
            confluent_produce(bootstrap, f"c-{name}-{batch}-{codec}-{i}", batch, codec, count, pid, extra)
            for i in range(repeat)
        ])  # fmt: skip
        own[name] = median_of([
            ours_produce(bootstrap, f"o-{name}-{batch}-{codec}-{i}", batch, codec, count, pid, VERSIONS[name])
            for i in range(repeat)
        ])  # fmt: skip
        result(f"produce_confluent_{name}_batch{batch}_{codec}", confluent[name][0], "msgs/s")
        result(f"produce_confluent_{name}_batch{batch}_{codec}_broker_cpu", confluent[name][1], "s/M msgs")
        result(f"produce_kafkalog_client_{name}_batch{batch}_{codec}", own[name][0], "msgs/s")
    # librdkafka with the guarantees kafkalog's producer keeps by default: idempotent, so at most 5
    # requests in flight and order kept through retries (its own default allows a million in flight)
    bootstrap, pid, _ = brokers["kafkalog"]
    same_guarantees = median_of([
        confluent_produce(bootstrap, f"i-kafkalog-{batch}-{codec}-{i}", batch, codec, count, pid, IDEMPOTENT)
        for i in range(repeat)
    ])  # fmt: skip
    result(f"produce_confluent_idempotent_kafkalog_batch{batch}_{codec}", same_guarantees[0], "msgs/s")
    suffix = "" if codec == "none" else f"_{codec}"
    client_ratio = own["kafkalog"][0] / confluent["kafkalog"][0]
    idempotent_ratio = own["kafkalog"][0] / same_guarantees[0]
    result(f"client_ratio_vs_librdkafka_produce_batch{batch}{suffix}", client_ratio, "ratio")
    result(f"client_ratio_vs_librdkafka_idempotent_produce_batch{batch}{suffix}", idempotent_ratio, "ratio")
    for peer in here[1:]:
        ratio = confluent["kafkalog"][0] / confluent[peer][0]
        result(f"produce_ratio_vs_{peer}_batch{batch}{suffix}", ratio, "ratio")
        print(
            f"batch {batch:>4} {codec:<6} produce with confluent-kafka: kafkalog {confluent['kafkalog'][0]:>10,.0f}/s "
            f"({confluent['kafkalog'][1]:.2f} broker s/M) vs {peer} {confluent[peer][0]:>10,.0f}/s "
            f"({confluent[peer][1]:.2f} s/M): ratio {ratio:.2f}"
        )
    print(
        f"{'':17}with kafkalog's client: on kafkalog {own['kafkalog'][0]:,.0f}/s ({client_ratio:.2f} of "
        f"librdkafka; {idempotent_ratio:.2f} of librdkafka idempotent, {same_guarantees[0]:,.0f}/s), "
        + ", ".join(f"on {peer} {own[peer][0]:,.0f}/s" for peer in here[1:])
    )


def _fetch_cases(
    brokers: dict[str, tuple[str, int, dict[str, object]]], peers: list[str], count: int, repeat: int
) -> None:
    """Reading back each broker's uncompressed batch-1000 topic, with librdkafka and with ours."""
    fetched = {}
    for name in ["kafkalog", *peers]:
        bootstrap, pid, extra = brokers[name]
        topic = f"c-{name}-1000-none-0"
        fetched[name] = median_of([confluent_fetch(bootstrap, topic, count, pid, extra) for _ in range(repeat)])
        own_rate = median_of([ours_fetch(bootstrap, topic, count, pid, VERSIONS[name]) for _ in range(repeat)])[0]
        result(f"fetch_confluent_{name}", fetched[name][0], "msgs/s")
        result(f"fetch_confluent_{name}_broker_cpu", fetched[name][1], "s/M msgs")
        result(f"fetch_kafkalog_client_{name}", own_rate, "msgs/s")
        result(f"client_ratio_vs_librdkafka_fetch_{name}", own_rate / fetched[name][0], "ratio")
        print(
            f"fetch from {name}: confluent-kafka {fetched[name][0]:,.0f}/s ({fetched[name][1]:.2f} broker s/M), "
            f"kafkalog's client {own_rate:,.0f}/s"
        )
    for peer in peers:
        result(f"fetch_ratio_vs_{peer}", fetched["kafkalog"][0] / fetched[peer][0], "ratio")


if __name__ == "__main__":
    sys.exit(main())
