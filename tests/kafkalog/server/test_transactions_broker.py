"""A kafkalog broker serving transactions through crashes and bad input.

Crashes: the broker SIGKILLed with transactions of several producers open over several partitions
(after the restart the coordinator times each out: all aborted, the last stable offsets reach the
log ends, read-committed readers see every committed record and no aborted one); killed between two
partitions' markers (the stored decision is completed everywhere); killed while EndTxn's decision
is being stored (the transaction ends whole, one way or the other).

Bad input, on one shared broker: wrong epochs, unknown transactional and producer ids, a partition
never added, an end without a transaction, a control batch from a client, a timeout above the
broker's limit: each refused with Kafka's error, and nothing is written.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest

from kafkalog.client import Admin, Producer
from kafkalog.log.faults import CRASH_EXIT_CODE
from kafkalog.protocol import ErrorCode
from tests.support.kafkalog import BrokerProcess

from .raw_transactions import (
    RawTransaction,
    committed,
    describe_transaction,
    log_ends,
    stable_and_end,
    wait_for,
    wait_until_stable,
)

pytestmark = pytest.mark.integration

PARTITIONS = 3
CHECK_MS = 200
"""The coordinator's timeout check interval in these tests: a timed-out transaction ends within it."""
TIMEOUT_MS = 4000
"""The transaction timeout of the transactions a crash leaves open: long enough to kill the broker
while they are, short enough to wait for."""
MAX_TIMEOUT_MS = 60_000


def crash_broker(tmp_path: Path) -> BrokerProcess:
    broker = BrokerProcess(tmp_path / "data", transactions={"abort_check_interval_ms": CHECK_MS})
    broker.start()
    with Admin(broker.bootstrap) as admin:
        admin.create_topic("t", PARTITIONS)
    return broker


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    made = crash_broker(tmp_path)
    yield made
    made.__exit__()


# ---------------------------------------------------------------------------------------- crashes


def test_transactions_open_at_a_sigkill_are_aborted_after_the_restart(broker: BrokerProcess) -> None:
    every = range(PARTITIONS)
    ours = [
        Producer(broker.bootstrap, transactional_id=f"ours-{i}", linger_ms=0, transaction_timeout_ms=TIMEOUT_MS)
        for i in range(2)
    ]
    theirs = confluent_kafka.Producer({
        "bootstrap.servers": broker.bootstrap, "transactional.id": "librdkafka", "linger.ms": 0,
        "transaction.timeout.ms": TIMEOUT_MS, "message.timeout.ms": TIMEOUT_MS,
    })  # fmt: skip
    theirs.init_transactions(10)
    sent: dict[int, list[bytes]] = {p: [] for p in every}
    for round_ in ("committed", "open"):
        for i, producer in enumerate(ours):
            producer.init_transactions() if round_ == "committed" else None
            producer.begin_transaction()
            for p in every:
                producer.send("t", f"{round_}-ours{i}-{p}".encode(), partition=p)
            producer.flush()
        theirs.begin_transaction()
        for p in every:
            theirs.produce("t", f"{round_}-theirs-{p}".encode(), partition=p)
        assert theirs.flush(10) == 0
        if round_ == "committed":
            for producer in ours:
                producer.commit_transaction()
            theirs.commit_transaction(10)
            for p in every:
                sent[p] += [*(f"committed-ours{i}-{p}".encode() for i in range(2)), f"committed-theirs-{p}".encode()]
    stable, end = stable_and_end(broker.bootstrap, "t", every)
    assert all(s < e for s, e in zip(stable, end, strict=True)), "three transactions are open on every partition"
    for producer in ours:
        producer.close()  # leaves its transaction open, as a crashed application would
    broker.kill()

    broker.start()
    wait_until_stable(broker.bootstrap, "t", every, timeout=TIMEOUT_MS / 1000 + 15)
    for transactional_id in ("ours-0", "ours-1", "librdkafka"):
        state = describe_transaction(broker.port, transactional_id)
        assert state["transaction_state"] == "CompleteAbort", transactional_id
    read = committed(broker.bootstrap, "t", every)
    assert {p: sorted(v) for p, v in read.items()} == {p: sorted(v) for p, v in sent.items()}
    # the producer that lived through it is a zombie now: its commit is refused
    with pytest.raises(confluent_kafka.KafkaException):
        theirs.commit_transaction(10)


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_a_crash_between_two_partitions_markers_is_completed_after_the_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, commit: bool
) -> None:
    monkeypatch.setenv("KAFKALOG_CRASH_AT", "txn.markers.after_append")
    broker = crash_broker(tmp_path)
    try:
        every = range(PARTITIONS)
        txn = RawTransaction(broker.port, "half-written")
        assert txn.init() == ErrorCode.NONE
        assert txn.add("t", every) == {ErrorCode.NONE}
        for p in every:
            assert txn.produce("t", p, [b"a%d" % p, b"b%d" % p])["error_code"] == ErrorCode.NONE
        with pytest.raises((ConnectionError, OSError)):
            txn.end(commit=commit)
        assert broker.process is not None and broker.process.wait(10) == CRASH_EXIT_CODE
        monkeypatch.delenv("KAFKALOG_CRASH_AT")

        broker.start()
        txn.port = broker.port  # a new port: the broker listens on port 0
        wait_until_stable(broker.bootstrap, "t", every, timeout=15)
        wait_for(
            lambda: txn.describe()["transaction_state"] == ("CompleteCommit" if commit else "CompleteAbort"),
            timeout=10, what="the stored decision to be completed",
        )  # fmt: skip
        expected = {p: [b"a%d" % p, b"b%d" % p] if commit else [] for p in every}
        assert committed(broker.bootstrap, "t", every) == expected
        # the first partition may hold the marker twice (harmless); every partition holds one at least
        assert all(end >= 3 for end in log_ends(broker.bootstrap, "t", every))
        # the id goes on: its next transaction is not held back by the last one
        assert txn.init() == ErrorCode.NONE
        assert txn.add("t", [0]) == {ErrorCode.NONE}
        assert txn.produce("t", 0, [b"next"])["error_code"] == ErrorCode.NONE
        assert txn.end(commit=True) == ErrorCode.NONE
        assert committed(broker.bootstrap, "t", [0])[0][-1] == b"next"
    finally:
        broker.__exit__()


@pytest.mark.parametrize("moment", ["tmp_written", "tmp_synced", "renamed"])
def test_a_crash_while_the_decision_is_stored_ends_the_transaction_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, moment: str
) -> None:
    # the id's record is stored by InitProducerId, AddPartitionsToTxn, then EndTxn's decision: the third
    monkeypatch.setenv("KAFKALOG_CRASH_AT", f"transactions.{moment}@3")
    broker = crash_broker(tmp_path)
    try:
        every = range(PARTITIONS)
        txn = RawTransaction(broker.port, "deciding", timeout_ms=TIMEOUT_MS)
        assert txn.init() == ErrorCode.NONE
        assert txn.add("t", every) == {ErrorCode.NONE}
        for p in every:
            assert txn.produce("t", p, [b"v%d" % p])["error_code"] == ErrorCode.NONE
        with pytest.raises((ConnectionError, OSError)):
            txn.end(commit=True)
        assert broker.process is not None and broker.process.wait(10) == CRASH_EXIT_CODE
        monkeypatch.delenv("KAFKALOG_CRASH_AT")

        broker.start()
        txn.port = broker.port
        wait_until_stable(broker.bootstrap, "t", every, timeout=TIMEOUT_MS / 1000 + 15)
        decided = moment == "renamed"  # the decision reached the disk: it stands; else the timeout aborts
        wait_for(
            lambda: txn.describe()["transaction_state"] == ("CompleteCommit" if decided else "CompleteAbort"),
            timeout=10, what="the transaction to end",
        )  # fmt: skip
        expected = {p: [b"v%d" % p] if decided else [] for p in every}
        assert committed(broker.bootstrap, "t", every) == expected
        if not decided:  # the coordinator aborted it with a bumped epoch: the producer is fenced
            assert txn.end(commit=True) == ErrorCode.PRODUCER_FENCED
    finally:
        broker.__exit__()
