"""A transactional producer's requests to its coordinators (KIP-98, transaction version 1).

Role: finds the transaction coordinator of the producer's transactional id (FindCoordinator, key
type 1) and asks it for the id's producer id and epoch (InitProducerId: fencing any older producer
with the id), adds partitions before their first batch of each transaction (AddPartitionsToTxn v0-3,
the clients' form), adds a group's offsets (AddOffsetsToTxn, then TxnOffsetCommit to the group's
coordinator) and ends the transaction (EndTxn). Retriable errors are retried after a back-off, the
coordinator found again when it moved, for up to ``max_block``; the others are typed by
kafkalog.client.transactions, which also decides which call may be made.

Thread-safe: the application's thread and the producer's sender thread (``add_partitions``) share it;
one lock orders the requests to the coordinator.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from kafkalog.client.client import Client, error_name
from kafkalog.client.connection import BrokerConnection
from kafkalog.client.idempotence import Idempotence
from kafkalog.client.transactions import REDISCOVER, RETRIABLE, TransactionState, error_for
from kafkalog.errors import ClientError, TransactionTimeoutError
from kafkalog.protocol import ApiKey, lookup
from kafkalog.protocol.error_codes import ErrorCode
from kafkalog.topics import TopicPartition

logger = logging.getLogger(__name__)

_CLIENT_ADD_PARTITIONS = 3
"""AddPartitionsToTxn v4+ is the brokers' batched form (KIP-890): clients send v3 and below."""
_BATCHED_FIND_COORDINATOR = 4  # KIP-699: several keys in one request
_TRANSACTION_KEY = 1
"""FindCoordinator's key type of a transactional id (0 is a group)."""

Errors = list[tuple[int, str]]
"""The error codes of one answer, each with what it concerns (a partition, the group ...)."""


class TransactionManager:
    """The coordinator side of one transactional producer (see the module docstring)."""

    def __init__(
        self,
        client: Client,
        idempotence: Idempotence,
        state: TransactionState,
        *,
        transaction_timeout_ms: int,
        retry_backoff: float,
        max_block: float,
    ) -> None:
        self.client = client
        self.idempotence = idempotence
        self.state = state
        self.transactional_id = state.transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.retry_backoff = retry_backoff
        self.max_block = max_block
        self._lock = threading.RLock()
        self._coordinator: BrokerConnection | None = None

    # ------------------------------------------------------------------ coordinators

    def _find(self, key: str, key_type: int) -> BrokerConnection:
        connection = self.client.any_broker()
        api = connection.api(ApiKey.FIND_COORDINATOR)
        if api.version < 1 and key_type != 0:
            raise ClientError(
                f"{connection.host}:{connection.port} has no transaction coordinator (FindCoordinator v0)"
            )
        if api.version >= _BATCHED_FIND_COORDINATOR:
            answer = connection.request(api, {"coordinator_keys": [key], "key_type": key_type})["coordinators"][0]
        else:
            answer = connection.request(api, {"key": key, "key_type": key_type})
        code = answer["error_code"]
        if code:
            raise (
                _Retry(code)
                if code in RETRIABLE
                else error_for(code, error_name(code), f"finding the coordinator of {key!r}")
            )
        return self.client.connection_to(answer["host"], answer["port"])

    def _transaction_coordinator(self) -> BrokerConnection:
        if self._coordinator is None:
            self._coordinator = self._find(self.transactional_id, _TRANSACTION_KEY)
        return self._coordinator

    def _retrying(self, what: str, once: Callable[[], Errors], *, coordinator: bool = True) -> None:
        """Run ``once`` until it answers without errors: retriable ones (and a broken connection)
        after a back-off, for up to ``max_block`` (then TransactionTimeoutError: the call may be
        made again); the first other one raised as typed by kafkalog.client.transactions."""
        deadline = time.monotonic() + self.max_block
        while True:
            try:
                errors = once()
            except _Retry as retry:
                errors = [(retry.code, "")]
            except ClientError as exc:
                if not getattr(exc, "retriable", False):
                    raise
                errors, self._coordinator = [(ErrorCode.NETWORK_EXCEPTION, str(exc))], None
            if not errors:
                return
            for code, concerns in errors:
                if code not in RETRIABLE:
                    raise error_for(code, error_name(code), f"{what}{concerns} ({self.transactional_id!r})")
            if coordinator and any(code in REDISCOVER for code, _ in errors):
                self._coordinator = None
            if time.monotonic() + self.retry_backoff > deadline:
                names = ", ".join(sorted({error_name(code) for code, _ in errors}))
                raise TransactionTimeoutError(
                    f"{what} ({self.transactional_id!r}) did not succeed in {self.max_block:.1f} s: {names}"
                )
            logger.info("%s: %s, retrying", what, errors)
            time.sleep(self.retry_backoff)

    # ------------------------------------------------------------------ the calls

    def init(self) -> None:
        """InitProducerId for the transactional id: its producer id with the epoch bumped (any
        older producer with this id is fenced, its open transaction aborted by the coordinator)."""
        self._init_producer_id(bump=False)

    def _init_producer_id(self, *, bump: bool) -> None:
        """``bump``: name the current id and epoch (v3+, KIP-360), after an abort of a transaction whose
        sends failed, so that the sequence numbers start again under the next epoch."""
        answer: dict[str, Any] = {}

        def once() -> Errors:
            connection = self._transaction_coordinator()
            api = connection.api(ApiKey.INIT_PRODUCER_ID)
            body: dict[str, Any] = {
                "transactional_id": self.transactional_id,
                "transaction_timeout_ms": self.transaction_timeout_ms,
            }
            if bump and api.version >= 3 and self.idempotence.identity is not None:
                body["producer_id"], body["producer_epoch"] = self.idempotence.identity
            answer.update(connection.request(api, body))
            return [(answer["error_code"], "")] if answer["error_code"] else []

        with self._lock:
            self._retrying("initializing transactions", once)
            self.idempotence.take_transactional_identity(int(answer["producer_id"]), int(answer["producer_epoch"]))
        logger.debug(
            "transactional id %r: producer id %d, epoch %d", self.transactional_id, *self.idempotence.identity or ()
        )

    def add_partitions(self, partitions: set[tuple[str, int]]) -> None:
        """AddPartitionsToTxn for ``partitions`` (the sender's, before their first batch)."""
        producer_id, epoch = self._identity()
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(partitions):
            by_topic.setdefault(topic, []).append(partition)

        def once() -> Errors:
            connection = self._transaction_coordinator()
            api = connection.api(ApiKey.ADD_PARTITIONS_TO_TXN)
            if api.version > _CLIENT_ADD_PARTITIONS:
                api = lookup(ApiKey.ADD_PARTITIONS_TO_TXN, _CLIENT_ADD_PARTITIONS)
            answer = connection.request(
                api,
                {
                    "v3_and_below_transactional_id": self.transactional_id,
                    "v3_and_below_producer_id": producer_id,
                    "v3_and_below_producer_epoch": epoch,
                    "v3_and_below_topics": [{"name": t, "partitions": p} for t, p in by_topic.items()],
                },
            )
            errors = [
                (p["partition_error_code"], f" of {t['name']}-{p['partition_index']}")
                for t in answer["results_by_topic_v3_and_below"]
                for p in t["results_by_partition"]
                # OPERATION_NOT_ATTEMPTED: refused because another partition of the request was
                if p["partition_error_code"] not in (ErrorCode.NONE, ErrorCode.OPERATION_NOT_ATTEMPTED)
            ]
            if not errors:
                self.state.added(partitions)
            return errors

        with self._lock:
            self._retrying("adding partitions to the transaction", once)

    def send_offsets(
        self,
        offsets: Mapping[TopicPartition, int],
        group_id: str,
        *,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        metadata: str,
    ) -> None:
        """AddOffsetsToTxn at the transaction coordinator, then TxnOffsetCommit at the group's: the
        offsets are the group's committed offsets once the transaction commits."""
        producer_id, epoch = self._identity()

        def add() -> Errors:
            connection = self._transaction_coordinator()
            answer = connection.request(
                connection.api(ApiKey.ADD_OFFSETS_TO_TXN),
                {
                    **self._producer(producer_id, epoch),
                    "group_id": group_id,
                },
            )
            return [(answer["error_code"], f" of group {group_id}")] if answer["error_code"] else []

        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append(
                {"partition_index": partition, "committed_offset": offset, "committed_metadata": metadata}
            )
        group: list[BrokerConnection | None] = [None]

        def commit() -> Errors:
            connection = group[0] or self._find(group_id, 0)
            group[0] = connection
            answer = connection.request(
                connection.api(ApiKey.TXN_OFFSET_COMMIT),
                {
                    "transactional_id": self.transactional_id,
                    "group_id": group_id,
                    "producer_id": producer_id,
                    "producer_epoch": epoch,
                    "generation_id": generation_id,
                    "member_id": member_id,
                    "group_instance_id": group_instance_id,
                    "topics": [{"name": t, "partitions": p} for t, p in by_topic.items()],
                },
            )
            errors = [
                (p["error_code"], f" of {t['name']}-{p['partition_index']}")
                for t in answer["topics"]
                for p in t["partitions"]
                if p["error_code"]
            ]
            if any(code in REDISCOVER for code, _ in errors):
                group[0] = None
            return errors

        with self._lock:
            self._retrying(f"adding the offsets of group {group_id!r} to the transaction", add)
            self.state.offsets_added(group_id)
            self._retrying(
                f"committing the offsets of group {group_id!r} in the transaction", commit, coordinator=False
            )

    def _producer(self, producer_id: int, epoch: int) -> dict[str, object]:
        """The fields that name this producer in AddOffsetsToTxn, TxnOffsetCommit and EndTxn."""
        return {"transactional_id": self.transactional_id, "producer_id": producer_id, "producer_epoch": epoch}

    def end(self, *, commit: bool) -> None:
        """EndTxn: the coordinator commits or aborts the transaction (and writes the markers after
        it answered: CONCURRENT_TRANSACTIONS meanwhile, retried, for the next transaction's calls)."""
        producer_id, epoch = self._identity()

        def once() -> Errors:
            connection = self._transaction_coordinator()
            answer = connection.request(
                connection.api(ApiKey.END_TXN),
                {
                    **self._producer(producer_id, epoch),
                    "committed": commit,
                },
            )
            return [(answer["error_code"], "")] if answer["error_code"] else []

        with self._lock:
            self._retrying("committing the transaction" if commit else "aborting the transaction", once)

    def bump_epoch(self) -> None:
        """After an abort of a transaction whose sends failed: the next epoch, sequences from 0."""
        self._init_producer_id(bump=True)

    def _identity(self) -> tuple[int, int]:
        identity = self.idempotence.identity
        if identity is None:
            raise ClientError(f"transactional id {self.transactional_id!r} has no producer id: call init_transactions")
        return identity


class _Retry(ClientError):
    """A retriable error code from FindCoordinator: a signal inside ``_retrying``, never raised out
    of this module."""

    retriable = True

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


__all__ = ["TransactionManager"]
