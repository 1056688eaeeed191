"""The clients of today and kafkalog, both ways, byte for byte (keys, values, headers, offsets):
our Admin, Producer and SimpleConsumer against Apache Kafka 4.x (which refuses anything older than
the Kafka 2.1 protocol), and Kafka 4.x's own console producer and consumer (Java clients) against a
kafkalog broker storing record batches, and librdkafka with headers."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkalog.client import Admin, ClientSecurity, Producer, SimpleConsumer
from kafkalog.errors import AuthenticationError
from kafkalog.record import Codec, iter_entries
from tests.support.kafka4 import CONSOLE_CONSUMER, CONSOLE_PRODUCER, Kafka4Process, run_tool
from tests.support.kafkalog import BrokerProcess

pytestmark = pytest.mark.integration

RECORDS = [
    (b"key-%d" % i, b"value-%d|" % i + bytes(range(32, 32 + i)), [("n", b"%d" % i), ("empty", None)]) for i in range(20)
]


@pytest.fixture(scope="module")
def kafkalog_v2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A kafkalog broker whose topics store record batches."""
    root = tmp_path_factory.mktemp("kafkalog-v2")
    with BrokerProcess(root / "data", default_partitions=1, log={"message_format": 2}) as running:
        yield running


@pytest.mark.parametrize("codec", ["none", "lz4", "zstd"])
def test_our_clients_against_kafka4(kafka4: Kafka4Process, codec: str) -> None:
    topic = f"ours-{codec}"
    with Admin(kafka4.bootstrap) as admin:
        admin.create_topic(topic, 2)
    with Producer(kafka4.bootstrap, compression=codec, linger_ms=5) as producer:
        futures = [producer.send(topic, value, key=key, partition=0, headers=h) for key, value, h in RECORDS]
        producer.flush()
        assert [f.result().offset for f in futures] == list(range(len(RECORDS)))
        if producer.producer_id is None:  # Kafka 4.x's coordinator was still loading: a later round asks again
            time.sleep(0.5)
            producer.send(topic, b"later", partition=1).result()
        assert producer.producer_id is not None  # numbered batches: Kafka 4.x gave the producer an id
    with SimpleConsumer(kafka4.bootstrap) as consumer:
        read = list(consumer.messages(topic, 0, start=0, end=len(RECORDS)))
        assert [(m.offset, m.key, m.value, m.headers) for m in read] == [
            (i, key, value, tuple(h)) for i, (key, value, h) in enumerate(RECORDS)
        ]
        assert consumer.latest_offset(topic, 0) == len(RECORDS)
    # ... and Kafka's own consumer reads what we wrote, headers included
    lines = kafka4.console_consume(topic, 2, extra=["--partition", "0"])
    assert lines[0] == "n:0,empty:null\tkey-0\tvalue-0|"


def test_kafka4_java_clients_against_kafkalog(kafkalog_v2: BrokerProcess, tmp_path: Path) -> None:
    log4j = tmp_path / "log4j2.properties"
    lines = "".join(f"trace:t{i},dc:east\tkey-{i}\tvalue {i}\n" for i in range(10)).encode()
    run_tool(
        CONSOLE_PRODUCER, "--bootstrap-server", kafkalog_v2.bootstrap, "--topic", "java",
        "--reader-property", "parse.key=true", "--reader-property", "parse.headers=true",
        # the plain path (the idempotent Java producer: tests/kafkalog/server/test_idempotent_producers.py)
        "--producer-property", "enable.idempotence=false", "--compression-codec", "zstd",
        log4j=log4j, input=lines,
    )  # fmt: skip
    read = run_tool(
        CONSOLE_CONSUMER, "--bootstrap-server", kafkalog_v2.bootstrap, "--topic", "java", "--partition", "0",
        "--offset", "earliest", "--max-messages", "10", "--timeout-ms", "20000",
        "--formatter-property", "print.headers=true", "--formatter-property", "print.key=true",
        log4j=log4j,
    )  # fmt: skip
    assert read.stdout.decode().splitlines() == [f"trace:t{i},dc:east\tkey-{i}\tvalue {i}" for i in range(10)]
    with SimpleConsumer(kafkalog_v2.bootstrap) as consumer:
        messages = list(consumer.messages("java", 0, start=0, end=10))
    assert [(m.key, m.value, m.headers) for m in messages] == [
        (b"key-%d" % i, b"value %d" % i, (("trace", b"t%d" % i), ("dc", b"east"))) for i in range(10)
    ]
    stored = [e for path in kafkalog_v2.data_dir.glob("java-0/*.log") for e in iter_entries(path.read_bytes())]
    assert stored and {(e.magic, e.codec) for e in stored} == {(2, Codec.ZSTD)}  # the producer's batches, as sent


def test_librdkafka_headers_against_kafkalog(kafkalog_v2: BrokerProcess) -> None:
    import confluent_kafka

    producer = confluent_kafka.Producer({"bootstrap.servers": kafkalog_v2.bootstrap, "compression.codec": "lz4"})
    errors: list[object] = []
    for key, value, headers in RECORDS:
        producer.produce(
            "rdk", value=value, key=key, headers=headers, partition=0, on_delivery=lambda e, _: errors.append(e)
        )
    assert producer.flush(20) == 0 and errors == [None] * len(RECORDS)
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": kafkalog_v2.bootstrap, "group.id": "rdk", "enable.auto.commit": False}
    )
    consumer.assign([confluent_kafka.TopicPartition("rdk", 0, confluent_kafka.OFFSET_BEGINNING)])
    got = []
    while len(got) < len(RECORDS):
        message = consumer.poll(10)
        assert message is not None and message.error() is None, message and message.error()
        got.append((message.offset(), message.key(), message.value(), message.headers()))
    consumer.close()
    assert got == [(i, key, value, headers) for i, (key, value, headers) in enumerate(RECORDS)]
    stored = [e for path in kafkalog_v2.data_dir.glob("rdk-0/*.log") for e in iter_entries(path.read_bytes())]
    assert {(e.magic, e.codec) for e in stored} == {(2, Codec.LZ4)}


def test_our_clients_log_in_to_kafka4_over_sasl_ssl(kafka4: Kafka4Process) -> None:
    """TLS (Kafka's certificate checked against our CA) and a SCRAM-SHA-512 login (Kafka's signature
    checked too), then the same byte-for-byte round trip; a wrong password gets Kafka's refusal."""
    secured = kafka4.secured
    assert secured is not None
    security = ClientSecurity("SASL_SSL", "SCRAM-SHA-512", secured.user, secured.password, ca_file=secured.ca_file)
    with Admin(secured.bootstrap, security=security) as admin:
        admin.create_topic("secured-today", 1)
    with Producer(secured.bootstrap, security=security, linger_ms=0) as producer:
        for key, value, headers in RECORDS[:5]:
            producer.send("secured-today", value, key, partition=0, headers=headers)
        producer.flush()
    with SimpleConsumer(secured.bootstrap, security=security) as consumer:
        got = consumer.fetch("secured-today", 0, 0).messages
    assert [(m.key, m.value) for m in got] == [(key, value) for key, value, _ in RECORDS[:5]]
    wrong = ClientSecurity("SASL_SSL", "SCRAM-SHA-512", secured.user, "not-the-Pw", ca_file=secured.ca_file)
    with (
        SimpleConsumer(secured.bootstrap, security=wrong, request_timeout_ms=10_000) as consumer,
        pytest.raises(AuthenticationError, match=r"refused the login: .*[Aa]uthentication failed") as refused,
    ):
        consumer.fetch("secured-today", 0, 0)
    assert "not-the-Pw" not in str(refused.value)
