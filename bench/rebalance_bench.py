"""Consumer groups on kafkalog beside Apache Kafka 4.x (KRaft), in one run, with the same clients and
settings on both: librdkafka (confluent-kafka) members, the range assignor, session timeout 6 s,
heartbeats every 500 ms, no initial rebalance delay (Kafka's group.initial.rebalance.delay.ms=0, our
groups.initial_rebalance_delay_ms=0).

- Rebalance latency: for topics of 10, 100 and 1000 partitions, members join one at a time up to 10;
  each join is timed from the new member's subscribe() until every member has been handed its share
  of the new generation (its on_assign ran after the join started, and the shares cover every
  partition once). The median over the joins of members 2..10, and the first member's join alone.
- Group consume: three members read a pre-produced topic of six partitions (200-byte messages) from
  the start until every message was consumed: messages per second.
- Java: the same joins with Kafka 4.x's Java consumer (bench/java/GroupJoins.java, compiled on first
  use into .cache/bench-java, the same settings); and Kafka's own consumer performance tool
  (ConsumerPerformance, one member that subscribes) reads the consumed topic: its join time
  (rebalance.time.ms) and its rate over the fetching (fetch.nMsg.sec), against each broker.

Each figure is a median of ``--repeat`` runs. Ratios are written so that above 1.0 favours kafkalog:
Kafka 4.x's time / ours for latencies, ours / Kafka's for throughput. Ends with RESULT lines.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import confluent_kafka

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.results import print_results, result
from kafkalog.client import Admin, Producer
from tests.support.installed import KAFKA4_LIBS
from tests.support.kafka4 import Kafka4Process, run_tool
from tests.support.kafkalog import BrokerProcess

CONSUMER_PERF = "org.apache.kafka.tools.ConsumerPerformance"

MEMBER_SETTINGS = {
    "auto.offset.reset": "earliest",
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 500,
    "partition.assignment.strategy": "range",
    "enable.auto.commit": True,
}


class Member:
    """A librdkafka consumer polling in a thread; records each assignment with its time."""

    def __init__(self, bootstrap: str, group: str, topic: str, on_message: Callable[[], None] | None = None) -> None:
        self.assigned: tuple[float, frozenset[int]] = (0.0, frozenset())
        self._stop = threading.Event()
        self._consumer = confluent_kafka.Consumer(
            {"bootstrap.servers": bootstrap, "group.id": group, **MEMBER_SETTINGS}
        )
        self._on_message = on_message
        self._topic = topic
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Member:
        self._thread.start()
        return self

    def _run(self) -> None:
        def on_assign(_: object, partitions: list[confluent_kafka.TopicPartition]) -> None:
            self.assigned = (time.perf_counter(), frozenset(p.partition for p in partitions))

        self._consumer.subscribe([self._topic], on_assign=on_assign)
        while not self._stop.is_set():
            message = self._consumer.poll(0.05)
            if message is not None and not message.error() and self._on_message is not None:
                self._on_message()
        self._consumer.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


def settled(members: list[Member], since: float, partitions: int) -> bool:
    if any(member.assigned[0] < since for member in members):
        return False
    shares = [member.assigned[1] for member in members]
    return sum(len(s) for s in shares) == partitions and len(frozenset().union(*shares)) == partitions


def rebalance_latencies(bootstrap: str, topic: str, partitions: int, members: int) -> list[float]:
    """Seconds from each join's subscribe() until the group settled, for members 1..``members``."""
    group = f"rebalance-{topic}-{time.monotonic_ns()}"
    joined: list[Member] = []
    latencies = []
    try:
        for _ in range(members):
            start = time.perf_counter()
            joined.append(Member(bootstrap, group, topic).start())
            deadline = start + 120
            while not settled(joined, start, partitions):
                if time.perf_counter() > deadline:
                    raise RuntimeError(f"group {group} of {len(joined)} did not settle within 120 s")
                time.sleep(0.005)
            latencies.append(max(member.assigned[0] for member in joined) - start)
    finally:
        for member in joined:
            member.stop()
    return latencies


def group_consume_rate(bootstrap: str, topic: str, count: int) -> float:
    consumed = 0
    lock = threading.Lock()
    done = threading.Event()

    def count_one() -> None:
        nonlocal consumed
        with lock:
            consumed += 1
            if consumed >= count:
                done.set()

    group = f"consume-{topic}-{time.monotonic_ns()}"
    start = time.perf_counter()
    members = [Member(bootstrap, group, topic, count_one).start() for _ in range(3)]
    try:
        if not done.wait(600):
            raise RuntimeError(f"only {consumed} of {count} messages consumed in 600 s")
        return count / (time.perf_counter() - start)
    finally:
        for member in members:
            member.stop()


REPO = Path(__file__).resolve().parent.parent
JAVA_CLASSES = REPO / ".cache" / "bench-java"


def java_group_joins(bootstrap: str, topic: str, partitions: int, members: int) -> list[float]:
    """Seconds each join of ``members`` Java consumers took to settle (bench/java/GroupJoins.java)."""
    source = REPO / "bench" / "java" / "GroupJoins.java"
    compiled = JAVA_CLASSES / "GroupJoins.class"
    classpath = f"{JAVA_CLASSES}:{KAFKA4_LIBS}/*"
    if not compiled.exists() or compiled.stat().st_mtime < source.stat().st_mtime:
        if shutil.which("javac") is None:
            raise SystemExit("javac (a JDK 17) is needed for the Java members of this benchmark")
        JAVA_CLASSES.mkdir(parents=True, exist_ok=True)
        subprocess.run(["javac", "-nowarn", "-d", str(JAVA_CLASSES), "-cp", f"{KAFKA4_LIBS}/*", str(source)],
                       check=True, capture_output=True)  # fmt: skip
    group = f"java-joins-{topic}-{time.monotonic_ns()}"
    done = subprocess.run(
        ["java", "-Xmx512m", "-cp", classpath, "GroupJoins", bootstrap, topic, group, str(members), str(partitions)],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    joins = [float(line.split()[2]) / 1000 for line in done.stdout.splitlines() if line.startswith("JOIN ")]
    if done.returncode != 0 or len(joins) != members:
        raise RuntimeError(f"GroupJoins failed ({done.returncode}): {done.stderr[-2000:]}")
    return joins


def java_consumer_perf(bootstrap: str, topic: str, count: int, log4j: Path) -> tuple[float, float]:
    """(join ms, messages/s while fetching) of Kafka's ConsumerPerformance in a new group."""
    group = f"java-perf-{time.monotonic_ns()}"
    out = run_tool(
        CONSUMER_PERF, "--bootstrap-server", bootstrap, "--topic", topic, "--messages", str(count),
        "--group", group, "--timeout", "60000", log4j=log4j, timeout=600, measured=True,
    ).stdout.decode()  # fmt: skip
    header, values = [line for line in out.splitlines() if line.strip()][-2:]
    row = dict(zip((h.strip() for h in header.split(",")), (v.strip() for v in values.split(",")), strict=True))
    return float(row["rebalance.time.ms"]), float(row["fetch.nMsg.sec"])


def _joins(
    brokers: dict[str, str],
    client: str,
    measure: Callable[[str, str, int, int], list[float]],
    partitions: int,
    members: int,
    repeat: int,
) -> None:
    """Median first-join and later-join latencies of ``client``'s members on each broker, and the
    ratios (librdkafka's figures keep their earlier names: rebalance_<broker>_p<n>_...)."""
    tag = "" if client == "librdkafka" else f"{client}_"
    medians: dict[str, tuple[float, float]] = {}
    for name, bootstrap in brokers.items():
        firsts, joins = [], []
        for run in range(repeat):
            topic = f"{tag}p{partitions}-r{run}"
            with Admin(bootstrap) as admin:
                admin.create_topic(topic, partitions)
            latencies = measure(bootstrap, topic, partitions, members)
            firsts.append(latencies[0])
            joins.append(statistics.median(latencies[1:]))
        medians[name] = (statistics.median(firsts), statistics.median(joins))
        print(f"{name:9} {partitions:5} partitions, {client}: first join {medians[name][0] * 1000:7.0f} ms, "
              f"joins 2..{members} median {medians[name][1] * 1000:7.0f} ms")  # fmt: skip
        result(f"rebalance_{tag}{name}_p{partitions}_first", medians[name][0] * 1000, "ms")
        result(f"rebalance_{tag}{name}_p{partitions}_join", medians[name][1] * 1000, "ms")
    theirs, ours = medians["kafka4"], medians["kafkalog"]
    result(f"rebalance_{tag}ratio_p{partitions}_first", theirs[0] / ours[0], "x")
    result(f"rebalance_{tag}ratio_p{partitions}_join", theirs[1] / ours[1], "x")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="10 and 100 partitions, 4 members, one run")
    parser.add_argument("--only-java", action="store_true", help="only the Java consumers' figures")
    args = parser.parse_args(argv)
    sizes, members, repeat = ((10, 100), 4, 1) if args.quick else ((10, 100, 1000), 10, args.repeat)
    consume_count = 30_000 if args.quick else 300_000
    root = Path(tempfile.mkdtemp(prefix="kafkalog-rebalance-"))
    kafka4 = Kafka4Process(root / "kafka4")  # group.initial.rebalance.delay.ms=0 (tests.support.kafka4)
    ours = BrokerProcess(root / "kafkalog", groups={"initial_rebalance_delay_ms": 0}, log={"flush_ms": 1000})
    print(f"# consumer groups: kafkalog vs Apache Kafka 4.x, librdkafka {confluent_kafka.libversion()[0]} members")
    try:
        ours.start()
        kafka4.start()
        brokers = {"kafkalog": ours.bootstrap, "kafka4": kafka4.bootstrap}
        for client, measure in (("librdkafka", rebalance_latencies), ("java", java_group_joins)):
            if client == "librdkafka" and args.only_java:
                continue
            for partitions in sizes:
                _joins(brokers, client, measure, partitions, members, repeat)
        rates: dict[str, float] = {}
        for name, bootstrap in brokers.items():
            with Admin(bootstrap) as admin:
                admin.create_topic("group-consume", 6)
            with Producer(bootstrap, batch_bytes=1000 * 240, linger_ms=20) as producer:
                for i in range(consume_count):
                    producer.send("group-consume", b"x" * 200, partition=i % 6)
                producer.flush()
            if args.only_java:
                continue
            rates[name] = statistics.median(group_consume_rate(bootstrap, "group-consume", consume_count)
                                            for _ in range(repeat))  # fmt: skip
            print(f"{name:9} group consume (3 members, 6 partitions): {rates[name]:,.0f} msgs/s")
            result(f"group_consume_{name}", rates[name], "msgs/s")
        if rates:
            result("group_consume_ratio", rates["kafkalog"] / rates["kafka4"], "x")
        java: dict[str, tuple[float, float]] = {}
        for name, bootstrap in brokers.items():
            runs = [java_consumer_perf(bootstrap, "group-consume", consume_count, root / "log4j2.properties")
                    for _ in range(repeat)]  # fmt: skip
            java[name] = (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs))
            print(f"{name:9} Java ConsumerPerformance: join {java[name][0]:.0f} ms, {java[name][1]:,.0f} msgs/s")
            result(f"java_join_{name}", java[name][0], "ms")
            result(f"java_consume_{name}", java[name][1], "msgs/s")
        result("java_join_ratio", java["kafka4"][0] / java["kafkalog"][0], "x")
        result("java_consume_ratio", java["kafkalog"][1] / java["kafka4"][1], "x")
    finally:
        ours.stop()
        kafka4.stop()
        shutil.rmtree(root, ignore_errors=True)
    print_results()
    return 0


if __name__ == "__main__":
    sys.exit(main())
