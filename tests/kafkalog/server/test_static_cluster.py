"""A static cluster of two broker processes sharing one configuration: partitions spread over the
brokers, metadata names each partition's leader, a broker refuses partitions it does not lead, and
real clients produce and consume across both; run-time topic creation is refused clearly."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from kafkalog.protocol import ApiKey
from kafkalog.record import MessageSetBuilder
from tests.support.kafkalog import BrokerProcess, roundtrip

from .clients import CLIENTS

TOPIC = "orders"
PARTITIONS = 6


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for sock in sockets:
        sock.bind(("127.0.0.1", 0))
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[BrokerProcess]]:
    root = tmp_path_factory.mktemp("cluster")
    ports = free_ports(2)
    members = [{"id": i, "host": "127.0.0.1", "port": port} for i, port in enumerate(ports)]
    brokers = [
        BrokerProcess(
            root / f"broker{i}",
            broker_id=i,
            port=ports[i],
            cluster=members,
            topics=[{"name": TOPIC, "partitions": PARTITIONS}],
        )
        for i in range(2)
    ]
    for broker in brokers:
        broker.start()
    yield brokers
    for broker in brokers:
        broker.stop()


def ask(broker: BrokerProcess, key: ApiKey, version: int, body: dict[str, object]) -> dict[str, object]:
    return roundtrip(broker.port, key, version, body)


def leaders(broker: BrokerProcess) -> dict[int, int]:
    metadata = ask(broker, ApiKey.METADATA, 1, {"topics": [{"name": TOPIC}]})
    (topic,) = metadata["topic_metadata"]  # type: ignore[misc]
    assert topic["error_code"] == 0
    return {p["partition"]: p["leader"] for p in topic["partition_metadata"]}


def test_every_broker_tells_the_same_spread_of_leaders(cluster: list[BrokerProcess]) -> None:
    first, second = leaders(cluster[0]), leaders(cluster[1])
    assert first == second
    assert sorted(first) == list(range(PARTITIONS))
    assert set(first.values()) == {0, 1}, "partitions are spread over both brokers"
    metadata = ask(cluster[1], ApiKey.METADATA, 1, {"topics": None})
    assert {b["node_id"]: b["port"] for b in metadata["brokers"]} == {0: cluster[0].port, 1: cluster[1].port}  # type: ignore[attr-defined]


def test_a_broker_refuses_partitions_it_does_not_lead(cluster: list[BrokerProcess]) -> None:
    builder = MessageSetBuilder()
    builder.append(b"misdirected", None, 1000)
    data = builder.build()
    led = leaders(cluster[0])
    for partition, leader in led.items():
        wrong = cluster[1 - leader]
        response = ask(
            wrong,
            ApiKey.PRODUCE,
            2,
            {
                "acks": 1,
                "timeout_ms": 1000,
                "topic_data": [{"topic": TOPIC, "data": [{"partition": partition, "record_set": data}]}],
            },
        )
        (answer,) = response["responses"][0]["partition_responses"]  # type: ignore[index]
        assert answer["error_code"] == 6, f"partition {partition} led by {leader}"  # NOT_LEADER_FOR_PARTITION


@pytest.mark.parametrize("client", ["kafka-python", "confluent-kafka"])
def test_clients_produce_and_consume_across_the_cluster(cluster: list[BrokerProcess], client: str) -> None:
    sent = [(p, f"k{p}-{i}".encode(), f"{client}-{p}-{i}".encode(), None) for i in range(5) for p in range(PARTITIONS)]
    CLIENTS[client](cluster[0].bootstrap, "default").produce(TOPIC, sent, "snappy")
    reader = CLIENTS[client](cluster[1].bootstrap, "default")
    stored = sum(reader.offsets(TOPIC, p, None)[1] for p in range(PARTITIONS))
    reads = reader.read(TOPIC, PARTITIONS, stored)
    assert len(reads) == stored
    mine = [(r.partition, r.key, r.value) for r in reads if r.value and r.value.startswith(client.encode())]
    assert sorted(mine) == sorted((p, k, v) for p, k, v, _ in sent)


def test_topics_cannot_be_created_at_run_time_in_a_static_cluster(cluster: list[BrokerProcess]) -> None:
    response = ask(
        cluster[0],
        ApiKey.CREATE_TOPICS,
        1,
        {
            "create_topic_requests": [
                {
                    "topic": "new",
                    "num_partitions": 2,
                    "replication_factor": 1,
                    "replica_assignment": [],
                    "config_entries": [],
                }
            ],
            "timeout_ms": 1000,
            "validate_only": False,
        },
    )
    (error,) = response["topic_errors"]  # type: ignore[misc]
    assert error["error_code"] == 44 and "declared in its config" in error["error_message"]
    metadata = ask(cluster[0], ApiKey.METADATA, 1, {"topics": [{"name": "unknown-topic"}]})
    assert metadata["topic_metadata"][0]["error_code"] == 3  # type: ignore[index]


def test_both_brokers_agree_on_a_groups_coordinator(cluster: list[BrokerProcess]) -> None:
    for group in ("g1", "analytics", "mirror-east"):
        answers = {ask(b, ApiKey.FIND_COORDINATOR, 0, {"key": group})["node_id"] for b in cluster}
        assert len(answers) == 1
    committed = CLIENTS["kafka-python"](cluster[1].bootstrap, "default").commit_and_fetch("g1", TOPIC, 3, 2)
    assert committed == 2
