"""What a broker knows of its cluster when the cluster lives in ZooKeeper (seeds: 代理节点的注册).

Role: registers this broker at ``/brokers/ids/<id>``, keeps a local view of the live brokers and
of the topics (``/brokers/topics/<topic>``: partition → broker), creates the logs of the partitions
placed on this broker, and registers new topics (CreateTopics, auto-creation, configured topics) so
that every broker serves them. Metadata answers come from this view.

Invariants:
- ZooKeeper is never called with an unbounded wait from a request handler: reads on the request
  path happen only while connected and with a timeout; everything else runs on a refresher thread
  that watches wake up (watches are kazoo's, re-set after reconnects and session expiry).
- A partition has one replica: the broker it is placed on. While that broker is not registered the
  partition has no leader (metadata says LEADER_NOT_AVAILABLE); no other broker takes it over.
- When ZooKeeper is unreachable the broker keeps serving what it knows; after its session expired it
  registers again (kafkalog.registry.brokers) and the refresher re-reads everything.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import zlib
from collections.abc import Mapping
from typing import Any

from kafkalog.errors import KafkalogError, RegistryError
from kafkalog.log import LogConfig, LogManager, validate_topic
from kafkalog.protocol import ErrorCode
from kafkalog.registry.brokers import BROKER_IDS, BrokerInfo, BrokerRegistration, live_brokers
from kafkalog.registry.connect import connect
from kafkalog.registry.offsets import (
    commit_offset,
    committed_partitions,
    delete_offsets,
    fetch_offset,
    groups_with_offsets,
)
from kafkalog.registry.topics import (
    BROKER_TOPICS,
    CONFIG_CHANGES,
    claim_controller,
    create_topic,
    delete_topic,
    notify_config_change,
    parse_topic,
    read_topic,
    read_topic_config,
    spread,
    topic_path,
    update_topic,
    write_partition_state,
    write_topic_config,
)
from kafkalog.retry import Backoff
from kafkalog.server.cluster.topic_config import topic_log_config
from kafkalog.server.cluster.view import TopicExistsError, UnknownTopicError
from kafkalog.server.config import BrokerAddress, BrokerConfig, BrokerConfigError

logger = logging.getLogger(__name__)

_REQUEST_PATH_TIMEOUT_S = 2.0
"""Longest a request handler waits on ZooKeeper (a topic it has not seen yet, an offset commit)."""
_UNKNOWN_TOPIC_RECHECK_S = 1.0
"""A topic not found in ZooKeeper is not looked up again for this long (clients retry in a loop)."""
DELETE_TOPICS = "/admin/delete_topics"
"""Where Kafka's ZooKeeper tools (kafka-topics --delete) ask for a topic's deletion."""
_RESYNC_INTERVAL_S = 30.0
"""A full re-read even without a watch firing: a safety net, not the mechanism."""


class ZooKeeperCluster:
    """The cluster view of a broker registered in ZooKeeper (see the module doc). Thread-safe."""

    def __init__(self, config: BrokerConfig, logs: LogManager) -> None:
        assert config.zookeeper is not None
        self.config = config
        self.logs = logs
        (self.this_broker,) = config.brokers  # this one alone: a ZooKeeper cluster lists no `cluster`
        self._lock = threading.Lock()
        self._live: dict[int, BrokerAddress] = {}
        self._topics: dict[str, dict[int, int]] = {}
        self._checked_missing: dict[str, float] = {}
        self._wake = threading.Event()
        self._closing = threading.Event()
        session_s = config.zookeeper_session_timeout_ms / 1000
        try:
            start_s = config.zookeeper_connect_timeout_ms / 1000
            self.zk = connect(config.zookeeper, session_timeout_s=session_s, start_timeout_s=start_s)
        except RegistryError as exc:
            raise BrokerConfigError(f"zookeeper={config.zookeeper!r}: {exc}") from exc
        # A fast restart finds its previous node until ZooKeeper expires that session.
        self.registration = BrokerRegistration(
            self.zk,
            BrokerInfo(config.broker_id, self.this_broker.host, self.this_broker.port, self.this_broker.listeners),
            stale_wait_s=2 * session_s + 5,
        )
        self._refresher = threading.Thread(target=self._refresh_loop, name="zookeeper-refresher", daemon=True)
        self._watched: set[str] = set()
        self._states: set[tuple[str, int]] = set()
        """Partition state nodes written in the session ``_states_session``."""
        self._states_session: Any = None
        """Topics whose registration node has a data watch (partitions added rewrite it)."""

    # ------------------------------------------------------------------ life cycle

    def start(self) -> None:
        """Register this broker, read the registry, start following it. Raises BrokerConfigError
        (naming the node) if another broker holds this id."""
        from kazoo.protocol.states import KazooState  # noqa: PLC0415 - kazoo only in ZooKeeper mode
        from kazoo.recipe.watchers import ChildrenWatch  # noqa: PLC0415

        self.zk.ensure_path(BROKER_IDS)
        self.zk.ensure_path(BROKER_TOPICS)
        for spec in self.config.topics:  # configured topics are registered once, by whoever comes first
            if read_topic(self.zk, spec.name) is None:
                with contextlib.suppress(TopicExistsError):  # another broker registered it meanwhile
                    self._register_topic(spec.name, spec.partitions, {}, None)
        try:
            self.registration.register()
        except RegistryError as exc:
            raise BrokerConfigError(str(exc)) from exc
        self._sync()

        def wake(_: Any = None) -> bool:
            self._wake.set()
            return not self._closing.is_set()  # False ends the watch

        def on_state(state: Any) -> None:
            if state == KazooState.CONNECTED:
                self._wake.set()  # anything may have changed while we were away

        self.zk.ensure_path(CONFIG_CHANGES)
        self.zk.ensure_path(DELETE_TOPICS)
        ChildrenWatch(self.zk, BROKER_IDS, wake)
        ChildrenWatch(self.zk, BROKER_TOPICS, wake)
        ChildrenWatch(self.zk, CONFIG_CHANGES, wake)  # a topic's config altered (by us or Kafka's tools)
        ChildrenWatch(self.zk, DELETE_TOPICS, wake)  # Kafka's tools ask for deletions here
        self.zk.add_listener(on_state)
        self._refresher.start()

    def close(self) -> None:
        """Unregister and end the session (the refresher stops with it)."""
        self._closing.set()
        self._wake.set()
        try:
            self.registration.unregister()
        except Exception as exc:  # ZooKeeper gone at shutdown: the node expires with the session
            logger.warning("could not unregister broker %d: %s", self.this_broker.id, exc)
        finally:
            self.zk.stop()
            self.zk.close()
        if self._refresher.is_alive():
            self._refresher.join(5)

    def _refresh_loop(self) -> None:
        retries = Backoff(first=0.5, cap=10.0)
        while not self._closing.is_set():
            self._wake.wait(_RESYNC_INTERVAL_S)
            self._wake.clear()
            if self._closing.is_set():
                return
            if not self.zk.connected:
                continue  # the CONNECTED listener wakes us again
            try:
                self._sync()
                retries = Backoff(first=0.5, cap=10.0)
            except Exception as exc:  # a connection lost mid-read: the next wake-up tries again
                logger.warning("could not read the registry (will retry): %s", exc)
                retries.wait()  # no budget: it always waits, longer each time the registry fails
                self._wake.set()

    def _sync(self) -> None:
        """Re-read live brokers, topics (their partitions too: some may have been added) and the
        configs of the topics served here; open the logs of partitions placed here, delete those
        of topics deleted."""
        from kazoo.recipe.watchers import DataWatch  # noqa: PLC0415

        brokers = {i: BrokerAddress(i, b.host, b.port, b.endpoints) for i, b in live_brokers(self.zk).items()}
        names = set(self.zk.get_children(BROKER_TOPICS))
        with self._lock:
            known = dict(self._topics)
        current: dict[str, dict[int, int]] = {}
        for name in sorted(names):
            assignment = read_topic(self.zk, name)
            if assignment is not None:
                current[name] = assignment
        for name, assignment in current.items():
            if name not in self._watched:  # a partition added rewrites the node: wake on it
                self._watched.add(name)
                DataWatch(self.zk, topic_path(name), self._on_topic_change)
            if assignment != known.get(name) or any(
                self.logs.get_log(name, p) is None for p, b in assignment.items() if b == self.this_broker.id
            ):
                self._open_logs(name, assignment)
            elif any(b == self.this_broker.id for b in assignment.values()):
                self._apply_config(name)
        with self._lock:
            before = set(self._live)
            self._live = brokers
            self._topics = current
        for gone in sorted(set(known) - set(current)):  # deleted from ZooKeeper: its data goes too
            self._watched.discard(gone)
            self._states = {tp for tp in self._states if tp[0] != gone}
            if self.logs.delete_logs(gone):
                logger.info("deleted the logs of topic %s (deleted from the registry)", gone)
        if set(brokers) != before:
            logger.info("live brokers: %s", ", ".join(map(str, sorted(brokers))) or "none")
        for name in sorted(set(current) - set(known)):
            logger.info("serving topic %s (%d partition(s))", name, len(current[name]))
        self._handle_admin_deletions(brokers)
        if min(brokers, default=-1) == self.this_broker.id:
            claim_controller(self.zk, self.this_broker.id, int(time.time() * 1000))
        for name, assignment in current.items():  # states lost with an expired session are written again
            mine = [p for p, b in assignment.items() if b == self.this_broker.id]
            if mine:
                self._publish_states(name, mine)

    def _on_topic_change(self, *_: Any) -> bool:
        self._wake.set()
        return not self._closing.is_set()  # False ends the watch

    def _apply_config(self, topic: str) -> None:
        try:
            config = topic_log_config(self.config.log, read_topic_config(self.zk, topic))
        except (KeyError, ValueError, KafkalogError) as exc:
            logger.warning("topic %s: configuration in ZooKeeper ignored (%s)", topic, exc)
            return
        if self.logs.config_for(topic) != (config or self.config.log):
            logger.info("topic %s: configuration changed", topic)
            self.logs.set_topic_config(topic, config)

    def _handle_admin_deletions(self, brokers: Mapping[int, BrokerAddress]) -> None:
        """Topic deletions asked the way Kafka's ZooKeeper tools ask (/admin/delete_topics/<topic>):
        carried out by the lowest live broker, the controller's stand-in."""
        if min(brokers, default=self.this_broker.id) != self.this_broker.id or not self.zk.exists(DELETE_TOPICS):
            return
        for topic in sorted(self.zk.get_children(DELETE_TOPICS)):
            logger.info("deleting topic %s, as %s/%s asks", topic, DELETE_TOPICS, topic)
            delete_topic(self.zk, topic)
            with contextlib.suppress(Exception):
                self.zk.delete(f"{DELETE_TOPICS}/{topic}")
            self._wake.set()

    def _open_logs(self, topic: str, assignment: Mapping[int, int]) -> None:
        mine = [p for p, broker in assignment.items() if broker == self.this_broker.id]
        if not mine:
            return
        config = None
        try:
            config = topic_log_config(self.config.log, read_topic_config(self.zk, topic))
        except (KeyError, ValueError, KafkalogError) as exc:
            logger.warning("topic %s: configuration in ZooKeeper ignored (%s); using the broker's defaults", topic, exc)
        for partition in mine:
            self.logs.get_or_create_log(topic, partition, config)
        if self.logs.config_for(topic) != (config or self.config.log):  # logs opened at start-up had defaults
            self.logs.set_topic_config(topic, config)
        self._publish_states(topic, mine)

    def _publish_states(self, topic: str, partitions: list[int]) -> None:
        """The partition state nodes Kafka's tools read, for the partitions this broker leads."""
        session = self.zk.client_id
        if session != self._states_session:  # a new session: the ephemeral nodes went with the old one
            self._states_session, self._states = session, set()
        for partition in partitions:
            if (topic, partition) not in self._states:
                try:
                    write_partition_state(self.zk, topic, partition, self.this_broker.id)
                    self._states.add((topic, partition))
                except Exception as exc:  # ZooKeeper unreachable: the next refresh tries again
                    logger.debug("could not publish the state of %s-%d: %s", topic, partition, exc)

    # ------------------------------------------------------------------ the view

    @property
    def brokers(self) -> tuple[BrokerAddress, ...]:
        with self._lock:
            return tuple(self._live[i] for i in sorted(self._live))

    @property
    def controller_id(self) -> int:
        # No controller is elected (nothing moves partitions); the lowest live id stands in.
        with self._lock:
            return min(self._live, default=self.this_broker.id)

    def topics(self) -> dict[str, int]:
        with self._lock:
            return {name: len(assignment) for name, assignment in self._topics.items()}

    def _assignment(self, topic: str) -> dict[int, int] | None:
        """The topic's placement: from the view, else (a topic created a moment ago, before the
        watch fired) read now, with a bounded wait, and at most once a second per unknown name."""
        with self._lock:
            found = self._topics.get(topic)
            if found is not None:
                return found
            last = self._checked_missing.get(topic, 0.0)
            now = time.monotonic()
            if now - last < _UNKNOWN_TOPIC_RECHECK_S or not self.zk.connected:
                return None
            self._checked_missing[topic] = now
            if len(self._checked_missing) > 10_000:  # clients asking for endless names
                self._checked_missing.clear()
        try:
            raw, _ = self.zk.get_async(topic_path(topic)).get(timeout=_REQUEST_PATH_TIMEOUT_S)
            assignment = parse_topic(raw, topic_path(topic))
        except Exception:  # absent (NoNodeError), unreadable or not answered in time: unknown for now
            return None
        self._open_logs(topic, assignment)
        with self._lock:
            self._topics[topic] = assignment
            self._checked_missing.pop(topic, None)
        return assignment

    def partition_count(self, topic: str) -> int | None:
        assignment = self._assignment(topic)
        return None if assignment is None else len(assignment)

    def leader_id(self, topic: str, partition: int) -> tuple[int, int]:
        assignment = self._assignment(topic) or {}
        placed = assignment.get(partition, -1)
        with self._lock:
            return (placed if placed in self._live else -1), placed

    def partition_error(self, topic: str, partition: int) -> ErrorCode | None:
        assignment = self._assignment(topic)
        if assignment is None or partition not in assignment:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if assignment[partition] != self.this_broker.id:
            return ErrorCode.NOT_LEADER_FOR_PARTITION
        if self.logs.get_log(topic, partition) is None:  # placed here by a topic the refresher has not opened
            self._open_logs(topic, {partition: self.this_broker.id})
        return None

    def coordinator(self, group: str) -> BrokerAddress:
        # Offsets live in ZooKeeper, which every broker reaches, but a group's membership lives in
        # one broker's memory: each group goes to one live broker, chosen by every broker alike from
        # the same live set, and to another when that one's registration goes.
        with self._lock:
            live = [self._live[i] for i in sorted(self._live)] or [self.this_broker]
        return live[zlib.crc32(group.encode()) % len(live)]

    def coordinates(self, group: str) -> bool:
        return self.coordinator(group).id == self.this_broker.id

    def can_create_topics(self) -> bool:
        return True

    def accepts_placement(self, topic: str, partition: int, replicas: list[int]) -> bool:
        with self._lock:
            return len(replicas) == 1 and replicas[0] in self._live

    def create_topic(
        self,
        topic: str,
        partitions: int,
        config: LogConfig | None = None,
        entries: Mapping[str, str] | None = None,
        placement: Mapping[int, int] | None = None,
    ) -> None:
        """Register the topic in ZooKeeper (placed over the live brokers unless ``placement`` says
        where) and open this broker's share; the others open theirs when their watch fires."""
        validate_topic(topic)
        if not self.zk.connected:
            raise RegistryError(f"cannot create topic {topic}: ZooKeeper is not reachable")
        self._register_topic(topic, partitions, dict(entries or {}), placement)

    def _register_topic(
        self, topic: str, partitions: int, entries: dict[str, str], placement: Mapping[int, int] | None
    ) -> None:
        if placement is None:
            with self._lock:
                live = sorted(self._live) or [self.this_broker.id]
            placement = spread(partitions, live, start=zlib.crc32(topic.encode()) % len(live))
        if entries:
            write_topic_config(self.zk, topic, entries)
        try:
            create_topic(self.zk, topic, dict(placement))
        except RegistryError as exc:
            if read_topic(self.zk, topic) is not None:
                raise TopicExistsError(f"topic {topic!r} already exists") from exc
            raise
        self._open_logs(topic, placement)
        with self._lock:
            self._topics[topic] = dict(placement)
            self._checked_missing.pop(topic, None)

    # ------------------------------------------------------------------ changing topics

    def _require(self, topic: str) -> dict[int, int]:
        if not self.zk.connected:
            raise RegistryError(f"cannot change topic {topic}: ZooKeeper is not reachable")
        assignment = read_topic(self.zk, topic)
        if assignment is None:
            raise UnknownTopicError(f"topic {topic!r} does not exist")
        return assignment

    def topic_config_entries(self, topic: str) -> dict[str, str]:
        return read_topic_config(self.zk, topic)

    def alter_topic_config(self, topic: str, entries: Mapping[str, str]) -> None:
        self._require(topic)
        config = topic_log_config(self.config.log, entries)
        write_topic_config(self.zk, topic, dict(entries))
        notify_config_change(self.zk, topic)
        if any(tp[0] == topic for tp in self.logs.logs):
            self.logs.set_topic_config(topic, config)

    def add_partitions(self, topic: str, count: int) -> None:
        assignment = self._require(topic)
        if count <= len(assignment):
            return
        with self._lock:
            live = sorted(self._live) or [self.this_broker.id]
        start = (zlib.crc32(topic.encode()) + len(assignment)) % len(live)
        added = spread(count - len(assignment), live, start=start)
        grown = {**assignment, **{len(assignment) + p: b for p, b in added.items()}}
        update_topic(self.zk, topic, grown)
        self._open_logs(topic, grown)
        with self._lock:
            self._topics[topic] = grown

    def delete_topic(self, topic: str) -> None:
        self._require(topic)
        delete_topic(self.zk, topic)
        with self._lock:
            self._topics.pop(topic, None)
        self.logs.delete_logs(topic)


class ZooKeeperOffsetStore:
    """Group offsets at ``/consumers/<group>/offsets/<topic>/<partition>`` (what Kafka 0.8/0.9
    brokers and the high-level consumer use), so the broker's OffsetCommit/OffsetFetch and
    kafkalog.client.group_consumer share them. The metadata string is not kept (Kafka's ZooKeeper
    storage does not keep it either)."""

    def __init__(self, cluster: ZooKeeperCluster) -> None:
        self.zk = cluster.zk

    def commit(self, group: str, offsets: dict[tuple[str, int], tuple[int, str | None]]) -> None:
        if not self.zk.connected:  # a request would queue until ZooKeeper is back: refuse now
            raise RegistryError(f"cannot commit offsets of group {group}: ZooKeeper is not reachable")
        try:
            for (topic, partition), (offset, _) in sorted(offsets.items()):
                commit_offset(self.zk, group, topic, partition, offset)
        except RegistryError:
            raise
        except Exception as exc:  # kazoo: connection lost or session expired mid-way
            raise RegistryError(f"cannot commit offsets of group {group} to ZooKeeper: {exc!r}") from exc

    def fetch(self, group: str, topic: str, partition: int) -> tuple[int, str | None] | None:
        if not self.zk.connected:
            raise RegistryError(f"cannot read offsets of group {group}: ZooKeeper is not reachable")
        try:
            offset = fetch_offset(self.zk, group, topic, partition)
        except RegistryError:
            raise
        except Exception as exc:
            raise RegistryError(f"cannot read offsets of group {group} from ZooKeeper: {exc!r}") from exc
        return None if offset is None else (offset, "")

    def delete(self, group: str, partitions: list[tuple[str, int]] | None = None) -> None:
        if not self.zk.connected:
            raise RegistryError(f"cannot delete offsets of group {group}: ZooKeeper is not reachable")
        try:
            delete_offsets(self.zk, group, partitions)
        except Exception as exc:
            raise RegistryError(f"cannot delete offsets of group {group} in ZooKeeper: {exc!r}") from exc

    def groups(self) -> list[str]:
        if not self.zk.connected:
            raise RegistryError("cannot list groups: ZooKeeper is not reachable")
        try:
            return groups_with_offsets(self.zk)
        except Exception as exc:
            raise RegistryError(f"cannot list groups in ZooKeeper: {exc!r}") from exc

    def committed_partitions(self, group: str) -> list[tuple[str, int]]:
        if not self.zk.connected:
            raise RegistryError(f"cannot read offsets of group {group}: ZooKeeper is not reachable")
        try:
            return committed_partitions(self.zk, group)
        except RegistryError:
            raise
        except Exception as exc:
            raise RegistryError(f"cannot list offsets of group {group} in ZooKeeper: {exc!r}") from exc
