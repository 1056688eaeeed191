"""Exactly-once on a real HDFS when things break (reliability rows S2, S5, S6).

- The driver killed at every step of the commit protocol (``pipelines run`` in a child process that
  dies with ``os._exit`` at the crash point), then the retry: the oracle finds every offset once,
  nothing visible that no manifest lists. The same test on a local disk is the unit tier's
  (tests/pipelines/ingest/test_exactly_once_core.py, every point) and tests/pipelines/app/test_cli_pipelines.py.
- The driver and its executors SIGKILLed while they write: HDFS keeps the dead writer's files open
  (the NameNode holds their leases for up to an hour); the retry commits exactly once beside them and
  removes them with the dead run's staging.
- The NameNode restarted in the middle of a load (ridden out), in safe mode for a while (waited out,
  saying so), in safe mode for longer than the wait (the run fails naming its first cause); the only
  DataNode stopped.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from pipelines.config.pipeline import load_spec
from pipelines.ingest.run import PipelineRun
from pipelines.ledger.state import PipelineState
from tests.hadoop.on_hdfs import hdfs_directory, move_to_hdfs, webhdfs
from tests.pipelines.harness import oracle, produce, run_cli, start_run, write_spec
from tests.support.hadoop import HadoopCluster
from tests.support.kafkalog import BrokerProcess

pytestmark = pytest.mark.integration

CRASH_POINTS = [
    "plan.after_store",
    "load.after_staging",
    "commit.after_manifest",
    "publish.after_file@2",
    "publish.after_files",
]


def _pipeline(tmp_path: Path, broker: BrokerProcess, hadoop: HadoopCluster, name: str, **spec: Any) -> tuple[Path, str]:
    root = hdfs_directory(hadoop, name)
    return move_to_hdfs(write_spec(tmp_path, broker.bootstrap, tmp_path / "raw", **spec), hadoop, root), f"{root}/raw"


def _small_fetches(broker: BrokerProcess) -> dict[str, Any]:
    """A source of many small fetches: the load writes for seconds, long enough to interrupt."""
    return {"bootstrap": broker.bootstrap, "fetch_max_bytes": 1024}


def _until_writing(hadoop: HadoopCluster, raw: str, child: subprocess.Popen[bytes], log: Path) -> list[str]:
    """Wait until the run ``child`` holds Parquet files open under ``raw``; returns them."""
    deadline = time.monotonic() + 120
    while not (writing := [f for f in hadoop.open_files(raw) if f.endswith(".parquet")]):
        assert child.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, "the load never started writing"
        time.sleep(0.2)
    return writing


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_the_driver_killed_at_each_commit_step_on_hdfs_then_a_rerun_loads_exactly_once(
    tmp_path: Path, broker: BrokerProcess, spark: Any, hadoop: HadoopCluster, point: str
) -> None:
    produce(broker.bootstrap, "events", 1200)
    path, raw = _pipeline(tmp_path, broker, hadoop, point.replace("@", "-"))
    storage = webhdfs(hadoop)
    crashed = run_cli("run", str(path), "--master", "local[2]", "--quiet", env={"PIPELINES_CRASH_AT": point})
    assert crashed.returncode == 137, crashed.stderr[-2000:]
    assert f"dies at {point}" in crashed.stderr
    state = PipelineState(storage, raw)
    committed_before = state.committed_seqs()
    assert committed_before == ([1] if point.startswith(("commit.after", "publish")) else [])
    result = PipelineRun(load_spec(path), spark).run()
    assert result.status == ("up-to-date" if committed_before else "committed")
    totals = oracle(raw, broker.bootstrap, storage=storage)
    assert totals["rows"] == 1200
    assert totals["seqs"] == [1]
    assert storage.list(f"{raw}/_pipeline/staging") == []


def test_a_driver_killed_mid_write_leaves_open_files_and_the_rerun_loads_exactly_once(
    tmp_path: Path, broker: BrokerProcess, spark: Any, hadoop: HadoopCluster
) -> None:
    produce(broker.bootstrap, "events", 3000)
    path, raw = _pipeline(tmp_path, broker, hadoop, "killed", source=_small_fetches(broker))
    log = tmp_path / "driver.log"
    child = start_run(path, log)
    writing = _until_writing(hadoop, raw, child, log)
    os.killpg(child.pid, signal.SIGKILL)  # the driver, its JVM and the executors' workers, mid-write
    child.wait(30)
    assert all("/_pipeline/staging/" in f for f in writing), writing
    # the dead writer's files stay open: the NameNode keeps its leases (soft limit a minute, hard an hour)
    assert set(writing) <= set(hadoop.open_files(raw))
    storage = webhdfs(hadoop)
    assert PipelineState(storage, raw).committed_seqs() == []
    result = PipelineRun(load_spec(path), spark).run()
    assert result.status == "committed"
    assert oracle(raw, broker.bootstrap, storage=storage)["rows"] == 3000
    assert hadoop.open_files(raw) == [], "the dead run's open files went with its staging"
    assert storage.list(f"{raw}/_pipeline/staging") == []


def test_a_namenode_restarted_mid_load_is_ridden_out_and_the_run_commits_exactly_once(
    tmp_path: Path, broker: BrokerProcess, spark: Any, hadoop: HadoopCluster
) -> None:
    """Hadoop's client, given its retry policy (pipelines.storage.hadoop), waits while the NameNode
    is away and then in safe mode: the tasks' writes and the driver's commit go on after it."""
    produce(broker.bootstrap, "events", 3000)
    path, raw = _pipeline(tmp_path, broker, hadoop, "namenode", source=_small_fetches(broker))
    log = tmp_path / "driver.log"
    child = start_run(path, log)
    try:
        _until_writing(hadoop, raw, child, log)
        hadoop.command("namenode restart")
        code = child.wait(300)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
    assert code == 0, log.read_text()[-3000:]
    storage = webhdfs(hadoop)
    assert PipelineRun(load_spec(path), spark).run().status == "up-to-date"
    totals = oracle(raw, broker.bootstrap, storage=storage)
    assert totals["rows"] == 3000 and totals["seqs"] == [1]


def test_a_namenode_in_safe_mode_is_waited_out_naming_what_the_run_waits_for(
    tmp_path: Path, broker: BrokerProcess, hadoop: HadoopCluster
) -> None:
    produce(broker.bootstrap, "events", 300)
    path, raw = _pipeline(tmp_path, broker, hadoop, "safemode-wait")
    log = tmp_path / "driver.log"
    hadoop.command("namenode safemode enter")
    try:
        child = start_run(path, log)
        deadline = time.monotonic() + 120
        while "waiting for the NameNode" not in log.read_text():
            assert child.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
    finally:
        hadoop.command("namenode safemode leave")
    assert child.wait(300) == 0, log.read_text()[-3000:]
    waiting = [line for line in log.read_text().splitlines() if "waiting for the NameNode" in line]
    assert f"creating {raw}/_pipeline/" in waiting[0] and "safe mode" in waiting[0], waiting
    totals = oracle(raw, broker.bootstrap, storage=webhdfs(hadoop))
    assert totals["rows"] == 300 and totals["seqs"] == [1]


def test_safe_mode_past_the_wait_fails_naming_the_first_cause_and_the_lease_left_after_it(
    tmp_path: Path, broker: BrokerProcess, spark: Any, hadoop: HadoopCluster
) -> None:
    """The NameNode enters safe mode mid-load and stays past the client's (shortened) wait: the
    load fails, and so do the removal of its staging and the release of its lease. The error line
    names the load's failure; the lease left behind is the line after it."""
    produce(broker.bootstrap, "events", 3000)
    path, raw = _pipeline(tmp_path, broker, hadoop, "safemode-fail", source=_small_fetches(broker))
    log = tmp_path / "driver.log"
    child = start_run(path, log, "--conf", "spark.hadoop.dfs.client.retry.policy.spec=300,2")
    try:
        _until_writing(hadoop, raw, child, log)
        hadoop.command("namenode safemode enter")
        code = child.wait(300)
    finally:
        hadoop.command("namenode safemode leave")
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
    output = log.read_text()
    assert code == 1, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    lines = output.splitlines()
    (error,) = [i for i, line in enumerate(lines) if line.startswith("error:")]
    assert "SafeModeException" in lines[error] and "lease" not in lines[error], lines[error]
    assert ": :" not in lines[error] and "failed: :" not in output, lines[error]
    assert lines[error + 1].startswith("also: the lease of attempt "), lines[error:]
    assert "deleting hdfs://" in lines[error + 1] and "SafeModeException" in lines[error + 1], lines[error + 1]
    result = PipelineRun(load_spec(path), spark).run()
    assert result.status == "committed"
    totals = oracle(raw, broker.bootstrap, storage=webhdfs(hadoop))
    assert totals["rows"] == 3000 and totals["seqs"] == [1]


def test_with_the_only_datanode_stopped_the_run_fails_clearly_and_the_retry_commits(
    tmp_path: Path, broker: BrokerProcess, spark: Any, hadoop: HadoopCluster
) -> None:
    produce(broker.bootstrap, "events", 400)
    path, raw = _pipeline(tmp_path, broker, hadoop, "datanode")
    hadoop.command("datanode stop 0")
    try:
        failed = run_cli("run", str(path), "--master", "local[2]")
    finally:
        hadoop.command("datanode start 0")
    assert failed.returncode == 1, failed.stderr[-3000:]
    assert "Traceback" not in failed.stderr
    error = [line for line in failed.stderr.splitlines() if line.startswith("error:")]
    assert error and "minReplication" in error[-1], failed.stderr[-3000:]
    storage = webhdfs(hadoop)
    assert PipelineState(storage, raw).committed_seqs() == []
    result = PipelineRun(load_spec(path), spark).run()
    assert result.status == "committed"
    assert oracle(raw, broker.bootstrap, storage=storage)["rows"] == 400
