"""The high-level consumer: a group of members on a real ZooKeeper and a real kafkalog broker
(registered in ZooKeeper by the test until the broker does it itself). A consumption log proves no
gaps and no partition handed out by two members at once."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkalog.client import Admin, Producer
from kafkalog.client.group_consumer import GroupConsumer
from kafkalog.registry.brokers import BrokerInfo, BrokerRegistration
from kafkalog.registry.offsets import fetch_offset
from kafkalog.registry.topics import create_topic, spread
from tests.brokers import BrokerProcess

PARTITIONS = 12


@pytest.fixture
def cluster(tmp_path: Path, zk_factory: Callable[..., Any]) -> Iterator[tuple[BrokerProcess, Any]]:
    with BrokerProcess(tmp_path / "broker") as broker:
        zk = zk_factory()
        BrokerRegistration(zk, BrokerInfo(0, "127.0.0.1", broker.port)).register()
        with Admin(broker.bootstrap) as admin:
            admin.create_topic("events", PARTITIONS)
        create_topic(zk, "events", spread(PARTITIONS, [0]))
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
    victim.consumer.zk.stop()
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
