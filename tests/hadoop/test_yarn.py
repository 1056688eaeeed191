"""The load job on YARN: ``spark-submit --master yarn jobs/load_warehouse.py`` on the MiniYARNCluster,
the raw layer on the MiniDFSCluster.

The executors run in YARN containers with a Python that has the third-party libraries but not this
project (tests.support.spark.node_python): our code and its C kernels reach them only through the
``--archives`` tarball (pipelines.app.ship), and each executor's import log says so. One executor is
killed by YARN (the NodeManager's SIGKILL) while its tasks write: Spark asks YARN for another and
retries the tasks; the dead writer's files, which HDFS keeps open under its lease, never become
data. Then a driver killed on YARN after its tasks staged: the next run commits exactly once.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from pipelines.app.ship import ARCHIVE_NAME, build_archive, submit_options
from pipelines.config.pipeline import load_spec
from pipelines.ingest.run import PipelineRun
from pipelines.ledger.state import PipelineState
from tests.hadoop.on_hdfs import hdfs_directory, move_to_hdfs, webhdfs
from tests.pipelines.harness import REPO, oracle, produce, write_spec
from tests.support.hadoop import HadoopCluster
from tests.support.kafkalog import BrokerProcess
from tests.support.spark import explain, imports_dir, node_python, spark_submit

pytestmark = pytest.mark.integration

EVENTS = 6000
LOADED_FILE = re.compile(
    r"^# (?:code object from|extension module '[\w.]+' loaded from) '?(\S*/(?:pipelines|kafkalog)/[^'\s]+)'?$",
    re.MULTILINE,
)
"""``python -v``'s line for a module file it loaded (code object, or extension module) of ours."""


def yarn_command(hadoop: HadoopCluster, ship: list[str], python: Path, pipeline: Path, *args: str) -> list[str]:
    """spark-submit of the load job to YARN (client mode: the driver here, executors in containers
    running ``python``), our code shipped by ``ship``."""
    conf = {
        **hadoop.yarn_submit_conf(),
        "spark.executorEnv.PYSPARK_PYTHON": str(python),
        "spark.executor.cores": "2",
        "spark.task.maxFailures": "4",
        "spark.sql.shuffle.partitions": "4",
        "spark.ui.showConsoleProgress": "false",
    }
    confs = [arg for key, value in conf.items() for arg in ("--conf", f"{key}={value}")]
    job = [str(REPO / "jobs" / "load_warehouse.py"), "--pipeline", str(pipeline), *args]
    return [str(spark_submit()), "--master", "yarn", "--deploy-mode", "client", *ship, *confs, *job]


def yarn_env(hadoop: HadoopCluster, python: Path) -> dict[str, str]:
    # the driver's own planner workers find our code as the installed project would on the
    # submitting machine (PYTHONPATH); the containers get only the archive (executorEnv)
    return {
        **os.environ,
        **hadoop.client_env(),
        "PYSPARK_PYTHON": str(python),
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONPATH": str(REPO),
    }


def container_imports(node: Path) -> list[tuple[str, str]]:
    """(file, container) of every module file of ours (under a ``pipelines/`` or ``kafkalog/``
    directory: sources, bytecode, extension modules) that a Python in a YARN container loaded."""
    found = []
    for log in sorted(imports_dir(node).glob("python-*.log")):
        text = log.read_text(errors="replace")
        cwd = text.partition("\n")[0].removeprefix("# cwd: ")
        container = next((part for part in cwd.split("/") if part.startswith("container_")), None)
        if container is not None:
            found += [(path, container) for path in LOADED_FILE.findall(text)]
    return found


def running_application(hadoop: HadoopCluster, log: Path, timeout: float = 120) -> str:
    """The id of the one RUNNING Spark application on YARN (``log``: the submitter's, for a failure)."""
    web = hadoop.addresses["resourcemanager_web"]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"http://{web}/ws/v1/cluster/apps?states=RUNNING", timeout=30) as answer:
            apps = (json.load(answer).get("apps") or {}).get("app", [])
        found = [app["id"] for app in apps if app["applicationType"] == "SPARK"]
        if found:
            return str(found[0])
        time.sleep(0.5)
    raise AssertionError(f"no running Spark application on YARN after {timeout:.0f} s\n{log.read_text()[-4000:]}")


def application(hadoop: HadoopCluster, app_id: str) -> dict[str, object]:
    web = hadoop.addresses["resourcemanager_web"]
    with urllib.request.urlopen(f"http://{web}/ws/v1/cluster/apps/{app_id}", timeout=30) as answer:
        found: dict[str, object] = json.load(answer)["app"]
    return found


def test_the_load_on_yarn_survives_an_executor_killed_by_yarn_and_a_killed_driver(
    tmp_path: Path, broker: BrokerProcess, hadoop: HadoopCluster, spark: Any
) -> None:
    root = hdfs_directory(hadoop, "yarn")
    raw = f"{root}/raw"
    produce(broker.bootstrap, "events", EVENTS)
    source = {"bootstrap": broker.bootstrap, "fetch_max_bytes": 2048}  # small fetches: writes last seconds
    pipeline = move_to_hdfs(write_spec(tmp_path, broker.bootstrap, tmp_path / "raw", source=source), hadoop, root)
    build_archive(tmp_path / "dist" / ARCHIVE_NAME)
    ship = submit_options(tmp_path / "dist", archive=True)
    python = node_python(tmp_path / "node")
    storage = webhdfs(hadoop)

    # run 1: YARN kills the executor while its tasks write; Spark gets another and retries them
    command = yarn_command(hadoop, ship, python, pipeline, "--run-id", "first")
    log = tmp_path / "first.log"
    with log.open("w") as output:
        first = subprocess.Popen(
            command, env=yarn_env(hadoop, python), cwd=tmp_path, stdout=output, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    try:
        app_id = running_application(hadoop, log)
        deadline = time.monotonic() + 180
        while not (writing := [f for f in hadoop.open_files(raw) if f.endswith(".parquet")]):
            assert first.poll() is None, log.read_text()[-4000:]
            assert time.monotonic() < deadline, "the executors never started writing\n" + log.read_text()[-4000:]
            time.sleep(0.2)
        (executor,) = hadoop.containers(app_id)
        hadoop.kill_container(executor)
        code = first.wait(300)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
    assert code == 0, log.read_text()[-6000:]
    assert all("/_pipeline/staging/" in f for f in writing), writing
    app = application(hadoop, app_id)
    assert (app["state"], app["finalStatus"]) == ("FINISHED", "SUCCEEDED"), app
    totals = oracle(raw, broker.bootstrap, storage=storage)
    assert totals["rows"] == EVENTS and totals["seqs"] == [1]
    assert hadoop.open_files(raw) == [], "the killed executor's open files outlived the run"
    state = PipelineState(storage, raw)
    # the executors (two containers: the killed one and its replacement) imported our code from the
    # archive YARN unpacked for them, the C kernels included, and from nowhere else (Spark's writer
    # staged the rows, so the manifest cannot say which kernels the tasks ran: their logs do)
    loaded = container_imports(tmp_path / "node")
    assert len({container for _, container in loaded}) >= 2, loaded[:5]
    files = {path.split("/pipelines_code/")[-1] for path, _ in loaded}
    assert any(f.startswith("pipelines/executor/source") or "pipelines/executor/__pycache__/source" in f for f in files)
    assert [f for f in files if f.startswith("kafkalog/record/_speedups") and f.endswith(".so")], "no C kernels"
    outside = [path for path, _ in loaded if "/pipelines_code/" not in path]
    assert not outside, f"executors loaded our modules from outside the archive: {outside[:5]}"

    # run 2: the driver dies on YARN after its tasks staged; the next run commits exactly once
    produce(broker.bootstrap, "events", EVENTS // 3, first=EVENTS)
    crashed = subprocess.run(
        yarn_command(hadoop, ship, python, pipeline, "--run-id", "second", "--quiet"),
        env={**yarn_env(hadoop, python), "PIPELINES_CRASH_AT": "load.after_staging"},
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert crashed.returncode == 137, explain(crashed.stdout, crashed.stderr)
    assert state.committed_seqs() == [1]
    # the next run (here in this process's Spark: what matters is what the dead driver left on HDFS)
    assert PipelineRun(load_spec(pipeline), spark).run(run_id="second").status == "committed"
    totals = oracle(raw, broker.bootstrap, storage=storage)
    assert totals["rows"] == EVENTS + EVENTS // 3 and totals["seqs"] == [1, 2]
    assert state.manifest(2).run_id == "second"
    assert storage.list(f"{raw}/_pipeline/staging") == []


def test_the_airflow_dag_runs_its_load_on_yarn(tmp_path: Path, broker: BrokerProcess, hadoop: HadoopCluster) -> None:
    """``airflow dags test`` of a pipeline whose schedule says ``spark_master: yarn``, in the
    environment docs/operations.md documents for YARN: HADOOP_CONF_DIR, and a SPARK_CONF_DIR whose
    spark-defaults.conf ships the archive (``spark.archives``) and sizes the containers."""
    root = hdfs_directory(hadoop, "airflow")
    raw = f"{root}/raw"
    produce(broker.bootstrap, "events", 1000)
    conf, dags, spark_conf = tmp_path / "conf", tmp_path / "dags", tmp_path / "spark-conf"
    for directory in (conf, dags, spark_conf):
        directory.mkdir()
    move_to_hdfs(write_spec(conf, broker.bootstrap, tmp_path / "raw", schedule={"spark_master": "yarn"}), hadoop, root)
    (dags / "events_raw.py").write_text(
        'from pipelines.app.airflow import dag_for\n\ndag = dag_for("events_raw.yaml")\n'
    )
    archive = build_archive(tmp_path / "dist" / ARCHIVE_NAME)
    defaults = {
        **hadoop.yarn_submit_conf(),
        "spark.archives": f"{archive}#pipelines_code",
        "spark.executorEnv.PYTHONPATH": "pipelines_code",
    }
    (spark_conf / "spark-defaults.conf").write_text("".join(f"{k} {v}\n" for k, v in defaults.items()))
    env = {
        **os.environ,
        **hadoop.client_env(),
        "SPARK_CONF_DIR": str(spark_conf),
        "PIPELINES_CONF_DIR": str(conf),
        "AIRFLOW_HOME": str(tmp_path / "airflow-home"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    }
    airflow = str(Path(sys.executable).with_name("airflow"))
    migrate = subprocess.run(
        [airflow, "db", "migrate"], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert migrate.returncode == 0, migrate.stderr[-3000:]
    done = subprocess.run(
        [airflow, "dags", "test", "pipeline_events_raw", "2026-05-04T11:00:00+00:00"],
        env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    totals = oracle(raw, broker.bootstrap, storage=webhdfs(hadoop))
    assert totals["rows"] == 1000 and totals["seqs"] == [1]
    assert PipelineState(webhdfs(hadoop), raw).manifest(1).run_id == "airflow-20260504T110000"
    applications = re.findall(r"application_\d+_\d+", output)
    assert applications, "the load task's log names no YARN application\n" + output[-4000:]
    app = application(hadoop, applications[-1])
    assert (app["state"], app["finalStatus"], app["applicationType"]) == ("FINISHED", "SUCCEEDED", "SPARK"), app
