"""Broker registration: ``/brokers/ids/<id>``, an ephemeral node holding the broker's endpoint.

Role: one recipe over a kazoo client the caller owns (its chroot, if any, is the client's). The
node's value is Kafka 0.9's JSON (``host``, ``port``, ``endpoints``, ``version``, ``timestamp``,
``jmx_port``), so Kafka's own tools can read our registry.

Invariants (seeds: 代理节点的注册; reliability rows Z1, Z2):
- A broker never deletes a node another live session owns. It deletes a node only when the node's
  ``ephemeralOwner`` is a session this registration created earlier (its own stale node).
- A node with the same id and a *different* endpoint belongs to another broker: registration fails
  at once (two brokers configured with one id).
- A node with the same id and the *same* endpoint is this broker's previous process (a fast restart:
  the old process cannot be alive, since this one holds the port): registration waits for ZooKeeper
  to expire the old session, at most ``stale_wait_s``, then fails naming the node.
- After its session expires (LOST), the broker registers again with its current data as soon as the
  client has a new session; SUSPENDED changes nothing (the session may still come back).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from kafkalog.errors import RegistryError
from kafkalog.retry import Backoff

BROKER_IDS = "/brokers/ids"
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """What a broker registers: its id and where clients reach it (``host:port``, its first listener,
    which readers of the 0.8 layout use; ``endpoints``, every listener as ``NAME://host:port``)."""

    broker_id: int
    host: str
    port: int
    endpoints: tuple[str, ...] = ()
    """Every listener's advertised ``NAME://host:port``; empty: PLAINTEXT on ``host:port`` alone."""

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "jmx_port": -1,
                "timestamp": str(int(time.time() * 1000)),
                "endpoints": list(self.endpoints) or [f"PLAINTEXT://{self.host}:{self.port}"],
                "host": self.host,
                "version": 2,
                "port": self.port,
            }
        ).encode()

    @classmethod
    def from_json(cls, broker_id: int, raw: bytes, where: str) -> BrokerInfo:
        """Parse a registry node (ours or a Kafka broker's); RegistryError naming ``where`` if invalid."""
        try:
            data = json.loads(raw)
            host, port = data.get("host"), data.get("port")
            endpoints = data.get("endpoints") or []
            if not isinstance(endpoints, list) or not all(isinstance(e, str) and "://" in e for e in endpoints):
                raise ValueError(f"endpoints must be a list of NAME://host:port, not {endpoints!r}")
            if (not host or port in (None, -1)) and endpoints:  # Kafka brokers with listeners only
                host, _, port = endpoints[0].rpartition("://")[2].rpartition(":")
            # one PLAINTEXT endpoint is the single-listener broker of before: reached at host:port
            # from any listener; more, or another name, are listeners clients are told one of
            several = len(endpoints) > 1 or (endpoints and not endpoints[0].startswith("PLAINTEXT://"))
            return cls(broker_id, str(host), int(port), tuple(endpoints) if several else ())
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise RegistryError(f"{where}: not a broker registration ({exc}): {raw[:200]!r}") from exc

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}"


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def live_brokers(client: Any) -> dict[int, BrokerInfo]:
    """Every registered broker (nodes that vanish while being read are skipped)."""
    from kazoo.exceptions import NoNodeError  # noqa: PLC0415 - kazoo only where ZooKeeper is used

    out = {}
    try:
        children = client.get_children(BROKER_IDS)
    except NoNodeError:
        return {}
    for child in children:
        if not child.isdigit():
            continue
        try:
            raw, _ = client.get(broker_path(int(child)))
        except NoNodeError:
            continue
        out[int(child)] = BrokerInfo.from_json(int(child), raw, broker_path(int(child)))
    return dict(sorted(out.items()))


class BrokerRegistration:
    """Keeps ``/brokers/ids/<id>`` registered for one broker (see the module doc)."""

    def __init__(self, client: Any, info: BrokerInfo, *, stale_wait_s: float = 30.0) -> None:
        self.client = client
        self.info = info
        self.stale_wait_s = stale_wait_s
        self._sessions: set[int] = set()
        """Session ids this registration created the node under (its own, possibly stale, nodes)."""
        self._active = False
        self._lock = threading.Lock()
        self.registrations = 0
        """How many times the node was created (1, plus one per session expiry survived)."""

    @property
    def path(self) -> str:
        return broker_path(self.info.broker_id)

    def register(self) -> None:
        """Create the node (waiting out this broker's own stale node); RegistryError if another
        broker holds the id or the stale node outlives ``stale_wait_s``."""
        from kazoo.protocol.states import KazooState  # noqa: PLC0415

        with self._lock:
            self._create()
            if not self._active:
                self._active = True

                def on_state(state: Any) -> None:
                    if state == KazooState.LOST and self._active:
                        # expired: ephemeral nodes are gone; register again once a new session exists
                        # (not in this callback: it must not block the client's event thread)
                        self.client.handler.spawn(self._register_again)

                self.client.add_listener(on_state)

    def _register_again(self) -> None:
        backoff = Backoff(first=0.2, cap=0.2, budget_s=max(self.stale_wait_s, 60.0))
        while self._active:
            if self.client.connected and self._try_again():
                return
            if not backoff.wait():
                return

    def _try_again(self) -> bool:
        """One attempt to register after an expiry; True when done (registered, or refused)."""
        try:
            with self._lock:
                if self._active:
                    self._create()
        except RegistryError:
            log.exception("broker %s could not register again", self.info.broker_id)
            return True
        except Exception as exc:  # a connection loss during the retry (anything): try again
            log.warning("broker %s re-registration interrupted: %s", self.info.broker_id, exc)
            return False
        log.info("broker %s registered again at %s after its session expired", self.info.broker_id, self.path)
        return True

    def _create(self) -> None:
        from kazoo.exceptions import NodeExistsError, NoNodeError  # noqa: PLC0415

        backoff = Backoff(first=0.25, cap=0.25, budget_s=self.stale_wait_s)
        said_waiting = False
        while True:
            session = self.client.client_id[0]
            try:
                self.client.create(self.path, self.info.to_json(), ephemeral=True, makepath=True)
            except NodeExistsError:
                pass
            else:
                self._sessions.add(session)
                self.registrations += 1
                return
            try:
                raw, stat = self.client.get(self.path)
            except NoNodeError:
                continue  # gone between the two calls: try again
            owner = stat.ephemeralOwner
            if owner == session:
                self.client.set(self.path, self.info.to_json())  # already ours: refresh the data
                return
            if owner in self._sessions:
                with contextlib.suppress(NoNodeError):
                    self.client.delete(self.path, version=stat.version)  # our own stale node
                continue
            other = BrokerInfo.from_json(self.info.broker_id, raw, self.path)
            if other.endpoint != self.info.endpoint:
                raise RegistryError(
                    f"broker id {self.info.broker_id} is already registered by another broker at "
                    f"{other.endpoint} ({self.path}, session 0x{owner:x}); give each broker its own broker id"
                )
            if backoff.spent:
                raise RegistryError(
                    f"{self.path} still holds this broker's previous registration (session 0x{owner:x}) after "
                    f"{self.stale_wait_s:g} s; is an old process of broker {self.info.broker_id} still running?"
                )
            if not said_waiting:
                log.warning(
                    "%s exists from a previous session of this broker (0x%x): waiting up to %g s for ZooKeeper "
                    "to expire it",
                    self.path,
                    owner,
                    self.stale_wait_s,
                )
                said_waiting = True
            backoff.wait()

    def unregister(self) -> None:
        """Stop re-registering and delete the node if this session owns it."""
        from kazoo.exceptions import NoNodeError  # noqa: PLC0415

        with self._lock:
            self._active = False
            try:
                _, stat = self.client.get(self.path)
                if stat.ephemeralOwner == self.client.client_id[0]:
                    self.client.delete(self.path, version=stat.version)
            except NoNodeError:
                pass
