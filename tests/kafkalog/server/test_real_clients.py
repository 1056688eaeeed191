"""Real Kafka clients against a real `kafkalog broker` process: kafka-python, confluent-kafka
(librdkafka) and kcat, each with its default settings (ApiVersions negotiation) and with the
0.9-fallback settings, producing uncompressed, gzip and snappy sets with keys to a multi-partition
topic; every message read back by every client, byte for byte, at its offset; offsets by time;
group offsets committed and fetched."""

from __future__ import annotations

import itertools
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkalog.record import iter_entries
from tests.support.kafkalog import BrokerProcess

from .clients import CLIENTS, CODECS, MODES, Read

PARTITIONS = 3
PER_PARTITION = 12


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    if shutil.which("kcat") is None:
        pytest.fail("kcat is not installed: `make install` installs it (Debian package kcat)")
    root = tmp_path_factory.mktemp("broker")
    with BrokerProcess(root / "data", default_partitions=PARTITIONS, num_processors=2) as running:
        yield running


def _messages(writer: str, mode: str, codec: str, base_ts: int) -> list[tuple[int, bytes | None, bytes, int | None]]:
    """Messages with keys (one partition in three has null keys, except from kcat, whose line
    format can only send an empty key) and printable values, each naming where it should land,
    with rising timestamps (kcat cannot set them)."""
    out: list[tuple[int, bytes | None, bytes, int | None]] = []
    for i in range(PER_PARTITION):
        for partition in range(PARTITIONS):
            key = None if partition == 2 and writer != "kcat" else f"key-{partition}-{i}".encode()
            value = f"{writer}|{mode}|{codec}|p{partition}|n{i}|".encode() + bytes(range(33, 33 + i * 5 % 90))
            out.append((partition, key, value, base_ts + i))
    return out


def _check_read_back(reads: list[Read], sent: list[tuple[int, bytes | None, bytes, int | None]], reader: str) -> None:
    assert len(reads) == len(sent), f"{reader} read {len(reads)} of {len(sent)}"
    for partition in range(PARTITIONS):
        got = [r for r in reads if r.partition == partition]
        expect = [(key, value) for p, key, value, _ in sent if p == partition]
        assert [r.offset for r in got] == list(range(len(expect))), f"{reader}: offsets of partition {partition}"
        assert [(r.key, r.value) for r in got] == expect, f"{reader}: keys/values/order of partition {partition}"


@pytest.mark.slow
@pytest.mark.parametrize(("writer", "mode", "codec"), list(itertools.product(CLIENTS, MODES, CODECS)))
def test_every_client_reads_what_every_client_wrote(broker: BrokerProcess, writer: str, mode: str, codec: str) -> None:
    topic = f"rt-{writer}-{mode.replace('.', '')}-{codec}"
    base_ts = int(time.time() * 1000) - 60_000
    sent = _messages(writer, mode, codec, base_ts)
    CLIENTS[writer](broker.bootstrap, mode).produce(topic, sent, codec)
    for reader in CLIENTS:
        reads = CLIENTS[reader](broker.bootstrap, "default" if reader != writer else mode).read(
            topic, PARTITIONS, len(sent)
        )
        _check_read_back(reads, sent, reader)
        if writer != "kcat" and mode == "default":
            # magic 1 keeps the producer's timestamps, and every client reports them
            got = sorted((r.partition, r.offset, r.timestamp) for r in reads)
            assert [ts for *_, ts in got[:PER_PARTITION]] == [base_ts + i for i in range(PER_PARTITION)]


@pytest.mark.slow
@pytest.mark.parametrize(("client", "mode"), list(itertools.product(CLIENTS, MODES)))
def test_earliest_latest_and_by_time_offsets(broker: BrokerProcess, client: str, mode: str) -> None:
    topic = f"off-{client}-{mode.replace('.', '')}"
    base_ts = int(time.time() * 1000) - 60_000
    writer = CLIENTS["confluent-kafka"](broker.bootstrap, "default")
    writer.produce(topic, _messages("confluent-kafka", "default", "none", base_ts), "none")
    wants_time = mode == "default"  # offsets by time need ListOffsets v1 (Kafka 0.10.1)
    earliest, latest, by_time = CLIENTS[client](broker.bootstrap, mode).offsets(
        topic, 1, base_ts + 5 if wants_time else None
    )
    assert (earliest, latest) == (0, PER_PARTITION)
    if wants_time:
        assert by_time == 5, "the first message at or after the time"
        _, _, beyond = CLIENTS[client](broker.bootstrap, mode).offsets(topic, 1, base_ts + 10_000_000)
        assert beyond == -1, "no message that new"


@pytest.mark.slow
@pytest.mark.parametrize(("client", "mode"), list(itertools.product(["kafka-python", "confluent-kafka"], MODES)))
def test_group_offsets_are_committed_and_fetched(broker: BrokerProcess, client: str, mode: str) -> None:
    topic = f"grp-{client}-{mode.replace('.', '')}"
    CLIENTS["confluent-kafka"](broker.bootstrap, "default").produce(
        topic, _messages("x", "default", "none", 1000), "none"
    )
    group = f"group {client} {mode} ✓"  # any characters are a valid group id
    committed = CLIENTS[client](broker.bootstrap, mode).commit_and_fetch(group, topic, 2, 7)
    assert committed == 7
    # another client sees the same commit
    other = "confluent-kafka" if client == "kafka-python" else "kafka-python"
    assert CLIENTS[other](broker.bootstrap, "default").commit_and_fetch(group, topic, 2, 9) == 9


@pytest.mark.integration
def test_group_offsets_survive_a_broker_restart(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data", default_partitions=1) as running:
        client = CLIENTS["kafka-python"](running.bootstrap, "default")
        client.produce("durable", [(0, b"k", b"v", None)] * 5, "none")
        assert client.commit_and_fetch("g", "durable", 0, 4) == 4
        running.kill()  # a crash, not a clean stop: the commit was acknowledged, so it is on disk
        running.start()
        consumer_side = CLIENTS["confluent-kafka"](running.bootstrap, "default")
        earliest, latest, _ = consumer_side.offsets("durable", 0, None)
        assert (earliest, latest) == (0, 5)
        import kafka

        fresh = kafka.KafkaConsumer(bootstrap_servers=running.bootstrap, group_id="g", enable_auto_commit=False)
        assert fresh.committed(kafka.TopicPartition("durable", 0)) == 4
        fresh.close()


@pytest.fixture(scope="module")
def v2_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    root = tmp_path_factory.mktemp("broker-v2")
    config = {"default_partitions": PARTITIONS, "num_processors": 2, "log": {"message_format": 2}}
    with BrokerProcess(root / "data", **config) as running:
        yield running


@pytest.mark.slow
@pytest.mark.parametrize(
    ("writer", "mode", "codec"), [(w, m, "snappy" if m == "default" else "none") for w in CLIENTS for m in MODES]
)
def test_a_broker_storing_record_batches_serves_every_client(
    v2_broker: BrokerProcess, writer: str, mode: str, codec: str
) -> None:
    """The same round trip with the log in message format v2: what the clients of these protocol
    versions send (v0/v1 sets) is stored as record batches, and their fetches get it converted
    back to the format they read (magic 1 for Fetch v2/v3, magic 0 for v0/v1)."""
    topic = f"v2-{writer}-{mode.replace('.', '')}-{codec}"
    base_ts = int(time.time() * 1000) - 60_000
    sent = _messages(writer, mode, codec, base_ts)
    CLIENTS[writer](v2_broker.bootstrap, mode).produce(topic, sent, codec)
    for reader in CLIENTS:
        for reader_mode in MODES:
            reads = CLIENTS[reader](v2_broker.bootstrap, reader_mode).read(topic, PARTITIONS, len(sent))
            _check_read_back(reads, sent, f"{reader} ({reader_mode})")
    stored = [
        entry.magic for path in v2_broker.data_dir.glob(f"{topic}-*/*.log") for entry in iter_entries(path.read_bytes())
    ]
    assert stored and set(stored) == {2}, "the log holds record batches only"
