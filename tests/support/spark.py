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
import subprocess
import sys
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
