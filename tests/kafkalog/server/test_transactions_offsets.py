"""Offsets in a transaction, as consume-transform-produce uses them (Kafka Streams' exactly_once_v2,
librdkafka's send_offsets_to_transaction), on kafkalog and on Kafka 4.x: the group member's
generation fences a TxnOffsetCommit from before a rebalance (KIP-447), and a read-committed
consumer asking for stable offsets (OffsetFetch v7+ require_stable) is told UNSTABLE_OFFSET_COMMIT
while a transaction's offsets wait for its end."""

from __future__ import annotations

import time
import uuid
from typing import Any

import confluent_kafka
import pytest

from kafkalog.client import Admin
from kafkalog.protocol import ApiKey, ErrorCode
from tests.support.kafkalog import roundtrip

pytestmark = pytest.mark.integration


@pytest.fixture(params=["kafkalog_shared", "kafka4"])
def bootstrap(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue(request.param).bootstrap)


def _consumer(bootstrap: str, group: str) -> Any:
    return confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
        }
    )


def _assigned(consumer: Any, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not consumer.assignment():
        assert time.monotonic() < deadline, "the consumer was never assigned its partitions"
        consumer.poll(0.2)


def _stable_offset(bootstrap: str, group: str, topic: str) -> tuple[int, int]:
    """(error code, offset) of partition 0 as OffsetFetch v7 with require_stable answers it."""
    port = int(bootstrap.rsplit(":", 1)[1])
    coordinator = roundtrip(port, ApiKey.FIND_COORDINATOR, 2, {"key": group, "key_type": 0})
    assert coordinator["error_code"] == ErrorCode.NONE, coordinator
    body = {"group_id": group, "topics": [{"topic": topic, "partitions": [0]}], "require_stable": True}
    answer = roundtrip(coordinator["port"], ApiKey.OFFSET_FETCH, 7, body)
    (partition,) = answer["responses"][0]["partition_responses"]
    return partition["error_code"], partition["offset"]


def test_offsets_wait_for_the_commit_and_a_member_of_an_old_generation_is_fenced(bootstrap: str) -> None:
    topic, group = f"ctp-{uuid.uuid4().hex[:8]}", f"ctp-{uuid.uuid4().hex[:8]}"
    with Admin(bootstrap) as admin:
        admin.create_topic(topic, 1)
    member = _consumer(bootstrap, group)
    rebalances: list[int] = []
    member.subscribe([topic], on_assign=lambda consumer, partitions: rebalances.append(len(partitions)))
    _assigned(member)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": f"ctp-{group}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"out", partition=0)
    producer.send_offsets_to_transaction(
        [confluent_kafka.TopicPartition(topic, 0, 7)], member.consumer_group_metadata(), 30
    )
    assert _stable_offset(bootstrap, group, topic)[0] == ErrorCode.UNSTABLE_OFFSET_COMMIT
    producer.commit_transaction(30)
    deadline = time.monotonic() + 15  # Kafka writes the group's marker after EndTxn answered
    while _stable_offset(bootstrap, group, topic) != (ErrorCode.NONE, 7):
        assert time.monotonic() < deadline, _stable_offset(bootstrap, group, topic)
        time.sleep(0.2)

    stale = member.consumer_group_metadata()  # this generation, about to end
    newcomer = _consumer(bootstrap, group)
    newcomer.subscribe([topic])
    deadline = time.monotonic() + 30
    while len(rebalances) < 2:  # both poll until the group has rebalanced into a new generation
        assert time.monotonic() < deadline, "the group never rebalanced"
        member.poll(0.2)
        newcomer.poll(0.2)
    producer.begin_transaction()
    producer.produce(topic, b"zombie", partition=0)
    with pytest.raises(confluent_kafka.KafkaException) as refused:
        producer.send_offsets_to_transaction([confluent_kafka.TopicPartition(topic, 0, 9)], stale, 30)
    assert refused.value.args[0].code() in (
        confluent_kafka.KafkaError.ILLEGAL_GENERATION,
        confluent_kafka.KafkaError.UNKNOWN_MEMBER_ID,
        confluent_kafka.KafkaError.FENCED_INSTANCE_ID,
    ), refused.value
    producer.abort_transaction(30)
    assert _stable_offset(bootstrap, group, topic) == (ErrorCode.NONE, 7)
    newcomer.close()
    member.close()
    del producer
