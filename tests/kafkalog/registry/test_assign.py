"""The partition assignors (seed 002): the seed's example exactly, and the invariants of each."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalog.errors import AssignmentError
from kafkalog.registry.assign import (
    ThreadId,
    by_thread,
    java_string_hash,
    range_assign,
    round_robin_assign,
    threads_per_topic,
)

SEED_PARTITIONS = {"t0": [0, 1, 2], "t1": [0, 1, 2]}
SEED_GROUP = {"c0": {"t0": 1, "t1": 1}, "c1": {"t0": 1, "t1": 1}}


def named(owners: dict) -> dict[str, list[str]]:
    return {t.consumer: [f"{topic}p{p}" for topic, p in tps] for t, tps in by_thread(owners).items()}


def test_the_seed_example_range() -> None:
    assert named(range_assign(SEED_GROUP, SEED_PARTITIONS)) == {
        "c0": ["t0p0", "t0p1", "t1p0", "t1p1"],
        "c1": ["t0p2", "t1p2"],
    }


def test_the_seed_example_round_robin() -> None:
    assert named(round_robin_assign(SEED_GROUP, SEED_PARTITIONS)) == {
        "c0": ["t0p0", "t0p2", "t1p1"],
        "c1": ["t0p1", "t1p0", "t1p2"],
    }


def test_round_robin_refuses_members_that_subscribe_differently() -> None:
    with pytest.raises(AssignmentError, match=r"topic t1 has streams c0-0, topic t0 has c0-0, c1-0"):
        round_robin_assign({"c0": {"t0": 1, "t1": 1}, "c1": {"t0": 1}}, SEED_PARTITIONS)
    with pytest.raises(AssignmentError, match="same stream counts"):
        round_robin_assign({"c0": {"t0": 2, "t1": 1}}, SEED_PARTITIONS)
    assert range_assign({"c0": {"t0": 1, "t1": 1}, "c1": {"t0": 1}}, SEED_PARTITIONS)[("t1", 2)] == ThreadId("c0", 0)


def test_threads_are_ordered_by_consumer_then_number() -> None:
    threads = threads_per_topic({"b": {"t": 2}, "a": {"t": 1}, "a10": {"t": 1}})["t"]
    assert [str(t) for t in threads] == ["a-0", "a10-0", "b-0", "b-1"]
    with pytest.raises(AssignmentError, match="0 streams"):
        threads_per_topic({"a": {"t": 0}})


def test_more_threads_than_partitions_leaves_the_last_ones_idle() -> None:
    owners = range_assign({f"c{i}": {"t": 1} for i in range(5)}, {"t": [0, 1, 2]})
    assert sorted(t.consumer for t in owners.values()) == ["c0", "c1", "c2"]


def test_java_string_hash_matches_java() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("polygenelubricants") == -(2**31)  # overflow, as Java wraps
    assert java_string_hash("[t0,0]") < java_string_hash("[t0,1]") < java_string_hash("[t1,0]")


groups = st.dictionaries(
    st.text("abc", min_size=1, max_size=3),
    st.dictionaries(st.sampled_from(["t0", "t1", "t2"]), st.integers(1, 3), min_size=1),
    min_size=1,
    max_size=6,
)
topics = st.fixed_dictionaries({t: st.lists(st.integers(0, 40), unique=True, max_size=13) for t in ("t0", "t1", "t2")})


@given(groups, topics)
def test_range_gives_every_partition_one_owner_and_balances_each_topic(group: dict, partitions: dict) -> None:
    owners = range_assign(group, partitions)
    per_topic = threads_per_topic(group)
    for topic, threads in per_topic.items():
        mine = {p: owners[(topic, p)] for p in partitions[topic]}  # every partition owned
        counts = [sum(1 for o in mine.values() if o == t) for t in threads]
        assert max(counts) - min(counts) <= 1
        assert counts == sorted(counts, reverse=True)  # the first threads take the extra ones
        assert all(o.consumer in group and topic in group[o.consumer] for o in mine.values())
    assert {tp[0] for tp in owners} <= set(per_topic)


@given(groups, topics)
def test_round_robin_gives_every_partition_one_owner_and_balances_over_all_topics(
    group: dict, partitions: dict
) -> None:
    subscribed = sorted({t for s in group.values() for t in s})
    uniform = {c: dict.fromkeys(subscribed, 1) for c in group}
    owners = round_robin_assign(uniform, partitions)
    assert sorted(owners) == sorted((t, p) for t in subscribed for p in partitions[t])
    counts = [len(v) for v in by_thread(owners).values()]
    if len(owners) >= len(group):
        assert len(counts) == len(group) and max(counts) - min(counts) <= 1
    else:
        assert counts == [1] * len(owners)
