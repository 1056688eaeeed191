"""A transactional producer spoken in raw requests (tests.support.kafkalog.roundtrip), for the
broker tests that need a request no client would send (a wrong epoch, a partition never added, a
control batch) or a transaction stopped at an exact step; and what a read-committed reader finds."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafkalog.client import SimpleConsumer
from kafkalog.protocol import ApiKey, ErrorCode
from kafkalog.record.batch_format import encode_batch
from kafkalog.server import Broker, BrokerConfig
from tests.support.kafkalog import roundtrip


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.1)


@dataclass
class RawTransaction:
    """One transactional id's producer on the broker at ``port`` (its coordinator): each method one
    request, answering the error code(s) the broker gave. Batch sequences are counted per partition."""

    port: int
    transactional_id: str
    timeout_ms: int = 60_000
    producer_id: int = -1
    epoch: int = -1
    sequences: dict[tuple[str, int], int] = field(default_factory=dict)

    def init(self, *, version: int = 4) -> int:
        body = {"transactional_id": self.transactional_id, "transaction_timeout_ms": self.timeout_ms,
                "producer_id": -1, "producer_epoch": -1}  # fmt: skip
        answer = roundtrip(self.port, ApiKey.INIT_PRODUCER_ID, version, body)
        if answer["error_code"] == ErrorCode.NONE:
            self.producer_id, self.epoch = answer["producer_id"], answer["producer_epoch"]
            self.sequences.clear()
        return int(answer["error_code"])

    def add(
        self, topic: str, partitions: Iterable[int], *, version: int = 3, producer_id: int | None = None,
        epoch: int | None = None,
    ) -> set[int]:  # fmt: skip
        """AddPartitionsToTxn (v0-3): the set of error codes answered."""
        body = {
            "v3_and_below_transactional_id": self.transactional_id,
            "v3_and_below_producer_id": self.producer_id if producer_id is None else producer_id,
            "v3_and_below_producer_epoch": self.epoch if epoch is None else epoch,
            "v3_and_below_topics": [{"name": topic, "partitions": list(partitions)}],
        }
        answer = roundtrip(self.port, ApiKey.ADD_PARTITIONS_TO_TXN, version, body)
        return {
            p["partition_error_code"]
            for t in answer["results_by_topic_v3_and_below"]
            for p in t["results_by_partition"]
        }

    def produce(
        self, topic: str, partition: int, values: list[bytes], *, epoch: int | None = None,
        transactional_id: str | None = None, control: bool = False,
    ) -> dict[str, Any]:  # fmt: skip
        """One transactional batch of ``values`` (Produce v9); the partition's answer. The sequence
        moves on only when the batch is appended."""
        key = (topic, partition)
        batch = encode_batch(
            [(None, v, time.time_ns() // 1_000_000, ()) for v in values],  # now: retention keeps it
            producer_id=self.producer_id, producer_epoch=self.epoch if epoch is None else epoch,
            base_sequence=self.sequences.get(key, 0), transactional=True, control=control,
        )  # fmt: skip
        body = {
            "transactional_id": transactional_id or self.transactional_id,
            "acks": -1,
            "timeout_ms": 5000,
            "topic_data": [{"topic": topic, "data": [{"partition": partition, "record_set": batch}]}],
        }
        answer: dict[str, Any] = roundtrip(self.port, ApiKey.PRODUCE, 9, body)["responses"][0]["partition_responses"][0]
        if answer["error_code"] == ErrorCode.NONE:
            self.sequences[key] = self.sequences.get(key, 0) + len(values)
        return answer

    def end(self, *, commit: bool, version: int = 3, epoch: int | None = None, producer_id: int | None = None) -> int:
        body = {"transactional_id": self.transactional_id, "committed": commit,
                "producer_id": self.producer_id if producer_id is None else producer_id,
                "producer_epoch": self.epoch if epoch is None else epoch}  # fmt: skip
        return int(roundtrip(self.port, ApiKey.END_TXN, version, body)["error_code"])

    def describe(self) -> dict[str, Any]:
        return describe_transaction(self.port, self.transactional_id)


def describe_transaction(port: int, transactional_id: str) -> dict[str, Any]:
    answer = roundtrip(port, ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [transactional_id]})
    state: dict[str, Any] = answer["transaction_states"][0]
    return state


def committed(bootstrap: str, topic: str, partitions: Iterable[int]) -> dict[int, list[bytes]]:
    """What a read-committed consumer reads of each partition up to its last stable offset."""
    with SimpleConsumer(bootstrap, isolation="read_committed") as consumer:
        return {
            p: [m.value or b"" for m in consumer.messages(topic, p, 0, consumer.latest_offset(topic, p))]
            for p in partitions
        }


def stable_and_end(bootstrap: str, topic: str, partitions: Iterable[int]) -> tuple[list[int], list[int]]:
    """(last stable offsets, log end offsets) of the partitions."""
    keys = [(topic, p) for p in partitions]
    with SimpleConsumer(bootstrap, isolation="read_committed") as consumer:
        stable, end = consumer.latest_offsets(keys), consumer.log_end_offsets(keys)
    return [stable[k] for k in keys], [end[k] for k in keys]


def log_ends(bootstrap: str, topic: str, partitions: Iterable[int]) -> list[int]:
    return stable_and_end(bootstrap, topic, partitions)[1]


def wait_until_stable(bootstrap: str, topic: str, partitions: Iterable[int], timeout: float) -> None:
    """Until no transaction holds back a partition's last stable offset."""
    wanted = list(partitions)

    def stable() -> bool:
        lso, end = stable_and_end(bootstrap, topic, wanted)
        return lso == end

    wait_for(stable, timeout, f"the last stable offsets of {topic} to reach the log ends")


@contextlib.contextmanager
def in_process_broker(data_dir: Path, topic: str) -> Iterator[Broker]:
    """A broker in this process (one partition per topic) with ``topic`` made: the tests that reach
    into its logs or its coordinator."""
    config = BrokerConfig(port=0, data_dirs=(data_dir,), default_partitions=1, metrics_port=0)
    with Broker(config) as running:
        roundtrip(running.port, ApiKey.METADATA, 1, {"topics": [{"name": topic}]})  # creates it
        yield running
