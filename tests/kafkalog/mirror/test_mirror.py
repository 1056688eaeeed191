"""``kafkalog mirror`` as a process between kafkalog brokers that are processes too: two data
centers ("east", "west") into an aggregate. The oracle: every message a source producer had
acknowledged is in the aggregate (by source, key and value), in its source partition; duplicates
only after a SIGKILL; a target failure stops the mirror without skipping; a source gap is named
(reliability rows M1-M3, M5)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from kafkalog.client import Admin, Producer, SimpleConsumer
from kafkalog.client.offsets import OffsetsClient
from kafkalog.client.partitioner import default_partitioner
from kafkalog.record import Codec
from tests.support.kafkalog import KAFKALOG, BrokerProcess
from tests.support.ports import free_port

PARTITIONS = 4


class MirrorProcess:
    started: ClassVar[list[MirrorProcess]] = []
    """Every mirror a test started: those still running when it ends are killed (leftovers)."""

    def __init__(self, root: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.err = root / f"mirror-{time.monotonic_ns()}.err"
        with self.err.open("wb") as err:
            self.process = subprocess.Popen(
                [str(KAFKALOG), "mirror", "--commit-interval-ms", "300", "--status-interval-ms", "1000", *args],
                stdout=subprocess.DEVNULL, stderr=err, env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            )  # fmt: skip
        MirrorProcess.started.append(self)

    def stderr(self) -> str:
        return self.err.read_text(errors="replace")

    def stop(self) -> int:
        """SIGTERM, once the mirror said it runs (its handler is set then: a mirror still starting
        would die of the signal, -15, rather than stop cleanly), and its exit code."""
        deadline = time.monotonic() + 60
        while "mirroring " not in self.stderr() and self.process.poll() is None:
            assert time.monotonic() < deadline, f"the mirror never said it was mirroring: {self.stderr()[-2000:]}"
            time.sleep(0.05)
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(60)

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(10)


@pytest.fixture(autouse=True)
def leftovers() -> Iterator[None]:
    """A mirror a failing test left running is killed with the test, so that it does not fail the
    next test of the worker (as a ResourceWarning of its Popen) or write into its brokers."""
    yield
    while MirrorProcess.started:
        mirror = MirrorProcess.started.pop()
        if mirror.process.poll() is None:
            mirror.kill()


@pytest.fixture
def dcs(tmp_path: Path) -> Iterator[dict[str, BrokerProcess]]:
    # fixed ports: a broker restarted by a test comes back where the mirror looks for it
    brokers = {name: BrokerProcess(tmp_path / name, port=free_port()).start() for name in ("east", "west", "agg")}
    yield brokers
    for broker in brokers.values():
        broker.__exit__()


def produce(broker: BrokerProcess, dc: str, first: int, count: int, topic: str = "events") -> None:
    """Acknowledged messages ``<dc>-<i>`` keyed ``k<i>``, partition i mod 4 (snappy batches)."""
    with Producer(broker.bootstrap, compression="snappy", linger_ms=5) as producer:
        futures = [
            producer.send(topic, f"{dc}-{i}".encode(), f"k{i}".encode(), partition=i % PARTITIONS)
            for i in range(first, first + count)
        ]
        producer.flush()
    assert all(f.exception() is None for f in futures)


def retention_done(broker: BrokerProcess, topic: str = "events") -> list[int]:
    """The earliest offsets of ``topic``'s partitions once retention is done with them: past 10,
    and the same over three of the broker's maintenance rounds (one a second). Retention deletes
    while the test produces; on a loaded machine its last round can come well after the first
    deletion, and a count taken in between would expect messages that are gone by then."""
    with SimpleConsumer(broker.bootstrap) as consumer:
        previous: list[int] = []
        deadline = time.monotonic() + 120
        while True:
            now = [consumer.earliest_offset(topic, p) for p in range(PARTITIONS)]
            if now == previous and min(now) > 10:
                return now
            assert time.monotonic() < deadline, f"retention did not settle: earliest offsets {now}"
            previous = now
            time.sleep(3.0)


def create(broker: BrokerProcess, topic: str = "events", **configs: str) -> None:
    with Admin(broker.bootstrap) as admin:
        admin.create_topic(topic, PARTITIONS, configs or None)


def read_all(broker: BrokerProcess, topic: str = "events") -> list[tuple[int, bytes, bytes]]:
    """(partition, key, value) of every message of ``topic`` on ``broker`` (asking for a topic's
    metadata would auto-create it, with the broker's default partition count: list first)."""
    out = []
    with Admin(broker.bootstrap) as admin:
        if topic not in admin.list_topics():
            return []
    with SimpleConsumer(broker.bootstrap) as consumer:
        for p in range(PARTITIONS):
            end = consumer.latest_offset(topic, p)
            out += [(p, m.key or b"", m.value or b"") for m in consumer.messages(topic, p, 0, end)]
    return out


def wait_for(condition: Callable[[], bool], timeout: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def expected(dc: str, count: int, first: int = 0) -> Counter[tuple[int, bytes, bytes]]:
    return Counter((i % PARTITIONS, f"k{i}".encode(), f"{dc}-{i}".encode()) for i in range(first, first + count))


def committed_total(broker: BrokerProcess) -> int:
    """The mirror group's committed offsets in ``broker``, summed over the partitions."""
    with OffsetsClient(broker.bootstrap) as offsets:
        found = offsets.fetch("kafkalog-mirror", [("events", p) for p in range(PARTITIONS)])
    return sum(offset or 0 for offset in found.values())


def sources(dcs: dict[str, BrokerProcess]) -> list[str]:
    return ["--source", dcs["east"].bootstrap, "--source", dcs["west"].bootstrap, "--target", dcs["agg"].bootstrap]


def test_two_data_centers_into_one_aggregate_then_a_clean_restart_repeats_nothing(
    dcs: dict[str, BrokerProcess], tmp_path: Path
) -> None:
    for dc in ("east", "west"):
        create(dcs[dc])
        produce(dcs[dc], dc, 0, 1000)
    want = expected("east", 1000) + expected("west", 1000)
    metrics = tmp_path / "metrics.json"
    mirror = MirrorProcess(tmp_path, *sources(dcs), "--metrics-file", str(metrics))
    wait_for(lambda: len(read_all(dcs["agg"])) >= 2000, what="the mirror to catch up")
    wait_for(metrics.exists, what="the metrics file")
    assert mirror.stop() == 0, mirror.stderr()
    final = json.loads(metrics.read_text())
    assert final["stopped"] is True and final["failure"] is None and final["acknowledged"] == 2000
    assert final["lag"] == 0
    for source in final["sources"].values():
        assert {k: v["acknowledged_position"] for k, v in source["partitions"].items()} == {
            f"events-{p}": 250 for p in range(PARTITIONS)
        }
    assert Counter(read_all(dcs["agg"])) == want  # keys, values and partitions kept; each once
    assert "mirror stopped: 2,000 messages" in mirror.stderr()  # the closing status line
    # committed in each source: exactly the end of every partition
    for dc in ("east", "west"):
        with OffsetsClient(dcs[dc].bootstrap) as offsets:
            committed = offsets.fetch("kafkalog-mirror", [("events", p) for p in range(PARTITIONS)])
        assert list(committed.values()) == [250] * PARTITIONS
    # a restart after a clean stop mirrors only what is new
    for dc in ("east", "west"):
        produce(dcs[dc], dc, 1000, 200)
    again = MirrorProcess(tmp_path, *sources(dcs))
    wait_for(lambda: len(read_all(dcs["agg"])) >= 2400, what="the new messages")
    time.sleep(1.0)
    assert again.stop() == 0, again.stderr()
    assert Counter(read_all(dcs["agg"])) == want + expected("east", 200, 1000) + expected("west", 200, 1000)


def test_killed_three_times_mid_run_loses_nothing(dcs: dict[str, BrokerProcess], tmp_path: Path) -> None:
    for dc in ("east", "west"):
        create(dcs[dc])
    total = 6000
    stop_producing = threading.Event()

    def keep_producing(dc: str) -> None:
        for first in range(0, total, 500):
            produce(dcs[dc], dc, first, 500)
            time.sleep(0.1)
        stop_producing.set()

    producers = [threading.Thread(target=keep_producing, args=(dc,)) for dc in ("east", "west")]
    for t in producers:
        t.start()
    window = 0  # what each kill may repeat: mirrored to the target but not committed at that moment
    for _ in range(3):
        mirror = MirrorProcess(tmp_path, *sources(dcs))
        time.sleep(2.5)
        committed = sum(committed_total(dcs[dc]) for dc in ("east", "west"))  # commits only grow
        mirror.kill()
        time.sleep(0.5)  # requests already on the wire are still appended by the target
        window += len(read_all(dcs["agg"])) - committed  # T_k - C_k bounds what kill k can repeat
    for t in producers:
        t.join(120)
    final = MirrorProcess(tmp_path, *sources(dcs))
    want = expected("east", total) + expected("west", total)
    wait_for(lambda: set(read_all(dcs["agg"])) >= set(want), timeout=120, what="everything to arrive")
    time.sleep(1.0)
    assert final.stop() == 0, final.stderr()
    got = Counter(read_all(dcs["agg"]))
    assert set(got) == set(want), "nothing lost, nothing invented"
    duplicates = sum(got.values()) - sum(want.values())
    # each kill repeats at most what the target held beyond the committed offsets when it died
    assert duplicates <= window, f"{duplicates} duplicates, more than the uncommitted windows ({window})"


def test_a_target_that_goes_away_stops_the_mirror_and_nothing_is_skipped(
    dcs: dict[str, BrokerProcess], tmp_path: Path
) -> None:
    create(dcs["east"])
    produce(dcs["east"], "east", 0, 400)
    args = ["--source", dcs["east"].bootstrap, "--target", dcs["agg"].bootstrap]
    mirror = MirrorProcess(tmp_path, *args)
    wait_for(lambda: len(read_all(dcs["agg"])) >= 400, what="the first messages")
    assert dcs["agg"].stop() == 0  # the aggregate goes down
    produce(dcs["east"], "east", 400, 400)
    assert mirror.process.wait(180) == 1, "the mirror stops with an error instead of skipping"
    assert "target" in mirror.stderr() and "refused" in mirror.stderr(), mirror.stderr()[-2000:]
    with OffsetsClient(dcs["east"].bootstrap) as offsets:
        committed = offsets.fetch("kafkalog-mirror", [("events", p) for p in range(PARTITIONS)])
    assert all(offset is not None and offset <= 200 for offset in committed.values()), committed
    dcs["agg"].start()  # back: a new mirror goes on from what was committed, no gap
    again = MirrorProcess(tmp_path, *args)
    want = expected("east", 800)
    wait_for(lambda: set(read_all(dcs["agg"])) >= set(want), timeout=120, what="the rest")
    assert again.stop() == 0, again.stderr()
    assert set(read_all(dcs["agg"])) == set(want)


def test_a_topic_created_while_running_is_mirrored(dcs: dict[str, BrokerProcess], tmp_path: Path) -> None:
    create(dcs["east"])
    mirror = MirrorProcess(tmp_path, *sources(dcs), "--whitelist", r"events|clicks\..*")
    try:
        produce(dcs["east"], "east", 0, 100)
        create(dcs["west"], "clicks.v2")
        create(dcs["west"], "ignored")
        produce(dcs["west"], "west", 0, 100, topic="clicks.v2")
        produce(dcs["west"], "west", 0, 100, topic="ignored")
        wait_for(lambda: len(read_all(dcs["agg"])) == 100, what="events")
        with Admin(dcs["agg"].bootstrap) as admin:
            wait_for(lambda: "clicks.v2" in admin.list_topics(), what="the new topic on the target")
            assert "ignored" not in admin.list_topics()
        wait_for(lambda: len(read_all(dcs["agg"], "clicks.v2")) == 100, what="the new topic's messages")
        assert Counter(read_all(dcs["agg"], "clicks.v2")) == expected("west", 100)
    finally:
        assert mirror.stop() == 0, mirror.stderr()


def test_a_source_gap_fails_by_default_and_is_recorded_when_continuing(
    dcs: dict[str, BrokerProcess], tmp_path: Path
) -> None:
    # small segments and a short retention: the source deletes what the mirror did not read yet
    create(dcs["east"], **{"segment.bytes": "1024", "retention.bytes": "2048"})
    produce(dcs["east"], "east", 0, 40)
    args = ["--source", dcs["east"].bootstrap, "--target", dcs["agg"].bootstrap]
    first = MirrorProcess(tmp_path, *args)
    wait_for(lambda: len(read_all(dcs["agg"])) >= 40, what="the first messages")
    assert first.stop() == 0
    for first in range(40, 2040, 100):  # while no mirror runs: many small segments, the old ones deleted
        produce(dcs["east"], "east", first, 100)
    settled = retention_done(dcs["east"])
    failing = MirrorProcess(tmp_path, *args)
    assert failing.process.wait(120) == 1
    message = failing.stderr()
    assert "events-" in message and "is no longer on the broker (earliest" in message, message[-2000:]
    assert "on_gap: continue" in message
    gaps = tmp_path / "gaps.jsonl"
    metrics = tmp_path / "metrics.json"
    going_on = MirrorProcess(
        tmp_path, *args, "--on-gap", "continue", "--gap-file", str(gaps), "--metrics-file", str(metrics)
    )
    with SimpleConsumer(dcs["east"].bootstrap) as consumer:
        ends = [consumer.latest_offset("events", p) for p in range(PARTITIONS)]
        starts = [consumer.earliest_offset("events", p) for p in range(PARTITIONS)]
    assert starts == settled, "retention deleted more after it had settled"
    expected = 40 + sum(e - s for e, s in zip(ends, starts, strict=True))
    wait_for(lambda: len(read_all(dcs["agg"])) >= expected, what=f"{expected} messages mirrored")
    assert going_on.stop() == 0
    records = [json.loads(line) for line in gaps.read_text().splitlines()]
    (counted,) = json.loads(metrics.read_text())["sources"].values()
    assert counted["gaps"] == PARTITIONS
    assert counted["lost_messages"] == sum(s - 10 for s in starts)
    assert {r["partition"] for r in records} == set(range(PARTITIONS))
    for r in records:
        assert r["wanted"] == 10 and r["lost_from"] == 10 and r["lost_to"] == starts[r["partition"]] - 1


def test_mirrors_sharing_zookeeper_sources_hand_partitions_over_without_loss(
    tmp_path: Path, zk_factory: Callable[..., Any]
) -> None:
    connect = zk_factory.connect  # type: ignore[attr-defined]
    session = {"zookeeper_session_timeout_ms": 6000}
    east = BrokerProcess(tmp_path / "east", zookeeper=f"{connect}/east", **session).start()
    west = BrokerProcess(tmp_path / "west", zookeeper=f"{connect}/west", **session).start()
    agg = BrokerProcess(tmp_path / "agg", zookeeper=f"{connect}/agg", **session).start()
    args = ["--source", f"zk:{connect}/east", "--source", f"zk:{connect}/west", "--target", f"zk:{connect}/agg"]
    mirrors: list[MirrorProcess] = []
    try:
        for dc, broker in (("east", east), ("west", west)):
            create(broker)
            produce(broker, dc, 0, 500)
        mirrors.append(MirrorProcess(tmp_path, *args, "--streams", "2"))
        wait_for(lambda: len(read_all(agg)) >= 1000, what="the first mirror")
        mirrors.append(MirrorProcess(tmp_path, *args, "--streams", "2"))  # a second one shares the partitions
        zk = zk_factory()
        ids = "/east/consumers/kafkalog-mirror/ids"
        wait_for(lambda: zk.exists(ids) is not None and len(zk.get_children(ids)) == 2, what="both in the group")
        for dc, broker in (("east", east), ("west", west)):
            produce(broker, dc, 500, 500)
        assert mirrors.pop(0).stop() == 0  # a clean leave: flushed, committed, released
        for dc, broker in (("east", east), ("west", west)):
            produce(broker, dc, 1000, 500)
        want = expected("east", 1500) + expected("west", 1500)
        wait_for(lambda: set(read_all(agg)) >= set(want), timeout=120, what="everything after the handover")
        time.sleep(1.0)
        assert Counter(read_all(agg)) == want, "clean handovers repeat nothing"
        mirrors[0].kill()  # a crash: its uncommitted window repeats, nothing is lost
        mirrors[0] = MirrorProcess(tmp_path, *args)
        for dc, broker in (("east", east), ("west", west)):
            produce(broker, dc, 1500, 500)
        want = expected("east", 2000) + expected("west", 2000)
        wait_for(lambda: set(read_all(agg)) >= set(want), timeout=120, what="everything after the crash")
        assert set(read_all(agg)) == set(want)
        assert mirrors[0].stop() == 0, mirrors[0].stderr()
    finally:
        for m in mirrors:
            if m.process.poll() is None:
                m.kill()
        for b in (east, west, agg):
            b.__exit__()


def test_a_thread_that_dies_stops_its_mirror_and_another_mirror_takes_over(
    tmp_path: Path, zk_factory: Callable[..., Any]
) -> None:
    connect = zk_factory.connect  # type: ignore[attr-defined]
    session = {"zookeeper_session_timeout_ms": 6000}
    east = BrokerProcess(tmp_path / "east", zookeeper=f"{connect}/east", **session).start()
    agg = BrokerProcess(tmp_path / "agg", zookeeper=f"{connect}/agg", **session).start()
    args = ["--source", f"zk:{connect}/east", "--target", f"zk:{connect}/agg"]
    healthy = broken = None
    try:
        create(east)
        healthy = MirrorProcess(tmp_path, *args)
        # the point is reached once per fetched chunk: the waves below give each partition several
        broken = MirrorProcess(tmp_path, *args, env={"KAFKALOG_FAIL_AT": "mirror.send@3"})
        zk = zk_factory()
        ids = "/east/consumers/kafkalog-mirror/ids"
        wait_for(lambda: zk.exists(ids) is not None and len(zk.get_children(ids)) == 2, what="both in the group")
        for wave in range(4):
            produce(east, "east", wave * 500, 500)
            time.sleep(0.5)
        assert broken.process.wait(60) == 1, "a dead thread stops the whole process (no zombie)"
        assert "injected failure at mirror.send" in broken.stderr()
        # it released its partitions: the other mirror takes them over, nothing is lost
        wait_for(lambda: set(read_all(agg)) >= set(expected("east", 2000)), timeout=120, what="the takeover")
        assert len(zk.get_children("/east/consumers/kafkalog-mirror/ids")) == 1, "the dead mirror left the group"
    finally:
        for m in (healthy, broken):
            if m is not None and m.process.poll() is None:
                m.stop()
        for b in (east, agg):
            b.__exit__()


def test_messages_are_re_encoded_where_the_target_differs(dcs: dict[str, BrokerProcess], tmp_path: Path) -> None:
    """The fast path forwards message sets as stored; where it cannot (a target topic with another
    partition count, a compression set explicitly) every message is re-encoded: by key into the
    target's partitions, in the codec asked for, nothing lost or doubled."""
    create(dcs["east"])
    with Admin(dcs["agg"].bootstrap) as admin:
        admin.create_topic("events", 2)
    produce(dcs["east"], "east", 0, 1000)
    mirror = MirrorProcess(tmp_path, "--source", dcs["east"].bootstrap, "--target", dcs["agg"].bootstrap,
                           "--compression", "gzip")  # fmt: skip
    with SimpleConsumer(dcs["agg"].bootstrap) as consumer:
        wait_for(lambda: sum(consumer.latest_offset("events", p) for p in range(2)) >= 1000, what="the mirror")
        assert mirror.stop() == 0, mirror.stderr()
        got = Counter()
        for p in range(2):
            for message in consumer.messages("events", p, 0, consumer.latest_offset("events", p)):
                assert message.key is not None
                assert p == default_partitioner(message.key, 2), "by key into the target's partitions"
                got[(message.key, message.value)] += 1
            assert Codec(consumer.fetch("events", p, 0).codec) == Codec.GZIP
    assert got == Counter((key, value) for _, key, value in expected("east", 1000).elements())
