"""A producer's record accumulator: each partition's batches waiting to be sent, and the limits
they wait under.

``send`` appends a message to its partition's open batch; a batch that would grow past
``batch_bytes`` is sealed and a new one opened. The sender takes what may go (``take_ready``): a
batch once it holds ``batch_bytes``, is ``linger`` old, or is wanted at once (a flush, close, or a
sync producer), each partition's in its order and within its limit of batches in flight (see
kafkalog.client.idempotence); a retry waits for its back-off, and nothing of its partition overtakes
it. Memory is bounded: while ``buffer_bytes`` wait, ``send`` blocks up to ``max_block`` and then
raises BufferFullError.

Every field here is guarded by ``lock`` (``cond`` waits and wakes on it): the threads that send,
the sender thread and those that flush share it. One exception: ``closed``, written under it, is
also read without it by ``Producer.send`` and ``close``, a quick refusal of what comes after a
close (a send that races the close is not ordered by it). ``broken`` and the partitions' weights in
flight are the sender thread's alone.
"""

from __future__ import annotations

import threading
import time
from collections import deque

from kafkalog.client.producer_batch import MAX_IN_FLIGHT, ProducerBatch, resolve
from kafkalog.errors import BufferFullError, ClientError
from kafkalog.record import Header


class RecordAccumulator:
    """The batches of one producer that have no outcome yet, and are not in flight."""

    def __init__(
        self, *, batch_bytes: int, linger: float, buffer_bytes: int, max_block: float, max_in_flight: int, sync: bool
    ) -> None:
        self.batch_bytes = batch_bytes
        self.linger = linger
        self.buffer_bytes = buffer_bytes
        self.max_block = max_block
        self.max_in_flight = max_in_flight
        self.sync = sync
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        """Guards the batches and counters below; ``append`` takes ``lock`` itself (cheaper than the
        condition's Python-level ``with``), the rest waits and wakes through ``cond``."""
        self._batches: dict[tuple[str, int], ProducerBatch] = {}
        self._retrying: list[ProducerBatch] = []
        self._sealed: dict[tuple[str, int], deque[ProducerBatch]] = {}
        """Each partition's full batches waiting to go, oldest first."""
        self._in_flight: dict[tuple[str, int], int] = {}
        """The weight of each partition's batches in flight (see ProducerBatch.weight)."""
        self.broken: set[tuple[str, int]] = set()
        """Partitions where a batch failed while later ones were in flight: their refusals as out
        of order are expected (they go again after it), not a sign the broker forgot us."""
        self._buffered = 0
        self._unfinished = 0
        self._room_waiters = 0
        """Threads blocked in ``send`` for room in the buffer: woken as each batch settles."""
        self._flushing = 0
        self.closed = False

    # ------------------------------------------------------------------ what the sending threads add

    def append(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        header_tuple: tuple[Header, ...],
        size: int,
    ) -> tuple[ProducerBatch, int]:
        """Add one message of ``size`` bytes to its partition's open batch: (the batch, its index there)."""
        with self.lock:
            if self._buffered + size > self.buffer_bytes:
                self._wait_for_room(size)
            batch = self._batches.get((topic, partition))
            if batch is None or batch.size + size > self.batch_bytes:
                batch = self._open_batch(topic, partition, batch)
            index = batch.count
            batch.messages.append((key, value, timestamp, header_tuple))
            batch.count = index + 1
            batch.size += size
            self._buffered += size
            self._unfinished += 1
            # Wake the sender when the batch first fills (it opened with a wake-up already): not
            # on every message after that.
            if batch.size >= self.batch_bytes > batch.size - size or self.sync:
                self.cond.notify_all()
        return batch, index

    def _open_batch(self, topic: str, partition: int, full: ProducerBatch | None) -> ProducerBatch:
        """A new open batch of the partition (holding ``lock``); ``full``, its open batch that has
        no room left, is sealed first. Wakes the sender: an idle sender sleeps until told, so the
        new batch's linger must start counting now."""
        if full is not None and full.messages:
            # full: it goes as it is (a compressed batch is one message, which must stay under the
            # broker's limit), after any earlier batch of its partition
            self._sealed.setdefault((topic, partition), deque()).append(full)
        batch = self._batches[(topic, partition)] = ProducerBatch(topic, partition, time.monotonic())
        self.cond.notify_all()
        return batch

    def append_set(
        self,
        topic: str,
        partition: int,
        record_set: bytes | memoryview,
        parts: list[tuple[bytes | memoryview, bool, int]],
        count: int,
    ) -> ProducerBatch:
        """Queue a set given already encoded (``count`` messages) as its ``parts`` (see
        kafkalog.client.encoder.set_parts), each a batch, after everything of its partition
        before; the batch whose outcome is the set's: its only part, or a parent of them all."""
        size = len(record_set)
        now = time.monotonic()
        batches = [
            ProducerBatch(topic, partition, now, stored=data, count=0, size=len(data), alone=alone, part=index)
            for index, (data, alone, _) in enumerate(parts)
        ]
        # the parts' counts add up to what flush waits for: each part's own span while it lasts
        left = count
        for batch, (_, _, span) in zip(batches, parts, strict=True):
            batch.count = min(span, left)
            left -= batch.count
        batches[-1].count += left
        whole = batches[0]
        if len(batches) > 1:
            whole = ProducerBatch(topic, partition, now, stored=record_set, parts_left=len(batches))
            for batch in batches:
                batch.parent = whole
        with self.cond:
            self._wait_for_room(size)
            queue = self._sealed.setdefault((topic, partition), deque())
            open_batch = self._batches.pop((topic, partition), None)
            if open_batch is not None:
                queue.append(open_batch)  # it goes first: order within the partition
            queue.extend(batches)
            self._buffered += size
            self._unfinished += count
            self.cond.notify_all()
        return whole

    def _wait_for_room(self, size: int) -> None:
        """Block (holding ``cond``) until ``size`` more bytes fit in the buffer, or raise."""
        deadline = time.monotonic() + self.max_block
        self._room_waiters += 1
        try:
            while self._buffered + size > self.buffer_bytes and self._buffered > 0:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise BufferFullError(
                        f"{self._buffered} bytes wait to be sent (buffer_bytes={self.buffer_bytes}) "
                        f"and none left in {self.max_block:.1f} s"
                    )
                self.cond.wait(remaining)
        finally:
            self._room_waiters -= 1

    def flush(self, timeout: float | None = None) -> None:
        """Return once every message added so far has an outcome (sent, or failed for good)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.cond:
            self._flushing += 1
            self.cond.notify_all()
            try:
                while self._unfinished:
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        raise ClientError(f"flush timed out with {self._unfinished} message(s) unfinished")
                    self.cond.wait(remaining)
            finally:
                self._flushing -= 1

    def close(self) -> None:
        """No more messages come: the sender sends what is left, then stops."""
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    def drop_unsent(self, error: BaseException) -> int:
        """Fail every batch not in flight (open, full, or waiting to be retried) with ``error``: a
        transaction being aborted sends nothing more. Returns the messages dropped."""
        with self.cond:
            dropped = [*self._retrying, *(b for q in self._sealed.values() for b in q), *self._batches.values()]
            self._retrying, self._sealed, self._batches = [], {}, {}
        for batch in dropped:
            batch.error = error
            resolve(batch)
            self.settled(batch)
        return sum(batch.count for batch in dropped)

    # ------------------------------------------------------------------ what the sender takes

    def drained(self) -> bool:
        """Closed, and nothing left to send (holding ``lock``)."""
        return self.closed and not self._batches and not self._retrying and not self._sealed

    def next_wakeup(self) -> float:
        if self._sealed and not self._retrying:  # else they wait behind a retry: wake for the retry
            return 0.0
        now = time.monotonic()
        times = [b.created + self.linger for b in self._batches.values()] + [b.not_before for b in self._retrying]
        return max(0.0, min(times) - now) if times else 0.5

    def take_ready(self, numbered: bool) -> list[ProducerBatch]:
        """The batches that may go now (holding ``lock``), each partition's in its order: while
        its batches in flight weigh less than ``max_in_flight`` when batches are ``numbered``, else
        while none is; never one that would overtake an earlier batch of its partition (a retry
        waiting for its back-off); a set given encoded alone."""
        now = time.monotonic()
        urgent = self._flushing or self.closed or self.sync
        limit = self.max_in_flight if numbered else 1
        taken = self._in_flight
        blocked: set[tuple[str, int]] = set()
        ready: list[ProducerBatch] = []

        def take(batch: ProducerBatch) -> bool:
            key = (batch.topic, batch.partition)
            count = taken.get(key, 0)
            alone = batch.alone or not numbered
            if key in blocked or count >= limit or (alone and count):
                blocked.add(key)
                return False
            ready.append(batch)
            batch.weight = MAX_IN_FLIGHT if alone else 1
            taken[key] = count + batch.weight
            return True

        waiting = []
        for batch in self._retrying:  # in the order they failed: each partition's in its order
            if batch.not_before > now or not take(batch):
                blocked.add((batch.topic, batch.partition))
                waiting.append(batch)
        self._retrying = waiting
        blocked |= self.broken  # new batches wait until what failed before them went again
        for key, queue in list(self._sealed.items()):
            while queue and take(queue[0]):
                queue.popleft()
            if not queue:
                del self._sealed[key]
        for key, batch in list(self._batches.items()):
            due = urgent or batch.size >= self.batch_bytes or now - batch.created >= self.linger
            if due and take(batch):
                del self._batches[key]
        return ready

    def unnumber(self, ready: list[ProducerBatch]) -> None:
        """Forget the numbers of ``ready`` and of the batches waiting to be retried (a new producer
        id, or none): they are numbered again when next encoded."""
        with self.cond:
            for batch in [*ready, *self._retrying]:
                batch.sequence, batch.encoded = -1, None

    # ------------------------------------------------------------------ what the sender gives back

    def landed(self, batch: ProducerBatch) -> None:
        """``batch`` is no longer in flight; a partition with nothing left in flight expects no
        more refusals as out of order."""
        key = (batch.topic, batch.partition)
        with self.cond:
            left = self._in_flight.get(key, 0) - batch.weight
            batch.weight = 0
            if left > 0:
                self._in_flight[key] = left
            else:
                self._in_flight.pop(key, None)
                self.broken.discard(key)
                self.cond.notify_all()

    def retry(self, batch: ProducerBatch) -> None:
        """``batch`` goes again after its back-off (``not_before``), before anything later of its partition."""
        with self.cond:
            self._retrying.append(batch)
            self.cond.notify_all()

    def settled(self, batch: ProducerBatch) -> None:
        """``batch`` has its outcome: its bytes and messages no longer wait."""
        with self.cond:
            self._buffered -= batch.size
            self._unfinished -= batch.count
            # flush waits for nothing unfinished, send for room: wake them for that alone (a flush
            # woken for every batch settled switched threads for each, a third of batch 1's time)
            if not self._unfinished or self._room_waiters:
                self.cond.notify_all()


__all__ = ["RecordAccumulator"]
