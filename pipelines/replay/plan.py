"""Planning a replay: per split the offset to reload from, the partitions it touches, what is kept.

Role: the replay's first stage, free of side effects (``pipelines rewind --dry-run`` prints it): a
RewindTarget becomes a ReplayPlan from the committed manifests and the brokers' offsets, with the
retention policy applied per split (see pipelines.replay.run for carrying it out).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from kafkalog.client import SimpleConsumer
from kafkalog.errors import KafkalogError, UnsupportedByBrokerError
from pipelines.config.pipeline import PipelineSpec
from pipelines.errors import PipelineError, ReplayError
from pipelines.executor.splits import SplitKey
from pipelines.ingest.plan import discover_splits
from pipelines.layout import Partition, partition_of
from pipelines.ledger.records import Manifest
from pipelines.ledger.state import PipelineState
from pipelines.replay.target import RewindTarget

NOT_REPLAYED = 1 << 62
"""The rewind offset of a split that is not replayed: every row it has is kept."""


@dataclass(frozen=True, slots=True)
class SplitRewind:
    """One split's part of a replay: it reloads [start, end); ``wanted`` is where the target
    pointed; ``action`` says what happens and ``note`` why."""

    topic: str
    partition: int
    leader: int
    wanted: int
    start: int
    end: int
    earliest: int
    action: str
    """reload | nothing (already at the end) | keep-deleted (earliest policy) | not-replayed (latest
    policy) | fail (fail policy: the replay does not run)"""
    note: str = ""

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def messages(self) -> int:
        return max(0, self.end - self.start) if self.start != NOT_REPLAYED else 0


@dataclass(frozen=True, slots=True)
class ReplayPlan:
    """What a replay will do (``--dry-run`` prints it)."""

    pipeline: str
    target: str
    base_seq: int
    seq: int
    generation: int
    splits: tuple[SplitRewind, ...]
    raw_partitions: tuple[Partition, ...]
    """(dt, hour) of the raw rows that will be replaced (from the committed files' offset ranges)."""
    outputs: dict[str, list[Partition]] = field(default_factory=dict)
    """Per output, the partitions that will be recomputed (at its granularity)."""

    @property
    def failing(self) -> list[SplitRewind]:
        return [s for s in self.splits if s.action == "fail"]

    @property
    def total(self) -> int:
        return sum(s.messages for s in self.splits)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "messages": self.total}


def plan_replay(spec: PipelineSpec, state: PipelineState, consumer: SimpleConsumer, target: RewindTarget) -> ReplayPlan:
    """Resolve ``target`` per split through the brokers and the committed manifests (no Spark)."""
    latest = state.latest()
    if latest is None:
        raise ReplayError(f"pipeline {spec.name}: nothing was loaded yet, so there is nothing to rewind")
    committed = latest.end_offsets()
    wanted = _wanted(spec, state, consumer, target, committed)
    try:
        leaders = discover_splits(spec, consumer)
    except PipelineError:
        leaders = {}
    splits = []
    for key, end in sorted(committed.items()):
        topic, partition = key
        asked = min(wanted.get(key, end), end)
        if asked >= end:
            splits.append(SplitRewind(topic, partition, leaders.get(key, -1), end, end, end, -1, "nothing"))
            continue
        try:
            earliest = consumer.earliest_offset(topic, partition)
        except KafkalogError as exc:
            raise ReplayError(f"cannot read the offsets of {topic}-{partition}: {exc}") from exc
        split = SplitRewind(topic, partition, leaders.get(key, -1), asked, asked, end, earliest, "reload")
        if asked < earliest:
            split = _deleted(spec, split, earliest)
        splits.append(split)
    rewind = {(s.topic, s.partition): s.start if s.messages else NOT_REPLAYED for s in splits}
    raw = _affected_partitions(state.generation_manifests(), rewind)
    by_day = any(o.partition_by == ("dt",) for o in spec.outputs)
    outputs = {
        o.name: sorted({(p[0],) if by_day or o.partition_by == ("dt",) else p for p in raw}) for o in spec.outputs
    }
    return ReplayPlan(
        spec.name, target.describe(), latest.seq, latest.seq + 1, latest.generation + 1, tuple(splits),
        tuple(sorted(raw)), outputs,
    )  # fmt: skip


def _deleted(spec: PipelineSpec, split: SplitRewind, earliest: int) -> SplitRewind:
    """A rewind offset that retention deleted: the pipeline's on_offset_out_of_range decides."""
    gone = f"offsets {split.wanted}..{earliest - 1} are no longer on the broker (earliest {earliest})"
    policy = spec.on_offset_out_of_range
    if policy == "fail":
        return replace(split, action="fail", note=f"{gone}; on_offset_out_of_range: fail stops the replay")
    if policy == "earliest":
        if earliest >= split.end:
            return replace(split, start=split.end, action="not-replayed", note=f"{gone}; nothing left to reload")
        return replace(
            split, start=earliest, action="keep-deleted", note=f"{gone}; their rows loaded before are kept as they are"
        )
    return replace(
        split, start=split.end, action="not-replayed", note=f"{gone}; on_offset_out_of_range: latest keeps its rows"
    )


def _wanted(
    spec: PipelineSpec,
    state: PipelineState,
    consumer: SimpleConsumer,
    target: RewindTarget,
    committed: Mapping[SplitKey, int],
) -> dict[SplitKey, int]:
    if target.offsets is not None:
        unknown = [k for k in target.offsets if k not in committed]
        if unknown:
            topic, partition = unknown[0]
            raise ReplayError(f"{topic}-{partition} was never loaded by pipeline {spec.name}: nothing to rewind there")
        ahead = [(k, o) for k, o in target.offsets.items() if o > committed[k]]
        if ahead:
            (topic, partition), offset = ahead[0]
            raise ReplayError(
                f"{topic}-{partition}: offset {offset} is past the committed offset {committed[(topic, partition)]}; "
                "a rewind goes back, the next run loads forward"
            )
        return dict(target.offsets)
    if target.run_id is not None:
        manifests = [state.manifest(seq) for seq in state.committed_seqs()]
        found = [m for m in manifests if m.run_id == target.run_id]
        if not found:
            raise ReplayError(f"pipeline {spec.name}: no committed run has id {target.run_id!r}")
        wanted: dict[SplitKey, int] = {}
        for manifest in manifests:
            if manifest.seq < found[0].seq or manifest.kind != "load":
                continue
            for split in manifest.plan.splits:
                if split.size > 0 and split.key not in wanted:
                    wanted[split.key] = split.start
        return wanted
    assert target.time_ms is not None
    out = {}
    for topic, partition in committed:
        try:
            found_offset = consumer.offset_for_timestamp(topic, partition, target.time_ms)
        except UnsupportedByBrokerError as exc:
            raise ReplayError(f"{exc}; rewind with --to-offsets instead") from exc
        except KafkalogError as exc:
            raise ReplayError(f"cannot look up the offset for the time in {topic}-{partition}: {exc}") from exc
        out[(topic, partition)] = found_offset[0] if found_offset is not None else committed[(topic, partition)]
    return out


def _affected_partitions(manifests: list[Manifest], rewind: Mapping[SplitKey, int]) -> set[Partition]:
    """(dt, hour) of every committed raw data file holding a row at or after its split's rewind."""
    out: set[Partition] = set()
    for manifest in manifests:
        for item in manifest.files:
            where = partition_of(item.path) if item.kind == "data" else None
            if where is not None and item.max_offset >= rewind.get((item.topic, item.partition), NOT_REPLAYED):
                out.add(where)
    return out


def render(plan: ReplayPlan, console: Any) -> None:
    """The plan on a rich console: per split from → to, what happens, and what is recomputed."""
    from rich.table import Table  # noqa: PLC0415 - only for printing

    table = Table(
        title=f"replay of {plan.pipeline} to {plan.target}: run #{plan.seq}, generation {plan.generation}",
        title_justify="left",
    )
    for column in ("split", "from", "to", "messages", "action", "note"):
        table.add_column(column, justify="right" if column in ("from", "to", "messages") else "left")
    for s in plan.splits:
        start = "-" if not s.messages else str(s.start)
        table.add_row(s.name, start, str(s.end), f"{s.messages:,}", s.action, s.note)
    console.print(table)
    console.print(
        f"{plan.total:,} messages to reload; raw partitions replaced: {_partitions(plan.raw_partitions)}",
        highlight=False,
    )
    for name, partitions in plan.outputs.items():
        console.print(f"output {name}: partitions recomputed: {_partitions(partitions)}", highlight=False)
    for s in plan.failing:
        console.print(f"[bold red]the replay will not run[/]: {s.name}: {s.note}", highlight=False)


def _partitions(partitions: list[Partition] | tuple[Partition, ...]) -> str:
    if not partitions:
        return "none"
    names = ["/".join(p) for p in partitions]
    return ", ".join(names[:12]) + (f" and {len(names) - 12} more" if len(names) > 12 else "")
