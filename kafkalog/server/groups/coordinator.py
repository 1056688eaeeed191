"""The group coordinator: Kafka's classic consumer-group protocol over the groups this broker leads.

Role: JoinGroup, SyncGroup, Heartbeat and LeaveGroup move a group through its states
(kafkalog.server.groups.state); OffsetCommit asks ``commit_error`` whether a member may commit;
DescribeGroups and ListGroups read the state. A JoinGroup is answered when every member has rejoined
(or the rebalance timeout passed), a SyncGroup when the leader has sent the assignments: both return
a DeferredResponse that a later request or the timer thread completes.

Invariants:
- A generation's members all get their JoinGroup response together, from one completion: the
  leader's carries every member's metadata for the chosen protocol, the others' none.
- ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID and FENCED_INSTANCE_ID fence every request of a member that
  is not in the current generation, so a member that was replaced or expired cannot commit offsets
  for partitions another member now owns.
- A member is alive while it heartbeats within its session timeout, or while it waits for a join
  or sync response (those have their own deadlines: the rebalance timeout).
- Membership lives in memory only (as Kafka rebuilds it, members re-form the group after a broker
  restart: their next request gets UNKNOWN_MEMBER_ID and they join again); committed offsets are
  in the offset store, untouched here.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from kafkalog.errors import ProtocolError
from kafkalog.protocol import ErrorCode
from kafkalog.protocol.consumer_protocol import CONSUMER, decode_subscription
from kafkalog.server.deferred import DeferredResponse
from kafkalog.server.groups.settings import GroupSettings
from kafkalog.server.groups.state import Group, GroupState, Member

logger = logging.getLogger(__name__)

Body = dict[str, Any]

_TICK_S = 0.1
_MEMBER_ID_REQUIRED_VERSION = 4
"""JoinGroup v4+ (KIP-394): a member without an id first gets one with MEMBER_ID_REQUIRED."""
_NULLABLE_PROTOCOL_VERSION = 7
"""JoinGroup v7+: protocol type and name may be null (in an error response)."""
_DESCRIBE_NOT_FOUND_VERSION = 6
"""DescribeGroups v6+ answers an unknown group with GROUP_ID_NOT_FOUND instead of "Dead" alone."""


class GroupCoordinator:
    """Every group this broker coordinates (see the module doc). Thread-safe: one lock over all
    groups; the timer thread expires sessions and completes rebalances that timed out."""

    def __init__(
        self,
        settings: GroupSettings,
        coordinates: Callable[[str], bool] = lambda group: True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.coordinates = coordinates
        """Whether this broker coordinates a group (else NOT_COORDINATOR: the client asks again)."""
        self.clock = clock
        self._lock = threading.RLock()
        self._groups: dict[str, Group] = {}
        self._stopping = threading.Event()
        self._timer: threading.Thread | None = None

    def start(self) -> None:
        self._timer = threading.Thread(target=self._run_timer, name="kafkalog-group-coordinator", daemon=True)
        self._timer.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._timer is not None:
            self._timer.join(5)
        with self._lock:  # answer whoever still waits: they rejoin wherever the group goes next
            for group in self._groups.values():
                for member in group.members.values():
                    self._answer_waits(member, ErrorCode.COORDINATOR_NOT_AVAILABLE)
            self._groups.clear()

    def _run_timer(self) -> None:
        while not self._stopping.wait(_TICK_S):
            try:
                self.tick()
            except Exception:  # a bug here must not stop every group's timers for good
                logger.exception("group coordinator timer failed")

    # ------------------------------------------------------------------ JoinGroup

    def join_group(self, version: int, body: Body, client_id: str, client_host: str) -> Body | DeferredResponse:
        group_id, member_id = body["group_id"], body["member_id"]
        instance_id = body.get("group_instance_id")
        session_ms = body["session_timeout_ms"]
        rebalance_ms = body.get("rebalance_timeout_ms", -1)
        rebalance_ms = session_ms if rebalance_ms < 0 else rebalance_ms
        protocols = [(p["name"], bytes(p["metadata"])) for p in body["protocols"]]
        protocol_type = body["protocol_type"]

        def error(code: int, member: str = member_id) -> Body:
            return _join_error(version, code, member)

        if not group_id:
            return error(ErrorCode.INVALID_GROUP_ID)
        if not self.coordinates(group_id):
            return error(ErrorCode.NOT_COORDINATOR)
        if not self.settings.min_session_timeout_ms <= session_ms <= self.settings.max_session_timeout_ms:
            return error(ErrorCode.INVALID_SESSION_TIMEOUT)
        with self._lock:
            now = self.clock()
            group = self._groups.get(group_id)
            if group is None:
                if member_id:  # it was a member of a group this coordinator no longer knows
                    return error(ErrorCode.UNKNOWN_MEMBER_ID)
                group = self._groups[group_id] = Group(group_id)
            if not group.accepts(protocol_type, protocols):
                return error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)

            def new_member(new_id: str) -> Member:
                return Member(
                    new_id, instance_id, client_id, f"/{client_host}", session_ms, rebalance_ms,
                    protocol_type, protocols, alive_until=now + session_ms / 1000, join_version=version,
                )  # fmt: skip

            if not member_id:
                if len(group.members) + len(group.pending) >= self.settings.max_size:
                    return error(ErrorCode.GROUP_MAX_SIZE_REACHED)
                new_id = f"{client_id or 'member'}-{uuid.uuid4()}"
                if instance_id is not None and instance_id in group.static:
                    return self._replace_static(
                        group, version, group.members[group.static[instance_id]], new_member(new_id), now
                    )
                if instance_id is None and version >= _MEMBER_ID_REQUIRED_VERSION:
                    group.pending[new_id] = now + session_ms / 1000
                    return error(ErrorCode.MEMBER_ID_REQUIRED, new_id)
                return self._add_and_wait(group, new_member(new_id), now)
            if member_id in group.pending:
                del group.pending[member_id]
                return self._add_and_wait(group, new_member(member_id), now)
            member = group.members.get(member_id)
            if member is None:
                return error(ErrorCode.UNKNOWN_MEMBER_ID)
            if instance_id is not None and group.static.get(instance_id) != member_id:
                return error(ErrorCode.FENCED_INSTANCE_ID)
            changed = not member.same_protocols(protocols)
            member.protocols, member.session_timeout_ms, member.rebalance_timeout_ms = (
                protocols,
                session_ms,
                rebalance_ms,
            )
            member.join_version, member.client_id = version, client_id
            member.alive_until = now + session_ms / 1000
            if group.state == GroupState.STABLE and not changed and member_id != group.leader_id:
                return self._join_response(group, member, version)  # nothing to rebalance for
            if group.state == GroupState.COMPLETING_REBALANCE and not changed:
                return self._join_response(group, member, version)  # a resend of the join it completed
            return self._wait_for_join(group, member, now, f"member {member_id} rejoined")

    def _add_and_wait(self, group: Group, member: Member, now: float) -> DeferredResponse:
        group.members[member.member_id] = member
        if member.group_instance_id is not None:
            group.static[member.group_instance_id] = member.member_id
        if group.protocol_type is None or len(group.members) == 1:
            group.protocol_type = member.protocol_type
        return self._wait_for_join(group, member, now, f"member {member.member_id} joined")

    def _wait_for_join(self, group: Group, member: Member, now: float, reason: str) -> DeferredResponse:
        waiting = DeferredResponse()
        if member.join is not None:  # a second join while the first waits: the first is answered now
            member.join.complete(_join_error(member.join_version, ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
        member.join = waiting
        if group.state != GroupState.PREPARING_REBALANCE:
            self._prepare_rebalance(group, now, reason)
        elif group.initial_join_ends is not None:  # the first rebalance: wait a little more for others
            delay = self.settings.initial_rebalance_delay_ms / 1000
            group.join_deadline = min(now + delay, group.initial_join_ends)
        self._maybe_complete_join(group, now)
        return waiting

    def _replace_static(
        self, group: Group, version: int, old: Member, new: Member, now: float
    ) -> Body | DeferredResponse:
        """A static member came back under a new member id: it takes the old one's place, and its
        assignment, without a rebalance where nothing changed (KIP-345); the old id is fenced."""
        self._answer_waits(old, ErrorCode.FENCED_INSTANCE_ID)
        del group.members[old.member_id]
        new.assignment = old.assignment
        group.members[new.member_id] = new
        group.static[new.group_instance_id or ""] = new.member_id
        was_leader = group.leader_id == old.member_id
        if was_leader:
            group.leader_id = new.member_id
        logger.info("group %s: static member %s is now %s", group.group_id, new.group_instance_id, new.member_id)
        if group.state == GroupState.STABLE and not was_leader and old.same_protocols(new.protocols):
            return self._join_response(group, new, version)
        return self._wait_for_join(group, new, now, f"static member {new.group_instance_id} rejoined")

    def _prepare_rebalance(self, group: Group, now: float, reason: str) -> None:
        if group.state == GroupState.COMPLETING_REBALANCE:  # the assignments being made are moot
            for member in group.members.values():
                if member.sync is not None:
                    member.sync.complete(_sync_body(ErrorCode.REBALANCE_IN_PROGRESS))
                    member.sync = None
        initial = group.state == GroupState.EMPTY
        group.state = GroupState.PREPARING_REBALANCE
        timeout = group.max_rebalance_timeout_ms() / 1000
        delay = self.settings.initial_rebalance_delay_ms / 1000
        if initial and delay > 0:
            group.initial_join_ends = now + timeout
            group.join_deadline = min(now + delay, group.initial_join_ends)
        else:
            group.initial_join_ends = None
            group.join_deadline = now + timeout
        logger.info("group %s: rebalancing (generation %d): %s", group.group_id, group.generation_id, reason)

    def _maybe_complete_join(self, group: Group, now: float) -> None:
        if group.state != GroupState.PREPARING_REBALANCE:
            return
        if now >= group.join_deadline or (group.initial_join_ends is None and group.all_joined()):
            self._complete_join(group, now)

    def _complete_join(self, group: Group, now: float) -> None:
        for member in [m for m in group.members.values() if m.join is None]:
            logger.info("group %s: member %s did not rejoin in time", group.group_id, member.member_id)
            self._remove(group, member)
        group.initial_join_ends = None
        group.generation_id += 1
        if not group.members:
            group.state, group.protocol_name, group.leader_id = GroupState.EMPTY, None, None
            logger.info("group %s: empty at generation %d", group.group_id, group.generation_id)
            self._forget_if_idle(group)
            return
        group.protocol_name = group.select_protocol()
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        group.state = GroupState.COMPLETING_REBALANCE
        group.sync_deadline = now + group.max_rebalance_timeout_ms() / 1000
        logger.info(
            "group %s: generation %d with %d members, protocol %s, leader %s",
            group.group_id, group.generation_id, len(group.members), group.protocol_name, group.leader_id,
        )  # fmt: skip
        for member in group.members.values():
            waiting, member.join = member.join, None
            member.assignment = b""
            member.alive_until = now + member.session_timeout_ms / 1000
            if waiting is not None:
                waiting.complete(self._join_response(group, member, member.join_version))

    def _join_response(self, group: Group, member: Member, version: int) -> Body:
        protocol = group.protocol_name or ""
        members = []
        if member.member_id == group.leader_id:
            members = [
                {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "metadata": m.metadata(protocol)}
                for m in group.members.values()
            ]
        return {
            "error_code": ErrorCode.NONE,
            "generation_id": group.generation_id,
            "protocol_type": group.protocol_type,
            "protocol_name": protocol,
            "leader": group.leader_id or "",
            "member_id": member.member_id,
            "members": members,
        }

    # ------------------------------------------------------------------ SyncGroup

    def sync_group(self, version: int, body: Body) -> Body | DeferredResponse:
        group_id, member_id = body["group_id"], body["member_id"]
        with self._lock:
            group = self._groups.get(group_id)
            code = self._check_member(group, group_id, member_id, body.get("group_instance_id"), body["generation_id"])
            if code:
                return _sync_body(code)
            assert group is not None
            member = group.members[member_id]
            wants_type, wants_name = body.get("protocol_type"), body.get("protocol_name")
            if (wants_type is not None and wants_type != group.protocol_type) or (
                wants_name is not None and wants_name != group.protocol_name
            ):
                return _sync_body(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
            if group.state == GroupState.PREPARING_REBALANCE:
                return _sync_body(ErrorCode.REBALANCE_IN_PROGRESS)
            member.alive_until = self.clock() + member.session_timeout_ms / 1000
            if group.state == GroupState.STABLE:
                return self._sync_response(group, member)
            waiting = DeferredResponse()
            if member.sync is not None:
                member.sync.complete(_sync_body(ErrorCode.REBALANCE_IN_PROGRESS))
            member.sync = waiting
            if member_id == group.leader_id:
                given = {a["member_id"]: bytes(a["assignment"]) for a in body["assignments"]}
                for other in group.members.values():
                    other.assignment = given.get(other.member_id, b"")
                group.state = GroupState.STABLE
                logger.info("group %s: stable at generation %d", group.group_id, group.generation_id)
                for other in group.members.values():
                    if other.sync is not None:
                        other.sync.complete(self._sync_response(group, other))
                        other.sync = None
            return waiting

    def _sync_response(self, group: Group, member: Member) -> Body:
        return {
            "error_code": ErrorCode.NONE,
            "protocol_type": group.protocol_type,
            "protocol_name": group.protocol_name,
            "assignment": member.assignment,
        }

    # ------------------------------------------------------------------ Heartbeat, LeaveGroup

    def heartbeat(self, body: Body) -> Body:
        group_id, member_id = body["group_id"], body["member_id"]
        with self._lock:
            group = self._groups.get(group_id)
            code = self._check_member(group, group_id, member_id, body.get("group_instance_id"), body["generation_id"])
            if code:
                return {"error_code": code}
            assert group is not None
            member = group.members[member_id]
            member.alive_until = self.clock() + member.session_timeout_ms / 1000
            if group.state == GroupState.PREPARING_REBALANCE:
                return {"error_code": ErrorCode.REBALANCE_IN_PROGRESS}
            return {"error_code": ErrorCode.NONE}

    def leave_group(self, version: int, body: Body) -> Body:
        group_id = body["group_id"]
        identities = (
            body["members"] if "members" in body else [{"member_id": body["member_id"], "group_instance_id": None}]
        )
        if not group_id:
            return {"error_code": ErrorCode.INVALID_GROUP_ID, "members": []}
        if not self.coordinates(group_id):
            return {"error_code": ErrorCode.NOT_COORDINATOR, "members": []}
        results = []
        with self._lock:
            group = self._groups.get(group_id)
            for identity in identities:
                member_id, instance_id = identity["member_id"], identity.get("group_instance_id")
                code = self._leave(group, member_id, instance_id, identity.get("reason"))
                results.append({"member_id": member_id, "group_instance_id": instance_id, "error_code": code})
            if group is not None:
                self._after_departure(group, self.clock(), "members left")
        if "members" in body:
            return {"error_code": ErrorCode.NONE, "members": results}
        return {"error_code": results[0]["error_code"]}

    def _leave(self, group: Group | None, member_id: str, instance_id: str | None, reason: str | None) -> int:
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if instance_id is not None:
            holder = group.static.get(instance_id)
            if holder is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if member_id and holder != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
            member_id = holder
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        logger.info("group %s: member %s left%s", group.group_id, member_id, f" ({reason})" if reason else "")
        self._remove(group, member)
        return ErrorCode.NONE

    # ------------------------------------------------------------------ offsets, describing

    def commit_error(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None) -> int:
        """Whether an OffsetCommit may store its offsets: NONE, or the error that fences it. A
        commit without membership (generation -1) is accepted only while the group has no members."""
        with self._lock:
            group = self._groups.get(group_id)
            if generation_id < 0 and not member_id:
                return ErrorCode.NONE if group is None or not group.members else ErrorCode.UNKNOWN_MEMBER_ID
            if group is not None and group.state == GroupState.COMPLETING_REBALANCE and member_id in group.members:
                return ErrorCode.REBALANCE_IN_PROGRESS
            code = self._check_member(group, group_id, member_id, instance_id, generation_id)
            if not code and group is not None:
                member = group.members[member_id]
                member.alive_until = self.clock() + member.session_timeout_ms / 1000
            return code

    def describe(self, group_id: str, version: int, has_offsets: bool) -> Body:
        """DescribeGroups' entry for one group; ``has_offsets``: it has committed offsets (an
        "Empty" group then, where it has no members)."""
        if not self.coordinates(group_id):
            return _described(group_id, "", ErrorCode.NOT_COORDINATOR)
        with self._lock:
            group = self._groups.get(group_id)
            if group is None:
                if has_offsets:
                    return _described(group_id, GroupState.EMPTY.value, ErrorCode.NONE)
                code = ErrorCode.GROUP_ID_NOT_FOUND if version >= _DESCRIBE_NOT_FOUND_VERSION else ErrorCode.NONE
                return _described(group_id, GroupState.DEAD.value, code)
            stable = group.state == GroupState.STABLE
            protocol = group.protocol_name or ""
            return {
                "error_code": ErrorCode.NONE,
                "error_message": None,
                "group_id": group_id,
                "group_state": group.state.value,
                "protocol_type": group.protocol_type or "",
                "protocol_data": protocol if stable else "",
                "members": [
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "member_metadata": m.metadata(protocol) if stable else b"",
                        "member_assignment": m.assignment if stable else b"",
                    }
                    for m in group.members.values()
                ],
            }

    def has_members(self, group_id: str) -> bool:
        with self._lock:
            group = self._groups.get(group_id)
            return group is not None and bool(group.members or group.pending)

    def subscribed_topics(self, group_id: str) -> set[str]:
        """The topics a consumer group's members subscribe to (read from their JoinGroup metadata, as
        Kafka reads it for OffsetDelete); empty for a group without members or of another protocol."""
        with self._lock:
            group = self._groups.get(group_id)
            if group is None or group.protocol_type != CONSUMER:
                return set()
            topics: set[str] = set()
            for member in group.members.values():
                for _, metadata in member.protocols[:1]:
                    try:
                        topics.update(decode_subscription(metadata).topics)
                    except ProtocolError:
                        continue  # not a subscription we can read: it protects nothing
            return topics

    def listed(self) -> dict[str, tuple[str, str]]:
        """group id → (protocol type, state) of every group with members here."""
        with self._lock:
            return {g.group_id: (g.protocol_type or CONSUMER, g.state.value) for g in self._groups.values()}

    # ------------------------------------------------------------------ timers and removal

    def tick(self) -> None:
        """Expire sessions, pending member ids and syncs; complete joins whose time is up."""
        with self._lock:
            now = self.clock()
            for group in list(self._groups.values()):
                for pending_id, expires in list(group.pending.items()):
                    if now > expires:
                        del group.pending[pending_id]
                        self._forget_if_idle(group)
                expired = [
                    m for m in group.members.values() if m.join is None and m.sync is None and now > m.alive_until
                ]
                if group.state == GroupState.COMPLETING_REBALANCE and now >= group.sync_deadline:
                    expired += [m for m in group.members.values() if m.sync is None and m not in expired]
                for member in expired:
                    logger.info(
                        "group %s: member %s expired (no heartbeat for %d ms)",
                        group.group_id, member.member_id, member.session_timeout_ms,
                    )  # fmt: skip
                    self._remove(group, member)
                if expired:
                    self._after_departure(group, now, f"{len(expired)} member(s) expired")
                self._maybe_complete_join(group, now)

    def _remove(self, group: Group, member: Member) -> None:
        self._answer_waits(member, ErrorCode.UNKNOWN_MEMBER_ID)
        group.members.pop(member.member_id, None)
        if member.group_instance_id is not None and group.static.get(member.group_instance_id) == member.member_id:
            del group.static[member.group_instance_id]
        if group.leader_id == member.member_id:
            group.leader_id = None

    def _after_departure(self, group: Group, now: float, reason: str) -> None:
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, now, reason)
        self._maybe_complete_join(group, now)
        self._forget_if_idle(group)

    def _forget_if_idle(self, group: Group) -> None:
        """An empty group holds nothing worth keeping (its offsets are in the store): forgetting it
        bounds memory however many group ids clients make up."""
        if group.state == GroupState.EMPTY and not group.members and not group.pending:
            self._groups.pop(group.group_id, None)

    def _answer_waits(self, member: Member, code: int) -> None:
        if member.join is not None:
            member.join.complete(_join_error(member.join_version, code, member.member_id))
            member.join = None
        if member.sync is not None:
            member.sync.complete(_sync_body(code))
            member.sync = None

    def _check_member(
        self, group: Group | None, group_id: str, member_id: str, instance_id: str | None, generation_id: int
    ) -> int:
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        if not self.coordinates(group_id):
            return ErrorCode.NOT_COORDINATOR
        if group is None or member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if instance_id is not None and group.static.get(instance_id) != member_id:
            return ErrorCode.FENCED_INSTANCE_ID
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE


def _join_error(version: int, code: int, member_id: str) -> Body:
    return {
        "error_code": code,
        "generation_id": -1,
        "protocol_type": None,
        "protocol_name": None if version >= _NULLABLE_PROTOCOL_VERSION else "",
        "leader": "",
        "member_id": member_id,
        "members": [],
    }


def _sync_body(code: int) -> Body:
    return {"error_code": code, "protocol_type": None, "protocol_name": None, "assignment": b""}


def _described(group_id: str, state: str, code: int) -> Body:
    return {
        "error_code": code,
        "error_message": None,
        "group_id": group_id,
        "group_state": state,
        "protocol_type": "",
        "protocol_data": "",
        "members": [],
    }
