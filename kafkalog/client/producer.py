"""Producer: sends messages to the leaders of their partitions, in batches.

Asynchronous by default (the seeds' producer.type=async): ``send`` puts a message in its partition's
batch and returns a Future; a background sender thread ships a batch once it holds ``batch_bytes`` or
is ``linger_ms`` old, one Produce request per broker for all its ready partitions. Memory is bounded:
when ``buffer_bytes`` are waiting, ``send`` blocks up to ``max_block_ms`` and then raises
BufferFullError. With ``mode="sync"`` each ``send`` returns only once its message is acknowledged.

A batch that fails with a retriable error (a moved leader, a timeout, a broken connection) is sent
again, up to ``retries`` times, after ``retry_backoff_ms``. ``flush()`` and ``close()`` return once
every message sent before them has an outcome: its future holds the offset, or the error.

Idempotent and pipelined (``idempotence=True``, the default, as Kafka's producer since 3.0): the
producer asks the cluster for a producer id (InitProducerId) and numbers each partition's batches
(KIP-98), so up to ``max_in_flight`` (at most 5, what a broker remembers) batches of a partition
are in flight to its leader at once: the sender keeps sending while answers are outstanding and
takes each answer as it comes, so the broker is never idle waiting for the client. A retry can
neither duplicate a batch nor reorder the partition: a batch the broker had already appended is
answered as such, and the batches behind a failed one are refused as out of order and sent again
after it. A broker that forgets the producer (it expired) makes the producer take a new id. Where
that cannot be had (acks=0, a broker older than record batches, InitProducerId refused) a
partition has one batch in flight at a time, as with ``idempotence=False``, which keeps its order
the same way: nothing overtakes a batch waiting to be retried. Sets given already encoded
(``send_set``) go one record batch per request, numbered as this producer's own; only a
transaction's batch goes alone.

Transactional (``transactional_id=...``, KIP-98 as Kafka 2.x/3.x speak it, transaction version 1):
``init_transactions()`` once, then ``begin_transaction()``, sends, optionally
``send_offsets_to_transaction()`` (a consume-transform-produce loop's input offsets), and
``commit_transaction()`` or ``abort_transaction()``. A consumer reading committed sees all of a
transaction's messages (and offsets) or none. A transactional producer is idempotent; its batches
carry the transactional attribute, each partition added to the transaction before its first batch.
Errors as Kafka's producer has them (kafkalog.errors): a call the state does not allow raises
TransactionStateError; a send that failed makes the commit raise AbortableTransactionError (abort,
then go on); being fenced by a newer producer with the same transactional id (ProducerFencedError),
or any FatalTransactionError, leaves only ``close``; TransactionTimeoutError means the same call
may be made again.

This module is the facade; the work is done by parts with one job each, as Kafka's Java producer
divides it: ``accumulator`` (each partition's batches waiting, and their limits), ``sender`` (the
background thread: Produce requests, answers, retries), ``idempotence`` (the producer id, epoch and
sequence numbers), ``transactions`` and ``transaction_manager`` (a transaction's state and its
coordinators' requests), ``encoder`` (batches to the bytes of the broker's format) and ``producer_batch``
(a batch, its futures and their outcome).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from kafkalog.client.accumulator import RecordAccumulator
from kafkalog.client.client import Client, UsesClient
from kafkalog.client.encoder import set_parts
from kafkalog.client.idempotence import Idempotence
from kafkalog.client.partitioner import Partitioner, default_partitioner
from kafkalog.client.producer_batch import MAX_IN_FLIGHT, SendFuture
from kafkalog.client.security import PLAINTEXT, ClientSecurity
from kafkalog.client.sender import Sender
from kafkalog.client.transaction_manager import TransactionManager
from kafkalog.client.transactions import TransactionState
from kafkalog.errors import AbortableTransactionError, ClientError, TransactionStateError
from kafkalog.record import Codec, Header, entry_size
from kafkalog.topics import TopicPartition

_ENTRY_OVERHEAD = entry_size(1, None, None)
"""What a message costs in a batch besides its key and value (as a magic 1 entry: an upper bound)."""

Serializer = Callable[[Any], bytes | None]


class Producer(UsesClient):
    """See the module docstring. Thread-safe: any thread may ``send``."""

    def __init__(
        self,
        bootstrap: str | Sequence[str] | None = None,
        *,
        client: Client | None = None,
        zookeeper: str | None = None,
        broker_version: str | None = None,
        mode: str = "async",
        acks: int | None = None,
        compression: str = "none",
        batch_bytes: int = 64 * 1024,
        linger_ms: int = 5,
        buffer_bytes: int = 32 * 1024 * 1024,
        max_block_ms: int = 60_000,
        retries: int = 5,
        retry_backoff_ms: int = 100,
        request_timeout_ms: int = 30_000,
        partitioner: Partitioner = default_partitioner,
        key_serializer: Serializer | None = None,
        value_serializer: Serializer | None = None,
        security: ClientSecurity = PLAINTEXT,
        idempotence: bool = True,
        max_in_flight: int = 5,
        transactional_id: str | None = None,
        transaction_timeout_ms: int = 60_000,
    ) -> None:
        if mode not in ("async", "sync"):
            raise ClientError(f"mode must be 'async' or 'sync', not {mode!r}")
        if acks is None:  # Kafka's defaults: all replicas for a transactional producer, else the leader
            acks = -1 if transactional_id is not None else 1
        if acks not in (0, 1, -1):
            raise ClientError(f"acks must be 0, 1 or -1, not {acks!r}")
        if not 1 <= max_in_flight <= MAX_IN_FLIGHT:
            raise ClientError(
                f"max_in_flight must be 1 to {MAX_IN_FLIGHT} (what a broker remembers of a producer), not "
                f"{max_in_flight!r}"
            )
        if transactional_id is not None and (not idempotence or acks != -1):
            raise ClientError("a transactional producer is idempotent with acks=-1 (as Kafka's requires)")
        if transactional_id == "":
            raise ClientError("a transactional id may not be empty")
        try:
            self.codec = Codec[compression.upper()]
        except KeyError:
            raise ClientError(f"unknown compression {compression!r} (none, gzip, snappy, lz4, zstd)") from None
        super().__init__(
            bootstrap, client, zookeeper=zookeeper, request_timeout_ms=request_timeout_ms,
            broker_version=broker_version, security=security,
        )  # fmt: skip
        self.mode = mode
        self.acks = acks
        self.batch_bytes = batch_bytes
        self.linger = linger_ms / 1000
        self.buffer_bytes = buffer_bytes
        self.max_block = max_block_ms / 1000
        self.retries = retries
        self.retry_backoff = retry_backoff_ms / 1000
        self.request_timeout = request_timeout_ms / 1000
        self.partitioner = partitioner
        self.key_serializer = key_serializer
        self.value_serializer = value_serializer
        self.idempotence = idempotence and acks != 0
        self.max_in_flight = max_in_flight
        self.transactional_id = transactional_id
        self._idempotence = Idempotence(
            self.client, enabled=self.idempotence, retry_backoff=self.retry_backoff,
            transactional=transactional_id is not None,
        )  # fmt: skip
        self._transactions: TransactionManager | None = None
        if transactional_id is not None:
            self._transactions = TransactionManager(
                self.client, self._idempotence, TransactionState(transactional_id),
                transaction_timeout_ms=transaction_timeout_ms, retry_backoff=self.retry_backoff,
                max_block=self.max_block,
            )  # fmt: skip
        self._accumulator = RecordAccumulator(
            batch_bytes=batch_bytes, linger=self.linger, buffer_bytes=buffer_bytes, max_block=self.max_block,
            max_in_flight=max_in_flight, sync=mode == "sync",
        )  # fmt: skip
        self._sender = Sender(
            self.client, self._accumulator, self._idempotence, acks=acks, codec=self.codec,
            request_timeout=self.request_timeout, retries=retries, retry_backoff=self.retry_backoff,
            transactions=self._transactions,
        )  # fmt: skip
        self._sender.start()

    @property
    def producer_id(self) -> int | None:
        """The id the cluster gave this producer (its batches are numbered and pipelined), or None."""
        identity = self._idempotence.identity
        return identity[0] if identity is not None else None

    # ------------------------------------------------------------------ sending

    def send(
        self,
        topic: str,
        value: Any,
        key: Any = None,
        *,
        partition: int | None = None,
        timestamp: int | None = None,
        headers: Sequence[tuple[str, bytes | None]] = (),
    ) -> SendFuture:
        """Queue a message; the returned future resolves to its RecordMetadata or the error.
        ``headers`` need a broker that takes record batches (Produce v3, Kafka 0.11+); sent to an
        older one, the message fails with UnsupportedByBrokerError."""
        # The hot path of every producing application: kept to one lock, a few dict and list
        # operations and no call that is not needed (about 0.7 us a message here).
        if self._accumulator.closed:
            raise ClientError("the producer is closed")
        if self._transactions is not None:
            self._transactions.state.check_send()
        if self.key_serializer is not None:
            key = self.key_serializer(key)
        if self.value_serializer is not None:
            value = self.value_serializer(value)
        if partition is None:
            partitions = len(self.client.topic(topic, wait_ms=int(self.max_block * 1000)).leaders)
            partition = self.partitioner(key, partitions)
        if timestamp is None:
            timestamp = time.time_ns() // 1_000_000
        size = _ENTRY_OVERHEAD + (0 if key is None else len(key)) + (0 if value is None else len(value))
        header_tuple: tuple[Header, ...] = ()
        if headers:
            header_tuple = tuple(headers)
            size += sum(len(k) + len(v or b"") + 2 for k, v in header_tuple)
        batch, index = self._accumulator.append(topic, partition, key, value, timestamp, header_tuple, size)
        future = SendFuture(batch, index)
        if self.mode == "sync":
            future.result()
        return future

    def send_set(self, topic: str, partition: int, record_set: bytes | memoryview, count: int) -> SendFuture:
        """Queue a message set already encoded (``count`` messages, e.g. fetched from another
        cluster) to go as it is, after everything sent to its partition before: each record batch
        in a request of its own (see ``encoder.set_parts``); the broker assigns the offsets. The
        future resolves to the first message's RecordMetadata once every batch of the set has an outcome
        (the first failure, if any).
        This producer's compression does not apply. The set goes in the newest format the broker
        takes: record batches to a broker of Produce v3+ (a v0/v1 set is up-converted), message
        sets to an older one (batches down-converted: magic 1 for Produce v2, magic 0 before)."""
        if self._accumulator.closed:
            raise ClientError("the producer is closed")
        if self._transactions is not None:
            raise ClientError("send_set is not served by a transactional producer (its batches keep their own ids)")
        whole = self._accumulator.append_set(topic, partition, record_set, set_parts(record_set), count)
        future = SendFuture(whole, 0)
        if self.mode == "sync":
            future.result()
        return future

    # ------------------------------------------------------------------ transactions

    def _transactional(self) -> TransactionManager:
        if self._transactions is None:
            raise TransactionStateError("the producer has no transactional_id")
        if self._accumulator.closed:
            raise ClientError("the producer is closed")
        return self._transactions

    def init_transactions(self) -> None:
        """Take the transactional id's producer id and epoch from its coordinator: a previous producer
        with the id is fenced, and its transaction left open is aborted. Once, before the first
        transaction (again only after a TransactionTimeoutError)."""
        transactions = self._transactional()
        transactions.state.initializing()
        self.flush()  # nothing is in flight while the identity changes
        try:
            transactions.init()
        except ClientError as exc:
            if not exc.retriable:  # no transaction to abort yet: the producer can do no more
                transactions.state.fail_fatally(exc)
            raise
        transactions.state.initialized()

    def begin_transaction(self) -> None:
        """Start a transaction: the sends up to the commit or abort belong to it."""
        self._transactional().state.begin()

    def send_offsets_to_transaction(
        self,
        offsets: dict[TopicPartition, int],
        group_id: str,
        *,
        generation_id: int = -1,
        member_id: str = "",
        group_instance_id: str | None = None,
        metadata: str = "",
    ) -> None:
        """Commit ``offsets`` (each the *next* message to consume) for ``group_id`` as part of the
        transaction: the group's committed offsets once it commits, unchanged if it aborts. A member
        of the group names its generation and member id, so a zombie member is refused."""
        transactions = self._transactional()
        transactions.state.adding_offsets()
        self._calling(
            lambda: transactions.send_offsets(
                offsets, group_id, generation_id=generation_id, member_id=member_id,
                group_instance_id=group_instance_id, metadata=metadata,
            )
        )  # fmt: skip

    def commit_transaction(self) -> None:
        """Send everything sent so far, then have the coordinator commit the transaction. Raises
        AbortableTransactionError if a send (or an offset commit) of it failed: abort it then."""
        transactions = self._transactional()
        transactions.state.committing()
        self.flush()
        error = transactions.state.error
        if error is not None:  # a send failed meanwhile: the state says abortable (or fatal)
            transactions.state.committing()  # raises the error as the state has it
        if transactions.state.started:
            self._calling(lambda: transactions.end(commit=True))
        transactions.state.ended()

    def abort_transaction(self) -> None:
        """Drop the messages not sent yet (their futures fail), wait for those in flight, and have
        the coordinator abort the transaction: none of its messages or offsets is read committed."""
        transactions = self._transactional()
        transactions.state.aborting()
        dropped = self._accumulator.drop_unsent(
            AbortableTransactionError(f"the transaction of {self.transactional_id!r} was aborted before this was sent")
        )
        self.flush()
        if transactions.state.started:
            self._calling(lambda: transactions.end(commit=False))
        if dropped or transactions.state.failed_sends:
            # sequence numbers were taken by batches that never landed: start them again
            self._calling(transactions.bump_epoch)
        transactions.state.ended()

    def _calling(self, call: Callable[[], None]) -> None:
        """Run a coordinator call; a fatal or abortable outcome goes to the transaction's state."""
        assert self._transactions is not None
        try:
            call()
        except ClientError as exc:
            if not exc.retriable:
                self._transactions.state.fail(exc)
            raise

    def flush(self, timeout: float | None = None) -> None:
        """Return once every message sent so far has an outcome (sent, or failed for good)."""
        self._accumulator.flush(timeout)

    def close(self, timeout: float | None = None) -> None:
        """Flush, stop the sender thread, close the connections."""
        if self._accumulator.closed:
            return
        try:
            self.flush(timeout)
        finally:
            self._accumulator.close()
            self._sender.join(timeout)
            super().close()


__all__ = ["Producer"]
