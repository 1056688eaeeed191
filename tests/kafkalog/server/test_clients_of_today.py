"""The clients of today against one kafkalog broker storing record batches, byte for byte: keys,
values, headers (order and duplicates kept, null and empty values), timestamps, offsets.

- Kafka 4.3's producer perf test (ProducerPerformance) writes 5000 records, zstd and uncompressed.
- Four producers (ours, librdkafka, kafka-python 3, Kafka 4.3's console producer) write a partition
  each of one topic, each with its own codec; the batches are stored as sent; four consumers (the
  same clients; the Java one is the console consumer) and Spark's Kafka source read it all back
  identically.
- ListOffsets v7's MAX_TIMESTAMP (-3) finds the record with the largest timestamp, as Apache Kafka
  4.3 does (the ``kafka4`` peer, same records), asked by ours, librdkafka, kafka-python's admin
  client and Kafka's GetOffsetShell.

What each client negotiates with kafkalog (each request's header, logged by a wrapped broker; the
broker serves ApiVersions 0-3, so a v4 ApiVersions is answered in v0 with UNSUPPORTED_VERSION and
the client asks again in v3):

| client | ApiVersions | Metadata | Produce | Fetch | ListOffsets | other |
|---|---|---|---|---|---|---|
| ours (kafkalog.client) | 0 | 9 | 11 | 12 | 7 | CreateTopics 6 |
| librdkafka 2.16 (confluent-kafka) | 3 | 9 | 10 | 12 | 7 | FindCoordinator 2 (consumer) |
| kafka-python 3.0.12 (infers 3.8) | 4, then 3 | 9 | 9 | 12 | 7 (consumer, admin) | |
| Kafka 4.3 Java clients (console, perf test, GetOffsetShell) | 4, then 3 | 9 | 11 | 12 | 7 | |
| Spark's Kafka source 4.2 (kafka-clients 3.9.2) | 4, then 3 | 9 | | 12 | 7 | |

What the clients themselves cannot say: kafka-python refuses null header values ("All headers
items must be (str, bytes) tuples"), so its records carry empty ones instead; the console producer
cannot set timestamps nor a partition (the keys choose it, murmur2) and needs a header on every
record; its line format limits it to UTF-8 text.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kafkalog.client import Admin, SimpleConsumer
from kafkalog.record import Codec
from tests.support.clients_of_today import (
    UNPRINTABLE,
    Rec,
    Sent,
    expected,
    get_offset_shell,
    keys_for_partition,
    max_timestamp_offsets,
    produce_console,
    produce_kafka_python,
    produce_librdkafka,
    produce_ours,
    producer_perf_test,
    read_console,
    read_kafka_python,
    read_librdkafka,
    read_ours,
    read_spark,
    stored_codecs,
)
from tests.support.kafka4 import Kafka4Process
from tests.support.kafkalog import BrokerProcess

pytestmark = pytest.mark.integration

WRITERS = ("ours", "librdkafka", "kafka-python", "console")
"""Writer i writes partition i of the matrix topic."""
CODECS = {"ours": "zstd", "librdkafka": "zstd", "kafka-python": "lz4", "console": "snappy"}
STORED = {"zstd": Codec.ZSTD, "lz4": Codec.LZ4, "snappy": Codec.SNAPPY, "none": Codec.NONE}
READERS = ("ours", "librdkafka", "kafka-python", "console")
PRINTABLE = bytes(b for b in range(256) if b not in UNPRINTABLE)
"""Every byte the console consumer's output can carry unambiguously."""


@pytest.fixture(scope="module")
def kafkalog(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One kafkalog broker whose logs store record batches (message format v2)."""
    root = tmp_path_factory.mktemp("clients-of-today")
    with BrokerProcess(root / "data", default_partitions=1, log={"message_format": 2}) as running:
        yield running


@pytest.fixture(scope="module")
def log4j(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The log4j2 settings of Kafka 4.3's Java tools (warnings and errors only, to stderr)."""
    return tmp_path_factory.mktemp("tools") / "log4j2.properties"


def _value(writer: str, i: int) -> bytes:
    """A value naming its writer and index, with every printable byte (non-UTF-8 ones too), long
    and repetitive enough that compressing it pays (librdkafka and kafka-python send a batch
    uncompressed when compression would not make it smaller)."""
    return (f"{writer}|{i}|".encode() + PRINTABLE[: 40 + 23 * i]) * 3


def _records(writer: str, base_ts: int) -> list[Sent]:
    """What ours, librdkafka and kafka-python send: a record without key or headers, an empty key
    and value with duplicate, null and empty header values, a tombstone with headers out of
    alphabetical order, then ordinary records; timestamps out of order."""
    null = None if writer != "kafka-python" else b""  # kafka-python refuses null header values
    records = [
        Sent(None, _value(writer, 0), (), base_ts + 5),
        Sent(b"", b"", (("dup", b"1"), ("dup", b"2"), ("nul", null), ("empty", b"")), base_ts + 1),
        Sent(b"tomb\x00stone", None, (("z", b"\xff\xfe\x00"), ("a", b"")), base_ts + 9),
    ]
    for i in range(3, 8):
        key = f"{writer}-key-{i}".encode() + bytes([0, 255, i])
        headers = (("i", b"%d" % i), ("ü", "✓".encode()), ("dup", b"x"), ("dup", b"x"))
        records.append(Sent(key, _value(writer, i), headers, base_ts + 10 + (i * 3) % 5))
    return records


def _console_records(partition: int, partitions: int) -> list[Sent]:
    """What the console producer sends (UTF-8 lines; a header on each; keys that land on ``partition``)."""
    keys = [k.encode() for k in keys_for_partition("console", partition, partitions, 6)]
    records = [
        Sent(keys[0], b"plain value", (("h", b"1"),), None),
        Sent(keys[1], None, (("dup", b"1"), ("dup", b"2"), ("nul", None), ("empty", b"")), None),
        Sent(keys[2], b"", (("ü", "✓".encode()),), None),
    ]
    for i in range(3, 6):
        value = f"console|{i}|é✓ä — Ω".encode() * (i + 1)
        records.append(Sent(keys[i], value, (("i", b"%d" % i), ("dup", b"x"), ("dup", b"x")), None))
    return records


@dataclass(frozen=True)
class Matrix:
    topic: str
    counts: dict[int, int]
    """Records per partition."""
    records: list[Rec]
    """Every record of the topic, as every consumer must read it (sorted by partition, offset)."""


@pytest.fixture(scope="module")
def matrix(kafkalog: BrokerProcess, log4j: Path) -> Matrix:
    """One topic, a partition per writer, each writer's records sent with its codec."""
    topic = "matrix"
    with Admin(kafkalog.bootstrap) as admin:
        admin.create_topic(topic, len(WRITERS))
    base_ts = int(time.time() * 1000) - 60_000  # recent: retention (7 days) would delete older segments
    sent = {writer: _records(writer, base_ts + 100 * p) for p, writer in enumerate(WRITERS[:3])}
    offsets = {
        "ours": produce_ours(kafkalog.bootstrap, topic, 0, sent["ours"], CODECS["ours"]),
        "librdkafka": produce_librdkafka(kafkalog.bootstrap, topic, 1, sent["librdkafka"], CODECS["librdkafka"]),
        "kafka-python": produce_kafka_python(
            kafkalog.bootstrap, topic, 2, sent["kafka-python"], CODECS["kafka-python"]
        ),
    }
    for writer, assigned in offsets.items():
        assert assigned == list(range(len(sent[writer]))), f"the offsets {writer}'s producer was told"
    console = WRITERS.index("console")
    sent["console"] = _console_records(console, len(WRITERS))
    before = int(time.time() * 1000)
    produce_console(kafkalog.bootstrap, topic, sent["console"], CODECS["console"], log4j)
    after = int(time.time() * 1000)
    # the console producer stamps its records itself: take the stamps as stored, once they are plausible
    stamped = read_ours(kafkalog.bootstrap, topic, {console: len(sent["console"])})
    stamps = [r.timestamp for r in stamped]
    assert stamps == sorted(stamps) and before <= stamps[0] and stamps[-1] <= after, (before, stamps, after)
    sent["console"] = [r._replace(timestamp=ts) for r, ts in zip(sent["console"], stamps, strict=True)]
    records = [record for p, writer in enumerate(WRITERS) for record in expected(p, sent[writer])]
    return Matrix(topic, {p: len(sent[w]) for p, w in enumerate(WRITERS)}, records)


def _check(got: list[Rec], matrix: Matrix, reader: str) -> None:
    for partition, writer in enumerate(WRITERS):
        want = [r for r in matrix.records if r.partition == partition]
        assert [r for r in got if r.partition == partition] == want, f"{reader} reading what {writer} wrote"
    assert len(got) == len(matrix.records), f"{reader} read records that were never written"


def test_every_producer_is_stored_as_it_sent(kafkalog: BrokerProcess, matrix: Matrix) -> None:
    """kafkalog keeps each producer's record batches as they came: magic 2, the producer's codec
    (librdkafka's zstd included: it sends zstd only to a broker of Produce v7+/Fetch v10+)."""
    for partition, writer in enumerate(WRITERS):
        stored = stored_codecs(kafkalog.data_dir, matrix.topic, partition)
        assert stored, f"nothing stored for {writer}"
        assert set(stored) == {(2, STORED[CODECS[writer]])}, f"{writer} sent {CODECS[writer]}, stored {stored}"


@pytest.mark.parametrize("reader", READERS)
def test_every_consumer_reads_every_producer(kafkalog: BrokerProcess, matrix: Matrix, log4j: Path, reader: str) -> None:
    if reader == "ours":
        got = read_ours(kafkalog.bootstrap, matrix.topic, matrix.counts)
    elif reader == "librdkafka":
        got = read_librdkafka(kafkalog.bootstrap, matrix.topic, matrix.counts)
    elif reader == "kafka-python":
        got = read_kafka_python(kafkalog.bootstrap, matrix.topic, matrix.counts)
    else:  # Kafka 4.3's console consumer, in assign mode (--partition, --offset earliest)
        got = read_console(kafkalog.bootstrap, matrix.topic, matrix.counts, log4j)
    _check(got, matrix, reader)


def test_spark_kafka_source_reads_every_producer(kafkalog: BrokerProcess, matrix: Matrix, spark: Any) -> None:
    """Spark's own Kafka source, batch mode: the whole topic (subscribe, earliest to latest), then
    a range of one partition (assign, offsets given per partition)."""
    whole = read_spark(
        spark,
        kafkalog.bootstrap,
        {"subscribe": matrix.topic, "startingOffsets": "earliest", "endingOffsets": "latest"},
    )
    _check(whole, matrix, "Spark (subscribe)")
    part = read_spark(
        spark,
        kafkalog.bootstrap,
        {
            "assign": f'{{"{matrix.topic}": [1]}}',
            "startingOffsets": f'{{"{matrix.topic}": {{"1": 2}}}}',
            "endingOffsets": f'{{"{matrix.topic}": {{"1": 5}}}}',
        },
    )
    assert part == [r for r in matrix.records if r.partition == 1 and 2 <= r.offset < 5], "Spark (assign 1, [2, 5))"


@pytest.mark.parametrize(
    ("codec", "payload"),
    [("zstd", ("--record-size", "100")), ("none", ("--payload-monotonic",))],
    ids=["zstd-100B", "none-monotonic"],
)
def test_producer_perf_test(kafkalog: BrokerProcess, log4j: Path, codec: str, payload: tuple[str, ...]) -> None:
    """kafka-producer-perf-test: 5000 records, all acknowledged, all stored once, in order, with
    the codec asked; read back identically by ours and librdkafka. ``--record-size 100``: random
    A-Z values of 100 bytes; ``--payload-monotonic``: the values are "0", "1", ..., "4999"."""
    topic, count = f"perf-{codec}", 5000
    with Admin(kafkalog.bootstrap) as admin:
        admin.create_topic(topic, 1)
    before = int(time.time() * 1000)
    done = producer_perf_test(
        kafkalog.bootstrap, topic, count, payload,
        {"enable.idempotence": "false", "compression.type": codec, "acks": "all"}, log4j,
    )  # fmt: skip
    after = int(time.time() * 1000)
    summary = re.findall(rb"^(\d+) records sent, ", done.stdout, re.MULTILINE)
    assert summary and int(summary[-1]) == count, done.stdout.decode(errors="replace")
    # a failed send is printed (a stack trace), not counted against the exit code
    assert not re.search(rb"Exception|ERROR", done.stderr), done.stderr.decode(errors="replace")
    with SimpleConsumer(kafkalog.bootstrap) as consumer:
        assert (consumer.earliest_offset(topic, 0), consumer.latest_offset(topic, 0)) == (0, count)
    ours = read_ours(kafkalog.bootstrap, topic, {0: count})
    assert [r.offset for r in ours] == list(range(count))
    assert {(r.key, r.headers, r.timestamp_type) for r in ours} == {(None, (), 0)}
    assert all(before <= r.timestamp <= after for r in ours), "CreateTime stamped by the producer during the run"
    if codec == "none":
        assert [r.value for r in ours] == [b"%d" % i for i in range(count)]
    else:
        assert all(r.value is not None and re.fullmatch(rb"[A-Z]{100}", r.value) for r in ours)
    assert read_librdkafka(kafkalog.bootstrap, topic, {0: count}) == ours, "librdkafka reads what ours reads"
    stored = stored_codecs(kafkalog.data_dir, topic, 0)
    assert set(stored) == {(2, STORED[codec])}, stored
    assert len(stored) > 1, "the producer sent several batches"


def test_max_timestamp_offset(kafkalog: BrokerProcess, kafka4: Kafka4Process, log4j: Path) -> None:
    """ListOffsets v7, timestamp -3 (KIP-734): the offset and timestamp of the record with the
    largest timestamp, the first of equals; its batch need not be the last, nor it the last of its
    batch. The same records (two librdkafka batches, timestamps out of order, the largest twice in
    the first and again in the second) go to Apache Kafka 4.3 and to kafkalog; every client gets
    the same answer from both."""
    topic = "clients-of-today-max-timestamp"
    base = int(time.time() * 1000) - 60_000
    batches = [[3, 9, 1, 9, 4, 2], [5, 9, 0]]
    want = (1, base + 9)
    answers: dict[str, dict[str, tuple[int, int] | None]] = {}
    for name, bootstrap in (("kafka4", kafka4.bootstrap), ("kafkalog", kafkalog.bootstrap)):
        with Admin(bootstrap) as admin:
            admin.create_topic(topic, 1)
        offset = 0
        for stamps in batches:
            sent = [Sent(b"k%d" % (offset + i), b"v", (), base + ts) for i, ts in enumerate(stamps)]
            assigned = produce_librdkafka(bootstrap, topic, 0, sent, "none")
            assert assigned == list(range(offset, offset + len(stamps))), name
            offset += len(stamps)
        with SimpleConsumer(bootstrap) as consumer:
            answers[name] = {
                "ours": consumer.offset_of_max_timestamp(topic, 0),
                **max_timestamp_offsets(bootstrap, topic, 0),
            }
    assert len(stored_codecs(kafkalog.data_dir, topic, 0)) == len(batches), "one stored batch per produce"
    answers["kafkalog"]["GetOffsetShell"] = (get_offset_shell(kafkalog.bootstrap, topic, 0, "-3", log4j), -1)
    reference = {"ours": want, "librdkafka": (want[0], -1), "kafka-python": want}
    assert answers["kafka4"] == reference, "Apache Kafka 4.3's answers (the reference)"
    assert answers["kafkalog"] == {**reference, "GetOffsetShell": (want[0], -1)}, (
        f"kafkalog's answers to ListOffsets v7 timestamp=-3 (want offset {want[0]}, timestamp {want[1]})"
    )
