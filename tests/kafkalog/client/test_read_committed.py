"""Our SimpleConsumer reading committed against Apache Kafka 4.x, the topic written by librdkafka's
transactional producer (confluent-kafka): committed transactions are read, aborted ones and every
marker are left out and accounted for, and an open transaction holds the latest offset back (the
last stable offset) until it ends."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest

from kafkalog.client import Admin, Producer, SimpleConsumer
from kafkalog.server import Broker, BrokerConfig
from tests.support.kafka4 import Kafka4Process

pytestmark = pytest.mark.integration


@pytest.fixture
def transactional(kafka4: Kafka4Process) -> Iterator[confluent_kafka.Producer]:
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": kafka4.bootstrap,
            "transactional.id": f"txn-{uuid.uuid4().hex[:8]}",
            "linger.ms": 0,
            "transaction.timeout.ms": 60_000,
        }
    )
    producer.init_transactions(30)
    yield producer
    producer.flush(10)


def transaction(producer: confluent_kafka.Producer, topic: str, values: list[str], *, commit: bool) -> None:
    producer.begin_transaction()
    for value in values:
        producer.produce(topic, value.encode(), partition=0)
    producer.flush(10)
    if commit:
        producer.commit_transaction(30)
    else:
        producer.abort_transaction(30)


def test_committed_data_only_and_an_open_transaction_holds_the_end_back(
    kafka4: Kafka4Process, transactional: confluent_kafka.Producer
) -> None:
    topic = f"txn-{uuid.uuid4().hex[:8]}"
    with Admin(kafka4.bootstrap) as admin:
        admin.create_topic(topic, 1)
    transaction(transactional, topic, ["c0", "c1", "c2"], commit=True)  # offsets 0-2, marker 3
    transaction(transactional, topic, ["a0", "a1"], commit=False)  # 4-5, marker 6
    transaction(transactional, topic, ["c3"], commit=True)  # 7, marker 8
    transactional.begin_transaction()  # left open: 9-10
    for value in ("open0", "open1"):
        transactional.produce(topic, value.encode(), partition=0)
    transactional.flush(10)

    with (
        SimpleConsumer(kafka4.bootstrap, isolation="read_committed") as committed,
        SimpleConsumer(kafka4.bootstrap) as everything,
    ):
        assert committed.log_end_offsets([(topic, 0)]) == {(topic, 0): 11}
        assert committed.latest_offsets([(topic, 0)]) == {(topic, 0): 9}  # the open transaction's first
        assert everything.latest_offset(topic, 0) == 11
        read = list(committed.messages(topic, 0, 0, 9))
        assert [(m.offset, m.value) for m in read] == [(0, b"c0"), (1, b"c1"), (2, b"c2"), (7, b"c3")]
        result = committed.fetch(topic, 0, 0)
        assert [(s.first, s.last, s.reason) for s in result.skipped] == [
            (3, 3, "control"),
            (4, 5, "aborted"),
            (6, 6, "control"),
            (8, 8, "control"),
        ]
        assert result.last_stable_offset == 9 and result.next_offset(0) == 9
        inside = committed.fetch(topic, 0, 5)  # inside the aborted batch 4-5: accounted from 5 on
        assert [(s.first, s.last, s.reason) for s in inside.skipped][:2] == [(5, 5, "aborted"), (6, 6, "control")]
        assert [m.offset for m in inside.messages] == [7]
        # reading uncommitted, every data record is there, and no marker (Kafka's consumers never
        # return a control record): they are skipped as such
        uncommitted = everything.fetch(topic, 0, 0)
        assert [m.offset for m in uncommitted.messages] == [0, 1, 2, 4, 5, 7, 9, 10]
        assert [(s.first, s.reason) for s in uncommitted.skipped] == [(3, "control"), (6, "control"), (8, "control")]
        assert [m.offset for m in everything.messages(topic, 0, 0, 11)] == [0, 1, 2, 4, 5, 7, 9, 10]

        transactional.commit_transaction(30)  # marker 11: the end moves on, once Kafka wrote it
        deadline = time.monotonic() + 30  # the coordinator writes markers after it answered EndTxn
        while committed.latest_offsets([(topic, 0)]) != {(topic, 0): 12}:
            assert time.monotonic() < deadline, committed.latest_offsets([(topic, 0)])
            time.sleep(0.1)
        assert [m.value for m in committed.messages(topic, 0, 9, 12)] == [b"open0", b"open1"]


def test_on_kafkalog_a_topic_without_transactions_reads_the_same_committed(tmp_path: Path) -> None:
    """A kafkalog topic no transactional producer wrote: its last stable offset is its log end, and
    a read-committed consumer reads what a read-uncommitted one does."""
    config = BrokerConfig(port=0, data_dirs=(tmp_path / "broker",), default_partitions=1, metrics_port=0)
    with Broker(config) as broker:
        bootstrap = f"127.0.0.1:{broker.port}"
        with Producer(bootstrap) as producer:
            for i in range(5):
                producer.send("plain", b"%d" % i, partition=0)
        with SimpleConsumer(bootstrap, isolation="read_committed") as committed:
            assert (
                committed.latest_offsets([("plain", 0)])
                == committed.log_end_offsets([("plain", 0)])
                == {("plain", 0): 5}
            )
            assert [m.value for m in committed.messages("plain", 0, 0, 5)] == [b"0", b"1", b"2", b"3", b"4"]
            assert committed.fetch("plain", 0, 0).skipped == ()


def test_an_isolation_level_kafka_does_not_have_is_refused() -> None:
    with pytest.raises(ValueError, match="read_uncommitted or read_committed, not 'read_some'"):
        SimpleConsumer("127.0.0.1:1", isolation="read_some")  # type: ignore[arg-type]
