"""``kafkalog consume --group``: members as separate processes over 12 partitions, on a real ZooKeeper
and a ZooKeeper-registered broker. They join, one leaves cleanly (SIGTERM), a new one joins, one is
SIGKILLed; what they printed proves no gaps, no duplicates from clean handovers, and duplicates after
the kill only at or beyond the killed member's last committed offsets."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkalog.client import Admin, Producer
from kafkalog.registry.groups import owners
from kafkalog.registry.offsets import fetch_offset
from tests.support.kafkalog import KAFKALOG, BrokerProcess

PARTITIONS = 12
BATCH = 1200


class ConsumeProcess:
    """``kafkalog consume --group g events`` writing ``topic partition offset value`` lines to a file."""

    def __init__(self, root: Path, connect: str, name: str, *extra: str) -> None:
        self.name = name
        self.out = root / f"{name}.out"
        self.err = root / f"{name}.err"
        with self.out.open("wb") as out, self.err.open("wb") as err:
            self.process = subprocess.Popen(
                [str(KAFKALOG), "consume", "--zookeeper", connect, "--group", "g", "events", "--print-offsets",
                 "--offset-reset", "smallest", "--commit-interval", "0.5", "--consumer-id", name, "-q", *extra],
                stdout=out, stderr=err, env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )  # fmt: skip

    def lines(self) -> list[tuple[int, int]]:
        """(partition, offset) of every complete line printed so far."""
        out = []
        for line in self.out.read_bytes().split(b"\n")[:-1]:
            _, partition, offset, _ = line.split(b"\t", 3)
            out.append((int(partition), int(offset)))
        return out

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(30)

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(10)


@pytest.fixture
def setup(tmp_path: Path, zk_factory: Callable[..., Any]) -> Iterator[tuple[BrokerProcess, str]]:
    if not KAFKALOG.exists():
        raise RuntimeError(f"the kafkalog console script is not installed next to {sys.executable} (make install)")
    connect = zk_factory.connect  # type: ignore[attr-defined]
    with BrokerProcess(tmp_path / "broker", zookeeper=connect, zookeeper_session_timeout_ms=6000) as broker:
        with Admin(broker.bootstrap) as admin:
            admin.create_topic("events", PARTITIONS)
        yield broker, connect


def produce(broker: BrokerProcess, first: int) -> None:
    with Producer(broker.bootstrap) as producer:
        for i in range(first, first + BATCH):
            producer.send("events", str(i).encode(), partition=i % PARTITIONS)
        producer.flush()


def wait_for(condition: Callable[[], bool], timeout: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_members_join_leave_and_crash_without_gaps(
    setup: tuple[BrokerProcess, str], tmp_path: Path, zk_factory: Callable[..., Any]
) -> None:
    broker, connect = setup
    zk = zk_factory()
    members = {name: ConsumeProcess(tmp_path, connect, name) for name in ("c0", "c1", "c2")}
    everyone = dict(members)

    def printed() -> list[tuple[int, int]]:
        return [entry for m in everyone.values() for entry in m.lines()]

    def covered(count: int) -> bool:
        return len(set(printed())) == count

    def owned_by() -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for (_, partition), thread in owners(zk, "g").items():
            out.setdefault(thread.rsplit("-", 1)[0], []).append(partition)
        return out

    try:
        produce(broker, 0)
        wait_for(lambda: covered(BATCH), what="the first batch")
        wait_for(lambda: sorted(map(len, owned_by().values())) == [4, 4, 4], what="three equal shares")

        assert members.pop("c0").stop() == 0  # a clean leave: commits, releases, exits 0
        produce(broker, BATCH)
        wait_for(lambda: covered(2 * BATCH), what="the second batch")
        assert len(printed()) == 2 * BATCH, "clean handovers resume at the committed offset: no duplicates"

        members["c3"] = everyone["c3"] = ConsumeProcess(tmp_path, connect, "c3")
        wait_for(lambda: sorted(owned_by()) == ["c1", "c2", "c3"], what="c3 to get its share")
        victim_partitions = owned_by()["c1"]
        time.sleep(1.5)  # a few automatic commits
        committed_at_kill = {p: fetch_offset(zk, "g", "events", p) or 0 for p in victim_partitions}
        members.pop("c1").kill()
        produce(broker, 2 * BATCH)
        wait_for(lambda: covered(3 * BATCH), what="the third batch")
        wait_for(lambda: sorted(owned_by()) == ["c2", "c3"], what="the survivors to share everything")
        time.sleep(1.0)

        seen: dict[tuple[int, int], int] = {}
        for entry in printed():
            seen[entry] = seen.get(entry, 0) + 1
        per_partition = 3 * BATCH // PARTITIONS
        assert sorted(seen) == [(p, o) for p in range(PARTITIONS) for o in range(per_partition)], "no gaps"
        duplicates = {entry for entry, n in seen.items() if n > 1}
        for partition, offset in duplicates:  # only what the killed member printed and had not committed
            assert partition in committed_at_kill and offset >= committed_at_kill[partition], (partition, offset)
        assert all(n <= 2 for n in seen.values())
    finally:
        for m in members.values():
            if m.process.poll() is None:
                assert m.stop() == 0, m.err.read_text()
    assert [fetch_offset(zk, "g", "events", p) for p in range(PARTITIONS)] == [300] * PARTITIONS


def test_a_member_frozen_past_its_session_never_hands_out_what_another_member_took_over(
    setup: tuple[BrokerProcess, str], tmp_path: Path, zk_factory: Callable[..., Any]
) -> None:
    broker, connect = setup
    zk = zk_factory()
    frozen = ConsumeProcess(tmp_path, connect, "frozen", "--session-timeout", "2")
    other = ConsumeProcess(tmp_path, connect, "other", "--session-timeout", "2")
    try:
        produce(broker, 0)
        wait_for(lambda: len(set(frozen.lines() + other.lines())) == BATCH, what="the first batch")
        wait_for(lambda: len(owners(zk, "g")) == PARTITIONS, what="every partition owned")
        frozen.process.send_signal(signal.SIGSTOP)  # its fetchers keep what they had queued
        produce(broker, BATCH)  # messages for the frozen member's partitions too
        wait_for(lambda: "frozen" not in str(owners(zk, "g")), timeout=30, what="its session to expire")
        wait_for(lambda: len(set(frozen.lines() + other.lines())) == 2 * BATCH, what="the other to take over")
        before_resume = len(frozen.lines())
        frozen.process.send_signal(signal.SIGCONT)
        wait_for(lambda: "frozen" in str(owners(zk, "g")), timeout=30, what="it to rejoin")
        produce(broker, 2 * BATCH)
        wait_for(lambda: len(set(frozen.lines() + other.lines())) == 3 * BATCH, what="the third batch")
        time.sleep(1.0)
        after_resume = set(frozen.lines()[before_resume:])
        assert after_resume, "the member consumes again after it rejoined"
        assert not after_resume & set(other.lines()), "printed by both: a partition had two owners at once"
    finally:
        for m in (frozen, other):
            if m.process.poll() is None:
                m.process.send_signal(signal.SIGCONT)
                assert m.stop() == 0, m.err.read_text()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--zookeeper", "127.0.0.1:1", "--group", "g"], "exactly one of TOPIC, --topic, --whitelist"),
        (["--zookeeper", "127.0.0.1:1", "--group", "g", "events", "-p", "0"], "--partition does not go with --group"),
        (["--zookeeper", "127.0.0.1:1", "-b", "127.0.0.1:9092", "events"], "not both"),
        (["--zookeeper", "127.0.0.1:port", "events"], "'127.0.0.1:port' is not host:port"),
    ],
)
@pytest.mark.integration
def test_consume_explains_wrong_combinations(args: list[str], message: str) -> None:
    done = subprocess.run([str(KAFKALOG), "consume", *args], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode != 0
    assert message in done.stderr, done.stderr
