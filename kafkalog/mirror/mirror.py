"""The mirror-maker: consume one or more source clusters, produce into one target (seeds: 部署).

Role: a source per cluster feeds fetched chunks to the target writer, which sends their message
sets on as the source stored them where it can (same partition count, compression preserved) and
re-encodes message by message otherwise; an AckTracker per source records what the target
acknowledged; sources commit only acknowledged progress. Sources are read committed (Kafka's
``isolation.level``): a partition is read up to its last stable offset, the records of aborted
transactions and the transaction markers never reach the target, and a set holding transactional
batches arrives decoded and goes message by message (see docs/mirror.md, Transactions). Two
kinds of source:
- with ZooKeeper: a GroupConsumer over every matching topic (new ones included), sharing the
  partitions with other mirror processes of the same group;
- without: this process takes every matching partition (found again every ``refresh_topics_ms``)
  and commits through the source brokers (OffsetCommit, group ``group``).

Invariants (reliability rows M1-M6):
- a source offset is committed only once the target acknowledged every message before it (the
  offsets of aborted records and markers, which have no message to send, count as done);
- a target failure stops the mirror with an error naming the cause; what was acknowledged is
  committed, nothing is skipped (never skip-and-continue);
- a graceful stop stops fetching, waits for the target to acknowledge what is in flight, commits,
  then releases partitions: a restart repeats nothing;
- partitions are kept where the target has as many as the source, else messages go by key;
- any thread that dies makes the whole mirror stop (no zombie that holds partitions).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from kafkalog.client import Admin, Client, Producer, SimpleConsumer
from kafkalog.client.group_consumer import Chunk, GroupConsumer, Stream
from kafkalog.client.offsets import OffsetsClient
from kafkalog.errors import BrokerResponseError, KafkalogError, OffsetOutOfRangeError, UnsupportedByBrokerError
from kafkalog.mirror.config import ClusterSpec, MirrorConfig
from kafkalog.mirror.faults import fail_point
from kafkalog.mirror.gaps import GapPolicy
from kafkalog.mirror.tracker import AckTracker
from kafkalog.record import Codec, Message
from kafkalog.topics import TopicPartition

log = logging.getLogger(__name__)


def _counted(count: int, noun: str) -> str:
    """``1 message``, ``2 messages``: a count (with thousands separators) that agrees with its noun."""
    return f"{count:,} {noun if count == 1 else noun + 's'}"


def status_line(mirrored: int, rate: float, in_flight: int, lag: int, partitions: int) -> str:
    """The periodic status line: messages sent to the target so far and the rate since the last
    line, sends not acknowledged yet, and the source messages not fetched yet over how many
    partitions."""
    return (
        f"mirrored {_counted(mirrored, 'message')} ({rate:,.0f}/s), in flight {in_flight:,}, "
        f"lag {lag:,} over {_counted(partitions, 'partition')}"
    )


def stopped_line(acknowledged: int, seconds: float) -> str:
    """The last status line: how many messages the target acknowledged in the whole run."""
    return f"mirror stopped: {_counted(acknowledged, 'message')} acknowledged by the target in {seconds:,.1f} s"


class MirrorError(KafkalogError):
    """The mirror stopped because it could not go on without losing or skipping data."""


class TargetWriter:
    """Produces mirrored messages into the target, one async producer per compression codec (all
    over one client). Creates missing topics with the source's partition count. Thread-safe."""

    def __init__(self, config: MirrorConfig) -> None:
        self.config = config
        settings = {
            "retries": 10,
            "linger_ms": 20,
            "batch_bytes": 256 * 1024,
            "max_block_ms": 120_000,
            **config.producer,
        }
        self._settings = settings
        self.client = Client(
            **config.target.client_args, request_timeout_ms=int(settings.get("request_timeout_ms", 30_000))
        )
        self.admin = Admin(client=self.client)
        self._producers: dict[str, Producer] = {}
        self._partitions: dict[str, int] = {}
        self._topic_codecs: dict[str, str] = {}
        self._lock = threading.Lock()
        self.sent = 0
        self.sent_bytes = 0

    def _producer(self, codec: str) -> Producer:
        producer = self._producers.get(codec)  # the common case, without the lock
        if producer is not None:
            return producer
        with self._lock:
            producer = self._producers.get(codec)
            if producer is None:
                producer = self._producers[codec] = Producer(
                    client=self.client, compression=codec, acks=self.config.acks, **self._settings
                )
            return producer

    def target_partitions(self, topic: str, source_partitions: int) -> int:
        """The target topic's partition count, creating the topic if it is missing (and allowed)."""
        known = self._partitions.get(topic)
        if known is not None:
            return known
        try:
            count = len(self.admin.describe_topic(topic).leaders)
        except BrokerResponseError as exc:
            if exc.error_code != 3:
                raise
            if not self.config.create_topics:
                raise MirrorError(
                    f"target {self.config.target}: topic {topic!r} does not exist and create_topics is off"
                ) from exc
            try:
                self.admin.create_topic(topic, source_partitions)
                log.info("created %s on the target with %d partition(s)", topic, source_partitions)
            except BrokerResponseError as created:
                if created.error_code != 36:  # TOPIC_ALREADY_EXISTS: another mirror was first
                    raise
            except UnsupportedByBrokerError:
                # Kafka 0.9 has no CreateTopics: its auto-creation (num.partitions) makes the topic
                # when its metadata is asked for; the partition count is then the broker's choice
                log.warning("the target cannot create topics (Kafka 0.9): %s is auto-created by the broker", topic)
            count = len(self.client.topic(topic, refresh=True, wait_ms=30_000).leaders)
        with self._lock:
            self._partitions[topic] = count
        if count != source_partitions:
            log.warning(
                "%s has %d partition(s) on the target and %d on a source: messages go by key",
                topic, count, source_partitions,
            )  # fmt: skip
        return count

    def _codec(self, topic: str, arrived_in: int) -> str:
        """The compression of a topic's re-encoded messages on the target: the configured one, or
        (preserve) the codec its first mirrored chunk arrived in. One codec per topic, so one
        producer, keeps each partition's order (producers of different codecs would race)."""
        if self.config.compression != "preserve":
            return self.config.compression
        codec = self._topic_codecs.get(topic)
        if codec is None:
            known = {c.value: c.name.lower() for c in Codec}
            codec = self._topic_codecs.setdefault(topic, known.get(arrived_in, "none"))
        return codec

    def send(self, chunk: Chunk, source_partitions: int, tracker: AckTracker) -> None:
        """Hand a fetched chunk to the producer. Where the target keeps the source's partitions and
        compression is preserved, its message sets go as the source stored them (one send for the
        chunk, no message decoded or encoded); otherwise, and for a chunk the source's transactions
        touched (it arrives decoded, aborted records and markers left out), message by message.
        The chunk's offsets that needed no send count as done once those before them are."""
        fail_point("mirror.send")
        topic, partition = chunk.topic, chunk.partition
        try:
            same_layout = self.target_partitions(topic, source_partitions) == source_partitions
        except MirrorError:
            raise
        except KafkalogError as exc:
            raise MirrorError(f"target {self.config.target}: topic {topic}: {exc}") from exc
        producer = self._producer(self._codec(topic, chunk.codec))
        tp = (topic, partition)
        try:
            if not (same_layout and self.config.compression == "preserve"):
                for message in chunk.decoded():
                    self._send_message(producer, tp, message, same_layout, tracker)
            else:
                # the part of a wrapper the fetch began inside, or (read committed) every message
                # of a set holding transactional batches: those cannot go as stored (the target
                # refuses a transactional batch from a producer without their transactional id,
                # and a control batch from any client)
                for message in chunk.messages:
                    self._send_message(producer, tp, message, True, tracker)
                if chunk.record_set:
                    self._send_stored(producer, chunk, tracker)
            # after the sends, never before: the end of the chunk is safe only once they are
            tracker.passed(tp, chunk.next_offset)
        except KafkalogError as exc:
            raise MirrorError(f"target {self.config.target}: {exc}") from exc

    def _send_stored(self, producer: Producer, chunk: Chunk, tracker: AckTracker) -> None:
        tp = (chunk.topic, chunk.partition)
        first = chunk.messages[-1].offset + 1 if chunk.messages else chunk.start
        last = chunk.next_offset - 1
        tracker.sent(tp, first, last)
        try:
            future = producer.send_set(chunk.topic, chunk.partition, chunk.record_set, last - first + 1)
        except KafkalogError as exc:
            tracker.settled(tp, first, exc)
            raise
        future.add_done_callback(lambda f: tracker.settled(tp, first, f.exception()))
        self.sent += last - first + 1
        self.sent_bytes += len(chunk.record_set)

    def _send_message(
        self, producer: Producer, tp: TopicPartition, message: Message, same_layout: bool, tracker: AckTracker
    ) -> None:
        offset = message.offset
        tracker.sent(tp, offset)
        try:
            future = producer.send(
                tp[0], message.value, message.key,
                partition=tp[1] if same_layout else None,
                timestamp=message.timestamp if message.timestamp >= 0 else None, headers=message.headers,
            )  # fmt: skip
        except KafkalogError as exc:
            tracker.settled(tp, offset, exc)
            raise
        future.add_done_callback(lambda f: tracker.settled(tp, offset, f.exception()))
        self.sent += 1
        self.sent_bytes += len(message.value or b"") + len(message.key or b"")

    def flush(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for producer in list(self._producers.values()):
            producer.flush(max(0.1, deadline - time.monotonic()))

    def close(self, timeout: float) -> None:
        try:
            for producer in list(self._producers.values()):
                producer.close(timeout)
        finally:
            self.client.close()


class Source(Protocol):
    name: str
    tracker: AckTracker
    gaps: GapPolicy
    failure: BaseException | None

    def start(self) -> None: ...

    def stop_fetching(self) -> None: ...

    def close(self) -> None:
        """Commit what is safe and release the partitions."""
        ...

    def lag(self) -> dict[TopicPartition, int]: ...


def _filters(config: MirrorConfig) -> dict[str, str]:
    """The whitelist/blacklist for a GroupConsumer, internal topics always left out."""
    if config.blacklist is not None:
        return {"blacklist": f"__.*|(?:{config.blacklist})"}
    return {"whitelist": f"(?!__)(?:{config.whitelist or '.*'})"}


class GroupSource:
    """A source cluster with ZooKeeper: a group member (partitions shared with other mirrors)."""

    def __init__(self, spec: ClusterSpec, config: MirrorConfig, writer: TargetWriter, gaps: GapPolicy) -> None:
        assert spec.zookeeper is not None
        self.name = spec.name
        self.gaps = gaps
        self.config = config
        self.writer = writer
        self.tracker = AckTracker()
        self.failure: BaseException | None = None
        self._stopping = threading.Event()
        self.consumer = GroupConsumer(
            spec.zookeeper,
            config.group,
            auto_offset_reset="smallest" if config.start_from == "earliest" else "largest",
            auto_commit_interval_s=config.commit_interval_ms / 1000,
            stream_timeout_s=0.5,
            keep_stored=True,
            isolation="read_committed",
            commit_filter=self.tracker.safe_positions,
            on_out_of_range=gaps.resolve,
            before_release=self._before_release,
            security=spec.security,
        )
        self.metadata = Client(zookeeper=spec.zookeeper, security=spec.security)
        self._partition_counts: dict[str, int] = {}
        self._threads: list[threading.Thread] = []

    def _before_release(self, partitions: list[TopicPartition]) -> None:
        # KAFKA-4521: what was handed out must be acknowledged before its offsets are committed and
        # the partitions go to another mirror; a target that cannot take it fails the mirror.
        self.writer.flush(self.config.shutdown_timeout_ms / 1000)

    def start(self) -> None:
        streams = self.consumer.create_message_streams_by_filter(**_filters(self.config), streams=self.config.streams)
        for i, stream in enumerate(streams):
            thread = threading.Thread(target=self._pump, args=(stream,), name=f"mirror-{self.name}-{i}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def _pump(self, stream: Stream) -> None:
        try:
            while not self._stopping.is_set() and not self.consumer.closed:
                for chunk in stream.chunks():
                    count = self._partition_counts.get(chunk.topic)
                    if count is None:  # a topic's partition count does not change: ask once
                        count = self._partition_counts[chunk.topic] = len(self.metadata.topic(chunk.topic).leaders)
                    self.writer.send(chunk, count, self.tracker)
                    if self._stopping.is_set():
                        return
        except BaseException as exc:
            self.failure = exc

    def stop_fetching(self) -> None:
        self._stopping.set()
        for thread in self._threads:
            thread.join(10)

    def close(self) -> None:
        try:
            self.consumer.close()
        finally:
            self.metadata.close()

    def lag(self) -> dict[TopicPartition, int]:
        positions = dict(self.consumer._positions)
        return {tp: max(0, self.consumer.high_watermarks.get(tp, pos) - pos) for tp, pos in positions.items()}


class AssignedSource:
    """A source cluster without ZooKeeper: this mirror reads every matching partition and commits
    through the source brokers."""

    def __init__(self, spec: ClusterSpec, config: MirrorConfig, writer: TargetWriter, gaps: GapPolicy) -> None:
        self.name = spec.name
        self.config = config
        self.writer = writer
        self.gaps = gaps
        self.tracker = AckTracker()
        self.failure: BaseException | None = None
        self.consumer = SimpleConsumer(
            **spec.client_args, max_bytes=1024 * 1024, max_wait_ms=200, isolation="read_committed"
        )
        self.offsets = OffsetsClient(client=self.consumer.client)
        self.positions: dict[TopicPartition, int] = {}
        self.high_watermarks: dict[TopicPartition, int] = {}
        self.partition_counts: dict[str, int] = {}
        self._committed: dict[TopicPartition, int] = {}
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"mirror-{self.name}", daemon=True)

    def start(self) -> None:
        self._discover()
        self._thread.start()

    def _discover(self) -> None:
        """Take the partitions of matching topics not taken yet, from their committed offsets."""
        topics = self.consumer.client.refresh_metadata()
        fresh: list[TopicPartition] = []
        for topic, metadata in sorted(topics.items()):
            if not self.config.wants(topic):
                continue
            self.partition_counts[topic] = len(metadata.leaders)
            fresh += [(topic, p) for p in sorted(metadata.leaders) if (topic, p) not in self.positions]
        if not fresh:
            return
        committed = self.offsets.fetch(self.config.group, fresh)
        for tp in fresh:
            earliest, latest = self.consumer.earliest_offset(*tp), self.consumer.latest_offset(*tp)
            start = committed[tp]
            if start is None:
                start = earliest if self.config.start_from == "earliest" else latest
            self.positions[tp] = self.gaps.resolve(tp, start, earliest, latest)
            log.info("%s: mirroring %s-%d from offset %d", self.name, tp[0], tp[1], self.positions[tp])

    def _run(self) -> None:
        try:
            next_discovery = time.monotonic() + self.config.refresh_topics_ms / 1000
            next_commit = time.monotonic() + self.config.commit_interval_ms / 1000
            while not self._stopping.is_set():
                now = time.monotonic()
                if now >= next_discovery:
                    self._discover()
                    next_discovery = now + self.config.refresh_topics_ms / 1000
                if now >= next_commit:
                    self.commit()
                    next_commit = now + self.config.commit_interval_ms / 1000
                if not self.positions:
                    self._stopping.wait(0.2)
                    continue
                self._fetch_once()
        except BaseException as exc:
            self.failure = exc

    def _fetch_once(self) -> None:
        try:
            results = self.consumer.fetch_many(dict(self.positions), stored=True)
        except OffsetOutOfRangeError:
            for tp, offset in list(self.positions.items()):  # which one? ask every partition its range
                earliest, latest = self.consumer.earliest_offset(*tp), self.consumer.latest_offset(*tp)
                self.positions[tp] = self.gaps.resolve(tp, offset, earliest, latest)
            return
        for tp, result in results.items():
            self.high_watermarks[tp] = result.high_watermark
            if result.last_offset < 0:
                continue
            if self._stopping.is_set():
                return
            start = self.positions[tp]
            chunk = Chunk(
                tp[0], tp[1], start, result.next_offset(start), result.messages, result.record_set, result.codec
            )
            self.writer.send(chunk, self.partition_counts[tp[0]], self.tracker)
            self.positions[tp] = chunk.next_offset

    def commit(self) -> None:
        safe = self.tracker.safe_positions(dict(self.positions))
        changed = {tp: offset for tp, offset in safe.items() if self._committed.get(tp) != offset}
        if changed:
            self.offsets.commit(self.config.group, changed, metadata="kafkalog mirror")
            self._committed.update(changed)

    def stop_fetching(self) -> None:
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(30)

    def close(self) -> None:
        try:
            self.commit()
        finally:
            self.consumer.close()

    def lag(self) -> dict[TopicPartition, int]:
        return {tp: max(0, self.high_watermarks.get(tp, pos) - pos) for tp, pos in dict(self.positions).items()}


class Mirror:
    """Runs the sources into the target until ``stop`` is set (graceful) or something fails."""

    def __init__(self, config: MirrorConfig, status: Callable[[str], None] | None = None) -> None:
        self.config = config
        self.status = status
        try:
            self.writer = TargetWriter(config)
        except KafkalogError as exc:  # e.g. the target's ZooKeeper is unreachable
            raise MirrorError(f"target {config.target}: {exc}") from exc
        self.sources: list[Source] = []
        self._previous: dict[tuple[str, str], tuple[int, float]] = {}
        gap_file = config.gap_file or None
        for spec in config.sources:
            gaps = GapPolicy(spec.name, config.on_gap, gap_file)
            kind = GroupSource if spec.zookeeper is not None else AssignedSource
            try:
                self.sources.append(kind(spec, config, self.writer, gaps))
            except MirrorError:
                raise
            except KafkalogError as exc:
                raise MirrorError(f"source {spec}: {exc}") from exc

    def failure(self) -> str | None:
        for source in self.sources:
            if source.tracker.failure is not None:
                return f"target {self.config.target} refused a message from {source.name}, {source.tracker.failure}"
            if isinstance(source.failure, MirrorError):
                return str(source.failure)
            if source.failure is not None:
                return f"source {source.name}: {source.failure}"
            consumer = getattr(source, "consumer", None)
            if isinstance(consumer, GroupConsumer) and consumer.failure is not None:
                return f"source {source.name}: {consumer.failure}"
        return None

    def run(self, stop: threading.Event) -> None:
        """Mirror until ``stop``; raises MirrorError (after committing what is safe) on a failure."""
        started = time.monotonic()
        for source in self.sources:
            try:
                source.start()
            except MirrorError:
                raise
            except KafkalogError as exc:  # e.g. none of its brokers answers
                raise MirrorError(f"source {source.name}: {exc}") from exc
        last_status = time.monotonic()
        last_sent = 0
        failure = None
        while not stop.wait(0.2):
            failure = self.failure()
            if failure is not None:
                break
            interval = self.config.status_interval_ms / 1000
            if interval and time.monotonic() - last_status >= interval:
                now = time.monotonic()
                if self.status is not None:
                    self.status(self._status_line(self.writer.sent - last_sent, now - last_status))
                self._write_metrics(now)
                last_status, last_sent = now, self.writer.sent
        self._shutdown(failure)
        self._write_metrics(time.monotonic(), final=True, failure=failure)
        if self.status is not None:
            elapsed = time.monotonic() - started
            acked = sum(source.tracker.acked for source in self.sources)
            self.status(stopped_line(acked, elapsed))
        if failure is not None:
            raise MirrorError(failure)

    def _status_line(self, sent: int, seconds: float) -> str:
        lags = {(s.name, *tp): lag for s in self.sources for tp, lag in s.lag().items()}
        in_flight = sum(s.tracker.in_flight() for s in self.sources)
        return status_line(self.writer.sent, sent / max(seconds, 1e-9), in_flight, sum(lags.values()), len(lags))

    def _shutdown(self, failure: str | None) -> None:
        timeout = self.config.shutdown_timeout_ms / 1000
        for source in self.sources:
            source.stop_fetching()
        try:
            self.writer.flush(timeout if failure is None else min(timeout, 10.0))
        except KafkalogError as exc:
            log.warning("not everything in flight was acknowledged: %s", exc)
        for source in self.sources:
            try:
                source.close()  # commits only what the target acknowledged
            except Exception as exc:
                log.warning("source %s did not close cleanly: %s", source.name, exc)
        try:
            self.writer.close(10.0)
        except KafkalogError as exc:
            log.warning("the target producer did not close cleanly: %s", exc)

    def metrics(self, now: float) -> dict[str, Any]:
        """Per source and partition: lag (source end - next offset), the acknowledged position (what
        a commit stores) and its rate since the previous call."""
        sources: dict[str, Any] = {}
        for source in self.sources:
            partitions = {}
            for (topic, partition), lag in sorted(source.lag().items()):
                acked = source.tracker.safe((topic, partition))
                key = f"{topic}-{partition}"
                before = self._previous.get((source.name, key))
                rate = None
                if acked is not None and before is not None and now > before[1]:
                    rate = round((acked - before[0]) / (now - before[1]), 1)
                if acked is not None:
                    self._previous[(source.name, key)] = (acked, now)
                partitions[key] = {"lag": lag, "acknowledged_position": acked, "rate_per_s": rate}
            sources[source.name] = {
                "partitions": partitions,
                "in_flight": source.tracker.in_flight(),
                "gaps": source.gaps.gaps,
                "lost_messages": source.gaps.lost_messages,
            }
        return {
            "acknowledged": sum(s.tracker.acked for s in self.sources),
            "lag": sum(p["lag"] for s in sources.values() for p in s["partitions"].values()),
            "sources": sources,
        }

    def _write_metrics(self, now: float, *, final: bool = False, failure: str | None = None) -> None:
        path = self.config.metrics_file
        if path is None:
            return
        document = {**self.metrics(now), "stopped": final, "failure": failure, "written_at_ms": int(time.time() * 1000)}
        temporary = path.with_name(f".{path.name}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary.write_text(json.dumps(document, indent=1), encoding="utf-8")
            temporary.replace(path)  # readers see the old file or the new, never half of one
        except OSError as exc:
            log.warning("cannot write the metrics file %s: %s", path, exc)

    def lag(self) -> dict[tuple[str, str, int], int]:
        return {(s.name, *tp): lag for s in self.sources for tp, lag in s.lag().items()}
