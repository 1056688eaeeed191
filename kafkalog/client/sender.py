"""A producer's sender: the one background thread that drains the accumulator's ready batches into
Produce requests, takes the answers, and gives every batch its outcome.

It keeps sending while answers are outstanding: each broker's ready batches go in pipelined Produce
requests (the n-th batch of each partition in the n-th request), and the oldest answer is taken
only when nothing more can go (every partition with work has its batches in flight). A batch that
fails with a retriable error (a moved leader, a timeout, a broken connection) goes back to the
accumulator to be sent again, up to ``retries`` times, after ``retry_backoff`` times its attempts;
any other outcome settles it and its futures. A new producer id is taken with nothing in flight
(kafkalog.client.idempotence).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Any

from kafkalog.client.accumulator import RecordAccumulator
from kafkalog.client.client import Client, error_name
from kafkalog.client.connection import BrokerConnection, InFlight
from kafkalog.client.encoder import encode
from kafkalog.client.idempotence import Idempotence
from kafkalog.client.producer_batch import ProducerBatch, resolve
from kafkalog.client.transaction_manager import TransactionManager
from kafkalog.errors import BrokerResponseError, ClientError, UnsupportedByBrokerError
from kafkalog.protocol import ApiKey
from kafkalog.protocol.apis import ZSTD_PRODUCE_VERSION
from kafkalog.protocol.error_codes import ErrorCode
from kafkalog.record import Codec

logger = logging.getLogger(__name__)


class Sender:
    """The sender thread of one producer (``start``, then ``join`` once the accumulator is closed)."""

    def __init__(
        self,
        client: Client,
        accumulator: RecordAccumulator,
        idempotence: Idempotence,
        *,
        acks: int,
        codec: Codec,
        request_timeout: float,
        retries: int,
        retry_backoff: float,
        transactions: TransactionManager | None = None,
    ) -> None:
        self.client = client
        self.transactions = transactions
        """A transactional producer's: partitions are added to the transaction before their first
        batch goes, and a batch that fails for good makes the transaction abortable."""
        self.transactional_id = None if transactions is None else transactions.transactional_id
        self.accumulator = accumulator
        self.idempotence = idempotence
        self.acks = acks
        self.codec = codec
        self.request_timeout = request_timeout
        self.retries = retries
        self.retry_backoff = retry_backoff
        self._flight: deque[tuple[BrokerConnection, InFlight, list[ProducerBatch]]] = deque()
        """Produce requests sent and not answered yet, oldest first (the sender thread's own)."""
        self._thread = threading.Thread(target=self._run, name="kafkalog-producer-sender", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def _run(self) -> None:
        """The sender: sends what is ready while answers are outstanding, and takes the oldest
        answer when nothing more can go (every partition with work has its batches in flight)."""
        accumulator, idempotence = self.accumulator, self.idempotence
        while True:
            with accumulator.cond:
                # a new producer id is taken with nothing in flight: let the flight land first
                landing_first = idempotence.wanted and self._flight
                ready = [] if landing_first else accumulator.take_ready(idempotence.identity is not None)
                while not ready and not self._flight:
                    if accumulator.drained():
                        return
                    accumulator.cond.wait(accumulator.next_wakeup())
                    ready = accumulator.take_ready(idempotence.identity is not None)
            if ready:
                due = idempotence.wanted and not self._flight and time.monotonic() >= idempotence.retry_at
                if due and idempotence.take_identity():
                    # the batches numbered under an earlier id (``ready``, and those waiting to be
                    # retried) are numbered again under the new one, or go unnumbered
                    accumulator.unnumber(ready)
                if self.transactions is not None:
                    ready = self._admit(ready, self.transactions)
                self._submit(ready)
            else:
                self._receive_oldest()

    def _admit(self, batches: list[ProducerBatch], transactions: TransactionManager) -> list[ProducerBatch]:
        """Of ``batches``, those whose partitions are in the transaction, once the new ones are
        added (AddPartitionsToTxn, transaction version 1); the others fail with the reason."""
        try:
            new = transactions.state.to_add((b.topic, b.partition) for b in batches)
            if new:
                transactions.add_partitions(new)
        except ClientError as exc:
            for batch in batches:
                self.accumulator.landed(batch)
                batch.error = exc
                self._settle(batch)
            transactions.state.send_failed(exc)
            return []
        return batches

    def _submit(self, batches: list[ProducerBatch]) -> None:
        """Send ``batches`` without waiting for the answers: each broker's in pipelined Produce
        requests (the n-th batch of each partition in the n-th request)."""
        by_broker: dict[BrokerConnection, list[ProducerBatch]] = {}
        for batch in batches:
            try:
                connection = self.client.leader(batch.topic, batch.partition)
            except ClientError as exc:
                self.accumulator.landed(batch)
                self._failed(batch, exc)
                continue
            by_broker.setdefault(connection, []).append(batch)
        for connection, group in by_broker.items():
            try:
                api = connection.api(ApiKey.PRODUCE)
                if self.codec == Codec.ZSTD and api.version < ZSTD_PRODUCE_VERSION:
                    raise UnsupportedByBrokerError(
                        f"zstd needs Produce v{ZSTD_PRODUCE_VERSION} (Kafka 2.1+); {connection.host}:{connection.port} "
                        f"speaks v{api.version}"
                    )
                magic = 2 if api.version >= 3 else 1 if api.version >= 2 else 0
                rounds: list[list[ProducerBatch]] = []
                seen: dict[tuple[str, int], int] = {}
                for batch in group:
                    key = (batch.topic, batch.partition)
                    number = seen.get(key, 0)
                    seen[key] = number + 1
                    if number == len(rounds):
                        rounds.append([])
                    rounds[number].append(batch)
                requests = [
                    (
                        api,
                        {
                            "transactional_id": self.transactional_id,
                            "acks": self.acks,
                            "timeout_ms": int(self.request_timeout * 1000),
                            "topic_data": _topic_data(
                                one, [encode(b, magic, self.codec, self.idempotence) for b in one]
                            ),
                        },
                    )
                    for one in rounds
                ]
                sent = connection.submit(requests, expect_response=self.acks != 0)
            except ClientError as exc:
                for batch in group:  # in request order: each partition's retries keep their order
                    self.accumulator.landed(batch)
                    self._failed(batch, exc)
                continue
            if self.acks == 0:  # nothing comes back: sent is all there is to know
                for batch in group:
                    self.accumulator.landed(batch)
                    self._settle(batch)
                continue
            self._flight.extend((connection, request, one) for request, one in zip(sent, rounds, strict=True))

    def _receive_oldest(self) -> None:
        """Wait for the answer to the oldest request in flight and give its batches their outcome."""
        connection, request, batches = self._flight.popleft()
        try:
            response = connection.answer(request)
        except ClientError as exc:
            for batch in batches:
                self.accumulator.landed(batch)
                self._failed(batch, exc)
            return
        answers = {(t["topic"], p["partition"]): p for t in response["responses"] for p in t["partition_responses"]}
        for batch in batches:
            self._settle_answer(batch, answers.get((batch.topic, batch.partition)))
            self.accumulator.landed(batch)

    def _settle_answer(self, batch: ProducerBatch, answer: dict[str, Any] | None) -> None:
        """Give ``batch`` its outcome from its partition's ``answer`` (before it lands: its
        partition's ``broken`` mark must outlive it while later batches are in flight)."""
        key = (batch.topic, batch.partition)
        failed = self.accumulator.broken
        if answer is None:
            failed.add(key)
            self._failed(batch, ClientError(f"no answer for {batch.topic}-{batch.partition}"))
            return
        code = answer["error_code"]
        if code not in (ErrorCode.NONE, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
            error = BrokerResponseError(code, error_name(code), f"producing to {batch.topic}-{batch.partition}")
            self.idempotence.refused(batch, code, error, after_failure=key in failed)
            failed.add(key)
            self._failed(batch, error)
            return
        batch.acknowledged = True
        batch.base_offset = answer["base_offset"]
        batch.append_time = answer.get("log_append_time", -1)
        self._settle(batch)

    def _failed(self, batch: ProducerBatch, error: Exception) -> None:
        retriable = getattr(error, "retriable", False)
        if getattr(error, "invalid_metadata", False) or not isinstance(error, BrokerResponseError):
            self.client.invalidate(batch.topic)
        if retriable and batch.attempts < self.retries:
            batch.attempts += 1
            batch.not_before = time.monotonic() + self.retry_backoff * batch.attempts
            logger.info("retrying %d message(s) to %s-%d: %s", batch.count, batch.topic, batch.partition, error)
            self.accumulator.retry(batch)
            return
        batch.error = error
        if self.transactions is not None:
            self.transactions.state.send_failed(error)
        self._settle(batch)

    def _settle(self, batch: ProducerBatch) -> None:
        resolve(batch)
        self.accumulator.settled(batch)
        parent = batch.parent
        if parent is not None:  # a part of a set given to send_set: the set is settled by its last
            if batch.error is not None and parent.error is None:
                parent.error = batch.error
            if batch.part == 0:
                parent.acknowledged, parent.base_offset = batch.acknowledged, batch.base_offset
                parent.append_time = batch.append_time
            parent.parts_left -= 1
            if parent.parts_left == 0:
                resolve(parent)


def _topic_data(batches: list[ProducerBatch], record_sets: list[bytes | memoryview]) -> list[dict[str, Any]]:
    """The topic_data of a Produce request: each batch's record set under its topic."""
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for batch, record_set in zip(batches, record_sets, strict=True):
        by_topic.setdefault(batch.topic, []).append({"partition": batch.partition, "record_set": record_set})
    return [{"topic": topic, "data": data} for topic, data in by_topic.items()]


__all__ = ["Sender"]
