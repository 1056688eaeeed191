"""ACLs on a broker with SASL and TLS listeners: managed with Kafka 4.x's kafka-acls and librdkafka's
admin client, met by real clients. A principal without the ACL for a topic, a group or topic
creation is refused with Kafka's error while the others carry on; metadata hides what a client may
not see; a client certificate's subject is a principal ACLs name; the ACLs outlive a restart."""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import confluent_kafka
import confluent_kafka.admin as confluent_admin
import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # kafka-python uses a deprecated importlib API
    import kafka.admin  # type: ignore[import-untyped]
    import kafka.errors  # type: ignore[import-untyped]

from kafkalog.server.security.credentials import UsersFile
from tests.support.certificates import Authority, authority, person
from tests.support.kafka4 import run_tool
from tests.support.kafkalog import BrokerProcess

pytestmark = pytest.mark.integration

ACLS = "org.apache.kafka.tools.AclCommand"
READER = "User:CN=reader,OU=data,O=Example"


@dataclass(frozen=True)
class Guarded:
    broker: BrokerProcess
    ca: Authority
    root: Path

    def sasl(self, user: str, **extra: Any) -> dict[str, Any]:
        return {
            "bootstrap.servers": f"127.0.0.1:{self.broker.ports['SASL_PLAINTEXT']}",
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": user, "sasl.password": f"{user}-password", **extra,
        }  # fmt: skip

    def kafka_acls(self, *args: str) -> str:
        properties = self.root / "admin.properties"
        properties.write_text(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config="
            "org.apache.kafka.common.security.scram.ScramLoginModule required"
            ' username="admin" password="admin-password";\n'
        )
        return run_tool(
            ACLS, "--bootstrap-server", f"127.0.0.1:{self.broker.ports['SASL_PLAINTEXT']}",
            "--command-config", str(properties), *args, log4j=self.root / "tools-log4j2.properties",
        ).stdout.decode()  # fmt: skip


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Guarded]:
    root = tmp_path_factory.mktemp("guarded")
    ca = authority(root / "certs")
    server = ca.issue("broker", person("broker"), server=True)
    users = UsersFile(root / "users.json")
    for user in ("admin", "alice", "bob"):
        users.set_password(user, f"{user}-password", ["SCRAM-SHA-512"])
    config = {
        "listeners": ["SASL_PLAINTEXT://127.0.0.1:0", "SSL://127.0.0.1:0"],
        "sasl": {"users_file": str(users.path), "mechanisms": ["SCRAM-SHA-512"]},
        "tls": {"certificate": str(server.certificate), "key": str(server.key), "client_ca": str(ca.certificate),
                "client_auth": "requested"},
        "authorization": {"super_users": ["User:admin"]},
    }  # fmt: skip
    with BrokerProcess(root / "data", **config) as broker:
        yield Guarded(broker, ca, root)


def _deliver(config: dict[str, Any], topic: str, value: bytes) -> confluent_kafka.KafkaError | None:
    """Produce one message; the delivery's error (None: delivered)."""
    outcome: list[confluent_kafka.KafkaError | None] = []
    producer = confluent_kafka.Producer({**config, "message.timeout.ms": 8000, "linger.ms": 0})
    producer.produce(topic, value, on_delivery=lambda error, _: outcome.append(error))
    producer.flush(15)
    assert outcome, "no delivery report"
    return outcome[0]


def _consume(config: dict[str, Any], topic: str, group: str, count: int) -> tuple[list[bytes], list[str]]:
    """Up to ``count`` values of ``topic`` read in ``group``, and the errors the consumer met."""
    consumer = confluent_kafka.Consumer({**config, "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values: list[bytes] = []
    errors: list[str] = []
    deadline = time.monotonic() + 15
    while len(values) < count and time.monotonic() < deadline and not errors:
        message = consumer.poll(0.5)
        if message is None:
            continue
        if message.error() is not None:
            errors.append(message.error().name())
        else:
            values.append(message.value())
    consumer.close()
    return values, errors


def test_kafka_acls_grants_and_clients_without_the_acl_are_refused_while_others_carry_on(guarded: Guarded) -> None:
    added = guarded.kafka_acls("--add", "--allow-principal", "User:alice", "--operation", "Write",
                               "--operation", "Describe", "--topic", "orders")  # fmt: skip
    assert "principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW" in added
    guarded.kafka_acls("--add", "--allow-principal", "User:alice", "--operation", "Read", "--resource-pattern-type",
                       "prefixed", "--topic", "pay", "--group", "alice-")  # fmt: skip
    listed = guarded.kafka_acls("--list")
    assert "ResourcePattern(resourceType=TOPIC, name=pay, patternType=PREFIXED)" in listed
    assert "ResourcePattern(resourceType=GROUP, name=alice-, patternType=PREFIXED)" in listed

    admin = guarded.sasl("admin")
    assert _deliver(admin, "payments", b"paid") is None  # the super user: anything, auto-creation too
    assert _deliver(admin, "orders", b"created by admin") is None  # alice may write, not create
    assert _deliver(guarded.sasl("alice"), "orders", b"from alice") is None
    refused = _deliver(guarded.sasl("bob"), "orders", b"from bob")
    assert refused is not None and refused.code() == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _deliver(guarded.sasl("alice"), "orders", b"alice again") is None  # she carries on

    assert _consume(guarded.sasl("alice"), "payments", "alice-loader", 1) == ([b"paid"], [])
    _, bob_errors = _consume(guarded.sasl("bob"), "payments", "bob-loader", 1)
    assert bob_errors and bob_errors[0] in ("GROUP_AUTHORIZATION_FAILED", "TOPIC_AUTHORIZATION_FAILED"), bob_errors
    _, wrong_group = _consume(guarded.sasl("alice"), "payments", "team-loader", 1)
    assert wrong_group == ["GROUP_AUTHORIZATION_FAILED"]

    bob_admin = confluent_admin.AdminClient(guarded.sasl("bob"))
    (future,) = bob_admin.create_topics([confluent_admin.NewTopic("bobs-topic", 1)]).values()
    with pytest.raises(confluent_kafka.KafkaException, match="TOPIC_AUTHORIZATION_FAILED"):
        future.result(15)
    topics = bob_admin.list_topics(timeout=15).topics
    assert not {"orders", "payments", "bobs-topic"} & set(topics)  # what bob may not see is not listed
    alice_sees = confluent_admin.AdminClient(guarded.sasl("alice")).list_topics(timeout=15).topics
    assert {"orders", "payments"} <= set(alice_sees)


def test_a_client_certificate_subject_is_a_principal_acls_name(guarded: Guarded) -> None:
    reader = guarded.ca.issue("reader", person("reader"))
    admin = confluent_admin.AdminClient(guarded.sasl("admin"))
    binding = confluent_admin.AclBinding(
        confluent_admin.ResourceType.TOPIC, "certified", confluent_admin.ResourcePatternType.LITERAL, READER, "*",
        confluent_admin.AclOperation.READ, confluent_admin.AclPermissionType.ALLOW,
    )  # fmt: skip
    group = confluent_admin.AclBinding(
        confluent_admin.ResourceType.GROUP, "readers", confluent_admin.ResourcePatternType.LITERAL, READER, "*",
        confluent_admin.AclOperation.READ, confluent_admin.AclPermissionType.ALLOW,
    )  # fmt: skip
    for future in admin.create_acls([binding, group]).values():
        future.result(15)
    assert _deliver(guarded.sasl("admin"), "certified", b"for the reader") is None
    tls = {"bootstrap.servers": f"127.0.0.1:{guarded.broker.ports['SSL']}", "security.protocol": "SSL",
           "ssl.ca.location": str(guarded.ca.certificate)}  # fmt: skip
    with_certificate = {**tls, "ssl.certificate.location": str(reader.certificate), "ssl.key.location": str(reader.key)}
    assert _consume(with_certificate, "certified", "readers", 1) == ([b"for the reader"], [])
    _, anonymous = _consume(tls, "certified", "readers", 1)  # no certificate: User:ANONYMOUS
    assert anonymous and anonymous[0] in ("GROUP_AUTHORIZATION_FAILED", "TOPIC_AUTHORIZATION_FAILED"), anonymous


def test_only_those_allowed_change_acls_and_the_acls_outlive_a_restart(guarded: Guarded) -> None:
    bob = confluent_admin.AdminClient(guarded.sasl("bob"))
    anything = confluent_admin.AclBindingFilter(
        confluent_admin.ResourceType.ANY, None, confluent_admin.ResourcePatternType.ANY, None, None,
        confluent_admin.AclOperation.ANY, confluent_admin.AclPermissionType.ANY,
    )  # fmt: skip
    grant = confluent_admin.AclBinding(
        confluent_admin.ResourceType.TOPIC, "orders", confluent_admin.ResourcePatternType.LITERAL, "User:bob", "*",
        confluent_admin.AclOperation.WRITE, confluent_admin.AclPermissionType.ALLOW,
    )  # fmt: skip
    # (librdkafka's describe_acls returns an empty list for the refusal; kafka-python reports it)
    python_admin = kafka.admin.KafkaAdminClient(
        bootstrap_servers=f"127.0.0.1:{guarded.broker.ports['SASL_PLAINTEXT']}", security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="bob", sasl_plain_password="bob-password",
    )  # fmt: skip
    everything = kafka.admin.ACLFilter(
        principal=None, host=None, operation=kafka.admin.ACLOperation.ANY,
        permission_type=kafka.admin.ACLPermissionType.ANY,
        resource_pattern=kafka.admin.ResourcePatternFilter(
            kafka.admin.ResourceType.ANY, None, kafka.admin.ACLResourcePatternType.ANY
        ),
    )  # fmt: skip
    with pytest.raises(kafka.errors.ClusterAuthorizationFailedError, match="User:bob may not describe ACLs"):
        python_admin.describe_acls(everything)
    python_admin.close()
    (created,) = bob.create_acls([grant]).values()
    with pytest.raises(confluent_kafka.KafkaException, match="CLUSTER_AUTHORIZATION_FAILED"):
        created.result(15)  # bob may not grant himself anything
    (deleted,) = bob.delete_acls([anything]).values()
    with pytest.raises(confluent_kafka.KafkaException, match="CLUSTER_AUTHORIZATION_FAILED"):
        deleted.result(15)
    before = guarded.kafka_acls("--list")
    guarded.broker.stop()
    guarded.broker.start()
    # (kafka-acls prints the resources in no fixed order: compared as sets of lines)
    assert set(guarded.kafka_acls("--list").splitlines()) == set(before.splitlines())
    assert "principal=User:CN=reader,OU=data,O=Example" in before
    removed = guarded.kafka_acls("--remove", "--force", "--allow-principal", "User:alice", "--operation", "Write",
                                 "--topic", "orders")  # fmt: skip
    assert "Removing ACLs" in removed or removed == ""
    refused = _deliver(guarded.sasl("alice"), "orders", b"no longer")
    assert refused is not None and refused.code() == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED
