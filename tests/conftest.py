"""The test tiers, and the rule that no test run leaves a process behind.

Every test belongs to one tier (docs/testing.md):
- ``unit``: no process, no Spark, no peer: milliseconds each; ``make test-fast`` runs them.
- ``integration``: real processes (our broker, ZooKeeper, Kafka 0.9 and 4.x, Spark, Hadoop's mini
  clusters, Airflow).
- ``e2e``: the whole product from a fresh clone (``make demo``).
A test's tier is its own marker (or its module's ``pytestmark``); a test without one is ``unit``
when it uses no fixture but pytest's own (tmp_path, monkeypatch, ...) and its parameters, else
``integration``. A unit test that starts
a process anyway fails at once, naming the tier it belongs to: the tier is a contract, not a label.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

from demo.processes import quick_jvm_env
from tests.support import jvm_archive, timeline, work_split
from tests.support.processes import descendants

# Every Spark driver the tests start (the session's, spark-submit's, Airflow's tasks', the newcomer's
# demo) compiles with the quick compiler only: most of a test's JVM time is its start-up
# (demo.processes.QUICK_JVM_FLAGS says why and what it saves). The benchmarks set nothing.
os.environ.update(quick_jvm_env(dict(os.environ)))
# ... and maps the classes it loads from a class-data archive made once (tests.support.jvm_archive).
_given = os.environ["SPARK_SUBMIT_OPTS"].split()  # a worker inherits its main process's flags
os.environ["SPARK_SUBMIT_OPTS"] = " ".join([*_given, *(f for f in jvm_archive.driver_flags() if f not in _given)])

pytest_plugins = ["tests.support.fixtures"]

TIERS = ("unit", "integration", "e2e")

# Fixtures that start no process: a test that uses only these (and its parameters) is a unit test.
# Any other fixture may start one, so a test using it is an integration test unless marked unit.
PURE_FIXTURES = frozenset(
    {
        "tmp_path",
        "tmp_path_factory",
        "tmpdir",
        "tmpdir_factory",
        "monkeypatch",
        "caplog",
        "capsys",
        "capsysbinary",
        "capfd",
        "recwarn",
        "request",
        "pytestconfig",
        "record_property",
        "cache",
        "_unit_tier_starts_no_process",
        "_no_process_left_behind",
    }
)


def pytest_configure(config: pytest.Config) -> None:
    """Before any worker starts (in the run's main process): the Spark drivers' class archive,
    unless only the unit tier runs (it starts no JVM)."""
    if hasattr(config, "workerinput") or (config.getoption("markexpr") or "").strip() == "unit":
        return
    config.stash[_ARCHIVE_NOTE] = jvm_archive.ensure_archive()


def pytest_report_header(config: pytest.Config) -> str | None:
    return config.stash.get(_ARCHIVE_NOTE, None)


_ARCHIVE_NOTE = pytest.StashKey[str]()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        tiers = [tier for tier in TIERS if item.get_closest_marker(tier) is not None]
        if len(tiers) > 1:
            raise pytest.UsageError(f"{item.nodeid} is marked {' and '.join(tiers)}: a test has one tier")
        if not tiers:
            # the test's own parameters (not a parametrized fixture's: that fixture may start a process)
            parameters = {
                name.strip()
                for marker in item.iter_markers("parametrize")
                for name in (marker.args[0].split(",") if isinstance(marker.args[0], str) else marker.args[0])
            }
            fixtures = set(getattr(item, "fixturenames", ())) - parameters - PURE_FIXTURES
            item.add_marker("integration" if fixtures else "unit")
    # The end-to-end tests and those marked `early` run first, before the session's peers start:
    # idle JVMs (Kafka 4.x, Hadoop's mini clusters, Spark) cost the long single-process runs of
    # `make demo` and Airflow a third of their time on the 2-core machine when they came last.
    # Then the long units of work, longest first, so the workers end together (tests.support.work_split).
    items.sort(
        key=lambda item: (
            0 if item.get_closest_marker("e2e") or item.get_closest_marker("early") else 1,
            -work_split.expected_seconds(item.nodeid),
        )
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """With ``TEST_TIMELINE`` set (``make test`` sets it), each test's start and end on its worker
    (setup and teardown included) go to that file: ``python -m tests.support.timeline`` reads it."""
    path = os.environ.get(timeline.ENV)
    started, idle = time.time(), timeline.machine_idle() if path else 0.0
    try:
        return (yield)
    finally:
        if path:
            worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
            timeline.record(path, item.nodeid, worker, started, time.time(), timeline.machine_idle() - idle)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """With ``--dist loadfile`` (``make test``), whole files (or the units of files that share a
    peer), in the sorted tests' order (tests.support.work_split); any other ``--dist`` is xdist's own."""
    if config.getvalue("dist") != "loadfile":
        return None
    return work_split.WholeFilesLongestFirst(config, log)


class _UnitTierViolation(RuntimeError):
    pass


@pytest.fixture(autouse=True)
def _unit_tier_starts_no_process(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """In a unit test, starting a process (a peer, a JVM for Spark, a command) raises."""
    if request.node.get_closest_marker("unit") is None:
        return

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise _UnitTierViolation(
            f"{request.node.nodeid} is in the unit tier but started a process ({args[1] if len(args) > 1 else args}):"
            " mark it @pytest.mark.integration"
        )

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
    monkeypatch.setattr(os, "fork", refuse)


@pytest.fixture(scope="session", autouse=True)
def _no_process_left_behind() -> Iterator[None]:
    """After the whole run, nothing the tests started may still run (every peer, broker, Spark
    daemon and command stopped). Leftovers are killed and reported as an error of the run."""
    yield
    deadline = time.monotonic() + 15
    left = descendants()
    while left and time.monotonic() < deadline:  # a stop may still be reaping its children
        time.sleep(0.5)
        left = descendants()
    if left:
        for pid, _ in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
        listing = "\n".join(f"  {pid}: {command[:300]}" for pid, command in left)
        raise AssertionError(f"the test run left {len(left)} process(es) running (now killed):\n{listing}")
