"""How ``make test`` splits the run between its two workers (pytest-xdist, ``--dist loadfile``).

A unit of work is one test file, so each file's module-scoped peers start once, on one worker;
except that the files of a package in ``SHARED_PACKAGES`` form one unit: tests/hadoop's files share
one package-scoped pair of mini clusters (HDFS and YARN), which would otherwise start on both
workers, and start again each time a worker came back to the package after another file.

Units go out in collection order, which tests/conftest.py sorts so that the end-to-end and
``early`` tests come first; xdist's own loadfile orders units by their number of tests, which says
nothing of their time (tests/kafkalog's largest files are the quickest). So the longest single runs
(the newcomer demos, Airflow's DAG run) start at once, on different workers, and the many short
files fill in behind them.
"""

from __future__ import annotations

import pytest
from xdist.scheduler import LoadScopeScheduling
from xdist.workermanage import Producer

# Packages whose files share a package-scoped fixture that is slow to start: one unit each.
SHARED_PACKAGES = ("tests/hadoop/",)


class WholeFilesInCollectionOrder(LoadScopeScheduling):
    """xdist's scope scheduling with a file (or a shared package) as the scope, in collection order."""

    def __init__(self, config: pytest.Config, log: Producer | None = None) -> None:
        super().__init__(config, log)
        # read by LoadScopeScheduling.schedule(): keep the order of collection, not the test count's
        config.option.loadscopereorder = False

    def _split_scope(self, nodeid: str) -> str:
        path = nodeid.split("::", 1)[0]
        return next((package for package in SHARED_PACKAGES if path.startswith(package)), path)
