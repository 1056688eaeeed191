"""A GroupConsumer's membership through ZooKeeper (the seeds' design: no coordinator).

Role: registers the member at /consumers/<group>/ids, watches members, brokers and topics, and
rebalances by computing the group's assignment and claiming this member's share in ZooKeeper
(kafkalog.registry.groups); offsets are read and written at /consumers/<group>/offsets.

Invariants (the consumer relies on them, see kafkalog.client.group_consumer):
- ``suspended`` is set while ZooKeeper is unreachable (the session may survive); ``lost`` becomes
  True when the session expired (our ephemeral nodes, hence our ownership, are gone).
- ``paused()`` is True while nothing may be handed out: suspended, or the heartbeat thread has not
  run lately. A frozen process (SIGSTOP, a stalled VM) cannot notice that its session expired
  meanwhile, and kazoo cannot either until it runs again; so after a pause longer than
  ``_FROZEN_S`` the heartbeat makes a ZooKeeper round trip in the same session before anything more
  is handed out (if the session is gone, ``lost`` is set).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kafkalog.errors import ClientError, RegistryError
from kafkalog.registry.assign import ThreadId
from kafkalog.registry.brokers import BROKER_IDS, live_brokers
from kafkalog.registry.connect import connect
from kafkalog.registry.groups import Rebalancer, ids_path, register_member
from kafkalog.registry.offsets import commit_offset, offset_path
from kafkalog.registry.topics import BROKER_TOPICS, all_topics
from kafkalog.topics import TopicPartition

log = logging.getLogger(__name__)

_FROZEN_S = 1.0
"""A heartbeat older than this means the process was frozen (or starved): hand nothing out until a
ZooKeeper round trip shows the session survived."""


class ZooKeeperMembership:
    """See the module doc."""

    def __init__(
        self,
        zookeeper: Any,
        group: str,
        consumer_id: str,
        *,
        assignor: str,
        claim_timeout_s: float,
        session_timeout_s: float,
        on_release: Callable[[list[TopicPartition]], None],
    ) -> None:
        if isinstance(zookeeper, str):
            try:
                self.zk = connect(zookeeper, session_timeout_s=session_timeout_s)
            except RegistryError as exc:
                raise ClientError(str(exc)) from exc
            self._owns_client = True
        else:
            self.zk, self._owns_client = zookeeper, False
        self.group = group
        self.consumer_id = consumer_id
        self.suspended = threading.Event()
        self.lost = False
        self._alive_at = time.monotonic()
        """When the heartbeat last ran with the session known to be alive."""
        self._closed = False
        self._wake: Callable[[], None] = lambda: None
        self._rebalancer = Rebalancer(
            self.zk, group, consumer_id, assignor=assignor, claim_timeout_s=claim_timeout_s, on_release=on_release
        )

    def start(self, subscription: Mapping[str, int], wake: Callable[[], None]) -> None:
        """Register, watch what changes the assignment (calling ``wake`` then), start the heartbeat."""
        from kazoo.protocol.states import KazooState  # noqa: PLC0415

        register_member(self.zk, self.group, self.consumer_id, subscription)
        self._wake = wake

        def on_state(state: Any) -> None:
            if state == KazooState.SUSPENDED:
                self.suspended.set()
            elif state == KazooState.LOST:
                self.suspended.set()
                self.lost = True
            else:
                self.suspended.clear()
                wake()

        def on_change(children: list[str]) -> bool:
            wake()
            return not self._closed

        self.zk.add_listener(on_state)
        for path in (ids_path(self.group), BROKER_IDS, BROKER_TOPICS):
            self.zk.ensure_path(path)
            self.zk.ChildrenWatch(path, on_change, send_event=False)
        threading.Thread(target=self._heartbeat, name=f"{self.consumer_id}-heartbeat", daemon=True).start()

    def _heartbeat(self) -> None:
        session = self.zk.client_id
        while not self._closed:
            now = time.monotonic()
            if now - self._alive_at <= _FROZEN_S / 2 or self._confirm_session(session):
                self._alive_at = now
                session = self.zk.client_id
            time.sleep(0.1)  # how often the session's liveness is looked at: an interval, not a retry

    def _confirm_session(self, session: Any) -> bool:
        if not self.zk.connected:
            return False  # SUSPENDED or reconnecting: the state listener decides what follows
        try:
            self.zk.exists_async(ids_path(self.group)).get(timeout=2.0)
        except Exception:  # no answer in time: still unknown
            return False
        if self.zk.client_id != session:  # a new session: ours expired while we were frozen
            log.warning("%s: the ZooKeeper session expired while the process was frozen", self.consumer_id)
            self.lost = True
            self._wake()
        return True

    def paused(self) -> bool:
        return self.suspended.is_set() or time.monotonic() - self._alive_at > _FROZEN_S

    def forget_owned(self) -> None:
        """After ``lost``: the ownership went with the session."""
        self._rebalancer.owned.clear()

    def rebalance(self, subscription: Mapping[str, int]) -> dict[TopicPartition, ThreadId]:
        register_member(self.zk, self.group, self.consumer_id, subscription)
        return self._rebalancer.rebalance()

    def topics(self) -> list[str]:
        return list(all_topics(self.zk))

    def bootstrap(self) -> list[str]:
        brokers = live_brokers(self.zk)
        if not brokers:
            raise ClientError("no broker is registered in ZooKeeper")
        return [b.endpoint for b in brokers.values()]

    def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        """The committed offset of each partition (None: never committed), read together."""
        from kazoo.exceptions import NoNodeError  # noqa: PLC0415

        pending = {tp: self.zk.get_async(offset_path(self.group, *tp)) for tp in partitions}
        found: dict[TopicPartition, int | None] = {}
        for tp, answer in sorted(pending.items()):
            try:
                raw, _ = answer.get(timeout=30)
                found[tp] = int(raw.decode().strip())
            except NoNodeError:
                found[tp] = None
            except (UnicodeDecodeError, ValueError) as exc:
                raise RegistryError(f"{offset_path(self.group, *tp)}: not an offset ({exc})") from exc
        return found

    def commit(self, positions: Mapping[TopicPartition, int]) -> None:
        for (topic, partition), position in positions.items():
            commit_offset(self.zk, self.group, topic, partition, position)

    def leave(self) -> None:
        """Release every owned partition (the release callback commits) and deregister."""
        self._rebalancer.release(list(self._rebalancer.owned))
        self.zk.delete(f"{ids_path(self.group)}/{self.consumer_id}")

    def close(self) -> None:
        self._closed = True
        if self._owns_client:
            self.zk.stop()
            self.zk.close()
