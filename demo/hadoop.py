"""Hadoop for ``make demo-hadoop``: a real HDFS and YARN (Hadoop's mini clusters, one JVM on loopback)
and what a client needs to use them.

Role: the launcher is peers/MiniClusters.java, compiled by ``make peers`` into .cache/peers/launcher
with Hadoop's jars from Maven Central beside it. Once up it writes a Hadoop configuration directory
(``<base>/conf``) and prints ``READY {json}`` with the NameNode's RPC and WebHDFS addresses and the
ResourceManager's; it stops every cluster when its stdin closes or on SIGTERM. The test harness
(tests/support/hadoop.py) starts the same launcher and takes the client settings from here, so the
demo and the tests submit to YARN the same way.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pyspark

from demo.processes import QUICK_JVM_FLAGS, DemoError
from pipelines.storage import Storage

REPO = Path(__file__).resolve().parents[1]
PEERS = REPO / ".cache" / "peers"
LAUNCHER = PEERS / "launcher"
LIBRARIES = PEERS / "hadoop"
SPARK_HOME = Path(pyspark.__file__).resolve().parent

LOG4J = """\
log4j.rootLogger=WARN, err
log4j.appender.err=org.apache.log4j.ConsoleAppender
log4j.appender.err.target=System.err
log4j.appender.err.layout=org.apache.log4j.PatternLayout
log4j.appender.err.layout.ConversionPattern=%d{ISO8601} %p %c{1}: %m%n
"""
"""The daemons' own log: warnings and errors, with times (Hadoop's INFO is thousands of lines)."""


def launcher_argv(
    base: Path, *, yarn: bool, datanodes: int = 1, nodemanager_memory_mb: int = 6144, quick_jvm: bool = True
) -> list[str]:
    """The command that runs the mini clusters under ``base`` (which it creates); ``quick_jvm``:
    QUICK_JVM_FLAGS (the demo and tests; a benchmark of HDFS wants the default compilers)."""
    if not (LAUNCHER / "MiniClusters.class").exists():
        raise DemoError(f"Hadoop's mini clusters are not installed ({LAUNCHER} is missing): run `make peers`")
    base.mkdir(parents=True, exist_ok=True)
    log4j = base / "log4j.properties"
    log4j.write_text(LOG4J)
    classpath = f"{LAUNCHER}:{LAUNCHER}/*:{LIBRARIES}:{LIBRARIES}/*"
    argv = [
        "java", "-Xmx1g", *(QUICK_JVM_FLAGS if quick_jvm else ()), "-Djava.net.preferIPv4Stack=true",
        f"-Dlog4j.configuration=file:{log4j}",
        "-cp", classpath, "MiniClusters", "--base", str(base), "--datanodes", str(datanodes),
        "--nm-memory-mb", str(nodemanager_memory_mb),
    ]  # fmt: skip
    return [*argv, "--yarn"] if yarn else argv


def ready_addresses(output: str) -> dict[str, str] | None:
    """The addresses of the launcher's ``READY`` line in ``output`` (its stdout so far), or None."""
    for line in output.splitlines():
        if line.startswith("READY "):
            addresses: dict[str, str] = json.loads(line.removeprefix("READY "))
            return addresses
    return None


def java_home() -> str:
    """JAVA_HOME of the ``java`` on the PATH (YARN containers start ``$JAVA_HOME/bin/java``)."""
    if "JAVA_HOME" in os.environ:
        return os.environ["JAVA_HOME"]
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        java = Path(directory) / "java"
        if java.exists():
            return str(java.resolve().parent.parent)
    raise DemoError("java is not on the PATH: Hadoop and Spark need Java 17")


def client_env(conf_dir: Path) -> dict[str, str]:
    """Environment for Hadoop clients and ``spark-submit --master yarn`` against these clusters."""
    return {
        "HADOOP_CONF_DIR": str(conf_dir),
        "JAVA_HOME": java_home(),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_HOME": str(SPARK_HOME),
        # pyspark from pip has no python/lib/pyspark.zip to ship to YARN containers: they run
        # this interpreter, which imports pyspark from its own site-packages (local: = in place)
        "PYSPARK_ARCHIVES_PATH": f"local:{SPARK_HOME.parent}",
    }


def yarn_submit_conf() -> dict[str, str]:
    """``--conf`` settings for ``spark-submit --master yarn`` on this machine: the containers use the
    installed pyspark's jars in place (``local:``, nothing uploaded), this interpreter, small memory."""
    return {
        "spark.yarn.jars": f"local:{SPARK_HOME}/jars/*",
        "spark.yarn.am.memory": "512m",
        "spark.executor.memory": "512m",
        "spark.executor.instances": "1",
        "spark.driver.host": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.yarn.appMasterEnv.PYSPARK_PYTHON": sys.executable,
        "spark.executorEnv.PYSPARK_PYTHON": sys.executable,
        "spark.yarn.am.extraJavaOptions": " ".join(QUICK_JVM_FLAGS),
        "spark.executor.extraJavaOptions": " ".join(QUICK_JVM_FLAGS),
    }


def listing(storage: Storage, root: str, *, depth: int = 2) -> list[str]:
    """``hdfs dfs -ls``-style lines for the tree under ``root`` down to ``depth`` levels: each
    directory with how many files it holds (at any depth) and their bytes, each file with its size."""
    lines: list[str] = []

    def walk(path: str, level: int) -> None:
        for entry in storage.list(path):
            if entry.is_dir:
                files = storage.walk_files(entry.path)
                size = sum(f.size for f in files)
                lines.append(f"drwxr-xr-x  {len(files):>6} files {size:>12,} B  {entry.path}")
                if level < depth:
                    walk(entry.path, level + 1)
            else:
                lines.append(f"-rw-r--r--  {'':>12} {entry.size:>12,} B  {entry.path}")

    walk(root, 1)
    return lines
