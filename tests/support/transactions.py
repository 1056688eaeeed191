"""Transactional producers and read-committed readers of today's clients, for the tests with real
peers: librdkafka (confluent-kafka), kafka-python 3, Kafka 4.x's Java clients (one JVM running several
steps: tests/support/java/TransactionalClients.java) and ours (kafkalog.client.SimpleConsumer); a
producer killed with its transaction open; Kafka's ``kafka-transactions`` tool.

Every call is bounded: a broker that refuses transactions (or ignores a request) makes the caller
fail with an AssertionError that names the client and its first error, never hang. A transaction
plan is a sequence of (``c`` commit or ``a`` abort, record count), written to partition 0 of an
empty topic; ``layout`` says where its records land.
"""

from __future__ import annotations

import selectors
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal, NamedTuple, TypeVar

import confluent_kafka

from kafkalog.client import SimpleConsumer
from tests.support.installed import KAFKA4_LIBS, require
from tests.support.kafka4 import QUICK_COMPILER, QUIET_JVM, TOOL_LOG4J, run_tool

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # kafka-python uses a deprecated importlib API
    import kafka  # type: ignore[import-untyped]

T = TypeVar("T")
Isolation = Literal["read_committed", "read_uncommitted"]
Plan = Sequence[tuple[str, int]]
Read = list[tuple[int, str]]
"""What a reader handed its caller: (offset, value) of each record, in order."""

TRANSACTIONS = "org.apache.kafka.tools.TransactionsCommand"
JAVA_CLIENTS = Path(__file__).with_name("java") / "TransactionalClients.java"
CALL_TIMEOUT = 15.0
"""Seconds any one client call may take (init, commit, abort, a read) before the test fails."""


class Stored(NamedTuple):
    """One data record of a plan as the partition holds it."""

    offset: int
    value: str
    committed: bool


def layout(prefix: str, plan: Plan) -> list[Stored]:
    """The data records of ``plan`` written by a producer whose values are ``<prefix>-<txn>-<i>``:
    consecutive offsets, each transaction followed by its marker (one offset of its own)."""
    stored, offset = [], 0
    for number, (end, count) in enumerate(plan):
        for i in range(count):
            stored.append(Stored(offset, f"{prefix}-{number}-{i}", end == "c"))
            offset += 1
        offset += 1  # the commit or abort marker the coordinator writes
    return stored


def visible(stored: Sequence[Stored], isolation: Isolation) -> Read:
    """What a consumer of ``isolation`` should read of ``stored``."""
    return [(s.offset, s.value) for s in stored if s.committed or isolation == "read_uncommitted"]


def bounded(what: str, call: Callable[[], T], timeout: float = CALL_TIMEOUT) -> T:
    """``call()`` in a daemon thread, failing the test if it raises or has not returned after
    ``timeout`` seconds (for clients whose calls have no timeout of their own: kafka-python's
    commit and abort wait for ever). The thread of a call that timed out is left to die with the run."""
    outcome: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as e:
            failure.append(e)

    thread = threading.Thread(target=run, name=what, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), f"{what}: no answer within {timeout:.0f} s"
    assert not failure, f"{what} failed: {type(failure[0]).__name__}: {failure[0]}"
    return outcome[0]


# ---------------------------------------------------------------------------------------- producers


def librdkafka_producer(bootstrap: str, transactional_id: str, **config: object) -> confluent_kafka.Producer:
    """A librdkafka transactional producer with its transactions initialised (InitProducerId)."""
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5, **config}
    )
    try:
        producer.init_transactions(CALL_TIMEOUT)
    except confluent_kafka.KafkaException as e:
        raise AssertionError(f"librdkafka's init_transactions for {transactional_id!r} failed: {e}") from None
    return producer


def send_all(producer: confluent_kafka.Producer, topic: str, values: Sequence[str], partition: int = 0) -> list[int]:
    """Produce ``values`` (in the open transaction, if any) and wait for every delivery; their offsets."""
    reports: list[tuple[object, int | None]] = []
    for value in values:
        producer.produce(
            topic,
            value.encode(),
            partition=partition,
            on_delivery=lambda error, message: reports.append((error, message.offset())),
        )
    assert producer.flush(CALL_TIMEOUT) == 0, f"librdkafka left records to {topic} unsent"
    errors = [error for error, _ in reports if error is not None]
    assert not errors, f"librdkafka's deliveries to {topic} failed: {errors}"
    return [-1 if offset is None else offset for _, offset in reports]


def produce_librdkafka(bootstrap: str, transactional_id: str, topic: str, plan: Plan) -> None:
    """``plan`` with librdkafka's transactional producer; values ``librdkafka-<txn>-<i>``."""
    producer = librdkafka_producer(bootstrap, transactional_id)
    for number, (end, count) in enumerate(plan):
        producer.begin_transaction()
        send_all(producer, topic, [f"librdkafka-{number}-{i}" for i in range(count)])
        try:
            if end == "c":
                producer.commit_transaction(CALL_TIMEOUT)
            else:
                producer.abort_transaction(CALL_TIMEOUT)
        except confluent_kafka.KafkaException as e:
            raise AssertionError(f"librdkafka's {'commit' if end == 'c' else 'abort'} failed: {e}") from None


def produce_kafka_python(bootstrap: str, transactional_id: str, topic: str, plan: Plan) -> None:
    """``plan`` with kafka-python 3's transactional producer; values ``kafka-python-<txn>-<i>``."""
    producer = kafka.KafkaProducer(
        bootstrap_servers=bootstrap,
        transactional_id=transactional_id,
        linger_ms=5,
        max_block_ms=int(CALL_TIMEOUT * 1000),
        request_timeout_ms=10_000,
    )
    try:
        bounded("kafka-python's init_transactions", producer.init_transactions)
        for number, (end, count) in enumerate(plan):
            producer.begin_transaction()
            futures = [producer.send(topic, f"kafka-python-{number}-{i}".encode(), partition=0) for i in range(count)]
            producer.flush(timeout=CALL_TIMEOUT)
            for future in futures:
                future.get(timeout=CALL_TIMEOUT)  # raises if the broker refused it
            ending = producer.commit_transaction if end == "c" else producer.abort_transaction
            bounded(f"kafka-python's {'commit' if end == 'c' else 'abort'}", ending)
    finally:
        producer.close(timeout=5)


class JavaStep(NamedTuple):
    """What one step of TransactionalClients.java did: its records (a consume), or its error."""

    records: Read
    error: str | None


def run_java(bootstrap: str, steps: Sequence[str], log4j: Path) -> list[JavaStep]:
    """Run TransactionalClients.java's ``steps`` (see its doc) in one JVM; each step's outcome."""
    require(KAFKA4_LIBS, "Apache Kafka 4.x (Maven Central)", "make peers")
    if not log4j.exists():
        log4j.write_text(TOOL_LOG4J)
    done = subprocess.run(
        ["java", "-Xmx256m", *QUIET_JVM, *QUICK_COMPILER, f"-Dlog4j2.configurationFile={log4j}",
         "-cp", f"{KAFKA4_LIBS}/*", str(JAVA_CLIENTS), bootstrap, *steps],
        capture_output=True, text=True, timeout=60 + 35 * len(steps), check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"TransactionalClients.java exited with {done.returncode}:\n{done.stderr[-3000:]}"
    outcomes = [JavaStep([], None) for _ in steps]
    ended = set()
    for line in done.stdout.splitlines():
        kind, number, *rest = line.split(" ", 2)
        index = int(number) - 1
        if kind == "RECORD":
            offset, value = rest[0].split(" ", 1)
            outcomes[index].records.append((int(offset), value))
        elif kind == "ERROR":
            outcomes[index] = outcomes[index]._replace(error=rest[0])
        if kind in ("PRODUCED", "CONSUMED", "ERROR"):
            ended.add(index)
    assert ended == set(range(len(steps))), f"TransactionalClients.java ended only steps {sorted(ended)}: {done}"
    return outcomes


def open_and_kill(bootstrap: str, transactional_id: str, topic: str, timeout_ms: int) -> int:
    """A librdkafka producer in a process of its own begins a transaction (``timeout_ms`` long),
    writes one record to partition 0 and is SIGKILLed with the transaction open; the record's offset."""
    script = (
        "import sys, time, confluent_kafka\n"
        "bootstrap, txn, topic, timeout, wait = sys.argv[1:]\n"
        "p = confluent_kafka.Producer({'bootstrap.servers': bootstrap, 'transactional.id': txn,\n"
        "                              'transaction.timeout.ms': int(timeout), 'linger.ms': 0})\n"
        "p.init_transactions(float(wait))\n"
        "p.begin_transaction()\n"
        "sent = []\n"
        "p.produce(topic, b'hanging', partition=0, on_delivery=lambda e, m: sent.append((e, m.offset())))\n"
        "assert p.flush(float(wait)) == 0 and sent and sent[0][0] is None, sent\n"
        "print('OPEN', sent[0][1], flush=True)\n"
        "time.sleep(300)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script, bootstrap, transactional_id, topic, str(timeout_ms), str(CALL_TIMEOUT)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stderr is not None
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(child.stdout, selectors.EVENT_READ)
            ready = selector.select(timeout=CALL_TIMEOUT * 2 + 10)
        line = child.stdout.readline() if ready else ""
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    stderr = child.stderr.read()
    child.stdout.close()
    child.stderr.close()
    assert line.startswith("OPEN "), (
        f"the producer to be killed did not open its transaction: {line!r} {stderr[-2000:]}"
    )
    return int(line.split()[1])


# ------------------------------------------------------------------------------------------ readers


def read_librdkafka(bootstrap: str, topic: str, isolation: Isolation, expect: int) -> Read:
    """Partition 0 of ``topic`` from its beginning by a confluent_kafka.Consumer, until ``expect``
    records (or CALL_TIMEOUT: then what it read)."""
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "txn-readers", "enable.auto.commit": False,
         "isolation.level": isolation}
    )  # fmt: skip
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
        out: Read = []
        deadline = time.monotonic() + CALL_TIMEOUT
        while len(out) < expect and time.monotonic() < deadline:
            for m in consumer.consume(100, 0.2):
                assert m.error() is None, f"librdkafka: {m.error()}"
                offset = m.offset()
                assert offset is not None
                out.append((offset, (m.value() or b"").decode()))
        return out
    finally:
        consumer.close()


def read_kafka_python(bootstrap: str, topic: str, isolation: Isolation, expect: int) -> Read:
    """The same read by kafka-python's KafkaConsumer."""
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, request_timeout_ms=10_000, isolation_level=isolation
    )
    try:
        partition = kafka.TopicPartition(topic, 0)
        consumer.assign([partition])
        consumer.seek_to_beginning()
        out: Read = []
        deadline = time.monotonic() + CALL_TIMEOUT
        while len(out) < expect and time.monotonic() < deadline:
            for messages in consumer.poll(timeout_ms=200).values():
                out += [(m.offset, m.value.decode()) for m in messages]
        return out
    finally:
        consumer.close()


def read_ours(bootstrap: str, topic: str, isolation: Isolation, expect: int) -> Read:
    """The same read by our SimpleConsumer, up to the partition's latest offset for ``isolation``
    (the last stable offset reading committed), asked again until ``expect`` records are there."""
    with SimpleConsumer(bootstrap, isolation=isolation, request_timeout_ms=10_000) as consumer:
        deadline = time.monotonic() + CALL_TIMEOUT
        while True:
            end = consumer.latest_offsets([(topic, 0)])[(topic, 0)]
            out = [(m.offset, (m.value or b"").decode()) for m in consumer.messages(topic, 0, 0, end)]
            if len(out) >= expect or time.monotonic() > deadline:
                return out
            time.sleep(0.1)


READERS: dict[str, Callable[[str, str, Isolation, int], Read]] = {
    "librdkafka": read_librdkafka,
    "kafka-python": read_kafka_python,
    "ours": read_ours,
}
"""The readers in this process (the Java consumer runs in TransactionalClients.java)."""


# ------------------------------------------------------------------------------------------ the tool


def transactions_tool(bootstrap: str, *args: str, log4j: Path) -> list[dict[str, str]]:
    """Kafka 4.x's ``kafka-transactions`` (TransactionsCommand) against ``bootstrap``: the table it
    printed, one dict per row (header -> value)."""
    out = run_tool(TRANSACTIONS, "--bootstrap-server", bootstrap, *args, log4j=log4j, timeout=60).stdout.decode()
    lines = [line for line in out.splitlines() if line.strip()]
    if not lines:
        return []
    # each cell is padded and followed by a tab, the last one too
    header = [cell.strip() for cell in lines[0].split("\t")][:-1]
    return [dict(zip(header, (cell.strip() for cell in line.split("\t")[:-1]), strict=True)) for line in lines[1:]]
