"""kafkalog's own clients against a `kafkalog broker` process: producer (async, sync, every codec,
keys partitioned like Kafka's Java clients, bounded buffer, retries when a broker restarts, acks=0),
simple consumer (every offset, multi-partition fetch, offsets by time, out-of-range errors, messages
inside compressed sets), admin."""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkalog.client import Admin, Producer, SimpleConsumer, murmur2
from kafkalog.client.connection import BrokerConnection
from kafkalog.client.producer_batch import ProducerBatch
from kafkalog.errors import (
    BrokerResponseError,
    BufferFullError,
    ClientError,
    KafkaConnectionError,
    OffsetOutOfRangeError,
)
from kafkalog.protocol import ApiKey, lookup
from tests.support.kafkalog import BrokerProcess

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.partitioner.default import murmur2 as kafka_python_murmur2


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("client") / "data", default_partitions=3) as running:
        yield running


@pytest.mark.parametrize("key", [b"", b"a", b"ab", b"abc", b"abcd", b"user-42", bytes(range(256))])
def test_murmur2_is_the_java_clients_hash(key: bytes) -> None:
    assert murmur2(key) & 0xFFFFFFFF == kafka_python_murmur2(key)


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4"])
def test_produce_and_read_back_every_message(broker: BrokerProcess, compression: str) -> None:
    topic = f"roundtrip-{compression}"
    with Admin(broker.bootstrap) as admin:
        admin.create_topic(topic, 4)
    sent: dict[int, list[tuple[bytes | None, bytes]]] = {}
    with Producer(broker.bootstrap, compression=compression, linger_ms=20) as producer:
        futures = []
        for i in range(400):
            key = None if i % 10 == 0 else f"user-{i % 13}".encode()
            value = f"{compression}-{i}".encode() * (1 + i % 5)
            futures.append((key, value, producer.send(topic, value, key)))
        producer.flush()
        for key, value, future in futures:
            metadata = future.result()
            sent.setdefault(metadata.partition, []).append((key, value))
            if key is not None:
                assert metadata.partition == (murmur2(key) & 0x7FFFFFFF) % 4, "keys land where Java puts them"
    with SimpleConsumer(broker.bootstrap) as consumer:
        for partition, expected in sent.items():
            got = list(consumer.messages(topic, partition, 0))
            assert [(m.key, m.value) for m in got] == expected
            assert [m.offset for m in got] == list(range(len(expected)))


def test_sync_mode_returns_acknowledged_offsets(broker: BrokerProcess) -> None:
    with Producer(broker.bootstrap, mode="sync") as producer:
        offsets = [producer.send("sync", b"x", partition=1).result().offset for _ in range(5)]
    assert offsets == list(range(offsets[0], offsets[0] + 5))


def test_each_future_knows_its_own_offset_and_timestamp(broker: BrokerProcess) -> None:
    """Outcomes are made when asked for, from the batch's answer: each message's own offset and
    CreateTime, in a batch of several, and the same again when asked twice."""
    with Producer(broker.bootstrap, linger_ms=50) as producer:
        futures = [producer.send("own-meta", b"x", partition=0, timestamp=5_000 - i) for i in range(4)]
        producer.flush()
    got = [(f.result().offset, f.result().timestamp) for f in futures]
    assert got == [(i, 5_000 - i) for i in range(4)]
    assert futures[2].result() == futures[2].result()


def test_an_answer_without_offsets_gives_none_rather_than_minus_one_plus_the_index() -> None:
    """DUPLICATE_SEQUENCE_NUMBER with base offset -1: the batch is stored, its offsets unknown."""
    batch = ProducerBatch("t", 0, 0.0)
    batch.messages.extend([(None, b"a", 7, ()), (None, b"b", 8, ())])
    batch.acknowledged, batch.base_offset = True, -1
    assert [batch.metadata(i).offset for i in range(2)] == [-1, -1]
    batch.base_offset = 40
    assert [(batch.metadata(i).offset, batch.metadata(i).timestamp) for i in range(2)] == [(40, 7), (41, 8)]


def test_requests_in_flight_are_answered_to_their_own_callers(broker: BrokerProcess) -> None:
    """A connection keeps requests in flight between calls (the producer's window): another
    caller's request on the same connection, sent after them, reads past their responses and hands
    each to its own request; closing the connection fails what is still in flight, with its cause."""
    connection = BrokerConnection("127.0.0.1", broker.port)
    metadata = lookup(ApiKey.METADATA, 1)
    versions = lookup(ApiKey.API_VERSIONS, 0)
    try:
        early = connection.submit([(metadata, {"topics": None}), (versions, {})])
        assert [response["error_code"] for response in connection.send_many([(versions, {})])] == [0]
        assert len(connection.answer(early[0])["brokers"]) == 1  # its own response: Metadata's
        assert connection.answer(early[1])["api_versions"], "ApiVersions' own response"
        late = connection.submit([(versions, {})])
        connection.close()
        with pytest.raises(KafkaConnectionError, match="was closed"):
            connection.answer(late[0])
        assert connection.request(versions, {})["error_code"] == 0, "it reconnects for the next request"
    finally:
        connection.close()


def test_acks_0_sends_without_waiting(broker: BrokerProcess) -> None:
    with Producer(broker.bootstrap, acks=0) as producer:
        results = [producer.send("fire", b"x", partition=0) for _ in range(10)]
        producer.flush()
    assert {r.result().offset for r in results} == {-1}
    with SimpleConsumer(broker.bootstrap) as consumer:
        deadline = time.monotonic() + 5
        while consumer.latest_offset("fire", 0) < 10 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert consumer.latest_offset("fire", 0) == 10


@pytest.mark.integration
def test_a_full_buffer_blocks_then_fails_clearly(tmp_path: Path) -> None:
    with (
        BrokerProcess(tmp_path / "data", default_partitions=1) as running,
        Producer(
            running.bootstrap, buffer_bytes=4096, max_block_ms=300, linger_ms=60_000, batch_bytes=1 << 30
        ) as producer,
    ):
        producer.send("buf", b"x" * 3000, partition=0)
        running.process.send_signal(19)  # SIGSTOP: the broker cannot drain anything
        try:
            with pytest.raises(BufferFullError, match="buffer_bytes=4096"):
                producer.send("buf", b"y" * 3000, partition=0)
        finally:
            running.process.send_signal(18)  # SIGCONT


@pytest.mark.integration
def test_retries_carry_messages_over_a_broker_restart(tmp_path: Path) -> None:
    running = BrokerProcess(tmp_path / "data", default_partitions=1)
    running.start()
    port = running.port
    try:
        with Producer(
            running.bootstrap, retries=30, retry_backoff_ms=100, request_timeout_ms=2000, linger_ms=0
        ) as producer:
            producer.send("restart", b"before", partition=0).result()
            running.stop()
            running.config_path.write_text(running.config_path.read_text().replace("port: 0", f"port: {port}"))
            pending = producer.send("restart", b"during", partition=0)
            time.sleep(0.5)
            running.start()
            assert pending.result(timeout=30).offset == 1
    finally:
        running.stop()


def test_fetch_many_and_offsets(broker: BrokerProcess) -> None:
    start = int(time.time() * 1000) - 10_000
    with Producer(broker.bootstrap, compression="gzip") as producer:
        for i in range(30):
            producer.send("many", f"m{i}".encode(), partition=i % 3, timestamp=start + i)
    with SimpleConsumer(broker.bootstrap) as consumer:
        results = consumer.fetch_many({("many", 0): 0, ("many", 1): 3, ("many", 2): 9})
        assert [m.value for m in results[("many", 1)].messages] == [f"m{i}".encode() for i in range(10, 30, 3)]
        assert [m.value for m in results[("many", 2)].messages] == [b"m29"], "offset 9 is partition 2's last"
        assert results[("many", 0)].high_watermark == 10
        # a read starting inside a compressed set returns from the asked offset on
        assert [m.offset for m in consumer.fetch("many", 0, 4).messages][:2] == [4, 5]
        assert consumer.offset_for_timestamp("many", 1, start + 7) == (2, start + 7)
        assert consumer.offset_for_timestamp("many", 1, start + 8) == (3, start + 10)
        assert consumer.offset_for_timestamp("many", 1, start + 10_000_000) is None
        assert consumer.offsets_before("many", 0, -1, 5)[0] == 10
        with pytest.raises(OffsetOutOfRangeError, match=r"out of range \[0, 10\]"):
            consumer.fetch("many", 0, 11)


def test_stored_sets_are_fetched_and_sent_on_unchanged_in_order(broker: BrokerProcess) -> None:
    """fetch_many(stored=True) returns the sets as stored (a mirror's fast path); send_set sends
    one on as it is, after what was sent to its partition before, with the broker assigning offsets."""
    with Producer(broker.bootstrap, compression="snappy", linger_ms=50) as producer:
        for i in range(40):
            producer.send("stored-src", f"s{i}".encode(), f"k{i}".encode(), partition=0, timestamp=1_000 + i)
    with SimpleConsumer(broker.bootstrap) as consumer:
        decoded = consumer.fetch("stored-src", 0, 0).messages
        fetched = consumer.fetch_many({("stored-src", 0): 0}, stored=True)[("stored-src", 0)]
        assert fetched.messages == [] and fetched.last_offset == 39 and fetched.next_offset(0) == 40
        inside = consumer.fetch_many({("stored-src", 0): 5}, stored=True)[("stored-src", 0)]
        assert inside.messages[0].offset == 5 and inside.next_offset(5) == 40, "a set begun inside is cut"
        with Producer(broker.bootstrap, linger_ms=1000) as producer:
            before = producer.send("stored-dst", b"first", partition=0)  # still open when the set comes
            future = producer.send_set("stored-dst", 0, fetched.record_set, 40)
            after = producer.send("stored-dst", b"last", partition=0)
            producer.flush(10)
        assert (before.result().offset, future.result().offset, after.result().offset) == (0, 1, 41)
        copied = list(consumer.messages("stored-dst", 0, 0, 42))
    assert [m.value for m in copied] == [b"first", *[m.value for m in decoded], b"last"]
    assert [(m.key, m.timestamp) for m in copied[1:41]] == [(m.key, m.timestamp) for m in decoded]


def test_an_idle_producer_sends_within_its_linger_not_its_idle_sleep(broker: BrokerProcess) -> None:
    """A send to an idle producer wakes its sender: each message goes once its linger has passed,
    not at the sender's next idle wake-up (half a second), so one-at-a-time sends are not slowed."""
    with Producer(broker.bootstrap, linger_ms=0) as producer:
        producer.send("idle-wake", b"warm", partition=0).result(10)  # connections and metadata made
        for i in range(20):
            time.sleep(0.01)  # the sender is asleep again before each send
            started = time.monotonic()
            producer.send("idle-wake", f"m{i}".encode(), partition=0).result(10)
            assert time.monotonic() - started < 0.25, f"message {i} waited for the sender's idle sleep"


def test_admin_errors_are_named(broker: BrokerProcess) -> None:
    with Admin(broker.bootstrap) as admin:
        admin.create_topic("admin-made", 2)
        with pytest.raises(BrokerResponseError, match="already exists"):
            admin.create_topic("admin-made", 2)
        assert admin.list_topics()["admin-made"] == 2
        assert sorted(admin.describe_topic("admin-made").leaders) == [0, 1]
        with pytest.raises(BrokerResponseError, match="UNKNOWN_TOPIC"):
            admin.describe_topic("never-made")


def test_bad_bootstrap_is_a_clear_error() -> None:
    with pytest.raises(ClientError, match="host:port"):
        Producer("localhost")
