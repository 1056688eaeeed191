"""What the ecosystem tests (tests/kafkalog/ecosystem: Kafka Connect, MirrorMaker 2, Kafka Streams,
Kafka's tools on compacted topics) share: a broker of either kind started fresh, a topic's configs
as a broker describes them, and reading a topic to its end.

The tests are written once and run against each broker kind they list: ``kafka4`` (Apache Kafka
4.x, KRaft) and ``kafkalog`` (ours); switching is one parameter. Every check goes through a real
client: topic configs through librdkafka's DescribeConfigs (confluent-kafka), records through
kafkalog's SimpleConsumer reading committed (an aborted transaction of a crashed application is
left out, as Kafka's consumers leave it out).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Literal, TypeVar

from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._config import ConfigResource

from kafkalog.client import SimpleConsumer
from kafkalog.record import Message
from tests.support.kafka4 import Kafka4Process
from tests.support.kafkalog import BrokerProcess

T = TypeVar("T")
BrokerKind = Literal["kafka4", "kafkalog"]
Broker = Kafka4Process | BrokerProcess

KAFKALOG_SETTINGS: dict[str, object] = {
    "transactions": {"abort_check_interval_ms": 200},
    "cleaner": {"backoff_ms": 200, "dedupe_buffer_bytes": 4 * 1024 * 1024},
    "groups": {"initial_rebalance_delay_ms": 0},
}
"""A kafkalog broker of these tests, set as the session Kafka 4.x broker is: a timed-out transaction
(a SIGKILLed Streams application's) aborted within 200 ms of its timeout (Kafka 4.x: a second), a
compacted log that has become dirty enough cleaned within 200 ms (a second), a new group formed
without waiting for more members (both: the default waits 3 s). The cleaner's offset map takes
4 MiB (default 128: the tests' logs have hundreds of keys, and several brokers share a machine)."""


@contextlib.contextmanager
def fresh_broker(kind: BrokerKind, root: Path, **settings: object) -> Iterator[Broker]:
    """A broker of ``kind`` of its own under ``root`` (stopped on exit); ``settings`` override its
    configuration (server.properties keys for kafka4, YAML keys for kafkalog)."""
    if kind == "kafka4":
        with Kafka4Process(root, format_args=(), **settings) as kafka4:
            yield kafka4
    else:
        root.mkdir(parents=True, exist_ok=True)
        with BrokerProcess(root / "data", **{**KAFKALOG_SETTINGS, **settings}) as ours:
            yield ours


def log_of(broker: Broker) -> Path:
    """The broker's log file (for a failure's message)."""
    return broker.log if isinstance(broker, Kafka4Process) else broker.log_path


def topic_configs(bootstrap: str, topic: str) -> dict[str, str]:
    """Every config of ``topic`` as the broker describes it (DescribeConfigs), name → value."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = admin.describe_configs([resource], request_timeout=15)[resource].result(timeout=20)
    return {name: entry.value for name, entry in entries.items()}


def list_topics(bootstrap: str) -> set[str]:
    """Every topic of the broker (internal ones included)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return set(admin.list_topics(timeout=15).topics)


def read_all(bootstrap: str, topic: str) -> dict[int, list[Message]]:
    """Every committed record of ``topic``, by partition, from its start to its last stable offset."""
    with SimpleConsumer(bootstrap, isolation="read_committed") as consumer:
        partitions = consumer.client.topic(topic, refresh=True, wait_ms=10_000).leaders
        ends = consumer.latest_offsets((topic, p) for p in range(len(partitions)))
        starts = consumer.earliest_offsets(ends)
        return {p: list(consumer.messages(topic, p, starts[(topic, p)], ends[(topic, p)])) for (_, p) in ends}


def values(bootstrap: str, topic: str) -> list[str]:
    """The committed values of ``topic``, partition by partition in offset order."""
    return [m.value.decode() for _, messages in sorted(read_all(bootstrap, topic).items()) for m in messages if m.value]


def last_values(bootstrap: str, topic: str) -> dict[str, str]:
    """The last committed value of each key of ``topic`` (what a compacted topic converges to)."""
    latest: dict[str, str] = {}
    for messages in read_all(bootstrap, topic).values():
        for m in messages:
            if m.key is not None and m.value is not None:
                latest[m.key.decode()] = m.value.decode()
    return latest


def eventually(what: str, check: Callable[[], T | None], timeout: float, explain: Callable[[], str]) -> T:
    """``check()`` every 0.25 s until it returns something; AssertionError naming ``what`` with
    ``explain()`` (the last value seen, logs' tails) if ``timeout`` passes first."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found is not None:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not after {timeout:.0f} s\n{explain()}")
        time.sleep(0.25)
