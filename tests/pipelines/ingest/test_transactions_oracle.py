"""The transactions oracle: a transactional producer commits some transactions and aborts others at
random, and is SIGKILLed mid-transaction several times (each new instance fences its zombie and has
the coordinator abort what it left open), while pipeline loads are SIGKILLed at random; then
everything runs to completion. The raw layer must hold every record of every committed transaction
exactly once, no record of an aborted or killed one, no control record, and each split's counts must
add up to its offsets. On kafkalog and on Kafka 4.x, the same test.

The producer (librdkafka, in a child process) writes a journal: ``end <txn> <records> <outcome>``
before it asks to commit or abort, ``done <txn>`` once the broker answered. A transaction with a
``done`` has a known outcome; one killed between the two lines may have either, but all of its
records or none; one killed before ``end`` was never committed.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from kafkalog.client import Admin, SimpleConsumer
from pipelines.ledger.state import PipelineState
from pipelines.storage import LocalStorage
from tests.pipelines.harness import oracle, run_cli, start_run, write_spec

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PARTITIONS = 3
PRODUCER_INSTANCES = 4
"""The first three are SIGKILLed mid-transaction; the last runs to its end."""
TRANSACTIONS_PER_INSTANCE = 12
KILLED_LOADS = 2

PRODUCER = r"""
import json, random, sys, time
import confluent_kafka
bootstrap, topic, transactional_id, journal, seed, first, count, partitions = sys.argv[1:]
first, count, partitions = int(first), int(count), int(partitions)
rng = random.Random(int(seed))
producer = confluent_kafka.Producer({
    "bootstrap.servers": bootstrap, "transactional.id": transactional_id,
    "transaction.timeout.ms": 60000, "linger.ms": 2,
})
producer.init_transactions(60)
with open(journal, "a") as out:
    for txn in range(first, first + count):
        producer.begin_transaction()
        records = rng.randint(1, 12)
        for k in range(records):
            event = {"user_id": txn * 100 + k, "event": "click", "amount": 1.0,
                     "ts": "2026-11-21T08:00:00+00:00"}
            producer.produce(topic, json.dumps(event).encode(), key=f"{txn}-{k}".encode(),
                             partition=rng.randrange(partitions))
            time.sleep(0.02)  # transactions last long enough to be killed in
        producer.flush(30)
        commit = rng.random() < 0.6
        out.write(f"end {txn} {records} {'commit' if commit else 'abort'}\n"); out.flush()
        if commit:
            producer.commit_transaction(60)
        else:
            producer.abort_transaction(60)
        out.write(f"done {txn}\n"); out.flush()
print("finished", flush=True)
"""


def _run_producer(
    bootstrap: str, topic: str, transactional_id: str, journal: Path, instance: int, *, kill_after: float | None
) -> None:
    """One producer instance: run to its end (``kill_after`` None) or SIGKILLed after that long."""
    log = journal.with_name(f"producer-{instance}.log")
    with log.open("wb") as output:
        child = subprocess.Popen(
            [sys.executable, "-c", PRODUCER, bootstrap, topic, transactional_id, str(journal), str(instance),
             str(instance * 1000), str(TRANSACTIONS_PER_INSTANCE), str(PARTITIONS)],
            stdout=output, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        if kill_after is None:
            child.wait(180)
            said = log.read_text(errors="replace")
            assert child.returncode == 0 and "finished" in said, said[-2000:]
            return
        time.sleep(kill_after)
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(10)


def _wait_until_stable(bootstrap: str, topic: str) -> None:
    """Until every partition's last stable offset is its log end: Kafka writes the markers of a
    transaction after it answered EndTxn, and the fenced instances' transactions are aborted then."""
    partitions = [(topic, p) for p in range(PARTITIONS)]
    deadline = time.monotonic() + 60
    with SimpleConsumer(bootstrap, isolation="read_committed") as consumer:
        while True:
            stable, ends = consumer.latest_offsets(partitions), consumer.log_end_offsets(partitions)
            if stable == ends:
                return
            assert time.monotonic() < deadline, f"transactions still open: stable {stable}, log ends {ends}"
            time.sleep(0.2)


def _journal(journal: Path) -> tuple[dict[int, int], set[int], dict[int, int]]:
    """(committed txn -> records, aborted txns, txns of unknown outcome -> records) from the journal."""
    intents: dict[int, tuple[int, str]] = {}
    done: set[int] = set()
    for line in journal.read_text().splitlines():
        word, *rest = line.split()
        if word == "end":
            intents[int(rest[0])] = (int(rest[1]), rest[2])
        elif word == "done":
            done.add(int(rest[0]))
    committed = {t: n for t, (n, outcome) in intents.items() if t in done and outcome == "commit"}
    aborted = {t for t, (_, outcome) in intents.items() if t in done and outcome == "abort"}
    unknown = {t: n for t, (n, _) in intents.items() if t not in done}
    return committed, aborted, unknown


@pytest.mark.parametrize("peer", ["kafkalog", "kafka4"])
def test_loads_killed_at_random_hold_every_committed_transaction_once_and_nothing_else(
    tmp_path: Path, request: pytest.FixtureRequest, peer: str
) -> None:
    bootstrap = request.getfixturevalue("broker" if peer == "kafkalog" else "kafka4").bootstrap
    rng = random.Random(44)
    topic = f"txn-oracle-{uuid.uuid4().hex[:6]}"
    with Admin(bootstrap) as admin:
        admin.create_topic(topic, PARTITIONS, configs={"retention.ms": "-1"})
    raw = tmp_path / "raw"
    spec = write_spec(tmp_path, bootstrap, raw, topics=[topic], event_time={}, raw_options={"writer": "tasks"})
    journal = tmp_path / "journal"
    transactional_id = f"oracle-{uuid.uuid4().hex[:6]}"

    loads: list[subprocess.Popen[bytes]] = []
    try:
        for instance in range(PRODUCER_INSTANCES):
            last = instance == PRODUCER_INSTANCES - 1
            _run_producer(
                bootstrap,
                topic,
                transactional_id,
                journal,
                instance,
                kill_after=None if last else rng.uniform(0.5, 2.0),
            )
            if instance < KILLED_LOADS:  # a load killed at a random moment while transactions come and go
                load = start_run(spec, tmp_path / f"load-{instance}.log")
                loads.append(load)
                time.sleep(rng.uniform(4.0, 12.0))
                os.killpg(load.pid, signal.SIGKILL)
                load.wait(30)
    finally:
        for load in loads:
            if load.poll() is None:
                os.killpg(load.pid, signal.SIGKILL)
                load.wait(30)

    _wait_until_stable(bootstrap, topic)
    said = ""
    for _ in range(3):  # a run finishes a killed run's stored plan first; the next loads the rest
        final = run_cli("run", str(spec), "--master", "local[2]", timeout=600)
        assert final.returncode == 0, final.stdout[-3000:] + final.stderr[-3000:]
        said += final.stdout + final.stderr
        if "up to date" in final.stdout or "up-to-date" in final.stdout:
            break

    committed, aborted, unknown = _journal(journal)
    assert committed and aborted, "the random producer should both commit and abort"
    totals = oracle(raw, bootstrap)  # exactly once, and equal to what a read-committed consumer sees
    keys = Counter[str]()
    for path in raw.rglob("*.parquet"):
        if "_pipeline" not in path.parts:
            keys.update(k.decode() for k in pq.read_table(path, columns=["key"]).column("key").to_pylist())
    assert all(n == 1 for n in keys.values())
    by_txn = Counter(int(key.split("-")[0]) for key in keys)
    for txn, records in committed.items():
        assert by_txn[txn] == records, f"committed transaction {txn}: {by_txn[txn]} of {records} loaded; {said}"
    for txn in aborted:
        assert by_txn[txn] == 0, f"aborted transaction {txn}: {by_txn[txn]} records loaded"
    for txn, records in unknown.items():
        assert by_txn[txn] in (0, records), f"transaction {txn} loaded in part: {by_txn[txn]} of {records}"
    started = set(committed) | aborted | set(unknown)
    assert set(by_txn) <= started, f"records of transactions never ended loaded: {sorted(set(by_txn) - started)}"
    assert totals["rows"] == sum(by_txn.values()) and totals["quarantined"] == 0

    state = PipelineState(LocalStorage(), str(raw))
    splits = [s for seq in state.committed_seqs() for s in state.manifest(seq).splits]
    for split in splits:
        assert split.rows + split.quarantined + split.aborted + split.control == split.end - split.start, split
    assert sum(s.control for s in splits) > 0 and sum(s.aborted for s in splits) > 0
    assert sum(s.end - s.start for s in splits) == sum(_log_ends(bootstrap, topic).values())


def _log_ends(bootstrap: str, topic: str) -> dict[int, int]:
    with SimpleConsumer(bootstrap, isolation="read_committed") as consumer:
        ends = consumer.latest_offsets([(topic, p) for p in range(PARTITIONS)])
    return {p: ends[(topic, p)] for p in range(PARTITIONS)}
