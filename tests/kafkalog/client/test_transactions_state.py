"""A transactional producer's state machine and its errors, without a broker: which call each state
allows, how errors are sorted (retriable, abortable, fatal), and the producer's refusals that need
no coordinator (a call out of turn, a coordinator never reached)."""

from __future__ import annotations

import time

import pytest

from kafkalog.client import Producer
from kafkalog.client.transactions import State, TransactionState, error_for
from kafkalog.errors import (
    AbortableTransactionError,
    BrokerResponseError,
    ClientError,
    FatalTransactionError,
    ProducerFencedError,
    TransactionStateError,
    TransactionTimeoutError,
)
from kafkalog.protocol.error_codes import ErrorCode


def ready() -> TransactionState:
    state = TransactionState("t")
    state.initializing()
    state.initialized()
    return state


def test_a_transaction_goes_ready_to_open_to_ended_and_again() -> None:
    state = ready()
    state.begin()
    assert state.state is State.IN_TRANSACTION and not state.started
    assert state.to_add([("a", 0), ("a", 1)]) == {("a", 0), ("a", 1)}
    state.added([("a", 0)])
    assert state.to_add([("a", 0), ("a", 1)]) == {("a", 1)} and state.started
    state.committing()
    state.ended()
    assert state.state is State.READY
    state.begin()  # the next transaction holds nothing of the last one
    assert state.to_add([("a", 0)]) == {("a", 0)} and not state.started


@pytest.mark.parametrize(
    ("call", "state_name"),
    [
        (lambda s: s.begin(), "uninitialized"),
        (lambda s: s.check_send(), "uninitialized"),
        (lambda s: s.committing(), "uninitialized"),
        (lambda s: s.aborting(), "uninitialized"),
        (lambda s: s.adding_offsets(), "uninitialized"),
    ],
)
def test_nothing_before_init(call: object, state_name: str) -> None:
    state = TransactionState("t")
    with pytest.raises(TransactionStateError, match=f"'t' is {state_name}"):
        call(state)  # type: ignore[operator]
    assert state.state is State.UNINITIALIZED


def test_calls_out_of_turn_leave_the_state_unchanged() -> None:
    state = ready()
    for call in (state.committing, state.aborting, state.check_send, state.adding_offsets, state.initializing):
        with pytest.raises(TransactionStateError, match="is ready"):
            call()
    state.begin()
    with pytest.raises(TransactionStateError, match=r"cannot begin a transaction: .* is in a transaction"):
        state.begin()
    assert state.state is State.IN_TRANSACTION


def test_an_abortable_error_allows_only_abort_then_the_next_transaction() -> None:
    state = ready()
    state.begin()
    first = BrokerResponseError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "TOPIC_AUTHORIZATION_FAILED", "producing")
    state.send_failed(first)
    state.send_failed(BrokerResponseError(45, "OUT_OF_ORDER_SEQUENCE_NUMBER", "producing"))  # the first is kept
    assert state.state is State.ABORTABLE_ERROR and state.failed_sends
    for call in (state.committing, state.check_send, state.adding_offsets):
        with pytest.raises(AbortableTransactionError, match=r"TOPIC_AUTHORIZATION_FAILED.*abort the transaction"):
            call()
    state.aborting()
    state.ended()
    assert state.state is State.READY and state.error is None
    state.begin()
    assert not state.failed_sends


def test_fenced_is_fatal_for_good_and_keeps_its_type() -> None:
    state = ready()
    state.begin()
    state.send_failed(BrokerResponseError(ErrorCode.INVALID_PRODUCER_EPOCH, "INVALID_PRODUCER_EPOCH", "producing"))
    assert state.state is State.FATAL
    for call in (state.aborting, state.committing, state.check_send):
        with pytest.raises(ProducerFencedError, match="another producer has this transactional id"):
            call()
    state.ended()  # nothing brings it back
    with pytest.raises(ProducerFencedError):
        state.begin()


def test_an_abortable_error_after_a_fatal_one_changes_nothing() -> None:
    state = ready()
    state.fail(error_for(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", "x"))
    state.fail(AbortableTransactionError("later"))
    assert state.state is State.FATAL
    assert isinstance(state.error, FatalTransactionError) and "AUTHORIZATION" in str(state.error)


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        (ErrorCode.PRODUCER_FENCED, ProducerFencedError),
        (ErrorCode.INVALID_PRODUCER_EPOCH, ProducerFencedError),
        (ErrorCode.TRANSACTION_COORDINATOR_FENCED, ProducerFencedError),
        (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, FatalTransactionError),
        (ErrorCode.INVALID_TRANSACTION_TIMEOUT, FatalTransactionError),
        (ErrorCode.INVALID_TXN_STATE, FatalTransactionError),
        (ErrorCode.TOPIC_AUTHORIZATION_FAILED, AbortableTransactionError),
        (ErrorCode.GROUP_AUTHORIZATION_FAILED, AbortableTransactionError),
        (ErrorCode.ILLEGAL_GENERATION, AbortableTransactionError),
        (ErrorCode.TRANSACTION_ABORTABLE, AbortableTransactionError),
    ],
)
def test_error_codes_are_typed_as_kafkas_producer_types_them(code: int, kind: type) -> None:
    error = error_for(code, ErrorCode(code).name, "ending the transaction")
    assert type(error) is kind
    assert f"ending the transaction: {ErrorCode(code).name} ({code})" in str(error)
    assert isinstance(error.cause, BrokerResponseError) and error.cause.error_code == code  # type: ignore[attr-defined]


def test_concurrent_transactions_is_retriable() -> None:
    assert BrokerResponseError(ErrorCode.CONCURRENT_TRANSACTIONS, "CONCURRENT_TRANSACTIONS", "x").retriable


# ------------------------------------------------------------------ the producer, with no coordinator


def unreachable(**options: object) -> Producer:
    return Producer("127.0.0.1:1", request_timeout_ms=300, retry_backoff_ms=50, **options)  # type: ignore[arg-type]


def test_transactional_calls_out_of_turn_raise_before_any_request() -> None:
    with unreachable(transactional_id="t") as producer:
        assert producer.acks == -1  # Kafka's default for a transactional producer
        for call in (producer.begin_transaction, producer.commit_transaction, producer.abort_transaction):
            with pytest.raises(TransactionStateError, match="'t' is uninitialized"):
                call()
        with pytest.raises(TransactionStateError, match="cannot send"):
            producer.send("topic", b"v", partition=0)
        with pytest.raises(TransactionStateError, match="cannot send offsets"):
            producer.send_offsets_to_transaction({("topic", 0): 1}, "group")
    with unreachable() as plain, pytest.raises(TransactionStateError, match="no transactional_id"):
        plain.begin_transaction()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"transactional_id": "t", "acks": 1}, "acks=-1"),
        ({"transactional_id": "t", "idempotence": False}, "idempotent"),
        ({"transactional_id": ""}, "may not be empty"),
    ],
)
def test_a_transactional_producer_is_idempotent_with_all_acks(options: dict[str, object], message: str) -> None:
    with pytest.raises(ClientError, match=message):
        unreachable(**options)


def test_init_without_a_coordinator_times_out_and_may_be_called_again() -> None:
    with unreachable(transactional_id="t", max_block_ms=400) as producer:
        started = time.monotonic()
        with pytest.raises(
            TransactionTimeoutError, match=r"initializing transactions \('t'\) did not succeed in 0.4 s"
        ):
            producer.init_transactions()
        assert 0.3 < time.monotonic() - started < 5
        with pytest.raises(TransactionTimeoutError):  # not fatal: the same call again
            producer.init_transactions()
