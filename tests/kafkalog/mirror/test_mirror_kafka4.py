"""The mirror-maker between Apache Kafka 4.x and kafkalog, both ways: record batches forwarded with
their headers and timestamps, the mirror's progress committed to (and resumed from) a Kafka 4.x
source's group offsets, so a restart repeats nothing."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from kafkalog.client import Admin, Producer, SimpleConsumer
from kafkalog.client.offsets import OffsetsClient
from kafkalog.errors import BrokerResponseError
from kafkalog.record import Codec
from tests.support.kafka4 import Kafka4Process
from tests.support.kafkalog import BrokerProcess

from .test_mirror import MirrorProcess

pytestmark = pytest.mark.integration

PARTITIONS = 2
Headers = list[tuple[str, bytes | None]]
Record = tuple[bytes, bytes, Headers, int]
Read = tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int]


@pytest.fixture
def kafkalog_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path / "kafkalog", default_partitions=PARTITIONS) as running:
        yield running


def records(tag: str, start: int, count: int) -> list[Record]:
    """(key, value, headers, timestamp): repeated header keys, a null header value, timestamps of the
    last minute out of order (recent: older ones would fall to retention on either broker)."""
    now = int(time.time() * 1000)
    return [
        (
            b"%s-k%d" % (tag.encode(), i),
            b"%s-v%d" % (tag.encode(), i),
            [("dc", tag.encode()), ("n", b"%d" % i), ("n", None)],
            now - 60_000 + (i * 7919) % 50_000,
        )
        for i in range(start, start + count)
    ]


def produce(bootstrap: str, topic: str, batch: list[Record]) -> None:
    with Producer(bootstrap, compression="zstd", linger_ms=5) as producer:
        for i, (key, value, headers, timestamp) in enumerate(batch):
            producer.send(topic, value, key, partition=i % PARTITIONS, headers=headers, timestamp=timestamp)


def mirrored(bootstrap: str, topic: str) -> list[Read]:
    with SimpleConsumer(bootstrap) as consumer:
        return sorted(
            (m.key, m.value, m.headers, m.timestamp)
            for p in range(PARTITIONS)
            for m in consumer.messages(topic, p, 0, consumer.latest_offset(topic, p))
        )


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def as_read(batch: list[Record]) -> list[Read]:
    return sorted((key, value, tuple(headers), ts) for key, value, headers, ts in batch)


def test_kafka4_into_kafkalog_and_back_and_a_restart_repeats_nothing(
    kafka4: Kafka4Process, kafkalog_broker: BrokerProcess, tmp_path: Path
) -> None:
    topic = f"from-k4-{time.monotonic_ns()}"
    group = f"mirror-{topic}"
    with Admin(kafka4.bootstrap) as admin:
        admin.create_topic(topic, PARTITIONS)
    first = records("k4", 0, 40)
    produce(kafka4.bootstrap, topic, first)
    into_kafkalog = ["--source", kafka4.bootstrap, "--target", kafkalog_broker.bootstrap, "--group", group]
    only = ["--whitelist", topic]

    # Kafka 4.x -> kafkalog: the target topic is created, batches arrive with headers and timestamps
    mirror = MirrorProcess(tmp_path, *into_kafkalog, *only)
    wait_for(lambda: len(mirrored(kafkalog_broker.bootstrap, topic)) >= len(first), "the first mirror run")
    assert mirror.stop() == 0, mirror.stderr()
    assert mirrored(kafkalog_broker.bootstrap, topic) == as_read(first)
    with SimpleConsumer(kafkalog_broker.bootstrap) as consumer:  # the batches forwarded as stored
        assert all(Codec(consumer.fetch(topic, p, 0).codec) == Codec.ZSTD for p in range(PARTITIONS))

    # its progress is the group's offsets on Kafka 4.x (FindCoordinator v4, OffsetCommit/Fetch v8)
    with OffsetsClient(kafka4.bootstrap) as offsets, SimpleConsumer(kafka4.bootstrap) as consumer:
        committed = offsets.fetch(group, [(topic, p) for p in range(PARTITIONS)])
        assert committed == {(topic, p): consumer.latest_offset(topic, p) for p in range(PARTITIONS)}

    second = records("k4", 40, 30)
    produce(kafka4.bootstrap, topic, second)
    again = MirrorProcess(tmp_path, *into_kafkalog, *only)
    wait_for(lambda: len(mirrored(kafkalog_broker.bootstrap, topic)) >= len(first) + len(second), "the restart")
    time.sleep(1)  # anything repeated would arrive now
    assert again.stop() == 0, again.stderr()
    assert mirrored(kafkalog_broker.bootstrap, topic) == as_read(first + second)  # nothing twice

    # kafkalog -> Kafka 4.x: records produced to kafkalog land on a Kafka 4.x target unchanged, the
    # mirror logging in to Kafka's SASL_SSL listener with its password from the environment
    back_topic = f"from-kafkalog-{time.monotonic_ns()}"
    with Admin(kafkalog_broker.bootstrap) as admin:
        admin.create_topic(back_topic, PARTITIONS)
    third = records("kl", 0, 50)
    for start in range(0, len(third), 10):
        # five batches per partition, so that one fetched set holds several: Kafka takes one batch
        # of a partition per Produce request (more is INVALID_RECORD): each goes in its own request
        produce(kafkalog_broker.bootstrap, back_topic, third[start : start + 10])
    secured = kafka4.secured
    assert secured is not None
    config = tmp_path / "back.yaml"
    config.write_text(yaml.safe_dump({
        "sources": [{"name": "kafkalog", "bootstrap": kafkalog_broker.bootstrap}],
        "target": {"name": "kafka4", "bootstrap": secured.bootstrap, "security": {
            "protocol": "SASL_SSL", "mechanism": "SCRAM-SHA-512", "username": secured.user,
            "password": "${env:KAFKA4_PASSWORD}", "ca_file": str(secured.ca_file)}},
        "whitelist": back_topic,
    }))  # fmt: skip
    back = MirrorProcess(tmp_path, "--config", str(config), env={"KAFKA4_PASSWORD": secured.password})
    try:
        wait_for(lambda: _has_topic(kafka4, back_topic, len(third)), "the way back")
    finally:
        assert back.stop() == 0, back.stderr()
    assert mirrored(kafka4.bootstrap, back_topic) == as_read(third)


def _has_topic(kafka4: Kafka4Process, topic: str, count: int) -> bool:
    with Admin(kafka4.bootstrap) as admin:
        if topic not in admin.list_topics():
            return False
    try:
        return len(mirrored(kafka4.bootstrap, topic)) >= count
    except BrokerResponseError as exc:
        if exc.retriable:  # just created by the mirror: its partitions' leaders are still being elected
            return False
        raise
