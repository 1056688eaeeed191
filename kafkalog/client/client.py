"""Client: the bootstrap list, the cluster's metadata, and one connection per broker."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Self

from kafkalog.client.connection import KAFKA_0_9_VERSIONS, BrokerConnection
from kafkalog.client.discovery import ZooKeeperBootstrap
from kafkalog.client.security import PLAINTEXT, ClientSecurity
from kafkalog.errors import BrokerResponseError, ClientError, KafkaConnectionError
from kafkalog.protocol import ApiKey, ErrorCode
from kafkalog.retry import Backoff

logger = logging.getLogger(__name__)


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"ERROR_{code}"


def check(code: int, context: str) -> None:
    """Raise the BrokerResponseError for a non-zero error code."""
    if code:
        raise BrokerResponseError(code, error_name(code), context)


@dataclass(frozen=True)
class TopicMetadata:
    name: str
    leaders: dict[int, int]
    """partition -> broker id of its leader (-1 when it has none)."""


def parse_bootstrap(bootstrap: str | Sequence[str]) -> list[tuple[str, int]]:
    """``"host:port,host:port"`` or a list of ``host:port`` into (host, port) pairs."""
    items = bootstrap.split(",") if isinstance(bootstrap, str) else list(bootstrap)
    out = []
    for item in items:
        host, sep, port = item.strip().rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ClientError(f"bootstrap server {item!r} is not host:port")
        out.append((host, int(port)))
    if not out:
        raise ClientError("no bootstrap servers given")
    return out


class Client:
    """Knows the cluster: brokers, topics, partition leaders; hands out one connection per broker.
    Thread-safe. Metadata is refreshed on demand (a leader is unknown, or an error said it moved)."""

    def __init__(
        self,
        bootstrap: str | Sequence[str] | None = None,
        *,
        zookeeper: str | None = None,
        client_id: str = "kafkalog",
        request_timeout_ms: int = 30_000,
        retry_backoff_ms: int = 100,
        broker_version: str | None = None,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        if broker_version not in (None, "0.9"):
            raise ClientError(f"broker_version must be None (ask the broker) or '0.9', not {broker_version!r}")
        self.versions = dict(KAFKA_0_9_VERSIONS) if broker_version == "0.9" else None
        """API versions to assume (skips the ApiVersions probe, which a 0.9 broker leaves unanswered)."""
        if (bootstrap is None) == (zookeeper is None):
            raise ClientError("give bootstrap servers or a ZooKeeper connect string (one of them)")
        self.bootstrap = parse_bootstrap(bootstrap) if bootstrap is not None else []
        self.client_id = client_id
        self.security = security
        """TLS and SASL for every connection (kafkalog.client.security)."""
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self._lock = threading.RLock()
        self._brokers: dict[int, tuple[str, int]] = {}
        self._connections: dict[tuple[str, int], BrokerConnection] = {}
        self._topics: dict[str, TopicMetadata] = {}
        self.discovery: ZooKeeperBootstrap | None = None
        """The registry the brokers come from, when bootstrapped from ZooKeeper."""
        if zookeeper is not None:
            self.discovery = ZooKeeperBootstrap(zookeeper, self._registry_changed)

    def _registry_changed(self) -> None:
        """Brokers or topics changed in ZooKeeper: metadata is re-read before it is used again."""
        with self._lock:
            self._topics.clear()

    # ------------------------------------------------------------------ connections

    def connection_to(self, host: str, port: int) -> BrokerConnection:
        with self._lock:
            connection = self._connections.get((host, port))
            if connection is None:
                connection = BrokerConnection(
                    host, port, client_id=self.client_id, timeout_ms=self.request_timeout_ms, versions=self.versions,
                    security=self.security,
                )  # fmt: skip
                self._connections[(host, port)] = connection
            return connection

    def broker(self, node_id: int) -> BrokerConnection:
        with self._lock:
            address = self._brokers.get(node_id)
        if address is None:
            self.refresh_metadata()
            with self._lock:
                address = self._brokers.get(node_id)
            if address is None:
                raise KafkaConnectionError(f"broker {node_id} is not in the cluster metadata")
        return self.connection_to(*address)

    def any_broker(self) -> BrokerConnection:
        """A connection that works: known brokers first, then the bootstrap list."""
        with self._lock:
            candidates = list(dict.fromkeys([*self._brokers.values(), *self.bootstrap]))
        if self.discovery is not None:  # the registry first: it knows who is alive now
            candidates = list(dict.fromkeys([*self.discovery.brokers(), *candidates]))
        errors = []
        for host, port in candidates:
            connection = self.connection_to(host, port)
            try:
                connection.api(ApiKey.METADATA)  # connects (and negotiates) if needed
            except KafkaConnectionError as exc:
                errors.append(str(exc))
            else:
                return connection
        raise KafkaConnectionError("no broker is reachable: " + "; ".join(errors))

    # ------------------------------------------------------------------ metadata

    def refresh_metadata(self, topics: Iterable[str] | None = None) -> dict[str, TopicMetadata]:
        """Ask a broker for the metadata of ``topics`` (all topics when None). A broker that
        auto-creates topics creates them now. Returns the topics answered without error."""
        connection = self.any_broker()
        api = connection.api(ApiKey.METADATA)
        wanted = None if topics is None else list(topics)
        body = {"topics": ([] if api.version == 0 else None) if wanted is None else [{"name": t} for t in wanted]}
        response = connection.request(api, body)
        found: dict[str, TopicMetadata] = {}
        with self._lock:
            self._brokers = {b["node_id"]: (b["host"], b["port"]) for b in response["brokers"]}
            for topic in response["topic_metadata"]:
                if topic["error_code"] != 0:
                    continue
                leaders = {p["partition"]: p["leader"] for p in topic["partition_metadata"]}
                found[topic["topic"]] = self._topics[topic["topic"]] = TopicMetadata(topic["topic"], leaders)
        return found

    def topic(self, name: str, *, refresh: bool = False, wait_ms: int = 0) -> TopicMetadata:
        """The metadata of ``name``, refreshed if unknown, retrying up to ``wait_ms`` (a topic being
        auto-created may take a moment to have leaders)."""
        backoff = self._backoff(wait_ms)
        while True:
            with self._lock:
                known = None if refresh else self._topics.get(name)
            if known is not None and all(leader >= 0 for leader in known.leaders.values()):
                return known
            found = self.refresh_metadata([name]).get(name)
            if found is not None and found.leaders and all(leader >= 0 for leader in found.leaders.values()):
                return found
            if not backoff.wait():
                raise BrokerResponseError(3, "UNKNOWN_TOPIC_OR_PARTITION", f"topic {name!r} has no metadata")
            refresh = True

    def leader(self, topic: str, partition: int) -> BrokerConnection:
        """The connection to the partition's leader, waiting up to the request timeout for it to have
        one. Only this partition's leader matters: others of the topic may be unavailable."""
        backoff = self._backoff(self.request_timeout_ms)
        refresh = False
        while True:
            with self._lock:
                known = None if refresh else self._topics.get(topic)
            metadata = known or self.refresh_metadata([topic]).get(topic)
            if metadata is not None and metadata.leaders:
                if partition not in metadata.leaders:
                    raise BrokerResponseError(3, "UNKNOWN_TOPIC_OR_PARTITION", f"{topic} has no partition {partition}")
                if metadata.leaders[partition] >= 0:
                    return self.broker(metadata.leaders[partition])
            if not backoff.wait():
                if metadata is None or not metadata.leaders:
                    raise BrokerResponseError(3, "UNKNOWN_TOPIC_OR_PARTITION", f"topic {topic!r} has no metadata")
                raise BrokerResponseError(5, "LEADER_NOT_AVAILABLE", f"{topic}-{partition} has no live leader")
            refresh = True

    def _backoff(self, budget_ms: int) -> Backoff:
        """Waits of ``retry_backoff_ms`` between metadata refreshes, for up to ``budget_ms``."""
        step = self.retry_backoff_ms / 1000
        return Backoff(first=step, cap=step, budget_s=budget_ms / 1000)

    def invalidate(self, topic: str) -> None:
        """Forget a topic's leaders (after an error said they moved)."""
        with self._lock:
            self._topics.pop(topic, None)

    def close(self) -> None:
        if self.discovery is not None:
            self.discovery.close()
            self.discovery = None
        with self._lock:
            for connection in self._connections.values():
                connection.close()
            self._connections.clear()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class UsesClient:
    """Base of Producer, SimpleConsumer and Admin: works through a shared ``client``, or makes one
    from ``bootstrap`` (and then owns it: ``close`` closes it). A context manager."""

    def __init__(
        self,
        bootstrap: str | Sequence[str] | None,
        client: Client | None,
        *,
        zookeeper: str | None = None,
        request_timeout_ms: int = 30_000,
        broker_version: str | None = None,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        if client is None and bootstrap is None and zookeeper is None:
            raise ClientError("give bootstrap servers, a ZooKeeper connect string or a client")
        self.client = client or Client(
            bootstrap, zookeeper=zookeeper, request_timeout_ms=request_timeout_ms, broker_version=broker_version,
            security=security,
        )  # fmt: skip
        self._owns_client = client is None

    def close(self) -> None:
        if self._owns_client:
            self.client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
