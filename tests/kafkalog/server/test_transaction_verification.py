"""KIP-890 part 1 made atomic with the append: a transactional Produce whose check with the
coordinator passed, and whose transaction then ended (its ABORT marker written) before the batch was
appended, is refused INVALID_TXN_STATE instead of opening a transaction the coordinator does not know.
The broker runs in this process; the race is made exact by ending the transaction inside the
coordinator's ``verify``, right after it answered (kafkalog.log.producer_state, "Verification guards")."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkalog.log import Log
from kafkalog.protocol import ErrorCode
from kafkalog.server import Broker

from .raw_transactions import RawTransaction, in_process_broker

pytestmark = pytest.mark.integration

TOPIC = "verified"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with in_process_broker(tmp_path / "data", TOPIC) as running:
        yield running


def test_a_transaction_ended_between_the_check_and_the_append_opens_nothing(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = broker.logs.get_log(TOPIC, 0)
    assert isinstance(log, Log)
    producer = RawTransaction(broker.port, "late-batch")
    assert producer.init() == ErrorCode.NONE
    assert producer.add(TOPIC, [0]) == {ErrorCode.NONE}
    coordinator = broker.handlers.transactions.coordinator
    verify = coordinator.verify
    ended: list[int] = []

    def verify_then_abort(*args: Any, **kwargs: Any) -> dict[tuple[str, int], int]:
        answer = verify(*args, **kwargs)  # the partition is in the open transaction: NONE
        # the client timed out and aborted before the produce reached the log's lock
        ended.append(coordinator.end_transaction("late-batch", producer.producer_id, producer.epoch, commit=False))
        return answer

    monkeypatch.setattr(coordinator, "verify", verify_then_abort)
    answer = producer.produce(TOPIC, 0, [b"late"])
    assert ended == [ErrorCode.NONE]
    assert answer["error_code"] == ErrorCode.INVALID_TXN_STATE
    assert log.log_end_offset == 1  # the ABORT marker alone
    assert log.last_stable_offset == 1  # no transaction hangs behind the coordinator's back
    assert [s.current_txn_start_offset for s in log.producer_states()] == [-1]

    monkeypatch.undo()  # the next transaction is verified and written as usual
    assert producer.add(TOPIC, [0]) == {ErrorCode.NONE}
    assert producer.produce(TOPIC, 0, [b"on time"])["error_code"] == ErrorCode.NONE
    assert log.last_stable_offset == 1 < log.log_end_offset
    assert producer.end(commit=True) == ErrorCode.NONE
    assert log.last_stable_offset == log.log_end_offset == 3
