"""A GroupConsumer's membership through the group's coordinator broker (Kafka's classic protocol).

Role: the same duties as kafkalog.client.zookeeper_membership, against any broker that coordinates
groups (kafkalog, Kafka 0.10+ up to 4.x): JoinGroup and SyncGroup make a generation, the member
chosen as leader computes everyone's assignment (range or roundrobin, run here as Kafka's clients
run theirs), a heartbeat thread keeps the membership and learns of rebalances, offsets are committed
as a member of the generation and read with OffsetFetch. Members of other clients (Java,
librdkafka, kafka-python) may share the group: the subscriptions and assignments are Kafka's
consumer protocol (kafkalog.protocol.consumer_protocol).

Invariants:
- Eager rebalancing: before joining a new generation every owned partition is released (the release
  callback commits its position while this generation's commits are still accepted).
- ``paused()`` is True unless a heartbeat (or the SyncGroup) sent less than 0.8 session timeouts ago
  was acknowledged: the coordinator cannot have expired this member since, so no other member owns
  its partitions yet. A member that cannot show that hands nothing out.
- ``lost`` is set when the coordinator fenced the member (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
  FENCED_INSTANCE_ID) or it must have expired the session; the consumer then drops everything
  without committing and joins again.
- ``suspended`` is set while the coordinator cannot be reached (commits are refused meanwhile).
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kafkalog.client.client import Client, error_name
from kafkalog.client.connection import BrokerConnection
from kafkalog.client.offsets import OffsetsClient
from kafkalog.client.security import PLAINTEXT, ClientSecurity
from kafkalog.errors import AssignmentError, BrokerResponseError, ClientError, KafkalogError
from kafkalog.protocol import ApiKey, ErrorCode
from kafkalog.protocol.consumer_protocol import (
    CONSUMER,
    Subscription,
    assignments_by_member,
    decode_assignment,
    decode_subscription,
    encode_subscription,
)
from kafkalog.registry.assign import ThreadId, range_assign
from kafkalog.retry import Backoff
from kafkalog.topics import TopicPartition

log = logging.getLogger(__name__)

_SAFE_SHARE_OF_SESSION = 0.8
_FENCED = frozenset({ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION, ErrorCode.FENCED_INSTANCE_ID})
_COORDINATOR_MOVED = frozenset(
    {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR}
)


def kafka_round_robin(
    subscriptions: Mapping[str, Sequence[str]], partitions: Mapping[str, Sequence[int]]
) -> dict[str, list[TopicPartition]]:
    """Kafka's RoundRobinAssignor: every subscribed partition in (topic, partition) order, dealt to
    the members in member id order, skipping members that do not subscribe to its topic."""
    members = sorted(subscriptions)
    out: dict[str, list[TopicPartition]] = {member: [] for member in members}
    if not members:
        return out
    dealer = itertools.cycle(members)
    topics = sorted({topic for wanted in subscriptions.values() for topic in wanted})
    for topic in topics:
        for partition in sorted(partitions.get(topic, ())):
            member = next(dealer)
            while topic not in subscriptions[member]:
                member = next(dealer)
            out[member].append((topic, partition))
    return out


def kafka_range(
    subscriptions: Mapping[str, Sequence[str]], partitions: Mapping[str, Sequence[int]]
) -> dict[str, list[TopicPartition]]:
    """Kafka's RangeAssignor: per topic, consecutive ranges over its members in member id order
    (the seeds' range assignor with one thread per member)."""
    owners = range_assign({m: dict.fromkeys(topics, 1) for m, topics in subscriptions.items()}, partitions)
    out: dict[str, list[TopicPartition]] = {member: [] for member in subscriptions}
    for tp, thread in sorted(owners.items()):
        out[thread.consumer].append(tp)
    return out


ASSIGNORS: dict[str, Callable[..., dict[str, list[TopicPartition]]]] = {
    "range": kafka_range,
    "roundrobin": kafka_round_robin,
}
"""The assignors this client runs as a group's leader, by their names in Kafka's protocol."""


class BrokerMembership:
    """See the module doc."""

    def __init__(
        self,
        bootstrap: str | Sequence[str],
        group: str,
        client_id: str,
        *,
        assignor: str,
        session_timeout_s: float,
        rebalance_timeout_s: float,
        heartbeat_interval_s: float | None,
        group_instance_id: str | None,
        on_release: Callable[[list[TopicPartition]], None],
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        if assignor not in ASSIGNORS:
            raise ClientError(f"unknown assignor {assignor!r} (known: {', '.join(ASSIGNORS)})")
        self.group = group
        self.client_id = client_id
        self.assignor = assignor
        self.session_timeout_s = session_timeout_s
        self.rebalance_timeout_s = rebalance_timeout_s
        self.heartbeat_interval_s = heartbeat_interval_s or session_timeout_s / 3
        self.group_instance_id = group_instance_id
        self.on_release = on_release
        self.client = Client(bootstrap, client_id=client_id, security=security)
        self.offsets = OffsetsClient(client=self.client)
        self.suspended = threading.Event()
        self.lost = False
        self.member_id = ""
        self.generation_id = -1
        self.owned: dict[TopicPartition, ThreadId] = {}
        self._acknowledged_at = -1e9
        """monotonic time at which the last acknowledged heartbeat (or SyncGroup) was sent."""
        self._group_connection: BrokerConnection | None = None
        self._heartbeat_connection: BrokerConnection | None = None
        self._closed = False
        self._wake: Callable[[], None] = lambda: None

    # ------------------------------------------------------------------ connections

    def _connect(self, timeout_s: float) -> BrokerConnection:
        host, port = self.offsets.coordinator_address(self.group)
        return BrokerConnection(
            host, port, client_id=self.client_id, timeout_ms=int(timeout_s * 1000), security=self.client.security
        )

    def _group_requests(self) -> BrokerConnection:
        """The connection for JoinGroup, SyncGroup and LeaveGroup: its timeout covers a whole
        rebalance (a JoinGroup waits for every member)."""
        if self._group_connection is None:
            self._group_connection = self._connect(self.rebalance_timeout_s + 10)
        return self._group_connection

    def _drop_connection(self, which: str) -> None:
        connection = getattr(self, which)
        setattr(self, which, None)
        if connection is not None:
            connection.close()

    # ------------------------------------------------------------------ the consumer's interface

    def start(self, subscription: Mapping[str, int], wake: Callable[[], None]) -> None:
        self._wake = wake
        threading.Thread(target=self._heartbeat, name=f"{self.client_id}-heartbeat", daemon=True).start()

    def paused(self) -> bool:
        allowed = self.session_timeout_s * _SAFE_SHARE_OF_SESSION
        return self.generation_id < 0 or time.monotonic() - self._acknowledged_at > allowed

    def forget_owned(self) -> None:
        self.owned.clear()
        self.generation_id = -1

    def topics(self) -> list[str]:
        return sorted(self.client.refresh_metadata())

    def bootstrap(self) -> list[str]:
        return [f"{host}:{port}" for host, port in self.client.bootstrap]

    def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        return self.offsets.fetch(self.group, partitions)

    def commit(self, positions: Mapping[TopicPartition, int]) -> None:
        """As a member of the current generation; BrokerResponseError if the coordinator fenced it."""
        if positions:
            self.offsets.commit(
                self.group,
                positions,
                generation_id=self.generation_id,
                member_id=self.member_id,
                group_instance_id=self.group_instance_id,
            )

    def rebalance(self, subscription: Mapping[str, int]) -> dict[TopicPartition, ThreadId]:
        """Join the next generation and return this member's partitions, each with its stream."""
        if self.owned:
            try:
                self.on_release(sorted(self.owned))
            except KafkalogError as exc:  # fenced already: positions since the last commit are redone
                log.warning("%s: offsets not committed before rebalancing: %s", self.client_id, exc)
            self.owned.clear()
        backoff = Backoff(first=0.1, cap=0.5, budget_s=self.rebalance_timeout_s + 30)
        while not self._closed:
            try:
                partitions = self._join_and_sync(subscription)
            except BrokerResponseError as exc:
                if exc.error_code not in _COORDINATOR_MOVED and exc.error_code != ErrorCode.REBALANCE_IN_PROGRESS:
                    raise
                self._drop_connection("_group_connection")
            except KafkalogError:  # the coordinator went away: find it again
                self._drop_connection("_group_connection")
                if not backoff.wait():
                    raise
                continue
            else:
                if partitions is not None:
                    self.lost = False
                    self.owned = _local_streams(self.client_id, partitions, subscription)
                    return dict(self.owned)
            if not backoff.wait():
                raise ClientError(f"{self.client_id}: group {self.group} did not complete a rebalance in time")
        return {}

    def _join_and_sync(self, subscription: Mapping[str, int]) -> list[TopicPartition] | None:
        """One JoinGroup + SyncGroup round; None if the group must be joined again."""
        connection = self._group_requests()
        topics = tuple(sorted(subscription))
        metadata = encode_subscription(Subscription(topics))
        join = connection.request(
            connection.api(ApiKey.JOIN_GROUP),
            {
                "group_id": self.group,
                "session_timeout_ms": int(self.session_timeout_s * 1000),
                "rebalance_timeout_ms": int(self.rebalance_timeout_s * 1000),
                "member_id": self.member_id,
                "group_instance_id": self.group_instance_id,
                "protocol_type": CONSUMER,
                "protocols": [{"name": self.assignor, "metadata": metadata}],
            },
        )
        code = join["error_code"]
        if code == ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = join["member_id"]
            return None
        if code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
            self.member_id = ""
            return None
        if code:
            raise BrokerResponseError(code, error_name(code), f"joining group {self.group}")
        self.member_id, self.generation_id = join["member_id"], join["generation_id"]
        assignments: list[dict[str, Any]] = []
        if join["leader"] == self.member_id and not join.get("skip_assignment"):
            assignments = self._assign(join["protocol_name"], join["members"])
        sent = time.monotonic()
        sync = connection.request(
            connection.api(ApiKey.SYNC_GROUP),
            {
                "group_id": self.group,
                "generation_id": self.generation_id,
                "member_id": self.member_id,
                "group_instance_id": self.group_instance_id,
                "protocol_type": CONSUMER,
                "protocol_name": join["protocol_name"],
                "assignments": assignments,
            },
        )
        code = sync["error_code"]
        if code in _FENCED:
            if code == ErrorCode.UNKNOWN_MEMBER_ID:
                self.member_id = ""
            return None
        if code == ErrorCode.REBALANCE_IN_PROGRESS:
            return None
        if code:
            raise BrokerResponseError(code, error_name(code), f"syncing group {self.group}")
        self._acknowledged_at = sent
        self.suspended.clear()
        partitions = list(decode_assignment(bytes(sync["assignment"])))
        log.info(
            "%s: generation %d of group %s: %d partition(s)",
            self.client_id, self.generation_id, self.group, len(partitions),
        )  # fmt: skip
        return partitions

    def _assign(self, protocol: str, members: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """As the leader: every member's partitions under ``protocol``."""
        if protocol not in ASSIGNORS:
            raise AssignmentError(f"group {self.group} chose assignor {protocol!r}, which this client does not run")
        subscriptions = {m["member_id"]: decode_subscription(bytes(m["metadata"])).topics for m in members}
        wanted = sorted({topic for topics in subscriptions.values() for topic in topics})
        known = self.client.refresh_metadata(wanted)
        partitions = {topic: sorted(known[topic].leaders) for topic in wanted if topic in known}
        return assignments_by_member(ASSIGNORS[protocol](subscriptions, partitions))

    def _heartbeat(self) -> None:
        while not self._closed:
            time.sleep(self.heartbeat_interval_s)  # the protocol's interval, not a retry
            if self._closed or self.generation_id < 0 or not self.member_id:
                continue
            sent = time.monotonic()
            try:
                if self._heartbeat_connection is None:
                    self._heartbeat_connection = self._connect(self.session_timeout_s)
                connection = self._heartbeat_connection
                code = connection.request(
                    connection.api(ApiKey.HEARTBEAT),
                    {
                        "group_id": self.group,
                        "generation_id": self.generation_id,
                        "member_id": self.member_id,
                        "group_instance_id": self.group_instance_id,
                    },
                )["error_code"]
            except KafkalogError as exc:
                log.debug("%s: heartbeat failed: %s", self.client_id, exc)
                self._drop_connection("_heartbeat_connection")
                self.suspended.set()
                code = None
            if code in (ErrorCode.NONE, ErrorCode.REBALANCE_IN_PROGRESS):
                self._acknowledged_at = sent
                self.suspended.clear()
                if code == ErrorCode.REBALANCE_IN_PROGRESS:
                    self._wake()
            elif code in _FENCED:
                log.info("%s: %s by the coordinator of %s: joining again", self.client_id, error_name(code), self.group)
                self.suspended.clear()
                self.lost = True
                self._wake()
            elif code in _COORDINATOR_MOVED:
                self._drop_connection("_heartbeat_connection")
                self._drop_connection("_group_connection")
            if time.monotonic() - self._acknowledged_at > self.session_timeout_s and not self.lost:
                log.warning("%s: no heartbeat acknowledged for a session timeout: membership lost", self.client_id)
                self.lost = True
                self._wake()

    def leave(self) -> None:
        """Release every owned partition (the release callback commits) and leave the group."""
        if self.owned:
            self.on_release(sorted(self.owned))
            self.owned.clear()
        if self.member_id and self.group_instance_id is None:  # a static member keeps its place
            connection = self._group_requests()
            api = connection.api(ApiKey.LEAVE_GROUP)
            identity = {"member_id": self.member_id, "group_instance_id": self.group_instance_id}
            body = {"group_id": self.group, "member_id": self.member_id, "members": [identity]}
            connection.request(api, body)
        self.generation_id, self.member_id = -1, ""

    def close(self) -> None:
        self._closed = True
        self._drop_connection("_group_connection")
        self._drop_connection("_heartbeat_connection")
        self.offsets.close()
        self.client.close()


def _local_streams(
    client_id: str, partitions: list[TopicPartition], subscription: Mapping[str, int]
) -> dict[TopicPartition, ThreadId]:
    """This member's partitions dealt over its streams of each topic, in partition order."""
    owned: dict[TopicPartition, ThreadId] = {}
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    for topic, numbers in by_topic.items():
        streams = max(subscription.get(topic, 1), 1)
        for i, number in enumerate(sorted(numbers)):
            owned[(topic, number)] = ThreadId(client_id, i % streams)
    return owned
