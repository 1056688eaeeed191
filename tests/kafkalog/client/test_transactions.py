"""Our transactional producer against a real broker (the ``cluster`` fixture's parameter: Apache Kafka
4.x, and kafkalog): committed transactions are read by read-committed consumers (ours and librdkafka's),
aborted ones never; a second producer with the same transactional id fences the first; offsets sent
to a transaction are the group's only once it commits; an abort drops what was not sent; a
timeout the coordinator refuses is fatal."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import confluent_kafka
import pytest

from kafkalog.client import Admin, Producer, SimpleConsumer
from kafkalog.client.offsets import OffsetsClient
from kafkalog.errors import (
    AbortableTransactionError,
    FatalTransactionError,
    ProducerFencedError,
)

pytestmark = pytest.mark.integration


@pytest.fixture(params=["kafkalog_shared", "kafka4"])
def cluster(request: pytest.FixtureRequest) -> str:
    """The bootstrap address of the broker under test."""
    return str(request.getfixturevalue(request.param).bootstrap)


@pytest.fixture
def topic(cluster: str) -> str:
    name = f"txn-{uuid.uuid4().hex[:8]}"
    with Admin(cluster) as admin:
        admin.create_topic(name, 2)
    return name


@pytest.fixture
def producer(cluster: str) -> Iterator[Producer]:
    with Producer(cluster, transactional_id=f"tid-{uuid.uuid4().hex[:8]}", linger_ms=0) as made:
        made.init_transactions()
        yield made


def committed_values(cluster: str, topic: str, partition: int, wanted: int, timeout: float = 20.0) -> list[bytes]:
    """What a read-committed consumer of ours reads of the partition once ``wanted`` messages are
    readable (the coordinator writes the markers after it answered EndTxn)."""
    deadline = time.monotonic() + timeout
    with SimpleConsumer(cluster, isolation="read_committed") as consumer:
        while True:
            end = consumer.latest_offset(topic, partition)
            values = [m.value or b"" for m in consumer.messages(topic, partition, 0, end)]
            if len(values) >= wanted or time.monotonic() > deadline:
                return values
            time.sleep(0.2)


def test_committed_transactions_are_read_and_aborted_ones_are_not(producer: Producer, cluster: str, topic: str) -> None:
    producer.begin_transaction()
    futures = [producer.send(topic, f"c{i}".encode(), partition=0) for i in range(3)]
    producer.send(topic, b"other", partition=1)
    producer.commit_transaction()
    assert [f.result(0).offset for f in futures] == [0, 1, 2]  # committed means sent

    producer.begin_transaction()
    aborted = producer.send(topic, b"aborted", partition=0)
    producer.flush()
    assert aborted.result(0).offset == 4  # written (after the commit marker at 3), then aborted
    producer.abort_transaction()

    producer.begin_transaction()
    producer.send(topic, b"c3", partition=0)
    producer.commit_transaction()

    assert committed_values(cluster, topic, 0, 4) == [b"c0", b"c1", b"c2", b"c3"]
    assert committed_values(cluster, topic, 1, 1) == [b"other"]
    with SimpleConsumer(cluster) as everything:  # reading uncommitted: the aborted message is there
        values = [m.value for m in everything.messages(topic, 0, 0, everything.latest_offset(topic, 0))]
        assert b"aborted" in values

    theirs = confluent_kafka.Consumer(
        {
            "bootstrap.servers": cluster,
            "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        theirs.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        read: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(read) < 4 and time.monotonic() < deadline:
            message = theirs.poll(0.5)
            if message is not None and message.error() is None:
                read.append(message.value())
        assert read == [b"c0", b"c1", b"c2", b"c3"]
    finally:
        theirs.close()


def test_a_transaction_with_nothing_sent_commits_and_aborts_without_the_coordinator(producer: Producer) -> None:
    producer.begin_transaction()
    producer.commit_transaction()
    producer.begin_transaction()
    producer.abort_transaction()
    producer.begin_transaction()  # ready again each time


def test_abort_drops_what_was_not_sent(cluster: str, topic: str) -> None:
    with Producer(cluster, transactional_id=f"tid-{uuid.uuid4().hex[:8]}", linger_ms=60_000) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        waiting = [producer.send(topic, f"w{i}".encode(), partition=0) for i in range(5)]
        producer.abort_transaction()
        for future in waiting:
            assert isinstance(future.exception(5), AbortableTransactionError)
        producer.begin_transaction()  # the producer goes on
        kept = producer.send(topic, b"kept", partition=0)
        producer.commit_transaction()
        assert kept.result(0).offset == 0  # nothing of the aborted transaction reached the log
    assert committed_values(cluster, topic, 0, 1) == [b"kept"]


def test_a_second_producer_with_the_transactional_id_fences_the_first(cluster: str, topic: str) -> None:
    transactional_id = f"tid-{uuid.uuid4().hex[:8]}"
    with Producer(cluster, transactional_id=transactional_id, linger_ms=0) as zombie:
        zombie.init_transactions()
        zombie.begin_transaction()
        zombie.send(topic, b"zombie", partition=0).result(10)
        with Producer(cluster, transactional_id=transactional_id, linger_ms=0) as successor:
            successor.init_transactions()  # aborts the zombie's open transaction
            assert successor.producer_id == zombie.producer_id
            with pytest.raises(ProducerFencedError, match="another producer has this transactional id"):
                zombie.commit_transaction()
            with pytest.raises(ProducerFencedError):  # and for good
                zombie.begin_transaction()
            successor.begin_transaction()
            successor.send(topic, b"successor", partition=0)
            successor.commit_transaction()
    assert committed_values(cluster, topic, 0, 1) == [b"successor"]


def test_offsets_sent_to_a_transaction_are_the_groups_once_it_commits(
    producer: Producer, cluster: str, topic: str
) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    with OffsetsClient(cluster) as offsets:
        producer.begin_transaction()
        producer.send(topic, b"out", partition=1)
        producer.send_offsets_to_transaction({(topic, 0): 7}, group)
        assert offsets.fetch(group, [(topic, 0)]) == {(topic, 0): None}  # not before the commit
        producer.commit_transaction()
        deadline = time.monotonic() + 20
        while offsets.fetch(group, [(topic, 0)])[(topic, 0)] is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert offsets.fetch(group, [(topic, 0)]) == {(topic, 0): 7}

        producer.begin_transaction()
        producer.send_offsets_to_transaction({(topic, 0): 9}, group)
        producer.abort_transaction()
        time.sleep(1)  # the abort's markers
        assert offsets.fetch(group, [(topic, 0)]) == {(topic, 0): 7}


def test_a_transaction_timeout_over_the_brokers_limit_is_fatal(cluster: str) -> None:
    # Kafka's transaction.max.timeout.ms is 15 minutes by default
    with Producer(
        cluster, transactional_id=f"tid-{uuid.uuid4().hex[:8]}", transaction_timeout_ms=3_600_000
    ) as producer:
        with pytest.raises(FatalTransactionError, match="INVALID_TRANSACTION_TIMEOUT"):
            producer.init_transactions()
        with pytest.raises(FatalTransactionError):
            producer.begin_transaction()


def test_a_transaction_left_open_past_its_timeout_is_aborted_by_the_coordinator(cluster: str, topic: str) -> None:
    with Producer(
        cluster, transactional_id=f"tid-{uuid.uuid4().hex[:8]}", transaction_timeout_ms=1_000, linger_ms=0
    ) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"late", partition=0).result(10)
        # the coordinator aborts it at its next look (transaction.abort.timed.out.transaction.cleanup.interval.ms,
        # 10 s by default): its abort marker lets the last stable offset past it
        with SimpleConsumer(cluster, isolation="read_committed") as committed:
            deadline = time.monotonic() + 30
            while committed.latest_offset(topic, 0) < 2 and time.monotonic() < deadline:
                time.sleep(0.5)
            assert committed.latest_offset(topic, 0) == 2  # "late" at 0, the abort marker at 1
        with pytest.raises(ProducerFencedError):  # the coordinator bumped the epoch as it aborted
            producer.commit_transaction()
    assert committed_values(cluster, topic, 0, 1, timeout=3) == []


def test_the_group_consumer_and_the_command_line_read_committed(producer: Producer, cluster: str, topic: str) -> None:
    from click.testing import CliRunner  # only this test drives the command line

    from kafkalog.cli.main import main
    from kafkalog.client.group_consumer import GroupConsumer

    for value, commit in ((b"c0", True), (b"a0", False), (b"c1", True)):
        producer.begin_transaction()
        producer.send(topic, value, partition=0)
        producer.flush()  # written, then aborted (an abort drops what was not sent)
        producer.commit_transaction() if commit else producer.abort_transaction()
    assert committed_values(cluster, topic, 0, 2) == [b"c0", b"c1"]

    shown = CliRunner().invoke(
        main, ["consume", "-b", cluster, topic, "-p", "0", "--isolation", "read_committed", "-q"]
    )
    assert shown.exit_code == 0, shown.output
    assert shown.output.splitlines() == ["c0", "c1"]
    everything = CliRunner().invoke(main, ["consume", "-b", cluster, topic, "-p", "0", "-q"])
    assert everything.exit_code == 0 and "a0" in everything.output.splitlines()

    with GroupConsumer(
        group=f"g-{uuid.uuid4().hex[:8]}", bootstrap=cluster, auto_offset_reset="smallest",
        isolation="read_committed", stream_timeout_s=5,
    ) as consumer:  # fmt: skip
        (stream,) = consumer.create_message_streams({topic: 1})[topic]
        read = [m.value for m in stream if m.partition == 0]
    assert read == [b"c0", b"c1"]


def test_a_waiting_read_committed_fetch_answers_when_the_transaction_commits(cluster: str, topic: str) -> None:
    """A fetch parked for data below the last stable offset wakes when the marker moves it, not at
    the end of its wait."""
    with Producer(cluster, transactional_id=f"tid-{uuid.uuid4().hex[:8]}", linger_ms=0) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"held", partition=0).result(10)
        with SimpleConsumer(cluster, isolation="read_committed", max_wait_ms=8000) as consumer:
            threading.Timer(1.0, producer.commit_transaction).start()
            began = time.monotonic()
            result = consumer.fetch(topic, 0, 0)
            waited = time.monotonic() - began
    assert [m.value for m in result.messages] == [b"held"]
    assert 0.5 < waited < 6.0, f"the fetch answered after {waited:.1f} s"
