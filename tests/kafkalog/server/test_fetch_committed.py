"""Fetch at isolation level 1 (read committed, Fetch v4+): it stops at the last stable offset, lists
the aborted transactions touching what it returns (an empty list when none; null reading
uncommitted, as Kafka), and a parked read-committed fetch waits for data below the last stable
offset, not for an open transaction's writes. Transactions are written into the partition's log as
a transactional producer's leader would (Log.append, Log.append_marker); our SimpleConsumer reading
committed then leaves the aborted records and the markers out."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkalog.client import SimpleConsumer
from kafkalog.log import Log
from kafkalog.protocol import ApiKey
from kafkalog.record import decode_all
from kafkalog.record.batch_format import encode_batch, iter_headers
from kafkalog.server import Broker
from tests.support.kafkalog import roundtrip

from .raw_transactions import in_process_broker

pytestmark = pytest.mark.integration

TOPIC = "txns"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with in_process_broker(tmp_path / "data", TOPIC) as running:
        yield running


def the_log(broker: Broker) -> Log:
    log = broker.logs.get_log(TOPIC, 0)
    assert log is not None
    return log


def batch(*values: bytes, producer: int = -1, sequence: int = -1) -> bytes:
    now = int(time.time() * 1000)
    records = [(None, value, now, ()) for value in values]
    transactional = producer >= 0
    return encode_batch(
        records, producer_id=producer, producer_epoch=0, base_sequence=sequence, transactional=transactional
    )


def fetch(
    broker: Broker, offset: int, isolation: int, *, version: int = 11, max_wait_ms: int = 0, max_bytes: int = 1 << 20
) -> dict[str, Any]:
    body = {
        "replica_id": -1,
        "max_wait_ms": max_wait_ms,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": isolation,
        "topics": [{"topic": TOPIC, "partitions": [{"partition": 0, "fetch_offset": offset, "max_bytes": max_bytes}]}],
    }
    answer: dict[str, Any] = roundtrip(broker.port, ApiKey.FETCH, version, body)["responses"][0]["partition_responses"][
        0
    ]
    assert answer["error_code"] == 0, answer
    return answer


def batch_ranges(answer: dict[str, Any]) -> list[tuple[int, int]]:
    """(first, last) offset of every whole batch of the answer (a partial one at its end left out)."""
    data = bytes(answer["record_set"] or b"")
    ranges = []
    pos = 0
    while pos + 12 <= len(data) and pos + 12 + int.from_bytes(data[pos + 8 : pos + 12], "big") <= len(data):
        (header,) = iter_headers(data, start=pos, end=pos + 12 + int.from_bytes(data[pos + 8 : pos + 12], "big"))
        ranges.append((header.base_offset, header.last_offset))
        pos = header.end
    return ranges


def interleaved(log: Log) -> None:
    """0-1 producer 1, 2 plain, 3-4 producer 2, 5 producer 1's ABORT: producer 2's stays open."""
    log.append(batch(b"a1", b"a2", producer=1, sequence=0))
    log.append(batch(b"c1"))
    log.append(batch(b"b1", b"b2", producer=2, sequence=0))
    log.append_marker(1, 0, commit=False, coordinator_epoch=0)


def test_read_committed_stops_at_the_last_stable_offset_and_lists_the_aborts(broker: Broker) -> None:
    log = the_log(broker)
    interleaved(log)
    committed = fetch(broker, 0, 1)
    assert (committed["high_watermark"], committed["last_stable_offset"]) == (6, 3)
    assert batch_ranges(committed) == [(0, 1), (2, 2)]  # nothing of the open transaction
    assert committed["aborted_transactions"] == [{"producer_id": 1, "first_offset": 0}]
    uncommitted = fetch(broker, 0, 0)
    assert (uncommitted["high_watermark"], uncommitted["last_stable_offset"]) == (6, 3)
    assert batch_ranges(uncommitted) == [(0, 1), (2, 2), (3, 4), (5, 5)]
    assert uncommitted["aborted_transactions"] is None
    at_the_stable_offset = fetch(broker, 3, 1)
    assert at_the_stable_offset["record_set"] in (None, b"")
    assert at_the_stable_offset["aborted_transactions"] == []  # a list, empty: nothing aborted there

    log.append_marker(2, 0, commit=True, coordinator_epoch=0)
    committed = fetch(broker, 0, 1)
    assert committed["last_stable_offset"] == committed["high_watermark"] == 7
    assert batch_ranges(committed) == [(0, 1), (2, 2), (3, 4), (5, 5), (6, 6)]
    assert fetch(broker, 6, 1)["aborted_transactions"] == []  # after producer 1's abort
    assert fetch(broker, 3, 1)["aborted_transactions"] == [{"producer_id": 1, "first_offset": 0}]

    with SimpleConsumer(f"127.0.0.1:{broker.port}", isolation="read_committed") as consumer:
        assert [m.value for m in consumer.messages(TOPIC, 0, start=0)] == [b"c1", b"b1", b"b2"]
    with SimpleConsumer(f"127.0.0.1:{broker.port}") as consumer:
        values = [m.value for m in consumer.messages(TOPIC, 0, start=0)]
        assert values == [b"a1", b"a2", b"c1", b"b1", b"b2"]  # every data record, never a marker


def test_the_aborted_list_covers_only_what_the_fetch_returns(broker: Broker) -> None:
    log = the_log(broker)
    log.append(batch(b"early"))  # 0
    log.append(batch(b"x" * 500))  # 1
    log.append(batch(b"d1", producer=4, sequence=0))  # 2
    log.append_marker(4, 0, commit=False, coordinator_epoch=0)  # 3
    small = fetch(broker, 0, 1, max_bytes=200)  # the first batch only (and part of the second)
    assert batch_ranges(small) == [(0, 0)]
    assert small["aborted_transactions"] == []
    assert fetch(broker, 0, 1)["aborted_transactions"] == [{"producer_id": 4, "first_offset": 2}]


def test_isolation_before_fetch_v4_and_on_old_versions(broker: Broker) -> None:
    log = the_log(broker)
    interleaved(log)
    old = fetch(broker, 0, 0, version=3)  # no isolation level: everything, converted to magic 1
    assert [m.value for m in decode_all(bytes(old["record_set"]))][:5] == [b"a1", b"a2", b"c1", b"b1", b"b2"]
    v4 = fetch(broker, 0, 1, version=4)
    assert v4["last_stable_offset"] == 3 and batch_ranges(v4) == [(0, 1), (2, 2)]


def produce_plain(broker: Broker, value: bytes) -> None:
    body = {
        "acks": 1,
        "timeout_ms": 1000,
        "topic_data": [{"topic": TOPIC, "data": [{"partition": 0, "record_set": batch(value)}]}],
    }
    answer = roundtrip(broker.port, ApiKey.PRODUCE, 3, body)["responses"][0]["partition_responses"][0]
    assert answer["error_code"] == 0


def parked_fetch(broker: Broker, offset: int, max_wait_ms: int, meanwhile: bytes) -> tuple[float, dict[str, Any]]:
    """A read-committed fetch at ``offset`` that parks; ``meanwhile`` is produced while it waits.
    Returns how long it took to answer, and the answer."""
    answers: list[tuple[float, dict[str, Any]]] = []

    def parked() -> None:
        started = time.monotonic()
        answer = fetch(broker, offset, 1, max_wait_ms=max_wait_ms)
        answers.append((time.monotonic() - started, answer))

    waiting = threading.Thread(target=parked)
    waiting.start()
    time.sleep(0.3)
    produce_plain(broker, meanwhile)
    waiting.join(max_wait_ms / 1000 + 10)
    assert answers, "the fetch was answered"
    return answers[0]


def test_a_parked_read_committed_fetch_waits_for_data_below_the_last_stable_offset(broker: Broker) -> None:
    log = the_log(broker)
    log.append(batch(b"t1", producer=7, sequence=0))  # 0, open
    # data arrives, all of it above the last stable offset: the fetch keeps waiting
    elapsed, answer = parked_fetch(broker, 0, 1500, b"later")
    assert elapsed >= 1.4, "answered before its wait ran out, with nothing to return"
    assert answer["record_set"] in (None, b"") and answer["last_stable_offset"] == 0

    log.append_marker(7, 0, commit=True, coordinator_epoch=0)  # offsets 0-2 are readable now
    elapsed, answer = parked_fetch(broker, 3, 5000, b"stable")  # no transaction open: it wakes
    assert elapsed < 3, "data below the last stable offset wakes the fetch"
    assert batch_ranges(answer) == [(3, 3)] and answer["last_stable_offset"] == 4


def test_list_offsets_reading_committed_answers_the_last_stable_offset(broker: Broker) -> None:
    interleaved(the_log(broker))

    def latest(isolation: int) -> int:
        body = {
            "replica_id": -1,
            "isolation_level": isolation,
            "topics": [{"topic": TOPIC, "partitions": [{"partition": 0, "timestamp": -1}]}],
        }
        answer = roundtrip(broker.port, ApiKey.LIST_OFFSETS, 2, body)["responses"][0]["partition_responses"][0]
        assert answer["error_code"] == 0
        return int(answer["offset"])

    assert (latest(1), latest(0)) == (3, 6)
    with SimpleConsumer(f"127.0.0.1:{broker.port}", isolation="read_committed") as consumer:
        assert consumer.latest_offset(TOPIC, 0) == 3
