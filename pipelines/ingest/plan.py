"""Planning a run: one split per topic/partition, its [start, end) fixed before any task runs.

The splits (topics, partitions, their brokers) come from the brokers' metadata, or for a source
that names ZooKeeper from the registry there (``/brokers/topics``, ``/brokers/ids``). start comes
from the last committed manifest (offsets exist nowhere else); end is the log end offset at planning
time, capped by the pipeline's limits. The plan is stored before loading (pipelines.ledger.state), so a retried
task or a re-run after a crash reads exactly the same ranges (no clock- or size-dependent
boundaries). Offsets deleted by retention are handled here, by the pipeline's policy, and recorded.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from kafkalog.client import Client, SimpleConsumer, read_registry
from kafkalog.errors import KafkalogError
from pipelines.config.pipeline import PipelineSpec, Source
from pipelines.errors import ConcurrentRunError, DataLossError, PipelineError, PlanError
from pipelines.executor.splits import Split, SplitKey
from pipelines.ledger.records import Plan

log = logging.getLogger(__name__)


def new_run_id() -> str:
    """A sortable, unique run id: UTC time plus random hex."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6]


def task_brokers(source: Source, client: Client | None = None) -> list[str]:
    """``host:port`` of the brokers a run's tasks connect to: the bootstrap list, or for a ZooKeeper
    source the brokers registered now. The driver resolves them once per run and ships them to the
    tasks, so that tasks (many, on executors) open no ZooKeeper session of their own. ``client``: a
    client bootstrapped from that ZooKeeper, whose session is used for the read."""
    if source.zookeeper is None:
        return list(source.bootstrap or ())
    try:
        brokers = read_registry(source.zookeeper, topics=(), client=client).brokers
    except KafkalogError as exc:
        raise PlanError(f"cannot read the brokers registered in ZooKeeper at {source.zookeeper}: {exc}") from exc
    if not brokers:
        raise PlanError(f"no broker is registered in ZooKeeper at {source.zookeeper}")
    return list(brokers.values())


def discover_splits(spec: PipelineSpec, consumer: SimpleConsumer) -> dict[SplitKey, int]:
    """Every (topic, partition) the pipeline reads, with its leader's broker id."""
    if spec.source.zookeeper is not None:
        return _registered_splits(spec, spec.source.zookeeper, consumer.client)
    client = consumer.client
    cluster = spec.source.cluster
    try:
        if spec.topic_pattern is not None:
            pattern = re.compile(spec.topic_pattern)
            topics = sorted(t for t in client.refresh_metadata() if pattern.fullmatch(t))
            if not topics:
                raise PlanError(f"no topic on {cluster} matches {spec.topic_pattern!r}")
        else:
            known = client.refresh_metadata(spec.topics)
            missing = [t for t in spec.topics if t not in known]
            if missing:
                raise PlanError(f"topic {missing[0]!r} does not exist on {cluster}")
            topics = list(spec.topics)
        out: dict[SplitKey, int] = {}
        for topic in topics:
            for partition, leader in sorted(client.topic(topic).leaders.items()):
                out[(topic, partition)] = leader
    except KafkalogError as exc:
        raise PlanError(f"cannot read the topics of {cluster}: {exc}") from exc
    return out


def _registered_splits(spec: PipelineSpec, zookeeper: str, client: Client) -> dict[SplitKey, int]:
    """discover_splits for a source that names ZooKeeper: topics, partitions and the broker of each
    from the registry (a pattern matches the registered topics), read in one snapshot."""
    wanted = None if spec.topic_pattern is not None else spec.topics
    try:
        view = read_registry(zookeeper, topics=wanted, client=client)
    except KafkalogError as exc:
        raise PlanError(f"cannot read the topics registered in ZooKeeper at {zookeeper}: {exc}") from exc
    if not view.brokers:
        raise PlanError(f"no broker is registered in ZooKeeper at {zookeeper}")
    if spec.topic_pattern is not None:
        pattern = re.compile(spec.topic_pattern)
        topics = sorted(t for t in view.topics if pattern.fullmatch(t))
        if not topics:
            raise PlanError(f"no topic registered in ZooKeeper at {zookeeper} matches {spec.topic_pattern!r}")
    else:
        missing = [t for t in spec.topics if t not in view.topics]
        if missing:
            raise PlanError(f"topic {missing[0]!r} is not registered in ZooKeeper at {zookeeper}")
        topics = list(spec.topics)
    out: dict[SplitKey, int] = {}
    for topic in topics:
        for partition, broker in sorted(view.topics[topic].items()):
            if broker not in view.brokers:
                raise PlanError(
                    f"{topic}-{partition}: its broker {broker} is not registered in ZooKeeper at {zookeeper} "
                    f"(registered: {', '.join(map(str, view.brokers)) or 'none'}); the partition cannot be read "
                    "until that broker is back"
                )
            out[(topic, partition)] = broker
    return out


def make_plan(
    spec: PipelineSpec,
    consumer: SimpleConsumer,
    committed: Mapping[SplitKey, int],
    seq: int,
    run_id: str,
) -> Plan:
    """Plan the next run from ``committed`` (split → next offset to load)."""
    splits = []
    leaders = discover_splits(spec, consumer)
    committed_only = spec.source.isolation == "read_committed"
    try:  # one request per broker for each end (a pipeline of 10,000 splits plans in a fraction of a second)
        earliest = consumer.earliest_offsets(leaders)
        latest = consumer.latest_offsets(leaders)  # reading committed: the last stable offsets
        log_ends = consumer.log_end_offsets(leaders) if committed_only else latest
    except KafkalogError as exc:
        raise PlanError(f"cannot read the offsets of {spec.source.cluster}: {exc}") from exc
    for (topic, partition), leader in leaders.items():
        key = (topic, partition)
        split = plan_split(spec, topic, partition, leader, committed.get(key), earliest[key], latest[key])
        if committed_only:  # the lag includes what an open transaction holds back
            split = replace(split, log_end=max(log_ends[key], latest[key]), last_stable=latest[key])
        splits.append(_cap(spec, consumer, split))
    plan = Plan(spec.name, seq, run_id, datetime.now(UTC).isoformat(), spec.fingerprint(), tuple(splits))
    log.info(
        "pipeline %s: planned run %s (#%d): %d messages, %d splits", spec.name, run_id, seq, plan.total, len(splits)
    )
    return plan


def plan_split(
    spec: PipelineSpec, topic: str, partition: int, leader: int, committed: int | None, earliest: int, latest: int
) -> Split:
    """The uncapped split: from the committed offset (or the new-split policy) to the log end."""
    if committed is None:
        start = earliest if spec.new_split_start == "earliest" else latest
        return Split(topic, partition, leader, start, latest, log_end=latest)
    if committed > latest:
        raise PlanError(
            f"{topic}-{partition}: the committed offset {committed} is beyond the log end {latest}; the topic was "
            "recreated or its log truncated after the last run. Nothing was loaded; rewind the pipeline to an "
            "offset that exists to go on"
        )
    if committed < earliest:
        policy = spec.on_offset_out_of_range
        if policy == "fail":
            raise DataLossError(topic, partition, committed, earliest, latest)
        start = earliest if policy == "earliest" else latest
        return Split(topic, partition, leader, start, latest, lost_from=committed, lost_to=start, log_end=latest)
    return Split(topic, partition, leader, committed, latest, log_end=latest)


def _cap(spec: PipelineSpec, consumer: SimpleConsumer, split: Split) -> Split:
    end = split.end
    limits = spec.limits
    if limits.max_messages_per_split is not None:
        end = min(end, split.start + limits.max_messages_per_split)
    if limits.max_bytes_per_split is not None and split.size > 0:
        # bytes become messages through the average size of a sample at the start of the split; the
        # plan stores the result, so the cut is the same for every attempt
        try:
            sample = consumer.fetch(split.topic, split.partition, split.start).messages
        except KafkalogError as exc:
            raise PlanError(f"cannot sample {split.name} at offset {split.start}: {exc}") from exc
        if sample:
            average = sum(len(m.value or b"") + len(m.key or b"") + 34 for m in sample) / len(sample)
            end = min(end, split.start + max(1, int(limits.max_bytes_per_split / average)))
    return replace(split, end=end)


def check_still_valid(plan: Plan, spec: PipelineSpec, consumer: SimpleConsumer) -> list[Split]:
    """For a stored plan about to be (re-)executed: the splits whose start was deleted since (the
    caller applies the policy). A planned end beyond the log end (a truncated broker log) is an error."""
    gone = []
    for split in plan.splits:
        if split.size == 0:
            continue
        committed_only = spec.source.isolation == "read_committed"
        try:
            earliest = consumer.earliest_offset(split.topic, split.partition)
            latest = consumer.latest_offset(split.topic, split.partition)  # reading committed: the last stable
            log_end = (
                consumer.log_end_offsets([split.key])[split.key] if committed_only and split.end > latest else latest
            )
        except (KafkalogError, PipelineError) as exc:
            raise PlanError(f"cannot read the offsets of {split.name}: {exc}") from exc
        if split.end > latest:
            if split.end <= log_end:  # reading committed, the end is the last stable offset
                raise PlanError(
                    f"{split.name}: planned end offset {split.end} is past the last stable offset {latest} (the log "
                    f"end is {log_end}): a transaction is open there, or run {plan.run_id} was planned reading "
                    "uncommitted. Run again once the transaction ended, or with --replan to plan anew"
                )
            raise PlanError(
                f"{split.name}: planned end offset {split.end} > log end {latest}; the broker lost messages "
                f"after run {plan.run_id} was planned. Run again with --replan to plan from the committed offsets"
            )
        if split.start < earliest:
            gone.append(split)
    return gone


@dataclass(frozen=True, slots=True)
class Planned:
    """What one run executes, in this order: the stored plan it finishes first, then its own."""

    pending: Plan | None
    """The stored, uncommitted plan, executed as it was planned (None: there is none to finish)."""
    new: Plan | None
    """This run's own plan (None: the run only finishes ``pending``, which is the run it was asked for)."""
    discarded: int | None = None
    """The seq of a stored plan not to execute (--replan, or its start offsets were deleted under a
    skip policy): the caller deletes it before storing ``new``."""
    notes: tuple[str, ...] = ()
    """What the run should tell its user about these choices."""


def plan_run(
    spec: PipelineSpec,
    consumer: SimpleConsumer,
    *,
    committed: Mapping[SplitKey, int],
    next_seq: int,
    stored: Plan | None,
    run_id: str | None,
    replan: bool = False,
) -> Planned:
    """The planning stage of a run: whether the stored plan (``stored``, of seq ``next_seq``) is
    finished first, and this run's own plan, starting where the committed runs (``committed``) and
    the stored plan end. A replay's stored plan is the replay's to finish: ConcurrentRunError."""
    notes: list[str] = []
    pending: Plan | None = stored
    discarded: int | None = None
    if pending is not None and replan:
        notes.append(f"discarding the stored plan of run {pending.run_id} (#{pending.seq}): --replan")
        discarded, pending = pending.seq, None
    if pending is not None and pending.kind == "replay":
        raise ConcurrentRunError(
            f"pipeline {spec.name}: a replay ({pending.target or pending.run_id}, planned "
            f"{pending.created_at}) is in progress as run #{pending.seq}; this run stops without loading "
            "and the next one goes on from the committed offsets once the replay is done. If that replay "
            "died, run `pipelines rewind` again to finish it, or `pipelines rewind --abandon` to drop it"
        )
    gone = check_still_valid(pending, spec, consumer) if pending is not None else []
    if pending is not None and gone:
        if spec.on_offset_out_of_range == "fail":
            first = gone[0]
            earliest = consumer.earliest_offset(first.topic, first.partition)
            raise DataLossError(first.topic, first.partition, first.start, earliest, first.end)
        notes.append(f"the stored plan #{pending.seq} starts at deleted offsets; planning again")
        discarded, pending = pending.seq, None
    if pending is not None and run_id in (None, pending.run_id):
        return Planned(pending, None, discarded, tuple(notes))
    offsets = dict(committed)
    seq = next_seq
    if pending is not None:  # this run commits it first, exactly as planned
        offsets.update({(s.topic, s.partition): s.end for s in pending.splits})
        seq = pending.seq + 1
    new = make_plan(spec, consumer, offsets, seq, run_id or new_run_id())
    return Planned(pending, new, discarded, tuple(notes))
