"""Change data capture from PostgreSQL with the Debezium PostgreSQL connector (3.6.1.Final, pgoutput)
on a Kafka Connect worker (tests.support.connect), against any broker: the source database prepared
(a replication role, a publication, REPLICA IDENTITY FULL), the connector's configuration, its
registration, and its events read back.

The database (tests.support.postgres, started with LOGICAL_DECODING) is prepared by its superuser:
it creates the publication of the captured tables itself, so the connector's role needs no more than
``REPLICATION LOGIN`` and ``SELECT`` (``publication.autocreate.mode=filtered`` would need it to own
the tables, ``all_tables`` a superuser). REPLICA IDENTITY FULL gives every update's and delete's
``before`` every column (DEFAULT: the key's only). docs/cdc.md "Setting up the chain" says why each
setting of ``connector_config`` is what it is.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from tests.support.connect import ConnectWorker
from tests.support.installed import PEERS, require_jar
from tests.support.postgres import PostgresProcess

CONNECT_PLUGINS = PEERS / "connect-plugins"
"""Connect's plugin.path: each plugin a directory below it (peers/debezium/pom.xml)."""
DEBEZIUM_POSTGRES = CONNECT_PLUGINS / "debezium-connector-postgres"
POSTGRES_CONNECTOR = "io.debezium.connector.postgresql.PostgresConnector"
JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
ROLE = "debezium"
"""The connector's database role: REPLICATION LOGIN, SELECT on the captured tables."""


def worker_settings() -> dict[str, object]:
    """A Connect worker's overrides for Debezium: the plugin path, JSON with schemas for keys and
    values, NULL written as null (Connect's JsonConverter writes a NULL column's schema default by
    default, and Debezium puts the column's DEFAULT into the schema)."""
    require_jar("debezium-connector-postgres-*.jar", "the Debezium PostgreSQL connector", DEBEZIUM_POSTGRES)
    return {
        "plugin.path": CONNECT_PLUGINS,
        "key.converter": JSON_CONVERTER,
        "value.converter": JSON_CONVERTER,
        "key.converter.schemas.enable": "true",
        "value.converter.schemas.enable": "true",
        "value.converter.replace.null.with.default": "false",
    }


def prepare_source(database: PostgresProcess, tables: Sequence[str], publication: str, role: str = ROLE) -> None:
    """As the superuser: the connector's role (REPLICATION LOGIN, SELECT on ``tables``), every one of
    ``tables`` (``schema.table``) with REPLICA IDENTITY FULL, and ``publication`` of exactly them."""
    listed = ", ".join(tables)
    database.sql(
        f"DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{role}') THEN "
        f"CREATE ROLE {role} REPLICATION LOGIN; END IF; END $$;"
        f"GRANT SELECT ON {listed} TO {role};"
        + "".join(f"ALTER TABLE {table} REPLICA IDENTITY FULL;" for table in tables)
        + f"CREATE PUBLICATION {publication} FOR TABLE {listed};"
    )


def connector_config(
    database: PostgresProcess,
    topic_prefix: str,
    tables: Sequence[str],
    *,
    slot: str,
    publication: str,
    partitions: int = 3,
    role: str = ROLE,
    **overrides: object,
) -> dict[str, object]:
    """The connector's configuration: pgoutput through ``slot`` and the superuser's ``publication``,
    an initial snapshot then streaming, every operation (truncates included), tombstones after
    deletes, a heartbeat every second, and topics ``<topic_prefix>.<schema>.<table>`` made by
    Connect with ``partitions`` partitions on the broker's replication factor; ``overrides`` win."""
    return {
        "connector.class": POSTGRES_CONNECTOR,
        "tasks.max": 1,
        "database.hostname": database.host,
        "database.port": database.port,
        "database.user": role,
        "database.password": "unused",  # trust authentication on loopback
        "database.dbname": database.database,
        "topic.prefix": topic_prefix,
        "table.include.list": ",".join(tables),
        "plugin.name": "pgoutput",
        "slot.name": slot,
        "publication.name": publication,
        "publication.autocreate.mode": "disabled",
        "snapshot.mode": "initial",
        "skipped.operations": "none",
        "tombstones.on.delete": "true",
        "heartbeat.interval.ms": 1000,
        # Connect creates the topics (CreateTopics with these configs) before the first record
        "topic.creation.default.replication.factor": -1,
        "topic.creation.default.partitions": partitions,
        "topic.creation.default.cleanup.policy": "delete",
        # the records compressed by Connect's producer (kafkalog refuses a topic's codec other than
        # "producer": it does not recompress; Kafka would, with topic.creation.default.compression.type)
        "producer.override.compression.type": "lz4",
        **overrides,
    }


def register(worker: ConnectWorker, name: str, config: Mapping[str, object], timeout: float = 120) -> None:
    """Create connector ``name`` on ``worker`` and wait until it and its one task run (a task that
    failed raises ConnectError with its trace: a refused topic creation, a missing permission...)."""
    worker.put_connector(name, config)
    worker.poll(f"Debezium connector {name} and its task running", lambda: worker.running(name, 1), timeout)


def drop_slot(database: PostgresProcess, slot: str) -> None:
    """Drop the replication slot once nothing reads it (a slot keeps the server's WAL forever)."""
    database.sql(
        "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
        f"WHERE slot_name = '{slot}' AND NOT active"
    )


@dataclass(frozen=True)
class ChangeEvent:
    """One record of a Debezium topic, decoded: ``key`` the key's payload (the primary key's columns),
    ``value`` the envelope's payload (None for a tombstone), with where it was in the topic."""

    partition: int
    offset: int
    key: dict[str, Any] | None
    value: dict[str, Any] | None
    headers: dict[str, bytes]

    @property
    def op(self) -> str | None:
        """c, u, d, r, t (None for a tombstone)."""
        return None if self.value is None else self.value["op"]

    @property
    def lsn(self) -> int | None:
        return None if self.value is None else self.value["source"]["lsn"]


def read_events(bootstrap: str, topic: str, timeout: float = 20) -> list[ChangeEvent]:
    """Every record of ``topic`` (read committed), partition by partition in offset order, decoded
    from Connect's JSON with schemas, Decimal fields as ``decimal.Decimal``."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=timeout).topics[topic].partitions
        events: list[ChangeEvent] = []
        for partition in sorted(partitions):
            low, high = _watermarks(consumer, TopicPartition(topic, partition), timeout)
            if high <= low:
                continue
            assigned = TopicPartition(topic, partition, low)
            consumer.assign([assigned])
            deadline = time.monotonic() + timeout
            # up to the end by position, not by the last record's offset: a transaction's marker
            # (Connect's exactly-once source) takes the last offset and is never delivered
            while consumer.position([assigned])[0].offset < high:
                message = consumer.poll(0.5)
                if message is None:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"{topic}[{partition}]: not at its end {high} after {timeout} s")
                    continue
                if message.error():
                    raise RuntimeError(f"{topic}[{partition}]: {message.error()}")
                events.append(
                    ChangeEvent(
                        partition,
                        message.offset(),
                        decode(message.key()),
                        decode(message.value()),
                        dict(message.headers() or []),
                    )
                )
        return events
    finally:
        consumer.close()


_TRANSIENT = (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError.UNKNOWN_TOPIC_OR_PART)
"""What a topic just created may answer for a while (librdkafka does not flag them all retriable)."""


def _watermarks(consumer: Consumer, partition: TopicPartition, timeout: float) -> tuple[int, int]:
    """The partition's (low, high) watermarks, asked again while the answer is a retriable error (a
    topic just created: its leader not known everywhere yet)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            low, high = consumer.get_watermark_offsets(partition, timeout=timeout)
        except KafkaException as exc:
            error = exc.args[0]
            transient = error.retriable() or error.code() in _TRANSIENT
            if not transient or time.monotonic() > deadline:
                raise
            time.sleep(0.2)
        else:
            return low, high


def decode(data: bytes | None) -> dict[str, Any] | None:
    """A JsonConverter record (``{"schema": ..., "payload": ...}``) as its payload, each field of
    Connect's Decimal logical type (base64 of the unscaled two's-complement integer) as a Decimal."""
    if data is None:
        return None
    document = json.loads(data)
    payload: dict[str, Any] | None = _decoded(document["schema"], document["payload"])
    return payload


def _decoded(schema: Mapping[str, Any], value: Any) -> Any:
    if value is None:
        return None
    if schema.get("name") == "org.apache.kafka.connect.data.Decimal":
        unscaled = int.from_bytes(base64.b64decode(value), "big", signed=True)
        return Decimal(unscaled).scaleb(-int(schema["parameters"]["scale"]))
    if schema.get("type") == "struct":
        fields = {field["field"]: field for field in schema["fields"]}
        return {name: _decoded(fields[name], item) if name in fields else item for name, item in value.items()}
    return value
