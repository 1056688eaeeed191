"""The broker an ecosystem test runs against, by kind (``@pytest.mark.parametrize("broker", BROKERS,
indirect=True)``): the session's Apache Kafka 4.x broker (``kafka4``; the tests' topics, groups and
ids are their own), or a kafkalog broker of the test's own (tests.support.ecosystem.fresh_broker)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.ecosystem import Broker, fresh_broker


@pytest.fixture
def broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Broker]:
    if request.param == "kafka4":
        yield request.getfixturevalue("kafka4")
    else:
        with fresh_broker(request.param, tmp_path / "broker") as ours:
            yield ours
