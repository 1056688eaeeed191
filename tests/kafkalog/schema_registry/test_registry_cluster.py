"""``kafkalog registry`` processes over a real kafkalog broker, with confluent-kafka's own client,
serializers, producer and consumer as the peers: values framed by the registry's ids round-trip
through kafkalog; the state is the compacted ``_schemas`` topic in Confluent's formats, so a
registry killed and started again serves the same ids, and two registries on one topic agree, the
one not primary forwarding writes, the other taking over when the primary dies; TLS and basic
authentication through the client."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from kafkalog.client import Admin, SimpleConsumer
from kafkalog.server import Broker, BrokerConfig
from kafkalog.server.groups.settings import GroupSettings
from tests.support.certificates import authority
from tests.support.schema_registry import (
    KAFKALOG,
    PROTO,
    RegistryProcess,
    call,
    eventually,
    protobuf_class,
    register,
    snapshot,
)

pytestmark = pytest.mark.integration

V1 = {"type": "record", "name": "Ev", "namespace": "demo", "fields": [{"name": "id", "type": "string"}]}
V2 = {**V1, "fields": [*V1["fields"], {"name": "n", "type": "int", "default": 0}]}
V2_BAD = {**V1, "fields": [{"name": "id", "type": "int"}]}


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    """A broker whose group coordinator takes short sessions and rebalances at once (Kafka's
    group.min.session.timeout.ms and group.initial.rebalance.delay.ms), so an election settles, and a
    dead primary is replaced, in seconds."""
    groups = GroupSettings(min_session_timeout_ms=1000, initial_rebalance_delay_ms=0)
    with Broker(BrokerConfig(port=0, data_dirs=(tmp_path / "data",), groups=groups)) as running:
        yield running


def bootstrap_of(broker: Broker) -> str:
    return f"127.0.0.1:{broker.port}"


def test_serializers_round_trip_through_kafkalog_and_the_topic_holds_confluents_records(
    broker: Broker, tmp_path: Path
) -> None:
    bootstrap = bootstrap_of(broker)
    with (
        RegistryProcess(tmp_path, "registry", bootstrap=bootstrap) as registry,
        SchemaRegistryClient({"url": registry.url}) as client,
    ):
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
        avro = AvroSerializer(client, json.dumps(V1))
        event = protobuf_class(PROTO, "demo.Ev")
        proto = ProtobufSerializer(event, client, {"use.deprecated.format": False})
        json_schema = {"type": "object", "title": "Ev", "properties": {"id": {"type": "string"}}}
        as_json = JSONSerializer(json.dumps(json_schema), client)
        for i in range(20):
            producer.produce("avro", value=avro({"id": f"a{i}"}, SerializationContext("avro", MessageField.VALUE)))
            message = event(id=f"p{i}", n=i)
            producer.produce("proto", value=proto(message, SerializationContext("proto", MessageField.VALUE)))
            producer.produce("json", value=as_json({"id": f"j{i}"}, SerializationContext("json", MessageField.VALUE)))
        assert producer.flush(30) == 0

        consumer = confluent_kafka.Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "readers", "auto.offset.reset": "earliest"}
        )
        consumer.subscribe(["avro", "proto", "json"])
        reader = SchemaRegistryClient({"url": registry.url})
        decoders = {
            "avro": AvroDeserializer(reader),
            "proto": ProtobufDeserializer(event, {"use.deprecated.format": False}),
            "json": JSONDeserializer(json.dumps(json_schema)),
        }
        got: dict[str, list[Any]] = {"avro": [], "proto": [], "json": []}
        deadline = time.monotonic() + 60
        while sum(map(len, got.values())) < 60 and time.monotonic() < deadline:
            record = consumer.poll(1.0)
            if record is None or record.error():
                continue
            topic = record.topic()
            value = decoders[topic](record.value(), SerializationContext(topic, MessageField.VALUE))
            got[topic].append(value)
        consumer.close()
        reader.close()
        assert [v["id"] for v in got["avro"]] == [f"a{i}" for i in range(20)]
        assert [(m.id, m.n) for m in got["proto"]] == [(f"p{i}", i) for i in range(20)]
        assert [v["id"] for v in got["json"]] == [f"j{i}" for i in range(20)]
        assert sorted(client.get_subjects()) == ["avro-value", "json-value", "proto-value"]

        # a refusal through the client, as Confluent's registry words it
        with pytest.raises(SchemaRegistryError) as refused:
            client.register_schema("avro-value", Schema(json.dumps(V2_BAD), "AVRO"))
        assert refused.value.http_status_code == 409 and refused.value.error_code == 409
        assert "{errorType:'TYPE_MISMATCH'" in refused.value.error_message
        assert client.register_schema("avro-value", Schema(json.dumps(V2), "AVRO")) == 4

    with Admin(bootstrap) as admin:
        assert admin.list_topics()["_schemas"] == 1
        assert admin.topic_configs("_schemas", ["cleanup.policy"]) == {"cleanup.policy": "compact"}
    with SimpleConsumer(bootstrap) as reader_:
        keys = [m.key for m in reader_.messages("_schemas", 0, 0, reader_.latest_offset("_schemas", 0))]
    assert keys == [
        b'{"keytype":"SCHEMA","subject":"avro-value","version":1,"magic":1}',
        b'{"keytype":"SCHEMA","subject":"proto-value","version":1,"magic":1}',
        b'{"keytype":"SCHEMA","subject":"json-value","version":1,"magic":1}',
        b'{"keytype":"SCHEMA","subject":"avro-value","version":2,"magic":1}',
    ]


def test_a_registry_killed_and_started_again_serves_the_same_state(broker: Broker, tmp_path: Path) -> None:
    # a short session: the restarted registry waits for the killed one's membership to expire
    registry = RegistryProcess(tmp_path, "registry", bootstrap=bootstrap_of(broker), session_timeout_ms=2000).start()
    try:
        url = registry.url
        assert register(url, "a", V1) == (200, {"id": 1})
        assert register(url, "b", V1) == (200, {"id": 1})
        assert register(url, "a", V2) == (200, {"id": 2})
        assert register(url, "c", {**V1, "name": "Other"}) == (200, {"id": 3})
        assert call(url, "DELETE", "/subjects/a/versions/1") == (200, 1)
        assert call(url, "DELETE", "/subjects/c") == (200, [1])
        assert call(url, "DELETE", "/subjects/c?permanent=true") == (200, [1])
        assert call(url, "PUT", "/config/b", {"compatibility": "FULL"})[0] == 200
        assert call(url, "PUT", "/mode/b", {"mode": "READONLY"})[0] == 200
        before = snapshot(url)
        registry.kill()
        registry.start()  # on a new port
        assert snapshot(registry.url) == before
        assert call(registry.url, "GET", "/mode/b") == (200, {"mode": "READONLY"})
        assert register(registry.url, "d", {**V1, "name": "Fourth"}) == (200, {"id": 4}), "id 3 is never given again"
    finally:
        registry.kill()


def test_two_registries_on_one_topic_agree_forward_and_take_over(broker: Broker, tmp_path: Path) -> None:
    settings = {"bootstrap": bootstrap_of(broker), "session_timeout_ms": 3000}
    with RegistryProcess(tmp_path, "one", **settings) as one, RegistryProcess(tmp_path, "two", **settings) as two:
        eventually(lambda: {one.believes_primary(), two.believes_primary()} == {True, False}, what="one primary")
        primary, secondary = (one, two) if one.believes_primary() else (two, one)
        assert register(secondary.url, "s", V1) == (200, {"id": 1}), "forwarded to the primary"
        assert call(secondary.url, "GET", "/schemas/ids/1")[0] == 200, "the secondary read its forwarded write back"
        assert call(primary.url, "GET", "/subjects/s/versions/1")[1]["id"] == 1
        assert register(primary.url, "t", V1) == (200, {"id": 1})
        assert register(secondary.url, "s", V2) == (200, {"id": 2})
        status, refused = register(secondary.url, "s", V2_BAD)
        assert (status, refused["error_code"]) == (409, 409), "the primary's refusal, forwarded back"
        assert call(secondary.url, "PUT", "/config", {"compatibility": "NONE"})[0] == 200
        eventually(lambda: snapshot(one.url) == snapshot(two.url), 10, "both registries hold the same state")

        primary.kill()
        # the coordinator expires the dead primary after its session timeout: the other takes over
        eventually(lambda: secondary.believes_primary() is True, 30, "the survivor elected")
        assert register(secondary.url, "u", {**V1, "name": "After"}) == (200, {"id": 3})
        assert call(secondary.url, "GET", "/subjects")[1] == ["s", "t", "u"]


def test_an_ineligible_registry_forwards_and_never_writes(broker: Broker, tmp_path: Path) -> None:
    settings = {"bootstrap": bootstrap_of(broker), "session_timeout_ms": 3000}
    with (
        RegistryProcess(tmp_path, "lead", **settings) as lead,
        RegistryProcess(tmp_path, "follow", leader_eligibility=False, **settings) as follow,
    ):
        eventually(lambda: follow.believes_primary() is False and lead.believes_primary(), what="lead elected")
        assert register(follow.url, "s", V1) == (200, {"id": 1})
        lead.stop()  # leaves the group at once: nobody eligible is left

        def refused() -> Any:
            status, answer = register(follow.url, "s", V2)
            return answer if status == 500 else None

        answer = eventually(refused, 30, "writes refused with no primary")
        assert answer["error_code"] in (50003, 50004), answer
        assert call(follow.url, "GET", "/subjects/s/versions")[1] == [1], "reads go on"


def test_tls_and_basic_auth_with_two_registries(broker: Broker, tmp_path: Path) -> None:
    ca = authority(tmp_path / "certs")
    issued = ca.issue("registry", [], server=True)
    users = tmp_path / "users"
    subprocess.run(
        [str(KAFKALOG), "registry-user", "alice", "--file", str(users), "--password-stdin"],
        input="s3cret\n", text=True, check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    assert "s3cret" not in users.read_text()
    tls = {"certificate": str(issued.certificate), "key": str(issued.key), "ca_file": str(ca.certificate)}
    settings = {"bootstrap": bootstrap_of(broker), "tls": tls, "users_file": str(users), "session_timeout_ms": 3000}
    with RegistryProcess(tmp_path, "one", **settings) as one, RegistryProcess(tmp_path, "two", **settings) as two:
        assert one.url.startswith("https://")
        eventually(lambda: {one.believes_primary(), two.believes_primary()} == {True, False}, what="one primary")
        secondary = two if one.believes_primary() else one
        common = {"url": secondary.url, "ssl.ca.location": str(ca.certificate)}
        with SchemaRegistryClient({**common, "basic.auth.user.info": "alice:s3cret"}) as client:
            assert client.register_schema("s", Schema(json.dumps(V1), "AVRO")) == 1, "forwarded over TLS, logged in"
            assert client.get_schema(1).schema_str == json.dumps(V1, separators=(",", ":"))
        with SchemaRegistryClient({**common, "basic.auth.user.info": "alice:wrong"}) as wrong:
            with pytest.raises(SchemaRegistryError) as refused:
                wrong.get_subjects()
            assert refused.value.http_status_code == 401


def test_a_topic_a_registry_cannot_keep_its_state_in_is_refused(broker: Broker, tmp_path: Path) -> None:
    bootstrap = bootstrap_of(broker)
    with Admin(bootstrap) as admin:
        admin.create_topic("two_partitions", 2, {"cleanup.policy": "compact"})
        admin.create_topic("deleting", 1, {"cleanup.policy": "delete"})
    for topic, reason in (("two_partitions", "2 partitions"), ("deleting", "cleanup.policy=delete")):
        with pytest.raises(RuntimeError, match=reason):
            RegistryProcess(tmp_path, topic, bootstrap=bootstrap, topic=topic).start()


def test_two_primaries_at_once_never_answer_one_id_for_two_schemas(broker: Broker, tmp_path: Path) -> None:
    """Two registries on one topic in two groups: each is primary of its own, the hand-over that never
    settles. Registering into one subject from both at once, they keep deciding the same next version
    and id; every id answered names the schema it was answered for, at both and after a replay, and
    the registrations that lost answer 50001 for their clients to retry."""
    settings = {"bootstrap": bootstrap_of(broker), "session_timeout_ms": 3000}
    with (
        RegistryProcess(tmp_path, "one", group="first", **settings) as one,
        RegistryProcess(tmp_path, "two", group="second", **settings) as two,
    ):
        eventually(lambda: one.believes_primary() is True and two.believes_primary() is True, what="both primary")
        answers: list[tuple[dict[str, Any], int, Any]] = []

        def hammer(url: str, tag: str) -> None:
            for i in range(25):
                schema = {**V1, "fields": [*V1["fields"], {"name": f"{tag}{i}", "type": "int", "default": 0}]}
                status, body = register(url, "s", schema)
                answers.append((schema, status, body))

        threads = [threading.Thread(target=hammer, args=(r.url, tag)) for r, tag in ((one, "a"), (two, "b"))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        won = [(schema, body["id"]) for schema, status, body in answers if status == 200]
        lost = [body for _, status, body in answers if status != 200]
        assert len(won) + len(lost) == 50 and won
        assert all(body["error_code"] == 50001 for body in lost), lost
        assert len({schema_id for _, schema_id in won}) == len(won), "one id per schema answered"
        eventually(lambda: snapshot(one.url) == snapshot(two.url), 10, "both registries hold the same state")
    with RegistryProcess(tmp_path, "replay", group="third", **settings) as replay:  # the topic read again
        for schema, schema_id in won:
            status, body = call(replay.url, "GET", f"/schemas/ids/{schema_id}")
            assert status == 200 and json.loads(body["schema"]) == schema, (schema_id, body)
