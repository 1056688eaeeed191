"""Bootstrapping from ZooKeeper: the live brokers of ``/brokers/ids``, followed by watches.

Role: gives a Client the brokers to ask for metadata when it was given a ZooKeeper connect string
instead of a broker list, and tells it when brokers or topics changed (``on_change``), so it
re-reads metadata instead of trusting leaders that moved. kazoo re-sets the watches after reconnects
and session expiry (nothing ephemeral is registered here, so an expiry loses nothing).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from kafkalog.errors import ClientError, RegistryError
from kafkalog.registry.brokers import BROKER_IDS, live_brokers
from kafkalog.registry.connect import connect
from kafkalog.registry.topics import BROKER_TOPICS

log = logging.getLogger(__name__)


class ZooKeeperBootstrap:
    """The live brokers registered in ZooKeeper (see the module doc). Thread-safe."""

    def __init__(self, connect_string: str, on_change: Callable[[], None], *, start_timeout_s: float = 30.0) -> None:
        from kazoo.recipe.watchers import ChildrenWatch  # noqa: PLC0415 - kazoo only where ZooKeeper is used

        try:
            self.zk = connect(connect_string, start_timeout_s=start_timeout_s)
        except RegistryError as exc:
            raise ClientError(str(exc)) from exc
        self.connect_string = connect_string
        self._on_change = on_change
        self._lock = threading.Lock()
        self._brokers: list[tuple[str, int]] = []
        self._closed = False
        self.zk.ensure_path(BROKER_IDS)
        self.zk.ensure_path(BROKER_TOPICS)
        ChildrenWatch(self.zk, BROKER_IDS, self._brokers_changed)
        ChildrenWatch(self.zk, BROKER_TOPICS, self._topics_changed)

    def _brokers_changed(self, _: list[str]) -> bool:
        try:
            found = [(b.host, b.port) for b in live_brokers(self.zk).values()]
        except Exception as exc:  # connection lost mid-read: the watch fires again on reconnect
            log.warning("cannot read the brokers registered in %s: %s", self.connect_string, exc)
            return not self._closed
        with self._lock:
            self._brokers = found
        self._on_change()
        return not self._closed

    def _topics_changed(self, _: list[str]) -> bool:
        self._on_change()
        return not self._closed

    def brokers(self) -> list[tuple[str, int]]:
        """(host, port) of every registered broker; ClientError when none is."""
        with self._lock:
            found = list(self._brokers)
        if not found:
            raise ClientError(f"no broker is registered in ZooKeeper at {self.connect_string}")
        return found

    def close(self) -> None:
        self._closed = True
        self.zk.stop()
        self.zk.close()
