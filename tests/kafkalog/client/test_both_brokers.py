"""The same client tests against a kafkalog broker and a real Apache Kafka 0.9.0.1 broker (with its
ZooKeeper): every codec, keys, several partitions, offsets; where 0.9 lacks a feature (offsets by
message time, CreateTopics) the test checks what it does instead. Data a real client writes through
the real broker is read by ours, and the reverse."""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator

import pytest

from kafkalog.client import Admin, Producer, SimpleConsumer, murmur2
from kafkalog.errors import UnsupportedByBrokerError
from tests.support.kafka09 import Kafka09Process
from tests.support.kafkalog import BrokerProcess

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka

PARTITIONS = 3


@pytest.fixture(scope="module", params=["kafkalog", "kafka-0.9"])
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    if request.param == "kafkalog":
        with BrokerProcess(tmp_path_factory.mktemp(request.param) / "data", default_partitions=PARTITIONS) as running:
            yield request.param, running.bootstrap
        return
    peer: Kafka09Process = request.getfixturevalue("kafka09")  # shared, 3 partitions per topic
    yield request.param, peer.bootstrap


@pytest.mark.slow
@pytest.mark.parametrize("compression", ["none", "gzip", "snappy"])
def test_produce_and_consume(broker: tuple[str, str], compression: str) -> None:
    kind, bootstrap = broker
    topic = f"both-{compression}"
    sent: dict[int, list[tuple[bytes, bytes]]] = {}
    with Producer(bootstrap, compression=compression, linger_ms=10) as producer:
        futures = [(f"key-{i % 11}".encode(), f"{kind}-{i}".encode(), None) for i in range(300)]
        results = [(k, v, producer.send(topic, v, k)) for k, v, _ in futures]
        producer.flush()
        for key, value, future in results:
            metadata = future.result()
            assert metadata.partition == (murmur2(key) & 0x7FFFFFFF) % PARTITIONS
            sent.setdefault(metadata.partition, []).append((key, value))
    with SimpleConsumer(bootstrap) as consumer:
        for partition in range(PARTITIONS):
            messages = list(consumer.messages(topic, partition, 0))
            assert [(m.key, m.value) for m in messages] == sent.get(partition, [])
            assert [m.offset for m in messages] == list(range(len(messages)))
            assert consumer.latest_offset(topic, partition) == len(messages)
            assert consumer.earliest_offset(topic, partition) == 0
            if messages:
                # a fetch that starts inside a compressed set still starts at the asked offset
                middle = len(messages) // 2
                assert consumer.fetch(topic, partition, middle).messages[0].offset == middle


@pytest.mark.slow
def test_the_offsets_of_many_partitions_in_one_request_per_broker(broker: tuple[str, str]) -> None:
    """What the load's planner asks (one ListOffsets per broker for every split; Kafka 0.9's v0 a
    partition at a time): the same answers as asking partition by partition."""
    kind, bootstrap = broker
    topics = [f"many-{kind}-{n}" for n in range(3)]
    with Producer(bootstrap, linger_ms=5) as producer:
        for n, topic in enumerate(topics):
            for i in range(n * 7 + 5):
                producer.send(topic, b"x", partition=i % PARTITIONS)
    keys = [(topic, partition) for topic in topics for partition in range(PARTITIONS)]
    with SimpleConsumer(bootstrap) as consumer:
        latest, earliest = consumer.latest_offsets(keys), consumer.earliest_offsets(keys)
        assert latest == {key: consumer.latest_offset(*key) for key in keys}
        assert earliest == dict.fromkeys(keys, 0)
        assert sum(latest.values()) == 5 + 12 + 19


@pytest.mark.slow
def test_offsets_by_time(broker: tuple[str, str]) -> None:
    kind, bootstrap = broker
    before = int(time.time() * 1000) - 1
    with Producer(bootstrap) as producer:
        for i in range(10):
            producer.send("times", f"t{i}".encode(), partition=0)
    with SimpleConsumer(bootstrap) as consumer:
        latest_first = consumer.offsets_before("times", 0, -1, 10)
        assert latest_first[0] == 10 and latest_first == sorted(latest_first, reverse=True)
        # "before a time in the future": both start from the log end, then segment starts
        assert consumer.offsets_before("times", 0, int(time.time() * 1000) + 60_000, 1) == [10]
        if kind == "kafka-0.9":
            with pytest.raises(UnsupportedByBrokerError, match="segment granularity"):
                consumer.offset_for_timestamp("times", 0, before)
        else:
            assert consumer.offset_for_timestamp("times", 0, before) == (0, pytest.approx(before, abs=60_000))


def test_admin(broker: tuple[str, str]) -> None:
    kind, bootstrap = broker
    with Admin(bootstrap) as admin:
        if kind == "kafka-0.9":
            with pytest.raises(UnsupportedByBrokerError, match="CREATE_TOPICS"):
                admin.create_topic("made", 2)
        else:
            admin.create_topic("made", 2)
            assert admin.list_topics()["made"] == 2


@pytest.mark.slow
def test_a_real_client_and_ours_read_each_others_data(broker: tuple[str, str]) -> None:
    kind, bootstrap = broker
    api = {"api_version": (0, 9)} if kind == "kafka-0.9" else {}
    # plain batches from both (idempotence has tests of its own: test_idempotent_producers.py)
    idempotence = {} if kind == "kafka-0.9" else {"enable_idempotence": False}
    theirs = kafka.KafkaProducer(bootstrap_servers=bootstrap, compression_type="gzip", **api, **idempotence)
    for i in range(50):
        theirs.send("exchange", key=f"k{i}".encode(), value=f"from kafka-python {i}".encode(), partition=i % 2)
    theirs.flush()
    theirs.close()
    with Producer(bootstrap, compression="snappy") as ours:
        for i in range(50):
            ours.send("exchange", f"from kafkalog {i}".encode(), f"k{i}".encode(), partition=2)
    with SimpleConsumer(bootstrap) as consumer:
        read = [m.value for p in (0, 1) for m in consumer.messages("exchange", p, 0)]
        assert sorted(read) == sorted(f"from kafka-python {i}".encode() for i in range(50))
    reader = kafka.KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=5000, **api)
    reader.assign([kafka.TopicPartition("exchange", 2)])
    reader.seek_to_beginning()
    got = [(m.key, m.value) for m in reader]
    reader.close()
    assert got == [(f"k{i}".encode(), f"from kafkalog {i}".encode()) for i in range(50)]
