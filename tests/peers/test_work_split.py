"""How the run is split between workers (tests.support.work_split) names only what exists: a unit
listed as long or a file listed as sharing a peer that was renamed away would silently stop
counting, and the workers' ends would drift apart again."""

from __future__ import annotations

from tests.support.installed import REPO
from tests.support.work_split import LONG_UNITS, SHARED_PACKAGES, SHARED_PEERS, expected_seconds, unit_of


def test_every_unit_named_exists() -> None:
    for path in (*SHARED_PEERS, *SHARED_PACKAGES):
        assert (REPO / path).exists(), path
    for unit in LONG_UNITS:
        assert unit in SHARED_PEERS.values() or (REPO / unit).exists(), f"{unit} is listed as long but does not exist"


def test_files_sharing_a_peer_are_one_unit_and_use_it() -> None:
    for path, unit in SHARED_PEERS.items():
        assert unit_of(f"{path}::test_x") == unit
        assert "hive_metastore" in (REPO / path).read_text(), f"{path} is grouped for a peer it does not use"
    assert unit_of("tests/hadoop/test_yarn.py::test_x") == unit_of("tests/hadoop/test_hdfs.py::test_y")
    assert unit_of("tests/pipelines/flow/test_flow.py::test_x") == "tests/pipelines/flow/test_flow.py"


def test_long_units_sort_before_short_ones() -> None:
    flow = expected_seconds("tests/pipelines/flow/test_flow.py::t")
    assert expected_seconds("tests/hadoop/test_yarn.py::t") > flow > 0
    assert expected_seconds("tests/kafkalog/test_cli_clients.py::t") == 0
