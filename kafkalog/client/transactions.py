"""A transactional producer's state machine (KIP-98, transaction version 1), without any I/O.

Role: says which transactional call the producer may make now, remembers the partitions and groups
the current transaction holds, and keeps the first error that ended it: an abortable one (a send
failed, a partition or the group was refused: only an abort may follow) or a fatal one (fenced, not
authorized ...: nothing transactional may follow). The coordinator's error codes are sorted here
into retriable, abortable and fatal, as Kafka's producer sorts them.
kafkalog.client.transaction_manager makes the calls; this module only decides.

States and their transitions::

    UNINITIALIZED --init--> READY --begin--> IN_TRANSACTION --commit--> COMMITTING --ended--> READY
                                             IN_TRANSACTION --abort---> ABORTING ----ended--> READY
                                             IN_TRANSACTION / COMMITTING --abortable error--> ABORTABLE_ERROR
                                             ABORTABLE_ERROR --abort--> ABORTING
    any state --fatal error--> FATAL (for good)

Thread-safe: the application's thread makes the calls, the producer's sender thread adds partitions
and reports failed sends; one lock guards the state.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Iterable

from kafkalog.errors import (
    AbortableTransactionError,
    BrokerResponseError,
    FatalTransactionError,
    ProducerFencedError,
    TransactionError,
    TransactionStateError,
)
from kafkalog.protocol.error_codes import ErrorCode


class State(enum.Enum):
    UNINITIALIZED = "uninitialized"
    READY = "ready"
    IN_TRANSACTION = "in a transaction"
    COMMITTING = "committing"
    ABORTING = "aborting"
    ABORTABLE_ERROR = "in a transaction that must be aborted"
    FATAL = "failed for good"


RETRIABLE = frozenset(
    {
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,  # a topic being created: Kafka's producer retries it too
    }
)
"""Sent again after a back-off (NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE: to a coordinator
found again)."""
REDISCOVER = frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR})
"""The coordinator moved or is away: find it again before retrying."""
FENCED = frozenset(
    {ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED}
)
"""A newer producer with the same transactional id took over (Kafka 2.7+ answers PRODUCER_FENCED,
older brokers and Produce INVALID_PRODUCER_EPOCH)."""
FATAL = FENCED | {
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    ErrorCode.INVALID_TRANSACTION_TIMEOUT,
    ErrorCode.INVALID_PRODUCER_ID_MAPPING,
    ErrorCode.INVALID_TXN_STATE,
    ErrorCode.UNSUPPORTED_VERSION,
    ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT,
    ErrorCode.INVALID_REQUEST,
}
"""The producer can make no more transactional calls. Every other error aborts the transaction only."""


def error_for(code: int, name: str, context: str) -> TransactionError:
    """The typed error of a coordinator's (or a leader's) non-retriable ``code`` during ``context``."""
    cause = BrokerResponseError(code, name, context)
    if code in FENCED:
        return ProducerFencedError(f"{cause}: another producer has this transactional id", cause)
    if code in FATAL:
        return FatalTransactionError(str(cause), cause)
    return AbortableTransactionError(f"{cause}: the transaction must be aborted", cause)


class TransactionState:
    """The state of one transactional producer (see the module docstring)."""

    def __init__(self, transactional_id: str) -> None:
        self.transactional_id = transactional_id
        self._lock = threading.Lock()
        self._state = State.UNINITIALIZED
        self._error: TransactionError | None = None
        """What put the producer in ABORTABLE_ERROR or FATAL: raised again by the calls refused."""
        self._partitions: set[tuple[str, int]] = set()
        """The partitions added to the current transaction (AddPartitionsToTxn answered)."""
        self._groups: set[str] = set()
        """The groups whose offsets the current transaction holds (AddOffsetsToTxn answered)."""
        self.failed_sends = False
        """A send failed in this transaction: sequence numbers may have a gap; the abort bumps the
        epoch (InitProducerId with the current id and epoch, KIP-360) to start them again."""

    @property
    def state(self) -> State:
        return self._state

    @property
    def error(self) -> TransactionError | None:
        return self._error

    def _require(self, action: str, *allowed: State) -> None:
        """Raise unless the state is one of ``allowed`` (holding the lock)."""
        if self._state in allowed:
            return
        if self._state is State.FATAL and isinstance(self._error, FatalTransactionError):
            # the same type again (a fenced producer stays fenced), its first cause kept
            raise type(self._error)(f"cannot {action}: {self._error}", self._error.cause)
        if self._state is State.ABORTABLE_ERROR:
            raise AbortableTransactionError(f"cannot {action}: {self._error}; abort the transaction", self._error)
        raise TransactionStateError(f"cannot {action}: the producer {self.transactional_id!r} is {self._state.value}")

    # ------------------------------------------------------------------ the application's calls

    def initializing(self) -> None:
        """``init_transactions`` may begin: once, before anything else (again after a timeout)."""
        with self._lock:
            self._require("initialize transactions", State.UNINITIALIZED)

    def initialized(self) -> None:
        with self._lock:
            self._require("initialize transactions", State.UNINITIALIZED)
            self._state = State.READY

    def begin(self) -> None:
        with self._lock:
            self._require("begin a transaction", State.READY)
            self._state = State.IN_TRANSACTION
            self._partitions.clear()
            self._groups.clear()
            self.failed_sends = False

    def check_send(self) -> None:
        """A send is allowed in a transaction (and refused with its error after it failed)."""
        with self._lock:
            self._require("send", State.IN_TRANSACTION)

    def adding_offsets(self) -> None:
        with self._lock:
            self._require("send offsets to the transaction", State.IN_TRANSACTION)

    def offsets_added(self, group: str) -> None:
        with self._lock:
            self._groups.add(group)

    def committing(self) -> None:
        """Commit may begin (or begin again after a timeout: COMMITTING is kept)."""
        with self._lock:
            self._require("commit the transaction", State.IN_TRANSACTION, State.COMMITTING)
            self._state = State.COMMITTING

    def aborting(self) -> None:
        """Abort may begin: in a transaction, after an abortable error, or again after a timeout."""
        with self._lock:
            self._require("abort the transaction", State.IN_TRANSACTION, State.ABORTABLE_ERROR, State.ABORTING)
            self._state = State.ABORTING

    def ended(self) -> None:
        """The coordinator answered EndTxn (or there was nothing to end): READY for the next one."""
        with self._lock:
            if self._state in (State.COMMITTING, State.ABORTING):
                self._state = State.READY
                self._error = None

    @property
    def started(self) -> bool:
        """The coordinator knows of this transaction (partitions or offsets were added): it is
        ended with EndTxn; else it ends here alone, as Kafka's producer does."""
        with self._lock:
            return bool(self._partitions or self._groups)

    # ------------------------------------------------------------------ the sender's part

    def to_add(self, partitions: Iterable[tuple[str, int]]) -> set[tuple[str, int]]:
        """Of ``partitions``, those not in the transaction yet; TransactionError when none may be
        added (the transaction failed, or is not open)."""
        with self._lock:
            self._require("send", State.IN_TRANSACTION, State.COMMITTING)
            return set(partitions) - self._partitions

    def added(self, partitions: Iterable[tuple[str, int]]) -> None:
        with self._lock:
            self._partitions.update(partitions)

    def holds(self, partition: tuple[str, int]) -> bool:
        with self._lock:
            return partition in self._partitions

    # ------------------------------------------------------------------ errors

    def fail(self, error: BaseException) -> None:
        """Record ``error`` (one not retried): fatal for good; any other ends the open transaction
        as abortable (the first error is the one kept)."""
        if not isinstance(error, TransactionError):
            error = AbortableTransactionError(f"{error}; the transaction must be aborted", error)
        with self._lock:
            if isinstance(error, FatalTransactionError):
                if self._state is not State.FATAL:
                    self._state, self._error = State.FATAL, error
            elif self._state in (State.IN_TRANSACTION, State.COMMITTING):
                self._state, self._error = State.ABORTABLE_ERROR, error

    def fail_fatally(self, error: BaseException) -> None:
        """Record ``error`` as fatal whatever its kind (``init_transactions`` failing for good)."""
        if not isinstance(error, FatalTransactionError):
            error = FatalTransactionError(f"initializing transactions failed: {error}", error)
        self.fail(error)

    def send_failed(self, error: BaseException) -> None:
        """A batch of this transaction failed for good (after its retries)."""
        with self._lock:
            self.failed_sends = True
        if isinstance(error, BrokerResponseError):
            error = error_for(error.error_code, error.error_name, str(error))
        self.fail(error)


__all__ = ["FATAL", "FENCED", "REDISCOVER", "RETRIABLE", "State", "TransactionState", "error_for"]
