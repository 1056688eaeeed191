"""Java peers of ``kafkalog registry`` and of the schema'd decoders, from Maven Central (`make peers`):
Flink's Confluent-registry Avro serialization and deserialization schemas (Confluent's own
CachedSchemaRegistryClient inside) with Kafka 4.x's Java producer and consumer
(java/RegistryAvroClients.java); Confluent's Avro compatibility checker (java/AvroCompatibility.java,
one JVM answering many schema pairs); Kafka Connect's JsonConverter with schemas
(java/ConnectJsonProducer.java).

Each program runs as a single-file Java source on the peers' jars; a missing jar fails the test with
MissingPeer naming it (never a skip). Every run is bounded in time and its failure names the program
and the end of its stderr.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import subprocess
from pathlib import Path
from typing import Any

from tests.support.installed import KAFKA4_LIBS, SCHEMA_PEER_LIBS, java, require_jar
from tests.support.kafka4 import QUICK_COMPILER, QUIET_JVM, TOOL_LOG4J

JAVA_DIR = Path(__file__).with_name("java")
SCHEMA_PEERS = SCHEMA_PEER_LIBS
LEVELS = ("BACKWARD", "FORWARD", "FULL")


def flink_registry_jars() -> list[Path]:
    """Flink's Avro format for Confluent's registry (with the registry client and Avro, shaded) and
    the flink-core interfaces its serialization schemas implement."""
    return [
        require_jar(
            "flink-sql-avro-confluent-registry-*.jar", "Flink's Avro format for Confluent's registry", SCHEMA_PEERS
        ),
        require_jar("flink-core-*.jar", "flink-core (Flink's serialization interfaces)", SCHEMA_PEERS),
    ]


def _jvm(log4j: Path, classpath: str) -> list[str]:
    if not log4j.exists():
        log4j.write_text(TOOL_LOG4J)
    return [str(java()), "-Xmx256m", *QUIET_JVM, *QUICK_COMPILER, f"-Dlog4j2.configurationFile={log4j}",
            "-cp", classpath]  # fmt: skip


def _run(program: str, classpath: str, args: list[str], work: Path, timeout: float = 120) -> list[str]:
    """The standard output lines of ``program`` (a file of java/) run with ``args``."""
    done = subprocess.run(
        [*_jvm(work / "log4j2.properties", classpath), str(JAVA_DIR / program), *args],
        capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"{program} {args[0]} exited with {done.returncode}:\n{done.stderr[-3000:]}"
    return done.stdout.splitlines()


def _avro_classpath() -> str:
    require_jar("kafka-clients-*.jar", "Kafka 4.x's Java clients")
    return ":".join([*(str(jar) for jar in flink_registry_jars()), f"{KAFKA4_LIBS}/*"])


def java_avro_produce(
    registry: str, bootstrap: str, topic: str, schema: Any, first: int, count: int, work: Path
) -> list[tuple[int, bytes]]:
    """Flink's ConfluentRegistryAvroSerializationSchema registers ``schema`` (subject ``<topic>-value``)
    in ``registry`` and frames ``count`` records (``java_avro_value(schema, i)`` from ``first``), which
    Kafka's Java producer sends to partition 0 of ``topic``; (offset, value) of each."""
    path = work / f"{topic}-{first}.avsc"
    path.write_text(json.dumps(schema))
    lines = _run(
        "RegistryAvroClients.java", _avro_classpath(),
        ["produce", registry, bootstrap, topic, str(path), str(first), str(count)], work,
    )  # fmt: skip
    sent = [line.split(" ") for line in lines if line.startswith("SENT ")]
    return [(int(offset), bytes.fromhex(value)) for _, offset, value in sent]


def java_avro_read(registry: str, bootstrap: str, topic: str, reader: Any, count: int, work: Path) -> list[Any]:
    """The first ``count`` values of partition 0 of ``topic`` as Flink's
    ConfluentRegistryAvroDeserializationSchema reads them into ``reader`` (each writer schema
    fetched from ``registry`` by the value's id): each record as JSON data."""
    path = work / f"{topic}-reader.avsc"
    path.write_text(json.dumps(reader))
    lines = _run(
        "RegistryAvroClients.java", _avro_classpath(), ["read", registry, bootstrap, topic, str(path), str(count)],
        work,
    )  # fmt: skip
    return [json.loads(line.split(" ", 2)[2]) for line in lines if line.startswith("READ ")]


def java_avro_value(schema: Any, i: int) -> dict[str, Any]:
    """What RegistryAvroClients.java's ``valueOf`` puts in record ``i`` of ``schema`` (a record)."""
    values = {
        "id": f"java-{i}",
        "n": i * 1_000_000_007,
        "score": i / 4.0,
        "ok": i % 2 == 0,
        "note": None if i % 3 == 0 else f"note-{i}",
    }
    return {field["name"]: values[field["name"]] for field in schema["fields"]}


class ConfluentAvroChecker:
    """java/AvroCompatibility.java in one JVM: Confluent's verdicts on (new, previous) Avro schema
    pairs, as the messages its registry lists at BACKWARD, FORWARD and FULL (empty: compatible)."""

    def __init__(self, work: Path) -> None:
        slf4j = require_jar("slf4j-api-*.jar", "slf4j's API", SCHEMA_PEERS)
        classpath = f"{flink_registry_jars()[0]}:{slf4j}"
        self.process = subprocess.Popen(
            [*_jvm(work / "log4j2.properties", classpath), str(JAVA_DIR / "AvroCompatibility.java")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        assert self.process.stdout is not None
        ready = self.process.stdout.readline()
        assert ready.strip() == "READY", f"AvroCompatibility.java did not start: {ready!r}"

    def verdicts(self, new: str, previous: str) -> dict[str, list[str]]:
        """Per level, Confluent's messages for ``new`` following ``previous`` (version 1 of its
        subject); ``{"error": ...}`` when Confluent's AvroSchema does not parse one of them."""
        assert self.process.stdin is not None and self.process.stdout is not None
        for text in (new, previous):
            assert "\n" not in text and "\r" not in text, "one schema per line"
        self.process.stdin.write(f"{new}\n{previous}\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        assert line, f"AvroCompatibility.java ended (exit {self.process.poll()})"
        answer: dict[str, list[str]] = json.loads(line)
        return answer

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()  # the end of its input ends the JVM
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        if self.process.stdout is not None:
            self.process.stdout.close()

    def __enter__(self) -> ConfluentAvroChecker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect_json_produce(bootstrap: str, topic: str, count: int, work: Path) -> list[int]:
    """Kafka Connect's JsonConverter (schemas.enable=true) writes ``count`` records of
    java/ConnectJsonProducer.java's schema (``connect_value(i)`` each) to partition 0 of ``topic``,
    keyed ``c-<i>``; their offsets."""
    require_jar("connect-json-*.jar", "Kafka Connect's JsonConverter (connect-json)")
    lines = _run("ConnectJsonProducer.java", f"{KAFKA4_LIBS}/*", [bootstrap, topic, str(count)], work)
    return [int(line.split(" ")[1]) for line in lines if line.startswith("SENT ")]


def connect_value(i: int) -> dict[str, Any]:
    """What ConnectJsonProducer.java's ``valueOf`` puts in record ``i``, as Spark returns the columns
    (Date as a date, Time as microseconds of the day, Timestamp as an aware UTC datetime)."""
    millis_of_day = (i * 1_234_567) % 86_400_000
    return {
        "i8": i % 100 - 50,
        "i16": i * 300 - 20000,
        "i32": i * 100_000,
        "i64": i * 10_000_000_000,
        "f32": i + 0.5,
        "f64": i / 8.0,
        "flag": i % 2 == 0,
        "name": f"név-{i}",
        "blob": bytes([i % 256, 0, 255]),
        "amount": decimal.Decimal(i * 1001 - 5000).scaleb(-2),
        "day": dt.date(1970, 1, 1) + dt.timedelta(days=20_000 + i),
        "at_time": millis_of_day * 1000,
        "at": dt.datetime.fromtimestamp((1_764_300_000_000 + i * 1000) / 1000, dt.UTC),
        "maybe": None if i % 2 == 0 else f"m{i}",
        "inner": {"a": f"in-{i}", "b": i},
        "list": [i, i + 1, i + 2],
        "tags": None if i % 5 == 4 else {f"k{i}": i, "all": 1},
    }
