"""The exactly-once core without processes: an in-memory cluster and the load's tasks run in-process.

Role: the unit tier's stand-ins for the two things a load needs from outside, so that the driver's
whole commit protocol (pipelines.ingest: plan, state, reconcile, commit, publish, and the replay's
planning) runs for real in milliseconds against local storage:

- ``MemoryCluster``: topics of messages held in lists, answering what the driver and a task ask a
  SimpleConsumer (metadata, earliest/latest offsets, fetch), with retention (``delete_before``),
  offsets a read-committed consumer skips (``append_skipped``: aborted records, markers), and
  records a log cleaner removed (``compact``: the offsets stay, nothing is there);
- ``InProcessStager``: the load stage without Spark, running the very code a Spark task runs
  (pipelines.executor.source.SplitTask and write_split) for each split in turn, then reading the
  staged files back as the Spark stager does (pipelines.ingest.stage.staged_from_reports).

The end-to-end tests keep proving the same protocol with real brokers and Spark; these prove each of
its steps and crash points in isolation.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from kafkalog.client.committed import Skipped
from kafkalog.errors import BrokerResponseError, OffsetOutOfRangeError
from kafkalog.record import Message
from kafkalog.record.message import TimestampType
from pipelines import faults
from pipelines.config.pipeline import PipelineSpec
from pipelines.executor.source import SplitTask, write_split
from pipelines.ingest.stage import Staged, staged_from_reports
from pipelines.ledger.records import Plan
from pipelines.schemas.resolved import RunSchemas
from pipelines.storage.local import local_path


@dataclass
class MemoryCluster:
    """Topics → partitions → messages (offset = index + the partition's log start)."""

    partitions: dict[tuple[str, int], list[Message]] = field(default_factory=dict)
    log_start: dict[tuple[str, int], int] = field(default_factory=dict)
    fetch_size: int = 7
    """Messages per fetch: small, so that a split takes several fetches as on a real broker."""
    last_stable: dict[tuple[str, int], int] = field(default_factory=dict)
    """A partition's last stable offset where a transaction is open (else its log end)."""
    skipped: dict[tuple[str, int, int], str] = field(default_factory=dict)
    """(topic, partition, offset) → why a read-committed consumer leaves it out (aborted | control)."""
    removed: set[tuple[str, int, int]] = field(default_factory=set)
    """(topic, partition, offset) of records the log cleaner removed (a compacted topic)."""
    policies: dict[str, str] = field(default_factory=dict)
    """A topic's cleanup.policy (``compact`` once ``compact`` removed records of it; else none known;
    ``not authorized``: DescribeConfigs refused)."""

    def create(self, topic: str, partitions: int) -> None:
        for partition in range(partitions):
            self.partitions.setdefault((topic, partition), [])
            self.log_start.setdefault((topic, partition), 0)

    def append(self, topic: str, partition: int, values: Iterable[bytes], *, timestamp_ms: int) -> None:
        log = self.partitions[(topic, partition)]
        for value in values:
            offset = self.log_start[(topic, partition)] + len(log)
            key = f"{topic}-{partition}-{offset}".encode()
            log.append(Message(offset, timestamp_ms, TimestampType.CREATE_TIME, key, value))

    def append_skipped(self, topic: str, partition: int, count: int, reason: str) -> None:
        """``count`` offsets a read-committed fetch leaves out: records of an aborted transaction
        (``aborted``) or markers (``control``)."""
        log = self.partitions[(topic, partition)]
        for _ in range(count):
            offset = self.log_start[(topic, partition)] + len(log)
            self.skipped[(topic, partition, offset)] = reason
            log.append(Message(offset, -1, TimestampType.CREATE_TIME, None, b"\x00\x00\x00\x01"))

    def compact(self, topic: str, partition: int, offsets: Iterable[int]) -> None:
        """The log cleaner removed the records at ``offsets``. A fetch still reads up to the end of
        its window (``last_offset``), as a batch the cleaner thinned or emptied keeps its last offset."""
        self.removed.update((topic, partition, offset) for offset in offsets)
        self.policies.setdefault(topic, "compact")

    def delete_before(self, topic: str, partition: int, offset: int) -> None:
        """Retention: the messages before ``offset`` are gone."""
        start = self.log_start[(topic, partition)]
        del self.partitions[(topic, partition)][: offset - start]
        self.log_start[(topic, partition)] = offset

    def consumer(self) -> MemoryConsumer:
        return MemoryConsumer(self)


class MemoryConsumer:
    """What pipelines ask of a SimpleConsumer, answered from a MemoryCluster."""

    def __init__(self, cluster: MemoryCluster) -> None:
        self.cluster = cluster
        self.client = SimpleNamespace(
            refresh_metadata=self._metadata, topic=self._topic, invalidate=lambda topic: None, any_broker=lambda: None
        )

    def __enter__(self) -> MemoryConsumer:
        return self

    def topic_configs(self, topic: str, keys: Iterable[str] | None = None) -> dict[str, str | None] | None:
        policy = self.cluster.policies.get(topic)
        if policy == "not authorized":  # a principal without the DescribeConfigs ACL
            raise BrokerResponseError(29, "TOPIC_AUTHORIZATION_FAILED", f"topic {topic!r}'s configs")
        return None if policy is None else {"cleanup.policy": policy}

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        pass

    def _metadata(self, topics: Iterable[str] | None = None) -> dict[str, object]:
        known = {t for t, _ in self.cluster.partitions}
        return {t: object() for t in known if topics is None or t in topics}

    def _topic(self, topic: str) -> Any:
        return SimpleNamespace(leaders={p: 1 for t, p in self.cluster.partitions if t == topic})

    def earliest_offset(self, topic: str, partition: int) -> int:
        return self.cluster.log_start[(topic, partition)]

    def latest_offset(self, topic: str, partition: int) -> int:
        """The last stable offset (what a read-committed consumer reads up to)."""
        return self.cluster.last_stable.get((topic, partition), self._log_end(topic, partition))

    def _log_end(self, topic: str, partition: int) -> int:
        return self.cluster.log_start[(topic, partition)] + len(self.cluster.partitions[(topic, partition)])

    def earliest_offsets(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        return {(t, p): self.earliest_offset(t, p) for t, p in partitions}

    def latest_offsets(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        return {(t, p): self.latest_offset(t, p) for t, p in partitions}

    def log_end_offsets(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        return {(t, p): self._log_end(t, p) for t, p in partitions}

    def fetch(self, topic: str, partition: int, offset: int) -> Any:
        start, end = self.earliest_offset(topic, partition), self._log_end(topic, partition)
        if not start <= offset <= end:
            raise OffsetOutOfRangeError(offset, start, end, where=f"{topic}-{partition}")
        log = self.cluster.partitions[(topic, partition)]
        first = offset - start
        stable = self.latest_offset(topic, partition)  # nothing past it is read
        window = log[first : max(first, min(first + self.cluster.fetch_size, stable - start))]
        reasons = [self.cluster.skipped.get((topic, partition, m.offset)) for m in window]
        skipped: list[Skipped] = []
        for message, reason in zip(window, reasons, strict=True):
            if reason is None:
                continue
            if skipped and skipped[-1].reason == reason and skipped[-1].last == message.offset - 1:
                skipped[-1] = skipped[-1]._replace(last=message.offset)
            else:
                skipped.append(Skipped(message.offset, message.offset, reason))  # type: ignore[arg-type]
        removed = self.cluster.removed
        messages = [
            m
            for m, reason in zip(window, reasons, strict=True)
            if reason is None and (topic, partition, m.offset) not in removed
        ]
        return SimpleNamespace(
            messages=messages,
            high_watermark=end,
            last_stable_offset=stable,
            skipped=tuple(skipped),
            last_offset=window[-1].offset if window else -1,
        )


class InProcessStager:
    """The load stage without Spark (see the module doc). ``during``: called once every split is
    staged and before the staged files are read back (a second run can be run there, to overlap)."""

    def __init__(
        self, spec: PipelineSpec, cluster: MemoryCluster, *, during: Callable[[str], None] | None = None
    ) -> None:
        self.spec = spec
        self.cluster = cluster
        self.during = during

    def stage(self, plan: Plan, staging: str, progress_dir: str, schemas: RunSchemas | None = None) -> Staged:
        reported: list[Any] = []
        spec = self.spec
        for index, split in enumerate(s for s in plan.splits if s.size > 0):
            task = SplitTask(
                spec.source,
                spec.decoder,
                spec.event_time,
                spec.bad_records,
                split,
                consumer=self.cluster.consumer,
                schemas=schemas,
            )
            batch = write_split(task, local_path(staging), spec.raw.compression, index)
            reported.extend(batch.to_pylist())
        if self.during is not None:
            self.during(staging)
        faults.crash_point("load.after_staging")
        return staged_from_reports(plan, staging, reported)


def events(count: int, *, start: int = 0, bad_every: int = 0) -> list[bytes]:
    """JSON events of the harness's schema; every ``bad_every``-th one is not JSON."""
    out = []
    for i in range(start, start + count):
        if bad_every and i % bad_every == bad_every - 1:
            out.append(b"{not json")
            continue
        out.append(
            json.dumps(
                {"user_id": i, "event": "click", "amount": i / 10, "ts": f"2026-11-21T{8 + i % 3:02d}:{i % 60:02d}:00Z"}
            ).encode()
        )
    return out
