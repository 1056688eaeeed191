"""Broker configuration: typed, frozen, validated once; loaded from YAML with flag overrides.

Read by kafkalog.configfile's loader, like the mirror's and the pipelines' files: errors name the
file and the key path (``conf/broker.yaml:limits.max_request_bytes: ...``), strings may hold
``${env:NAME}``. Reference: docs/config-reference.md (generated from these classes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from kafkalog.configfile import TypedLoader
from kafkalog.errors import KafkalogError, RegistryError
from kafkalog.log import LogConfig
from kafkalog.log.cleaner.settings import CleanerSettings
from kafkalog.registry.connect import check_connect_string
from kafkalog.server.groups.settings import GroupSettings
from kafkalog.server.listeners import Listener, ListenerError, SecurityProtocol, parse_endpoint, parse_listeners


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

    listeners: tuple[str, ...] = ()
    """With several listeners: that broker's advertised ``NAME://host:port`` per listener name (a
    client is told the address on the listener it came in on). Empty: ``host:port`` on every one."""

    def address(self, listener: str) -> tuple[str, int] | None:
        """Where a client that came in on ``listener`` reaches this broker (None: it cannot)."""
        if not self.listeners:
            return self.host, self.port
        for text in self.listeners:
            name, host, port = parse_endpoint(text, f"cluster[{self.id}].listeners")
            if name == listener:
                return host, port
        return None

    def __post_init__(self) -> None:
        for i, text in enumerate(self.listeners):
            try:
                parse_endpoint(text, f"listeners[{i}]")
            except ListenerError as exc:
                raise BrokerConfigError(str(exc)) from None


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
class SaslSettings:
    """How SASL listeners authenticate clients (docs/security.md)."""

    users_file: Path | None = None
    """The users and their salted credentials (``kafkalog users``); read at start and again when it
    changes. Required by a SASL_PLAINTEXT or SASL_SSL listener."""

    mechanisms: tuple[str, ...] | None = None
    """The mechanisms offered on every SASL listener, in this order. Default: SCRAM-SHA-512 and
    SCRAM-SHA-256, and PLAIN on SASL_SSL listeners only (PLAIN sends the password itself)."""

    listener_mechanisms: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """The mechanisms of one listener, by its name (Kafka's
    ``listener.name.<name>.sasl.enabled.mechanisms``): ``{LOCAL: [SCRAM-SHA-512]}``."""

    plain_in_clear: bool = False
    """Allow PLAIN on a SASL_PLAINTEXT listener, where the password crosses the network unencrypted.
    Without it a broker whose settings offer PLAIN there refuses to start."""

    handshake_timeout_ms: int = 10_000
    """A connection that has not authenticated within this long is closed: an idle or slow stranger
    cannot hold a connection slot."""

    max_receive_bytes: int = 512 * 1024
    """The largest frame a connection may send before it has logged in (Kafka's
    ``sasl.server.max.receive.size``): a larger one closes the connection before it is read."""

    max_login_buffer_bytes: int = 16 * 1024 * 1024
    """What every connection not yet logged in may hold in the broker's memory, together; a
    connection whose bytes would go over it is closed."""

    failed_authentication_delay_ms: int = 100
    """A refused login's answer (and the closing of its connection) waits this long (Kafka's
    ``connection.failed.authentication.delay.ms``): a client retrying a wrong password cannot
    spin."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "listener_mechanisms", {k.upper(): v for k, v in self.listener_mechanisms.items()})
        for key, mechanisms in [("mechanisms", self.mechanisms), *(
            (f"listener_mechanisms.{name}", found) for name, found in self.listener_mechanisms.items()
        )]:  # fmt: skip
            if mechanisms is None:
                continue
            unknown = [m for m in mechanisms if m not in OFFERED_MECHANISMS]
            if unknown or not mechanisms or len(set(mechanisms)) != len(mechanisms):
                raise BrokerConfigError(
                    f"{key}: one or more of {', '.join(OFFERED_MECHANISMS)}, each once, not {list(mechanisms)}"
                )
        if not 100 <= self.handshake_timeout_ms <= 300_000:
            raise BrokerConfigError(f"handshake_timeout_ms: must be in [100, 300000], not {self.handshake_timeout_ms}")
        if not 4096 <= self.max_receive_bytes <= 100 * 1024 * 1024:
            raise BrokerConfigError(f"max_receive_bytes: must be in [4096, 104857600], not {self.max_receive_bytes}")
        if self.max_login_buffer_bytes < self.max_receive_bytes:
            raise BrokerConfigError(
                f"max_login_buffer_bytes: must be at least max_receive_bytes ({self.max_receive_bytes}), "
                f"not {self.max_login_buffer_bytes}"
            )
        if not 0 <= self.failed_authentication_delay_ms < self.handshake_timeout_ms:
            raise BrokerConfigError(
                f"failed_authentication_delay_ms: must be at least 0 and under handshake_timeout_ms "
                f"({self.handshake_timeout_ms}: a refusal still waiting then is closed unanswered), "
                f"not {self.failed_authentication_delay_ms}"
            )

    def mechanisms_for(self, listener: Listener) -> tuple[str, ...]:
        """The mechanisms ``listener`` offers: its own, else ``mechanisms``, else the default."""
        found = self.listener_mechanisms.get(listener.name) or self.mechanisms
        if found is not None:
            return found
        tls = listener.security_protocol.uses_tls
        return ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN") if tls else ("SCRAM-SHA-512", "SCRAM-SHA-256")

    def check_listeners(self, listeners: tuple[Listener, ...]) -> None:
        """BrokerConfigError for a listener named in ``listener_mechanisms`` that is not a SASL
        listener, and for PLAIN offered without TLS unless ``plain_in_clear``."""
        sasl = {listener.name: listener for listener in listeners if listener.security_protocol.uses_sasl}
        for name in self.listener_mechanisms:
            if name not in sasl:
                raise BrokerConfigError(
                    f"sasl.listener_mechanisms.{name}: no SASL listener is named {name} "
                    f"(SASL listeners: {', '.join(sasl) or 'none'})"
                )
        for listener in sasl.values():
            in_clear = not listener.security_protocol.uses_tls
            if in_clear and "PLAIN" in self.mechanisms_for(listener) and not self.plain_in_clear:
                raise BrokerConfigError(
                    f"sasl: PLAIN is offered on listener {listener.name} ({listener.security_protocol}), where "
                    "passwords would cross the network unencrypted: offer it on TLS listeners only "
                    f"(sasl.listener_mechanisms.{listener.name}: [SCRAM-SHA-512, SCRAM-SHA-256]), or, on a "
                    "network nobody else can read, set sasl.plain_in_clear: true"
                )


OFFERED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(frozen=True, slots=True)
class TlsSettings:
    """The TLS of SSL and SASL_SSL listeners (docs/security.md: making the certificates)."""

    certificate: Path | None = None
    """The broker's certificate chain (PEM), its own first. Required by an SSL or SASL_SSL listener."""

    key: Path | None = None
    """The certificate's private key (PEM)."""

    key_password: str | None = None
    """The key's password, if it is encrypted: write it as ``${env:NAME}``, never in the file."""

    client_ca: Path | None = None
    """Certificates (PEM) of the authorities whose client certificates are trusted."""

    client_auth: Literal["none", "requested", "required"] = "none"
    """Client certificates: not asked for; asked for (a client without one is ANONYMOUS, unless SASL
    names it); or required (a connection without a trusted one fails its handshake). A client with a
    certificate is ``User:<its subject>`` (``User:CN=alice,OU=data``) on an SSL listener."""

    min_version: Literal["TLSv1.2", "TLSv1.3"] = "TLSv1.2"
    """The oldest TLS version accepted."""

    def __post_init__(self) -> None:
        if (self.certificate is None) != (self.key is None):
            raise BrokerConfigError("certificate: a certificate and its key go together; give both or neither")
        if self.client_auth != "none" and self.client_ca is None:
            raise BrokerConfigError(f"client_auth: {self.client_auth} needs client_ca (whom to trust)")


@dataclass(frozen=True, slots=True)
class AuthorizationSettings:
    """Who may do what (ACLs: docs/security.md). A broker without any ACL lets every client do
    everything, unless ``deny_by_default``; once one ACL exists, what no ACL allows is denied."""

    super_users: tuple[str, ...] = ()
    """Principals allowed everything, whatever the ACLs say (``User:admin``, ``User:CN=ops,O=Example``)."""

    deny_by_default: bool = False
    """Deny what no ACL allows even while there are no ACLs at all (a broker locked from its first start)."""

    acl_file: Path | None = None
    """Where the ACLs are kept (default: ``.acls.json`` in the first data directory). A ZooKeeper
    cluster keeps them in ZooKeeper, shared by every broker."""

    def __post_init__(self) -> None:
        for principal in self.super_users:
            kind, colon, name = principal.partition(":")
            if not (kind and colon and name):
                raise BrokerConfigError(f"super_users: {principal!r} is not TYPE:NAME (User:admin)")


@dataclass(frozen=True, slots=True)
class TransactionSettings:
    """The transaction coordinator's rules (Kafka's ``transaction.*`` broker settings)."""

    max_timeout_ms: int = 900_000
    """A producer asking for a longer transaction timeout is refused (INVALID_TRANSACTION_TIMEOUT):
    Kafka's ``transaction.max.timeout.ms``."""

    abort_check_interval_ms: int = 10_000
    """How often open transactions are checked against their timeout (the longest a timed-out
    transaction stays open past it): Kafka's
    ``transaction.abort.timed.out.transaction.cleanup.interval.ms``."""

    id_expiration_ms: int = 604_800_000
    """A transactional id with no transaction open and no request for this long is forgotten:
    Kafka's ``transactional.id.expiration.ms`` (7 days)."""

    fsync: bool = False
    """Fsync each of the coordinator's records before answering (files without ZooKeeper). False:
    each is still replaced whole by a rename (a broker that dies, even SIGKILLed, finds every
    record it answered for), but left to the OS like the log's data, whose flush policy fsyncs
    nothing by default: a power cut may take the last records along with the last data they
    describe, as with Kafka's own transaction log. True: a power cut takes neither, for about
    0.4 ms more per transaction on an SSD (two fsyncs)."""

    def __post_init__(self) -> None:
        for key in ("max_timeout_ms", "abort_check_interval_ms", "id_expiration_ms"):
            if getattr(self, key) < 1:
                raise BrokerConfigError(f"{key}: must be >= 1, not {getattr(self, key)}")


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
    listeners: tuple[str, ...] = ()
    """Several ports, each with its security protocol, as Kafka writes them:
    ``[PLAINTEXT://127.0.0.1:9092, SASL_SSL://0.0.0.0:9093]``. Empty: one PLAINTEXT listener on
    ``host:port``. Given, ``host`` and ``port`` serve only the metrics endpoint's address."""
    advertised_listeners: tuple[str, ...] = ()
    """What clients are told per listener (``SASL_SSL://broker1.example.com:9093``), where it is not
    the address bound: a listener on 0.0.0.0 needs one."""
    listener_security_protocol_map: dict[str, str] = field(default_factory=dict)
    """Listener names that are not security protocols, and theirs: ``{INTERNAL: SASL_PLAINTEXT}``."""
    sasl: SaslSettings = field(default_factory=SaslSettings)
    """How SASL listeners authenticate clients."""
    tls: TlsSettings = field(default_factory=TlsSettings)
    """The certificates of TLS listeners."""
    authorization: AuthorizationSettings = field(default_factory=AuthorizationSettings)
    """Who may do what: super users, deny by default, where the ACLs are kept."""
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
    cleaner: CleanerSettings = field(default_factory=CleanerSettings)
    """The log cleaner, which compacts topics whose cleanup.policy includes compact."""
    limits: Limits = field(default_factory=Limits)
    """Protections against clients that misbehave or lie."""
    groups: GroupSettings = field(default_factory=GroupSettings)
    """How the group coordinator treats consumer groups (session timeouts, the first rebalance)."""
    transactions: TransactionSettings = field(default_factory=TransactionSettings)
    """How the transaction coordinator treats transactional producers (timeouts, expiry)."""
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
        listeners = self.listener_specs  # ListenerError → BrokerConfigError
        if any(listener.security_protocol.uses_sasl for listener in listeners) and self.sasl.users_file is None:
            raise BrokerConfigError("sasl.users_file: a SASL listener needs the users file (kafkalog users add)")
        self.sasl.check_listeners(listeners)
        if any(listener.security_protocol.uses_tls for listener in listeners) and self.tls.certificate is None:
            raise BrokerConfigError("tls.certificate: an SSL or SASL_SSL listener needs a certificate and its key")

    @property
    def listener_specs(self) -> tuple[Listener, ...]:
        """The listeners, parsed (one PLAINTEXT listener on ``host:port`` unless ``listeners`` says)."""
        if not self.listeners:
            if self.advertised_listeners or self.listener_security_protocol_map:
                raise BrokerConfigError("advertised_listeners: given without listeners")
            advertised = self.advertised_host or self.host
            return (Listener("PLAINTEXT", SecurityProtocol.PLAINTEXT, self.host, self.port, advertised, self.port),)
        try:
            return parse_listeners(self.listeners, self.advertised_listeners, self.listener_security_protocol_map)
        except ListenerError as exc:
            raise BrokerConfigError(str(exc)) from None

    @property
    def brokers(self) -> tuple[BrokerAddress, ...]:
        """Every broker of the cluster (just this one when no cluster is configured)."""
        if self.cluster:
            return tuple(sorted(self.cluster, key=lambda b: b.id))
        first, *_ = listeners = self.listener_specs
        endpoints = tuple(listener.endpoint for listener in listeners) if self.listeners else ()
        return (BrokerAddress(self.broker_id, first.advertised_host, first.advertised_port, endpoints),)


LOADER = TypedLoader(BrokerConfigError, invalid=(KafkalogError,), what="broker config file")
"""Reads broker files: kafkalog.configfile's rules (``file:key.path`` errors, ``${env:NAME}``);
a nested class's own error (LogConfigError, GroupSettingsError) gets the key path too."""


def load_config(path: Path | None = None, overrides: dict[str, Any] | None = None) -> BrokerConfig:
    """Read ``path`` (YAML) if given, apply ``overrides`` (from flags), validate, return the config."""
    return LOADER.load(BrokerConfig, path, overrides)
