"""The idempotent producer, as today's clients use it by default (kafkalog's own among them),
against a kafkalog broker whose acknowledgements are lost: a proxy in front of the broker throws
away the responses to Produce requests (after the broker appended them) and cuts the connection,
the client retries the batch with the same sequence, and the log holds each message once, in order.
Also across a broker SIGKILL: the retry after the restart is still recognised (the state rebuilt
from the log)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest

from kafkalog.client import Admin, Producer, SimpleConsumer
from kafkalog.protocol import ApiKey, ErrorCode
from kafkalog.record.batch_format import encode_batch
from tests.support.kafka4 import CONSOLE_PRODUCER, run_tool
from tests.support.kafkalog import BrokerProcess, roundtrip
from tests.support.proxy import AckDroppingProxy

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka  # type: ignore[import-untyped]

pytestmark = pytest.mark.integration

COUNT = 200
DROPS = 3


@pytest.fixture(scope="module")
def behind_proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, AckDroppingProxy]]:
    """A broker that tells clients to reach it at the proxy."""
    proxy = AckDroppingProxy(drops=0)
    root = tmp_path_factory.mktemp("kafkalog-idempotence")
    cluster = [{"id": 0, "host": "127.0.0.1", "port": proxy.port}]
    try:
        with BrokerProcess(root / "data", cluster=cluster) as broker:
            proxy.target_port = broker.port
            yield broker, proxy
    finally:
        proxy.close()


def stored_values(bootstrap: str, topic: str) -> list[bytes]:
    with SimpleConsumer(bootstrap) as consumer:
        return [m.value or b"" for m in consumer.messages(topic, 0, start=0)]


def produce_kafka_python(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, request_timeout_ms=10_000)
    assert producer.config["enable_idempotence"]  # kafka-python 3's default
    futures = [producer.send(topic, value, partition=0) for value in values]
    producer.flush(60)
    assert all(f.succeeded() for f in futures)
    producer.close()


def produce_librdkafka(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 20, "request.timeout.ms": 10_000}
    )
    failures: list[object] = []
    for value in values:
        producer.produce(topic, value, partition=0, on_delivery=lambda err, _: err and failures.append(err))
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not failures


def produce_kafkalog(bootstrap: str, topic: str, values: list[bytes]) -> None:
    # small batches, so that several of the partition's go in one round of pipelined requests
    with Producer(bootstrap, linger_ms=5, batch_bytes=600, request_timeout_ms=10_000) as producer:
        futures = [producer.send(topic, value, partition=0) for value in values]
        producer.flush(60)
        assert producer.producer_id is not None, "numbered batches: several of them went in flight at once"
    offsets = [f.result().offset for f in futures]
    assert offsets == list(range(len(values)))  # the retried batches got their first append's offsets


def produce_java(bootstrap: str, topic: str, values: list[bytes], root: Path) -> None:
    # the console producer's defaults: idempotence on (acks=all, retries), as every Java producer since 3.0
    run_tool(
        CONSOLE_PRODUCER, "--bootstrap-server", bootstrap, "--topic", topic,
        "--producer-property", "linger.ms=20", "--producer-property", "request.timeout.ms=10000",
        input=b"".join(v + b"\n" for v in values), log4j=root / "log4j2.properties",
    )  # fmt: skip


@pytest.mark.parametrize("client", ["kafka-python", "librdkafka", "java", "kafkalog"])
def test_lost_acknowledgements_do_not_duplicate(
    behind_proxy: tuple[BrokerProcess, AckDroppingProxy], client: str, tmp_path: Path
) -> None:
    broker, proxy = behind_proxy
    topic = f"idempotent-{client}"
    with Admin(broker.bootstrap) as admin:
        admin.create_topic(topic, 1)
    values = [b"%s-%d" % (client.encode(), i) for i in range(COUNT)]
    proxy.drops_left, proxy.dropped = DROPS, 0
    address = f"127.0.0.1:{proxy.port}"
    if client == "kafka-python":
        produce_kafka_python(address, topic, values)
    elif client == "librdkafka":
        produce_librdkafka(address, topic, values)
    elif client == "kafkalog":
        produce_kafkalog(address, topic, values)
    else:
        produce_java(address, topic, values, tmp_path)
    assert proxy.dropped == DROPS  # the acknowledgements of appended batches really were lost
    assert stored_values(broker.bootstrap, topic) == values  # each once, in order


def test_a_retry_after_a_broker_sigkill_is_recognised(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data") as broker:
        with Admin(broker.bootstrap) as admin:
            admin.create_topic("after-crash", 1)
        init = roundtrip(broker.port, ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None})
        assert init["error_code"] == ErrorCode.NONE and init["producer_epoch"] == 0
        producer_id = init["producer_id"]

        def produce(sequence: int) -> dict[str, object]:
            records = [(None, b"seq-%d" % (sequence + i), 1_700_000_000_000, ()) for i in range(3)]
            batch = encode_batch(records, producer_id=producer_id, producer_epoch=0, base_sequence=sequence)
            body = {
                "acks": -1,
                "timeout_ms": 5000,
                "topic_data": [{"topic": "after-crash", "data": [{"partition": 0, "record_set": batch}]}],
            }
            response = roundtrip(broker.port, ApiKey.PRODUCE, 9, body)
            answer: dict[str, object] = response["responses"][0]["partition_responses"][0]
            return answer

        assert produce(0)["base_offset"] == 0
        assert produce(3)["base_offset"] == 3
        broker.kill()  # the producer never heard of its second batch: it will retry it
        broker.start()
        retried = produce(3)
        assert (retried["error_code"], retried["base_offset"]) == (ErrorCode.NONE, 3)
        assert produce(6)["base_offset"] == 6
        gap = produce(12)
        assert gap["error_code"] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert stored_values(broker.bootstrap, "after-crash") == [b"seq-%d" % i for i in range(9)]
        # a new producer id after the restart: the blocks are never handed out twice
        again = roundtrip(broker.port, ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None})
        assert again["producer_id"] > producer_id


def test_a_transactional_id_gets_its_producer_id_and_each_instance_the_next_epoch(
    behind_proxy: tuple[BrokerProcess, AckDroppingProxy],
) -> None:
    broker, _ = behind_proxy
    request = {"transactional_id": "tx-1", "transaction_timeout_ms": 30_000}
    first = roundtrip(broker.port, ApiKey.INIT_PRODUCER_ID, 4, request)
    second = roundtrip(broker.port, ApiKey.INIT_PRODUCER_ID, 4, request)
    assert first["error_code"] == second["error_code"] == ErrorCode.NONE
    assert first["producer_id"] == second["producer_id"] >= 0
    assert (first["producer_epoch"], second["producer_epoch"]) == (0, 1)
    idempotent = roundtrip(broker.port, ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None})
    assert idempotent["producer_id"] != first["producer_id"]
