"""``kafkalog registry`` with a Java client of Confluent's registry API from Maven Central: Flink's
ConfluentRegistryAvroSerializationSchema (Confluent's CachedSchemaRegistryClient inside) registers
its schema in our registry and frames Avro records that Kafka's Java producer sends to kafkalog and
to Kafka 4.x; two versions of the schema (a field added with a default). The ids in the frames are
the ones our registry gave; confluent-kafka's AvroDeserializer, against our registry, decodes the
bytes the broker holds, and Flink's deserializer reads every record back into the newer schema."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.support.kafka4 import Kafka4Process
from tests.support.kafkalog import BrokerProcess
from tests.support.registry_java import java_avro_produce, java_avro_read, java_avro_value
from tests.support.schema_registry import RegistryProcess, call, schema_id_of

pytestmark = pytest.mark.integration

V1 = {
    "type": "record", "name": "Reading", "namespace": "java.peer",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "n", "type": "long"},
        {"name": "score", "type": "double"},
        {"name": "ok", "type": "boolean"},
    ],
}  # fmt: skip
V2 = {**V1, "fields": [*V1["fields"], {"name": "note", "type": ["null", "string"], "default": None}]}
PER_VERSION = 5


def _consume(bootstrap: str, topic: str, count: int) -> list[bytes]:
    """The first ``count`` values of partition 0 of ``topic``, read by librdkafka."""
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"check-{topic}", "enable.auto.commit": False}
    )
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and not message.error():
                values.append(message.value() or b"")
    finally:
        consumer.close()
    assert len(values) == count, f"read {len(values)} of {count} values of {topic}"
    return values


@pytest.mark.parametrize("cluster", ["kafkalog", "kafka4"])
def test_flinks_confluent_serializer_registers_in_our_registry_and_its_records_decode(
    cluster: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    fixture = "kafkalog_shared" if cluster == "kafkalog" else "kafka4"
    broker: BrokerProcess | Kafka4Process = request.getfixturevalue(fixture)
    name = uuid.uuid4().hex[:8]  # the broker is shared by the session: topics and a group of our own
    topic = f"java-{name}"
    settings = {"bootstrap": broker.bootstrap, "topic": f"_schemas_{name}", "group": f"registry-{name}"}
    with RegistryProcess(tmp_path, "registry", **settings) as registry:
        sent = java_avro_produce(registry.url, broker.bootstrap, topic, V1, 0, PER_VERSION, tmp_path)
        sent += java_avro_produce(registry.url, broker.bootstrap, topic, V2, PER_VERSION, PER_VERSION, tmp_path)
        assert [offset for offset, _ in sent] == list(range(2 * PER_VERSION))

        subject = f"{topic}-value"
        assert call(registry.url, "GET", f"/subjects/{subject}/versions") == (200, [1, 2])
        ids = [call(registry.url, "GET", f"/subjects/{subject}/versions/{v}")[1]["id"] for v in (1, 2)]
        assert ids[0] != ids[1]
        assert [schema_id_of(value) for _, value in sent] == [ids[0]] * PER_VERSION + [ids[1]] * PER_VERSION
        for schema_id, schema in zip(ids, (V1, V2), strict=True):
            status, stored = call(registry.url, "GET", f"/schemas/ids/{schema_id}")
            assert status == 200
            assert json.loads(stored["schema"]) == schema

        held = _consume(broker.bootstrap, topic, 2 * PER_VERSION)
        assert held == [value for _, value in sent], "the broker holds the bytes the Java producer sent"
        expected = [java_avro_value(V1, i) for i in range(PER_VERSION)]
        expected += [java_avro_value(V2, i) for i in range(PER_VERSION, 2 * PER_VERSION)]
        with SchemaRegistryClient({"url": registry.url}) as client:
            deserialize = AvroDeserializer(client)
            context = SerializationContext(topic, MessageField.VALUE)
            assert [deserialize(value, context) for value in held] == expected

        read_back = java_avro_read(registry.url, broker.bootstrap, topic, V2, 2 * PER_VERSION, tmp_path)
        assert read_back == [{**value, "note": value.get("note")} for value in expected]
