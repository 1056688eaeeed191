"""Transactions (KIP-98) with the clients of today, each test against Apache Kafka 4.x (the
reference: ``kafka4``) and against kafkalog (``kafkalog``), the broker being the test's parameter:

- Three transactional producers (Kafka 4.x's Java producer, librdkafka, kafka-python 3) each commit
  some transactions and abort others; four consumers (the Java consumer, librdkafka, kafka-python,
  our SimpleConsumer) read exactly the committed records reading committed, every data record
  reading uncommitted, and never a marker as a record.
- Consume-transform-produce with librdkafka: the group's offset sent with a transaction is
  committed with it, not before, and never with an aborted one.
- Zombie fencing: a second producer of the same transactional id fences the first, whose commit
  fails; only the second's records are committed.
- A producer SIGKILLed inside a transaction holds read-committed consumers at its first offset
  (the last stable offset), committed transactions of another producer behind it, until the
  coordinator aborts it at its timeout; then they read on.
- Kafka's own ``kafka-transactions`` tool: list, describe, describe-producers, find-hanging and
  abort of an open transaction.

Every client call is bounded (tests.support.transactions): a broker that refuses transactions
fails these tests with an assertion naming the client and its error, never a hang.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import confluent_kafka
import pytest

from kafkalog.client import Admin, SimpleConsumer
from kafkalog.client.offsets import OffsetsClient
from tests.support.kafkalog import BrokerProcess
from tests.support.transactions import (
    CALL_TIMEOUT,
    READERS,
    Isolation,
    JavaStep,
    Plan,
    layout,
    librdkafka_producer,
    open_and_kill,
    produce_kafka_python,
    produce_librdkafka,
    read_librdkafka,
    read_ours,
    run_java,
    send_all,
    transactions_tool,
    visible,
)

pytestmark = pytest.mark.integration

PLAN: Plan = (("c", 3), ("a", 2), ("c", 2), ("a", 1), ("c", 1))
"""Ends with a commit, so a reader that reached the last committed record has passed every aborted one."""
WRITERS = ("librdkafka", "kafka-python", "java")
ISOLATIONS: tuple[Isolation, ...] = ("read_committed", "read_uncommitted")
HANGING_TIMEOUT_MS = 4000
"""The killed producer's transaction.timeout.ms: short, so the coordinator aborts it soon, and long
enough that the test has looked at the held-back consumer before (a loaded 2-core machine)."""


@dataclass(frozen=True)
class Peer:
    """The broker under test: its name (the test's parameter), where it listens, its node id."""

    name: str
    bootstrap: str
    broker_id: int
    log4j: Path
    """The log4j2 settings of the Java clients and tools run against it."""


@pytest.fixture(scope="module", params=["kafka4", "kafkalog"])
def peer(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Peer]:
    """The session's Apache Kafka 4.x broker (node 1), or a kafkalog broker of this module (node 0)."""
    root = tmp_path_factory.mktemp(f"transactions-{request.param}")
    if request.param == "kafka4":
        kafka4 = request.getfixturevalue("kafka4")
        yield Peer("kafka4", kafka4.bootstrap, 1, root / "log4j2.properties")
        return
    with BrokerProcess(root / "data", default_partitions=1) as running:
        yield Peer("kafkalog", running.bootstrap, 0, root / "log4j2.properties")


def new_topic(peer: Peer, prefix: str) -> str:
    """A new topic of one partition (unique: the Kafka 4.x broker lives for the whole run)."""
    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    with Admin(peer.bootstrap) as admin:
        admin.create_topic(topic, 1)
    return topic


@dataclass
class Written:
    """What the three producers wrote (a topic each) and what the Java consumer read of it."""

    topics: dict[str, str]
    failures: dict[str, str] = field(default_factory=dict)
    """A producer's first error, by writer."""
    java_reads: dict[tuple[str, Isolation], JavaStep] = field(default_factory=dict)


@pytest.fixture(scope="module")
def written(peer: Peer) -> Written:
    """PLAN written by each producer into its own topic; then, in the same JVM as the Java producer,
    the Java consumer's reads of every topic, both isolation levels (one JVM start for all)."""
    done = Written({writer: new_topic(peer, f"txn-{writer}") for writer in WRITERS})
    run = uuid.uuid4().hex[:8]
    for writer, produce in (("librdkafka", produce_librdkafka), ("kafka-python", produce_kafka_python)):
        try:
            produce(peer.bootstrap, f"{writer}-{run}", done.topics[writer], PLAN)
        except AssertionError as e:
            done.failures[writer] = str(e)
    plan = ",".join(f"{end}{count}" for end, count in PLAN)
    # what a producer failed to write is not waited for (the Java producer's own topic: see the program)
    reads = [(writer, isolation) for writer in WRITERS for isolation in ISOLATIONS if writer not in done.failures]
    steps = [f"produce:java-{run}:{done.topics['java']}:{plan}"] + [
        f"consume:{done.topics[writer]}:{isolation}:{len(visible(layout(writer, PLAN), isolation))}"
        for writer, isolation in reads
    ]
    produced, *consumed = run_java(peer.bootstrap, steps, peer.log4j)
    if produced.error is not None:
        done.failures["java"] = f"the Java producer failed: {produced.error}"
    done.java_reads = dict(zip(reads, consumed, strict=True))
    return done


@pytest.mark.parametrize("writer", WRITERS)
def test_each_transactional_producer_commits_and_aborts(peer: Peer, written: Written, writer: str) -> None:
    assert writer not in written.failures, f"on {peer.name}: {written.failures[writer]}"
    with SimpleConsumer(peer.bootstrap, request_timeout_ms=10_000) as consumer:
        end = consumer.latest_offset(written.topics[writer], 0)
    assert end == sum(count + 1 for _, count in PLAN)  # every record and one marker a transaction


@pytest.mark.parametrize("reader", ["java", "librdkafka", "kafka-python", "ours"])
def test_readers_see_the_committed_records_or_every_record(peer: Peer, written: Written, reader: str) -> None:
    """Reading committed: the committed records at their offsets; reading uncommitted: every data
    record at its offset (aborted ones too), and no marker as a record. Our SimpleConsumer reads
    committed only here: reading uncommitted it hands out every stored record, markers included
    (tests/kafkalog/client/test_read_committed.py), where the other clients leave markers out."""
    wrong = []
    for writer in WRITERS:
        if writer in written.failures:
            wrong.append(f"{writer} wrote nothing to read: {written.failures[writer]}")
            continue
        for isolation in ISOLATIONS if reader != "ours" else ("read_committed",):
            want = visible(layout(writer, PLAN), isolation)
            if reader == "java":
                step = written.java_reads[(writer, isolation)]
                got = step.records
                if step.error is not None:
                    wrong.append(f"the Java consumer reading {isolation} what {writer} wrote: {step.error}")
                    continue
            else:
                got = READERS[reader](peer.bootstrap, written.topics[writer], isolation, len(want))
            if got != want:
                wrong.append(f"{isolation} of what {writer} wrote: read {got}, not {want}")
    assert not wrong, f"{reader} on {peer.name}:\n" + "\n".join(wrong)


def committed_offset(peer: Peer, group: str, topic: str) -> int | None:
    """The group's committed offset of partition 0 (OffsetFetch, stable offsets not required: a
    transaction's pending offsets are not reported until it commits)."""
    with OffsetsClient(peer.bootstrap, request_timeout_ms=10_000) as offsets:
        return offsets.fetch(group, [(topic, 0)])[(topic, 0)]


def test_consume_transform_produce_commits_the_offsets_with_the_transaction(peer: Peer) -> None:
    source, sink = new_topic(peer, "ctp-in"), new_topic(peer, "ctp-out")
    plain = confluent_kafka.Producer({"bootstrap.servers": peer.bootstrap})
    send_all(plain, source, [f"in-{i}" for i in range(5)])
    group = f"ctp-{uuid.uuid4().hex[:8]}"
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": peer.bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    try:
        consumer.assign([confluent_kafka.TopicPartition(source, 0, confluent_kafka.OFFSET_BEGINNING)])
        inputs: list[str] = []
        deadline = time.monotonic() + CALL_TIMEOUT
        while len(inputs) < 5 and time.monotonic() < deadline:
            inputs += [(m.value() or b"").decode() for m in consumer.consume(10, 0.2) if m.error() is None]
        assert inputs == [f"in-{i}" for i in range(5)]
        producer = librdkafka_producer(peer.bootstrap, f"ctp-{uuid.uuid4().hex[:8]}")

        # an aborted attempt: neither its record nor its offset is committed
        producer.begin_transaction()
        send_all(producer, sink, ["out-aborted"])  # offset 0, its abort marker 1
        producer.send_offsets_to_transaction(
            [confluent_kafka.TopicPartition(source, 0, 3)], consumer.consumer_group_metadata(), CALL_TIMEOUT
        )
        producer.abort_transaction(CALL_TIMEOUT)
        assert committed_offset(peer, group, source) is None

        producer.begin_transaction()
        send_all(producer, sink, [value.replace("in", "out") for value in inputs])  # offsets 2-6, marker 7
        producer.send_offsets_to_transaction(
            [confluent_kafka.TopicPartition(source, 0, 5)], consumer.consumer_group_metadata(), CALL_TIMEOUT
        )
        assert committed_offset(peer, group, source) is None  # pending until the transaction commits
        producer.commit_transaction(CALL_TIMEOUT)
    finally:
        consumer.close()
    # the coordinator writes the offsets' marker after it answered EndTxn
    deadline = time.monotonic() + CALL_TIMEOUT
    while (found := committed_offset(peer, group, source)) != 5 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert found == 5, f"the group's offset after the commit: {found}"
    assert read_ours(peer.bootstrap, sink, "read_committed", 5) == [(2 + i, f"out-{i}") for i in range(5)]


def test_a_second_producer_of_the_same_transactional_id_fences_the_first(peer: Peer) -> None:
    topic = new_topic(peer, "zombie")
    transactional_id = f"zombie-{uuid.uuid4().hex[:8]}"
    older = librdkafka_producer(peer.bootstrap, transactional_id)
    older.begin_transaction()
    send_all(older, topic, ["older"])  # offset 0
    # the newer one's InitProducerId bumps the epoch and aborts the older one's transaction (marker 1)
    newer = librdkafka_producer(peer.bootstrap, transactional_id)
    with pytest.raises(confluent_kafka.KafkaException) as refused:
        older.commit_transaction(CALL_TIMEOUT)
    error = refused.value.args[0]
    assert error.fatal() and error.code() == confluent_kafka.KafkaError._FENCED, error
    newer.begin_transaction()
    send_all(newer, topic, ["newer"])  # offset 2, marker 3
    newer.commit_transaction(CALL_TIMEOUT)
    assert read_ours(peer.bootstrap, topic, "read_committed", 1) == [(2, "newer")]
    assert read_librdkafka(peer.bootstrap, topic, "read_uncommitted", 2) == [(0, "older"), (2, "newer")]


def test_a_killed_producers_transaction_holds_readers_back_until_it_times_out(peer: Peer) -> None:
    topic = new_topic(peer, "killed")
    run = uuid.uuid4().hex[:8]
    later = librdkafka_producer(peer.bootstrap, f"later-{run}")  # ready before the clock starts
    opened = time.monotonic()
    assert open_and_kill(peer.bootstrap, f"killed-{run}", topic, HANGING_TIMEOUT_MS) == 0
    for values in (["later-0", "later-1"], ["later-2"]):  # offsets 1-2, marker 3; 4, marker 5
        later.begin_transaction()
        send_all(later, topic, values)
        later.commit_transaction(CALL_TIMEOUT)
    with SimpleConsumer(peer.bootstrap, isolation="read_committed", request_timeout_ms=10_000) as committed:
        held = committed.fetch(topic, 0, 0)
        looked = time.monotonic() - opened
        assert looked < HANGING_TIMEOUT_MS / 1000, f"too slow to see the open transaction ({looked:.1f} s)"
        assert committed.latest_offsets([(topic, 0)]) == {(topic, 0): 0}  # the open transaction's first offset
        assert committed.log_end_offsets([(topic, 0)]) == {(topic, 0): 6}  # the later transactions behind it
        assert list(held.messages) == [] and held.last_stable_offset == 0

        # the coordinator aborts the transaction at its timeout (abort marker at 6)
        deadline = time.monotonic() + 30
        while (stable := committed.latest_offsets([(topic, 0)])[(topic, 0)]) == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert stable == 7, f"the last stable offset {time.monotonic() - opened:.0f} s after the transaction began"
        read = [(m.offset, m.value) for m in committed.messages(topic, 0, 0, 7)]
    assert read == [(1, b"later-0"), (2, b"later-1"), (4, b"later-2")]
    everything = read_librdkafka(peer.bootstrap, topic, "read_uncommitted", 4)
    assert everything == [(0, "hanging"), (1, "later-0"), (2, "later-1"), (4, "later-2")]


def test_kafka_transactions_tool(peer: Peer) -> None:
    """list, describe, describe-producers and find-hanging see a killed producer's open transaction
    as Kafka's coordinator and partition leader describe it; abort ends it at the partition."""
    topic = new_topic(peer, "tool")
    transactional_id = f"tool-{uuid.uuid4().hex[:8]}"
    start = open_and_kill(peer.bootstrap, transactional_id, topic, 60_000)  # open for a minute

    def tool(*args: str) -> list[dict[str, str]]:
        return transactions_tool(peer.bootstrap, *args, log4j=peer.log4j)

    (listed,) = [row for row in tool("list") if row["TransactionalId"] == transactional_id]
    producer_id = listed["ProducerId"]
    assert listed == {
        "TransactionalId": transactional_id,
        "Coordinator": str(peer.broker_id),
        "ProducerId": producer_id,
        "TransactionState": "Ongoing",
    }
    (described,) = tool("describe", "--transactional-id", transactional_id)
    assert {key: described[key] for key in ("CoordinatorId", "ProducerId", "TransactionState")} == {
        "CoordinatorId": str(peer.broker_id),
        "ProducerId": producer_id,
        "TransactionState": "Ongoing",
    }
    assert described["TransactionTimeoutMs"] == "60000" and described["TopicPartitions"] == f"{topic}-0"
    (producing,) = tool("describe-producers", "--topic", topic, "--partition", "0")
    assert (producing["ProducerId"], producing["CurrentTransactionStartOffset"]) == (producer_id, str(start))
    # open, but not hanging: the coordinator still lists the partition in the transaction
    hanging = tool("find-hanging", "--broker-id", str(peer.broker_id), "--max-transaction-timeout", "0")
    assert [row for row in hanging if row["Topic"] == topic] == []

    tool("abort", "--topic", topic, "--partition", "0", "--start-offset", str(start))
    (producing,) = tool("describe-producers", "--topic", topic, "--partition", "0")
    assert producing["ProducerId"] == producer_id and producing["CurrentTransactionStartOffset"] == "None"
    with SimpleConsumer(peer.bootstrap, isolation="read_committed", request_timeout_ms=10_000) as committed:
        assert committed.latest_offsets([(topic, 0)]) == committed.log_end_offsets([(topic, 0)]) == {(topic, 0): 2}
        assert list(committed.messages(topic, 0, 0, 2)) == []  # the record was aborted, its marker is at 1
