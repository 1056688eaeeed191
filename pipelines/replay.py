"""Rewind and replay: reload a pipeline's splits from a point and swap in a new generation.

Role: the seeds' reason for consumer-kept offsets ("rewind to an earlier offset and consume the
data again"; "reload the data from a point in time"). An operator names a target (a time, an
offset per split, or an earlier run); per split it becomes the offset to reload from, up to the
committed end (new messages after it are left to the next scheduled run).

A replay never changes what readers see until its one commit:

1. plan: the reload ranges, stored as run #N+1 (kind ``replay``) before anything is written, so a
   scheduled load cannot interleave (it stops with exit 3) and a replay that died is finished by
   running it again (the same stored plan), or dropped with ``--abandon``.
2. raw: generation g+1 is built beside generation g: files wholly before the rewind offsets are
   linked (or copied), files that straddle one are rewritten without the rows at or after it,
   and the ranges are loaded again from the brokers (reconciled as every load is).
3. outputs: every transform runs over the affected time partitions of the new raw generation,
   every output is validated, and each output's generation g+1 gets the recomputed partitions
   and a copy of the partitions the replay did not touch.
4. commit: manifest #N+1 (kind ``replay``, generation g+1) is created if absent: the one atomic
   step that switches the raw layer and every output to generation g+1 at once. Readers that
   resolve the current generation (``pipelines location``) see generation g, whole, or g+1,
   whole; never a mix and no row twice. Generation g stays on disk until ``pipelines gc``.

Retention: a rewind offset the broker no longer holds follows ``on_offset_out_of_range``: ``fail``
stops the replay naming the split and offsets; ``earliest`` keeps the rows the raw layer already
holds for the deleted part and reloads from the earliest offset still on the broker; ``latest``
does not replay that split (its rows stay as they are). Nothing is ever dropped without a reload.
"""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kafkalog.client import SimpleConsumer
from kafkalog.errors import KafkalogError, UnsupportedByBrokerError
from pipelines import faults
from pipelines.errors import PipelineError
from pipelines.flow import Partition, Scope, partition_of, partition_path, published_marker
from pipelines.plan import Plan, Split, SplitKey, discover_splits, open_consumer
from pipelines.progress import Reporter
from pipelines.spec import PipelineSpec
from pipelines.state import Manifest, OutputFile, PipelineState, generation_dir, generation_prefix
from pipelines.storage import Storage, storage_for

NOT_REPLAYED = 1 << 62
"""The rewind offset of a split that is not replayed: every row it has is kept."""


class ReplayError(PipelineError):
    """A replay cannot be planned or carried out (the message names the split or stage and why)."""


# ---------------------------------------------------------------------- targets


@dataclass(frozen=True, slots=True)
class RewindTarget:
    """Where to rewind to: exactly one of a time (ms since the epoch), offsets per split, a run."""

    time_ms: int | None = None
    offsets: Mapping[SplitKey, int] | None = None
    run_id: str | None = None

    def __post_init__(self) -> None:
        given = sum(x is not None for x in (self.time_ms, self.offsets, self.run_id))
        if given != 1:
            raise ReplayError("give exactly one rewind target: a time, an offsets file or a run id")

    def describe(self) -> str:
        if self.time_ms is not None:
            return "time " + datetime.fromtimestamp(self.time_ms / 1000, UTC).isoformat(timespec="milliseconds")
        if self.run_id is not None:
            return f"run {self.run_id}"
        assert self.offsets is not None
        return "offsets " + ", ".join(f"{t}-{p}@{o}" for (t, p), o in sorted(self.offsets.items()))


def parse_time(text: str) -> int:
    """Milliseconds since the epoch from ISO 8601 (a time without an offset is UTC) or an integer
    of milliseconds."""
    value = text.strip()
    if value.lstrip("-").isdigit():
        return int(value)
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ReplayError(f"rewind time {text!r} is neither ISO 8601 nor milliseconds since the epoch") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def load_offsets(path: str) -> dict[SplitKey, int]:
    """A rewind offsets file: JSON, ``{"topic:partition": offset, ...}`` or
    ``[{"topic": t, "partition": p, "offset": o}, ...]`` (what ``pipelines offsets --json`` prints)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ReplayError(f"{path}: cannot read the rewind offsets: {exc}") from exc
    out: dict[SplitKey, int] = {}
    try:
        if isinstance(data, dict):
            for name, offset in data.items():
                topic, sep, partition = name.rpartition(":")
                if not sep or not topic:
                    raise ValueError(f"key {name!r} is not topic:partition")
                out[(topic, int(partition))] = _offset(offset)
        elif isinstance(data, list):
            for item in data:
                out[(str(item["topic"]), int(item["partition"]))] = _offset(item["offset"])
        else:
            raise TypeError("expected an object or a list")
    except (KeyError, TypeError, ValueError) as exc:
        raise ReplayError(f"{path}: not a rewind offsets file: {exc}") from exc
    if not out:
        raise ReplayError(f"{path}: names no split")
    return out


def _offset(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"offset {value!r} is not a non-negative integer")
    return value


# ---------------------------------------------------------------------- the plan


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


# ---------------------------------------------------------------------- carrying it out


class Replay:
    """Plans and carries out replays of one pipeline (see the module doc); ``spark`` is needed only
    to carry one out."""

    def __init__(self, spec: PipelineSpec, spark: Any = None, *, reporter: Reporter | None = None) -> None:
        self.spec = spec
        self.spark = spark
        self.reporter = reporter or Reporter(quiet=True)
        self.root = spec.raw.path.rstrip("/")
        if spark is not None:
            from pipelines.load import driver_storage  # noqa: PLC0415 - Spark-side imports only when running

            self.storage: Storage = driver_storage(spark, self.root)
        else:
            self.storage = storage_for(self.root, webhdfs_url=spec.raw.webhdfs_url)
        self.state = PipelineState(self.storage, self.root)

    def plan(self, target: RewindTarget) -> ReplayPlan:
        self.state.recover()
        with open_consumer(self.spec.source) as consumer:
            return plan_replay(self.spec, self.state, consumer, target)

    def abandon(self) -> str:
        """Drop a stored replay that did not commit, with everything it wrote."""
        pending = self.state.pending_plan()
        if pending is None or pending.kind != "replay":
            raise ReplayError(f"pipeline {self.spec.name}: no replay is in progress")
        self._clear_generation(pending.generation)
        self.state.discard_plan(pending.seq)
        return f"dropped the replay to {pending.target} (run #{pending.seq}); generation {pending.generation - 1} stays"

    def run(self, target: RewindTarget) -> Manifest:
        """Carry the replay out (or finish the one stored); returns its committed manifest."""
        if self.spark is None:
            raise ReplayError("carrying a replay out needs a Spark session")
        plan = self.plan(target)
        if plan.failing:
            first = plan.failing[0]
            raise ReplayError(f"{first.name}: {first.note} (nothing was changed; see the plan with --dry-run)")
        stored = self.state.pending_plan()
        if plan.total == 0 and stored is None:
            latest = self.state.latest()
            assert latest is not None  # plan() refuses a pipeline that never loaded
            self.reporter.note(f"nothing to replay for {plan.target}: every split is kept as it is")
            return latest
        if stored is not None and stored.kind != "replay":
            raise ReplayError(
                f"pipeline {self.spec.name}: run {stored.run_id} (#{stored.seq}) was planned and not committed; "
                "run the pipeline once (it completes that run) before rewinding"
            )
        load_plan = self._load_plan(plan)
        if stored is not None:
            if [(s.key, s.start, s.end) for s in stored.splits] != [(s.key, s.start, s.end) for s in load_plan.splits]:
                raise ReplayError(
                    f"a replay to {stored.target} (run #{stored.seq}, planned {stored.created_at}) did not finish and "
                    f"reloads other ranges than {plan.target}: run it again with its own target to finish it, or "
                    "drop it with --abandon"
                )
            self.reporter.note(f"finishing the replay to {stored.target} planned {stored.created_at}")
            load_plan = stored
        else:
            self._catch_up_flow(plan.base_seq)
            self.state.store_plan(load_plan)
        faults.crash_point("replay.after_plan")
        self._clear_generation(load_plan.generation)
        manifest = self._build(plan, load_plan)
        faults.crash_point("replay.before_commit")
        self.state.commit(manifest)
        self.state.roll_forward(manifest)  # nothing to move: it records the run id
        for output in self.spec.outputs:
            record = json.dumps({"target": manifest.seq, "replay": True}).encode()
            marker = published_marker(self.root, manifest.seq, output.name)
            if not self.storage.exists(marker):
                self.storage.write_new(marker, record)
        self.reporter.note(
            f"replay committed as run #{manifest.seq}: generation {manifest.generation} is current "
            f"(raw layer at {generation_dir(self.root, manifest.generation)}); generation "
            f"{manifest.generation - 1} stays until `pipelines gc`"
        )
        return manifest

    def _load_plan(self, plan: ReplayPlan) -> Plan:
        splits = tuple(Split(s.topic, s.partition, s.leader, s.start, s.end) for s in plan.splits if s.messages)
        return Plan(
            self.spec.name, plan.seq, f"replay-{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}",
            datetime.now(UTC).isoformat(), self.spec.fingerprint(), splits,
            kind="replay", generation=plan.generation, target=plan.target,
        )  # fmt: skip

    def _catch_up_flow(self, seq: int) -> None:
        """The outputs' current generation must hold every committed load before it is copied."""
        if not self.spec.outputs:
            return
        from pipelines.flow import FlowRun  # noqa: PLC0415

        flow = FlowRun(self.spec, self.spark, reporter=self.reporter)
        if flow.covered(seq):
            self.reporter.note(f"publishing the outputs of run #{seq} first (the replay starts from them)")
            flow.run_all(seq)

    def _clear_generation(self, generation: int) -> None:
        """Remove what an earlier attempt of this replay wrote (it starts over)."""
        if generation == 0:
            raise ReplayError("generation 0 is never rebuilt")
        self.storage.delete(generation_dir(self.root, generation), recursive=True)
        for output in self.spec.outputs:
            storage = self._output_storage(output.path)
            storage.delete(generation_dir(output.path, generation), recursive=True)

    def _output_storage(self, path: str) -> Storage:
        if self.spark is not None:
            from pipelines.load import driver_storage  # noqa: PLC0415

            return driver_storage(self.spark, path)
        return storage_for(path, webhdfs_url=self.spec.webhdfs_url_for(path))

    # ------------------------------------------------------------------ building the new generation

    def _build(self, plan: ReplayPlan, load_plan: Plan) -> Manifest:
        rewind = {s.key: s.start for s in load_plan.splits}
        kept = self._keep_raw(rewind, load_plan.generation)
        reloaded = self._reload(load_plan)
        latest = self.state.latest()
        assert latest is not None
        new_files = reloaded.files if reloaded else ()
        files = tuple(kept) + new_files
        manifest = Manifest(
            pipeline=self.spec.name,
            seq=load_plan.seq,
            run_id=load_plan.run_id,
            committed_at=datetime.now(UTC).isoformat(),
            plan=load_plan,
            splits=reloaded.splits if reloaded else (),
            files=files,
            attempt=reloaded.attempt if reloaded else "none",
            offsets=dict(latest.offsets),
            stats={**(reloaded.stats if reloaded else {}), "kept_files": len(kept), "target": load_plan.target},
            kind="replay",
            generation=load_plan.generation,
            rewind={f"{t}:{p}": o for (t, p), o in rewind.items()},
        )
        if self.spec.outputs:
            # the replaced rows' partitions, and those of the reloaded rows (a changed decoder or
            # event time may put them elsewhere)
            touched = set(plan.raw_partitions)
            touched |= {p for p in (partition_of(f.path) for f in new_files if f.kind == "data") if p is not None}
            self._recompute_outputs(manifest, touched, latest.generation)
        return manifest

    def _keep_raw(self, rewind: Mapping[SplitKey, int], generation: int) -> list[OutputFile]:
        """Generation ``generation``'s raw files for the rows before each split's rewind offset."""
        import pyarrow.compute as pc  # noqa: PLC0415
        import pyarrow.parquet as pq  # noqa: PLC0415

        kept = []
        for manifest in self.state.generation_manifests():
            old_prefix = generation_prefix(manifest.generation)
            for item in manifest.files:
                limit = rewind.get((item.topic, item.partition), NOT_REPLAYED)
                if item.min_offset >= limit:
                    continue  # every row of it is reloaded
                relative = item.path[len(old_prefix) :] if item.path.startswith(old_prefix) else item.path
                new = f"{generation_prefix(generation)}{relative}"
                source, target = self.state.path(item.path), self.state.path(new)
                if item.max_offset < limit:
                    self.storage.copy(source, target)
                    kept.append(replace(item, staged=new, path=new))
                    continue
                table = pq.read_table(io.BytesIO(self.storage.read_bytes(source)))
                table = table.filter(pc.less(table["offset"], limit))
                buffer = io.BytesIO()
                pq.write_table(table, buffer, compression=self.spec.raw.compression)
                self.storage.write_new(target, buffer.getvalue())
                offsets = table["offset"]
                kept.append(
                    replace(
                        item, staged=new, path=new, rows=table.num_rows, bytes=buffer.tell(),
                        max_offset=int(pc.max(offsets).as_py()),
                    )
                )  # fmt: skip
        return kept

    def _reload(self, plan: Plan) -> Manifest | None:
        if not plan.splits:
            return None
        from pipelines.load import PipelineRun  # noqa: PLC0415

        run = PipelineRun(self.spec, self.spark, storage=self.storage, reporter=self.reporter)
        attempt = uuid.uuid4().hex[:8]
        staging = self.state.staging_dir(plan.seq, attempt)
        try:
            manifest = run.load_and_reconcile(plan, attempt, staging)
            for item in manifest.files:
                self.storage.rename_or_fail(self.state.path(item.staged), self.state.path(item.path))
        finally:
            self.storage.delete(staging, recursive=True)
        return replace(manifest, files=tuple(replace(f, staged=f.path) for f in manifest.files))

    def _recompute_outputs(self, manifest: Manifest, touched: set[Partition], current: int) -> None:
        from pipelines.flow import FlowRun  # noqa: PLC0415
        from pipelines.flowspec import topological_order  # noqa: PLC0415

        flow = FlowRun(self.spec, self.spark, reporter=self.reporter)
        by_day = any(o.partition_by == ("dt",) for o in self.spec.outputs)
        scope = Scope(manifest.seq, by_day, tuple(sorted({(p[0],) if by_day else p for p in touched})))
        for step in topological_order(self.spec.transforms):
            flow.compute_step(manifest.seq, step, scope, [manifest])
        for output in self.spec.outputs:
            flow.validate_output(manifest.seq, output)
            storage = self._output_storage(output.path)
            staged_root = flow.staged_root(manifest.seq, output)
            old, new = generation_dir(output.path, current), generation_dir(output.path, manifest.generation)
            for partition in sorted(flow.existing_partitions(storage, old, output)):
                if not scope.holds(partition):
                    relative = partition_path(output.partition_by, partition)
                    storage.copy_tree(f"{old}/{relative}", f"{new}/{relative}")
            recomputed = sorted(flow.existing_partitions(storage, staged_root, output))
            flow.check_partitions(output, recomputed, scope)
            for partition in recomputed:
                relative = partition_path(output.partition_by, partition)
                storage.rename_or_fail(f"{staged_root}/{relative}", f"{new}/{relative}")
            storage.delete(staged_root, recursive=True)
            self.reporter.note(
                f"output {output.name}: {len(recomputed)} partition(s) recomputed for the new generation"
            )


# ---------------------------------------------------------------------- generations: where and gc


def current_locations(spec: PipelineSpec, state: PipelineState) -> dict[str, str]:
    """Where readers find the current generation: ``raw`` and each output by name."""
    generation = state.current_generation()
    out = {"raw": generation_dir(spec.raw.path, generation)}
    out.update({o.name: generation_dir(o.path, generation) for o in spec.outputs})
    return out


def garbage(spec: PipelineSpec, state: PipelineState) -> list[str]:
    """The directories of generations older than the current one (what ``pipelines gc`` deletes)."""
    current = state.current_generation()
    if current == 0:
        return []
    pending = state.pending_plan()
    if pending is not None and pending.kind == "replay":
        raise ReplayError(f"a replay ({pending.target}) is in progress: finish or abandon it before gc")
    out = []
    for root, storage in [
        (spec.raw.path, state.storage),
        *((o.path, _tool_storage(spec, o.path)) for o in spec.outputs),
    ]:
        base = root.rstrip("/")
        for entry in storage.list(base):  # generation 0: the root's own partitions (and raw quarantine)
            if entry.is_dir and (
                entry.name.startswith("dt=") or (root == spec.raw.path and entry.name == "_quarantine")
            ):
                out.append(entry.path)
        for entry in storage.list(f"{base}/_generations"):
            if entry.is_dir and entry.name.isdigit() and int(entry.name) < current:
                out.append(entry.path)
    return out


def _tool_storage(spec: PipelineSpec, path: str) -> Storage:
    """An output's storage for the tools (no Spark): over WebHDFS on the raw layer's cluster."""
    return storage_for(path, webhdfs_url=spec.webhdfs_url_for(path))


def collect_garbage(spec: PipelineSpec, state: PipelineState) -> list[str]:
    removed = []
    for path in garbage(spec, state):
        storage = state.storage if path.startswith(spec.raw.path.rstrip("/")) else _tool_storage(spec, path)
        storage.delete(path, recursive=True)
        removed.append(path)
    return removed
