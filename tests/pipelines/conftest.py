"""Fixtures of the pipeline tests: a real kafkalog broker per test on loopback in a temporary
directory (the shared Spark session is tests.support.fixtures')."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.kafkalog import BrokerProcess


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path / "broker") as process:
        yield process
