"""What a broker knows of its cluster without ZooKeeper: the brokers, the topics, who leads what.

In a static cluster every broker reads the same configuration, so every broker computes the same
answers: partition p of topic t is led by broker number (crc32(t) + p) mod n (brokers by id), and a
group's coordinator is broker crc32(group) mod n. Topics come from the configuration; on a
single-broker cluster they may also be created at run time (CreateTopics, or auto-creation), and
the broker's own logs are the record of them. In a multi-broker static cluster a topic created on
one broker would be unknown to the others, so run-time creation is refused there.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Iterable, Mapping
from typing import Protocol

from kafkalog.errors import KafkalogError
from kafkalog.log import LogConfig, LogManager, validate_topic
from kafkalog.protocol import ErrorCode
from kafkalog.server.cluster.topic_config import TopicConfigFiles, topic_log_config
from kafkalog.server.config import BrokerAddress, BrokerConfig


class ClusterView(Protocol):
    """What the request handlers ask of the cluster: the static one (this module) or the one kept in
    ZooKeeper (kafkalog.server.cluster.zookeeper). Implementations are thread-safe."""

    this_broker: BrokerAddress

    @property
    def brokers(self) -> tuple[BrokerAddress, ...]:
        """The live brokers, by id."""
        ...

    @property
    def controller_id(self) -> int: ...

    def topics(self) -> dict[str, int]:
        """Every known topic and its partition count."""
        ...

    def partition_count(self, topic: str) -> int | None: ...

    def leader_id(self, topic: str, partition: int) -> tuple[int, int]:
        """(the live leader's id or -1, the broker the partition is placed on)."""
        ...

    def partition_error(self, topic: str, partition: int) -> ErrorCode | None:
        """Why this broker cannot serve the partition, or None (its log then exists)."""
        ...

    def coordinator(self, group: str) -> BrokerAddress: ...

    def coordinates(self, group: str) -> bool:
        """Whether this broker serves the group's offsets."""
        ...

    def can_create_topics(self) -> bool: ...

    def accepts_placement(self, topic: str, partition: int, replicas: list[int]) -> bool: ...

    def create_topic(
        self,
        topic: str,
        partitions: int,
        config: LogConfig | None = None,
        entries: Mapping[str, str] | None = None,
        placement: Mapping[int, int] | None = None,
    ) -> None:
        """Create ``topic``; TopicExistsError if it exists. ``entries`` are its configs by Kafka
        name (``config`` parsed from them); ``placement`` partition → broker, if the client chose."""
        ...

    def topic_config_entries(self, topic: str) -> dict[str, str]:
        """The topic's config overrides by Kafka name (what CreateTopics or IncrementalAlterConfigs set)."""
        ...

    def alter_topic_config(self, topic: str, entries: Mapping[str, str]) -> None:
        """Make ``entries`` the topic's whole set of overrides, durably, and apply them to its logs
        now. TopicChangeRefused where this cluster cannot change topics at run time."""
        ...

    def add_partitions(self, topic: str, count: int) -> None:
        """Grow the topic to ``count`` partitions (placed over the brokers)."""
        ...

    def delete_topic(self, topic: str) -> None:
        """Remove the topic and its data (TopicChangeRefused where not possible)."""
        ...

    def close(self) -> None: ...


class Cluster:
    """The topic catalog and leadership of a static cluster. Thread-safe."""

    def __init__(self, config: BrokerConfig, logs: LogManager, topic_configs: TopicConfigFiles | None = None) -> None:
        self.config = config
        self.topic_configs = topic_configs or TopicConfigFiles(config.data_dirs[0])
        self.brokers: tuple[BrokerAddress, ...] = config.brokers
        self.this_broker = next(b for b in self.brokers if b.id == config.broker_id)
        self.logs = logs
        self._lock = threading.Lock()
        self._partitions: dict[str, int] = {t.name: t.partitions for t in config.topics}
        for (topic, partition), _ in logs.logs.items():
            if not self.is_multi_broker:  # single broker: its logs are the catalog
                self._partitions[topic] = max(self._partitions.get(topic, 0), partition + 1)

    @property
    def is_multi_broker(self) -> bool:
        return len(self.brokers) > 1

    @property
    def controller_id(self) -> int:
        return self.brokers[0].id

    def topics(self) -> dict[str, int]:
        """Every known topic and its partition count."""
        with self._lock:
            return dict(self._partitions)

    def partition_count(self, topic: str) -> int | None:
        return self._partitions.get(topic)

    def leader(self, topic: str, partition: int) -> BrokerAddress:
        n = len(self.brokers)
        return self.brokers[(zlib.crc32(topic.encode()) + partition) % n]

    def leader_id(self, topic: str, partition: int) -> tuple[int, int]:
        leader = self.leader(topic, partition).id
        return leader, leader

    def partition_error(self, topic: str, partition: int) -> ErrorCode | None:
        """Why this broker cannot serve the partition (unknown, or led elsewhere), or None."""
        count = self._partitions.get(topic)
        if count is None or not 0 <= partition < count:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if self.leader(topic, partition) != self.this_broker:
            return ErrorCode.NOT_LEADER_FOR_PARTITION
        return None

    def coordinator(self, group: str) -> BrokerAddress:
        return self.brokers[zlib.crc32(group.encode()) % len(self.brokers)]

    def coordinates(self, group: str) -> bool:
        return self.coordinator(group) == self.this_broker

    def can_create_topics(self) -> bool:
        return not self.is_multi_broker

    def accepts_placement(self, topic: str, partition: int, replicas: list[int]) -> bool:
        return replicas == [self.leader(topic, partition).id]

    def create_topic(
        self,
        topic: str,
        partitions: int,
        config: LogConfig | None = None,
        entries: Mapping[str, str] | None = None,
        placement: Mapping[int, int] | None = None,
    ) -> None:
        """Record a new topic and create the logs of the partitions this broker leads (a static
        cluster places partitions itself: ``placement`` was checked by ``accepts_placement``)."""
        validate_topic(topic)
        with self._lock:
            if topic in self._partitions:
                raise TopicExistsError(f"topic {topic!r} already exists")
            if entries and not self.is_multi_broker:
                self.topic_configs.put(topic, entries)  # before the logs: a crash leaves no topic on defaults
            for partition in range(partitions):
                if self.leader(topic, partition) == self.this_broker:
                    self.logs.get_or_create_log(topic, partition, config)
            self._partitions[topic] = partitions

    def _changeable(self, topic: str, what: str) -> int:
        if self.is_multi_broker:
            raise TopicChangeRefused(
                f"cannot {what}: the topics of a static multi-broker cluster are declared in its config"
            )
        count = self._partitions.get(topic)
        if count is None:
            raise UnknownTopicError(f"topic {topic!r} does not exist")
        return count

    def topic_config_entries(self, topic: str) -> dict[str, str]:
        return self.topic_configs.get(topic)

    def alter_topic_config(self, topic: str, entries: Mapping[str, str]) -> None:
        with self._lock:
            self._changeable(topic, f"alter the configs of {topic!r}")
            config = topic_log_config(self.config.log, entries)
            self.topic_configs.put(topic, entries)
            self.logs.set_topic_config(topic, config)

    def add_partitions(self, topic: str, count: int) -> None:
        with self._lock:
            current = self._changeable(topic, f"add partitions to {topic!r}")
            for partition in range(current, count):
                self.logs.get_or_create_log(topic, partition, self.logs.config_for(topic))
            self._partitions[topic] = max(current, count)

    def delete_topic(self, topic: str) -> None:
        with self._lock:
            self._changeable(topic, f"delete {topic!r}")
            del self._partitions[topic]
            self.logs.delete_logs(topic)
            self.topic_configs.put(topic, {})

    def open_declared_topics(self, topics: Iterable[str] | None = None) -> None:
        """Create the logs this broker leads for configured topics (at start-up)."""
        for topic, count in self.topics().items():
            if topics is not None and topic not in topics:
                continue
            for partition in range(count):
                if self.leader(topic, partition) == self.this_broker:
                    self.logs.get_or_create_log(topic, partition)

    def close(self) -> None:
        """Nothing to release: the static view holds no connections."""


class TopicChangeRefused(KafkalogError):
    """A topic change this cluster cannot make at run time (becomes POLICY_VIOLATION)."""

    error_code = 44  # POLICY_VIOLATION


class UnknownTopicError(KafkalogError):
    """A change to a topic that does not exist."""

    error_code = 3  # UNKNOWN_TOPIC_OR_PARTITION


class TopicExistsError(KafkalogError):
    """CreateTopics for a name that exists (becomes TOPIC_ALREADY_EXISTS on the wire)."""
