"""The mirror from a source written by librdkafka's transactional producer (confluent-kafka), on
kafkalog (by bootstrap, and registered in ZooKeeper: the group source) and on Apache Kafka 4.x, into
a kafkalog target. The oracle: the target holds exactly the committed records (keys, values,
headers, timestamps), in their source order per partition, and nothing else (read uncommitted: no
marker, no aborted record); the mirror's committed source offsets are the source's log end, past
the trailing marker; a restart repeats nothing."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import confluent_kafka
import pytest

from kafkalog.client import Admin, Producer, SimpleConsumer
from kafkalog.client.offsets import OffsetsClient
from kafkalog.topics import TopicPartition
from tests.support.kafkalog import BrokerProcess

from .test_mirror import MirrorProcess, wait_for

pytestmark = pytest.mark.integration

PARTITIONS = 2
Headers = tuple[tuple[str, bytes | None], ...]
Record = tuple[bytes, bytes, Headers, int]
"""(key, value, headers, timestamp) of one record, as the target should hold it."""


@dataclass(frozen=True)
class Source:
    """A source cluster under test: where producers write, how the mirror names it, and where the
    mirror's group keeps its committed offsets."""

    bootstrap: str
    mirror_arg: str
    committed: Callable[[str, list[TopicPartition]], dict[TopicPartition, int | None]]


def _committed_in_brokers(bootstrap: str) -> Callable[[str, list[TopicPartition]], dict[TopicPartition, int | None]]:
    def fetch(group: str, partitions: list[TopicPartition]) -> dict[TopicPartition, int | None]:
        with OffsetsClient(bootstrap) as offsets:
            return dict(offsets.fetch(group, partitions))

    return fetch


@pytest.fixture(params=["kafkalog", "kafkalog_zookeeper", "kafka4"])
def source(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Source]:
    if request.param == "kafkalog":
        bootstrap = str(request.getfixturevalue("kafkalog_shared").bootstrap)
        yield Source(bootstrap, bootstrap, _committed_in_brokers(bootstrap))
    elif request.param == "kafka4":
        bootstrap = str(request.getfixturevalue("kafka4").bootstrap)
        yield Source(bootstrap, bootstrap, _committed_in_brokers(bootstrap))
    else:  # a group source: partitions and offsets in the source's ZooKeeper
        zk_factory = request.getfixturevalue("zk_factory")
        connect = f"{zk_factory.connect}/source"
        with BrokerProcess(tmp_path / "source", zookeeper=connect, zookeeper_session_timeout_ms=6000) as broker:
            zk = zk_factory()

            def fetch(group: str, partitions: list[TopicPartition]) -> dict[TopicPartition, int | None]:
                found: dict[TopicPartition, int | None] = {}
                for topic, partition in partitions:
                    path = f"/source/consumers/{group}/offsets/{topic}/{partition}"
                    found[(topic, partition)] = int(zk.get(path)[0]) if zk.exists(path) else None
                return found

            yield Source(broker.bootstrap, f"zk:{connect}", fetch)


@pytest.fixture
def target(tmp_path: Path) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path / "target", default_partitions=PARTITIONS) as broker:
        yield broker


class Writer:
    """librdkafka's transactional producer, and what the target should hold of what it wrote."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.producer = confluent_kafka.Producer({
            "bootstrap.servers": bootstrap, "transactional.id": f"mirror-src-{uuid.uuid4().hex[:8]}",
            "linger.ms": 0, "transaction.timeout.ms": 60_000,
        })  # fmt: skip
        self.producer.init_transactions(30)
        self.expected: dict[int, list[Record]] = {p: [] for p in range(PARTITIONS)}
        self.transactions = 0

    def transaction(self, count: int, *, commit: bool) -> None:
        """``count`` records over both partitions in one transaction, committed or aborted."""
        self.transactions += 1
        tag = b"t%d" % self.transactions
        now = int(time.time() * 1000)
        self.producer.begin_transaction()
        records = []
        for i in range(count):
            partition = i % PARTITIONS
            key, value = tag + b"-k%d" % i, tag + b"-v%d" % i
            headers: Headers = (("txn", tag), ("i", b"%d" % i))
            timestamp = now - 1000 * (count - i)
            self.producer.produce(
                self.topic, value, key, partition=partition, headers=list(headers), timestamp=timestamp
            )
            records.append((partition, (key, value, headers, timestamp)))
        self.producer.flush(10)
        if commit:
            self.producer.commit_transaction(30)
            for partition, record in records:
                self.expected[partition].append(record)
        else:
            self.producer.abort_transaction(30)

    def plain(self, bootstrap: str, count: int) -> None:
        """``count`` records of an idempotent producer of ours, outside any transaction."""
        now = int(time.time() * 1000)
        with Producer(bootstrap, linger_ms=5) as producer:
            for i in range(count):
                partition = i % PARTITIONS
                key, value = b"plain-k%d" % i, b"plain-v%d" % i
                headers: Headers = (("plain", b"%d" % i),)
                producer.send(self.topic, value, key, partition=partition, headers=headers, timestamp=now + i)
                self.expected[partition].append((key, value, headers, now + i))


def held(bootstrap: str, topic: str) -> dict[int, list[Record]]:
    """Every record of ``topic`` read uncommitted (markers and aborted records would show), per
    partition in offset order."""
    with Admin(bootstrap) as admin:
        if topic not in admin.list_topics():
            return {p: [] for p in range(PARTITIONS)}
    with SimpleConsumer(bootstrap) as consumer:
        return {
            p: [
                (m.key or b"", m.value or b"", tuple(m.headers), m.timestamp)
                for m in consumer.messages(topic, p, 0, consumer.latest_offset(topic, p))
            ]
            for p in range(PARTITIONS)
        }


def log_ends(bootstrap: str, topic: str) -> dict[TopicPartition, int]:
    """The log ends once every transaction's markers are written: Kafka writes them after it
    answered EndTxn, so the end read at once can be short of the trailing markers."""
    partitions = [(topic, p) for p in range(PARTITIONS)]
    deadline = time.monotonic() + 30
    with SimpleConsumer(bootstrap, isolation="read_committed") as consumer:
        while True:
            ends = consumer.log_end_offsets(partitions)
            if consumer.latest_offsets(partitions) == ends:
                return ends
            assert time.monotonic() < deadline, f"markers never written: log ends {ends}"
            time.sleep(0.1)


def test_committed_transactions_only_reach_the_target_and_a_restart_repeats_nothing(
    source: Source, target: BrokerProcess, tmp_path: Path
) -> None:
    topic = f"txn-mirror-{uuid.uuid4().hex[:8]}"
    group = f"mirror-{topic}"
    with Admin(source.bootstrap) as admin:
        admin.create_topic(topic, PARTITIONS)
    writer = Writer(source.bootstrap, topic)
    writer.transaction(6, commit=True)
    writer.plain(source.bootstrap, 4)  # plain batches between transactions: the fast path
    writer.transaction(4, commit=False)
    writer.transaction(4, commit=True)  # every partition ends in a COMMIT marker
    args = ["--source", source.mirror_arg, "--target", target.bootstrap, "--group", group, "--whitelist", topic]
    partitions = [(topic, p) for p in range(PARTITIONS)]

    def caught_up() -> bool:
        return held(target.bootstrap, topic) == writer.expected and source.committed(group, partitions) == ends

    ends: dict[TopicPartition, int | None] = dict(log_ends(source.bootstrap, topic))
    mirror = MirrorProcess(tmp_path, *args)
    wait_for(caught_up, what="the committed records on the target and the offsets at the log end")
    assert mirror.stop() == 0, mirror.stderr()
    assert held(target.bootstrap, topic) == writer.expected  # nothing else: no marker, no aborted record
    assert source.committed(group, partitions) == ends  # past the trailing markers

    writer.transaction(2, commit=False)
    writer.transaction(4, commit=True)
    ends = dict(log_ends(source.bootstrap, topic))
    again = MirrorProcess(tmp_path, *args)
    wait_for(caught_up, what="the restart to catch up")
    time.sleep(1)  # anything repeated would arrive now
    assert again.stop() == 0, again.stderr()
    assert held(target.bootstrap, topic) == writer.expected, "a restart repeats nothing"
    assert source.committed(group, partitions) == ends
