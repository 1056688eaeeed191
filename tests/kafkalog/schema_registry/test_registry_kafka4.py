"""``kafkalog registry`` on Apache Kafka 4.x: the ``_schemas`` topic made and read there, two
registries elected through Kafka's group coordinator (the classic protocol, type ``sr``), a value
framed by the registry's id round-tripping through Kafka with confluent-kafka's serializers."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.kafkalog.schema_registry.test_registry_cluster import V1
from tests.support.kafka4 import Kafka4Process
from tests.support.schema_registry import RegistryProcess, call, eventually, register, snapshot

pytestmark = pytest.mark.integration


def test_two_registries_on_kafka4(kafka4: Kafka4Process, tmp_path: Path) -> None:
    name = uuid.uuid4().hex[:8]  # the broker is shared by the session: a topic and a group of our own
    settings = {
        "bootstrap": kafka4.bootstrap, "topic": f"_schemas_{name}", "group": f"registry-{name}",
        "session_timeout_ms": 6000,
    }  # fmt: skip
    with RegistryProcess(tmp_path, "one", **settings) as one, RegistryProcess(tmp_path, "two", **settings) as two:
        eventually(lambda: {one.believes_primary(), two.believes_primary()} == {True, False}, 60, "one primary")
        secondary = two if one.believes_primary() else one
        assert register(secondary.url, "s", V1) == (200, {"id": 1})
        eventually(lambda: snapshot(one.url) == snapshot(two.url), 10, "both registries hold the same state")
        topic = f"events-{name}"
        with SchemaRegistryClient({"url": secondary.url}) as client:
            producer = confluent_kafka.Producer({"bootstrap.servers": kafka4.bootstrap})
            value = AvroSerializer(client, json.dumps(V1))(
                {"id": "k4"}, SerializationContext(topic, MessageField.VALUE)
            )
            producer.produce(topic, value=value)
            assert producer.flush(30) == 0
            consumer = confluent_kafka.Consumer(
                {"bootstrap.servers": kafka4.bootstrap, "group.id": f"r-{name}", "auto.offset.reset": "earliest"}
            )
            consumer.subscribe([topic])
            deadline = time.monotonic() + 60
            record = None
            while record is None and time.monotonic() < deadline:
                polled = consumer.poll(1.0)
                record = polled if polled is not None and not polled.error() else None
            consumer.close()
            assert record is not None
            decoded = AvroDeserializer(client)(record.value(), SerializationContext(topic, MessageField.VALUE))
            assert decoded == {"id": "k4"}
        assert call(one.url, "GET", f"/subjects/{topic}-value/versions")[1] == [1]
