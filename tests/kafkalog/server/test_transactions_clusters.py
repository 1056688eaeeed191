"""Transactions across brokers. A ZooKeeper cluster of two kafkalog brokers: a transaction over
partitions led by both commits (the coordinator's markers cross by WriteTxnMarkers), its state is
in ZooKeeper; the coordinating broker SIGKILLed mid-transaction, the other takes the id over once the
registration expires, aborts the timed-out transaction where it can and, with the killed broker
back, everywhere. A static cluster: offsets sent to a transaction whose coordinator is not the
group's become the group's on commit only."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkalog.client import Admin, Client, Producer
from kafkalog.client.offsets import OffsetsClient
from kafkalog.protocol import ApiKey, ErrorCode
from tests.support.kafkalog import BrokerProcess, roundtrip

from .raw_transactions import committed, describe_transaction, stable_and_end, wait_for, wait_until_stable

pytestmark = pytest.mark.integration

CHECK_MS = 200
PARTITIONS = 4


def coordinator_of(broker: BrokerProcess, key: str, key_type: int) -> int:
    answer = roundtrip(broker.port, ApiKey.FIND_COORDINATOR, 3, {"key": key, "key_type": key_type})
    assert answer["error_code"] == ErrorCode.NONE, answer
    return int(answer["node_id"])


def key_coordinated_by(broker: BrokerProcess, prefix: str, broker_id: int, key_type: int = 1) -> str:
    """A key of ``prefix`` whose coordinator is ``broker_id``."""
    return next(k for k in (f"{prefix}-{i}" for i in range(100)) if coordinator_of(broker, k, key_type) == broker_id)


def leaders(bootstrap: str, topic: str) -> dict[int, int]:
    with Admin(bootstrap) as admin:
        return dict(admin.describe_topic(topic).leaders)


# ------------------------------------------------------------------------------ ZooKeeper cluster


@pytest.fixture
def zk_pair(tmp_path: Path, zk_factory: Callable[..., Any]) -> Iterator[tuple[BrokerProcess, BrokerProcess]]:
    """Two brokers of one ZooKeeper cluster; broker 1's session is short (the test kills it)."""
    brokers = [
        BrokerProcess(
            tmp_path / f"b{i}", broker_id=i, zookeeper=zk_factory.connect,  # type: ignore[attr-defined]
            zookeeper_session_timeout_ms=6000 if i == 0 else 2000, transactions={"abort_check_interval_ms": CHECK_MS},
        ).start()
        for i in range(2)
    ]  # fmt: skip

    def sees_both(broker: BrokerProcess) -> bool:
        with Client(broker.bootstrap) as view:
            view.refresh_metadata()
            return set(view._brokers) == {0, 1}

    wait_for(lambda: all(sees_both(b) for b in brokers), timeout=30, what="each broker to see the other")
    yield brokers[0], brokers[1]
    for broker in brokers:
        broker.__exit__()


def test_a_transaction_over_two_brokers_and_its_coordinators_failover(
    zk_pair: tuple[BrokerProcess, BrokerProcess], zk_factory: Callable[..., Any]
) -> None:
    b0, b1 = zk_pair
    with Admin(b0.bootstrap) as admin:
        admin.create_topic("spread", PARTITIONS)
    every = range(PARTITIONS)
    wait_for(lambda: set(leaders(b0.bootstrap, "spread").values()) == {0, 1}, timeout=10, what="the topic's leaders")
    on_b0 = [p for p, leader in leaders(b0.bootstrap, "spread").items() if leader == 0]
    transactional_id = key_coordinated_by(b0, "zk-tx", 1)
    assert coordinator_of(b1, transactional_id, 1) == 1, "both brokers agree"

    producer = Producer(b0.bootstrap, transactional_id=transactional_id, linger_ms=0, transaction_timeout_ms=6000)
    producer.init_transactions()
    producer.begin_transaction()
    for p in every:
        producer.send("spread", b"committed-%d" % p, partition=p)
    producer.commit_transaction()
    expected = {p: [b"committed-%d" % p] for p in every}
    wait_until_stable(b0.bootstrap, "spread", every, timeout=15)
    assert committed(b0.bootstrap, "spread", every) == expected
    zk, node = zk_factory(), f"/kafkalog/transactions/{transactional_id.encode().hex()}"
    # Complete* is stored by the coordinator's timer, a moment after the markers (docs/transactions.md)
    wait_for(lambda: json.loads(zk.get(node)[0])["state"] == "CompleteCommit", timeout=10, what="CompleteCommit stored")
    assert json.loads(zk.get(node)[0])["transactional_id"] == transactional_id

    producer.begin_transaction()
    for p in every:
        producer.send("spread", b"open-%d" % p, partition=p)
    producer.flush()
    stable, end = stable_and_end(b0.bootstrap, "spread", every)
    assert all(s < e for s, e in zip(stable, end, strict=True)), "the transaction is open everywhere"
    epoch = describe_transaction(b1.port, transactional_id)["producer_epoch"]
    producer.close()
    b1.kill()  # the coordinator, with the transaction open

    # broker 0 takes the id over once broker 1's registration expires, and times the transaction
    # out: its own partitions are aborted at once, broker 1's wait for it
    wait_for(lambda: coordinator_of(b0, transactional_id, 1) == 0, timeout=20, what="broker 0 to coordinate the id")
    wait_until_stable(b0.bootstrap, "spread", on_b0, timeout=30)
    taken_over = describe_transaction(b0.port, transactional_id)
    assert taken_over["transaction_state"] == "PrepareAbort", "broker 1's partitions wait for their marker"
    assert taken_over["producer_epoch"] == epoch + 1, "aborted by the coordinator: the producer is fenced"
    assert committed(b0.bootstrap, "spread", on_b0) == {p: expected[p] for p in on_b0}

    b1.start()
    wait_until_stable(b0.bootstrap, "spread", every, timeout=30)
    wait_for(
        lambda: (
            describe_transaction((b0 if coordinator_of(b0, transactional_id, 1) == 0 else b1).port, transactional_id)[
                "transaction_state"
            ]
            == "CompleteAbort"
        ),
        timeout=20,
        what="the abort to be complete",
    )
    assert committed(b0.bootstrap, "spread", every) == expected


# ---------------------------------------------------------------------------------- static cluster


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for sock in sockets:
        sock.bind(("127.0.0.1", 0))
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports


@pytest.fixture(scope="module")
def static_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[BrokerProcess]]:
    root = tmp_path_factory.mktemp("txn-static-cluster")
    ports = _free_ports(2)
    members = [{"id": i, "host": "127.0.0.1", "port": port} for i, port in enumerate(ports)]
    brokers = [
        BrokerProcess(
            root / f"b{i}",
            broker_id=i,
            port=ports[i],
            cluster=members,
            topics=[{"name": "static", "partitions": PARTITIONS}],
        )
        for i in range(2)
    ]
    for broker in brokers:
        broker.start()
    yield brokers
    for broker in brokers:
        broker.__exit__()


def test_offsets_sent_to_a_transaction_whose_coordinator_is_not_the_groups(static_pair: list[BrokerProcess]) -> None:
    b0, _ = static_pair
    transactional_id = key_coordinated_by(b0, "static-tx", 0)
    group = key_coordinated_by(b0, "static-group", 1, key_type=0)
    every = range(PARTITIONS)
    with (
        Producer(b0.bootstrap, transactional_id=transactional_id, linger_ms=0) as producer,
        OffsetsClient(b0.bootstrap) as offsets,
    ):
        producer.init_transactions()
        producer.begin_transaction()
        for p in every:  # partitions led by both brokers
            producer.send("static", b"out-%d" % p, partition=p)
        producer.send_offsets_to_transaction({("static", 0): 7}, group)
        assert offsets.fetch(group, [("static", 0)]) == {("static", 0): None}, "not before the commit"
        producer.commit_transaction()
        wait_for(
            lambda: offsets.fetch(group, [("static", 0)]) == {("static", 0): 7},
            timeout=15, what="the group's coordinator to apply the committed offsets",
        )  # fmt: skip
        wait_until_stable(b0.bootstrap, "static", every, timeout=15)
        assert committed(b0.bootstrap, "static", every) == {p: [b"out-%d" % p] for p in every}

        producer.begin_transaction()
        producer.send("static", b"dropped", partition=1)
        producer.send_offsets_to_transaction({("static", 0): 9}, group)
        producer.abort_transaction()
        wait_until_stable(b0.bootstrap, "static", every, timeout=15)
        # the abort's marker to the group's coordinator dropped the offsets it kept aside
        wait_for(
            lambda: not roundtrip(
                static_pair[1].port, ApiKey.OFFSET_FETCH, 7,
                {"group_id": group, "topics": [{"topic": "static", "partitions": [0]}], "require_stable": True},
            )["responses"][0]["partition_responses"][0]["error_code"],
            timeout=15, what="no unstable offsets left in the group",
        )  # fmt: skip
        assert offsets.fetch(group, [("static", 0)]) == {("static", 0): 7}
        assert committed(b0.bootstrap, "static", [1]) == {1: [b"out-1"]}
