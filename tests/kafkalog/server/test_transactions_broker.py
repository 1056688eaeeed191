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

import uuid
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest

from kafkalog.client import Admin, Producer
from kafkalog.log.faults import CRASH_EXIT_CODE
from kafkalog.protocol import ApiKey, ErrorCode
from tests.support.kafkalog import BrokerProcess, roundtrip
from tests.support.ports import free_port

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
ERR = confluent_kafka.KafkaError


def crash_broker(tmp_path: Path) -> BrokerProcess:
    """A broker on a port of its own, kept across restarts (clients that lived through the crash
    find it again)."""
    broker = BrokerProcess(tmp_path / "data", port=free_port(), transactions={"abort_check_interval_ms": CHECK_MS})
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
    # the producer that lived through it is a zombie now: its commit is refused, for good
    with pytest.raises(confluent_kafka.KafkaException) as refused:
        theirs.commit_transaction(10)
    error = refused.value.args[0]
    assert error.fatal() and error.code() in (ERR._FENCED, ERR.PRODUCER_FENCED, ERR.INVALID_PRODUCER_EPOCH), error


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


# -------------------------------------------------------------------------------------- bad input


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for the tests that leave it running: each with topics and ids of its own."""
    root = tmp_path_factory.mktemp("kafkalog-txn-bad-input")
    settings = {"abort_check_interval_ms": CHECK_MS, "max_timeout_ms": MAX_TIMEOUT_MS}
    with BrokerProcess(root / "data", transactions=settings) as made:
        yield made


@pytest.fixture
def topic(shared: BrokerProcess) -> str:
    name = f"bad-{uuid.uuid4().hex[:8]}"
    with Admin(shared.bootstrap) as admin:
        admin.create_topic(name, 2)
    return name


def test_old_epochs_are_fenced_with_the_error_each_version_knows(shared: BrokerProcess, topic: str) -> None:
    old = RawTransaction(shared.port, f"fenced-{topic}")
    assert old.init() == ErrorCode.NONE
    assert old.add(topic, [0]) == {ErrorCode.NONE}
    assert old.produce(topic, 0, [b"before"])["error_code"] == ErrorCode.NONE
    new = RawTransaction(shared.port, old.transactional_id)
    wait_for(lambda: new.init() == ErrorCode.NONE, timeout=10, what="the new instance to fence the old")
    assert new.epoch > old.epoch and new.producer_id == old.producer_id
    before = log_ends(shared.bootstrap, topic, [0, 1])
    # KIP-588: PRODUCER_FENCED for the versions that know it, INVALID_PRODUCER_EPOCH before
    assert old.add(topic, [1], version=3) == {ErrorCode.PRODUCER_FENCED}
    assert old.add(topic, [1], version=1) == {ErrorCode.INVALID_PRODUCER_EPOCH}
    assert old.end(commit=True, version=3) == ErrorCode.PRODUCER_FENCED
    assert old.end(commit=True, version=1) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert old.produce(topic, 0, [b"zombie"])["error_code"] == ErrorCode.INVALID_PRODUCER_EPOCH
    assert log_ends(shared.bootstrap, topic, [0, 1]) == before
    # KIP-360: an InitProducerId naming an epoch the id never had is fenced too
    init = {"transactional_id": old.transactional_id, "transaction_timeout_ms": 10_000,
            "producer_id": old.producer_id, "producer_epoch": new.epoch + 5}  # fmt: skip
    assert roundtrip(shared.port, ApiKey.INIT_PRODUCER_ID, 4, init)["error_code"] == ErrorCode.PRODUCER_FENCED
    assert roundtrip(shared.port, ApiKey.INIT_PRODUCER_ID, 3, init)["error_code"] == ErrorCode.INVALID_PRODUCER_EPOCH
    # the open transaction of the old instance was aborted when the new one came: nothing of it is read
    assert committed(shared.bootstrap, topic, [0]) == {0: []}


def test_unknown_transactional_ids_and_producer_ids(shared: BrokerProcess, topic: str) -> None:
    stranger = RawTransaction(shared.port, f"never-initialised-{topic}", producer_id=4242, epoch=0)
    assert stranger.add(topic, [0]) == {ErrorCode.INVALID_PRODUCER_ID_MAPPING}
    assert stranger.end(commit=True) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert stranger.produce(topic, 0, [b"x"])["error_code"] == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    known = RawTransaction(shared.port, f"known-{topic}")
    assert known.init() == ErrorCode.NONE
    wrong = known.producer_id + 1
    assert known.add(topic, [0], producer_id=wrong) == {ErrorCode.INVALID_PRODUCER_ID_MAPPING}
    assert known.end(commit=False, producer_id=wrong) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert describe_transaction(shared.port, stranger.transactional_id)["error_code"] == (
        ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    )
    assert log_ends(shared.bootstrap, topic, [0, 1]) == [0, 0]


def test_a_transactional_batch_to_a_partition_never_added_is_refused(shared: BrokerProcess, topic: str) -> None:
    txn = RawTransaction(shared.port, f"unadded-{topic}")
    assert txn.init() == ErrorCode.NONE
    # before any transaction, then in one that added partition 0 only (KIP-890 part 1)
    assert txn.produce(topic, 1, [b"early"])["error_code"] == ErrorCode.INVALID_TXN_STATE
    assert txn.add(topic, [0]) == {ErrorCode.NONE}
    assert txn.produce(topic, 1, [b"stray"])["error_code"] == ErrorCode.INVALID_TXN_STATE
    assert txn.produce(topic, 0, [b"added"])["error_code"] == ErrorCode.NONE
    assert log_ends(shared.bootstrap, topic, [0, 1]) == [1, 0]
    assert txn.end(commit=True) == ErrorCode.NONE
    # once it ended its partitions are no longer its: a late batch of it is refused
    assert txn.produce(topic, 0, [b"late"])["error_code"] == ErrorCode.INVALID_TXN_STATE
    assert committed(shared.bootstrap, topic, [0, 1]) == {0: [b"added"], 1: []}
    assert log_ends(shared.bootstrap, topic, [0, 1]) == [2, 0]  # the record and its marker


def test_ends_without_a_transaction_or_against_its_outcome(shared: BrokerProcess, topic: str) -> None:
    txn = RawTransaction(shared.port, f"ends-{topic}")
    assert txn.init() == ErrorCode.NONE
    assert txn.end(commit=True) == ErrorCode.INVALID_TXN_STATE  # nothing begun
    assert txn.add(topic, [0, 1]) == {ErrorCode.NONE}
    assert txn.produce(topic, 0, [b"dropped"])["error_code"] == ErrorCode.NONE
    assert txn.end(commit=False) == ErrorCode.NONE
    ends = log_ends(shared.bootstrap, topic, [0, 1])
    assert txn.end(commit=True) == ErrorCode.INVALID_TXN_STATE  # commit after abort
    assert txn.end(commit=False) == ErrorCode.NONE  # a retried abort is answered again
    assert log_ends(shared.bootstrap, topic, [0, 1]) == ends == [2, 1]
    assert txn.describe()["transaction_state"] == "CompleteAbort"
    assert committed(shared.bootstrap, topic, [0, 1]) == {0: [], 1: []}


def test_a_control_batch_from_a_client_is_refused(shared: BrokerProcess, topic: str) -> None:
    txn = RawTransaction(shared.port, f"control-{topic}")
    assert txn.init() == ErrorCode.NONE
    assert txn.add(topic, [0]) == {ErrorCode.NONE}
    forged = txn.produce(topic, 0, [b"\x00\x00\x00\x01"], control=True)  # a forged commit marker
    assert forged["error_code"] == ErrorCode.INVALID_RECORD
    assert log_ends(shared.bootstrap, topic, [0]) == [0]


def test_a_timeout_above_the_brokers_maximum_is_refused(shared: BrokerProcess) -> None:
    too_long = RawTransaction(shared.port, f"long-{uuid.uuid4().hex[:8]}", timeout_ms=MAX_TIMEOUT_MS + 1)
    assert too_long.init() == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert describe_transaction(shared.port, too_long.transactional_id)["error_code"] == (
        ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    )
    librdkafka = confluent_kafka.Producer({
        "bootstrap.servers": shared.bootstrap, "transactional.id": too_long.transactional_id,
        "transaction.timeout.ms": MAX_TIMEOUT_MS + 1, "message.timeout.ms": 5000,
    })  # fmt: skip
    with pytest.raises(confluent_kafka.KafkaException) as refused:
        librdkafka.init_transactions(10)
    assert refused.value.args[0].code() == confluent_kafka.KafkaError.INVALID_TRANSACTION_TIMEOUT
