"""One record shape for every client of today, and a producer and a reader per client: ours
(kafkalog.client), librdkafka (confluent-kafka), kafka-python 3, Kafka 4.x's console producer and
consumer (Java), and Spark's Kafka source. A reader returns what the client handed its caller, as
``Rec``s, so that what two clients read can be compared with ``==``, byte for byte.

Consumers use ``assign`` (byte-for-byte reads of chosen partitions; groups are tested in
tests/kafkalog/server/test_group_clients.py) and producers have idempotence off (no InitProducerId
yet).
"""

from __future__ import annotations

import subprocess
import time
import warnings
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

import confluent_kafka

from kafkalog.client import Producer, SimpleConsumer
from kafkalog.client.partitioner import murmur2
from kafkalog.record import Codec, iter_entries
from tests.support.kafka4 import CONSOLE_CONSUMER, CONSOLE_PRODUCER, run_tool

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # kafka-python uses a deprecated importlib API
    import kafka  # type: ignore[import-untyped]
    from kafka.admin import KafkaAdminClient, OffsetSpec  # type: ignore[import-untyped]

Headers = tuple[tuple[str, bytes | None], ...]

# The console consumer's output: fields end with FIELD, headers are separated by HEADER (their
# key from their value by ':': Kafka 4.3's formatter did not honour headers.key.separator), null is NULL.
# Values read by it must not contain these bytes, nor a newline.
FIELD = "\x1f"
HEADER = "\x1e"
NULL = "\x1cNULL\x1c"
UNPRINTABLE = frozenset(b"\n\x1c\x1d\x1e\x1f")
# The console producer's input: a marker for null (key, value, header value).
NULL_MARKER = "<null>"


class Sent(NamedTuple):
    """A record as a producer is asked to send it; ``timestamp`` None: the producer's clock."""

    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp: int | None


class Rec(NamedTuple):
    """A record as a consumer returns it."""

    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    """0: CreateTime, 1: LogAppendTime."""
    key: bytes | None
    value: bytes | None
    headers: Headers


def expected(partition: int, sent: Sequence[Sent]) -> list[Rec]:
    """What every consumer should read back of ``sent``, written to an empty ``partition``."""
    records = []
    for offset, record in enumerate(sent):
        assert record.timestamp is not None, "the producer chose the timestamps: take them from a read"
        records.append(Rec(partition, offset, record.timestamp, 0, record.key, record.value, record.headers))
    return records


def keys_for_partition(prefix: str, partition: int, partitions: int, count: int) -> list[str]:
    """``count`` keys that Kafka's default partitioner (murmur2, as the Java producer) sends to
    ``partition`` of ``partitions``: for producers that cannot be told a partition."""
    keys: list[str] = []
    n = 0
    while len(keys) < count:
        key = f"{prefix}-{n}"
        if (murmur2(key.encode()) & 0x7FFFFFFF) % partitions == partition:
            keys.append(key)
        n += 1
    return keys


def stored_codecs(data_dir: Path, topic: str, partition: int) -> list[tuple[int, Codec]]:
    """(magic, codec) of each entry of a kafkalog partition, as its log files hold them."""
    return [
        (entry.magic, Codec(entry.codec))
        for path in sorted(data_dir.glob(f"{topic}-{partition}/*.log"))
        for entry in iter_entries(path.read_bytes())
    ]


# ---------------------------------------------------------------------------------------- producers


def produce_ours(bootstrap: str, topic: str, partition: int, sent: Sequence[Sent], compression: str) -> list[int]:
    """Send with kafkalog.client.Producer (one batch); the offsets the broker assigned."""
    with Producer(bootstrap, compression=compression, linger_ms=50) as producer:
        futures = [
            producer.send(topic, r.value, key=r.key, partition=partition, timestamp=r.timestamp, headers=r.headers)
            for r in sent
        ]
        producer.flush()
        return [future.result(10).offset for future in futures]


def produce_librdkafka(
    bootstrap: str, topic: str, partition: int, sent: Sequence[Sent], compression: str, **config: Any
) -> list[int]:
    """Send with confluent_kafka.Producer (queued together, so one batch); the offsets assigned.

    The linger is far longer than queueing takes even on a loaded machine: flush() sends at once
    (librdkafka ignores linger.ms while flushing), so the batch is cut by flush, not by a timer. With
    a 50 ms linger a busy CI machine once split two sends into four stored batches."""
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "compression.type": compression, "linger.ms": 10_000, **config}
    )
    reports: list[tuple[Any, Any]] = []
    for r in sent:
        producer.produce(
            topic,
            value=r.value,
            key=r.key,
            partition=partition,
            headers=list(r.headers),
            timestamp=r.timestamp or 0,
            on_delivery=lambda error, message: reports.append((error, message)),
        )
    assert producer.flush(30) == 0, "librdkafka left messages unsent"
    errors = [error for error, _ in reports if error is not None]
    assert not errors, f"librdkafka's deliveries failed: {errors}"
    return [message.offset() for _, message in reports]


def produce_kafka_python(
    bootstrap: str, topic: str, partition: int, sent: Sequence[Sent], compression: str
) -> list[int]:
    """Send with kafka-python's KafkaProducer, idempotence off (no InitProducerId yet); the offsets."""
    producer = kafka.KafkaProducer(
        bootstrap_servers=bootstrap,
        enable_idempotence=False,
        compression_type=None if compression == "none" else compression,
        linger_ms=50,
        max_block_ms=20_000,
    )
    try:
        futures = [
            producer.send(
                topic, value=r.value, key=r.key, partition=partition, headers=list(r.headers), timestamp_ms=r.timestamp
            )
            for r in sent
        ]
        producer.flush(timeout=30)
        return [future.get(timeout=10).offset for future in futures]
    finally:
        producer.close(timeout=10)


def produce_console(bootstrap: str, topic: str, sent: Sequence[Sent], compression: str, log4j: Path) -> None:
    """Send with Kafka 4.x's console producer (``headers<TAB>key<TAB>value`` lines, NULL_MARKER for
    null). It takes no partition: the keys choose it (see keys_for_partition), and no timestamps."""

    def text(data: bytes | None) -> str:
        return NULL_MARKER if data is None else data.decode()

    lines = []
    for r in sent:
        assert r.key is not None and r.headers and r.timestamp is None, "the console producer cannot send that"
        headers = ",".join(f"{k}:{text(v)}" for k, v in r.headers)
        lines.append(f"{headers}\t{text(r.key)}\t{text(r.value)}\n")
    run_tool(
        CONSOLE_PRODUCER, "--bootstrap-server", bootstrap, "--topic", topic,
        "--reader-property", "parse.key=true", "--reader-property", "parse.headers=true",
        "--reader-property", f"null.marker={NULL_MARKER}",
        "--command-property", "enable.idempotence=false", "--compression-codec", compression,
        log4j=log4j, input="".join(lines).encode(),
    )  # fmt: skip


# ------------------------------------------------------------------------------------------ readers


def read_ours(bootstrap: str, topic: str, counts: Mapping[int, int]) -> list[Rec]:
    """The first ``counts[p]`` records of each partition p, read with our SimpleConsumer."""
    out: list[Rec] = []
    with SimpleConsumer(bootstrap) as consumer:
        for partition, count in sorted(counts.items()):
            out += [
                Rec(partition, m.offset, m.timestamp, int(m.timestamp_type), m.key, m.value, tuple(m.headers))
                for m in consumer.messages(topic, partition, start=0, end=count)
            ]
    return out


def read_librdkafka(bootstrap: str, topic: str, counts: Mapping[int, int], timeout: float = 30) -> list[Rec]:
    """The first ``counts[p]`` records of each partition p, read by a confluent_kafka.Consumer
    assigned them from the beginning."""
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "clients-of-today", "enable.auto.commit": False}
    )
    try:
        consumer.assign(
            [confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in sorted(counts)]
        )
        out: list[Rec] = []
        deadline = time.monotonic() + timeout
        while len(out) < sum(counts.values()) and time.monotonic() < deadline:
            for m in consumer.consume(1000, 0.5):
                assert m.error() is None, f"librdkafka: {m.error()}"
                partition, offset = m.partition(), m.offset()
                assert partition is not None and offset is not None
                if offset < counts[partition]:
                    ts_type, ts = m.timestamp()
                    headers = tuple(_header(h) for h in m.headers() or ())  # None when there are none
                    out.append(Rec(partition, offset, ts, _TIMESTAMP_TYPES[ts_type], m.key(), m.value(), headers))
        return sorted(out)
    finally:
        consumer.close()


_TIMESTAMP_TYPES = {confluent_kafka.TIMESTAMP_CREATE_TIME: 0, confluent_kafka.TIMESTAMP_LOG_APPEND_TIME: 1}


def _header(header: Sequence[str | bytes | None]) -> tuple[str, bytes | None]:
    key, value = header
    assert isinstance(key, str) and (value is None or isinstance(value, bytes)), header
    return key, value


def read_kafka_python(bootstrap: str, topic: str, counts: Mapping[int, int], timeout: float = 30) -> list[Rec]:
    """The first ``counts[p]`` records of each partition p, read by kafka-python's KafkaConsumer
    assigned them from the beginning."""
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, request_timeout_ms=10_000)
    try:
        consumer.assign([kafka.TopicPartition(topic, p) for p in sorted(counts)])
        consumer.seek_to_beginning()
        out: list[Rec] = []
        deadline = time.monotonic() + timeout
        while len(out) < sum(counts.values()) and time.monotonic() < deadline:
            for tp, messages in consumer.poll(timeout_ms=500).items():
                out += [
                    Rec(tp.partition, m.offset, m.timestamp, m.timestamp_type, m.key, m.value, tuple(m.headers))
                    for m in messages
                    if m.offset < counts[tp.partition]
                ]
        return sorted(out)
    finally:
        consumer.close()


def read_console(bootstrap: str, topic: str, counts: Mapping[int, int], log4j: Path) -> list[Rec]:
    """The first ``counts[p]`` records of each partition p, as Kafka 4.x's console consumer prints
    them in assign mode (``--partition p --offset earliest``; one JVM per partition, run side by side)."""
    formatter = {
        "print.timestamp": "true", "print.partition": "true", "print.offset": "true", "print.headers": "true",
        "print.key": "true", "key.separator": FIELD, "headers.separator": HEADER, "null.literal": NULL,
    }  # fmt: skip

    def one(partition: int) -> list[Rec]:
        done = run_tool(
            CONSOLE_CONSUMER, "--bootstrap-server", bootstrap, "--topic", topic, "--partition", str(partition),
            "--offset", "earliest", "--max-messages", str(counts[partition]), "--timeout-ms", "30000",
            *[arg for key, value in formatter.items() for arg in ("--formatter-property", f"{key}={value}")],
            log4j=log4j,
        )  # fmt: skip
        return [parse_console_line(line) for line in done.stdout.split(b"\n")[:-1]]

    with ThreadPoolExecutor(len(counts)) as pool:
        return sorted(record for records in pool.map(one, sorted(counts)) for record in records)


def parse_console_line(line: bytes) -> Rec:
    """One line of the console consumer's output with the formatter settings of read_console."""
    stamp, partition, offset, headers, key, value = line.split(FIELD.encode())
    kind, _, ts = stamp.partition(b":")
    null = NULL.encode()

    def nullable(data: bytes) -> bytes | None:
        return None if data == null else data

    parsed: Headers = ()
    if headers != b"NO_HEADERS":
        pairs = [h.partition(b":") for h in headers.split(HEADER.encode())]
        parsed = tuple((k.decode(), nullable(v)) for k, _, v in pairs)
    return Rec(
        int(partition.removeprefix(b"Partition:")),
        int(offset.removeprefix(b"Offset:")),
        int(ts),
        {b"CreateTime": 0, b"LogAppendTime": 1}[kind],
        nullable(key),
        nullable(value),
        parsed,
    )


def read_spark(spark: Any, bootstrap: str, options: Mapping[str, str]) -> list[Rec]:
    """A batch read by Spark's own Kafka source (``spark.read.format("kafka")``, headers included);
    ``options`` choose the partitions and offsets (subscribe or assign, startingOffsets, ...)."""
    reader = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("includeHeaders", "true")
    for key, value in options.items():
        reader = reader.option(key, value)
    rows = (
        reader.load()
        .selectExpr("partition", "offset", "unix_millis(timestamp) AS ts", "timestampType", "key", "value", "headers")
        .collect()
    )
    return sorted(
        Rec(
            row["partition"],
            row["offset"],
            row["ts"],
            row["timestampType"],
            None if row["key"] is None else bytes(row["key"]),
            None if row["value"] is None else bytes(row["value"]),
            # Spark gives null, not an empty array, for a record without headers
            tuple((h["key"], None if h["value"] is None else bytes(h["value"])) for h in row["headers"] or ()),
        )
        for row in rows
    )


# ------------------------------------------------------------------------------------------ offsets


def max_timestamp_offsets(bootstrap: str, topic: str, partition: int) -> dict[str, tuple[int, int] | None]:
    """The answer to ListOffsets' MAX_TIMESTAMP (-3, KIP-734) as librdkafka and kafka-python's admin
    client report it: (offset, timestamp), None when they report no offset."""
    answers: dict[str, tuple[int, int] | None] = {}
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "max-timestamp"})
    try:
        (found,) = consumer.offsets_for_times([confluent_kafka.TopicPartition(topic, partition, -3)], timeout=10)
        assert found.error is None, f"librdkafka offsets_for_times(-3): {found.error}"
        # librdkafka reports the offset only: the timestamp is not passed on to its caller
        answers["librdkafka"] = None if found.offset < 0 else (found.offset, -1)
    finally:
        consumer.close()
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        tp = kafka.TopicPartition(topic, partition)
        answer = admin.list_partition_offsets({tp: OffsetSpec.MAX_TIMESTAMP})[tp]
        answers["kafka-python"] = None if answer.offset < 0 else (answer.offset, answer.timestamp)
    finally:
        admin.close()
    return answers


def get_offset_shell(bootstrap: str, topic: str, partition: int, time_spec: str, log4j: Path) -> int:
    """Kafka 4.x's ``kafka-get-offsets`` (GetOffsetShell, the Java admin client): the offset it prints
    for ``topic:partition`` at ``--time time_spec`` (-1 latest, -2 earliest, -3 max timestamp)."""
    done = run_tool(
        "org.apache.kafka.tools.GetOffsetShell", "--bootstrap-server", bootstrap,
        "--topic-partitions", f"{topic}:{partition}", "--time", time_spec, log4j=log4j,
    )  # fmt: skip
    lines = done.stdout.decode().split()
    assert len(lines) == 1, f"GetOffsetShell printed {done.stdout!r}"
    name, number, offset = lines[0].rsplit(":", 2)
    assert (name, int(number)) == (topic, partition), lines
    return int(offset)


def producer_perf_test(
    bootstrap: str, topic: str, records: int, payload: Iterable[str], properties: Mapping[str, str], log4j: Path
) -> subprocess.CompletedProcess[bytes]:
    """Kafka 4.x's ``kafka-producer-perf-test`` (ProducerPerformance), unthrottled; ``payload``:
    ``--record-size N`` or ``--payload-monotonic`` (values "0", "1", ...)."""
    return run_tool(
        "org.apache.kafka.tools.ProducerPerformance", "--bootstrap-server", bootstrap, "--topic", topic,
        "--num-records", str(records), "--throughput", "-1", *payload,
        "--command-property", *[f"{k}={v}" for k, v in properties.items()],
        log4j=log4j, timeout=180,
    )  # fmt: skip
