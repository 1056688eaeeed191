"""Tables by name on a real metastore: Spark's embedded one (Derby beside the pipeline's state) and a
standalone Hive metastore service on PostgreSQL, each with a real broker and real Spark.

The scenarios run in a driver of their own (tests.pipelines.tables_scenarios: Hive's settings are
fixed when a session starts): a first run stage by stage, as the Airflow DAG's tasks run it (the
load task registers the raw layer, the publish task the output); a crash at each step between a
commit and its registration, then the next run; a replay whose registration dies between its two
view switches; a reader querying the tables by name throughout, and during the replay a Hive JDBC
client through a Spark Thrift server as well. What must hold: readers by name see whole runs only
(never the files of a run still being published, though a reader of the directories does, nor a
run's new output partitions beside the old rows of the one it replaces: the tables are read after
every change a run makes to the metastore), no partition is ever missing, every table is whole and of one generation at
each reading, and after the next run the metastore matches the manifests exactly (no change
pending). With the metastore down, a run commits its data, fails with an error that names the
metastore, and ``pipelines repair`` registers what it committed.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.pipelines.harness import REPO, oracle, produce, run_cli, write_spec
from tests.support.kafkalog import BrokerProcess
from tests.support.metastore import HiveMetastoreProcess
from tests.support.ports import free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RUN_POINTS = ("commit.after_manifest", "publish.after_file@1", "flow.outputs_shown", "tables.before_view@1")
"""A normal run dies: after its manifest, after the first of its files is in place, after readers
of the output were pointed at its staged rows (before the partition directories are swapped), after
its tables and partitions are registered but before the raw view shows the run."""
EMBEDDED_POINTS = ("flow.outputs_shown",)
"""The embedded metastore runs one point, where readers by name are pointed at staged rows and back
(the metastore's own calls); the others are about the order of steps, which is the same whichever
the metastore, and run on the service."""
REPLAY_POINT = "tables.before_view@2"
"""A replay's registration dies after the raw view switched to the new generation, before the output's."""


def scenarios(metastore: str, workdir: Path, bootstrap: str, points: tuple[str, ...]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "tests.pipelines.tables_scenarios", metastore, str(workdir), bootstrap,
         ",".join(points), REPLAY_POINT],
        capture_output=True, text=True, timeout=600, cwd=REPO, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-6000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("kind", ["embedded", "postgresql"])
def test_readers_by_name_see_whole_runs_and_generations_through_crashes_and_a_replay(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    metastore, points = "embedded", EMBEDDED_POINTS
    if kind == "postgresql":
        metastore, points = request.getfixturevalue("hive_metastore").uri, RUN_POINTS
    with BrokerProcess(tmp_path / "broker") as broker:
        seen = scenarios(metastore, tmp_path, broker.bootstrap, points)

    # stage by stage, as the Airflow DAG's tasks run: the load registers the raw layer, publish the output
    assert seen["stages"] == {
        "load": ["clicks_raw", "clicks_raw__gen0"],
        "transforms": ["clicks_raw", "clicks_raw__gen0"],
        "validate": ["clicks_raw", "clicks_raw__gen0"],
        "publish": ["clicks_raw", "clicks_raw__gen0", "hourly", "hourly__gen0"],
    }
    first = seen["first"]
    assert first["by_name"] == first["truth"] and first["truth"]["raw"] == 120 and first["pending"] == []
    for point in points:
        step = seen[point]
        assert step["crashed"], point
        # the crashed run's rows are not shown by name, though its manifest is committed
        assert step["at_crash"]["by_name"]["raw"] == step["before"]["raw"], point
        # the next run finishes the commit and registers it: the metastore matches the manifests
        assert step["next_run"] == 0, point
        assert step["after"] == step["truth"] and step["truth"]["raw"] == step["before"]["raw"] + 90, point
        assert step["pending"] == [], point
        # read by name after each change to the metastore, through the crashed run and the next:
        # the tables as they were before the run, or with all of it, never a part (the run's new
        # output partitions beside the old rows of the one it replaced, say)
        assert len(step["between_changes"]) >= 3, (point, step["between_changes"])
        for reading in step["between_changes"]:
            assert reading.get("raw") in (step["before"]["raw"], step["after"]["raw"]), (point, reading)
            assert reading.get("hourly") in (step["before"]["hourly"], step["after"]["hourly"]), (point, reading)
    if "publish.after_file@1" in points:  # half of a run's files were in place: a reader of the
        half = seen["publish.after_file@1"]["at_crash"]  # directories saw them, readers by name did not
        assert half["by_path"] > half["by_name"]["raw"]
    # the output's new partitions were shown from their staged rows: already what the run publishes
    # (the view read a table of the run's partitions, which the next run's publish dropped)
    shown = seen["flow.outputs_shown"]
    assert shown["at_crash"]["by_name"]["hourly"] == shown["after"]["hourly"] > shown["before"]["hourly"]
    assert "hourly__gen0__publishing" in shown["at_crash"]["tables"], shown["at_crash"]
    # a load's sync before the publish runs again leaves the view where the publish left it (not
    # back on the old rows): the publish settles it
    after_a_load = shown["at_crash"]["after_a_load"]
    assert after_a_load["by_name"]["hourly"] == shown["at_crash"]["by_name"]["hourly"], after_a_load
    assert "hourly__gen0__publishing" in after_a_load["tables"], after_a_load
    assert all(not t.endswith("__publishing") for point in points for t in seen[point]["tables"]), seen
    # through every crash and run, no reading by name was smaller than the one before (rows only
    # came: a partition missing for a moment, while publish swapped it, would have been)
    readings = seen["readings_during_runs"]
    assert len(readings) > 3, readings
    for earlier, later in itertools.pairwise(readings):
        assert later["raw"] >= earlier["raw"] and later["hourly"] >= earlier["hourly"], (earlier, later)

    replay = seen["replay"]
    old, new = replay["before"], replay["truth"]
    assert new["raw"] == old["raw"] - 2  # the two events without one are quarantined now
    assert new["hourly"] == new["raw"] and old["hourly"] > old["raw"]  # the bug counted one too many per hour
    assert replay["crashed"]
    assert replay["at_crash"] == {"raw": new["raw"], "hourly": old["hourly"]}  # one view switched, whole
    assert replay["next_run"] == 0 and replay["after"] == new and replay["pending"] == []
    assert replay["readings"], "the reader read nothing while the replay ran"
    for reading in replay["readings"]:  # each table whole and of one generation, every time
        assert reading["raw"] in (old["raw"], new["raw"]), reading
        assert reading["hourly"] in (old["hourly"], new["hourly"]), reading
    # the same for a Hive JDBC client through the Thrift server: no error (a name never missing),
    # each reading whole and of one generation, and once the run is done, the new one
    jdbc = replay["jdbc_readings"]
    assert len(jdbc) >= 3 and all("error" not in reading for reading in jdbc), jdbc
    for reading in jdbc:
        assert reading["raw"] in (old["raw"], new["raw"]) and reading["hourly"] in (old["hourly"], new["hourly"]), jdbc
    assert jdbc[0] == old and jdbc[-1] == new, jdbc
    # the generation replaced last stays (until gc) beside the current one; the names are views
    assert replay["tables"] == [
        "clicks_raw", "clicks_raw__gen0", "clicks_raw__gen1", "hourly", "hourly__gen0", "hourly__gen1",
    ]  # fmt: skip


def test_with_the_metastore_down_a_run_commits_fails_clearly_and_repair_registers(
    tmp_path: Path, hive_metastore: HiveMetastoreProcess
) -> None:
    """Also: with no ``spark.sql.warehouse.dir``, the database the pipeline creates is placed beside
    its state, and nothing is written into the directory the commands run in."""
    dead = f"thrift://127.0.0.1:{free_port()}"
    here = tmp_path / "working-directory"
    here.mkdir()
    with BrokerProcess(tmp_path / "broker") as broker:
        produce(broker.bootstrap, "events", 80, partitions=2)

        def spec(metastore: str) -> Path:
            return write_spec(tmp_path, broker.bootstrap, tmp_path / "raw", name="ops_events",
                              tables={"metastore": metastore, "database": "ops"})  # fmt: skip

        failed = run_cli("run", str(spec(dead)), "--master", "local[2]", cwd=here)
        assert failed.returncode == 1, failed.stderr
        error = [line for line in failed.stderr.splitlines() if line.startswith("error:")]
        assert len(error) == 1 and f"the Hive metastore at {dead}" in error[0], failed.stderr
        assert "tables not registered" in error[0] and "committed" in error[0] and "pipelines repair" in error[0]
        assert oracle(tmp_path / "raw", broker.bootstrap)["rows"] == 80  # the data is committed all the same

    path = spec(hive_metastore.uri)
    pending = run_cli("tables", str(path), "--json", cwd=here)
    assert pending.returncode == 1, pending.stderr
    assert pending.stdout, pending.stderr
    listed = json.loads(pending.stdout)
    assert listed["metastore"] == f"the Hive metastore at {hive_metastore.uri}"
    assert [t["name"] for t in listed["tables"]] == ["ops.ops_events_raw"]
    assert listed["pending"][0] == "create database ops"  # then its table, partitions and view
    assert any(what.startswith("create view ops.ops_events_raw") for what in listed["pending"]), listed
    assert listed["tables"][0]["pending"], listed  # the table's own pending changes, too

    repaired = run_cli("repair", str(path), cwd=here)
    assert repaired.returncode == 0, repaired.stderr
    assert "done: create view ops.ops_events_raw" in repaired.stdout
    query = "SELECT COUNT(*) AS n, COUNT(DISTINCT `offset`, `partition`) AS d FROM ops_events_raw"
    counted = run_cli("sql", str(path), query, "--json", cwd=here)
    assert counted.returncode == 0, counted.stderr
    assert json.loads(counted.stdout.strip().splitlines()[-1]) == {"n": 80, "d": 80}
    described = run_cli("sql", str(path), "DESCRIBE DATABASE ops", "--json", cwd=here)
    assert described.returncode == 0, described.stderr
    facts = {row["info_name"]: row["info_value"] for row in map(json.loads, described.stdout.strip().splitlines())}
    assert facts["Location"] == f"file:{tmp_path / 'raw' / '_pipeline' / 'databases' / 'ops.db'}", facts
    assert list(here.iterdir()) == [], "a command wrote into the directory it ran in"
