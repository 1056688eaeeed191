"""Hadoop's mini clusters (Maven Central, `make peers`): a real HDFS (NameNode with WebHDFS, DataNodes)
and optionally a real YARN (ResourceManager, one NodeManager), in one JVM on loopback.

The launcher is peers/MiniClusters.java. It writes a Hadoop configuration directory
(``conf_dir``: core-site.xml with ``fs.defaultFS``, hdfs-site.xml, yarn-site.xml) and takes fault
commands on its stdin: the NameNode stopped, started or restarted (same ports, same namespace), a
DataNode stopped and started, a YARN container killed; and answers two questions: which files a
writer holds open, which containers an application runs. When its stdin closes (this object
stopped, or the test process gone) it shuts everything down. The launcher's command line and the
client settings are demo.hadoop's, shared with ``make demo-hadoop``.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import threading
from pathlib import Path
from typing import IO

from demo.hadoop import client_env, launcher_argv, yarn_submit_conf
from tests.support.installed import HADOOP_LAUNCHER, java_home, require
from tests.support.processes import PeerError, spawn, stop_group, tail


class HadoopCluster:
    """The mini clusters under ``root``: HDFS with ``datanodes`` DataNodes, YARN if ``yarn``."""

    def __init__(
        self,
        root: Path,
        *,
        yarn: bool = False,
        datanodes: int = 1,
        nodemanager_memory_mb: int = 6144,
        quick_jvm: bool = True,
    ) -> None:
        require(HADOOP_LAUNCHER / "MiniClusters.class", "Hadoop's mini clusters (Maven Central)", "make peers")
        self.root = root
        self.yarn = yarn
        self.datanodes = datanodes
        self.nodemanager_memory_mb = nodemanager_memory_mb
        self.quick_jvm = quick_jvm
        self.log = root / "hadoop.log"
        self.process: subprocess.Popen[bytes] | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()
        self.addresses: dict[str, str] = {}

    @property
    def hdfs_url(self) -> str:
        """``hdfs://localhost:<port>``: the NameNode (``fs.defaultFS``)."""
        return self.addresses["hdfs"]

    @property
    def webhdfs_url(self) -> str:
        """``http://localhost:<port>``: the NameNode's WebHDFS (for the ``hdfs`` package)."""
        return self.addresses["webhdfs"]

    @property
    def conf_dir(self) -> Path:
        """The Hadoop configuration directory for clients (HADOOP_CONF_DIR)."""
        return Path(self.addresses["conf_dir"])

    def start(self, timeout: float = 180) -> HadoopCluster:
        argv = launcher_argv(
            self.root,
            yarn=self.yarn,
            datanodes=self.datanodes,
            nodemanager_memory_mb=self.nodemanager_memory_mb,
            quick_jvm=self.quick_jvm,
        )
        env = {**os.environ, "JAVA_HOME": str(java_home())}
        # cwd: MiniYARNCluster keeps its work directories under ./target
        self.process = spawn(argv, log=self.log, env=env, cwd=self.root, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.process.stdout is not None
        threading.Thread(target=self._read, args=(self.process.stdout,), daemon=True).start()
        line = self._next_line(timeout, "the mini clusters to start")
        if not line.startswith("READY "):
            self.stop()
            raise PeerError(f"Hadoop mini clusters: unexpected first line {line!r}\n{tail(self.log)}")
        self.addresses = json.loads(line.removeprefix("READY "))
        return self

    def _read(self, stream: IO[bytes]) -> None:
        for raw in stream:
            self._lines.put(raw.decode(errors="replace").rstrip("\n"))
        self._lines.put(None)

    def _next_line(self, timeout: float, what: str) -> str:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            self.stop()
            raise PeerError(f"Hadoop mini clusters: waited {timeout:.0f} s for {what}\n{tail(self.log)}") from None
        if line is None:
            code = self.process.wait(10) if self.process is not None else None
            raise PeerError(f"Hadoop mini clusters exited ({code}) while waiting for {what}\n{tail(self.log)}")
        return line

    def command(self, command: str, timeout: float = 120) -> str:
        """One command (``namenode stop|start|restart``, ``datanode stop|start I``, ``openfiles PATH``,
        ``containers APP``, ``container kill ID``); returns once the launcher has carried it out, with
        its answer ("" for the faults), PeerError if it could not."""
        assert self.process is not None and self.process.stdin is not None, "not started"
        self.process.stdin.write(command.encode() + b"\n")
        self.process.stdin.flush()
        answer = self._next_line(timeout, command)
        if answer != f"OK {command}" and not answer.startswith(f"OK {command} "):
            raise PeerError(f"Hadoop mini clusters: {answer}")
        return answer.removeprefix(f"OK {command}").strip()

    def open_files(self, path: str = "/") -> list[str]:
        """The HDFS paths under ``path`` that some writer holds open (a lease the NameNode keeps)."""
        found: list[str] = json.loads(self.command(f"openfiles {path}"))
        return found

    def containers(self, application_id: str) -> list[str]:
        """The running containers of a YARN application, its ApplicationMaster's left out."""
        found: list[str] = json.loads(self.command(f"containers {application_id}"))
        return found

    def kill_container(self, container_id: str) -> None:
        """Have YARN kill one container (FORCEFUL_SHUTDOWN: SIGKILL from the NodeManager)."""
        self.command(f"container kill {container_id}")

    def stop(self) -> None:
        """Close the launcher's stdin (it shuts the clusters down), then end its process group."""
        if self.process is None:
            return
        if self.process.stdin is not None and not self.process.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                self.process.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(60)
        stop_group(self.process, grace=5)
        if self.process.stdout is not None:
            self.process.stdout.close()

    def client_env(self) -> dict[str, str]:
        """Environment for Hadoop clients and spark-submit against these clusters (demo.hadoop's)."""
        return client_env(self.conf_dir)

    def yarn_submit_conf(self) -> dict[str, str]:
        """``--conf`` settings for ``spark-submit --master yarn`` on this machine (demo.hadoop's)."""
        return yarn_submit_conf()

    def __enter__(self) -> HadoopCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
