"""A consumer group as its coordinator holds it: members, generation, state (Kafka's classic group).

    Empty ──join──▶ PreparingRebalance ──every member rejoined (or timeout)──▶ CompletingRebalance
      ▲                  ▲         │ nobody left                              │ the leader's SyncGroup
      └──────────────────┼─────────┘                                          ▼
                         └──── a member joins, leaves, changes, or its session expires ── Stable

Only data and the rules that need no clock or thread live here; kafkalog.server.groups.coordinator
drives the transitions. Invariants: ``static`` maps each group instance id to the one member that
holds it; a member awaits a join response only in PreparingRebalance, a sync response only in
CompletingRebalance; ``generation_id`` grows by one at each completed join.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import Enum

from kafkalog.server.deferred import DeferredResponse


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    """(name, metadata) in the member's order of preference."""
    alive_until: float
    """monotonic time after which the member is dead unless it heartbeats (or awaits a response)."""
    assignment: bytes = b""
    join: DeferredResponse | None = None
    sync: DeferredResponse | None = None
    join_version: int = 0

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def same_protocols(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols


@dataclass(eq=False)
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static: dict[str, str] = field(default_factory=dict)
    """group instance id → member id."""
    pending: dict[str, float] = field(default_factory=dict)
    """Member ids handed out with MEMBER_ID_REQUIRED, not yet joined with → monotonic expiry."""
    join_deadline: float = 0.0
    """PreparingRebalance: the join completes at this time even if members are missing."""
    initial_join_ends: float | None = None
    """The first rebalance of an empty group: the latest time the initial delay may extend to."""
    sync_deadline: float = 0.0
    """CompletingRebalance: members that have not synced by then are removed."""

    def candidate_protocols(self) -> set[str]:
        """The protocols every member supports."""
        names: set[str] | None = None
        for member in self.members.values():
            theirs = {name for name, _ in member.protocols}
            names = theirs if names is None else names & theirs
        return names or set()

    def accepts(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """Whether a member with these protocols may join (Kafka's INCONSISTENT_GROUP_PROTOCOL rule):
        the same protocol type, and some protocol in common with every member."""
        if not protocol_type or not protocols:
            return False
        if not self.members:
            return True
        if protocol_type != self.protocol_type:
            return False
        return bool(self.candidate_protocols() & {name for name, _ in protocols})

    def select_protocol(self) -> str:
        """The protocol of the next generation: each member votes for its most preferred candidate;
        most votes wins, ties going to the earliest in the leader's preference."""
        candidates = self.candidate_protocols()
        votes: Counter[str] = Counter()
        for member in self.members.values():
            votes[next(name for name, _ in member.protocols if name in candidates)] += 1
        leader = self.members.get(self.leader_id or "") or next(iter(self.members.values()))
        order = [name for name, _ in leader.protocols if name in candidates]
        return max(order, key=lambda name: (votes[name], -order.index(name)))

    def all_joined(self) -> bool:
        return not self.pending and all(member.join is not None for member in self.members.values())

    def max_rebalance_timeout_ms(self) -> int:
        return max((member.rebalance_timeout_ms for member in self.members.values()), default=0)
