"""Kafka's own tools on a compacted topic: ``kafka-topics --create --config cleanup.policy=compact``
makes one, ``kafka-topics --describe`` and ``kafka-configs --describe`` show its compaction settings,
``kafka-configs --alter`` changes them (IncrementalAlterConfigs) and removes one (back to the
default), and a cleanup policy that does not exist is refused, changing nothing."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.support.ecosystem import Broker
from tests.support.kafka4 import TOPICS, run_tool
from tests.support.processes import PeerError

pytestmark = pytest.mark.integration

# Written against Kafka 4.x as well (the same code passes there); the suite runs them where they
# prove something: on kafkalog.
BROKERS = ("kafkalog",)
CONFIGS = "kafka.admin.ConfigCommand"


def dynamic_configs(broker: Broker, topic: str, log4j: Path) -> dict[str, str]:
    """The topic's own settings as ``kafka-configs --describe`` lists them (``  name=value sensitive=...``)."""
    out = run_tool(CONFIGS, "--bootstrap-server", broker.bootstrap, "--describe", "--entity-type", "topics",
                   "--entity-name", topic, log4j=log4j).stdout.decode()  # fmt: skip
    found = {}
    for line in out.splitlines():
        if line.startswith("  ") and " sensitive=" in line:
            name, value = line.strip().split(" sensitive=", 1)[0].split("=", 1)
            found[name] = value
    return found


@pytest.mark.parametrize("broker", BROKERS, indirect=True)
def test_kafka_topics_and_kafka_configs_create_show_and_change_a_topics_compaction(
    broker: Broker, tmp_path: Path
) -> None:
    topic = f"compacted-{uuid.uuid4().hex[:8]}"
    log4j = tmp_path / "tools-log4j2.properties"
    run_tool(TOPICS, "--bootstrap-server", broker.bootstrap, "--create", "--topic", topic, "--partitions", "1",
             "--config", "cleanup.policy=compact", "--config", "min.cleanable.dirty.ratio=0.1",
             "--config", "delete.retention.ms=1000", log4j=log4j)  # fmt: skip

    described = run_tool(TOPICS, "--bootstrap-server", broker.bootstrap, "--describe", "--topic", topic,
                         log4j=log4j).stdout.decode()  # fmt: skip
    header = next(line for line in described.splitlines() if "Configs:" in line)
    shown = header.split("Configs:", 1)[1].strip()
    for setting in ("cleanup.policy=compact", "min.cleanable.dirty.ratio=0.1", "delete.retention.ms=1000"):
        assert setting in shown.split(","), f"kafka-topics --describe shows {shown!r}, not {setting}"
    assert dynamic_configs(broker, topic, log4j) == {
        "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.1", "delete.retention.ms": "1000"
    }  # fmt: skip

    run_tool(CONFIGS, "--bootstrap-server", broker.bootstrap, "--alter", "--entity-type", "topics",
             "--entity-name", topic, "--add-config",
             "cleanup.policy=[compact,delete],min.compaction.lag.ms=500,max.compaction.lag.ms=60000",
             "--delete-config", "min.cleanable.dirty.ratio", log4j=log4j)  # fmt: skip
    changed = {
        "cleanup.policy": "compact,delete", "min.compaction.lag.ms": "500", "max.compaction.lag.ms": "60000",
        "delete.retention.ms": "1000",
    }  # fmt: skip
    assert dynamic_configs(broker, topic, log4j) == changed

    with pytest.raises(PeerError) as refused:
        run_tool(CONFIGS, "--bootstrap-server", broker.bootstrap, "--alter", "--entity-type", "topics",
                 "--entity-name", topic, "--add-config", "cleanup.policy=shred", log4j=log4j)  # fmt: skip
    stderr = str(refused.value).split("\n", 1)[1]  # after the command line, which names the setting too
    assert "cleanup.policy" in stderr and "shred" in stderr, stderr
    assert dynamic_configs(broker, topic, log4j) == changed
