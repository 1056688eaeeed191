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
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kafkalog.client.client import Client, UsesClient, check, error_name
from kafkalog.client.connection import BrokerConnection, InFlight
from kafkalog.client.partitioner import Partitioner, default_partitioner
from kafkalog.client.security import PLAINTEXT, ClientSecurity
from kafkalog.errors import BrokerResponseError, BufferFullError, ClientError, UnsupportedByBrokerError
from kafkalog.protocol import ApiKey
from kafkalog.protocol.apis import ZSTD_PRODUCE_VERSION
from kafkalog.protocol.error_codes import ErrorCode
from kafkalog.record import (
    Codec,
    Header,
    MessageSetBuilder,
    TimestampType,
    encode_batch,
    entry_size,
    iter_entries,
)
from kafkalog.record.batch_format import (
    MAGIC,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TRANSACTIONAL_BIT,
    RecordInput,
    decode_batches,
    read_header,
    set_base_offset,
    with_producer,
    without_producer,
)
from kafkalog.record.convert import DEFAULT_MAX_BATCH_BYTES, needs_conversion, to_batches, to_magic

logger = logging.getLogger(__name__)

_MAX_IN_FLIGHT = 5
"""A broker remembers a producer's last five batches per partition: a retry must be one of them."""
_MAX_SEQUENCE = 2**31 - 1
_ENTRY_OVERHEAD = entry_size(1, None, None)
"""What a message costs in a batch besides its key and value (as a magic 1 entry: an upper bound)."""

Serializer = Callable[[Any], bytes | None]


@dataclass(frozen=True)
class RecordMetadata:
    """Where a message landed. ``offset`` is -1 with acks=0 (nothing comes back)."""

    topic: str
    partition: int
    offset: int
    timestamp: int


@dataclass(eq=False)
class _Batch:
    topic: str
    partition: int
    created: float
    messages: list[tuple[bytes | None, bytes | None, int, tuple[Header, ...]]] = field(default_factory=list)
    stored: bytes | memoryview | None = None
    """A message set given already encoded (``send_set``), sent instead of ``messages``."""
    alone: bool = False
    """A stored batch this producer cannot number (a transaction's, which keeps its own ids): it
    goes alone in flight on its partition."""
    parent: _Batch | None = None
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

    def __init__(self, batch: _Batch, index: int) -> None:
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
        acks: int = 1,
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
    ) -> None:
        if mode not in ("async", "sync"):
            raise ClientError(f"mode must be 'async' or 'sync', not {mode!r}")
        if acks not in (0, 1, -1):
            raise ClientError(f"acks must be 0, 1 or -1, not {acks!r}")
        if not 1 <= max_in_flight <= _MAX_IN_FLIGHT:
            raise ClientError(
                f"max_in_flight must be 1 to {_MAX_IN_FLIGHT} (what a broker remembers of a producer), not "
                f"{max_in_flight!r}"
            )
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
        self._identity: tuple[int, int] | None = None
        """(producer id, epoch) once the cluster gave them; None before, or when not idempotent."""
        self._identity_wanted = self.idempotence
        """Ask for an id before sending more (at the start, and after a broker forgot the last one)."""
        self._identity_retry_at = 0.0
        self._sequences: dict[tuple[str, int], int] = {}
        """The next sequence number of each partition (numbered batches only)."""
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        """Guards the batches and counters below; ``send`` takes ``_lock`` itself (cheaper than the
        condition's Python-level ``with``), the rest waits and wakes through ``_cond``."""
        self._batches: dict[tuple[str, int], _Batch] = {}
        self._retrying: list[_Batch] = []
        self._sealed: dict[tuple[str, int], deque[_Batch]] = {}
        """Each partition's full batches waiting to go, oldest first."""
        self._in_flight: dict[tuple[str, int], int] = {}
        """The weight of each partition's batches in flight (see _Batch.weight)."""
        self._broken: set[tuple[str, int]] = set()
        """Partitions where a batch failed while later ones were in flight: their refusals as out
        of order are expected (they go again after it), not a sign the broker forgot us."""
        self._flight: deque[tuple[BrokerConnection, InFlight, list[_Batch]]] = deque()
        """Produce requests sent and not answered yet, oldest first (the sender thread's own)."""
        self._buffered = 0
        self._unfinished = 0
        self._room_waiters = 0
        """Threads blocked in ``send`` for room in the buffer: woken as each batch settles."""
        self._flushing = 0
        self._closed = False
        self._sender = threading.Thread(target=self._run, name="kafkalog-producer-sender", daemon=True)
        self._sender.start()

    @property
    def producer_id(self) -> int | None:
        """The id the cluster gave this producer (its batches are numbered and pipelined), or None."""
        identity = self._identity
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
        if self._closed:
            raise ClientError("the producer is closed")
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
        with self._lock:
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
            if batch.size >= self.batch_bytes > batch.size - size or self.mode == "sync":
                self._cond.notify_all()
        future = SendFuture(batch, index)
        if self.mode == "sync":
            future.result()
        return future

    def _open_batch(self, topic: str, partition: int, full: _Batch | None) -> _Batch:
        """A new open batch of the partition (holding ``_lock``); ``full``, its open batch that has
        no room left, is sealed first. Wakes the sender: an idle sender sleeps until told, so the
        new batch's linger must start counting now."""
        if full is not None and full.messages:
            # full: it goes as it is (a compressed batch is one message, which must stay under the
            # broker's limit), after any earlier batch of its partition
            self._sealed.setdefault((topic, partition), deque()).append(full)
        batch = self._batches[(topic, partition)] = _Batch(topic, partition, time.monotonic())
        self._cond.notify_all()
        return batch

    def send_set(self, topic: str, partition: int, record_set: bytes | memoryview, count: int) -> SendFuture:
        """Queue a message set already encoded (``count`` messages, e.g. fetched from another
        cluster) to go as it is, after everything sent to its partition before: each record batch
        in a request of its own (see ``_parts``); the broker assigns the offsets. The future
        resolves to the first message's RecordMetadata once every batch of the set has an outcome
        (the first failure, if any).
        This producer's compression does not apply. The set goes in the newest format the broker
        takes: record batches to a broker of Produce v3+ (a v0/v1 set is up-converted), message
        sets to an older one (batches down-converted: magic 1 for Produce v2, magic 0 before)."""
        if self._closed:
            raise ClientError("the producer is closed")
        size = len(record_set)
        parts = _parts(record_set)
        now = time.monotonic()
        batches = [
            _Batch(topic, partition, now, stored=data, count=0, size=len(data), alone=alone, part=index)
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
            whole = _Batch(topic, partition, now, stored=record_set, parts_left=len(batches))
            for batch in batches:
                batch.parent = whole
        with self._cond:
            self._wait_for_room(size)
            queue = self._sealed.setdefault((topic, partition), deque())
            open_batch = self._batches.pop((topic, partition), None)
            if open_batch is not None:
                queue.append(open_batch)  # it goes first: order within the partition
            queue.extend(batches)
            self._buffered += size
            self._unfinished += count
            self._cond.notify_all()
        future = SendFuture(whole, 0)
        if self.mode == "sync":
            future.result()
        return future

    def _wait_for_room(self, size: int) -> None:
        """Block (holding ``_cond``) until ``size`` more bytes fit in the buffer, or raise."""
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
                self._cond.wait(remaining)
        finally:
            self._room_waiters -= 1

    def flush(self, timeout: float | None = None) -> None:
        """Return once every message sent so far has an outcome (sent, or failed for good)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            self._flushing += 1
            self._cond.notify_all()
            try:
                while self._unfinished:
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        raise ClientError(f"flush timed out with {self._unfinished} message(s) unfinished")
                    self._cond.wait(remaining)
            finally:
                self._flushing -= 1

    def close(self, timeout: float | None = None) -> None:
        """Flush, stop the sender thread, close the connections."""
        if self._closed:
            return
        try:
            self.flush(timeout)
        finally:
            with self._cond:
                self._closed = True
                self._cond.notify_all()
            self._sender.join(timeout)
            super().close()

    # ------------------------------------------------------------------ the sender thread

    def _run(self) -> None:
        """The sender: sends what is ready while answers are outstanding, and takes the oldest
        answer when nothing more can go (every partition with work has its batches in flight)."""
        while True:
            with self._cond:
                # a new producer id is taken with nothing in flight: let the flight land first
                ready = [] if self._identity_wanted and self._flight else self._take_ready()
                while not ready and not self._flight:
                    if self._closed and not self._batches and not self._retrying and not self._sealed:
                        return
                    self._cond.wait(self._next_wakeup())
                    ready = self._take_ready()
            if ready:
                if self._identity_wanted and not self._flight and time.monotonic() >= self._identity_retry_at:
                    self._take_identity(ready)
                self._submit(ready)
            else:
                self._receive_oldest()

    def _next_wakeup(self) -> float:
        if self._sealed and not self._retrying:  # else they wait behind a retry: wake for the retry
            return 0.0
        now = time.monotonic()
        times = [b.created + self.linger for b in self._batches.values()] + [b.not_before for b in self._retrying]
        return max(0.0, min(times) - now) if times else 0.5

    def _take_ready(self) -> list[_Batch]:
        """The batches that may go now (holding ``_lock``), each partition's in its order: while
        its batches in flight weigh less than ``max_in_flight`` when batches are numbered, else
        while none is; never one that would overtake an earlier batch of its partition (a retry
        waiting for its back-off); a set given encoded alone."""
        now = time.monotonic()
        urgent = self._flushing or self._closed or self.mode == "sync"
        numbered = self._identity is not None
        limit = self.max_in_flight if numbered else 1
        taken = self._in_flight
        blocked: set[tuple[str, int]] = set()
        ready: list[_Batch] = []

        def take(batch: _Batch) -> bool:
            key = (batch.topic, batch.partition)
            count = taken.get(key, 0)
            alone = batch.alone or not numbered
            if key in blocked or count >= limit or (alone and count):
                blocked.add(key)
                return False
            ready.append(batch)
            batch.weight = _MAX_IN_FLIGHT if alone else 1
            taken[key] = count + batch.weight
            return True

        waiting = []
        for batch in self._retrying:  # in the order they failed: each partition's in its order
            if batch.not_before > now or not take(batch):
                blocked.add((batch.topic, batch.partition))
                waiting.append(batch)
        self._retrying = waiting
        blocked |= self._broken  # new batches wait until what failed before them went again
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

    def _submit(self, batches: list[_Batch]) -> None:
        """Send ``batches`` without waiting for the answers: each broker's in pipelined Produce
        requests (the n-th batch of each partition in the n-th request)."""
        by_broker: dict[BrokerConnection, list[_Batch]] = {}
        for batch in batches:
            try:
                connection = self.client.leader(batch.topic, batch.partition)
            except ClientError as exc:
                self._landed(batch)
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
                rounds: list[list[_Batch]] = []
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
                            "transactional_id": None,
                            "acks": self.acks,
                            "timeout_ms": int(self.request_timeout * 1000),
                            "topic_data": _topic_data(one, [self._record_set(b, magic) for b in one]),
                        },
                    )
                    for one in rounds
                ]
                sent = connection.submit(requests, expect_response=self.acks != 0)
            except ClientError as exc:
                for batch in group:  # in request order: each partition's retries keep their order
                    self._landed(batch)
                    self._failed(batch, exc)
                continue
            if self.acks == 0:  # nothing comes back: sent is all there is to know
                for batch in group:
                    self._landed(batch)
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
                self._landed(batch)
                self._failed(batch, exc)
            return
        answers = {(t["topic"], p["partition"]): p for t in response["responses"] for p in t["partition_responses"]}
        for batch in batches:
            self._settle_answer(batch, answers.get((batch.topic, batch.partition)))
            self._landed(batch)

    def _landed(self, batch: _Batch) -> None:
        """``batch`` is no longer in flight; a partition with nothing left in flight expects no
        more refusals as out of order."""
        key = (batch.topic, batch.partition)
        with self._cond:
            left = self._in_flight.get(key, 0) - batch.weight
            batch.weight = 0
            if left > 0:
                self._in_flight[key] = left
            else:
                self._in_flight.pop(key, None)
                self._broken.discard(key)
                self._cond.notify_all()

    def _settle_answer(self, batch: _Batch, answer: dict[str, Any] | None) -> None:
        """Give ``batch`` its outcome from its partition's ``answer`` (before it lands: its
        partition's ``_broken`` mark must outlive it while later batches are in flight)."""
        key = (batch.topic, batch.partition)
        failed = self._broken
        if answer is None:
            failed.add(key)
            self._failed(batch, ClientError(f"no answer for {batch.topic}-{batch.partition}"))
            return
        code = answer["error_code"]
        if code not in (ErrorCode.NONE, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
            error = BrokerResponseError(code, error_name(code), f"producing to {batch.topic}-{batch.partition}")
            if code in (ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, ErrorCode.UNKNOWN_PRODUCER_ID) and batch.sequence >= 0:
                if key not in failed:  # nothing before it failed: the broker no longer knows this producer
                    logger.info("%s: taking a new producer id", error)
                    self._renumber()
                error.retriable = True
            failed.add(key)
            if not error.retriable and batch.sequence >= 0:
                self._renumber()  # the batches behind it carry sequences that now leave a gap
            self._failed(batch, error)
            return
        batch.acknowledged = True
        batch.base_offset = answer["base_offset"]
        batch.append_time = answer.get("log_append_time", -1)
        self._settle(batch)

    # ------------------------------------------------------------------ idempotence

    def _take_identity(self, ready: list[_Batch]) -> None:
        """Ask the cluster for a producer id (InitProducerId) before sending ``ready``; settle for
        unnumbered batches where none can be had. Runs when nothing is in flight:
        the batches numbered under an earlier id (``ready``, and those waiting to be retried) are
        numbered again under the new one, or go unnumbered."""
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
                self._identity_retry_at = time.monotonic() + self.retry_backoff
                return
            logger.warning("producing without idempotence (one batch in flight per partition): %s", exc)
        except ClientError as exc:  # no broker answered: these go unnumbered; ask again later
            logger.info("could not ask for a producer id yet: %s", exc)
            self._identity_retry_at = time.monotonic() + self.retry_backoff
            return
        else:
            self._identity = (int(answer["producer_id"]), int(answer["producer_epoch"]))
            logger.debug("producer id %d, epoch %d", *self._identity)
        self._identity_wanted = False
        self._sequences.clear()
        with self._cond:
            for batch in [*ready, *self._retrying]:
                batch.sequence, batch.encoded = -1, None

    def _renumber(self) -> None:
        """Take a new producer id once the flight has landed (one batch per partition until then)."""
        if self.idempotence:
            self._identity = None
            self._identity_wanted = True

    def _record_set(self, batch: _Batch, magic: int) -> bytes | memoryview:
        """The batch's bytes in format ``magic``, numbered when the producer has an id; the same
        bytes for every retry."""
        if batch.encoded is not None and batch.encoded[0] == magic:
            return batch.encoded[1]
        record_set: bytes | memoryview
        if batch.stored is not None:
            record_set = _stored_as(batch.stored, magic)
            if magic == 2:
                record_set = _one_batch(record_set)  # what Produce v3+ takes of a partition
                if self._identity is not None and not batch.alone:
                    # numbered as this producer's own (another cluster's ids mean nothing here):
                    # pipelined, and a retry of it is recognised
                    producer_id, epoch = self._identity
                    key = (batch.topic, batch.partition)
                    batch.sequence = self._sequences.get(key, 0)
                    span = read_header(record_set, 0, len(record_set)).last_offset_delta + 1
                    self._sequences[key] = (batch.sequence + span) % (_MAX_SEQUENCE + 1)
                    record_set = with_producer(record_set, producer_id, epoch, batch.sequence)
                else:  # see without_producer: a transaction's batches keep theirs
                    record_set = _from_offset_zero(without_producer(record_set))
        elif magic == 2:
            producer_id, epoch = self._identity or (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
            if self._identity is not None:
                key = (batch.topic, batch.partition)
                batch.sequence = self._sequences.get(key, 0)
                self._sequences[key] = (batch.sequence + batch.count) % (_MAX_SEQUENCE + 1)
            record_set = encode_batch(
                batch.messages,
                codec=self.codec,
                producer_id=producer_id,
                producer_epoch=epoch,
                base_sequence=batch.sequence,
            )
        else:
            record_set = _legacy_set(batch, magic, self.codec)
        batch.encoded = (magic, record_set)
        return record_set

    def _failed(self, batch: _Batch, error: Exception) -> None:
        retriable = getattr(error, "retriable", False)
        if getattr(error, "invalid_metadata", False) or not isinstance(error, BrokerResponseError):
            self.client.invalidate(batch.topic)
        if retriable and batch.attempts < self.retries:
            batch.attempts += 1
            batch.not_before = time.monotonic() + self.retry_backoff * batch.attempts
            logger.info("retrying %d message(s) to %s-%d: %s", batch.count, batch.topic, batch.partition, error)
            with self._cond:
                self._retrying.append(batch)
                self._cond.notify_all()
            return
        batch.error = error
        self._settle(batch)

    def _settle(self, batch: _Batch) -> None:
        self._resolve(batch)
        with self._cond:
            self._buffered -= batch.size
            self._unfinished -= batch.count
            # flush waits for nothing unfinished, send for room: wake them for that alone (a flush
            # woken for every batch settled switched threads for each, a third of batch 1's time)
            if not self._unfinished or self._room_waiters:
                self._cond.notify_all()
        parent = batch.parent
        if parent is not None:  # a part of a set given to send_set: the set is settled by its last
            if batch.error is not None and parent.error is None:
                parent.error = batch.error
            if batch.part == 0:
                parent.acknowledged, parent.base_offset = batch.acknowledged, batch.base_offset
                parent.append_time = batch.append_time
            parent.parts_left -= 1
            if parent.parts_left == 0:
                self._resolve(parent)

    @staticmethod
    def _resolve(batch: _Batch) -> None:
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


def _topic_data(batches: list[_Batch], record_sets: list[bytes | memoryview]) -> list[dict[str, Any]]:
    """The topic_data of a Produce request: each batch's record set under its topic."""
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for batch, record_set in zip(batches, record_sets, strict=True):
        by_topic.setdefault(batch.topic, []).append({"partition": batch.partition, "record_set": record_set})
    return [{"topic": topic, "data": data} for topic, data in by_topic.items()]


def _legacy_set(batch: _Batch, magic: int, codec: Codec) -> bytes:
    """A batch as a message set of format ``magic`` (0 or 1), for a broker older than record batches."""
    if codec == Codec.ZSTD:
        raise UnsupportedByBrokerError("zstd needs a broker that takes record batches (Kafka 0.11+)")
    if any(headers for *_, headers in batch.messages):
        raise UnsupportedByBrokerError("headers need a broker that takes record batches (Kafka 0.11+)")
    builder = MessageSetBuilder(magic=magic, codec=codec, timestamp_type=TimestampType.CREATE_TIME)
    for key, value, timestamp, _ in batch.messages:
        builder.append(value, key, timestamp if magic == 1 else None)
    return builder.build()


def _parts(data: bytes | memoryview) -> list[tuple[bytes | memoryview, bool, int]]:
    """A set given to ``send_set`` as the parts that go in Produce requests, each (bytes, goes
    alone, offsets it spans): a broker of Produce v3+ takes one record batch per partition in a
    request (Kafka refuses more with INVALID_RECORD), so each magic 2 batch is a part of its own,
    and so is each compressed v0/v1 wrapper (it becomes one batch of its codec); a run of plain
    v0/v1 messages is one part (it becomes one batch). Only a transaction's batch goes alone."""
    view = memoryview(data)
    parts: list[tuple[bytes | memoryview, bool, int]] = []
    plain_start = -1
    plain_span = 0

    def end_plain(at: int) -> None:
        nonlocal plain_start
        if plain_start >= 0:
            parts.append((view[plain_start:at], False, plain_span))
            plain_start = -1

    for entry in iter_entries(view, verify_crc=False):
        if entry.magic != MAGIC and entry.codec == Codec.NONE:
            if plain_start >= 0 and entry.position + entry.size - plain_start > DEFAULT_MAX_BATCH_BYTES:
                end_plain(entry.position)  # a batch stays under what a broker takes as one
            if plain_start < 0:
                plain_start, plain_span = entry.position, 0
            plain_span += 1
            continue
        end_plain(entry.position)
        if entry.magic != MAGIC:  # a compressed wrapper: its messages' offsets
            parts.append((view[entry.position : entry.position + entry.size], False, 1))
            continue
        header = read_header(view, entry.position, entry.position + entry.size)
        alone = bool(header.attributes & TRANSACTIONAL_BIT)
        parts.append((view[entry.position : header.end], alone, header.last_offset_delta + 1))
    end_plain(len(view))
    return parts or [(data, True, 0)]


def _from_offset_zero(data: bytes | memoryview) -> bytes | memoryview:
    """One batch with base offset 0, as a producer sends it (Kafka refuses another base offset
    with INVALID_RECORD; the broker assigns the offsets, and the CRC does not cover them)."""
    if read_header(data, 0, len(data)).base_offset == 0:
        return data
    copy = bytearray(data)
    set_base_offset(copy, 0, 0)
    return bytes(copy)


def _one_batch(data: bytes | memoryview) -> bytes | memoryview:
    """``data`` (magic 2 batches) as one batch: itself when it is one; else (v0/v1 entries
    converted, a batch per compressed wrapper) their records re-encoded in one batch."""
    first = read_header(data, 0, len(data))
    if first.end == len(data):
        return data
    records = [RecordInput(m.key, m.value, m.timestamp, m.headers) for _, batch in decode_batches(data) for m in batch]
    return encode_batch(records, codec=Codec(first.codec))


def _stored_as(data: bytes | memoryview, magic: int) -> bytes | memoryview:
    """A set given already encoded, in format ``magic``: as it is when it is that already."""
    if magic == 2:
        return data if all(e.magic == 2 for e in iter_entries(data, verify_crc=False)) else to_batches(data)
    return to_magic(data, magic) if needs_conversion(data, magic) else data


__all__ = ["Producer", "RecordMetadata", "SendFuture", "error_name"]
