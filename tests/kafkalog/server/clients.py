"""Uniform wrappers over the three real Kafka clients the broker is tested with: kafka-python,
confluent-kafka (librdkafka) and kcat (librdkafka's command line). Each runs in one of two modes:
``default`` (the client negotiates with ApiVersions) and ``0.9`` (the settings clients use for
Kafka 0.9 brokers: no ApiVersions, message format v0)."""

from __future__ import annotations

import subprocess
import time
import warnings
from dataclasses import dataclass
from typing import Any

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # kafka-python uses a deprecated importlib API
    import kafka
    from kafka.structs import OffsetAndMetadata

import confluent_kafka

MODES = ("default", "0.9")
CODECS = ("none", "gzip", "snappy")


@dataclass(frozen=True)
class Read:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int


class KafkaPython:
    name = "kafka-python"

    def __init__(self, bootstrap: str, mode: str) -> None:
        self.common: dict[str, Any] = {"bootstrap_servers": bootstrap, "request_timeout_ms": 10_000}
        if mode == "0.9":
            self.common["api_version"] = (0, 9)
        self.mode = mode

    def produce(self, topic: str, messages: list[tuple[int, bytes | None, bytes, int | None]], codec: str) -> None:
        producer = kafka.KafkaProducer(
            **self.common,
            compression_type=None if codec == "none" else codec,
            linger_ms=5,
            max_block_ms=10_000,
            enable_idempotence=False,  # plain batches here; idempotence is tested on its own
        )
        futures = [
            producer.send(topic, key=key, value=value, partition=partition, timestamp_ms=ts)
            for partition, key, value, ts in messages
        ]
        producer.flush(timeout=20)
        for future in futures:
            future.get(timeout=10)  # raises if the broker refused it
        producer.close()

    def read(self, topic: str, partitions: int, expect: int) -> list[Read]:
        consumer = kafka.KafkaConsumer(**self.common, enable_auto_commit=False, consumer_timeout_ms=5000)
        consumer.assign([kafka.TopicPartition(topic, p) for p in range(partitions)])
        consumer.seek_to_beginning()
        out = []
        for m in consumer:
            out.append(Read(m.partition, m.offset, m.key, m.value, m.timestamp))
            if len(out) >= expect:
                break
        consumer.close()
        return out

    def offsets(self, topic: str, partition: int, timestamp: int | None) -> tuple[int, int, int | None]:
        consumer = kafka.KafkaConsumer(**self.common, enable_auto_commit=False)
        tp = kafka.TopicPartition(topic, partition)
        earliest = consumer.beginning_offsets([tp])[tp]
        latest = consumer.end_offsets([tp])[tp]
        by_time = None
        if timestamp is not None:
            found = consumer.offsets_for_times({tp: timestamp})[tp]
            by_time = -1 if found is None else found.offset
        consumer.close()
        return earliest, latest, by_time

    def commit_and_fetch(self, group: str, topic: str, partition: int, offset: int) -> int | None:
        consumer = kafka.KafkaConsumer(**self.common, group_id=group, enable_auto_commit=False)
        tp = kafka.TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.commit({tp: OffsetAndMetadata(offset, "from kafka-python", -1)})
        consumer.close()
        fresh = kafka.KafkaConsumer(**self.common, group_id=group, enable_auto_commit=False)
        committed = fresh.committed(tp)
        fresh.close()
        return committed


class ConfluentKafka:
    name = "confluent-kafka"

    def __init__(self, bootstrap: str, mode: str) -> None:
        self.common: dict[str, Any] = {"bootstrap.servers": bootstrap}
        if mode == "0.9":
            self.common |= {"api.version.request": False, "broker.version.fallback": "0.9.0"}
        self.mode = mode

    def produce(self, topic: str, messages: list[tuple[int, bytes | None, bytes, int | None]], codec: str) -> None:
        producer = confluent_kafka.Producer({**self.common, "compression.codec": codec, "linger.ms": 5})
        errors: list[Any] = []
        for partition, key, value, ts in messages:
            extra = {"timestamp": ts} if ts is not None else {}
            producer.produce(
                topic,
                key=key,
                value=value,
                partition=partition,
                on_delivery=lambda e, _: errors.append(e) if e else None,
                **extra,
            )
        assert producer.flush(20) == 0, "messages were left unsent"
        assert not errors, errors

    def read(self, topic: str, partitions: int, expect: int) -> list[Read]:
        consumer = confluent_kafka.Consumer({**self.common, "group.id": "reader", "enable.auto.commit": False})
        consumer.assign(
            [confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(partitions)]
        )
        out = []
        deadline = time.monotonic() + 20
        while len(out) < expect and time.monotonic() < deadline:
            m = consumer.poll(0.2)
            if m is None:
                continue
            assert m.error() is None, m.error()
            out.append(Read(m.partition(), m.offset(), m.key(), m.value(), m.timestamp()[1]))
        consumer.close()
        return out

    def offsets(self, topic: str, partition: int, timestamp: int | None) -> tuple[int, int, int | None]:
        consumer = confluent_kafka.Consumer({**self.common, "group.id": "offsets"})
        earliest, latest = consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, partition), timeout=10)
        by_time = None
        if timestamp is not None:
            (found,) = consumer.offsets_for_times(
                [confluent_kafka.TopicPartition(topic, partition, timestamp)], timeout=10
            )
            by_time = found.offset
        consumer.close()
        return earliest, latest, by_time

    def commit_and_fetch(self, group: str, topic: str, partition: int, offset: int) -> int | None:
        consumer = confluent_kafka.Consumer({**self.common, "group.id": group, "enable.auto.commit": False})
        consumer.assign([confluent_kafka.TopicPartition(topic, partition)])
        consumer.commit(offsets=[confluent_kafka.TopicPartition(topic, partition, offset)], asynchronous=False)
        consumer.close()
        fresh = confluent_kafka.Consumer({**self.common, "group.id": group})
        (committed,) = fresh.committed([confluent_kafka.TopicPartition(topic, partition)], timeout=10)
        fresh.close()
        return committed.offset if committed.offset >= 0 else None


class Kcat:
    name = "kcat"

    def __init__(self, bootstrap: str, mode: str) -> None:
        self.base = ["kcat", "-b", bootstrap, "-X", "socket.timeout.ms=10000"]
        if mode == "0.9":
            self.base += ["-X", "api.version.request=false", "-X", "broker.version.fallback=0.9.0"]
        self.mode = mode

    def _run(self, args: list[str], stdin: bytes | None = None) -> bytes:
        done = subprocess.run([*self.base, *args], input=stdin, capture_output=True, timeout=60, check=False)
        assert done.returncode == 0, f"kcat {' '.join(args)} failed: {done.stderr.decode(errors='replace')}"
        return done.stdout

    def produce(self, topic: str, messages: list[tuple[int, bytes | None, bytes, int | None]], codec: str) -> None:
        by_partition: dict[int, list[tuple[bytes | None, bytes]]] = {}
        for partition, key, value, _ in messages:  # kcat sets no message timestamps of its own
            by_partition.setdefault(partition, []).append((key, value))
        for partition, items in by_partition.items():
            lines = b"".join((key or b"") + b"\t" + value + b"\n" for key, value in items)
            self._run(["-P", "-t", topic, "-p", str(partition), "-K", "\t", "-z", codec], stdin=lines)

    def read(self, topic: str, partitions: int, expect: int) -> list[Read]:
        out = []
        for partition in range(partitions):
            raw = self._run(
                ["-C", "-t", topic, "-p", str(partition), "-o", "beginning", "-e", "-q", "-f", "%o\t%T\t%S\t%k\t%s\n"]
            )
            for line in raw.split(b"\n"):
                if not line:
                    continue
                offset, ts, _, key, value = line.split(b"\t", 4)
                out.append(Read(partition, int(offset), key or None, value, int(ts)))
        return out

    def offsets(self, topic: str, partition: int, timestamp: int | None) -> tuple[int, int, int | None]:
        def query(at: int) -> int:
            raw = self._run(["-Q", "-t", f"{topic}:{partition}:{at}"]).decode()
            return int(raw.strip().rsplit("offset", 1)[1])

        by_time = None if timestamp is None else query(timestamp)
        return query(-2), query(-1), by_time

    def commit_and_fetch(self, group: str, topic: str, partition: int, offset: int) -> int | None:
        raise NotImplementedError("kcat commits only as a balanced group member (JoinGroup), not served yet")


CLIENTS = {"kafka-python": KafkaPython, "confluent-kafka": ConfluentKafka, "kcat": Kcat}
