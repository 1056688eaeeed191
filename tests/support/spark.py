"""Spark for tests and benchmarks: the installed pyspark's ``spark-submit``, the jars of Spark's Kafka
source, and a real Spark standalone cluster on loopback (one master, one worker, from the pip package):

    with spark_cluster(tmp_path / "spark") as master_url:
        subprocess.run([spark_submit(), "--master", master_url, ...])

Both daemons run as plain child processes (``spark-class``, not the ``sbin`` scripts, which detach),
each in its own process group, with their logs, work and scratch directories under the given base
directory (see ``worker_dir`` and ``log_dir``). Executors, and the Python workers they fork, are
children of the worker: stopping kills the whole group, so nothing outlives the ``with`` block,
even when the body fails.
"""

from __future__ import annotations

import os
import re
import signal
import stat
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pyspark

from tests.support.installed import SPARK_KAFKA_LIBS, jars, require
from tests.support.ports import free_port
from tests.support.processes import spawn, stop_group, tail

SPARK_HOME = Path(pyspark.__file__).resolve().parent
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
MASTER_STARTED = re.compile(r"Starting Spark master at (spark://\S+)")
MASTER_REGISTERED = "Registering worker"
WORKER_REGISTERED = "Successfully registered with master"


class ClusterStartError(RuntimeError):
    """The master or the worker did not come up; the message carries the tails of their logs."""


def spark_submit() -> Path:
    """The ``spark-submit`` script of the installed pyspark (next to this interpreter if present)."""
    beside = Path(sys.executable).with_name("spark-submit")
    return beside if beside.exists() else SPARK_HOME / "bin" / "spark-submit"


def spark_kafka_jars() -> list[Path]:
    """Spark's own Kafka source and its kafka-clients (Maven Central, `make peers`), for
    ``spark.jars``: ``spark.read.format("kafka")``."""
    require(SPARK_KAFKA_LIBS, "Spark's Kafka source (Maven Central)", "make peers")
    return jars(SPARK_KAFKA_LIBS)


def stop_spark(session: Any) -> None:
    """Stop a local session and its JVM: ``SparkSession.stop`` leaves the py4j gateway's JVM running
    until this interpreter exits; closing the JVM's stdin is pyspark's own signal for it to exit."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    session.stop()
    if gateway is None:
        return
    gateway.shutdown()
    process = getattr(gateway, "proc", None)
    if process is not None:
        if process.stdin is not None:
            process.stdin.close()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            stop_group(process, grace=5)
    SparkContext._gateway = None
    SparkContext._jvm = None


def worker_dir(base: Path) -> Path:
    """Where the worker runs its executors: ``<app id>/<executor id>/`` (their cwd, files, stderr)."""
    return base / "work"


def log_dir(base: Path) -> Path:
    """The daemons' logs: ``master.log`` and ``worker.log`` (stdout and stderr of each)."""
    return base / "logs"


def daemon_env(base: Path, python: str) -> dict[str, str]:
    """The environment of both daemons: everything Spark writes goes under ``base``."""
    scratch = base / "local"
    conf = base / "conf"  # empty: no spark-defaults.conf or spark-env.sh of the machine leaks in
    for directory in (scratch, conf, worker_dir(base), log_dir(base), base / "pids"):
        directory.mkdir(parents=True, exist_ok=True)
    return {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_CONF_DIR": str(conf),
        "SPARK_LOG_DIR": str(log_dir(base)),
        "SPARK_PID_DIR": str(base / "pids"),
        "SPARK_WORKER_DIR": str(worker_dir(base)),
        "SPARK_LOCAL_DIRS": str(scratch),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOCAL_HOSTNAME": "127.0.0.1",
        "SPARK_DAEMON_MEMORY": "512m",
        "PYSPARK_PYTHON": python,
    }


@contextmanager
def _daemon(args: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``spark-class <args>`` in its own session; on exit, end the whole group (TERM, then KILL)."""
    process = spawn([str(SPARK_HOME / "bin" / "spark-class"), *args], log=log, env=env)
    try:
        yield process
    finally:
        stop_group(process, grace=10)


def _wait_for(
    what: str,
    check: Callable[[], str | None],
    processes: dict[str, subprocess.Popen[bytes]],
    logs: list[Path],
    deadline: float,
) -> str:
    while True:
        found = check()
        if found is not None:
            return found
        dead = {name: p.returncode for name, p in processes.items() if p.poll() is not None}
        if dead or time.monotonic() > deadline:
            reason = f"exited early ({dead})" if dead else "timed out"
            raise ClusterStartError(f"Spark standalone {what}: {reason}\n" + "\n".join(tail(log) for log in logs))
        time.sleep(0.2)


@contextmanager
def spark_cluster(
    base: Path, *, cores: int = 2, memory: str = "2g", python: str = sys.executable, timeout: float = 60.0
) -> Iterator[str]:
    """Start a master and one worker (``cores``, ``memory``) on 127.0.0.1 under ``base``; yield the
    master URL once the worker has registered; stop both on exit. ``python`` is the PYSPARK_PYTHON
    of the daemons (an application's own setting decides what its executors run)."""
    env = daemon_env(base, python)
    master_log = log_dir(base) / "master.log"
    worker_log = log_dir(base) / "worker.log"
    deadline = time.monotonic() + timeout
    master_port = free_port()
    asked = f"spark://127.0.0.1:{master_port}"

    def worker_args(url: str) -> list[str]:
        args = [WORKER_CLASS, "--host", "127.0.0.1", "--port", str(free_port()), "--webui-port", str(free_port())]
        return [*args, "--cores", str(cores), "--memory", memory, "--work-dir", str(worker_dir(base)), url]

    def master_url() -> str | None:
        match = MASTER_STARTED.search(master_log.read_text(errors="replace")) if master_log.exists() else None
        return match.group(1) if match else None

    def registered() -> str | None:
        master_text = master_log.read_text(errors="replace")
        worker_text = worker_log.read_text(errors="replace") if worker_log.exists() else ""
        return "yes" if MASTER_REGISTERED in master_text or WORKER_REGISTERED in worker_text else None

    with ExitStack() as stack:
        master_args = [MASTER_CLASS, "--host", "127.0.0.1", "--port", str(master_port)]
        master = stack.enter_context(_daemon([*master_args, "--webui-port", str(free_port())], env, master_log))
        # A JVM takes seconds to start (more on a busy machine): start the worker alongside, pointed at
        # the port the master was asked for; it retries until the master listens.
        worker_stack = stack.enter_context(ExitStack())
        worker = worker_stack.enter_context(_daemon(worker_args(asked), env, worker_log))
        url = _wait_for("master", master_url, {"master": master}, [master_log], deadline)
        if url != asked:  # someone took the port after free_port(): the master bound the next one
            worker_stack.close()
            worker = worker_stack.enter_context(_daemon(worker_args(url), env, worker_log))
        _wait_for("worker", registered, {"master": master, "worker": worker}, [master_log, worker_log], deadline)
        yield url


# ---------------------------------------------------------------------- a cluster node without this project

REPO = Path(__file__).resolve().parents[2]
SITE_PACKAGES = Path(sysconfig.get_paths()["purelib"])
OUR_INSTALL = re.compile(r"^(__editable__.*kafkalog_pipelines.*|kafkalog_pipelines-.*\.dist-info|kafkalog|pipelines)$")
VERBOSE_IMPORT = re.compile(r"^import '((?:pipelines|kafkalog)(?:\.\w+)*)' # (.*)$", re.MULTILINE)
EXTENSION_LOADED = re.compile(r"^# extension module '(kafkalog[\w.]*)' loaded from '([^']+)'", re.MULTILINE)


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
    master: str,
    ship: list[str],
    executor_python: Path,
    pipeline: Path,
    cwd: Path,
    *,
    timeout: float = 180.0,
    driver_path: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """spark-submit of jobs/load_warehouse.py in client mode, our code shipped by the spark-submit
    options ``ship`` (pipelines.app.ship.submit_options); the driver runs the venv's Python.

    Run from ``cwd``, not the repo: ``python -m`` puts the working directory first on sys.path.
    ``driver_path``: where the driver JVM's own Python workers (which plan the data source, on the
    machine the job is submitted from) find our code when nothing in ``ship`` gives it to them, as
    the project installed on that machine would (the ``--archives`` way ships to executors only)."""
    conf = {
        "spark.executorEnv.PYSPARK_PYTHON": str(executor_python),
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.executor.memory": "1g",
        "spark.sql.shuffle.partitions": "4",
    }
    command = [str(spark_submit()), "--master", master, *ship]
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
        **({"PYTHONPATH": str(driver_path)} if driver_path is not None else {}),
    }
    for directory in ("conf", "local"):
        (cwd / directory).mkdir(parents=True, exist_ok=True)
    return run_in_group(command, cwd=cwd, env=env, timeout=timeout)


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
            raise TimeoutError(f"timed out after {timeout:.0f} s: {command}\n" + explain(stdout, stderr)) from None
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
            found += [(name, f"extension module {path}", cwd) for name, path in EXTENSION_LOADED.findall(text)]
    return found


def explain(stdout: str, stderr: str) -> str:
    return f"stdout:\n{stdout[-3000:]}\nstderr:\n" + "\n".join(stderr.splitlines()[-60:])
