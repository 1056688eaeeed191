"""Kafka's admin tools and admin clients against a kafkalog broker: kafka-topics (create, describe,
add partitions, delete), kafka-configs (describe, alter: applied without a restart, kept across one),
kafka-consumer-groups (list, reset offsets, delete offsets, delete), confluent-kafka's AdminClient and
kafka-python's KafkaAdminClient."""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import confluent_kafka.admin as confluent_admin
import pytest

from kafkalog.client import Producer, SimpleConsumer
from kafkalog.client.offsets import OffsetsClient
from tests.support.kafka4 import CONSUMER_GROUPS, TOPICS, run_tool
from tests.support.kafkalog import BrokerProcess

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.admin  # type: ignore[import-untyped]

pytestmark = pytest.mark.integration

CONFIGS = "kafka.admin.ConfigCommand"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    root = tmp_path_factory.mktemp("kafkalog-admin")
    with BrokerProcess(root / "data") as running:
        yield running


def tool(broker: BrokerProcess, main: str, *args: str) -> str:
    log4j = broker.data_dir.parent / "tools-log4j2.properties"
    return run_tool(main, "--bootstrap-server", broker.bootstrap, *args, log4j=log4j).stdout.decode()


def produce(broker: BrokerProcess, topic: str, partition: int, count: int, size: int = 100) -> None:
    """``count`` messages, each its own batch (so that segments roll between them)."""
    with Producer(broker.bootstrap, linger_ms=0) as producer:
        for i in range(count):
            producer.send(topic, b"%06d" % i + b"x" * size, partition=partition)
            producer.flush()


def segments(broker: BrokerProcess, topic: str, partition: int) -> int:
    return len(list((broker.data_dir / f"{topic}-{partition}").glob("*.log")))


def test_kafka_topics_and_kafka_configs(broker: BrokerProcess) -> None:
    assert "Created topic tools." in tool(broker, TOPICS, "--create", "--topic", "tools", "--partitions", "2",
                                          "--config", "retention.ms=86400000")  # fmt: skip
    described = tool(broker, TOPICS, "--describe", "--topic", "tools")
    assert "PartitionCount: 2" in described and "retention.ms=86400000" in described

    tool(broker, TOPICS, "--alter", "--topic", "tools", "--partitions", "3")
    assert "PartitionCount: 3" in tool(broker, TOPICS, "--describe", "--topic", "tools")
    produce(broker, "tools", 2, 5)  # the new partition takes data
    with OffsetsClient(broker.bootstrap) as offsets:
        assert offsets.client.topic("tools", refresh=True).leaders.keys() == {0, 1, 2}

    # segment.bytes applies to the running log: the next appends roll at the new size
    before = segments(broker, "tools", 0)
    tool(broker, CONFIGS, "--alter", "--entity-type", "topics", "--entity-name", "tools",
         "--add-config", "segment.bytes=2000")  # fmt: skip
    produce(broker, "tools", 0, 60)
    assert segments(broker, "tools", 0) >= before + 2
    dynamic = tool(broker, CONFIGS, "--describe", "--entity-type", "topics", "--entity-name", "tools")
    assert "segment.bytes=2000" in dynamic and "retention.ms=86400000" in dynamic
    tool(broker, CONFIGS, "--alter", "--entity-type", "topics", "--entity-name", "tools",
         "--delete-config", "retention.ms")  # fmt: skip
    with pytest.raises(Exception, match=r"unsupported topic config 'no\.such\.config'"):
        tool(broker, CONFIGS, "--alter", "--entity-type", "topics", "--entity-name", "tools",
             "--add-config", "no.such.config=1")  # fmt: skip

    # kept across a restart (the broker's own files: no ZooKeeper here)
    broker.stop()
    broker.start()
    dynamic = tool(broker, CONFIGS, "--describe", "--entity-type", "topics", "--entity-name", "tools")
    assert "segment.bytes=2000" in dynamic and "retention.ms" not in dynamic
    produce(broker, "tools", 1, 60)
    assert segments(broker, "tools", 1) >= 3

    tool(broker, TOPICS, "--delete", "--topic", "tools")
    assert "tools" not in tool(broker, TOPICS, "--list").split()
    assert not list(broker.data_dir.glob("tools-*"))  # its data is gone
    broker.stop()
    broker.start()
    assert "tools" not in tool(broker, TOPICS, "--list").split()


def test_kafka_consumer_groups_resets_deletes_offsets_and_groups(broker: BrokerProcess) -> None:
    produce(broker, "grouped", 0, 10)
    with OffsetsClient(broker.bootstrap) as offsets:
        offsets.commit("idle-group", {("grouped", 0): 10})
    assert "idle-group" in tool(broker, CONSUMER_GROUPS, "--list").split()
    plan = tool(broker, CONSUMER_GROUPS, "--reset-offsets", "--group", "idle-group", "--topic", "grouped",
                "--to-earliest", "--execute")  # fmt: skip
    assert re.search(r"idle-group\s+grouped\s+0\s+0", plan), plan
    with OffsetsClient(broker.bootstrap) as offsets:
        assert offsets.fetch("idle-group", [("grouped", 0)]) == {("grouped", 0): 0}
    tool(broker, CONSUMER_GROUPS, "--delete-offsets", "--group", "idle-group", "--topic", "grouped")
    with OffsetsClient(broker.bootstrap) as offsets:
        assert offsets.fetch("idle-group", [("grouped", 0)]) == {("grouped", 0): None}
        offsets.commit("idle-group", {("grouped", 0): 4})
    assert "Deletion of requested consumer groups ('idle-group') was successful." in tool(
        broker, CONSUMER_GROUPS, "--delete", "--group", "idle-group"
    )
    assert "idle-group" not in tool(broker, CONSUMER_GROUPS, "--list").split()


def test_confluent_kafka_admin_client(broker: BrokerProcess) -> None:
    admin = confluent_admin.AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([confluent_admin.NewTopic("confluent", 1)])["confluent"].result(30)
    admin.create_partitions([confluent_admin.NewPartitions("confluent", 3)])["confluent"].result(30)
    resource = confluent_admin.ConfigResource(confluent_admin.ResourceType.TOPIC, "confluent")
    change = confluent_admin.ConfigEntry(
        "retention.ms", "60000", incremental_operation=confluent_admin.AlterConfigOpType.SET
    )
    resource.add_incremental_config(change)
    admin.incremental_alter_configs([resource])[resource].result(30)
    described = admin.describe_configs(
        [confluent_admin.ConfigResource(confluent_admin.ResourceType.TOPIC, "confluent")]
    )
    configs = next(iter(described.values())).result(30)
    assert configs["retention.ms"].value == "60000"
    assert configs["retention.ms"].source == confluent_admin.ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["segment.bytes"].source == confluent_admin.ConfigSource.DEFAULT_CONFIG.value
    cluster = admin.describe_cluster().result(30)
    assert [node.id for node in cluster.nodes] == [0] and cluster.cluster_id
    admin.delete_topics(["confluent"])["confluent"].result(30)
    assert "confluent" not in admin.list_topics(timeout=30).topics


def test_kafka_python_admin_client(broker: BrokerProcess) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        admin = kafka.admin.KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([kafka.admin.NewTopic("kafka-python", 2, 1)])
        admin.create_partitions({"kafka-python": kafka.admin.NewPartitions(4)})
        with OffsetsClient(broker.bootstrap) as offsets:
            offsets.commit("kp-group", {("kafka-python", 0): 1})
        listed = admin.list_groups()
        assert "kp-group" in str(listed), listed
        assert "kp-group" in str(admin.list_group_offsets("kp-group"))
        admin.delete_groups(["kp-group"])
        assert "kp-group" not in str(admin.list_groups())
        cluster = admin.describe_cluster()
        assert "kafkalog" in str(cluster), cluster
        admin.delete_topics(["kafka-python"])
        assert "kafka-python" not in admin.list_topics()
    finally:
        admin.close()


def test_delete_records_from_kafkas_tool_and_librdkafka(broker: BrokerProcess, tmp_path: Path) -> None:
    produce(broker, "trimmed", 0, 20, size=10)
    offsets_file = tmp_path / "offsets.json"
    offsets_file.write_text('{"version": 1, "partitions": [{"topic": "trimmed", "partition": 0, "offset": 7}]}')
    out = tool(broker, "org.apache.kafka.tools.DeleteRecordsCommand", "--offset-json-file", str(offsets_file))
    assert "low_watermark: 7" in out, out
    with SimpleConsumer(broker.bootstrap) as consumer:
        assert consumer.earliest_offset("trimmed", 0) == 7
        assert [m.offset for m in consumer.messages("trimmed", 0, start=7)][:1] == [7]
    admin = confluent_admin.AdminClient({"bootstrap.servers": broker.bootstrap})
    request = [confluent_kafka.TopicPartition("trimmed", 0, 12)]
    (answer,) = admin.delete_records(request).values()
    assert answer.result(30).low_watermark == 12
    broker.stop()
    broker.start()
    with SimpleConsumer(broker.bootstrap) as consumer:
        assert consumer.earliest_offset("trimmed", 0) == 12  # durable
