"""Topic registrations and group offsets in a real ZooKeeper."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from kafkalog.errors import RegistryError
from kafkalog.registry.offsets import commit_offset, fetch_offset, offset_path
from kafkalog.registry.topics import all_topics, create_topic, parse_topic, read_topic, spread, topic_path


def test_spread_deals_partitions_over_the_sorted_brokers() -> None:
    assert spread(5, [3, 1, 2]) == {0: 1, 1: 2, 2: 3, 3: 1, 4: 2}
    assert spread(2, [1, 2], start=1) == {0: 2, 1: 1}
    with pytest.raises(RegistryError, match="no broker is registered"):
        spread(3, [])
    with pytest.raises(RegistryError, match="at least one partition"):
        spread(0, [1])


def test_topics_are_registered_as_kafka_does_and_read_back(zk_factory: Callable[..., Any]) -> None:
    client = zk_factory()
    create_topic(client, "page.views", spread(3, [1, 2]))
    raw, _ = client.get(topic_path("page.views"))
    assert json.loads(raw) == {"version": 1, "partitions": {"0": [1], "1": [2], "2": [1]}}
    assert read_topic(client, "page.views") == {0: 1, 1: 2, 2: 1}
    assert read_topic(client, "missing") is None
    with pytest.raises(RegistryError, match=r"topic page.views already exists \(/brokers/topics/page.views\)"):
        create_topic(client, "page.views", spread(1, [1]))
    with pytest.raises(RegistryError, match="not a valid topic name"):
        create_topic(client, "a/b", spread(1, [1]))
    with pytest.raises(RegistryError, match=r"numbered 0\.\.1"):
        create_topic(client, "gaps", {0: 1, 2: 1})
    # Kafka's own nodes (replica lists) read the same way: the first replica leads
    client.create(topic_path("kafka.made"), b'{"version":1,"partitions":{"1":[3,1],"0":[2,3]}}')
    assert all_topics(client) == {"kafka.made": {0: 2, 1: 3}, "page.views": {0: 1, 1: 2, 2: 1}}
    with pytest.raises(RegistryError, match="x: not a topic registration"):
        parse_topic(b'{"version": 1}', "x")


def test_offsets_are_stored_as_kafka_does(zk_factory: Callable[..., Any]) -> None:
    client = zk_factory()
    assert fetch_offset(client, "g", "t", 0) is None
    commit_offset(client, "g", "t", 0, 42)
    commit_offset(client, "g", "t", 0, 57)
    assert fetch_offset(client, "g", "t", 0) == 57
    assert client.get("/consumers/g/offsets/t/0")[0] == b"57"
    client.create(offset_path("g", "t", 1), b"junk", makepath=True)
    with pytest.raises(RegistryError, match="/consumers/g/offsets/t/1: not an offset"):
        fetch_offset(client, "g", "t", 1)
    with pytest.raises(RegistryError, match="negative"):
        commit_offset(client, "g", "t", 0, -1)
    with pytest.raises(RegistryError, match="cannot be part of a ZooKeeper path"):
        offset_path("a/b", "t", 0)
