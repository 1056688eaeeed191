"""The high-level consumer: a group of members on a real ZooKeeper and a real kafkalog broker
registered in it. A consumption log proves no gaps and no partition handed out by two members at
once; a TCP proxy between a member and ZooKeeper makes its session SUSPENDED or LOST."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkalog.client import Admin, Producer
from kafkalog.client.group_consumer import GroupConsumer
from kafkalog.errors import ClientError
from kafkalog.registry.offsets import fetch_offset
from tests.support.kafkalog import BrokerProcess
from tests.support.proxy import TcpProxy

PARTITIONS = 12


@pytest.fixture
def cluster(tmp_path: Path, zk_factory: Callable[..., Any]) -> Iterator[tuple[BrokerProcess, Any]]:
    connect = zk_factory.connect  # type: ignore[attr-defined]
    with BrokerProcess(tmp_path / "broker", zookeeper=connect, zookeeper_session_timeout_ms=6000) as broker:
        zk = zk_factory()
        with Admin(broker.bootstrap) as admin:
            admin.create_topic("events", PARTITIONS)
        yield broker, zk


def produce(broker: BrokerProcess, count: int, first: int = 0) -> None:
    with Producer(broker.bootstrap) as producer:
        for i in range(first, first + count):
            producer.send("events", str(i).encode(), partition=i % PARTITIONS)
        producer.flush()


class Member:
    """One group member consuming its stream in a thread into a shared log."""

    def __init__(self, zk_factory: Callable[..., Any], name: str, log: list[tuple[str, int, int, float]]) -> None:
        self.consumer = GroupConsumer(
            zk_factory(),
            "g",
            consumer_id=name,
            auto_offset_reset="smallest",
            auto_commit_interval_s=0.5,
            stream_timeout_s=None,
        )
        (self.stream,) = self.consumer.create_message_streams({"events": 1})["events"]
        self.name = name
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.log = log
        self.thread.start()

    def _run(self) -> None:
        for item in self.stream:
            self.log.append((self.name, item.partition, item.offset, time.monotonic()))

    def close(self) -> None:
        self.consumer.close()
        self.thread.join(10)


def wait_for(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def check(log: list[tuple[str, int, int, float]], total: int) -> int:
    """No gaps: every produced message was handed out; returns the number of duplicates."""
    seen: dict[tuple[int, int], list[str]] = {}
    for name, partition, offset, _ in log:
        seen.setdefault((partition, offset), []).append(name)
    per_partition = total // PARTITIONS
    assert sorted(seen) == [(p, o) for p in range(PARTITIONS) for o in range(per_partition)]
    # one owner at a time: in time order, a partition's messages come from one member, then
    # another, and never back to an earlier owner
    for partition in range(PARTITIONS):
        owners = [name for name, p, _, _ in sorted(log, key=lambda e: e[3]) if p == partition]
        runs = [name for i, name in enumerate(owners) if i == 0 or owners[i - 1] != name]
        assert len(runs) == len(set(runs)), f"partition {partition} went back and forth: {runs}"
    return sum(len(v) - 1 for v in seen.values())


def test_three_members_share_twelve_partitions_with_joins_and_leaves(
    cluster: tuple[BrokerProcess, Any], zk_factory: Callable[..., Any]
) -> None:
    broker, zk = cluster
    log: list[tuple[str, int, int, float]] = []
    produce(broker, 1200)
    group = [Member(zk_factory, f"c{i}", log) for i in range(3)]
    wait_for(lambda: len({(p, o) for _, p, o, _ in log}) == 1200)
    wait_for(
        lambda: sorted(tp for m in group for tp in m.consumer.owned()) == [("events", p) for p in range(PARTITIONS)]
    )
    assert all(len(m.consumer.owned()) == 4 for m in group)

    leaving = group.pop(0)  # a clean leave: commits, releases
    leaving.close()
    group.append(Member(zk_factory, "c3", log))  # and a new member
    produce(broker, 1200, first=1200)
    wait_for(lambda: len({(p, o) for _, p, o, _ in log}) == 2400)
    duplicates = check(log, 2400)
    assert duplicates == 0, "clean handovers resume exactly at the committed offset"
    wait_for(
        lambda: sorted(tp for m in group for tp in m.consumer.owned()) == [("events", p) for p in range(PARTITIONS)]
    )
    for m in group:
        m.close()
    # after clean shutdowns the committed offsets are the ends of the partitions
    assert [fetch_offset(zk, "g", "events", p) for p in range(PARTITIONS)] == [200] * PARTITIONS


def test_a_killed_member_costs_duplicates_within_its_uncommitted_window_never_gaps(
    cluster: tuple[BrokerProcess, Any], zk_factory: Callable[..., Any]
) -> None:
    broker, zk = cluster
    log: list[tuple[str, int, int, float]] = []
    produce(broker, 600)
    group = [Member(zk_factory, f"c{i}", log) for i in range(3)]
    wait_for(lambda: len({(p, o) for _, p, o, _ in log}) == 600)
    victim = group.pop(0)
    mine = victim.consumer.owned()
    wait_for(lambda: all(fetch_offset(zk, "g", "events", p) == 50 for _, p in mine))  # an automatic commit
    victim.consumer.auto_commit_interval_s = None  # nothing more is committed: what it hands out now repeats
    produce(broker, 600, first=600)
    wait_for(lambda: len({(p, o) for _, p, o, _ in log}) == 1200)
    handed_out_uncommitted = sum(
        1
        for name, p, o, _ in log
        if name == victim.name and ("events", p) in mine and o >= (fetch_offset(zk, "g", "events", p) or 0)
    )
    victim.consumer._halt()  # killed: no commit, no release; its session ends with its process
    victim.consumer._membership.zk.stop()  # type: ignore[union-attr]
    victim.thread.join(10)
    wait_for(
        lambda: sorted(tp for m in group for tp in m.consumer.owned()) == [("events", p) for p in range(PARTITIONS)]
    )
    wait_for(lambda: len(log) >= 1200 + handed_out_uncommitted)
    time.sleep(1.0)
    duplicates = check(log, 1200)
    assert 0 < duplicates <= handed_out_uncommitted
    for m in group:
        m.close()


def test_a_filter_picks_up_matching_topics_created_later(
    cluster: tuple[BrokerProcess, Any], zk_factory: Callable[..., Any]
) -> None:
    broker, _ = cluster
    with Admin(broker.bootstrap) as admin:
        admin.create_topic("dc.east", 2)
        admin.create_topic("other", 1)
    consumer = GroupConsumer(zk_factory(), "filtered", auto_offset_reset="smallest", stream_timeout_s=None)
    (stream,) = consumer.create_message_streams_by_filter(whitelist=r"dc\..*")
    seen: list[tuple[str, bytes | None]] = []
    reader = threading.Thread(target=lambda: seen.extend((m.topic, m.value) for m in stream), daemon=True)
    reader.start()
    try:
        with Producer(broker.bootstrap) as producer:
            for i in range(10):
                producer.send("dc.east", f"e{i}".encode(), partition=i % 2)
                producer.send("other", f"o{i}".encode())
            producer.flush()
        wait_for(lambda: len(seen) == 10)
        with Admin(broker.bootstrap) as admin:  # a new data center: no restart, no configuration
            admin.create_topic("dc.west", 3)
        with Producer(broker.bootstrap) as producer:
            for i in range(9):
                producer.send("dc.west", f"w{i}".encode(), partition=i % 3)
            producer.flush()
        wait_for(lambda: len(seen) == 19)
        time.sleep(0.5)
        assert sorted(seen) == sorted([("dc.east", f"e{i}".encode()) for i in range(10)]) + sorted(
            [("dc.west", f"w{i}".encode()) for i in range(9)]
        )
        assert sorted(consumer.owned()) == [("dc.east", 0), ("dc.east", 1)] + [("dc.west", p) for p in range(3)]
    finally:
        consumer.close()
        reader.join(10)


def test_round_robin_spreads_every_partition_and_refuses_different_subscriptions(
    cluster: tuple[BrokerProcess, Any], zk_factory: Callable[..., Any]
) -> None:
    broker, _ = cluster
    with Admin(broker.bootstrap) as admin:
        admin.create_topic("t0", 3)
        admin.create_topic("t1", 3)
    members = [
        GroupConsumer(zk_factory(), "rr", consumer_id=f"c{i}", assignor="roundrobin", auto_offset_reset="smallest")
        for i in range(2)
    ]
    try:
        for m in members:
            m.create_message_streams({"t0": 1, "t1": 1})
        everything = [(t, p) for t in ("t0", "t1") for p in range(3)]
        wait_for(lambda: sorted(tp for m in members for tp in m.owned()) == everything)
        assert [len(m.owned()) for m in members] == [3, 3]
        odd = GroupConsumer(zk_factory(), "rr", consumer_id="c2", assignor="roundrobin")
        try:
            odd.create_message_streams({"t0": 1})  # subscribes differently: the assignor refuses the group
            wait_for(lambda: odd.last_error is not None)
            assert "roundrobin" in odd.last_error or "subscri" in odd.last_error  # type: ignore[operator]
            assert odd.owned() == []
            # the others keep what they own rather than hand out half an assignment
            assert sorted(tp for m in members for tp in m.owned()) == everything
        finally:
            odd.close()
        wait_for(lambda: all(m.last_error is None for m in members) and len(members[0].owned()) == 3)
    finally:
        for m in members:
            m.close()


def zookeeper_proxy(zk_factory: Callable[..., Any]) -> TcpProxy:
    host, port = zk_factory.connect.split("/")[0].split(":")  # type: ignore[attr-defined]
    return TcpProxy(host, int(port))


def _proxied(zk_factory: Callable[..., Any], proxy: TcpProxy, session_s: float) -> Any:
    from kazoo.client import KazooClient

    chroot = zk_factory.connect[zk_factory.connect.index("/") :]  # type: ignore[attr-defined]
    client = KazooClient(hosts=f"{proxy.address}{chroot}", timeout=session_s)
    client.start(timeout=15)
    return client


def test_a_suspended_member_hands_out_and_commits_nothing_until_it_reconnects(
    cluster: tuple[BrokerProcess, Any], zk_factory: Callable[..., Any]
) -> None:
    broker, zk = cluster
    proxy = zookeeper_proxy(zk_factory)
    client = _proxied(zk_factory, proxy, session_s=8.0)
    log: list[tuple[str, int, int, float]] = []
    member = Member(lambda: client, "a", log)
    try:
        produce(broker, 120)
        wait_for(lambda: len(log) == 120)
        wait_for(lambda: all(fetch_offset(zk, "g", "events", p) == 10 for p in range(PARTITIONS)))
        proxy.cut()  # ZooKeeper unreachable, the session alive: SUSPENDED
        wait_for(member.consumer._suspended.is_set, timeout=10)
        produce(broker, 120, first=120)
        time.sleep(1.5)
        assert len(log) == 120, "nothing is handed out while suspended"
        with pytest.raises(ClientError, match="unreachable"):
            member.consumer.commit_offsets()
        proxy.restore()
        wait_for(lambda: len(log) == 240)
        assert check(log, 240) == 0, "the same session resumes where it was: no duplicates"
        assert sorted(member.consumer.owned()) == [("events", p) for p in range(PARTITIONS)]
    finally:
        member.close()
        client.stop()
        client.close()
        proxy.close()


def test_a_member_whose_session_expired_drops_everything_and_rejoins(
    cluster: tuple[BrokerProcess, Any], zk_factory: Callable[..., Any]
) -> None:
    broker, _ = cluster
    proxy = zookeeper_proxy(zk_factory)
    client = _proxied(zk_factory, proxy, session_s=2.0)
    log: list[tuple[str, int, int, float]] = []
    lost = Member(lambda: client, "a", log)
    other = Member(zk_factory, "b", log)
    try:
        produce(broker, 120)
        wait_for(lambda: len({(p, o) for _, p, o, _ in log}) == 120)
        wait_for(lambda: len(lost.consumer.owned()) == 6 and len(other.consumer.owned()) == 6)
        handed_out_by_lost = sum(1 for name, *_ in log if name == "a")
        proxy.cut()
        # ZooKeeper expires the session: the other member takes every partition
        wait_for(lambda: len(other.consumer.owned()) == PARTITIONS, timeout=30)
        produce(broker, 120, first=120)
        wait_for(lambda: len({(p, o) for _, p, o, _ in log}) == 240)
        assert all(name == "b" for name, _, o, _ in log if o >= 10), "the cut-off member handed out nothing"
        proxy.restore()  # LOST: a new session, a new membership, a new share
        wait_for(lambda: len(lost.consumer.owned()) == 6 and len(other.consumer.owned()) == 6, timeout=30)
        produce(broker, 120, first=240)
        wait_for(lambda: len({(p, o) for _, p, o, _ in log}) == 360)
        time.sleep(1.0)
        seen: dict[tuple[int, int], int] = {}
        for _, p, o, _ in log:
            seen[(p, o)] = seen.get((p, o), 0) + 1
        assert sorted(seen) == [(p, o) for p in range(PARTITIONS) for o in range(30)], "no gaps"
        duplicates = sum(n - 1 for n in seen.values())
        assert duplicates <= handed_out_by_lost, "duplicates only within what the lost member had not committed"
    finally:
        lost.close()
        other.close()
        client.stop()
        client.close()
        proxy.close()


def test_a_new_group_with_largest_starts_at_the_end(
    cluster: tuple[BrokerProcess, Any], zk_factory: Callable[..., Any]
) -> None:
    broker, zk = cluster
    produce(broker, 120)  # before the group exists: not for it
    consumer = GroupConsumer(zk_factory(), "latecomers", auto_offset_reset="largest", auto_commit_interval_s=None)
    (stream,) = consumer.create_message_streams({"events": 1})["events"]
    try:
        wait_for(lambda: len(consumer.owned()) == PARTITIONS)
        wait_for(lambda: all(p in consumer._positions for p in consumer.owned()))
        produce(broker, 120, first=120)
        got = []
        for message in stream:
            got.append((message.partition, message.offset))
            if len(got) == 120:
                break
        assert sorted(got) == [(p, o) for p in range(PARTITIONS) for o in range(10, 20)]
    finally:
        consumer.close()
    assert [fetch_offset(zk, "latecomers", "events", p) for p in range(PARTITIONS)] == [20] * PARTITIONS


def test_a_filter_that_is_not_a_regular_expression_names_itself(zk_factory: Callable[..., Any]) -> None:
    consumer = GroupConsumer(zk_factory(), "g", consumer_id="filtered")
    try:
        with pytest.raises(ClientError, match=r"^whitelist '\(events' is not a regular expression: missing \)"):
            consumer.create_message_streams_by_filter(whitelist="(events")
        with pytest.raises(ClientError, match=r"^blacklist '\[' is not a regular expression"):
            consumer.create_message_streams_by_filter(blacklist="[")
    finally:
        consumer.close()
