"""Our GroupConsumer through the brokers' group protocol, against a kafkalog broker and against
Apache Kafka 4.x (no ZooKeeper there): members share the partitions, each message is handed out
once in a clean run, a killed member's partitions are taken over after its session timeout with
duplicates only in its uncommitted window, and a static member restarts without a rebalance. On
kafkalog, the membership re-forms after the broker restarts."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kafkalog.client import Admin, Producer
from kafkalog.client.group_consumer import GroupConsumer
from tests.support.kafka4 import Kafka4Process
from tests.support.kafkalog import BrokerProcess
from tests.support.ports import free_port

pytestmark = pytest.mark.integration

PARTITIONS = 6
SESSION_S = 6.0
"""Kafka 4.x's minimum session timeout (group.min.session.timeout.ms)."""
_names = itertools.count()


@pytest.fixture(scope="module")
def kafkalog_groups(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    root = tmp_path_factory.mktemp("kafkalog-groups")
    with BrokerProcess(root / "data", groups={"initial_rebalance_delay_ms": 0}) as running:
        yield running


@pytest.fixture(params=["kafkalog", "kafka4"])
def bootstrap(request: pytest.FixtureRequest) -> str:
    broker: BrokerProcess | Kafka4Process = request.getfixturevalue(
        "kafkalog_groups" if request.param == "kafkalog" else "kafka4"
    )
    return broker.bootstrap


def topic_with(bootstrap: str, count: int) -> tuple[str, list[tuple[int, int]]]:
    """A new topic of PARTITIONS partitions holding ``count`` messages; their (partition, offset)s."""
    topic = f"members-{next(_names)}-{time.monotonic_ns()}"
    with Admin(bootstrap) as admin:
        admin.create_topic(topic, PARTITIONS)
    return topic, produce(bootstrap, topic, range(count))


def produce(bootstrap: str, topic: str, numbers: range) -> list[tuple[int, int]]:
    with Producer(bootstrap, linger_ms=5) as producer:
        futures = [producer.send(topic, b"%d" % i, partition=i % PARTITIONS) for i in numbers]
        producer.flush()
        return [(f.result().partition, f.result().offset) for f in futures]


@dataclass
class Member:
    """A GroupConsumer consuming in a thread, recording what it was handed."""

    consumer: GroupConsumer
    got: list[tuple[int, int]] = field(default_factory=list)
    thread: threading.Thread | None = None

    def run(self, topic: str) -> Member:
        (stream,) = self.consumer.create_message_streams({topic: 1})[topic]

        def consume() -> None:
            for message in stream:
                self.got.append((message.partition, message.offset))

        self.thread = threading.Thread(target=consume, daemon=True)
        self.thread.start()
        return self


def member(bootstrap: str, group: str, **options: object) -> GroupConsumer:
    settings: dict[str, object] = {
        "auto_offset_reset": "smallest",
        "auto_commit_interval_s": 0.5,
        "session_timeout_s": SESSION_S,
        "heartbeat_interval_s": 0.5,
        "stream_timeout_s": 60,
        **options,
    }
    return GroupConsumer(group=group, bootstrap=bootstrap, **settings)  # type: ignore[arg-type]


def wait_until(condition: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def test_three_members_share_the_partitions_and_each_message_is_handed_out_once(bootstrap: str) -> None:
    topic, written = topic_with(bootstrap, 1200)
    group = f"share-{topic}"
    members: list[Member] = []
    overlaps: list[str] = []
    sampling = threading.Event()

    def sample_ownership() -> None:  # no partition is ever owned by two members at once
        while not sampling.is_set():
            owned = [set(m.consumer.owned()) for m in members]
            for a, b in itertools.combinations(range(len(owned)), 2):
                if owned[a] & owned[b]:
                    overlaps.append(f"members {a} and {b} both own {sorted(owned[a] & owned[b])}")
            time.sleep(0.02)

    sampler = threading.Thread(target=sample_ownership, daemon=True)
    sampler.start()
    try:
        for _ in range(3):  # joining one by one: every join rebalances the members consuming already
            members.append(Member(member(bootstrap, group)).run(topic))
            time.sleep(1.0)
        more = produce(bootstrap, topic, range(1200, 1500))
        wait_until(lambda: sum(len(m.got) for m in members) >= len(written) + len(more), 60, "every message")
        wait_until(lambda: all(len(m.consumer.owned()) == 2 for m in members), 30, "two partitions each")
    finally:
        sampling.set()
        sampler.join()
        for m in members:
            m.consumer.close()
    handed_out = sorted(pair for m in members for pair in m.got)
    assert handed_out == sorted(written + more)  # nothing lost, nothing twice
    assert not overlaps
    assert all(m.consumer.rebalances >= 1 for m in members)


def test_a_killed_members_partitions_are_taken_over_after_its_session(bootstrap: str) -> None:
    topic, written = topic_with(bootstrap, 600)
    group = f"kill-{topic}"
    survivor = Member(member(bootstrap, group)).run(topic)
    victim = Member(member(bootstrap, group)).run(topic)
    try:
        wait_until(lambda: len(victim.consumer.owned()) == PARTITIONS // 2, 30, "the victim owning its share")
        wait_until(lambda: len(survivor.got) + len(victim.got) >= len(written), 30, "the first messages")
        time.sleep(1.0)  # an automatic commit or two
        # a settled group (on a busy machine a late heartbeat can start another rebalance): the victim
        # owns half, the survivor the other half, so "taken over" below means the survivor gained them
        wait_until(
            lambda: len(victim.consumer.owned()) == len(survivor.consumer.owned()) == PARTITIONS // 2,
            30,
            "each member owning half",
        )
        victims_partitions = set(victim.consumer.owned())
        assert len(victims_partitions) == PARTITIONS // 2 and not victims_partitions & set(survivor.consumer.owned())
        committed = dict(victim.consumer._committed)
        killed_at = time.monotonic()
        victim.consumer._halt()  # killed: no commit, no LeaveGroup, no more heartbeats
        victim.consumer._membership.close()
        more = produce(bootstrap, topic, range(600, 900))
        wait_until(
            lambda: victims_partitions <= set(survivor.consumer.owned()), SESSION_S + 20, "the survivor taking over"
        )
        taken_over_after = time.monotonic() - killed_at
        wait_until(lambda: set(written + more) <= set(survivor.got + victim.got), 30, "every message")
    finally:
        survivor.consumer.close()
    assert taken_over_after >= SESSION_S * 0.8  # not before the coordinator could know it died
    everything = survivor.got + victim.got
    assert set(everything) == set(written + more)  # nothing lost
    duplicates = {pair for pair in everything if everything.count(pair) > 1}
    # ... and read twice only where the victim had not committed: at or after its last commit
    assert all(
        partition in victims_partitions and offset >= committed.get((topic, partition), 0)
        for partition, offset in duplicates
    )


def test_a_static_member_restarts_without_a_rebalance(bootstrap: str) -> None:
    topic, _written = topic_with(bootstrap, 60)
    group = f"static-{topic}"
    leader = Member(member(bootstrap, group, group_instance_id="leader")).run(topic)
    wait_until(lambda: len(leader.consumer.owned()) == PARTITIONS, 30, "the leader owning everything")
    follower = Member(member(bootstrap, group, group_instance_id="follower")).run(topic)
    try:
        wait_until(lambda: len(follower.consumer.owned()) == PARTITIONS // 2, 30, "the follower's share")
        share = follower.consumer.owned()
        follower.consumer.close()  # a static member leaves no LeaveGroup: its place is kept
        rebalances = leader.consumer.rebalances
        follower = Member(member(bootstrap, group, group_instance_id="follower")).run(topic)
        wait_until(lambda: follower.consumer.owned() == share, 30, "the same share back")
        time.sleep(2.0)  # heartbeats would have told the leader of a rebalance by now
        assert leader.consumer.rebalances == rebalances
        assert len(leader.consumer.owned()) == PARTITIONS // 2
    finally:
        follower.consumer.close()
        leader.consumer.close()


def test_membership_reforms_after_the_broker_restarts(tmp_path: Path) -> None:
    """Membership lives in the coordinator's memory: after a broker SIGKILL and restart the members'
    next heartbeat is refused, they join again and go on from the committed offsets."""
    port = free_port()
    broker = BrokerProcess(tmp_path / "data", port=port, groups={"initial_rebalance_delay_ms": 0}).start()
    members: list[Member] = []
    try:
        topic, written = topic_with(broker.bootstrap, 300)
        group = f"restart-{topic}"
        members = [Member(member(broker.bootstrap, group)).run(topic) for _ in range(2)]
        wait_until(lambda: sum(len(m.got) for m in members) >= len(written), 30, "the first messages")
        time.sleep(1.0)  # committed
        before = [m.consumer.rebalances for m in members]
        broker.kill()
        broker.start()
        more = produce(broker.bootstrap, topic, range(300, 600))
        wait_until(lambda: set(written + more) <= {p for m in members for p in m.got}, 60, "every message")
        assert all(m.consumer.rebalances > b for m, b in zip(members, before, strict=True))  # they rejoined
        wait_until(lambda: sorted(p for m in members for p in m.consumer.owned()) == sorted(
            (topic, p) for p in range(PARTITIONS)), 30, "every partition owned once")  # fmt: skip
    finally:
        for m in members:
            m.consumer.close()
        broker.stop()
