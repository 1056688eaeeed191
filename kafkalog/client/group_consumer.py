"""The high-level consumer (the seeds' ConsumerConnector): a group of consumers that share the
partitions of their topics, either through ZooKeeper with offsets committed there (the seeds'
design, kafkalog.client.zookeeper_membership) or through the group's coordinator broker with
Kafka's group protocol (kafkalog, Kafka 0.10 to 4.x; kafkalog.client.broker_membership).

Role: ``create_message_streams({topic: n})`` (or ``..._by_filter``) returns iterators; behind them
one fetcher thread reads every owned partition (one request per broker) and queues what each fetch
brought of a partition, as one chunk, for the stream of the consumer thread that owns the partition
(kafkalog.registry.groups decides who owns what). A stream yields the chunk's messages one by one,
or whole chunks (``Stream.chunks``).

Invariants:
- A partition is handed out only while this member owns it: before a partition is released, its
  fetcher stops, messages of it still queued are dropped, and the offset of what was handed out is
  committed. So no partition is consumed by two members at once.
- At least once: the committed offset is never beyond what was handed out; a new owner resumes at
  the committed offset (duplicates only within the uncommitted window, no gaps).
- Suspended (ZooKeeper or the coordinator unreachable, the membership may survive): nothing more is
  handed out and nothing is committed until it is back. Lost (session expired, or fenced by the
  coordinator): ownership is gone, so everything is dropped, the member joins again and rebalances.
- A message is handed out only while the membership can show it is still alive (``paused()`` of the
  membership: a recent ZooKeeper round trip in the same session, or a recently acknowledged
  heartbeat), so a frozen process does not hand out a partition another member took meanwhile.
- A rebalance is triggered by members joining or leaving, brokers coming or going, and (for filters)
  new matching topics: ZooKeeper's watches, or the coordinator's answer to a heartbeat.
"""

from __future__ import annotations

import logging
import queue
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from kafkalog.client.broker_membership import BrokerMembership
from kafkalog.client.committed import ISOLATION_LEVELS, Isolation
from kafkalog.client.consumer import SimpleConsumer
from kafkalog.client.security import PLAINTEXT, ClientSecurity
from kafkalog.client.zookeeper_membership import ZooKeeperMembership
from kafkalog.errors import AssignmentError, ClientError, KafkalogError, OffsetOutOfRangeError
from kafkalog.record import Message, decode_all
from kafkalog.registry.assign import ThreadId
from kafkalog.retry import Backoff
from kafkalog.topics import TopicPartition

log = logging.getLogger(__name__)

_SETTLE_S = 0.2
"""The pause before a rebalance, for a burst of membership changes to end."""
_POLL_S = 0.05
"""How often a thread waiting for another's change (a pause, a first assignment) looks again."""


def _rebalance_retries() -> Backoff:
    """The waits between failed rebalances: a second, growing to ten (a broker or ZooKeeper away)."""
    return Backoff(first=1.0, cap=10.0)


def _fetch_retries() -> Backoff:
    """The waits between failed fetches: half a second, growing to five."""
    return Backoff(first=0.5, cap=5.0)


@dataclass(frozen=True, slots=True)
class MessageAndMetadata:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int = -1
    codec: int = 0
    """Compression codec the message arrived in (0: none)."""


@dataclass(frozen=True, slots=True)
class Chunk:
    """What one fetch brought of one partition: every message from ``start`` to ``next_offset``
    (exclusive), decoded in ``messages``, or (a consumer made with ``keep_stored``) mostly still as
    the broker stored them in ``record_set`` (see FetchResult)."""

    topic: str
    partition: int
    start: int
    next_offset: int
    messages: list[Message]
    record_set: bytes | memoryview
    codec: int
    """Compression codec of the first entry fetched (0: none)."""

    def decoded(self) -> list[Message]:
        if not self.record_set:
            return self.messages
        return self.messages + decode_all(self.record_set, min_offset=self.start)


class Stream:
    """One consumer thread's messages. Iterating blocks until a message arrives or the consumer
    closes; ``timeout_s`` (if set) ends the iteration after that long without a message.
    ``chunks()`` iterates over whole fetched chunks instead (a mirror's way: no per-message cost)."""

    def __init__(self, owner: GroupConsumer, thread: ThreadId, timeout_s: float | None) -> None:
        self.owner = owner
        self.thread = thread
        self.timeout_s = timeout_s
        self.queue: queue.Queue[tuple[int, Chunk]] = queue.Queue(maxsize=owner.queued_chunks)
        """(generation of its partition's ownership, chunk): see GroupConsumer.hand_out."""

    def drop(self, partitions: set[TopicPartition] | None) -> None:
        """Remove the queued chunks of ``partitions`` (None: all), keeping the others in order."""
        kept = []
        while True:
            try:
                entry = self.queue.get_nowait()
            except queue.Empty:
                break
            if partitions is not None and (entry[1].topic, entry[1].partition) not in partitions:
                kept.append(entry)
        for entry in kept:
            self.queue.put_nowait(entry)

    def _queued(self) -> Iterator[tuple[int, Chunk]]:
        idle_since = time.monotonic()
        while not self.owner.closed:
            if self.timeout_s is not None and time.monotonic() - idle_since > self.timeout_s:
                return
            try:
                entry = self.queue.get(timeout=0.1)
            except queue.Empty:
                continue
            idle_since = time.monotonic()
            yield entry

    def __iter__(self) -> Iterator[MessageAndMetadata]:
        hand_out = self.owner.hand_out
        for generation, chunk in self._queued():
            topic, partition, codec = chunk.topic, chunk.partition, chunk.codec
            for message in chunk.decoded():
                # its partition may be released meanwhile: then the new owner hands it out
                if hand_out(topic, partition, message.offset, message.offset + 1, generation):
                    yield MessageAndMetadata(
                        topic, partition, message.offset, message.key, message.value, message.timestamp, codec
                    )

    def chunks(self) -> Iterator[Chunk]:
        """Whole chunks, each handed out at once (the position moves past all its messages)."""
        hand_out = self.owner.hand_out
        for generation, chunk in self._queued():
            if hand_out(chunk.topic, chunk.partition, chunk.start, chunk.next_offset, generation):
                yield chunk


def _pattern(what: str, value: str | None) -> re.Pattern[str] | None:
    if not value:
        return None
    try:
        return re.compile(value)
    except re.error as exc:
        raise ClientError(f"{what} {value!r} is not a regular expression: {exc}") from exc


class GroupConsumer:
    """A member of consumer group ``group`` (see the module doc)."""

    def __init__(
        self,
        zookeeper: Any = None,
        group: str = "",
        *,
        bootstrap: str | Sequence[str] | None = None,
        group_instance_id: str | None = None,
        rebalance_timeout_s: float = 60.0,
        heartbeat_interval_s: float | None = None,
        consumer_id: str | None = None,
        assignor: str = "range",
        auto_commit_interval_s: float | None = 5.0,
        auto_offset_reset: str = "largest",
        fetch_max_bytes: int = 1024 * 1024,
        queued_chunks: int = 4,
        keep_stored: bool = False,
        stream_timeout_s: float | None = None,
        claim_timeout_s: float = 10.0,
        session_timeout_s: float = 6.0,
        commit_filter: Callable[[dict[TopicPartition, int]], dict[TopicPartition, int]] | None = None,
        on_out_of_range: Callable[[TopicPartition, int, int, int], int] | None = None,
        before_release: Callable[[list[TopicPartition]], None] | None = None,
        security: ClientSecurity = PLAINTEXT,
        isolation: Isolation = "read_uncommitted",
    ) -> None:
        if isolation not in ISOLATION_LEVELS:
            raise ClientError(f"isolation must be read_uncommitted or read_committed, not {isolation!r}")
        if auto_offset_reset not in ("smallest", "largest"):
            raise ClientError(f"auto_offset_reset must be smallest or largest, not {auto_offset_reset!r}")
        if (zookeeper is None) == (bootstrap is None):
            raise ClientError("give a ZooKeeper connect string (or client) or bootstrap brokers (one of them)")
        if not group:
            raise ClientError("a group id is needed")
        self.group = group
        self.security = security
        self.isolation: Isolation = isolation
        """What the fetches read (SimpleConsumer's): read_committed leaves out aborted transactions
        and stops at the last stable offset; "largest" then resets to the last stable offset."""
        self.consumer_id = (
            consumer_id or f"{group}_{socket.gethostname()}-{int(time.time() * 1000)}-{uuid.uuid4().hex[:8]}"
        )
        self._membership: ZooKeeperMembership | BrokerMembership
        if bootstrap is not None:
            self._membership = BrokerMembership(
                bootstrap,
                group,
                self.consumer_id,
                assignor=assignor,
                session_timeout_s=session_timeout_s,
                rebalance_timeout_s=rebalance_timeout_s,
                heartbeat_interval_s=heartbeat_interval_s,
                group_instance_id=group_instance_id,
                on_release=self._release,
                security=security,
            )
        else:
            if group_instance_id is not None:
                raise ClientError("group_instance_id (static membership) needs the brokers' group protocol")
            self._membership = ZooKeeperMembership(
                zookeeper,
                group,
                self.consumer_id,
                assignor=assignor,
                claim_timeout_s=claim_timeout_s,
                session_timeout_s=session_timeout_s,
                on_release=self._release,
            )
        self.auto_commit_interval_s = auto_commit_interval_s
        self.auto_offset_reset = auto_offset_reset
        self.fetch_max_bytes = fetch_max_bytes
        self.queued_chunks = queued_chunks
        """Fetched chunks (up to ``fetch_max_bytes`` each) waiting per stream: bounds the memory."""
        self.keep_stored = keep_stored
        """Chunks keep the message sets as stored (Chunk.record_set) instead of decoding them;
        reading committed, a set with transactional or control batches comes decoded and filtered
        (``Chunk.messages``, its ``next_offset`` past the batches left out)."""
        self.stream_timeout_s = stream_timeout_s
        self.closed = False
        self._lock = threading.RLock()
        self._subscription: dict[str, int] = {}
        self._filter: tuple[re.Pattern[str] | None, re.Pattern[str] | None, int] | None = None
        self._streams: dict[ThreadId, Stream] = {}
        self._generations: dict[TopicPartition, int] = {}
        """The owned partitions being fetched, each with the generation of this ownership: a
        message queued under an earlier generation (before a release) is never handed out."""
        self._next_generation = 0
        self._fetch_positions: dict[TopicPartition, int] = {}
        """Next offset to fetch per owned partition (ahead of ``_positions`` by what is queued)."""
        self._targets: dict[TopicPartition, Stream] = {}
        self._owned_snapshot: tuple[TopicPartition, ...] = ()
        self._fetch_thread: threading.Thread | None = None
        self._positions: dict[TopicPartition, int] = {}
        """Next offset to hand out per owned partition (what a commit stores)."""
        self._committed: dict[TopicPartition, int] = {}
        self._suspended = self._membership.suspended
        self._rebalance_needed = threading.Event()
        self._simple: SimpleConsumer | None = None
        self.rebalances = 0
        """Completed rebalances of this member."""
        self.commit_filter = commit_filter
        """Given the positions about to be committed, returns what may be committed (e.g. only what a
        mirror's target acknowledged); partitions left out are not committed this time."""
        self.on_out_of_range = on_out_of_range
        """Given (partition, offset, earliest, latest) when the offset is not on the broker, returns
        where to go on; raising stops that partition's fetcher and sets ``failure``. None: reset to
        ``auto_offset_reset`` with a warning (Kafka's behaviour)."""
        self.before_release = before_release
        """Called before partitions are committed and released in a rebalance or on close (a
        mirror flushes its producer here, so what it committed was acknowledged)."""
        self.high_watermarks: dict[TopicPartition, int] = {}
        """The log end offset of each owned partition at its last fetch (for lag)."""
        self.failure: BaseException | None = None
        """What stopped a fetcher for good (raised by ``on_out_of_range``)."""
        self.last_error: str | None = None
        """Why the last rebalance failed (None after a success): e.g. round-robin members that
        subscribe differently, which waits for the membership to change."""

    # ------------------------------------------------------------------ subscribing

    def create_message_streams(self, topic_counts: dict[str, int]) -> dict[str, list[Stream]]:
        """``n`` streams per topic; rebalances the group."""
        with self._lock:
            self._subscription = dict(topic_counts)
            out = {t: [self._stream(ThreadId(self.consumer_id, i)) for i in range(n)] for t, n in topic_counts.items()}
        self._start()
        return out

    def create_message_streams_by_filter(
        self, whitelist: str | None = None, blacklist: str | None = None, streams: int = 1
    ) -> list[Stream]:
        """``streams`` streams over every topic matching ``whitelist`` (and not ``blacklist``),
        including topics created later."""
        if (whitelist is None) == (blacklist is None):
            raise ClientError("give a whitelist or a blacklist (one of them)")
        with self._lock:
            self._filter = (_pattern("whitelist", whitelist), _pattern("blacklist", blacklist), streams)
            self._subscription = self._matching_topics()
            out = [self._stream(ThreadId(self.consumer_id, i)) for i in range(streams)]
        self._start()
        return out

    def _stream(self, thread: ThreadId) -> Stream:
        if thread not in self._streams:
            self._streams[thread] = Stream(self, thread, self.stream_timeout_s)
        return self._streams[thread]

    def _matching_topics(self) -> dict[str, int]:
        assert self._filter is not None
        white, black, streams = self._filter
        names = self._membership.topics()
        return {
            t: streams
            for t in names
            if (white is not None and white.fullmatch(t)) or (black is not None and not black.fullmatch(t))
        }

    def _start(self) -> None:
        self._membership.start(self._subscription, self._rebalance_needed.set)
        self._rebalance_needed.set()
        threading.Thread(target=self._coordinate, name=f"{self.consumer_id}-coordinator", daemon=True).start()

    # ------------------------------------------------------------------ the coordinator thread

    def _coordinate(self) -> None:
        last_commit = time.monotonic()
        retries = _rebalance_retries()
        while not self.closed:
            if self._rebalance_needed.wait(0.2) and not self._suspended.is_set() and not self.closed:
                # not a retry: a fixed pause, so that a burst of membership changes (a group starting,
                # a deploy) is rebalanced once, after it, rather than once per change
                time.sleep(_SETTLE_S)
                self._rebalance_needed.clear()
                try:
                    self._rebalance()
                    self.last_error = None
                    retries = _rebalance_retries()
                except AssignmentError as exc:  # the group is misconfigured: waits for a membership change
                    if str(exc) != self.last_error:
                        log.error("%s: cannot rebalance: %s", self.consumer_id, exc)  # noqa: TRY400 - no traceback
                    self.last_error = str(exc)
                except KafkalogError as exc:
                    log.warning("%s: rebalance failed, retrying: %s", self.consumer_id, exc)
                    self.last_error = str(exc)
                    self._rebalance_needed.set()
                    retries.wait()  # no budget: it always waits, longer each time in a row
                except Exception as exc:  # a ZooKeeper connection error mid-rebalance: retry later
                    log.warning("%s: rebalance interrupted, retrying: %s", self.consumer_id, exc)
                    self.last_error = f"rebalance interrupted: {exc!r}"
                    self._rebalance_needed.set()
                    retries.wait()  # no budget: it always waits, longer each time in a row
            interval = self.auto_commit_interval_s
            if interval is not None and time.monotonic() - last_commit >= interval and not self._suspended.is_set():
                self._safe_commit()
                last_commit = time.monotonic()

    def _rebalance(self) -> None:
        with self._lock:
            if self.closed:
                return
            if self._membership.lost:  # a new session, or fenced: our ownership is gone
                self._membership.lost = False
                self._drop_everything()
                self._membership.forget_owned()
            if self._filter is not None:
                self._subscription = self._matching_topics()
            for n in self._subscription.values():
                for i in range(n):
                    self._stream(ThreadId(self.consumer_id, i))
            owned = self._membership.rebalance(self._subscription)
            self.rebalances += 1
            if not self.closed:
                self._take(owned)

    def _bootstrap(self) -> list[str]:
        return self._membership.bootstrap()

    def _consumer(self) -> SimpleConsumer:
        """The connection for offset lookups (fetchers have their own)."""
        if self._simple is None:
            self._simple = SimpleConsumer(
                self._bootstrap(), max_bytes=self.fetch_max_bytes, security=self.security, isolation=self.isolation
            )
        return self._simple

    def _take(self, owned: dict[TopicPartition, ThreadId]) -> None:
        """Start fetching the newly owned partitions from their committed offsets (read together),
        or from ``auto_offset_reset`` where the group never committed."""
        new = {tp: thread for tp, thread in owned.items() if tp not in self._generations}
        if not new:
            return
        committed = self._membership.committed(new)
        for tp, thread in sorted(new.items()):
            start = committed.get(tp)
            if start is None:
                consumer = self._consumer()
                reset = consumer.earliest_offset if self.auto_offset_reset == "smallest" else consumer.latest_offset
                start = reset(*tp)
            self._next_generation += 1
            self._generations[tp] = self._next_generation
            self._positions[tp] = self._committed[tp] = self._fetch_positions[tp] = start
            self._targets[tp] = self._streams[thread]
        self._owned_snapshot = tuple(sorted(self._generations))
        if self._fetch_thread is None or not self._fetch_thread.is_alive():
            self._fetch_thread = threading.Thread(target=self._fetch_all, name=f"{self.consumer_id}-fetch", daemon=True)
            self._fetch_thread.start()

    def _fetch_all(self) -> None:
        """The fetcher: every owned partition, one request per broker (SimpleConsumer.fetch_many),
        into the stream of the thread that owns it. Its connection is opened and closed here: a
        client closed by another thread could be reconnected by a fetch in flight and leak."""
        consumer: SimpleConsumer | None = None
        retries = _fetch_retries()
        try:
            while not self.closed:
                # polls, not retries: the session suspended (ZooKeeper away) or nothing owned yet are
                # states another thread ends; a short fixed interval notices it soon
                if self._suspended.is_set():
                    time.sleep(_POLL_S * 2)
                    continue
                with self._lock:
                    wanted = {tp: (self._fetch_positions[tp], gen) for tp, gen in self._generations.items()}
                if not wanted:
                    time.sleep(_POLL_S)
                    continue
                try:
                    if consumer is None:
                        consumer = SimpleConsumer(
                            self._bootstrap(), max_bytes=self.fetch_max_bytes, max_wait_ms=200, security=self.security,
                            isolation=self.isolation,
                        )  # fmt: skip
                    results = consumer.fetch_many(
                        {tp: offset for tp, (offset, _) in wanted.items()}, stored=self.keep_stored
                    )
                except OffsetOutOfRangeError:
                    if consumer is not None:
                        self._out_of_range(consumer, wanted)
                    continue
                except KafkalogError as exc:
                    log.warning("%s: fetch failed, retrying: %s", self.consumer_id, exc)
                    retries.wait()  # no budget: it always waits, longer each time in a row
                    continue
                retries = _fetch_retries()
                for tp, result in results.items():
                    start, generation = wanted[tp]
                    self.high_watermarks[tp] = result.high_watermark
                    if result.last_offset < 0:
                        continue
                    next_offset = result.next_offset(start)
                    chunk = Chunk(tp[0], tp[1], start, next_offset, result.messages, result.record_set, result.codec)
                    if self._deliver(tp, generation, chunk):
                        with self._lock:
                            if self._generations.get(tp) == generation:
                                self._fetch_positions[tp] = next_offset
        finally:
            if consumer is not None:
                consumer.close()

    def _deliver(self, tp: TopicPartition, generation: int, chunk: Chunk) -> bool:
        """Queue a fetched chunk for the partition's stream; False if it was released meanwhile."""
        stream = self._targets.get(tp)
        if stream is None:
            return False
        entry = (generation, chunk)
        while True:
            if self.closed or self._generations.get(tp) != generation:
                return False
            try:
                stream.queue.put(entry, timeout=0.1)
            except queue.Full:
                continue
            return True

    def _out_of_range(self, consumer: SimpleConsumer, wanted: dict[TopicPartition, tuple[int, int]]) -> None:
        """Some fetch offset is off the broker's log: find which, and move it (or fail)."""
        for tp, (offset, generation) in wanted.items():
            earliest, latest = consumer.earliest_offset(*tp), consumer.latest_offset(*tp)
            if earliest <= offset <= latest:
                continue
            if self.on_out_of_range is not None:
                try:
                    new = self.on_out_of_range(tp, offset, earliest, latest)
                except BaseException as failure:
                    self.failure = failure
                    with self._lock:  # stop fetching it; the owner of the consumer decides what follows
                        if self._generations.get(tp) == generation:
                            self._generations.pop(tp)
                    return
            else:
                new = earliest if self.auto_offset_reset == "smallest" else latest
                log.warning("%s-%s: offset %s is out of range; resetting to %s", tp[0], tp[1], offset, new)
            with self._lock:
                if self._generations.get(tp) == generation:
                    self._fetch_positions[tp] = self._positions[tp] = new

    # ------------------------------------------------------------------ handing out, releasing, committing

    def hand_out(self, topic: str, partition: int, offset: int, next_offset: int, generation: int) -> bool:
        """Called by a stream before yielding the messages from ``offset`` to ``next_offset``: False
        if their partition is no longer ours or they were handed out already (or the session is
        suspended: it waits), else the position advances to ``next_offset``."""
        while self._membership.paused() and not self.closed:
            time.sleep(_POLL_S)  # a poll: the membership's own thread ends the pause
        if self._membership.lost:  # another member may own it now; the rebalance drops it
            return False
        tp = (topic, partition)
        with self._lock:
            if self._generations.get(tp) != generation or offset < self._positions.get(tp, 0):
                return False
            self._positions[tp] = next_offset
            return True

    def _release(self, partitions: list[TopicPartition]) -> None:
        """Before the rebalancer deletes the owner nodes: stop, drop queued messages, commit."""
        with self._lock:
            for tp in partitions:
                self._generations.pop(tp, None)
                self._fetch_positions.pop(tp, None)
                self._targets.pop(tp, None)
            self._owned_snapshot = tuple(sorted(self._generations))
            for stream in self._streams.values():
                stream.drop(set(partitions))
            try:
                if self.before_release is not None:
                    self.before_release(partitions)
                if not self._suspended.is_set():
                    self._commit([tp for tp in partitions if tp in self._positions])
            finally:  # committed or not, they are no longer ours: never commit them again
                for tp in partitions:
                    self._positions.pop(tp, None)
                    self._committed.pop(tp, None)

    def _drop_everything(self) -> None:
        self._generations.clear()
        self._fetch_positions.clear()
        self._targets.clear()
        self._owned_snapshot = ()
        self._positions.clear()
        self._committed.clear()
        for stream in self._streams.values():
            stream.drop(None)

    def commit_offsets(self) -> dict[TopicPartition, int]:
        """Store the position of every owned partition in ZooKeeper; returns what was stored.
        ClientError while ZooKeeper is unreachable (nothing is silently dropped)."""
        if self._suspended.is_set():
            raise ClientError(f"{self.consumer_id}: the group's membership is unreachable; offsets not committed")
        with self._lock:
            return self._commit(list(self._positions))

    def _commit(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        positions = {tp: self._positions[tp] for tp in partitions}
        if self.commit_filter is not None:
            positions = self.commit_filter(positions)
        changed = {tp: position for tp, position in positions.items() if self._committed.get(tp) != position}
        self._membership.commit(changed)
        self._committed.update(changed)
        return positions

    def _safe_commit(self) -> None:
        try:
            self.commit_offsets()
        except Exception as exc:  # the next interval tries again; a lost commit only adds duplicates
            log.warning("%s: automatic commit failed: %s", self.consumer_id, exc)

    def owned(self) -> list[TopicPartition]:
        """The partitions this member owns and fetches (a snapshot: never waits for a rebalance)."""
        return list(self._owned_snapshot)

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        """Commit, release every partition, leave the group."""
        if self.closed:
            return
        with self._lock:
            try:
                if not self._suspended.is_set():
                    self._commit(list(self._positions))
                self._membership.leave()
            except Exception as exc:  # closing anyway: the membership ends with the session
                log.warning("%s: clean leave failed: %s", self.consumer_id, exc)
            self.closed = True
            self._drop_everything()
        self._halt()
        self._membership.close()

    def _halt(self) -> None:
        """Stop every thread and connection without committing or releasing (what a crash of the
        process does; ``close`` calls it after its clean leave)."""
        with self._lock:  # a rebalance in progress cannot start fetchers after this
            self.closed = True
            self._drop_everything()
            fetcher = self._fetch_thread
        if fetcher is not None:
            fetcher.join(5)
        if self._simple is not None:
            self._simple.close()

    def __enter__(self) -> GroupConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
