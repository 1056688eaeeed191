"""One batch of a producer's messages for one partition, from the ``send`` that opened it to its
outcome, and that outcome as callers see it.

A ``ProducerBatch`` is what the accumulator gathers, the encoder turns into bytes and the sender
ships, retries and settles: its messages (or a set given already encoded), its weight in flight,
its sequence number, its outcome. A ``SendFuture`` is one message's view of its batch, and
``RecordMetadata`` where that message landed, made only when asked for. A batch is settled once,
under one lock all batches share (``resolve``), and its callbacks run in the thread that settles it
(the producer's sender).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from kafkalog.errors import ClientError
from kafkalog.record import Header

MAX_IN_FLIGHT = 5
"""A broker remembers a producer's last five batches per partition: a retry must be one of them
(kafkalog.client.idempotence numbers them; the accumulator keeps no more than that in flight)."""

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RecordMetadata:
    """Where a message landed. ``offset`` is -1 with acks=0 (nothing comes back)."""

    topic: str
    partition: int
    offset: int
    timestamp: int


@dataclass(eq=False)
class ProducerBatch:
    topic: str
    partition: int
    created: float
    messages: list[tuple[bytes | None, bytes | None, int, tuple[Header, ...]]] = field(default_factory=list)
    stored: bytes | memoryview | None = None
    """A message set given already encoded (``send_set``), sent instead of ``messages``."""
    alone: bool = False
    """A stored batch this producer cannot number (a transaction's, which keeps its own ids): it
    goes alone in flight on its partition."""
    parent: ProducerBatch | None = None
    """The set given to ``send_set`` that this batch is a part of (its future is the parent's)."""
    part: int = 0
    parts_left: int = 0
    """Of a parent: its parts without an outcome yet. A parent itself is never sent."""
    count: int = 0
    """Messages in the batch (what ``flush`` waits for)."""
    size: int = 0
    attempts: int = 0
    weight: int = 0
    """What it counts against its partition's batches in flight while it is: 1 numbered, all of
    them unnumbered (it goes alone: nothing but the order of sending keeps an unnumbered batch in
    its place)."""
    not_before: float = 0.0
    sequence: int = -1
    """Its first sequence number once numbered (kept for every retry); -1 before, or unnumbered."""
    encoded: tuple[int, bytes | memoryview] | None = None
    """(message format, bytes) as first sent: a retry sends the same bytes."""
    settled: bool = False
    """It has its outcome (set under _CALLBACK_LOCK, then ``waiter`` is set)."""
    waiter: threading.Event | None = None
    """Made by the first caller to wait for the outcome: most batches nobody waits for."""
    acknowledged: bool = False
    """The broker answered with offsets (not so with acks=0, nor before the outcome)."""
    base_offset: int = -1
    append_time: int = -1
    """The broker's LogAppendTime for the whole batch, or -1 (each message keeps its own time)."""
    error: BaseException | None = None
    callbacks: list[tuple[int, Callable[[SendFuture], object]]] = field(default_factory=list)

    def metadata(self, index: int) -> RecordMetadata:
        """Where its ``index``-th message landed, made when asked for: a batch of a thousand
        messages would otherwise build a thousand results that most callers never look at."""
        if not self.acknowledged or self.base_offset < 0:  # no answer, or one without offsets
            # (a broker that recognised a retry too old to remember answers DUPLICATE_SEQUENCE_NUMBER
            # with base offset -1: the messages are stored, where is not known)
            return RecordMetadata(self.topic, self.partition, -1, -1)
        if self.stored is not None:  # a set sent as it is: its first message
            return RecordMetadata(self.topic, self.partition, self.base_offset, self.append_time)
        timestamp = self.append_time if self.append_time >= 0 else self.messages[index][2]
        return RecordMetadata(self.topic, self.partition, self.base_offset + index, timestamp)


class SendFuture:
    """The outcome of one ``send``, like a concurrent.futures.Future (``result``, ``exception``,
    ``done``, ``add_done_callback``) but cheap: the waiting and the callbacks live in its batch."""

    __slots__ = ("_batch", "_index")

    def __init__(self, batch: ProducerBatch, index: int) -> None:
        self._batch = batch
        self._index = index

    def done(self) -> bool:
        return self._batch.settled

    def _wait(self, timeout: float | None) -> None:
        batch = self._batch
        with _CALLBACK_LOCK:
            if batch.settled:
                return
            if batch.waiter is None:
                batch.waiter = threading.Event()
            waiter = batch.waiter
        if not waiter.wait(timeout):
            raise ClientError(f"no outcome within {timeout} s")

    def result(self, timeout: float | None = None) -> RecordMetadata:
        self._wait(timeout)
        if self._batch.error is not None:
            raise self._batch.error
        return self._batch.metadata(self._index)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._wait(timeout)
        return self._batch.error

    def add_done_callback(self, callback: Callable[[SendFuture], object]) -> None:
        """Call ``callback(self)`` once settled (at once if it already is), in the sender thread."""
        batch = self._batch
        with _CALLBACK_LOCK:
            if not batch.settled:
                batch.callbacks.append((self._index, callback))
                return
        callback(self)


_CALLBACK_LOCK = threading.Lock()


def resolve(batch: ProducerBatch) -> None:
    """Mark ``batch`` settled and call its futures' callbacks."""
    with _CALLBACK_LOCK:
        batch.settled = True
        waiter = batch.waiter
        callbacks, batch.callbacks = batch.callbacks, []
    if waiter is not None:
        waiter.set()
    for index, callback in callbacks:
        try:
            callback(SendFuture(batch, index))
        except Exception:
            logger.exception("a send callback raised")


__all__ = ["ProducerBatch", "RecordMetadata", "SendFuture", "resolve"]
