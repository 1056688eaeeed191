"""The demo's child processes: started in their own sessions, always stopped, none left behind.

Role: the demo starts long-running servers (ZooKeeper, brokers, the mirror-maker). Each runs in a
new session (its own process group), so a Ctrl-C in the terminal reaches the demo alone and the
demo stops them in order (the mirror first, so it commits what the target acknowledged; ZooKeeper
last); a process that does not stop on SIGTERM within its grace period gets SIGKILL, and so does
anything it spawned in its group. ``Supervisor`` is a context manager: leaving it, by success, error,
Ctrl-C or SIGTERM, stops everything.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, TracebackType

from pipelines.errors import PipelineError

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")

QUICK_JVM_FLAGS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
"""JVM flags for the demo's short-lived and lightly loaded JVMs (spark-submit drivers, YARN
containers, ZooKeeper, Hadoop's mini clusters): the quick compiler only and one GC thread. A JVM
spends most of a short run compiling and collecting on threads of its own; on a 2-core machine
these flags halve a spark-submit's CPU time (23 s to 13 s for a job that counts ten rows), which
the demo's other processes get instead. Long heavy jobs want the default compilers."""


def quick_jvm_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` with QUICK_JVM_FLAGS added to SPARK_SUBMIT_OPTS (what spark-submit and pyspark give
    the driver's JVM), keeping what the caller already set there."""
    given = env.get("SPARK_SUBMIT_OPTS", "")
    missing = [flag for flag in QUICK_JVM_FLAGS if flag not in given.split()]
    return {**env, "SPARK_SUBMIT_OPTS": " ".join([given, *missing]).strip()}


class DemoError(PipelineError):
    """The demo cannot go on; the message names the process, port or file concerned."""


@dataclass
class Child:
    name: str
    process: subprocess.Popen[bytes]
    log: Path
    grace: float


def java_version() -> int:
    """The major version of the ``java`` Spark will use (JAVA_HOME first, like spark-submit)."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not java or not Path(java).exists():
        raise DemoError(
            "Java is not installed (Spark runs on it; ZooKeeper too): install Java 17, e.g. "
            "`sudo apt-get install -y openjdk-17-jre-headless`, or set JAVA_HOME"
        )
    out = subprocess.run([java, "-version"], capture_output=True, text=True, check=False).stderr
    found = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not found:
        raise DemoError(f"{java} -version printed no version: {out.strip()[:200]!r}")
    major = int(found.group(1))
    return int(found.group(2) or 0) if major == 1 else major  # "1.8" is Java 8


def free_port() -> int:
    """A loopback port nothing listens on now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class Supervisor:
    """Starts child processes and stops them all, newest first, when the ``with`` block ends."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.children: list[Child] = []
        self._previous_sigterm: object = None

    def __enter__(self) -> Supervisor:
        self.logs.mkdir(parents=True, exist_ok=True)

        def stop_on_sigterm(signum: int, frame: FrameType | None) -> None:
            raise SystemExit(128 + signum)  # unwinds through __exit__: the children are stopped

        self._previous_sigterm = signal.signal(signal.SIGTERM, stop_on_sigterm)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        try:
            self.stop_all()
        finally:
            signal.signal(signal.SIGTERM, self._previous_sigterm)  # type: ignore[arg-type]

    def start(
        self,
        name: str,
        argv: list[str],
        ready: Callable[[], bool],
        *,
        timeout: float = 60,
        grace: float = 30,
        cwd: Path | None = None,
        hold_stdin: bool = False,
    ) -> Child:
        """Start ``argv`` (output to ``<logs>/<name>.log``) and wait until ``ready()`` says so.
        ``hold_stdin``: give it a pipe as stdin, open until it is stopped (a child that exits when
        its stdin closes then cannot outlive the demo)."""
        log = self.logs / f"{name}.log"
        with log.open("ab") as sink:
            process = subprocess.Popen(
                argv,
                stdout=sink,
                stderr=subprocess.STDOUT,
                stdin=subprocess.PIPE if hold_stdin else None,
                cwd=cwd,
                start_new_session=True,
            )
        child = Child(name, process, log, grace)
        self.children.append(child)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise DemoError(f"{name} exited with {process.returncode} while starting; its log: {log}\n{_tail(log)}")
            if ready():
                return child
            time.sleep(0.2)
        raise DemoError(f"{name} was not ready within {timeout:.0f} s; its log: {log}\n{_tail(log)}")

    def stop(self, child: Child) -> int:
        """SIGTERM, then SIGKILL after the grace period, to the child's whole process group."""
        process = child.process
        if process.poll() is None:
            _signal_group(process.pid, signal.SIGTERM)
            try:
                process.wait(child.grace)
            except subprocess.TimeoutExpired:
                _signal_group(process.pid, signal.SIGKILL)
                process.wait(10)
        _signal_group(process.pid, signal.SIGKILL)  # anything the child left in its group
        if child in self.children:
            self.children.remove(child)
        return process.returncode

    def stop_all(self) -> None:
        for child in reversed(list(self.children)):
            self.stop(child)


def _signal_group(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is gone already
        os.killpg(pid, signum)


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def zookeeper_argv(data_dir: Path, port: int) -> list[str]:
    """A standalone ZooKeeper server (Debian's package, ``make system-deps``) on 127.0.0.1:port."""
    if not ZOOKEEPER_JAR.exists():
        raise DemoError(f"ZooKeeper is not installed ({ZOOKEEPER_JAR} is missing): run `make system-deps`")
    data_dir.mkdir(parents=True, exist_ok=True)
    config = data_dir / "zoo.cfg"
    config.write_text(
        f"tickTime=500\ndataDir={data_dir.resolve()}\nclientPort={port}\nclientPortAddress=127.0.0.1\n"
        "maxClientCnxns=0\nadmin.enableServer=false\n4lw.commands.whitelist=ruok\n"
    )
    classpath = f"/etc/zookeeper/conf:{ZOOKEEPER_JAR}:/usr/share/java/*"
    return ["java", "-Xmx256m", *QUICK_JVM_FLAGS, "-cp", classpath, "org.apache.zookeeper.server.ZooKeeperServerMain",
            str(config)]  # fmt: skip


def zookeeper_ready(port: int) -> Callable[[], bool]:
    def ready() -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
                sock.sendall(b"ruok")
                return sock.recv(4) == b"imok"
        except OSError:
            return False

    return ready
