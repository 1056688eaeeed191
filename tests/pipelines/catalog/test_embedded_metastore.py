"""The embedded metastore through kills and damage: a first run SIGKILLed while Derby makes the
database, and again while Hive makes its tables in it; then a run, which must register the tables
and find them by name. A database without Derby's ``service.properties`` (what the earlier
in-place creation left after such a kill) is made anew by the next run; one whose files Derby
refuses is made anew by ``pipelines repair``. The tables come back from the manifests each time.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pipelines.catalog.embedded import BROKEN, CREATING, DATABASE, WHOLE_MARK
from tests.pipelines.harness import produce, run_cli, start_run, write_spec
from tests.support.kafkalog import BrokerProcess

pytestmark = pytest.mark.integration

DERBY_MADE_FILES = 20
"""Files in a database's seg0 while Derby is still making it (a made one has about 70)."""
HIVE_MAKING_FILES = 100
"""Files in seg0 once Hive is making its tables in the database (they end at about 170)."""


def _kill_when(spec: Path, log: Path, moment: Callable[[], bool], what: str) -> None:
    """Start a run of ``spec`` and SIGKILL it (driver, JVM and workers) the moment ``moment()``."""
    child = start_run(spec, log)
    deadline = time.monotonic() + 180
    try:
        while not moment():
            assert child.poll() is None, f"the run ended before {what}: {log.read_text()[-2000:]}"
            assert time.monotonic() < deadline, f"never saw {what}"
            time.sleep(0.005)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
        child.wait(30)


def _seg0_files(database: Path) -> int:
    try:
        return sum(1 for _ in (database / "seg0").iterdir())
    except OSError:
        return 0


def _count_by_name(spec: Path) -> int:
    counted = run_cli("sql", str(spec), "SELECT COUNT(*) AS n FROM meta_events_raw", "--json")
    assert counted.returncode == 0, counted.stderr[-3000:]
    return int(json.loads(counted.stdout.strip().splitlines()[-1])["n"])


def test_a_first_run_killed_while_the_metastore_is_made_and_damage_later_are_recovered(tmp_path: Path) -> None:
    metastore = tmp_path / "raw" / "_pipeline" / "metastore"
    with BrokerProcess(tmp_path / "broker") as broker:
        produce(broker.bootstrap, "events", 120, partitions=2)
        spec = write_spec(
            tmp_path, broker.bootstrap, tmp_path / "raw", name="meta_events", tables={"metastore": "auto"}
        )

        def derby_making() -> bool:  # a database directory with files, and no service.properties yet
            return any(
                _seg0_files(d) >= DERBY_MADE_FILES and not (d / WHOLE_MARK).exists() for d in metastore.glob("db*")
            )

        _kill_when(spec, tmp_path / "first.log", derby_making, "Derby making the database")
        assert not (metastore / DATABASE).exists(), "a half-made database was left where Hive opens it"
        assert list(metastore.glob(f"{CREATING}*")), sorted(p.name for p in metastore.iterdir())

        _kill_when(spec, tmp_path / "second.log", lambda: _seg0_files(metastore / DATABASE) >= HIVE_MAKING_FILES,
                   "Hive making its tables")  # fmt: skip

        ran = run_cli("run", str(spec), "--master", "local[2]")
        assert ran.returncode == 0, ran.stderr[-3000:]
        assert "tables: warehouse.meta_events_raw (run #1) in the embedded metastore" in ran.stdout + ran.stderr

        # what a kill during the earlier, in-place creation left: no service.properties. A run
        # (with nothing new to load) makes the database anew and registers the tables again
        (metastore / DATABASE / WHOLE_MARK).unlink()
        healed = run_cli("run", str(spec), "--master", "local[1]")
        assert healed.returncode == 0, healed.stderr[-3000:]
        assert f"has no {WHOLE_MARK}" in healed.stderr and "made anew" in healed.stderr, healed.stderr[-3000:]
        assert len(list(metastore.glob(f"{BROKEN}*"))) == 1

        # files Derby refuses: the run fails naming the metastore, and repair makes it anew
        (metastore / DATABASE / "log" / "log1.dat").write_bytes(b"damaged")
        repaired = run_cli("repair", str(spec))
        assert repaired.returncode == 0, repaired.stderr[-3000:]
        assert "could not be used (ERROR " in repaired.stderr and "moved to" in repaired.stderr, repaired.stderr[-3000:]
        assert "done: create view warehouse.meta_events_raw" in repaired.stdout, repaired.stdout
        assert len(list(metastore.glob(f"{BROKEN}*"))) == 2
        assert _count_by_name(spec) == 120
