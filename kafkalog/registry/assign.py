"""Partition assignment for consumer groups: the range and round-robin assignors (seed 002).

Role: pure functions from (who subscribes to what with how many streams, which partitions each
topic has) to an owner thread per partition. Every member of a group computes the same answer from
the same registry data, which is what makes the ZooKeeper rebalance work without a coordinator.

A consumer with N streams of a topic is N *consumer threads* ``<consumer id>-<i>``; threads are
ordered by consumer id, then number (as Kafka's ConsumerThreadId compares).

- range (the default): per topic, partitions sorted by number are cut into consecutive ranges over
  the topic's threads; with N = partitions // threads and R = partitions % threads, thread i gets
  N + (1 if i < R else 0) partitions starting at N*i + min(i, R).
- round-robin: over all topics at once, partitions ordered by the Java hash code of
  ``"[topic,partition]"`` (as Kafka does, to spread a topic's partitions), dealt in turn to the
  threads. Every member must subscribe to the same topics with the same stream counts, otherwise
  the assignment is refused (AssignmentError), as seed 002 says.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kafkalog.errors import AssignmentError
from kafkalog.topics import TopicPartition


@dataclass(frozen=True, order=True, slots=True)
class ThreadId:
    """One consumer stream: ordered by consumer id, then number."""

    consumer: str
    number: int

    def __str__(self) -> str:
        return f"{self.consumer}-{self.number}"


Subscriptions = Mapping[str, Mapping[str, int]]
"""consumer id → {topic: number of streams} (the value of /consumers/<group>/ids/<consumer id>)."""


def threads_per_topic(subscriptions: Subscriptions) -> dict[str, list[ThreadId]]:
    """topic → the sorted threads that consume it."""
    out: dict[str, list[ThreadId]] = {}
    for consumer, topics in subscriptions.items():
        for topic, streams in topics.items():
            if streams < 1:
                raise AssignmentError(f"consumer {consumer} asks for {streams} streams of {topic}; at least 1")
            out.setdefault(topic, []).extend(ThreadId(consumer, i) for i in range(streams))
    return {topic: sorted(threads) for topic, threads in sorted(out.items())}


def range_assign(
    subscriptions: Subscriptions, partitions: Mapping[str, Sequence[int]]
) -> dict[TopicPartition, ThreadId]:
    """The range assignment (see the module doc); topics without partitions are skipped."""
    owners: dict[TopicPartition, ThreadId] = {}
    for topic, threads in threads_per_topic(subscriptions).items():
        numbers = sorted(partitions.get(topic, ()))
        each, extra = divmod(len(numbers), len(threads))
        for i, thread in enumerate(threads):
            start = each * i + min(i, extra)
            for number in numbers[start : start + each + (1 if i < extra else 0)]:
                owners[(topic, number)] = thread
    return owners


def java_string_hash(text: str) -> int:
    """Java's String.hashCode (32-bit, signed), over UTF-16 code units."""
    value = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        value = (31 * value + int.from_bytes(data[i : i + 2], "big")) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def round_robin_assign(
    subscriptions: Subscriptions, partitions: Mapping[str, Sequence[int]]
) -> dict[TopicPartition, ThreadId]:
    """The round-robin assignment (see the module doc); AssignmentError if members differ."""
    per_topic = threads_per_topic(subscriptions)
    if not per_topic:
        return {}
    (head_topic, head_threads), *rest = per_topic.items()
    for topic, threads in rest:
        if set(threads) != set(head_threads):
            raise AssignmentError(
                "round-robin assignment needs every consumer of the group to subscribe to the same topics with "
                f"the same stream counts: topic {topic} has streams {', '.join(map(str, threads))}, topic "
                f"{head_topic} has {', '.join(map(str, head_threads))} (use the range assignor)"
            )
    every = [(topic, number) for topic in per_topic for number in partitions.get(topic, ())]
    every.sort(key=lambda tp: (java_string_hash(f"[{tp[0]},{tp[1]}]"), tp))
    dealer = itertools.cycle(head_threads)
    return {tp: next(dealer) for tp in every}


ASSIGNORS = {"range": range_assign, "roundrobin": round_robin_assign}


def by_thread(owners: Mapping[TopicPartition, ThreadId]) -> dict[ThreadId, list[TopicPartition]]:
    """The same assignment seen from the threads (each list sorted)."""
    out: dict[ThreadId, list[TopicPartition]] = {}
    for tp, thread in owners.items():
        out.setdefault(thread, []).append(tp)
    return {thread: sorted(tps) for thread, tps in sorted(out.items())}
