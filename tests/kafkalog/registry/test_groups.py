"""Group membership, ownership and the rebalance of seed 001, with several members on a real
ZooKeeper (each member its own session, as separate processes would have)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from kafkalog.errors import RegistryError
from kafkalog.registry.groups import RebalanceError, Rebalancer, members, owners, register_member
from kafkalog.registry.topics import create_topic, spread

GROUP = "g"


def join(zk_factory: Callable[..., Any], name: str, **kwargs: Any) -> Rebalancer:
    client = zk_factory()
    register_member(client, GROUP, name, {"events": 1})
    return Rebalancer(client, GROUP, name, **kwargs)


def rebalance_all(rebalancers: list[Rebalancer]) -> None:
    errors: list[BaseException] = []

    def go(r: Rebalancer) -> None:
        try:
            r.rebalance()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=go, args=(r,)) for r in rebalancers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []


def check_one_owner_each(zk: Any, rebalancers: list[Rebalancer], partitions: int) -> None:
    held = owners(zk, GROUP)
    assert sorted(held) == [("events", p) for p in range(partitions)]
    mine = {tp: str(t) for r in rebalancers for tp, t in r.owned.items()}
    assert mine == held  # what each member believes is what ZooKeeper says
    counts = sorted(len(r.owned) for r in rebalancers)
    assert counts[-1] - counts[0] <= 1


def test_three_members_split_twelve_partitions_and_follow_joins_and_leaves(zk_factory: Callable[..., Any]) -> None:
    zk = zk_factory()
    create_topic(zk, "events", spread(12, [1]))
    group = [join(zk_factory, f"c{i}") for i in range(3)]
    rebalance_all(group)
    check_one_owner_each(zk, group, 12)
    assert [sorted(p for _, p in r.owned) for r in group] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]

    group.append(join(zk_factory, "c3"))  # a member joins: everyone rebalances
    rebalance_all(group)
    check_one_owner_each(zk, group, 12)

    leaving = group.pop(1)  # a member dies: its session ends, its nodes vanish
    leaving.client.stop()
    assert sorted(members(zk, GROUP)) == ["c0", "c2", "c3"]
    rebalance_all(group)
    check_one_owner_each(zk, group, 12)


def test_a_claim_waits_for_the_previous_owner_to_release(zk_factory: Callable[..., Any]) -> None:
    zk = zk_factory()
    create_topic(zk, "events", spread(4, [1]))
    first = join(zk_factory, "a")
    first.rebalance()
    assert len(first.owned) == 4
    second = join(zk_factory, "b")
    took: list[float] = []

    def claim() -> None:
        started = time.monotonic()
        second.rebalance()
        took.append(time.monotonic() - started)

    thread = threading.Thread(target=claim)
    thread.start()
    time.sleep(1.0)  # b is waiting for a's partitions
    assert second.owned == {} or len(second.owned) < 2
    first.rebalance()
    thread.join(30)
    assert took and took[0] >= 0.9
    check_one_owner_each(zk, [first, second], 4)


def test_a_previous_owner_that_never_lets_go_fails_the_rebalance_without_a_half_assignment(
    zk_factory: Callable[..., Any],
) -> None:
    zk = zk_factory()
    create_topic(zk, "events", spread(4, [1]))
    stubborn = join(zk_factory, "a")
    stubborn.rebalance()
    late = join(zk_factory, "b", claim_timeout_s=0.3, max_attempts=2)
    with pytest.raises(
        RebalanceError, match=r"group g: b could not rebalance after 2 attempts: events-2 is still owned by a-0"
    ):
        late.rebalance()
    assert late.owned == {}
    assert set(owners(zk, GROUP).values()) == {"a-0"}


def test_releases_are_announced_and_a_member_id_is_unique(zk_factory: Callable[..., Any]) -> None:
    zk = zk_factory()
    create_topic(zk, "events", spread(2, [1]))
    released: list[list[tuple[str, int]]] = []
    first = join(zk_factory, "a", on_release=released.append)
    first.rebalance()
    second = join(zk_factory, "b")
    first.rebalance()
    second.rebalance()
    assert released == [[("events", 1)]]
    with pytest.raises(RegistryError, match="consumer id a is already a live member of group g"):
        register_member(zk_factory(), GROUP, "a", {"events": 1})


class FailingCreates:
    """A kazoo client whose ``failing``-th owner-node create raises ConnectionLoss (the connection
    dropping midway through a rebalance); everything else goes to the real client."""

    def __init__(self, client: Any, failing: int) -> None:
        self._client = client
        self._failing = failing
        self.creates = 0

    def create(self, path: str, *args: Any, **kwargs: Any) -> Any:
        from kazoo.exceptions import ConnectionLoss

        if "/owners/" in path:
            self.creates += 1
            if self.creates == self._failing:
                raise ConnectionLoss("injected")
        return self._client.create(path, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_a_rebalance_broken_midway_is_finished_by_the_retry_with_one_owner_each(
    zk_factory: Callable[..., Any],
) -> None:
    from kazoo.exceptions import ConnectionLoss

    zk = zk_factory()
    create_topic(zk, "events", spread(12, [1]))
    steady = join(zk_factory, "c0")
    flaky_client = FailingCreates(zk_factory(), failing=3)
    register_member(flaky_client, GROUP, "c1", {"events": 1})
    flaky = Rebalancer(flaky_client, GROUP, "c1")
    steady.rebalance()
    with pytest.raises(ConnectionLoss):
        flaky.rebalance()  # two partitions claimed, the third create failed
    assert len(flaky.owned) == 2
    steady.rebalance()  # meanwhile the other member gives up its share
    flaky.rebalance()  # the retry (the group consumer's coordinator retries after an error)
    check_one_owner_each(zk, [steady, flaky], 12)
    assert sorted(p for _, p in flaky.owned) == [6, 7, 8, 9, 10, 11]
