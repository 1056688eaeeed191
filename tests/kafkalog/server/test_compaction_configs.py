"""A compacted topic's configs through Kafka's admin client (confluent-kafka's AdminClient, on
librdkafka): cleanup.policy and the cleaner's settings at creation, described with their types and
sources, altered at run time and refused when wrong; and the rules a compacted topic puts on
clients: a record without a key is refused (INVALID_RECORD), DeleteRecords without the delete
policy is a policy violation."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import confluent_kafka.admin as confluent_admin
import pytest

from kafkalog.log.cleaner.settings import CleanerSettings
from kafkalog.server import Broker, BrokerConfig

TOPIC = confluent_admin.ResourceType.TOPIC


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with Broker(BrokerConfig(port=0, data_dirs=(tmp_path / "data",))) as running:
        yield running


def admin_of(broker: Broker) -> confluent_admin.AdminClient:
    return confluent_admin.AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.port}"})


def described(admin: confluent_admin.AdminClient, topic: str) -> dict[str, confluent_admin.ConfigEntry]:
    answer = admin.describe_configs([confluent_admin.ConfigResource(TOPIC, topic)])
    return dict(next(iter(answer.values())).result(30))


def alter(admin: confluent_admin.AdminClient, topic: str, name: str, value: str) -> None:
    resource = confluent_admin.ConfigResource(TOPIC, topic)
    resource.add_incremental_config(
        confluent_admin.ConfigEntry(name, value, incremental_operation=confluent_admin.AlterConfigOpType.SET)
    )
    admin.incremental_alter_configs([resource])[resource].result(30)


def test_compaction_configs_are_created_described_and_altered(broker: Broker) -> None:
    admin = admin_of(broker)
    configs = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.1", "delete.retention.ms": "1000"}
    admin.create_topics([confluent_admin.NewTopic("table", 2, config=configs)])["table"].result(30)
    entries = described(admin, "table")
    assert entries["cleanup.policy"].value == "compact"
    assert entries["cleanup.policy"].source == confluent_admin.ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert not entries["cleanup.policy"].is_read_only
    assert entries["min.cleanable.dirty.ratio"].value == "0.1"
    assert entries["delete.retention.ms"].value == "1000"
    assert entries["min.compaction.lag.ms"].value == "0"
    assert entries["max.compaction.lag.ms"].value == str(2**63 - 1)  # Kafka's "no bound"
    assert entries["min.compaction.lag.ms"].source == confluent_admin.ConfigSource.DEFAULT_CONFIG.value
    log = broker.logs.get_log("table", 1)
    assert log is not None and log.config.compact and not log.config.delete
    assert log.config.min_cleanable_dirty_ratio == 0.1 and log.config.delete_retention_ms == 1000

    alter(admin, "table", "cleanup.policy", "delete, compact")
    assert log.config.cleanup_policy == "compact,delete", "altered at run time, in Kafka's spelling"
    assert described(admin, "table")["cleanup.policy"].value == "compact,delete"

    wrong = (("cleanup.policy", "shred"), ("min.cleanable.dirty.ratio", "1.5"), ("delete.retention.ms", "x"))
    for name, value in wrong:
        with pytest.raises(confluent_kafka.KafkaException) as refused:
            alter(admin, "table", name, value)
        error = refused.value.args[0]
        assert error.code() == confluent_kafka.KafkaError.INVALID_CONFIG and name in error.str(), error
    bad = admin.create_topics([confluent_admin.NewTopic("bad", 1, config={"cleanup.policy": ""})])["bad"]
    with pytest.raises(confluent_kafka.KafkaException, match=r"cleanup\.policy"):
        bad.result(30)
    old_format = {"cleanup.policy": "compact", "message.format.version": "0.10.2"}
    refused_format = admin.create_topics([confluent_admin.NewTopic("v1", 1, config=old_format)])["v1"]
    with pytest.raises(confluent_kafka.KafkaException, match="message format v2"):
        refused_format.result(30)


def test_a_compacted_topic_refuses_records_without_a_key_and_delete_records(broker: Broker) -> None:
    admin = admin_of(broker)
    for topic, policy in (("keyed", "compact"), ("both", "compact,delete")):
        admin.create_topics([confluent_admin.NewTopic(topic, 1, config={"cleanup.policy": policy})])[topic].result(30)
    producer = confluent_kafka.Producer({"bootstrap.servers": f"127.0.0.1:{broker.port}", "linger.ms": 0})
    reports: list[tuple[bytes | None, confluent_kafka.KafkaError | None]] = []

    def report(error: confluent_kafka.KafkaError | None, message: confluent_kafka.Message) -> None:
        reports.append((message.key(), error))

    producer.produce("keyed", value=b"v1", key=b"k", on_delivery=report)
    producer.flush(30)
    producer.produce("keyed", value=b"no key", on_delivery=report)
    producer.flush(30)
    producer.produce("both", value=b"v", key=b"k", on_delivery=report)
    producer.flush(30)
    assert [key for key, error in reports if error is None] == [b"k", b"k"]
    refused = [error for key, error in reports if error is not None]
    assert len(refused) == 1 and refused[0].code() == confluent_kafka.KafkaError.INVALID_RECORD, refused
    log = broker.logs.get_log("keyed", 0)
    assert log is not None and log.log_end_offset == 1, "the keyless record was not appended"

    partitions = [confluent_kafka.TopicPartition("keyed", 0, 1), confluent_kafka.TopicPartition("both", 0, 1)]
    answers = admin.delete_records(partitions)
    with pytest.raises(confluent_kafka.KafkaException) as violation:
        answers[partitions[0]].result(30)
    assert violation.value.args[0].code() == confluent_kafka.KafkaError.POLICY_VIOLATION
    assert answers[partitions[1]].result(30).low_watermark == 1, "compact,delete allows it"


def test_the_broker_compacts_and_its_metrics_say_so(tmp_path: Path) -> None:
    config = BrokerConfig(port=0, data_dirs=(tmp_path / "data",), cleaner=CleanerSettings(backoff_ms=50))
    with Broker(config) as running:
        admin = admin_of(running)
        settings = {"cleanup.policy": "compact", "segment.bytes": "1024", "min.cleanable.dirty.ratio": "0.01"}
        admin.create_topics([confluent_admin.NewTopic("small", 1, config=settings)])["small"].result(30)
        producer = confluent_kafka.Producer({"bootstrap.servers": f"127.0.0.1:{running.port}", "linger.ms": 0})
        for i in range(100):
            producer.produce("small", key=b"k%d" % (i % 5), value=b"value-%03d" % i)
            producer.flush(30)  # one batch each: segments roll between them
        deadline = time.monotonic() + 30
        while running.logs.cleaner.passes == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        text = running.render_metrics()
    lines = dict(line.rsplit(" ", 1) for line in text.splitlines() if line.startswith("kafkalog_cleaner_"))
    assert float(lines["kafkalog_cleaner_passes_total"]) >= 1, text
    assert float(lines["kafkalog_cleaner_records_removed_total"]) > 0
    assert float(lines["kafkalog_cleaner_offset_map_bytes"]) == CleanerSettings().dedupe_buffer_bytes // 24 * 24
    assert "# TYPE kafkalog_cleaner_longest_swap_ms gauge" in text
