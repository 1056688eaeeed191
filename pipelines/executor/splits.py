"""A split: one topic/partition and the offsets [start, end) a run loads from it.

Role: the one thing the driver hands its tasks. The driver plans splits (pipelines.ingest.plan) and
stores them with the plan; a task (pipelines.executor.source) reads exactly its split's range, through
a consumer opened here on the source's cluster. Frozen: a split never changes once planned.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kafkalog.client import SimpleConsumer
from kafkalog.topics import TopicPartition
from pipelines.config.pipeline import Source

SplitKey = TopicPartition
"""A split is keyed by its topic and partition."""


@dataclass(frozen=True, slots=True)
class Split:
    """One topic/partition and the offsets [start, end) this run loads from it."""

    topic: str
    partition: int
    leader: int
    """Broker id of the partition's leader when planned (the task asks the cluster again)."""
    start: int
    end: int
    lost_from: int | None = None
    """With a skip policy: the first offset that retention deleted before it was loaded..."""
    lost_to: int | None = None
    """...and the offset after the last one lost (== start)."""
    log_end: int | None = None
    """The partition's log end when planned: ``log_end - end`` is what a limit left for the next
    run (the lag the run report shows). None in plans stored before it was recorded."""
    last_stable: int | None = None
    """Reading committed: the partition's last stable offset when planned (where the split ends at
    the latest). ``log_end - last_stable`` > 0 is held back by a transaction still open. None when
    reading uncommitted, and in plans stored before it was recorded."""

    @property
    def key(self) -> SplitKey:
        return (self.topic, self.partition)

    @property
    def size(self) -> int:
        return self.end - self.start

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


def open_consumer(source: Source, brokers: Sequence[str] | None = None) -> SimpleConsumer:
    """A consumer on ``source``'s cluster: through ``brokers`` (``host:port``) when given, else
    through the bootstrap list or the ZooKeeper the source names."""
    if brokers:
        bootstrap: list[str] | None = list(brokers)
        zookeeper = None
    else:
        bootstrap = None if source.bootstrap is None else list(source.bootstrap)
        zookeeper = source.zookeeper
    return SimpleConsumer(
        bootstrap,
        zookeeper=zookeeper,
        broker_version=source.assumed_version,
        max_bytes=source.fetch_max_bytes,
        request_timeout_ms=source.request_timeout_ms,
        security=source.security,
        isolation=source.isolation,
    )
