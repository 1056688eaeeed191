"""Kafka Connect 4.x workers in distributed mode (``ConnectDistributed``, what
bin/connect-distributed.sh starts) against any broker (Apache Kafka 4.x or ours), driven through
their REST API; the file connectors (FileStreamSource, FileStreamSink) are on their class path.

A ``ConnectCluster`` is what the workers of one group share: the broker, the group id and the three
internal topics Connect creates itself, compacted (connector configs, source offsets, statuses).
Each ``ConnectWorker`` writes its worker properties under its own directory, listens for REST on a
free loopback port and logs to ``worker.log`` there (appended across restarts, so a failure shows
what every run did). Intervals are short (offsets flushed every second, a lost worker's tasks
reassigned after 2 s) so a test waits seconds, not minutes.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from demo.processes import QUICK_JVM_FLAGS
from tests.support.installed import KAFKA4_LIBS, require_jar
from tests.support.ports import free_port
from tests.support.processes import PeerError, spawn, stop_group, tail, wait_until

T = TypeVar("T")

CONNECT_DISTRIBUTED = "org.apache.kafka.connect.cli.ConnectDistributed"
FILE_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
FILE_SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"

PEER_JVM = ("-Xmx256m", *QUICK_JVM_FLAGS, "-XX:-UsePerfData")
"""The JVM flags of the ecosystem's peers (Connect workers, MirrorMaker 2, Kafka Streams): a small
heap, the quick compiler and one GC thread (demo.processes.QUICK_JVM_FLAGS: these JVMs live for
seconds to a minute on a shared 2-core machine), no shared perf-data file."""

PEER_LOG4J = """\
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = out
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p [%t] %m (%c)%n
logger.clients.name = org.apache.kafka.clients
logger.clients.level = WARN
logger.reflections.name = org.reflections
logger.reflections.level = ERROR
"""
"""Logging of the ecosystem's peers to their log file: Connect's, MirrorMaker 2's and Streams' own
INFO lines (what a failure's tail needs: rebalances, task starts, offsets), the clients' warnings
only (each client prints its whole configuration at INFO)."""


def peer_java(log4j: Path, *jvm: str) -> list[str]:
    """``java`` with PEER_JVM, ``log4j`` (written with PEER_LOG4J if missing) and Kafka 4.x's jars."""
    if not log4j.exists():
        log4j.write_text(PEER_LOG4J)
    return ["java", *PEER_JVM, *jvm, f"-Dlog4j2.configurationFile={log4j}", "-cp", f"{KAFKA4_LIBS}/*"]


@dataclass(frozen=True)
class ConnectCluster:
    """One Connect cluster: its workers' broker, group and internal topics (named after the group)."""

    bootstrap: str
    group: str

    @property
    def internal_topics(self) -> tuple[str, str, str]:
        """(configs, offsets, statuses): Connect creates them compacted on its first start."""
        return (f"{self.group}-configs", f"{self.group}-offsets", f"{self.group}-status")


class ConnectError(PeerError):
    """A Connect REST call was refused, or a connector did not reach the state asked for."""


class ConnectWorker:
    """One Connect worker of ``cluster`` under ``root``; ``overrides`` replace worker properties."""

    def __init__(self, root: Path, cluster: ConnectCluster, **overrides: object) -> None:
        require_jar("connect-runtime-4.*.jar", "Kafka Connect 4.x (Maven Central)")
        require_jar("connect-file-4.*.jar", "Kafka Connect's file connectors (Maven Central)")
        self.root = root
        self.cluster = cluster
        self.rest_port = free_port()
        root.mkdir(parents=True, exist_ok=True)
        configs, offsets, statuses = cluster.internal_topics
        settings: dict[str, object] = {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": cluster.group,
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "config.storage.topic": configs,
            "offset.storage.topic": offsets,
            "status.storage.topic": statuses,
            # one broker: one replica; few partitions (Connect's defaults, 25 and 5, cost start-up)
            "config.storage.replication.factor": 1,
            "offset.storage.replication.factor": 1,
            "status.storage.replication.factor": 1,
            "offset.storage.partitions": 2,
            "status.storage.partitions": 1,
            # source offsets and sink commits every second (default: every minute)
            "offset.flush.interval.ms": 1000,
            "offset.flush.timeout.ms": 5000,
            # a worker that left (or died) has its connectors and tasks given to the others after
            # 2 s (default: 5 minutes, in case it comes back); a dead one is noticed after 6 s
            "scheduled.rebalance.max.delay.ms": 2000,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 1000,
            "task.shutdown.graceful.timeout.ms": 2000,
            # so is a killed worker's sink consumer, from its consumer group (default: after 45 s)
            "consumer.session.timeout.ms": 6000,
            "consumer.heartbeat.interval.ms": 1000,
            "listeners": f"http://127.0.0.1:{self.rest_port}",
            "rest.advertised.host.name": "127.0.0.1",
            "rest.advertised.port": self.rest_port,
            # the connectors are on the class path, found by their ServiceLoader manifests (no scan
            # of every jar by reflection: seconds of start-up)
            "plugin.discovery": "service_load",
            **overrides,
        }
        self.config = root / "worker.properties"
        self.config.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
        self.log = root / "worker.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.rest_port}"

    @property
    def worker_id(self) -> str:
        """How the REST API's statuses name this worker (its advertised REST host and port)."""
        return f"127.0.0.1:{self.rest_port}"

    def start(self, timeout: float = 120) -> ConnectWorker:
        """Start the worker and wait until its herder has started (its internal topics created and
        read, its group joined) and its REST API lists connectors. The REST server comes up first
        and may answer before the herder has made the internal topics."""
        since = self.log.stat().st_size if self.log.exists() else 0
        self.process = spawn([*peer_java(self.root / "log4j2.properties"), CONNECT_DISTRIBUTED, self.config],
                             log=self.log)  # fmt: skip

        def joined() -> bool | None:
            if b"Herder started" not in self.log.read_bytes()[since:]:
                return None
            try:
                status, _ = self.request("GET", "/connectors")
            except OSError:
                return None
            return True if status == 200 else None

        wait_until(f"Kafka Connect worker {self.worker_id}", joined, process=self.process, log=self.log,
                   timeout=timeout)  # fmt: skip
        return self

    def stop(self) -> None:
        """SIGTERM: the worker leaves its group (its connectors and tasks go to the others)."""
        stop_group(self.process, grace=30)

    def kill(self) -> None:
        """SIGKILL: a crash. Source offsets not yet flushed are lost with it."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def request(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> tuple[int, Any]:
        """One REST call: (HTTP status, decoded JSON body or None). Raises OSError if nothing answers."""
        data = json.dumps(body).encode() if body is not None else None
        call = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(call, timeout=30) as response:
                text = response.read()
                return response.status, json.loads(text) if text else None
        except urllib.error.HTTPError as refused:
            text = refused.read()
            try:
                return refused.code, json.loads(text) if text else None
            except ValueError:
                return refused.code, text.decode(errors="replace")

    def put_connector(self, name: str, config: Mapping[str, object], timeout: float = 60) -> None:
        """Create (or reconfigure) connector ``name``. Retried while the group rebalances (409)."""

        def put() -> bool | None:
            status, answer = self.request("PUT", f"/connectors/{name}/config", {k: str(v) for k, v in config.items()})
            if status in (200, 201):
                return True
            if status == 409:  # a rebalance is under way; the leader is not known yet
                return None
            raise ConnectError(f"PUT /connectors/{name}/config answered {status}: {answer}\n{tail(self.log)}")

        self.poll(f"connector {name} created", put, timeout)

    def status(self, name: str) -> dict[str, Any]:
        """GET /connectors/<name>/status ({} while the connector is unknown or the group rebalances)."""
        code, answer = self.request("GET", f"/connectors/{name}/status")
        return answer if code == 200 and isinstance(answer, dict) else {}

    def offsets(self, name: str) -> list[dict[str, Any]]:
        """GET /connectors/<name>/offsets: the source offsets Connect stored (or a sink's committed
        consumer offsets), as [{"partition": ..., "offset": ...}]; [] while none are."""
        code, answer = self.request("GET", f"/connectors/{name}/offsets")
        return list(answer.get("offsets", [])) if code == 200 and isinstance(answer, dict) else []

    def running(self, name: str, tasks: int) -> dict[str, Any] | None:
        """The connector's status if it and ``tasks`` tasks are RUNNING, else None (a FAILED task
        raises ConnectError with its trace)."""
        status = self.status(name)
        for task in status.get("tasks", []):
            if task.get("state") == "FAILED":
                raise ConnectError(f"{name} task {task['id']} failed:\n{task.get('trace', '')[:3000]}")
        states = [task.get("state") for task in status.get("tasks", [])]
        if status.get("connector", {}).get("state") == "RUNNING" and states == ["RUNNING"] * tasks:
            return status
        return None

    def poll(self, what: str, check: Callable[[], T | None], timeout: float = 60) -> T:
        """``check()`` every 0.2 s until it returns something; ConnectError with this worker's log
        tail if the worker dies or ``timeout`` passes."""
        assert self.process is not None
        deadline = time.monotonic() + timeout
        while True:
            found = check()
            if found is not None:
                return found
            if self.process.poll() is not None:
                raise ConnectError(f"{what}: the worker exited with {self.process.returncode}\n{tail(self.log)}")
            if time.monotonic() > deadline:
                raise ConnectError(f"{what}: not after {timeout:.0f} s\n{tail(self.log)}")
            time.sleep(0.2)

    def __enter__(self) -> ConnectWorker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
