"""The registry's configuration: typed, frozen, validated once; from YAML (conf/registry.yaml) and flags.

The settings are Confluent's registry's, under this project's names (docs/schema-registry.md maps
them): ``bootstrap`` is ``kafkastore.bootstrap.servers``, ``topic`` ``kafkastore.topic``, ``group``
``schema.registry.group.id``, ``leader_eligibility`` the same, ``default_compatibility``
``schema.compatibility.level``, ``advertised_url`` what ``host.name`` and the listener make.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from kafkalog.client.client import parse_bootstrap
from kafkalog.client.security import PLAINTEXT, ClientSecurity
from kafkalog.configfile import TypedLoader
from kafkalog.errors import ClientError
from kafkalog.schema_registry.errors import RegistryConfigError
from kafkalog.schema_registry.registry import Rules
from kafkalog.schemas.compatibility import CompatibilityLevel

_TOPIC_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


@dataclass(frozen=True, slots=True)
class RegistryTls:
    """TLS of the registry's own listener (HTTPS), and the authorities its forwarded requests trust."""

    certificate: Path
    """The registry's certificate (PEM; its chain may follow it in the file)."""
    key: Path
    """The certificate's private key (PEM)."""
    key_password: str | None = None
    """The key's password, if it is encrypted (``${env:NAME}``)."""
    ca_file: Path | None = None
    """The authorities trusted for the primary's certificate when a write is forwarded to it, and
    for clients' certificates with ``client_auth`` (None: the system's)."""
    client_auth: bool = False
    """Ask every client for a certificate from ``ca_file`` (mutual TLS)."""

    def __post_init__(self) -> None:
        if self.client_auth and self.ca_file is None:
            raise RegistryConfigError("client_auth: needs ca_file, the authorities clients' certificates come from")

    def server_context(self) -> ssl.SSLContext:
        """The context every accepted connection is wrapped in; RegistryConfigError naming the file that fails."""
        try:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.minimum_version = ssl.TLSVersion.TLSv1_2
            context.load_cert_chain(self.certificate, self.key, password=self.key_password)
            if self.client_auth:
                context.load_verify_locations(cafile=str(self.ca_file))
                context.verify_mode = ssl.CERT_REQUIRED
        except (OSError, ValueError) as e:
            raise RegistryConfigError(f"tls: {self.certificate}, {self.key} cannot be used: {e}") from None
        return context

    def client_context(self) -> ssl.SSLContext:
        """The context of a forwarded request (to the primary's HTTPS URL); with ``client_auth``,
        this registry's certificate is shown to the primary."""
        try:
            context = ssl.create_default_context(cafile=str(self.ca_file) if self.ca_file else None)
            context.minimum_version = ssl.TLSVersion.TLSv1_2
            if self.client_auth:
                context.load_cert_chain(self.certificate, self.key, password=self.key_password)
        except (OSError, ValueError) as e:
            raise RegistryConfigError(f"tls: {self.ca_file} cannot be used: {e}") from None
        return context


@dataclass(frozen=True, slots=True)
class RegistryConfig:
    """Everything one registry process needs: the cluster that holds its state, its listener, its rules."""

    bootstrap: str
    """``host:port[,host:port]`` of the cluster's brokers (kafkalog's or Kafka's) that hold the topic."""
    security: ClientSecurity = PLAINTEXT
    """TLS and SASL to reach those brokers (docs/security.md), as every client of ours."""
    host: str = "127.0.0.1"
    """Address the REST API listens on."""
    port: int = 8081
    """Port it listens on (0: any free port, printed at start)."""
    advertised_url: str | None = None
    """The URL the other registries forward writes to when this one is primary (None:
    ``http[s]://host:port``, which must then not be a wildcard address)."""
    topic: str = "_schemas"
    """The compacted topic that holds every schema, version, level and mode; created (1 partition,
    cleanup.policy=compact) when missing."""
    group: str = "schema-registry"
    """The group the registries sharing the topic elect their primary in."""
    leader_eligibility: bool = True
    """May this registry be primary? (At least one registry of a group must be.)"""
    session_timeout_ms: int = 10_000
    """A primary that stops heartbeating is replaced after this long."""
    default_compatibility: str = "BACKWARD"
    """The global compatibility level while none is set through ``PUT /config``."""
    incompatible_error_code: int = 409
    """``error_code`` of an incompatible schema (HTTP 409 either way): 409 as Confluent's registry up
    to 8.0.3 and 8.1, or 40901 as 8.0.4 and 8.2 on."""
    store_timeout_ms: int = 10_000
    """How long a write waits to be acknowledged and read back from the topic (then 50002)."""
    init_timeout_ms: int = 60_000
    """How long the start waits to read the topic to its end."""
    forward_timeout_ms: int = 30_000
    """How long a write forwarded to the primary may take."""
    max_request_bytes: int = 16 * 1024 * 1024
    """The largest request body taken (413 past it)."""
    max_connections: int = 256
    """Connections served at once; more are refused (503)."""
    socket_timeout_ms: int = 30_000
    """An idle or stalled connection is closed after this long."""
    request_timeout_ms: int = 30_000
    """A request (line, headers, body) must arrive whole within this long of its first byte, however
    steadily it trickles in; the connection is closed otherwise."""
    tls: RegistryTls | None = None
    """HTTPS for the REST API (None: plain HTTP)."""
    peers: tuple[str, ...] | None = None
    """The URLs of every registry of the group (``http[s]://host:port``): writes are forwarded only
    to a primary among them, and forwarded writes taken only from their hosts' addresses. None:
    any member of the group (whoever may join it, see docs/schema-registry.md's security)."""
    users_file: Path | None = None
    """HTTP basic authentication: a file of ``user:hash`` lines (``kafkalog registry-user``
    writes them; no password in clear); every request must log in. None: no authentication."""

    def __post_init__(self) -> None:
        try:
            parse_bootstrap(self.bootstrap)
        except ClientError as e:
            raise RegistryConfigError(f"bootstrap: {e}") from None
        if not 0 <= self.port <= 65535:
            raise RegistryConfigError(f"port: must be a TCP port (0 to 65535), not {self.port}")
        if not self.topic or len(self.topic) > 249 or not set(self.topic) <= _TOPIC_CHARS or self.topic in (".", ".."):
            raise RegistryConfigError(f"topic: {self.topic!r} is not a valid topic name")
        if not self.group:
            raise RegistryConfigError("group: may not be empty")
        try:
            CompatibilityLevel.of(self.default_compatibility)
        except ValueError as e:
            raise RegistryConfigError(f"default_compatibility: {e}") from None
        if self.incompatible_error_code not in (409, 40901):
            raise RegistryConfigError(f"incompatible_error_code: 409 or 40901, not {self.incompatible_error_code}")
        for key in (
            "session_timeout_ms", "store_timeout_ms", "init_timeout_ms", "forward_timeout_ms", "max_request_bytes",
            "max_connections", "socket_timeout_ms", "request_timeout_ms",
        ):  # fmt: skip
            if getattr(self, key) < 1:
                raise RegistryConfigError(f"{key}: must be at least 1, not {getattr(self, key)}")
        if self.advertised_url is not None:
            parts = urlsplit(self.advertised_url)
            if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
                raise RegistryConfigError(f"advertised_url: http[s]://host:port, not {self.advertised_url!r}")
        elif self.host in ("0.0.0.0", "::", ""):
            raise RegistryConfigError(
                "advertised_url: needed when host is a wildcard address (how the other registries reach this one)"
            )

        for peer in self.peers or ():
            parts = urlsplit(peer)
            try:
                port = parts.port
            except ValueError:
                port = None
            if (
                parts.scheme not in ("http", "https")
                or not parts.hostname
                or port is None
                or parts.path not in ("", "/")
            ):
                raise RegistryConfigError(f"peers: http[s]://host:port, not {peer!r}")

    @property
    def scheme(self) -> str:
        return "https" if self.tls is not None else "http"

    def url(self, port: int) -> str:
        """The URL others reach this registry at (``port``: the one actually bound, for port 0)."""
        if self.advertised_url is not None:
            return self.advertised_url.rstrip("/")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{port}"

    @property
    def rules(self) -> Rules:
        return Rules(CompatibilityLevel.of(self.default_compatibility), self.incompatible_error_code)


LOADER = TypedLoader(RegistryConfigError, invalid=(ClientError,), what="registry config file")
"""Reads registry files: kafkalog.configfile's rules (``file:key.path`` errors, ``${env:NAME}``)."""


def load_registry_config(path: Path | None, overrides: dict[str, Any]) -> RegistryConfig:
    """The YAML file (if any) with the flags' ``overrides`` (None values ignored) applied."""
    values, source = LOADER.values(path, overrides)
    if "bootstrap" not in values:
        raise RegistryConfigError(f"{source}:bootstrap: the cluster that holds the topic is needed (--bootstrap)")
    return LOADER.build(RegistryConfig, values, source)
