"""A standalone ZooKeeper server (Debian's package) on 127.0.0.1, in a temporary directory."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

from tests.support.installed import ZOOKEEPER_JAR, require
from tests.support.ports import free_port
from tests.support.processes import spawn, stop_group, wait_until


class ZooKeeperProcess:
    """One ZooKeeper server. ``kill`` crashes it (its data directory stays: ``start`` brings it back
    on the same port with the same data)."""

    def __init__(self, root: Path) -> None:
        require(ZOOKEEPER_JAR, "ZooKeeper (Debian's zookeeper package)")
        self.root = root
        self.port = free_port()
        (root / "data").mkdir(parents=True, exist_ok=True)
        self.config = root / "zoo.cfg"
        self.config.write_text(
            f"tickTime=500\ndataDir={root / 'data'}\nclientPort={self.port}\nclientPortAddress=127.0.0.1\n"
            "admin.enableServer=false\n4lw.commands.whitelist=*\nminSessionTimeout=1000\nmaxSessionTimeout=10000\n"
        )
        self.log = root / "zookeeper.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30) -> ZooKeeperProcess:
        classpath = f"/etc/zookeeper/conf:{ZOOKEEPER_JAR}:/usr/share/java/*"
        self.process = spawn(
            ["java", "-Xmx256m", "-cp", classpath, "org.apache.zookeeper.server.ZooKeeperServerMain", self.config],
            log=self.log,
        )
        wait_until("ZooKeeper", self._answers, process=self.process, log=self.log, timeout=timeout)
        return self

    def _answers(self) -> bool | None:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                sock.sendall(b"ruok")
                return True if sock.recv(4) == b"imok" else None
        except OSError:
            return None

    def kill(self) -> None:
        """SIGKILL: the server crashes."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def stop(self) -> None:
        stop_group(self.process, grace=10)

    def __enter__(self) -> ZooKeeperProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
