"""Fixtures of the pipeline tests: one local Spark session for the whole test run (starting the
JVM costs seconds), and a real kafkalog broker per test on loopback in a temporary directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.brokers import BrokerProcess


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from pipelines.session import local_session

    # local[2,4]: two cores, and a failed task is retried (plain local[N] never retries)
    session = local_session("local[2,4]", "pipelines-tests")
    yield session
    session.stop()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path / "broker") as process:
        yield process
