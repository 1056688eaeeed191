"""subscribe() in the clients of today against a kafkalog broker: one group of three members of
three clients (librdkafka, kafka-python 3, Kafka 4.x's Java console consumer) sharing the range
assignor. Every message consumed, each once, each partition by one member; lag shown by Kafka's
``kafka-consumer-groups --describe``; a SIGKILLed member's partitions taken over by the others
after its session timeout, read again only from its last commit on. And Kafka 4's new consumer
protocol (``group.protocol=consumer``, KIP-848), which kafkalog does not serve, fails with the
client's own error naming the classic protocol."""

from __future__ import annotations

import re
import subprocess
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import confluent_kafka
import confluent_kafka.admin
import pytest

from kafkalog.client import Admin, Producer
from kafkalog.client.offsets import OffsetsClient
from tests.support.installed import KAFKA4_LIBS
from tests.support.kafka4 import CONSOLE_CONSUMER, CONSUMER_GROUPS, TOOL_LOG4J, run_tool
from tests.support.kafkalog import KAFKALOG, BrokerProcess
from tests.support.processes import spawn, stop_group

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka  # type: ignore[import-untyped]
    from kafka.coordinator.assignors.range import RangePartitionAssignor  # type: ignore[import-untyped]

pytestmark = pytest.mark.integration

PARTITIONS = 6
SESSION_MS = 6000
Consumed = tuple[int, int]
"""(partition, offset)"""


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    root = tmp_path_factory.mktemp("kafkalog-group-clients")
    with BrokerProcess(root / "data", groups={"initial_rebalance_delay_ms": 0}) as running:
        yield running


@dataclass
class PythonMember:
    """A librdkafka or kafka-python consumer polling in a thread."""

    name: str
    got: list[Consumed] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def start(self, poll: Callable[[], list[Consumed]], close: Callable[[], None]) -> PythonMember:
        def run() -> None:
            try:
                while not self.stop.is_set():
                    self.got.extend(poll())
            finally:
                close()  # commits and leaves the group

        self.thread = threading.Thread(target=run, name=self.name, daemon=True)
        self.thread.start()
        return self

    def close(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(30)


def librdkafka_member(bootstrap: str, group: str, topic: str) -> PythonMember:
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "auto.commit.interval.ms": 300,
            "session.timeout.ms": SESSION_MS,
            "heartbeat.interval.ms": 500,
            "partition.assignment.strategy": "range",
        }
    )
    consumer.subscribe([topic])

    def poll() -> list[Consumed]:
        message = consumer.poll(0.2)
        if message is None or message.error():
            return []
        return [(message.partition(), message.offset())]

    return PythonMember("librdkafka").start(poll, consumer.close)


def kafka_python_member(bootstrap: str, group: str, topic: str) -> PythonMember:
    consumer = kafka.KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        auto_commit_interval_ms=300,
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=500,
        partition_assignment_strategy=[RangePartitionAssignor],
    )

    def poll() -> list[Consumed]:
        batches = consumer.poll(timeout_ms=200)
        return [(r.partition, r.offset) for records in batches.values() for r in records]

    return PythonMember("kafka-python").start(poll, consumer.close)


class JavaMember:
    """Kafka 4.x's console consumer in the group (its own process, so it can be SIGKILLed)."""

    def __init__(self, bootstrap: str, group: str, topic: str, root: Path) -> None:
        self.output = root / "java-member.out"
        log4j = root / "java-log4j2.properties"
        log4j.write_text(TOOL_LOG4J)
        argv = [
            "java", "-Xmx256m", f"-Dlog4j2.configurationFile={log4j}", "-cp", f"{KAFKA4_LIBS}/*", CONSOLE_CONSUMER,
            "--bootstrap-server", bootstrap, "--topic", topic, "--group", group, "--from-beginning",
            "--formatter-property", "print.partition=true", "--formatter-property", "print.offset=true",
            "--consumer-property", f"session.timeout.ms={SESSION_MS}",
            "--consumer-property", "heartbeat.interval.ms=500",
            "--consumer-property", "auto.commit.interval.ms=300",
            "--consumer-property", "partition.assignment.strategy=org.apache.kafka.clients.consumer.RangeAssignor",
        ]  # fmt: skip
        with self.output.open("wb") as out:
            self.process = spawn(argv, log=root / "java-member.log", stdout=out.fileno())

    @property
    def got(self) -> list[Consumed]:
        found = re.findall(r"Partition:(\d+)\s+Offset:(\d+)", self.output.read_text(errors="replace"))
        return [(int(p), int(o)) for p, o in found]

    def close(self) -> None:
        stop_group(self.process)  # SIGTERM: the consumer commits and leaves in its shutdown hook

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(10)


def wait_until(condition: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def members_of(bootstrap: str, group: str) -> int:
    """The members of a stable group, as librdkafka's admin client describes it (DescribeGroups)."""
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    description = admin.describe_consumer_groups([group])[group].result(timeout=30)
    if description.state != confluent_kafka.ConsumerGroupState.STABLE:
        return 0
    return len(description.members)


def produce(bootstrap: str, topic: str, numbers: range) -> list[Consumed]:
    with Producer(bootstrap, linger_ms=5) as producer:
        futures = [producer.send(topic, b"%d" % i, partition=i % PARTITIONS) for i in numbers]
        producer.flush()
        return [(f.result().partition, f.result().offset) for f in futures]


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    with OffsetsClient(bootstrap) as offsets:
        found = offsets.fetch(group, [(topic, p) for p in range(PARTITIONS)])
    return {p: found[(topic, p)] or 0 for p in range(PARTITIONS)}


def test_a_group_of_three_clients(broker: BrokerProcess, tmp_path: Path) -> None:
    topic, group = "mixed", "mixed-group"
    with Admin(broker.bootstrap) as admin:
        admin.create_topic(topic, PARTITIONS)
    java = JavaMember(broker.bootstrap, group, topic, tmp_path)
    members: list[PythonMember] = []
    try:
        wait_until(lambda: members_of(broker.bootstrap, group) == 1, 60, "the Java consumer's group")
        members.append(librdkafka_member(broker.bootstrap, group, topic))
        members.append(kafka_python_member(broker.bootstrap, group, topic))
        wait_until(lambda: members_of(broker.bootstrap, group) == 3, 60, "a group of three")
        written = produce(broker.bootstrap, topic, range(600))
        ends = {p: sum(1 for q, _ in written if q == p) for p in range(PARTITIONS)}
        wait_until(lambda: committed(broker.bootstrap, group, topic) == ends, 60, "everything committed")
        by_member = {"java": java.got, **{m.name: list(m.got) for m in members}}
        everything = [pair for got in by_member.values() for pair in got]
        assert sorted(everything) == sorted(written)  # each message once
        partitions_of = {name: {p for p, _ in got} for name, got in by_member.items()}
        assert all(len(parts) == 2 for parts in partitions_of.values()), partitions_of  # range: 2 each
        assert set.union(*partitions_of.values()) == set(range(PARTITIONS))

        # lag as Kafka's own tool sees it (DescribeGroups, OffsetFetch, ListOffsets): every
        # partition with its committed offset, log end offset and lag
        describe = run_tool(
            CONSUMER_GROUPS, "--bootstrap-server", broker.bootstrap, "--describe", "--group", group,
            log4j=tmp_path / "tool-log4j2.properties",
        ).stdout.decode()  # fmt: skip
        rows = [line.split() for line in describe.splitlines() if line.startswith(group)]
        assert sorted(int(row[2]) for row in rows) == list(range(PARTITIONS)), describe
        assert all(row[3] == row[4] and row[5] == "0" for row in rows), describe  # offset = end, lag 0

        # the Java member is SIGKILLed: after its session timeout the others take its partitions
        javas = partitions_of["java"]
        last_commit = committed(broker.bootstrap, group, topic)
        java.kill()
        more = produce(broker.bootstrap, topic, range(600, 900))
        ends = {p: ends[p] + sum(1 for q, _ in more if q == p) for p in range(PARTITIONS)}
        wait_until(lambda: committed(broker.bootstrap, group, topic) == ends, 60, "the rest consumed")
        after = [pair for m in members for pair in m.got]
        assert {pair for pair in after if pair[0] in javas} >= {pair for pair in more if pair[0] in javas}
        everything = java.got + after
        assert set(everything) == set(written + more)
        twice = {pair for pair in everything if everything.count(pair) > 1}
        assert all(p in javas and o >= last_commit[p] for p, o in twice), twice  # only what it had not committed

        # kafka-python leaves cleanly (commits, LeaveGroup): librdkafka takes everything, repeating nothing
        rdkafka, leaving = members
        leaving.close()
        before = set(rdkafka.got)
        latest = produce(broker.bootstrap, topic, range(900, 1200))
        ends = {p: ends[p] + sum(1 for q, _ in latest if q == p) for p in range(PARTITIONS)}
        wait_until(lambda: committed(broker.bootstrap, group, topic) == ends, 60, "the last messages consumed")
        taken_over = [pair for pair in rdkafka.got if pair not in before]
        assert sorted(taken_over) == sorted(latest)  # all of them, and nothing kafka-python had consumed
    finally:
        java.close()
        for member in members:
            member.close()


def test_command_line_members_share_a_group_through_the_broker(broker: BrokerProcess, tmp_path: Path) -> None:
    topic, group = "cli-members", "cli-group"
    with Admin(broker.bootstrap) as admin:
        admin.create_topic(topic, PARTITIONS)
    argv = [
        str(KAFKALOG), "consume", "-b", broker.bootstrap, "--group", group, "--topic", topic,
        "--offset-reset", "smallest", "--print-offsets", "--idle-timeout", "8", "--session-timeout", "6", "-q",
    ]  # fmt: skip
    members = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    wait_until(lambda: members_of(broker.bootstrap, group) == 2, 60, "a group of two")
    written = produce(broker.bootstrap, topic, range(300))
    outputs = [member.communicate(timeout=120) for member in members]
    assert [member.returncode for member in members] == [0, 0], [err.decode() for _, err in outputs]
    printed = [
        [(int(p), int(o)) for _, p, o, _ in (line.split(b"\t", 3) for line in out.splitlines())] for out, _ in outputs
    ]
    assert sorted(printed[0] + printed[1]) == sorted(written)  # each message once, by one of them
    assert all(printed), "both members consumed"  # they shared the partitions
    assert committed(broker.bootstrap, group, topic) == dict.fromkeys(range(PARTITIONS), 50)


def test_the_new_consumer_protocol_is_refused_naming_the_classic_one(broker: BrokerProcess, tmp_path: Path) -> None:
    log4j = tmp_path / "log4j2.properties"
    log4j.write_text(TOOL_LOG4J)
    argv = [
        "java", "-Xmx256m", f"-Dlog4j2.configurationFile={log4j}", "-cp", f"{KAFKA4_LIBS}/*", CONSOLE_CONSUMER,
        "--bootstrap-server", broker.bootstrap, "--topic", "kip848", "--group", "kip848",
        "--consumer-property", "group.protocol=consumer", "--timeout-ms", "10000",
    ]  # fmt: skip
    result = subprocess.run(argv, capture_output=True, timeout=120, check=False)
    stderr = result.stderr.decode(errors="replace")
    assert "Set group.protocol=classic" in stderr, stderr[-3000:]


def test_librdkafka_static_members_restart_without_a_rebalance(broker: BrokerProcess) -> None:
    topic, group = "static", "static-group"
    with Admin(broker.bootstrap) as admin:
        admin.create_topic(topic, PARTITIONS)
    assignments: dict[str, list[set[int]]] = {"a": [], "b": []}

    def member(name: str) -> confluent_kafka.Consumer:
        consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": broker.bootstrap, "group.id": group,
                "group.instance.id": f"instance-{name}", "session.timeout.ms": SESSION_MS,
                "heartbeat.interval.ms": 500, "partition.assignment.strategy": "range",
            }
        )  # fmt: skip
        consumer.subscribe([topic], on_assign=lambda _, parts: assignments[name].append({p.partition for p in parts}))
        return consumer

    def poll_until(condition: Callable[[], bool], *consumers: confluent_kafka.Consumer, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, f"timed out: {assignments}"
            for consumer in consumers:
                consumer.poll(0.05)

    a = member("a")  # alone first, so a leads: a restarting leader rebalances by design (docs/broker.md)
    poll_until(lambda: len(assignments["a"]) == 1, a)
    b = member("b")
    try:
        # the shares split the topic: b's assignment may reach b before a's smaller one reaches a
        poll_until(lambda: bool(assignments["a"]) and bool(assignments["b"]) and
                   not assignments["a"][-1] & assignments["b"][-1] and
                   len(assignments["a"][-1] | assignments["b"][-1]) == PARTITIONS, a, b)  # fmt: skip
        b_share, a_count = assignments["b"][-1], len(assignments["a"])
        b.close()  # a static member leaves no LeaveGroup: its place is kept for its session timeout
        b = member("b")
        poll_until(lambda: len(assignments["b"]) >= 2, a, b)
        assert assignments["b"][-1] == b_share  # the same share back
        deadline = time.monotonic() + 3  # a few heartbeats: a rebalance would reach a by now
        while time.monotonic() < deadline:
            a.poll(0.1)
        assert len(assignments["a"]) == a_count  # a was never rebalanced
    finally:
        a.close()
        b.close()
