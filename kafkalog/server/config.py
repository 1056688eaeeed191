"""Broker configuration: typed, frozen, validated once; loaded from YAML with flag overrides.

Read by kafkalog.configfile's loader, like the mirror's and the pipelines' files: errors name the
file and the key path (``conf/broker.yaml:limits.max_request_bytes: ...``), strings may hold
``${env:NAME}``. Reference: docs/config-reference.md (generated from these classes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafkalog.configfile import TypedLoader
from kafkalog.errors import KafkalogError, RegistryError
from kafkalog.log import LogConfig
from kafkalog.registry.connect import check_connect_string
from kafkalog.server.groups.settings import GroupSettings


class BrokerConfigError(KafkalogError):
    """A broker configuration value is invalid; the message names where it came from."""


@dataclass(frozen=True, slots=True)
class BrokerAddress:
    """One broker of a static cluster."""

    id: int
    """The broker's ``broker_id``."""

    host: str
    """The host clients are told to connect to, to reach that broker."""

    port: int
    """The port that broker listens on (and clients are told)."""


@dataclass(frozen=True, slots=True)
class TopicSpec:
    """A topic declared in the configuration (the static catalog of a multi-broker cluster)."""

    name: str
    """The topic's name."""

    partitions: int = 1
    """How many partitions it has (at least one)."""

    def __post_init__(self) -> None:
        if self.partitions < 1:
            raise BrokerConfigError(f"partitions: a topic needs at least one, not {self.partitions}")


@dataclass(frozen=True, slots=True)
class Limits:
    """Protections against clients that misbehave or lie."""

    max_request_bytes: int = 100 * 1024 * 1024
    """A request frame larger than this closes the connection (Kafka's socket.request.max.bytes)."""

    max_connections_per_ip: int = 1000
    """Connections beyond this from one address are closed as soon as they are accepted."""

    idle_timeout_ms: int = 10 * 60 * 1000
    """A connection with no traffic for this long is closed."""

    frame_read_timeout_ms: int = 30_000
    """A request that has started to arrive must be complete within this long (slow senders)."""

    max_fetch_wait_ms: int = 30_000
    """Upper bound on a fetch's max_wait_ms (a client cannot park a request for longer)."""


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """Everything one broker process needs. ``cluster`` lists every broker of a static cluster
    (this one included); empty means a single broker, this one."""

    broker_id: int = 0
    """This broker's id: its entry in ``cluster``, or its registration in ZooKeeper."""
    host: str = "127.0.0.1"
    """The address to listen on (the metrics endpoint too)."""
    port: int = 9092
    """The port to listen on; 0 picks a free one (and clients are told the real one)."""
    advertised_host: str | None = None
    """The host clients are told to connect to (default: ``host``). With ``cluster`` given, clients
    are told the ``cluster`` entries instead."""
    data_dirs: tuple[Path, ...] = (Path("data"),)
    """Directories holding the partition logs, each locked while the broker runs (created if
    missing); a new partition goes to the one holding the fewest. Without ZooKeeper the committed
    group offsets live in the first (``.consumer_offsets/``)."""
    num_processors: int = 1
    """Network threads; each multiplexes its share of the connections with a selector. One is the
    default: under the GIL a second thread made no consistent difference (docs/benchmarks.md)."""
    cluster: tuple[BrokerAddress, ...] = ()
    """Every broker of a static cluster, this one included; partition p of topic t is led by broker
    number (crc32(t) + p) mod n, by id. Empty: this broker alone, or the brokers ZooKeeper knows."""
    topics: tuple[TopicSpec, ...] = ()
    """Topics created at start-up: the catalog of a static multi-broker cluster (which creates none
    at run time); with ZooKeeper, registered by the first broker that finds one missing."""
    auto_create_topics: bool = True
    """Create an unknown topic when a client asks for its metadata: on a single broker or with
    ZooKeeper (a static multi-broker cluster creates no topics at run time)."""
    default_partitions: int = 1
    """How many partitions an auto-created topic gets."""
    cluster_id: str = "kafkalog"
    """The cluster id Metadata v2 answers (give every broker of a cluster the same)."""
    log: LogConfig = field(default_factory=LogConfig)
    """The settings of every partition log; a topic created with configs (CreateTopics'
    ``retention.ms``, ...) overrides them for that topic."""
    limits: Limits = field(default_factory=Limits)
    """Protections against clients that misbehave or lie."""
    groups: GroupSettings = field(default_factory=GroupSettings)
    """How the group coordinator treats consumer groups (session timeouts, the first rebalance)."""
    metrics_port: int | None = None
    """Serve metrics (Prometheus text format) over HTTP on this port; None: off."""
    zookeeper: str | None = None
    """Join the cluster registered in ZooKeeper, ``host:port[,host:port...][/chroot]``: the broker
    registers at /brokers/ids/<broker_id>, topics live at /brokers/topics, group offsets at
    /consumers/<group>/offsets. None: a static cluster (``cluster``), no ZooKeeper."""
    zookeeper_session_timeout_ms: int = 6000
    """After this long unreachable, ZooKeeper expires the broker's session (and its registration)."""
    zookeeper_connect_timeout_ms: int = 30_000
    """How long start-up waits for ZooKeeper before giving up."""

    def __post_init__(self) -> None:
        def need(condition: bool, key: str, rule: str) -> None:
            if not condition:
                raise BrokerConfigError(f"{key}: {rule}, not {getattr(self, key)!r}")

        need(self.broker_id >= 0, "broker_id", "must be >= 0")
        need(0 <= self.port <= 65535, "port", "must be a TCP port")
        need(bool(self.data_dirs), "data_dirs", "at least one directory is needed")
        need(1 <= self.num_processors <= 64, "num_processors", "must be in [1, 64]")
        need(self.default_partitions >= 1, "default_partitions", "must be >= 1")
        ids = [b.id for b in self.cluster]
        if len(set(ids)) != len(ids):
            raise BrokerConfigError(f"cluster: broker ids must be unique, got {ids}")
        if self.cluster and self.broker_id not in ids:
            raise BrokerConfigError(f"cluster: must list this broker (broker_id {self.broker_id}), got ids {ids}")
        names = [t.name for t in self.topics]
        if len(set(names)) != len(names):
            raise BrokerConfigError(f"topics: topic names must be unique, got {names}")
        if self.zookeeper is not None:
            if self.cluster:
                raise BrokerConfigError("zookeeper: a broker joins either a static cluster or ZooKeeper, not both")
            try:
                check_connect_string(self.zookeeper)
            except RegistryError as exc:
                raise BrokerConfigError(f"zookeeper: {exc}") from None
        need(
            1000 <= self.zookeeper_session_timeout_ms <= 60_000,
            "zookeeper_session_timeout_ms",
            "must be in [1000, 60000]",
        )
        need(self.zookeeper_connect_timeout_ms >= 0, "zookeeper_connect_timeout_ms", "must be >= 0")

    @property
    def brokers(self) -> tuple[BrokerAddress, ...]:
        """Every broker of the cluster (just this one when no cluster is configured)."""
        if self.cluster:
            return tuple(sorted(self.cluster, key=lambda b: b.id))
        return (BrokerAddress(self.broker_id, self.advertised_host or self.host, self.port),)


LOADER = TypedLoader(BrokerConfigError, invalid=(KafkalogError,), what="broker config file")
"""Reads broker files: kafkalog.configfile's rules (``file:key.path`` errors, ``${env:NAME}``);
a nested class's own error (LogConfigError, GroupSettingsError) gets the key path too."""


def load_config(path: Path | None = None, overrides: dict[str, Any] | None = None) -> BrokerConfig:
    """Read ``path`` (YAML) if given, apply ``overrides`` (from flags), validate, return the config."""
    return LOADER.load(BrokerConfig, path, overrides)
