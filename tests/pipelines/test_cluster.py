"""The load job as a cluster runs it: spark-submit of jobs/load_warehouse.py to a real Spark standalone
master and worker on loopback, with our code shipped as the ``--py-files`` zip of ``pipelines.app.ship``.

The venv has this project installed (editable), so a job could pass by importing it from there. The
executors here run the venv's interpreter and libraries WITHOUT the install: ``python -S`` (no site
hooks, so no editable finder) with a copy of site-packages that leaves the project's entries out. A
cluster node that has never seen this project looks like that. Their Python also runs verbose (``-v``),
so each executor's log says where every module came from, and the test reads it: every ``pipelines``
and ``kafkalog`` module the executors imported came from the shipped zip, and the C kernels did not
load (an extension module cannot be imported from a zip; the pure-Python twin ran).
"""

from __future__ import annotations

import os
import re
import signal
import stat
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from pipelines.app.ship import build_zip
from tests.pipelines.harness import REPO, oracle, produce, write_spec
from tests.support.kafkalog import BrokerProcess
from tests.support.spark import SPARK_HOME, spark_cluster, spark_submit, worker_dir

EVENTS = 20_000
SUBMIT_TIMEOUT = 180.0
SITE_PACKAGES = Path(sysconfig.get_paths()["purelib"])
OUR_INSTALL = re.compile(r"^(__editable__.*kafkalog_pipelines.*|kafkalog_pipelines-.*\.dist-info|kafkalog|pipelines)$")
VERBOSE_IMPORT = re.compile(r"^import '((?:pipelines|kafkalog)(?:\.\w+)*)' # (.*)$", re.MULTILINE)
ZIP_IN_LOADER = re.compile(r'^<zipimporter object "(.+?\.zip)/')
EXTENSION_LOADED = re.compile(r"^# extension module '(kafkalog[\w.]*)' loaded from", re.MULTILINE)


def node_python(directory: Path) -> Path:
    """An interpreter like a cluster node's: the venv's Python and third-party libraries, but not this
    project (``-S`` skips the .pth hooks, among them the editable finder; the libraries come from a
    directory of links to site-packages that leaves our entries out).

    It runs verbose (``-v``): each process logs every import, and where from, to its own file in
    ``imports_dir(directory)``, not to stderr: Spark reads a starting Python worker's stderr only
    once the worker has reported its port, and a full pipe buffer before that is a deadlock."""
    libraries = node_libraries(directory)
    imports_dir(directory).mkdir()
    script = directory / "python"
    script.write_text(
        "#!/bin/sh\n"
        f'log="{imports_dir(directory)}/python-$$.log"\n'
        'echo "# cwd: $PWD" >"$log"\n'
        f'export PYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}{libraries}"\n'
        f'exec "{sys.executable}" -S -v "$@" 2>>"$log"\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return script


def node_libraries(directory: Path) -> Path:
    """A directory of links to every entry of site-packages but this project's installation."""
    libraries = directory / "site-packages"
    libraries.mkdir(parents=True)
    for entry in SITE_PACKAGES.iterdir():
        if not OUR_INSTALL.match(entry.name) and entry.suffix != ".pth":
            (libraries / entry.name).symlink_to(entry)
    return libraries


def imports_dir(directory: Path) -> Path:
    return directory / "imports"


def submit(
    master: str, py_files: Path, executor_python: Path, pipeline: Path, cwd: Path
) -> subprocess.CompletedProcess[str]:
    """spark-submit of jobs/load_warehouse.py in client mode; the driver runs the venv's Python.

    Run from ``cwd``, not the repo: ``python -m`` puts the working directory first on sys.path."""
    conf = {
        "spark.executorEnv.PYSPARK_PYTHON": str(executor_python),
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.executor.memory": "1g",
        "spark.sql.shuffle.partitions": "4",
    }
    command = [str(spark_submit()), "--master", master, "--py-files", str(py_files)]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    command += [str(REPO / "jobs" / "load_warehouse.py"), "--pipeline", str(pipeline), "--quiet"]
    env = {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_CONF_DIR": str(cwd / "conf"),
        "SPARK_LOCAL_DIRS": str(cwd / "local"),
        "SPARK_LOCAL_IP": "127.0.0.1",
        # the Python of the application's workers (executors, and the driver JVM's planner workers)
        "PYSPARK_PYTHON": str(executor_python),
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    for directory in ("conf", "local"):
        (cwd / directory).mkdir(parents=True, exist_ok=True)
    return run_in_group(command, cwd=cwd, env=env, timeout=SUBMIT_TIMEOUT)


def run_in_group(
    command: list[str], *, cwd: Path, env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    """Run ``command`` in its own process group; on timeout kill the whole group (spark-submit's JVM
    and the driver's Python under it) and fail with the output so far."""
    with subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    ) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            stdout, stderr = process.communicate()
            pytest.fail(f"timed out after {timeout:.0f} s: {command}\n" + explain(stdout, stderr))
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def executor_imports(node: Path, spark_base: Path) -> list[tuple[str, str, Path]]:
    """(module, loader, working directory) of every import of ours in the node Pythons that executors
    ran (their working directory is the executor's, under the worker's), not in those that the
    driver's JVM ran for planning."""
    found = []
    for path in sorted(imports_dir(node).glob("python-*.log")):
        text = path.read_text(errors="replace")
        cwd = Path(text.partition("\n")[0].removeprefix("# cwd: "))
        if cwd.is_relative_to(worker_dir(spark_base)):
            found += [(name, loader, cwd) for name, loader in VERBOSE_IMPORT.findall(text)]
            found += [(name, "extension module", cwd) for name in EXTENSION_LOADED.findall(text)]
    return found


def explain(stdout: str, stderr: str) -> str:
    return f"stdout:\n{stdout[-3000:]}\nstderr:\n" + "\n".join(stderr.splitlines()[-60:])


@pytest.mark.integration
def test_the_zip_is_deterministic_and_self_sufficient(tmp_path: Path) -> None:
    first = build_zip(tmp_path / "a" / "pipelines.zip")
    second = build_zip(tmp_path / "b" / "pipelines.zip")
    assert first.read_bytes() == second.read_bytes()
    with zipfile.ZipFile(first) as archive:
        names = archive.namelist()
        assert names == sorted(names)
        assert {info.date_time for info in archive.infolist()} == {(1980, 1, 1, 0, 0, 0)}
    assert "pipelines/source.py" in names
    assert "kafkalog/client/__init__.py" in names
    assert "kafkalog/record/_speedups.pyi" in names
    assert "kafkalog/py.typed" in names
    assert not [n for n in names if n.endswith((".so", ".pyc", ".c")) or "__pycache__" in n]
    # every shipped module imports from the zip alone (plus third-party libraries), C kernels absent
    modules = sorted(
        n.removesuffix(".py").removesuffix("/__init__").replace("/", ".") for n in names if n.endswith(".py")
    )
    libraries = node_libraries(tmp_path / "node")
    check = (
        "import importlib, importlib.util, sys\n"
        "assert importlib.util.find_spec('pipelines') is None, 'the installed copy is visible'\n"
        f"sys.path.insert(0, {str(first)!r})\n"
        f"for name in {modules!r}:\n"
        # the command lines ask importlib.metadata for the installed distribution's version at import
        "    if name.split('.')[:2] not in (['pipelines', 'cli'], ['kafkalog', 'cli']):\n"
        "        module = importlib.import_module(name)\n"
        f"        assert module.__file__.startswith({str(first)!r}), module.__file__\n"
        "import kafkalog.record.kernels as kernels\n"
        "assert not kernels.NATIVE\n"
    )
    result = subprocess.run(
        [sys.executable, "-S", "-c", check],  # -S: no editable finder; PYTHONPATH: the libraries but not us
        env={**os.environ, "PYTHONPATH": str(libraries)},
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, f"exit {result.returncode}\n" + explain(result.stdout, result.stderr)


@pytest.mark.slow
def test_spark_submit_to_a_standalone_cluster_loads_exactly_once_with_the_shipped_zip(
    tmp_path: Path, broker: BrokerProcess
) -> None:
    produce(broker.bootstrap, "events", EVENTS, partitions=4)
    raw = tmp_path / "raw"
    pipeline = write_spec(tmp_path, broker.bootstrap, raw)
    py_files = build_zip(tmp_path / "dist" / "pipelines.zip")
    python = node_python(tmp_path / "node")
    spark_base = tmp_path / "spark"
    with spark_cluster(spark_base, python=str(python)) as master:
        first = submit(master, py_files, python, pipeline, tmp_path / "submit")
        assert first.returncode == 0, f"exit {first.returncode}\n" + explain(first.stdout, first.stderr)
        totals = oracle(raw, broker.bootstrap)
        assert totals["rows"] == EVENTS
        assert totals["quarantined"] == 0
        assert len(totals["seqs"]) == 1

        # where the executors' code came from (read before the second run adds its own logs)
        imports = executor_imports(tmp_path / "node", spark_base)
        imported = {name for name, _, _ in imports}
        assert {
            "pipelines.executor.source",
            "pipelines.executor.decode",
            "kafkalog.client",
            "kafkalog.record.kernels",
        } <= imported, f"executors' imports of ours: {sorted(imported)} (logs in {imports_dir(tmp_path / 'node')})"
        elsewhere = [(name, loader) for name, loader, _ in imports if not loader.startswith("<zipimporter object")]
        assert not elsewhere, f"executors imported our modules from outside a zip: {elsewhere[:5]}"
        zips = {(cwd / m.group(1)).resolve() for _, loader, cwd in imports if (m := ZIP_IN_LOADER.search(loader))}
        assert zips, imports[:5]
        for shipped in zips:  # the executor's copy of the --py-files zip, byte for byte
            assert shipped.is_relative_to(worker_dir(spark_base).resolve()), shipped
            assert shipped.read_bytes() == py_files.read_bytes(), shipped

        second = submit(master, py_files, python, pipeline, tmp_path / "submit")
        assert second.returncode == 0, f"exit {second.returncode}\n" + explain(second.stdout, second.stderr)
        again = oracle(raw, broker.bootstrap)
        assert again["seqs"] == totals["seqs"], "the rerun committed something"
        assert again["rows"] == totals["rows"]
