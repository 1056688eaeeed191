"""Consumer group membership and partition ownership in ZooKeeper, and one member's rebalance.

Paths (seeds: 使用者 ID 的注册, 分区拥有者注册表):
- ``/consumers/<group>/ids/<consumer id>`` → ``{"topic": streams, ...}`` (ephemeral): who is in.
- ``/consumers/<group>/owners/<topic>/<partition>`` → ``<consumer id>-<stream>`` (ephemeral): who
  consumes a partition right now. A member consumes a partition only while it holds this node.

The rebalance (seeds: 使用者重新负载均衡的算法): every member computes the same assignment from
the same registry data (assign.py), releases the partitions it owns that are no longer its own,
and claims the new ones. A claim can meet the previous owner's node, still there until that member
has rebalanced too: it is retried with back-off for a bounded time; a rebalance that cannot claim
everything releases what it claimed in that attempt and starts over, and after ``max_attempts``
fails with RebalanceError (never a silent half-assignment).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkalog.errors import AssignmentError, RegistryError
from kafkalog.registry.assign import ASSIGNORS, ThreadId
from kafkalog.registry.topics import read_topic
from kafkalog.retry import Backoff
from kafkalog.topics import TopicPartition


class RebalanceError(RegistryError):
    """A member could not take its partitions after every attempt (names the group and why)."""


def ids_path(group: str) -> str:
    return f"/consumers/{group}/ids"


def owner_path(group: str, topic: str, partition: int) -> str:
    return f"/consumers/{group}/owners/{topic}/{partition}"


def register_member(client: Any, group: str, consumer_id: str, subscription: Mapping[str, int]) -> None:
    """Join ``group`` (ephemeral); joining again on the same session updates the subscription."""
    from kazoo.exceptions import NodeExistsError  # noqa: PLC0415 - kazoo only where ZooKeeper is used

    value = json.dumps(dict(sorted(subscription.items()))).encode()
    path = f"{ids_path(group)}/{consumer_id}"
    try:
        client.create(path, value, ephemeral=True, makepath=True)
    except NodeExistsError:
        _, stat = client.get(path)
        if stat.ephemeralOwner != client.client_id[0]:
            raise RegistryError(
                f"consumer id {consumer_id} is already a live member of group {group} ({path})"
            ) from None
        client.set(path, value)


def members(client: Any, group: str) -> dict[str, dict[str, int]]:
    """consumer id → subscription, of the live members."""
    from kazoo.exceptions import NoNodeError  # noqa: PLC0415

    try:
        children = client.get_children(ids_path(group))
    except NoNodeError:
        return {}
    out = {}
    for child in sorted(children):
        try:
            raw, _ = client.get(f"{ids_path(group)}/{child}")
        except NoNodeError:
            continue  # left while we were reading
        try:
            out[child] = {str(t): int(n) for t, n in json.loads(raw).items()}
        except (ValueError, AttributeError, TypeError) as exc:
            raise RegistryError(f"{ids_path(group)}/{child}: not a subscription: {raw[:200]!r}") from exc
    return out


def owners(client: Any, group: str) -> dict[TopicPartition, str]:
    """(topic, partition) → owner thread (as text), of the partitions currently owned."""
    from kazoo.exceptions import NoNodeError  # noqa: PLC0415

    base = f"/consumers/{group}/owners"
    out: dict[TopicPartition, str] = {}
    try:
        topics = client.get_children(base)
    except NoNodeError:
        return out
    for topic in topics:
        try:
            partitions = client.get_children(f"{base}/{topic}")
        except NoNodeError:
            continue
        for partition in partitions:
            try:
                raw, _ = client.get(f"{base}/{topic}/{partition}")
            except NoNodeError:
                continue
            out[(topic, int(partition))] = raw.decode()
    return dict(sorted(out.items()))


@dataclass
class Rebalancer:
    """One member's side of the rebalance: ``rebalance()`` makes ``owned`` this member's share."""

    client: Any
    group: str
    consumer_id: str
    assignor: str = "range"
    claim_timeout_s: float = 10.0
    """How long one claim waits for the previous owner to release the partition."""
    max_attempts: int = 4
    owned: dict[TopicPartition, ThreadId] = field(default_factory=dict)
    on_release: Callable[[list[TopicPartition]], None] | None = None
    """Called before partitions are released (stop fetching, commit their offsets)."""

    def assignment(self) -> dict[TopicPartition, ThreadId]:
        """This member's share of the current group (the same computation every member makes)."""
        if self.assignor not in ASSIGNORS:
            raise AssignmentError(f"unknown assignor {self.assignor!r} (known: {', '.join(ASSIGNORS)})")
        group = members(self.client, self.group)
        if self.consumer_id not in group:
            raise RebalanceError(f"{self.consumer_id} is not a member of group {self.group}: register first")
        topics = {t for subscription in group.values() for t in subscription}
        partitions = {t: sorted((read_topic(self.client, t) or {}).keys()) for t in topics}
        everything = ASSIGNORS[self.assignor](group, partitions)
        return {tp: thread for tp, thread in everything.items() if thread.consumer == self.consumer_id}

    def rebalance(self) -> dict[TopicPartition, ThreadId]:
        backoff = Backoff(first=0.2, cap=1.0, attempts=self.max_attempts)
        while True:
            mine = self.assignment()
            self.release([tp for tp in self.owned if self.owned[tp] != mine.get(tp)])
            try:
                self._claim_all(mine)
            except RebalanceError as exc:
                self.release(list(self.owned))  # never a half-assignment: start over
                if not backoff.wait():
                    raise RebalanceError(
                        f"group {self.group}: {self.consumer_id} could not rebalance after {backoff.made} attempts:"
                        f" {exc}"
                    ) from exc
                continue
            return dict(self.owned)

    def _claim_all(self, mine: dict[TopicPartition, ThreadId]) -> None:
        from kazoo.exceptions import NodeExistsError, NoNodeError  # noqa: PLC0415

        for (topic, partition), thread in sorted(mine.items()):
            if self.owned.get((topic, partition)) == thread:
                continue
            path = owner_path(self.group, topic, partition)
            backoff = Backoff(first=0.05, cap=0.5, budget_s=self.claim_timeout_s)
            while True:
                try:
                    self.client.create(path, str(thread).encode(), ephemeral=True, makepath=True)
                    break
                except NodeExistsError:
                    try:
                        raw, stat = self.client.get(path)
                    except NoNodeError:
                        continue  # released between the two calls
                    if stat.ephemeralOwner == self.client.client_id[0]:
                        self.client.set(path, str(thread).encode())  # ours from an earlier attempt
                        break
                    if not backoff.wait():
                        raise RebalanceError(
                            f"{topic}-{partition} is still owned by {raw.decode()} after {self.claim_timeout_s:g} s"
                        ) from None
            self.owned[(topic, partition)] = thread

    def release(self, partitions: list[TopicPartition]) -> None:
        """Give up ``partitions`` (deleting only owner nodes this session holds)."""
        from kazoo.exceptions import NoNodeError  # noqa: PLC0415

        if not partitions:
            return
        if self.on_release is not None:
            self.on_release(sorted(partitions))
        for topic, partition in partitions:
            path = owner_path(self.group, topic, partition)
            try:
                _, stat = self.client.get(path)
                if stat.ephemeralOwner == self.client.client_id[0]:
                    self.client.delete(path, version=stat.version)
            except NoNodeError:
                pass
            self.owned.pop((topic, partition), None)
