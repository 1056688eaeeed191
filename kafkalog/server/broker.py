"""A running broker: the log manager, the cluster view, the offset store, the handlers, the sockets."""

from __future__ import annotations

import dataclasses
import logging
import socket
from types import TracebackType

from kafkalog.log import LogManager
from kafkalog.record import kernels
from kafkalog.registry.producer_ids import allocate_block
from kafkalog.server.cluster.offsets import GroupOffsetStore, OffsetStore
from kafkalog.server.cluster.producer_ids import BLOCK_SIZE, ProducerIdError, ProducerIds, file_blocks
from kafkalog.server.cluster.topic_config import TopicConfigFiles, topic_log_config
from kafkalog.server.cluster.view import Cluster, ClusterView
from kafkalog.server.cluster.zookeeper import ZooKeeperCluster, ZooKeeperOffsetStore
from kafkalog.server.config import BrokerConfig, BrokerConfigError
from kafkalog.server.handlers import RequestHandlers
from kafkalog.server.listeners import Listener
from kafkalog.server.metrics import Metrics, MetricsHttpServer, render_prometheus
from kafkalog.server.network import Security, SocketServer, open_listener
from kafkalog.server.security.access import Access
from kafkalog.server.security.acl_store import AclStore, FileAclStore
from kafkalog.server.security.acls import AclError, Authorizer
from kafkalog.server.security.credentials import CredentialError, UsersFile
from kafkalog.server.security.session import Authenticator
from kafkalog.server.security.tls import server_context
from kafkalog.server.security.zk_acls import ACLS_PATH, ZooKeeperAclStore
from kafkalog.server.transactions.store import TransactionStore, ZooKeeperTransactionStore

logger = logging.getLogger(__name__)


class Broker:
    """Start with ``start()`` (or ``with Broker(config) as broker``); ``stop()`` shuts down gracefully:
    connections are closed, every log is flushed and the clean-shutdown marker written."""

    def __init__(self, config: BrokerConfig) -> None:
        security = _security(config)  # a certificate or users file that cannot be used stops us here
        bound = _bind(config)
        # With port 0 the kernel chose the port: clients must be told the real one.
        self.config = config = _with_ports(config, [listener for listener, _ in bound])
        try:
            # Without ZooKeeper, topic configs are kept beside the data: the logs open with them.
            self.topic_configs = None if config.zookeeper is not None else TopicConfigFiles(config.data_dirs[0])
            stored = self.topic_configs.all() if self.topic_configs is not None else {}
            overrides = {topic: topic_log_config(config.log, entries) for topic, entries in stored.items()}
            self.logs = LogManager(
                config.data_dirs,
                config.log,
                topic_configs={t: c for t, c in overrides.items() if c is not None},
                cleaner=config.cleaner,
            )
        except (KeyError, ValueError) as exc:
            _close(bound)
            raise BrokerConfigError(f"a stored topic config is invalid: {exc}") from exc
        except BaseException:
            _close(bound)
            raise
        self.cluster: ClusterView
        self.offsets: GroupOffsetStore
        self._zookeeper: ZooKeeperCluster | None = None
        try:
            transaction_store: TransactionStore | None = None  # None: files beside the data
            if config.zookeeper is not None:
                self.cluster = self._zookeeper = ZooKeeperCluster(config, self.logs)
                self.offsets = ZooKeeperOffsetStore(self._zookeeper)
                transaction_store = ZooKeeperTransactionStore(self._zookeeper.zk)
            else:
                static = Cluster(config, self.logs, self.topic_configs)
                static.open_declared_topics()
                self.cluster, self.offsets = static, OffsetStore(config.data_dirs[0])
            self.metrics = Metrics()
            self.acl_store, access = _authorization(config, self._zookeeper)
            self.handlers = RequestHandlers(
                config, self.logs, self.cluster, self.offsets, producer_ids=self._producer_ids(config),
                access=access, acl_store=self.acl_store, transaction_store=transaction_store,
            )  # fmt: skip
            self.server = SocketServer(config, self.handlers, self.metrics, bound, security)
            self.handlers.on_append = self.server.data_arrived
        except BaseException:
            _close(bound)
            if self._zookeeper is not None:
                self._zookeeper.close()
            self.logs.close()
            raise
        self._metrics_http: MetricsHttpServer | None = None

    def _producer_ids(self, config: BrokerConfig) -> ProducerIds:
        """Blocks of producer ids: from ZooKeeper (unique in the cluster), or this broker's own range."""
        zookeeper = self._zookeeper
        if zookeeper is None:
            return ProducerIds(file_blocks(config.data_dirs[0], config.broker_id))

        def from_zookeeper() -> tuple[int, int]:
            try:
                return allocate_block(zookeeper.zk, config.broker_id, BLOCK_SIZE)
            except Exception as exc:  # kazoo: ZooKeeper unreachable; the producer retries
                raise ProducerIdError(f"cannot reserve producer ids in ZooKeeper: {exc!r}") from exc

        return ProducerIds(from_zookeeper)

    @property
    def port(self) -> int:
        """The first listener's port."""
        return self.server.port

    @property
    def ports(self) -> dict[str, int]:
        """Every listener's port, by listener name."""
        return dict(self.server.ports)

    def start(self) -> None:
        """Serve; in ZooKeeper mode also register (BrokerConfigError if another broker holds the id)."""
        self.logs.start_maintenance()
        self.handlers.groups.start()
        self.server.start()
        if self._zookeeper is not None:
            try:
                self._zookeeper.start()
            except BaseException:
                self.stop()
                raise
        self.handlers.transactions.coordinator.start()  # after ZooKeeper: it reads what it coordinates
        if self.config.metrics_port is not None:
            self._metrics_http = MetricsHttpServer(self.config.host, self.config.metrics_port, self.render_metrics)
            self._metrics_http.start()
        listening = ", ".join(
            f"{listener.name} on {listener.host}:{listener.port}" for listener in self.config.listener_specs
        )
        logger.info(
            "broker %d listening: %s (data in %s; %s)",
            self.config.broker_id, listening, ", ".join(map(str, self.config.data_dirs)), kernels.describe(),
        )  # fmt: skip
        if not kernels.NATIVE:
            logger.warning("broker %d runs the pure-Python %s", self.config.broker_id, kernels.describe())

    def render_metrics(self) -> str:
        offsets = {tp: log.log_end_offset for tp, log in self.logs.logs.items()}
        return render_prometheus(self.metrics, offsets, self.logs.cleaner.metrics())

    def stop(self) -> None:
        logger.info("broker %d stopping", self.config.broker_id)
        try:
            self.server.stop()
            self.handlers.groups.stop()
            self.handlers.transactions.coordinator.stop()
            if self._metrics_http is not None:
                self._metrics_http.stop()
            self.cluster.close()
        finally:
            self.logs.close()
        logger.info("broker %d stopped cleanly", self.config.broker_id)

    def __enter__(self) -> Broker:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _security(config: BrokerConfig) -> Security:
    """The TLS context and the login checker the listeners need (none for plaintext alone)."""
    listeners = config.listener_specs
    tls = server_context(config.tls) if any(lst.security_protocol.uses_tls for lst in listeners) else None
    authenticator = None
    sasl = [lst for lst in listeners if lst.security_protocol.uses_sasl]
    if sasl:
        assert config.sasl.users_file is not None  # BrokerConfig checked it
        try:
            users = UsersFile(config.sasl.users_file)
        except CredentialError as exc:
            raise BrokerConfigError(f"sasl.users_file: {exc}") from exc
        if not users.users():
            logger.warning("the users file %s has no users: no SASL login can succeed", config.sasl.users_file)
        for listener in sasl:  # allowed by sasl.plain_in_clear (BrokerConfig checked it), still worth a line
            if "PLAIN" in config.sasl.mechanisms_for(listener) and not listener.security_protocol.uses_tls:
                logger.warning("PLAIN is offered on listener %s (%s): passwords cross the network in clear",
                               listener.name, listener.security_protocol)  # fmt: skip
        authenticator = Authenticator(users, config.sasl.mechanisms_for(sasl[0]))
    return Security(
        tls,
        authenticator,
        config.sasl.handshake_timeout_ms,
        mechanisms={listener.name: config.sasl.mechanisms_for(listener) for listener in sasl},
        max_receive_bytes=config.sasl.max_receive_bytes,
        max_login_buffer_bytes=config.sasl.max_login_buffer_bytes,
        failed_authentication_delay_s=config.sasl.failed_authentication_delay_ms / 1000,
    )


def _bind(config: BrokerConfig) -> list[tuple[Listener, socket.socket]]:
    bound: list[tuple[Listener, socket.socket]] = []
    for listener in config.listener_specs:
        try:
            sock = open_listener(listener.host, listener.port)
        except OSError as exc:
            _close(bound)
            raise BrokerConfigError(
                f"cannot listen on {listener.host}:{listener.port} (listener {listener.name}): {exc}"
            ) from exc
        bound.append((listener.with_port(sock.getsockname()[1]), sock))
    return bound


def _with_ports(config: BrokerConfig, listeners: list[Listener]) -> BrokerConfig:
    """``config`` with each listener's real port (port 0 chose one) in what clients are told."""
    first = listeners[0]
    if not config.listeners:
        return dataclasses.replace(config, port=first.port)

    def text(name: str, host: str, port: int) -> str:
        return f"{name}://[{host}]:{port}" if ":" in host else f"{name}://{host}:{port}"

    return dataclasses.replace(
        config,
        listeners=tuple(text(lst.name, lst.host, lst.port) for lst in listeners),
        advertised_listeners=tuple(text(lst.name, lst.advertised_host, lst.advertised_port) for lst in listeners),
    )


def _close(bound: list[tuple[Listener, socket.socket]]) -> None:
    for _, sock in bound:
        sock.close()


def _authorization(config: BrokerConfig, zookeeper: ZooKeeperCluster | None) -> tuple[AclStore, Access]:
    """The ACL store (ZooKeeper's node in a ZooKeeper cluster, else a file) and the authorizer,
    loaded (damaged ACLs stop the broker: an authorizer that lost its DENYs would open what was
    closed)."""
    settings = config.authorization
    authorizer = Authorizer(settings.super_users, deny_by_default=settings.deny_by_default)
    store: AclStore
    try:
        if zookeeper is not None:
            store = ZooKeeperAclStore(zookeeper.zk, authorizer.replace)
            where = f"ZooKeeper {ACLS_PATH}"
        else:
            path = settings.acl_file or config.data_dirs[0] / ".acls.json"
            store, where = FileAclStore(path), str(path)
    except AclError as exc:
        raise BrokerConfigError(f"authorization: {exc}") from exc
    authorizer.replace(store.bindings())
    if authorizer.enforcing:
        logger.info(
            "authorization: %d ACLs from %s; %d super users; what no ACL allows is denied",
            len(authorizer.bindings), where, len(authorizer.super_users),
        )  # fmt: skip
    return store, Access(authorizer)
