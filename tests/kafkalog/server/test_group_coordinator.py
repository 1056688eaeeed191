"""The group coordinator's state machine, driven request by request with a hand-moved clock."""

from __future__ import annotations

from typing import Any

import pytest

from kafkalog.protocol import ErrorCode
from kafkalog.protocol.consumer_protocol import Subscription, encode_assignment, encode_subscription
from kafkalog.server.config import GroupSettings
from kafkalog.server.deferred import DeferredResponse
from kafkalog.server.groups import GroupCoordinator, GroupState

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def coordinator(clock: Clock, delay_ms: int = 0, **settings: Any) -> GroupCoordinator:
    return GroupCoordinator(GroupSettings(initial_rebalance_delay_ms=delay_ms, **settings), clock=clock)


def join(
    c: GroupCoordinator,
    member: str = "",
    *,
    version: int = 5,
    group: str = "g",
    session_ms: int = 10_000,
    rebalance_ms: int = 30_000,
    protocols: tuple[str, ...] = ("range",),
    topics: tuple[str, ...] = ("t",),
    instance: str | None = None,
    protocol_type: str = "consumer",
) -> Any:
    metadata = encode_subscription(Subscription(topics))
    body = {
        "group_id": group,
        "session_timeout_ms": session_ms,
        "rebalance_timeout_ms": rebalance_ms,
        "member_id": member,
        "group_instance_id": instance,
        "protocol_type": protocol_type,
        "protocols": [{"name": name, "metadata": metadata} for name in protocols],
    }
    return c.join_group(version, body, "client", "127.0.0.1")


def joined(answer: Any) -> dict[str, Any]:
    assert isinstance(answer, DeferredResponse), answer
    assert answer.body is not None, "the join is still waiting"
    return answer.body


def new_member(c: GroupCoordinator, **kwargs: Any) -> Any:
    """v4+: a first join gets a member id with MEMBER_ID_REQUIRED, the second waits."""
    first = join(c, **kwargs)
    assert first["error_code"] == ErrorCode.MEMBER_ID_REQUIRED
    return first["member_id"], join(c, first["member_id"], **kwargs)


def sync(c: GroupCoordinator, member: str, generation: int, assignments: dict[str, bytes] | None = None) -> Any:
    body = {
        "group_id": "g",
        "generation_id": generation,
        "member_id": member,
        "assignments": [{"member_id": m, "assignment": a} for m, a in (assignments or {}).items()],
    }
    return c.sync_group(3, body)


def heartbeat(c: GroupCoordinator, member: str, generation: int, instance: str | None = None) -> int:
    body = {"group_id": "g", "generation_id": generation, "member_id": member, "group_instance_id": instance}
    code: int = c.heartbeat(body)["error_code"]
    return code


def stable_group_of_two(c: GroupCoordinator) -> tuple[str, str, int]:
    a, wait_a = new_member(c)
    leader_answer = joined(wait_a)  # alone so far: generation 1 at once (no initial delay)
    assert leader_answer["generation_id"] == 1
    sync(c, a, 1, {a: encode_assignment([("t", 0)])})
    b, wait_b = new_member(c)  # a rebalance: waits for a
    assert wait_b.body is None
    assert heartbeat(c, a, 1) == ErrorCode.REBALANCE_IN_PROGRESS
    again = join(c, a)
    assert joined(again)["generation_id"] == joined(wait_b)["generation_id"] == 2
    assert joined(again)["leader"] == a
    assert {m["member_id"] for m in joined(again)["members"]} == {a, b}
    assert joined(wait_b)["members"] == []  # only the leader sees the members
    follower_sync = sync(c, b, 2)
    assert follower_sync.body is None  # waits for the leader's assignments
    sync(c, a, 2, {a: encode_assignment([("t", 0)]), b: encode_assignment([("t", 1)])})
    assert follower_sync.body["assignment"] == encode_assignment([("t", 1)])
    return a, b, 2


def test_members_join_get_a_generation_and_assignments(clock: Clock) -> None:
    c = coordinator(clock)
    a, b, generation = stable_group_of_two(c)
    assert heartbeat(c, a, generation) == heartbeat(c, b, generation) == ErrorCode.NONE
    described = c.describe("g", 5, has_offsets=False)
    assert described["group_state"] == "Stable" and described["protocol_data"] == "range"
    assert {m["member_id"] for m in described["members"]} == {a, b}
    assert c.listed() == {"g": ("consumer", "Stable")}


def test_an_old_generation_and_an_unknown_member_are_fenced(clock: Clock) -> None:
    c = coordinator(clock)
    a, _b, generation = stable_group_of_two(c)
    assert heartbeat(c, a, generation - 1) == ErrorCode.ILLEGAL_GENERATION
    assert heartbeat(c, "nobody", generation) == ErrorCode.UNKNOWN_MEMBER_ID
    assert c.commit_error("g", generation - 1, a, None) == ErrorCode.ILLEGAL_GENERATION
    assert c.commit_error("g", generation, "nobody", None) == ErrorCode.UNKNOWN_MEMBER_ID
    assert c.commit_error("g", generation, a, None) == ErrorCode.NONE
    assert c.commit_error("g", -1, "", None) == ErrorCode.UNKNOWN_MEMBER_ID  # the group has members
    assert c.commit_error("other", -1, "", None) == ErrorCode.NONE  # a group without members


def test_a_member_whose_session_expires_is_removed_and_the_group_rebalances(clock: Clock) -> None:
    c = coordinator(clock)
    a, b, generation = stable_group_of_two(c)
    clock.now += 6
    assert heartbeat(c, a, generation) == ErrorCode.NONE  # a stays alive, b goes silent
    clock.now += 5
    c.tick()
    assert heartbeat(c, b, generation) == ErrorCode.UNKNOWN_MEMBER_ID
    assert heartbeat(c, a, generation) == ErrorCode.REBALANCE_IN_PROGRESS
    answer = joined(join(c, a))
    assert answer["generation_id"] == generation + 1 and [m["member_id"] for m in answer["members"]] == [a]


def test_a_member_that_does_not_rejoin_in_time_is_dropped(clock: Clock) -> None:
    c = coordinator(clock)
    a, b, generation = stable_group_of_two(c)
    waiting = join(c, a)  # a rejoins (the leader rejoining starts a rebalance); b never does
    assert waiting.body is None
    clock.now += 29
    heartbeat(c, b, generation)  # heartbeats do not make up for the missing join
    c.tick()
    assert waiting.body is None
    clock.now += 2  # past the rebalance timeout
    c.tick()
    assert joined(waiting)["generation_id"] == generation + 1
    assert heartbeat(c, b, generation) == ErrorCode.UNKNOWN_MEMBER_ID


def test_leaving_rebalances_the_rest_and_the_last_one_empties_the_group(clock: Clock) -> None:
    c = coordinator(clock)
    a, b, generation = stable_group_of_two(c)
    left = c.leave_group(3, {"group_id": "g", "members": [{"member_id": b, "group_instance_id": None}]})
    assert left["members"][0]["error_code"] == ErrorCode.NONE
    assert heartbeat(c, a, generation) == ErrorCode.REBALANCE_IN_PROGRESS
    assert joined(join(c, a))["generation_id"] == generation + 1
    assert c.leave_group(0, {"group_id": "g", "member_id": a}) == {"error_code": ErrorCode.NONE}
    assert c.listed() == {}  # forgotten: nothing but offsets remains of an empty group
    assert c.leave_group(0, {"group_id": "g", "member_id": a}) == {"error_code": ErrorCode.UNKNOWN_MEMBER_ID}


def test_the_sync_times_out_when_the_leader_never_sends_assignments(clock: Clock) -> None:
    c = coordinator(clock)
    a, wait_a = new_member(c)
    generation = joined(wait_a)["generation_id"]
    clock.now += 31
    c.tick()  # a never synced: removed
    assert heartbeat(c, a, generation) == ErrorCode.UNKNOWN_MEMBER_ID


def test_static_member_rejoins_under_a_new_id_without_a_rebalance(clock: Clock) -> None:
    c = coordinator(clock)
    leader = joined(join(c, instance="i-0"))
    generation = leader["generation_id"]
    lead = leader["member_id"]
    sync(c, lead, generation, {lead: b""})
    follower_wait = join(c, instance="i-1")
    joined(join(c, lead, instance="i-0"))
    follower = joined(follower_wait)
    generation = follower["generation_id"]
    sync(c, lead, generation, {lead: b"", follower["member_id"]: encode_assignment([("t", 3)])})
    # the follower restarts: a new member id, the same instance id, the same assignment, no rebalance
    again = join(c, instance="i-1")
    assert isinstance(again, dict) and again["error_code"] == ErrorCode.NONE
    assert again["generation_id"] == generation and again["member_id"] != follower["member_id"]
    assert sync(c, again["member_id"], generation)["assignment"] == encode_assignment([("t", 3)])
    assert heartbeat(c, lead, generation) == ErrorCode.NONE  # nobody rebalanced
    assert heartbeat(c, follower["member_id"], generation) == ErrorCode.UNKNOWN_MEMBER_ID
    assert heartbeat(c, follower["member_id"], generation, "i-1") == ErrorCode.UNKNOWN_MEMBER_ID
    assert heartbeat(c, lead, generation, "i-1") == ErrorCode.FENCED_INSTANCE_ID


def test_the_first_rebalance_waits_for_more_members(clock: Clock) -> None:
    c = coordinator(clock, delay_ms=3000)
    _a, wait_a = new_member(c)
    assert wait_a.body is None
    clock.now += 2
    c.tick()
    _b, wait_b = new_member(c)  # arrives within the delay, which starts over
    clock.now += 2.5
    c.tick()
    assert wait_a.body is None
    clock.now += 1
    c.tick()
    assert joined(wait_a)["generation_id"] == joined(wait_b)["generation_id"] == 1
    assert len(joined(wait_a)["members"]) + len(joined(wait_b)["members"]) == 2


def test_the_protocol_every_member_supports_is_chosen_by_vote(clock: Clock) -> None:
    c = coordinator(clock, delay_ms=100)
    one = join(c, protocols=("cooperative-sticky", "range"), version=3)
    two = join(c, protocols=("range", "roundrobin"), version=3)
    three = join(c, protocols=("roundrobin", "range"), version=3)
    clock.now += 1
    c.tick()
    assert {joined(w)["protocol_name"] for w in (one, two, three)} == {"range"}


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"session_ms": 10}, ErrorCode.INVALID_SESSION_TIMEOUT),
        ({"group": ""}, ErrorCode.INVALID_GROUP_ID),
        ({"protocol_type": ""}, ErrorCode.INCONSISTENT_GROUP_PROTOCOL),
        ({"member": "never-given"}, ErrorCode.UNKNOWN_MEMBER_ID),
    ],
)
def test_bad_joins_are_refused_with_their_error(clock: Clock, kwargs: dict[str, Any], code: int) -> None:
    answer = join(coordinator(clock), **kwargs)
    assert answer["error_code"] == code and answer["generation_id"] == -1


def test_a_member_with_no_protocol_in_common_is_refused(clock: Clock) -> None:
    c = coordinator(clock)
    stable_group_of_two(c)
    assert join(c, protocols=("roundrobin",))["error_code"] == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert join(c, protocol_type="connect")["error_code"] == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_the_group_size_is_bounded(clock: Clock) -> None:
    c = coordinator(clock, max_size=2)
    new_member(c)
    new_member(c)
    assert join(c)["error_code"] == ErrorCode.GROUP_MAX_SIZE_REACHED


def test_member_ids_handed_out_but_never_used_expire(clock: Clock) -> None:
    c = coordinator(clock)
    assert join(c)["error_code"] == ErrorCode.MEMBER_ID_REQUIRED
    clock.now += 11
    c.tick()
    assert c.listed() == {}


def test_not_coordinating_a_group_says_so(clock: Clock) -> None:
    c = GroupCoordinator(GroupSettings(), coordinates=lambda group: False, clock=clock)
    assert join(c)["error_code"] == ErrorCode.NOT_COORDINATOR
    assert heartbeat(c, "m", 1) == ErrorCode.NOT_COORDINATOR
    assert c.describe("g", 5, has_offsets=False)["error_code"] == ErrorCode.NOT_COORDINATOR


def test_describing_unknown_and_offset_only_groups(clock: Clock) -> None:
    c = coordinator(clock)
    assert c.describe("g", 5, has_offsets=False)["group_state"] == "Dead"
    assert c.describe("g", 6, has_offsets=False)["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
    assert c.describe("g", 6, has_offsets=True)["group_state"] == GroupState.EMPTY.value


def test_stopping_answers_every_waiting_join(clock: Clock) -> None:
    c = coordinator(clock, delay_ms=3000)
    _, waiting = new_member(c)
    c.stop()
    assert joined(waiting)["error_code"] == ErrorCode.COORDINATOR_NOT_AVAILABLE
