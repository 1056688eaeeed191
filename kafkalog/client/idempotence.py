"""A producer's idempotence (KIP-98): the producer id and epoch the cluster gives it
(InitProducerId), the sequence numbers of each partition's batches, and what a refusal of a
numbered batch means for them.

Numbered batches may be pipelined: up to ``MAX_IN_FLIGHT`` of a partition in flight at once, since
a broker remembers a producer's last five batches per partition and so recognises a retry of any
of them. A broker that refuses a batch as out of order while nothing before it failed, or that no
longer knows the producer (UNKNOWN_PRODUCER_ID), has forgotten it: the producer takes a new id once
its flight has landed and its batches are numbered again. Where no id can be had (acks=0, a broker
older than record batches, InitProducerId refused) batches go unnumbered, one per partition in
flight.

A transactional producer's id and epoch come from its transaction coordinator instead
(kafkalog.client.transaction_manager, ``take_transactional_identity``), and are never replaced on
their own: a batch refused as out of order fails, which makes the transaction abortable, and the
abort takes the next epoch.

Only the sender thread changes this state (a transactional producer's identity is set while nothing
is in flight); ``identity`` may be read from any thread.
"""

from __future__ import annotations

import logging
import time

from kafkalog.client.client import Client, check
from kafkalog.client.producer_batch import MAX_IN_FLIGHT, ProducerBatch
from kafkalog.errors import BrokerResponseError, ClientError, UnsupportedByBrokerError
from kafkalog.protocol import ApiKey
from kafkalog.protocol.error_codes import ErrorCode

logger = logging.getLogger(__name__)

_MAX_SEQUENCE = 2**31 - 1


class Idempotence:
    """The producer id, epoch and sequence numbers of one producer (``enabled``: it asks for an id)."""

    def __init__(self, client: Client, *, enabled: bool, retry_backoff: float, transactional: bool = False) -> None:
        self.client = client
        self.enabled = enabled
        self.retry_backoff = retry_backoff
        self.transactional = transactional
        """Batches are encoded with the transactional attribute; the id comes from the transaction
        coordinator (part of the encoder's Numbering)."""
        self.identity: tuple[int, int] | None = None
        """(producer id, epoch) once the cluster gave them; None before, or when not idempotent."""
        self.wanted = enabled and not transactional
        """Ask for an id before sending more (at the start, and after a broker forgot the last one)."""
        self.retry_at = 0.0
        self._sequences: dict[tuple[str, int], int] = {}
        """The next sequence number of each partition (numbered batches only)."""

    def take_identity(self) -> bool:
        """Ask the cluster for a producer id (InitProducerId); settle for unnumbered batches where
        none can be had. False when it is to be asked again later (after ``retry_at``); True when
        settled, and then the batches numbered under an earlier id are to be numbered again under
        the new one, or go unnumbered. Runs when nothing is in flight."""
        try:
            connection = self.client.any_broker()
            if connection.api(ApiKey.PRODUCE).version < 3:
                raise UnsupportedByBrokerError("numbered batches need record batches (Produce v3, Kafka 0.11+)")
            api = connection.api(ApiKey.INIT_PRODUCER_ID)
            answer = connection.request(api, {"transactional_id": None, "transaction_timeout_ms": 60_000})
            check(answer["error_code"], "asking for a producer id")
        except UnsupportedByBrokerError as exc:  # an older broker: the expected way, not a warning
            logger.info("producing without idempotence (one batch in flight per partition): %s", exc)
        except BrokerResponseError as exc:
            if exc.retriable:  # e.g. COORDINATOR_LOAD_IN_PROGRESS from a Kafka broker that has just started
                logger.info("no producer id yet: %s", exc)
                self.retry_at = time.monotonic() + self.retry_backoff
                return False
            logger.warning("producing without idempotence (one batch in flight per partition): %s", exc)
        except ClientError as exc:  # no broker answered: these go unnumbered; ask again later
            logger.info("could not ask for a producer id yet: %s", exc)
            self.retry_at = time.monotonic() + self.retry_backoff
            return False
        else:
            self.identity = (int(answer["producer_id"]), int(answer["producer_epoch"]))
            logger.debug("producer id %d, epoch %d", *self.identity)
        self.wanted = False
        self._sequences.clear()
        return True

    def take_transactional_identity(self, producer_id: int, epoch: int) -> None:
        """The id and epoch the transaction coordinator gave (with nothing in flight): every
        partition's sequence starts again at 0."""
        self.identity = (producer_id, epoch)
        self._sequences.clear()

    def renumber(self) -> None:
        """Take a new producer id once the flight has landed (one batch per partition until then).
        Never for a transactional producer: its failed batch makes the transaction abortable."""
        if self.enabled and not self.transactional:
            self.identity = None
            self.wanted = True

    def first_sequence(self, batch: ProducerBatch, span: int) -> int:
        """The first sequence number of ``batch``, which spans ``span`` offsets of its partition;
        the partition's next batch is numbered after it."""
        key = (batch.topic, batch.partition)
        sequence = self._sequences.get(key, 0)
        self._sequences[key] = (sequence + span) % (_MAX_SEQUENCE + 1)
        return sequence

    def refused(self, batch: ProducerBatch, code: int, error: BrokerResponseError, *, after_failure: bool) -> None:
        """A numbered ``batch`` was refused with ``code`` (``after_failure``: an earlier batch of its
        partition failed while it was in flight). Out of order or an unknown producer with nothing
        failed before: the broker no longer knows this producer, take a new id; either way the
        batch is sent again. Any other error that is not retried leaves a gap in the sequence of
        the batches behind it: take a new id."""
        if batch.sequence < 0 or self.transactional:
            return
        if code in (ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, ErrorCode.UNKNOWN_PRODUCER_ID):
            if not after_failure:  # nothing before it failed: the broker no longer knows this producer
                logger.info("%s: taking a new producer id", error)
                self.renumber()
            error.retriable = True
        if not error.retriable:
            self.renumber()  # the batches behind it carry sequences that now leave a gap


__all__ = ["MAX_IN_FLIGHT", "Idempotence"]
