"""Fixtures of the Hadoop tests: the mini clusters (``hadoop``, package scope: started for this
package, stopped after it; tests.support.fixtures) and a kafkalog broker per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.kafkalog import BrokerProcess


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path / "broker") as process:
        yield process
