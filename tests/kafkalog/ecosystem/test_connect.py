"""Kafka Connect 4.x in distributed mode on a broker: the file connectors move a file into a topic and
the topic into another file, every line once and in order; a SIGKILLed worker resumes from the
offsets Connect stored in its compacted topics (the source does not read its file again); two
workers of one group share the connectors and tasks, and the one left runs them all.

What the broker must serve for it: the three internal topics Connect creates compacted (configs,
source offsets, statuses) and reads back whole at every start, Connect's own group protocol
(``connect`` group type: the leader assigns connectors and tasks, incremental cooperative
rebalancing), a sink's consumer group and its committed offsets."""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path

import pytest

from kafkalog.client import Admin
from tests.support.connect import FILE_SINK, FILE_SOURCE, ConnectCluster, ConnectWorker
from tests.support.ecosystem import Broker, eventually, topic_configs, values
from tests.support.processes import tail

pytestmark = pytest.mark.integration

# Written against Kafka 4.x as well (the same code passes there); the suite runs them where they
# prove something: on kafkalog.
BROKERS = ("kafkalog",)


def lines(start: int, end: int) -> list[str]:
    return [f"line {i:04d} of the file" for i in range(start, end)]


def append(path: Path, batch: list[str]) -> None:
    with path.open("a") as out:
        out.write("".join(f"{line}\n" for line in batch))


def read_lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def exactly(what: str, seen: list[str], expected: list[str]) -> str | None:
    """None if ``seen`` is ``expected``; else what differs: missing lines, duplicates, order."""
    if seen == expected:
        return None
    duplicates = {line: n for line, n in Counter(seen).items() if n > 1}
    missing = sorted(set(expected) - set(seen))
    return (
        f"{what}: {len(seen)} lines for {len(expected)}; {len(missing)} missing (first {missing[:3]}), "
        f"{len(duplicates)} twice or more (first {list(duplicates.items())[:3]}), "
        f"{'in order' if sorted(seen) == seen else 'out of order'}"
    )


@pytest.mark.parametrize("broker", BROKERS, indirect=True)
def test_file_connectors_resume_from_stored_offsets_and_two_workers_share_and_take_over(
    broker: Broker, tmp_path: Path
) -> None:
    cluster = ConnectCluster(broker.bootstrap, f"connect-{uuid.uuid4().hex[:8]}")
    topic = f"{cluster.group}-lines"
    with Admin(broker.bootstrap) as admin:
        admin.create_topic(topic, 1)  # one partition: the file's order is the topic's
    source, sink = tmp_path / "in.txt", tmp_path / "out.txt"
    append(source, lines(0, 100))
    first = ConnectWorker(tmp_path / "worker-1", cluster)
    second = ConnectWorker(tmp_path / "worker-2", cluster)

    def logs() -> str:
        return "\n".join(tail(worker.log, 30) for worker in (first, second))

    def arrived(count: int) -> None:
        """Every line up to ``count`` is in the topic and in the sink's file, once and in order."""
        expected = lines(0, count)
        eventually(
            f"the first {count} lines in {topic}",
            lambda: True if len(values(broker.bootstrap, topic)) >= count else None,
            timeout=60,
            explain=logs,
        )
        eventually(
            f"the first {count} lines in {sink}",
            lambda: True if len(read_lines(sink)) >= count else None,
            timeout=60,
            explain=logs,
        )
        problems = [
            exactly(topic, values(broker.bootstrap, topic), expected),
            exactly(str(sink), read_lines(sink), expected),
        ]
        assert problems == [None, None], f"{problems}\n{logs()}"

    def stored(worker: ConnectWorker, count: int) -> None:
        """The source's stored offset is the file's end and the sink has committed ``count`` records."""
        size = source.stat().st_size

        def positions() -> bool | None:
            at = [o["offset"].get("position") for o in worker.offsets("source")]
            committed = [o["offset"].get("kafka_offset") for o in worker.offsets("sink")]
            return True if at == [size] and committed == [count] else None

        worker.poll(f"the source's offset at byte {size} and the sink's at record {count}", positions)

    try:
        first.start()
        for internal in cluster.internal_topics:
            assert topic_configs(broker.bootstrap, internal)["cleanup.policy"] == "compact", internal
        first.put_connector("source", {"connector.class": FILE_SOURCE, "tasks.max": 1, "file": source, "topic": topic})
        first.put_connector("sink", {"connector.class": FILE_SINK, "tasks.max": 1, "file": sink, "topics": topic})
        arrived(100)
        stored(first, 100)

        # a crash: what the worker stored is all it knows when it comes back
        first.kill()
        append(source, lines(100, 150))
        first.start()
        arrived(150)  # not the first 100 again: the source resumed at its stored position

        # a second worker: the connectors and their tasks spread over both
        second.start()

        def spread() -> set[str] | None:
            placed = set()
            for name in ("source", "sink"):
                status = first.running(name, 1)
                if status is None:
                    return None
                placed |= {status["connector"]["worker_id"], *(task["worker_id"] for task in status["tasks"])}
            return placed if placed == {first.worker_id, second.worker_id} else None

        first.poll("the connectors and tasks on both workers", spread)
        append(source, lines(150, 175))
        arrived(175)

        # the first stops: the second runs everything, and the lines keep coming
        first.stop()

        def taken_over() -> bool | None:
            for name in ("source", "sink"):
                status = second.running(name, 1)
                if status is None or {status["connector"]["worker_id"], status["tasks"][0]["worker_id"]} != {
                    second.worker_id
                }:
                    return None
            return True

        second.poll("the second worker running both connectors and their tasks", taken_over)
        append(source, lines(175, 200))
        arrived(200)
    finally:
        first.stop()
        second.stop()
