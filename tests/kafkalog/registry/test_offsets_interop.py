"""Offsets shared between real Kafka clients and the high-level consumer: kafka-python and
confluent-kafka commit through a ZooKeeper-registered kafkalog broker (OffsetCommit), the offsets
land at /consumers/<group>/offsets/<topic>/<partition>, and our group consumer resumes exactly
there; and the reverse."""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest

from kafkalog.client import Admin, Producer
from kafkalog.client.group_consumer import GroupConsumer
from kafkalog.registry.offsets import fetch_offset
from tests.support.kafkalog import BrokerProcess

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # kafka-python uses a deprecated importlib API
    import kafka
    from kafka.structs import OffsetAndMetadata

PARTITIONS = 4
PER_PARTITION = 50


@pytest.fixture
def broker(tmp_path: Path, zk_factory: Callable[..., Any]) -> Iterator[BrokerProcess]:
    connect = zk_factory.connect  # type: ignore[attr-defined]
    with BrokerProcess(tmp_path / "broker", zookeeper=connect, zookeeper_session_timeout_ms=6000) as running:
        with Admin(running.bootstrap) as admin:
            admin.create_topic("events", PARTITIONS)
        with Producer(running.bootstrap) as producer:
            for i in range(PARTITIONS * PER_PARTITION):
                producer.send("events", str(i).encode(), partition=i % PARTITIONS)
            producer.flush()
        yield running


def first_offsets_handed_out(connect: str, group: str) -> dict[int, int]:
    """Join ``group`` with our consumer and return the first offset it hands out per partition."""
    consumer = GroupConsumer(connect, group, auto_offset_reset="smallest", stream_timeout_s=3.0)
    (stream,) = consumer.create_message_streams({"events": 1})["events"]
    first: dict[int, int] = {}
    done = threading.Event()

    def read() -> None:
        for message in stream:
            first.setdefault(message.partition, message.offset)
        done.set()

    threading.Thread(target=read, daemon=True).start()
    assert done.wait(60)
    consumer.close()
    return first


def test_offsets_committed_by_kafka_python_are_where_our_group_resumes(
    broker: BrokerProcess, zk_factory: Callable[..., Any]
) -> None:
    consumer = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="kp", enable_auto_commit=False)
    partitions = [kafka.TopicPartition("events", p) for p in range(PARTITIONS)]
    consumer.assign(partitions)
    consumer.commit({tp: OffsetAndMetadata(10 + tp.partition, "", -1) for tp in partitions})
    consumer.close()
    zk = zk_factory()
    assert [fetch_offset(zk, "kp", "events", p) for p in range(PARTITIONS)] == [10, 11, 12, 13]
    assert first_offsets_handed_out(zk_factory.connect, "kp") == {0: 10, 1: 11, 2: 12, 3: 13}  # type: ignore[attr-defined]
    # and our consumer's own commit on leaving is the end of what it read
    assert [fetch_offset(zk, "kp", "events", p) for p in range(PARTITIONS)] == [PER_PARTITION] * PARTITIONS


def test_offsets_committed_by_confluent_kafka_are_where_our_group_resumes(
    broker: BrokerProcess, zk_factory: Callable[..., Any]
) -> None:
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "ck", "enable.auto.commit": False}
    )
    offsets = [confluent_kafka.TopicPartition("events", p, 20 + p) for p in range(PARTITIONS)]
    consumer.assign(offsets)
    consumer.commit(offsets=offsets, asynchronous=False)
    consumer.close()
    zk = zk_factory()
    assert [fetch_offset(zk, "ck", "events", p) for p in range(PARTITIONS)] == [20, 21, 22, 23]
    assert first_offsets_handed_out(zk_factory.connect, "ck") == {0: 20, 1: 21, 2: 22, 3: 23}  # type: ignore[attr-defined]


def test_real_clients_resume_where_our_group_committed(broker: BrokerProcess, zk_factory: Callable[..., Any]) -> None:
    ours = GroupConsumer(zk_factory(), "shared", auto_offset_reset="smallest", stream_timeout_s=3.0)
    (stream,) = ours.create_message_streams({"events": 1})["events"]
    for taken, _ in enumerate(stream, start=1):  # everything, then a clean close (it commits what was handed out)
        if taken == PARTITIONS * PER_PARTITION:
            break
    ours.close()
    zk = zk_factory()
    assert [fetch_offset(zk, "shared", "events", p) for p in range(PARTITIONS)] == [PER_PARTITION] * PARTITIONS
    with Producer(broker.bootstrap) as producer:  # more arrives after our group left
        for p in range(PARTITIONS):
            producer.send("events", f"late-{p}".encode(), partition=p)
        producer.flush()

    kp = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="shared", enable_auto_commit=False)
    partitions = [kafka.TopicPartition("events", p) for p in range(PARTITIONS)]
    kp.assign(partitions)
    assert [kp.committed(tp) for tp in partitions] == [PER_PARTITION] * PARTITIONS
    late = []
    deadline = time.monotonic() + 20
    while len(late) < PARTITIONS and time.monotonic() < deadline:
        for records in kp.poll(timeout_ms=500).values():
            late += [(r.partition, r.offset, r.value) for r in records]
    kp.close()
    assert sorted(late) == [(p, PER_PARTITION, f"late-{p}".encode()) for p in range(PARTITIONS)]

    ck = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "shared"})
    committed = ck.committed([confluent_kafka.TopicPartition("events", p) for p in range(PARTITIONS)], timeout=10)
    ck.close()
    assert [c.offset for c in committed] == [PER_PARTITION] * PARTITIONS
