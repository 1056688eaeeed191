"""A compacted topic on a running broker, with real clients: librdkafka produces keys, values and
tombstones; the broker's cleaner thread compacts while it runs; librdkafka's consumer from the
start sees every key's latest value at its offset (gaps between), one placed at an offset that
was compacted away gets the next record, as Kafka's brokers answer; a client of the 0.10 era
(kafka-python pinned to Fetch v3, message format v1, down-converted) gets the same records; and
Kafka's own DumpLogSegments reads a cleaned segment file as it reads Kafka's, as does
``kafkalog log dump``."""

from __future__ import annotations

import random
import subprocess
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import confluent_kafka.admin as confluent_admin
import pytest

from tests.support.kafka4 import run_tool
from tests.support.kafkalog import KAFKALOG, BrokerProcess

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka  # type: ignore[import-untyped]

pytestmark = pytest.mark.integration

TOPIC = "compacted"
KEYS = 40
RECORDS = 1200
DUMP_LOG = "org.apache.kafka.tools.DumpLogSegments"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    root = tmp_path_factory.mktemp("compaction")
    with BrokerProcess(root / "data", cleaner={"backoff_ms": 100, "dedupe_buffer_bytes": 1 << 20}) as running:
        yield running


def history() -> list[tuple[bytes, bytes | None]]:
    return [(b"key-%02d" % (i * 13 % KEYS), None if i % 29 == 28 else b"value-%05d" % i) for i in range(RECORDS)]


def latest(produced: list[tuple[int, bytes, bytes | None]]) -> dict[bytes, tuple[int, bytes | None]]:
    view: dict[bytes, tuple[int, bytes | None]] = {}
    for offset, key, value in produced:
        view[key] = (offset, value)
    return view


def consume(bootstrap: str, start: int, end: int) -> list[confluent_kafka.Message]:
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "reader",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([confluent_kafka.TopicPartition(TOPIC, 0, start)])
    got: list[confluent_kafka.Message] = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is None:
                continue
            if message.error():
                if message.error().code() == confluent_kafka.KafkaError._PARTITION_EOF and (
                    not got or got[-1].offset() >= end - 1 or message.offset() >= end
                ):
                    return got
                continue
            got.append(message)
    finally:
        consumer.close()
    raise AssertionError(f"the consumer from {start} did not reach {end}: {len(got)} records")


@pytest.fixture(scope="module")
def compacted(broker: BrokerProcess) -> list[tuple[int, bytes, bytes | None]]:
    """The topic, produced to and cleaned: (offset, key, value) of everything produced."""
    admin = confluent_admin.AdminClient({"bootstrap.servers": broker.bootstrap})
    configs = {"cleanup.policy": "compact", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01"}
    admin.create_topics([confluent_admin.NewTopic(TOPIC, 1, config=configs)])[TOPIC].result(30)
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "batch.num.messages": 10}
    )
    produced: list[tuple[int, bytes, bytes | None]] = []

    def report(error: confluent_kafka.KafkaError | None, message: confluent_kafka.Message) -> None:
        assert error is None, error
        produced.append((message.offset(), message.key(), message.value()))

    for key, value in history():
        producer.produce(TOPIC, key=key, value=value, on_delivery=report)
        producer.poll(0)
    assert producer.flush(30) == 0
    partition = broker.data_dir / f"{TOPIC}-0"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        sealed = sorted(partition.glob("*.log"))[:-1]
        if sealed and sum(p.stat().st_size for p in sealed) < 4096:  # every sealed segment cleaned into one
            break
        time.sleep(0.2)
    else:
        raise AssertionError(f"the cleaner did not compact {partition}: {[p.stat().st_size for p in sealed]}")
    return sorted(produced)


def test_consumers_read_the_latest_value_of_every_key_and_step_over_the_gaps(
    broker: BrokerProcess, compacted: list[tuple[int, bytes, bytes | None]]
) -> None:
    end = compacted[-1][0] + 1
    read = consume(broker.bootstrap, 0, end)
    offsets = [m.offset() for m in read]
    assert offsets == sorted(set(offsets)) and len(read) < RECORDS, "fewer records, at rising offsets"
    view = {m.key(): (m.offset(), m.value()) for m in read}
    assert view == latest(compacted), "every key's latest value (tombstones within delete.retention.ms too)"
    gap = next(o for o in range(end) if o not in set(offsets))
    placed = consume(broker.bootstrap, gap, end)
    assert placed[0].offset() == min(o for o in offsets if o > gap), "an offset compacted away: the next record"


def test_a_client_of_the_0_10_era_gets_the_same_records_down_converted(
    broker: BrokerProcess, compacted: list[tuple[int, bytes, bytes | None]]
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        consumer = kafka.KafkaConsumer(
            bootstrap_servers=broker.bootstrap, api_version=(0, 10, 1), enable_auto_commit=False,
            consumer_timeout_ms=5000,
        )  # fmt: skip
    try:
        partition = kafka.TopicPartition(TOPIC, 0)
        consumer.assign([partition])
        consumer.seek(partition, 0)
        read = list(consumer)
    finally:
        consumer.close()
    modern = consume(broker.bootstrap, 0, compacted[-1][0] + 1)
    assert [(m.offset, m.key, m.value) for m in read] == [(m.offset(), m.key(), m.value()) for m in modern]


def test_kafkas_dump_log_segments_and_ours_read_a_cleaned_segment(
    broker: BrokerProcess, compacted: list[tuple[int, bytes, bytes | None]], tmp_path: Path
) -> None:
    sealed = sorted((broker.data_dir / f"{TOPIC}-0").glob("*.log"))[:-1]
    first = max(sealed, key=lambda path: path.stat().st_size)  # a group whose keys all moved on is empty
    dumped = run_tool(DUMP_LOG, "--files", str(first), "--print-data-log", log4j=tmp_path / "log4j2.properties")
    text = dumped.stdout.decode()
    kept = {m for m in text.split("\n") if " key: " in m}
    assert kept and len(kept) <= KEYS + 1, text[-2000:]
    assert "baseOffset: 0 " in text or "baseOffset: " in text
    ours = subprocess.run([str(KAFKALOG), "log", "dump", str(first), "--deep", "--values"], capture_output=True,
                          text=True, check=True, timeout=60)  # fmt: skip
    offsets_ours = [
        int(line.split("| offset ")[1].split()[0]) for line in ours.stdout.splitlines() if "| offset " in line
    ]
    offsets_kafka = [
        int(line.split("offset: ")[1].split()[0]) for line in text.splitlines() if line.startswith("| offset: ")
    ]
    assert offsets_ours == offsets_kafka and len(offsets_ours) == len(kept), (ours.stdout[-1500:], text[-1500:])


def test_a_broker_killed_at_random_instants_while_it_compacts_keeps_every_keys_latest_value(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """SIGKILL at moments nobody named (not the crash points): while records go in and the cleaner
    runs every 50 ms over small segments; after each restart every acknowledged key's latest value
    is there, offsets rise, and the broker takes records again."""
    rng = random.Random(45)
    root = tmp_path_factory.mktemp("compaction-kills")
    broker = BrokerProcess(root / "data", cleaner={"backoff_ms": 50, "dedupe_buffer_bytes": 1 << 20})
    latest_acked: dict[bytes, tuple[int, bytes | None]] = {}
    broker.start()
    try:
        admin = confluent_admin.AdminClient({"bootstrap.servers": broker.bootstrap})
        configs = {"cleanup.policy": "compact", "segment.bytes": "2048", "min.cleanable.dirty.ratio": "0.01",
                   "delete.retention.ms": "0"}  # fmt: skip
        admin.create_topics([confluent_admin.NewTopic("killed", 1, config=configs)])["killed"].result(30)
        for round_number in range(4):
            producer = confluent_kafka.Producer(
                {"bootstrap.servers": broker.bootstrap, "batch.num.messages": 5, "message.timeout.ms": 5000}
            )

            def report(error: confluent_kafka.KafkaError | None, message: confluent_kafka.Message) -> None:
                if error is None:
                    key = message.key()
                    if key not in latest_acked or latest_acked[key][0] < message.offset():
                        latest_acked[key] = (message.offset(), message.value())

            deadline = time.monotonic() + rng.uniform(0.5, 2.0)  # then SIGKILL, whatever it is doing
            i = 0
            while time.monotonic() < deadline:
                value = None if i % 13 == 12 else b"r%d-%05d" % (round_number, i)
                producer.produce("killed", key=b"key-%02d" % rng.randrange(30), value=value, on_delivery=report)
                producer.poll(0)
                i += 1
                if i % 50 == 0:
                    producer.flush(5)
            producer.flush(5)
            broker.kill()
            broker.start()
            read = consume_topic(broker.bootstrap, "killed")
            offsets = [m.offset() for m in read]
            assert offsets == sorted(set(offsets)), "offsets rise after the crash"
            view = {m.key(): (m.offset(), m.value()) for m in read}
            for key, (offset, value) in latest_acked.items():
                if value is not None:
                    assert view.get(key) == (offset, value), (round_number, key)
                else:
                    assert key not in view or view[key][1] is None, (round_number, key)
    finally:
        broker.stop()


def consume_topic(bootstrap: str, topic: str) -> list[confluent_kafka.Message]:
    """Every record of partition 0 from its start to its end now."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "killed-reader",
                                         "enable.auto.commit": False, "enable.partition.eof": True})  # fmt: skip
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    got: list[confluent_kafka.Message] = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is None:
                continue
            if message.error():
                if message.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    return got
                continue
            got.append(message)
    finally:
        consumer.close()
    raise AssertionError(f"no end of {topic} after 30 s: {len(got)} records")
