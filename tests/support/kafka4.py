"""Apache Kafka 4.x (Maven Central, `make peers`): a KRaft broker+controller on loopback, and its
Java tools (topics, console producer and consumer, consumer groups, ACLs, perf tools).

Each broker formats its own storage under ``root`` (a fresh cluster id), listens on two free ports
(clients, controller) and logs to ``root/kafka.log``. Several can run at once.
"""

from __future__ import annotations

import base64
import subprocess
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.support.installed import KAFKA4_LIBS, require
from tests.support.ports import free_port
from tests.support.processes import PeerError, spawn, stop_group, wait_until

BROKER_LOG4J = """\
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = out
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
logger.state.name = state.change.logger
logger.state.level = WARN
"""
TOOL_LOG4J = """\
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = err
appender.err.type = Console
appender.err.name = err
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = %p %m (%c)%n
"""
STARTED = "Kafka Server started"

TOPICS = "org.apache.kafka.tools.TopicCommand"
CONSOLE_PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
CONSUMER_GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"


def cluster_id() -> str:
    """A random cluster id in Kafka's form (16 bytes, URL-safe base64, never starting with '-')."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


QUIET_JVM = ("-XX:-UsePerfData", "-Xlog:disable", "-Xlog:all=warning:stderr")
"""A tool's standard output is what it prints: the JVM's own warnings (which go to stdout by
default, e.g. "Cannot use file /tmp/hsperfdata_root/<pid> because it is locked by another
process" when JVMs of another PID namespace share /tmp) go to stderr, and the shared perf-data
file that causes that one is not used at all."""

QUICK_COMPILER = ("-XX:TieredStopAtLevel=1",)
"""For a tool run that is not measured: it lasts a second or two, which the quick compiler alone
does on 40% less CPU (the benchmarks' clients keep the default compilers)."""


def run_tool(
    main: str, *args: str, log4j: Path, input: bytes | None = None, timeout: float = 120, measured: bool = False
) -> subprocess.CompletedProcess[bytes]:
    """Run one of Apache Kafka 4.x's Java tools (its main class) against any broker (ours too);
    PeerError with its stderr if it exits non-zero. ``log4j``: a log4j2 file (written if missing);
    ``measured``: the run is a benchmark's, with the JVM's default compilers."""
    require(KAFKA4_LIBS, "Apache Kafka 4.x (Maven Central)", "make peers")
    if not log4j.exists():
        log4j.write_text(TOOL_LOG4J)
    result = subprocess.run(
        [
            "java",
            "-Xmx256m",
            *QUIET_JVM,
            *(() if measured else QUICK_COMPILER),
            f"-Dlog4j2.configurationFile={log4j}",
            "-cp",
            f"{KAFKA4_LIBS}/*",
            main,
            *args,
        ],
        input=input,
        capture_output=True,
        timeout=timeout,
        check=False,
    )
    if result.returncode != 0:
        stderr = result.stderr.decode(errors="replace")[-3000:]
        raise PeerError(f"{main} {' '.join(args)} exited with {result.returncode}:\n{stderr}")
    return result


@dataclass(frozen=True)
class SecuredListener:
    """A SASL_SSL listener of a Kafka 4.x broker: where, whom to trust, and a SCRAM-SHA-512 user."""

    port: int
    ca_file: Path
    user: str
    password: str

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"


class Kafka4Process:
    """One combined broker and controller (process.roles=broker,controller, node 1) under ``root``;
    ``properties`` override its server.properties; ``format_args`` go to the storage format (e.g.
    ``--add-scram`` users, which a KRaft cluster keeps in its metadata)."""

    def __init__(self, root: Path, *, format_args: Sequence[str] = (), **properties: object) -> None:
        require(KAFKA4_LIBS, "Apache Kafka 4.x (Maven Central)", "make peers")
        self.root = root
        self.port = free_port()
        self.controller_port = free_port()
        self.data = root / "data"
        root.mkdir(parents=True, exist_ok=True)
        settings: dict[str, object] = {
            "process.roles": "broker,controller",
            "node.id": 1,
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": self.data,
            "num.partitions": 1,
            "offsets.topic.replication.factor": 1,
            "offsets.topic.num.partitions": 4,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "share.coordinator.state.topic.replication.factor": 1,
            "share.coordinator.state.topic.min.isr": 1,
            "group.initial.rebalance.delay.ms": 0,
            **properties,
        }
        self.config = root / "server.properties"
        self.config.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
        (root / "log4j2.properties").write_text(BROKER_LOG4J)
        (root / "tools-log4j2.properties").write_text(TOOL_LOG4J)
        self.log = root / "kafka.log"
        self.process: subprocess.Popen[bytes] | None = None
        self._formatted = False
        self._format_args = tuple(format_args)
        self.secured: SecuredListener | None = None
        """Its SASL_SSL listener, when made by ``secured_kafka4``."""

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _java(self, log4j: str, heap: str = "256m") -> list[str]:
        return ["java", f"-Xmx{heap}", f"-Dlog4j2.configurationFile={self.root / log4j}", "-cp", f"{KAFKA4_LIBS}/*"]

    def start(self, timeout: float = 90) -> Kafka4Process:
        """Format the storage (first start only), start the broker, wait until it serves clients."""
        if not self._formatted:
            format_command = ("format", "-t", cluster_id(), "-c", str(self.config), *self._format_args)
            self.tool("kafka.tools.StorageTool", *format_command)
            self._formatted = True
        since = self.log.stat().st_size if self.log.exists() else 0
        self.process = spawn([*self._java("log4j2.properties", "768m"), "kafka.Kafka", self.config], log=self.log)

        def started() -> bool | None:
            return True if STARTED in self.log.read_bytes()[since:].decode(errors="replace") else None

        wait_until("Apache Kafka 4.x", started, process=self.process, log=self.log, timeout=timeout)
        return self

    def stop(self) -> None:
        """SIGTERM (a controlled shutdown), SIGKILL after 30 s."""
        stop_group(self.process, grace=30)

    def kill(self) -> None:
        """SIGKILL: a crash (the data stays; ``start`` recovers it)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def tool(
        self, main: str, *args: str, input: bytes | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[bytes]:
        """Run one of Kafka's Java tools (its main class) with this broker's logging settings;
        PeerError with its stderr if it exits non-zero."""
        return run_tool(main, *args, log4j=self.root / "tools-log4j2.properties", input=input, timeout=timeout)

    def create_topic(self, name: str, partitions: int = 1, **config: object) -> None:
        settings = [arg for key, value in config.items() for arg in ("--config", f"{key.replace('_', '.')}={value}")]
        self.tool(TOPICS, "--bootstrap-server", self.bootstrap, "--create", "--topic", name,
                  "--partitions", str(partitions), *settings)  # fmt: skip

    def console_produce(self, topic: str, records: Iterable[tuple[dict[str, str], str, str]]) -> None:
        """Send (headers, key, value) records with Kafka's console producer (headers parsed from
        its ``h1:v1,h2:v2<TAB>key<TAB>value`` lines)."""
        lines = "".join(
            f"{','.join(f'{k}:{v}' for k, v in headers.items()) or ''}\t{key}\t{value}\n"
            for headers, key, value in records
        )
        self.tool(
            CONSOLE_PRODUCER, "--bootstrap-server", self.bootstrap, "--topic", topic,
            "--reader-property", "parse.key=true", "--reader-property", "parse.headers=true",
            "--reader-property", "null.marker=", input=lines.encode(),
        )  # fmt: skip

    def console_consume(self, topic: str, count: int, *, extra: Sequence[str] = ()) -> list[str]:
        """The first ``count`` records of ``topic`` as Kafka's console consumer prints them
        (``headers<TAB>key<TAB>value``, ``NO_HEADERS`` when a record has none)."""
        result = self.tool(
            CONSOLE_CONSUMER, "--bootstrap-server", self.bootstrap, "--topic", topic, "--from-beginning",
            "--max-messages", str(count), "--timeout-ms", "20000",
            "--formatter-property", "print.headers=true", "--formatter-property", "print.key=true", *extra,
        )  # fmt: skip
        return result.stdout.decode().splitlines()

    def __enter__(self) -> Kafka4Process:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def secured_kafka4(
    root: Path,
    keystore: Path,
    keystore_password: str,
    users: dict[str, str],
    ca_file: Path | None = None,
    **properties: object,
) -> tuple[Kafka4Process, int]:
    """A Kafka 4.x broker with a PLAINTEXT and a SASL_SSL listener (SCRAM-SHA-512 for ``users``,
    name → password, kept in KRaft's metadata from the storage format; TLS from a PKCS12
    ``keystore``). Returns it (started) and its SASL_SSL port; ``secured`` names the listener with
    the first user. ``properties`` override its server.properties."""
    secured_port = free_port()
    scram = [
        arg
        for name, password in users.items()
        for arg in ("--add-scram", f"SCRAM-SHA-512=[name={name},password={password}]")
    ]
    broker = Kafka4Process(root, format_args=scram, **properties)
    plain = f"PLAINTEXT://127.0.0.1:{broker.port}"
    secured = f"SASL_SSL://127.0.0.1:{secured_port}"
    settings = {
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        ),
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": keystore,
        "ssl.keystore.password": keystore_password,
        "ssl.key.password": keystore_password,
        "log.flush.interval.ms": 1000,
        "log.flush.scheduler.interval.ms": 1000,
    }
    broker.config.write_text(
        broker.config.read_text()
        .replace(f"listeners={plain},", f"listeners={plain},{secured},")
        .replace(f"advertised.listeners={plain}", f"advertised.listeners={plain},{secured}")
        .replace("PLAINTEXT:PLAINTEXT\n", "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL\n")
        + "".join(f"{key}={value}\n" for key, value in settings.items())
    )
    if ca_file is not None:
        user, password = next(iter(users.items()))
        broker.secured = SecuredListener(secured_port, ca_file, user, password)
    return broker.start(), secured_port
