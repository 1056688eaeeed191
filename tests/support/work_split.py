"""How ``make test`` splits the run between its two workers (pytest-xdist, ``--dist loadfile``).

A unit of work is one test file, so each file's module-scoped peers start once, on one worker;
except where files share a slow peer that only they use, which makes them one unit: tests/hadoop's
files share one package-scoped pair of mini clusters (HDFS and YARN), and the tables tests and the
metastore's own share the session's Hive metastore service (PostgreSQL and a JVM), which would
otherwise start on both workers, or again each time a worker came back to them.

Units go out in the order tests/conftest.py sorts the tests in: the end-to-end and ``early`` tests
first (the longest single runs, the newcomer demos and Airflow's DAG run, start at once on different
workers), then the long units longest first (``LONG_UNITS``), then the rest in collection order,
each to the worker that is nearly done with its last one. Longest first is what keeps the two
workers' ends together: when the tables tests came last, one worker ran them alone for two minutes
while the other had finished. xdist's own loadfile orders units by their number of tests, which
says nothing of their time (tests/kafkalog's largest files are the quickest).
"""

from __future__ import annotations

import pytest
from xdist.scheduler import LoadScopeScheduling
from xdist.workermanage import Producer

SHARED_PACKAGES = ("tests/hadoop/",)
"""Packages whose files share a package-scoped fixture that is slow to start: one unit each."""

SHARED_PEERS = {
    "tests/peers/test_metastore.py": "the Hive metastore's files",
    "tests/pipelines/catalog/test_tables.py": "the Hive metastore's files",
}
"""Files that share a session-scoped peer no other file uses (``hive_metastore``): one unit."""

LONG_UNITS = {
    "tests/hadoop/": 610,
    "the Hive metastore's files": 270,
    "tests/pipelines/replay/test_replay.py": 175,
    "tests/pipelines/app/test_cli_pipelines.py": 110,
    "tests/pipelines/app/test_cluster.py": 105,
    "tests/kafkalog/protocol/test_malformed.py": 100,
    "tests/pipelines/ingest/test_load.py": 95,
    "tests/pipelines/flow/test_flow.py": 85,
    "tests/kafkalog/mirror/test_mirror_interop.py": 75,
    "tests/kafkalog/server/test_real_clients.py": 75,
    "tests/kafkalog/registry/test_zk_brokers.py": 65,
    "tests/kafkalog/mirror/test_mirror.py": 65,
    "tests/kafkalog/protocol/test_roundtrip.py": 55,
    "tests/kafkalog/client/test_group_consumer_brokers.py": 45,
    "tests/kafkalog/client/test_both_brokers.py": 45,
    "tests/kafkalog/server/test_admin_tools.py": 45,
    # 30 s on Kafka 4.x; on kafkalog 80 s while it refuses transactional ids (every client waits out its timeout)
    "tests/kafkalog/server/test_transactions_clients.py": 45,
    "tests/pipelines/reporting/test_report.py": 45,
    "tests/test_packaging.py": 40,
}
"""Seconds each long unit took in a full run on the 2-core machine (two workers; the time from each
test's start to its end, summed per unit). Only the order matters: a unit not listed counts as
short; refresh the figures when a unit's time changes much (``--durations`` names the long tests)."""


def unit_of(nodeid: str) -> str:
    """The unit of work a test belongs to: its file, its shared package, or its shared peer's files."""
    path = nodeid.split("::", 1)[0]
    if path in SHARED_PEERS:
        return SHARED_PEERS[path]
    return next((package for package in SHARED_PACKAGES if path.startswith(package)), path)


def expected_seconds(nodeid: str) -> int:
    """How long the test's unit takes (0 for a short one): the order units go out in."""
    return LONG_UNITS.get(unit_of(nodeid), 0)


class WholeFilesLongestFirst(LoadScopeScheduling):
    """xdist's scope scheduling with ``unit_of`` as the scope, in the order of the sorted tests."""

    def __init__(self, config: pytest.Config, log: Producer | None = None) -> None:
        super().__init__(config, log)
        # read by LoadScopeScheduling.schedule(): keep the tests' order, not the test count's
        config.option.loadscopereorder = False

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(nodeid)
