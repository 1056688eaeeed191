"""One registry process put together from its configuration: store, election, REST API, HTTP server.

Start order: the listener is bound first (its port is part of the registry's identity, port 0
included), then the topic is read to its end (the state rebuilt), then the registry joins the
election and waits for its first assignment (up to three session timeouts), and only then are
requests served. Stop runs the other way round: the group is left
first, so another registry can take over at once instead of after a session timeout.
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

from kafkalog.schema_registry.api import Api
from kafkalog.schema_registry.auth import BasicAuth, read_users
from kafkalog.schema_registry.config import RegistryConfig
from kafkalog.schema_registry.election import GroupElection, Identity
from kafkalog.schema_registry.forward import Forwarder, peer_addresses
from kafkalog.schema_registry.registry import Registry
from kafkalog.schema_registry.server import HttpLimits, RegistryServer
from kafkalog.schema_registry.topic_store import TopicStore

log = logging.getLogger(__name__)


class RegistryApp:
    """See the module docstring."""

    def __init__(self, config: RegistryConfig) -> None:
        self.config = config
        auth = BasicAuth(read_users(config.users_file)) if config.users_file is not None else None
        tls_server = config.tls.server_context() if config.tls is not None else None
        tls_client = config.tls.client_context() if config.tls is not None else None
        self.store = TopicStore(
            config.bootstrap, config.topic, security=config.security, timeout_s=config.store_timeout_ms / 1000,
            init_timeout_s=config.init_timeout_ms / 1000,
        )  # fmt: skip
        self.registry = Registry(self.store, config.rules, term=self._term)
        limits = HttpLimits(
            config.max_request_bytes, config.max_connections, config.socket_timeout_ms / 1000,
            config.request_timeout_ms / 1000,
        )  # fmt: skip
        forwarder = Forwarder(
            timeout_s=config.forward_timeout_ms / 1000, tls=tls_client, https_only=tls_server is not None,
            peers=config.peers,
        )  # fmt: skip
        addresses = peer_addresses(config.peers) if config.peers is not None else None
        self.election: GroupElection | None = None
        self.server = RegistryServer(
            Api(self.registry), self.store, _NotYet(), forwarder, host=config.host, port=config.port,
            limits=limits, tls=tls_server, auth=auth, peer_addresses=addresses,
        )  # fmt: skip
        self.url = config.url(self.server.port)

    def start(self) -> None:
        try:
            self.store.start()
            parts = urlsplit(self.url)
            identity = Identity(
                parts.hostname or self.config.host, parts.port or (443 if parts.scheme == "https" else 80),
                self.config.leader_eligibility, parts.scheme,
            )  # fmt: skip
            self.election = GroupElection(
                self.config.bootstrap, identity, group=self.config.group,
                session_timeout_s=self.config.session_timeout_ms / 1000, security=self.config.security,
            )  # fmt: skip
            self.server.primary = self.election
            self.election.start()
            # serving before the first assignment would answer every write 50004: wait for it a while
            if not self.election.wait_for_assignment(self.config.session_timeout_ms * 3 / 1000):
                log.warning(
                    "no assignment from group %s yet: serving reads; writes wait for a primary", self.config.group
                )
            self.server.start()
        except BaseException:
            self.stop()
            raise

    def _term(self) -> object | None:
        """The election's term (the server's election is replaced at start: always ask the current one)."""
        return self.server.primary.term()

    def stop(self) -> None:
        if self.election is not None:
            self.election.close()
        self.server.stop()
        self.store.close()


class _NotYet:
    """The election before it started: nobody is primary."""

    def is_primary(self) -> bool:
        return False

    def primary_url(self) -> str | None:
        return None

    def term(self) -> object | None:
        return None
