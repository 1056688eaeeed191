"""The mirror's configuration: typed, frozen, validated once; from YAML (conf/mirror.yaml) and flags.

A cluster is named by a bootstrap list (``host:port[,host:port]``) or a ZooKeeper connect string
(``zk:host:port[/chroot]`` on the command line, ``zookeeper:`` in YAML). With ZooKeeper the source
is consumed by a group (partitions shared with other mirror processes); without, one mirror process
takes every partition and commits through the source brokers.
"""

from __future__ import annotations

import difflib
import inspect
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafkalog.client.client import parse_bootstrap
from kafkalog.client.producer import Producer
from kafkalog.client.security import PLAINTEXT, ClientSecurity
from kafkalog.configfile import TypedLoader
from kafkalog.errors import ClientError, KafkalogError, RegistryError
from kafkalog.registry.connect import check_connect_string


class MirrorConfigError(KafkalogError):
    """A mirror setting is invalid; the message names the key."""


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    """One cluster: by brokers or by ZooKeeper (exactly one)."""

    name: str
    """What errors, logs, metrics and the gap file call the cluster (each source a name of its own)."""

    bootstrap: str | None = None
    """``host:port[,host:port]`` of one or more of its brokers; the rest are discovered from them."""

    zookeeper: str | None = None
    """Instead of ``bootstrap``: the ZooKeeper it is registered in, ``host:port[,host:port...][/chroot]``."""

    security: ClientSecurity = PLAINTEXT
    """TLS and SASL to reach its brokers: ``{protocol: SASL_SSL, mechanism: SCRAM-SHA-512, username:
    mirror, password: ${env:MIRROR_PASSWORD}, ca_file: ca.pem}`` (docs/security.md)."""

    def __post_init__(self) -> None:
        if (self.bootstrap is None) == (self.zookeeper is None):
            raise MirrorConfigError(f"bootstrap: give bootstrap or zookeeper (one of them) for cluster {self.name!r}")
        if self.zookeeper is not None:
            try:
                check_connect_string(self.zookeeper)
            except RegistryError as exc:
                raise MirrorConfigError(f"zookeeper: {exc}") from None
        if self.bootstrap is not None:
            try:
                parse_bootstrap(self.bootstrap)
            except ClientError as exc:
                raise MirrorConfigError(f"bootstrap: {exc}") from None

    @property
    def client_args(self) -> dict[str, Any]:
        """Keyword arguments for kafkalog.client classes."""
        where = {"zookeeper": self.zookeeper} if self.zookeeper is not None else {"bootstrap": str(self.bootstrap)}
        return {**where, "security": self.security}

    def __str__(self) -> str:
        return f"{self.name} ({self.zookeeper or self.bootstrap})"

    @staticmethod
    def mapping(value: Any, name: str) -> Any:
        """A cluster as a mapping: a string (the command-line form, ``zk:host:port[/chroot]`` or
        ``host:port[,host:port]``) becomes one, a mapping without a name gets ``name``; anything else
        is left for the loader to refuse."""
        if isinstance(value, str):
            key = "zookeeper" if value.startswith("zk:") else "bootstrap"
            return {"name": name, key: value.removeprefix("zk:")}
        if isinstance(value, dict):
            return {"name": name, **value}
        return value


@dataclass(frozen=True, slots=True)
class MirrorConfig:
    """Everything one mirror process needs: the clusters it reads, the one it writes, and how."""

    sources: tuple[ClusterSpec, ...]
    """The clusters to mirror from. In YAML each is a mapping (below) or, as on the command line,
    a string: ``host:port[,host:port]`` or ``zk:host:port[/chroot]``."""
    target: ClusterSpec
    """The aggregate cluster to mirror into: a mapping (below) or a string, as for a source."""
    whitelist: str | None = None
    """Topics to mirror (a full-match regex); default: every topic (but internal ones)."""
    blacklist: str | None = None
    """Topics not to mirror (a full-match regex); not together with ``whitelist``."""
    group: str = "kafkalog-mirror"
    """The consumer group whose committed offsets record the mirror's progress in each source."""
    streams: int = 2
    """Consumer streams (threads) per source, with ZooKeeper."""
    start_from: str = "earliest"
    """Where a partition the group never committed starts: earliest (default: nothing is skipped) or latest."""
    on_gap: str = "fail"
    """fail | continue: when a source offset was deleted before it was mirrored (docs/mirror.md, Gaps)."""
    gap_file: Path | None = None
    """Where ``on_gap: continue`` appends each skipped range (a JSON line); None: the ranges are only
    logged (a warning) and counted in the metrics file."""
    compression: str = "preserve"
    """preserve (message sets go as the source stored them) | none | gzip | snappy (re-encoded)."""
    create_topics: bool = True
    """Create missing target topics with the source's partition count."""
    commit_interval_ms: int = 5000
    """How often acknowledged progress is committed to the sources."""
    refresh_topics_ms: int = 5000
    """Without ZooKeeper: how often new matching topics are looked for."""
    acks: int = -1
    """The acknowledgement the producer asks of the target: -1 (all in-sync replicas) or 1 (the
    leader). A mirror never sends unacknowledged (0 is refused)."""
    status_interval_ms: int = 5000
    """How often a status line goes to stderr (0: never), and the metrics file is rewritten."""
    metrics_file: Path | None = None
    """Per-partition metrics as JSON (lag, acknowledged position, rate), rewritten atomically at
    every status interval and at the end: for monitoring."""
    shutdown_timeout_ms: int = 60_000
    """How long a graceful stop waits for the target to acknowledge what is in flight."""
    producer: dict[str, Any] = field(default_factory=dict)
    """Extra Producer settings (batch_bytes, linger_ms, retries, request_timeout_ms, ...)."""

    def __post_init__(self) -> None:
        if not self.sources:
            raise MirrorConfigError("sources: at least one source cluster is needed")
        names = [s.name for s in self.sources]
        if len(set(names)) != len(names):
            raise MirrorConfigError(f"sources: names must be unique, got {names}")
        if self.whitelist is not None and self.blacklist is not None:
            raise MirrorConfigError("blacklist: give whitelist or blacklist, not both")
        for key in ("whitelist", "blacklist"):
            value = getattr(self, key)
            if value is not None:
                try:
                    re.compile(value)
                except re.error as exc:
                    raise MirrorConfigError(f"{key}: {value!r} is not a regular expression: {exc}") from None
        choices = {
            "start_from": ("earliest", "latest"),
            "on_gap": ("fail", "continue"),
            "compression": ("preserve", "none", "gzip", "snappy"),
        }
        for key, allowed in choices.items():
            if getattr(self, key) not in allowed:
                raise MirrorConfigError(f"{key}: must be one of {', '.join(allowed)}, not {getattr(self, key)!r}")
        if self.acks not in (-1, 1):
            raise MirrorConfigError(f"acks: must be -1 or 1 (a mirror never sends unacknowledged), not {self.acks}")
        for key in ("streams", "commit_interval_ms", "refresh_topics_ms", "shutdown_timeout_ms"):
            if getattr(self, key) < 1:
                raise MirrorConfigError(f"{key}: must be at least 1, not {getattr(self, key)}")
        if self.status_interval_ms < 0:
            raise MirrorConfigError(f"status_interval_ms: must be >= 0, not {self.status_interval_ms}")
        known = _producer_settings()
        for key, value in self.producer.items():
            if key not in known:
                close = difflib.get_close_matches(key, known, n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise MirrorConfigError(f"producer.{key}: unknown key ({hint}known: {', '.join(known)})")
            if isinstance(value, bool) or not isinstance(value, int):
                raise MirrorConfigError(f"producer.{key}: expected an integer, got {value!r}")

    def wants(self, topic: str) -> bool:
        if topic.startswith("__"):  # internal topics (__consumer_offsets) are never mirrored
            return False
        if self.whitelist is not None:
            return re.fullmatch(self.whitelist, topic) is not None
        if self.blacklist is not None:
            return re.fullmatch(self.blacklist, topic) is None
        return True


def _producer_settings() -> list[str]:
    """The Producer settings ``producer:`` may give: its integer ones, but acks (the mirror's own)."""
    parameters = inspect.signature(Producer.__init__).parameters.values()
    return [p.name for p in parameters if type(p.default) is int and p.name != "acks"]


LOADER = TypedLoader(MirrorConfigError, invalid=(ClientError,), what="mirror config file")
"""Reads mirror files: kafkalog.configfile's rules (``file:key.path`` errors, ``${env:NAME}``)."""


def load_mirror_config(path: Path | None, overrides: dict[str, Any]) -> MirrorConfig:
    """The YAML file (if any) with the flags' ``overrides`` (None values ignored) applied.

    What only the mirror knows is done before the loader types the rest: a cluster may be written
    as a string (as on the command line), and one without a name is named by where it stands
    (``source<i>``, ``target``)."""
    values, source = LOADER.values(path, overrides)
    sources = values.get("sources")
    if not sources:
        raise MirrorConfigError(f"{source}:sources: a list of clusters is needed (--source)")
    if "target" not in values:
        raise MirrorConfigError(f"{source}:target: the aggregate cluster is needed (--target)")
    if isinstance(sources, list | tuple):
        values["sources"] = [ClusterSpec.mapping(s, f"source{i}") for i, s in enumerate(sources)]
    values["target"] = ClusterSpec.mapping(values["target"], "target")
    return LOADER.build(MirrorConfig, values, source)
