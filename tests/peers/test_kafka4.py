"""Apache Kafka 4.x is real: its own console producer and consumer round-trip records with headers
on the broker the fixtures start, and two such brokers run side by side."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.kafka4 import Kafka4Process
from tests.support.processes import descendants

pytestmark = pytest.mark.integration


def test_console_round_trip_with_headers(kafka4: Kafka4Process) -> None:
    kafka4.create_topic("smoke-headers", partitions=1)
    records = [
        ({"trace": "a1", "source": "us-east"}, "k1", "first value"),
        ({}, "k2", "no headers here"),
        ({"trace": "c3"}, "k3", "third"),
    ]
    kafka4.console_produce("smoke-headers", records)
    lines = kafka4.console_consume("smoke-headers", len(records))
    assert lines == [
        "trace:a1,source:us-east\tk1\tfirst value",
        "NO_HEADERS\tk2\tno headers here",
        "trace:c3\tk3\tthird",
    ]


def test_two_brokers_at_once(kafka4: Kafka4Process, tmp_path: Path) -> None:
    with Kafka4Process(tmp_path / "second") as second:
        assert {second.port, second.controller_port}.isdisjoint({kafka4.port, kafka4.controller_port})
        for broker, value in ((kafka4, "on the shared one"), (second, "on the second")):
            broker.create_topic("smoke-pair")
            broker.console_produce("smoke-pair", [({"broker": str(broker.port)}, "key", value)])
        # each holds only its own record: two clusters, not one
        assert kafka4.console_consume("smoke-pair", 1) == [f"broker:{kafka4.port}\tkey\ton the shared one"]
        assert second.console_consume("smoke-pair", 1) == [f"broker:{second.port}\tkey\ton the second"]
        pid = second.process.pid if second.process else -1
    assert pid not in {found for found, _ in descendants()}, "the second broker outlived its with block"
