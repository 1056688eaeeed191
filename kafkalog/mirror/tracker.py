"""Which source offsets are safe to commit: those whose messages the target acknowledged.

Role: the mirror's ledger between its source and its target. Every send (one message, or a range
of offsets forwarded as one message set) is recorded when it is handed to the producer (``sent``)
and settled when the target answers (``settled``). The safe offset of a source partition is the
first offset of its lowest unacknowledged send, or, when nothing is in flight, the end of what was
handed over: the one after the last sent, or further where a chunk ended in offsets there was
nothing to send for (``passed``: the aborted records and markers a read-committed fetch leaves
out). A failed send stays unacknowledged forever, so nothing at or past it is
ever committed (KIP-3, KAFKA-3965: never commit past what the target holds).

Invariant: for every partition, ``safe(tp)`` never exceeds the offset of a message the target has
not acknowledged, and never decreases.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from kafkalog.topics import TopicPartition


@dataclass(frozen=True, slots=True)
class SendFailure:
    """The first send the target refused for good."""

    topic: str
    partition: int
    offset: int
    error: BaseException

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition} offset {self.offset}: {self.error}"


class AckTracker:
    """Thread-safe: stream threads call ``sent``, producer callbacks ``settled``, committers ``safe``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._in_flight: dict[TopicPartition, dict[int, int]] = {}
        """Unacknowledged sends per partition (first offset: messages), in the (rising) order sent."""
        self._next: dict[TopicPartition, int] = {}
        self.failure: SendFailure | None = None
        self.acked = 0
        """Messages the target acknowledged."""

    def sent(self, tp: TopicPartition, offset: int, last: int | None = None) -> None:
        """The message at ``offset`` (or every offset up to ``last``) was handed to the producer."""
        last = offset if last is None else last
        with self._lock:
            pending = self._in_flight.get(tp)
            if pending is None:
                pending = self._in_flight[tp] = {}
            pending[offset] = last - offset + 1
            self._next[tp] = last + 1

    def passed(self, tp: TopicPartition, end: int) -> None:
        """Every offset of ``tp`` below ``end`` was handed over or needs no send (offsets a
        read-committed fetch skipped): once the sends before it are acknowledged, ``end`` is safe.
        Called after the ``sent`` of every message before ``end``, never before."""
        with self._lock:
            if end > self._next.get(tp, -1):
                self._next[tp] = end

    def settled(self, tp: TopicPartition, offset: int, error: BaseException | None) -> None:
        """The target answered the send that began at ``offset``."""
        with self._lock:
            if error is not None:
                if self.failure is None:
                    self.failure = SendFailure(tp[0], tp[1], offset, error)
                return  # stays in flight: the safe offset cannot pass it
            self.acked += self._in_flight.get(tp, {}).pop(offset, 0)

    def safe(self, tp: TopicPartition) -> int | None:
        """The offset to commit for ``tp`` (None: nothing was sent for it yet)."""
        with self._lock:
            pending = self._in_flight.get(tp)
            if pending:
                return next(iter(pending))
            return self._next.get(tp)

    def safe_positions(self, proposed: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """``proposed`` positions lowered to what is safe; partitions with nothing sent are left out."""
        out = {}
        for tp, position in proposed.items():
            safe = self.safe(tp)
            if safe is not None:
                out[tp] = min(position, safe)
        return out

    def in_flight(self) -> int:
        with self._lock:
            return sum(sum(sends.values()) for sends in self._in_flight.values())

    def forget(self, tp: TopicPartition) -> None:
        """Drop a partition handed to another mirror (after its offsets were committed)."""
        with self._lock:
            self._in_flight.pop(tp, None)
            self._next.pop(tp, None)
