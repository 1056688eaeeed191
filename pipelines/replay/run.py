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
import logging
import uuid
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from pipelines import faults
from pipelines.config.pipeline import PipelineSpec
from pipelines.errors import ReplayError
from pipelines.executor.splits import Split, SplitKey, open_consumer
from pipelines.layout import (
    Partition,
    Scope,
    generation_dir,
    generation_prefix,
    partition_of,
    partition_path,
)
from pipelines.ledger.partitions import existing_partitions
from pipelines.ledger.paths import published_marker
from pipelines.ledger.records import Manifest, OutputFile, Plan
from pipelines.ledger.state import PipelineState
from pipelines.progress import Reporter, counted
from pipelines.replay.plan import NOT_REPLAYED, ReplayPlan, plan_replay
from pipelines.replay.target import RewindTarget
from pipelines.storage import Storage, storage_for

log = logging.getLogger(__name__)


class Replay:
    """Plans and carries out replays of one pipeline (see the module doc); ``spark`` is needed only
    to carry one out."""

    def __init__(self, spec: PipelineSpec, spark: Any = None, *, reporter: Reporter | None = None) -> None:
        self.spec = spec
        self.spark = spark
        self.reporter = reporter or Reporter(quiet=True)
        self.root = spec.raw.path.rstrip("/")
        self.state = PipelineState.for_spec(spec, spark)
        self.storage: Storage = self.state.storage

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
        load_plan = self._load_plan(plan, target.schemas)
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
        log.info("pipeline %s: replay to %s stored as run #%d", self.spec.name, plan.target, load_plan.seq)
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

    def _load_plan(self, plan: ReplayPlan, schemas: str) -> Plan:
        splits = tuple(Split(s.topic, s.partition, s.leader, s.start, s.end) for s in plan.splits if s.messages)
        return Plan(
            self.spec.name, plan.seq, f"replay-{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}",
            datetime.now(UTC).isoformat(), self.spec.fingerprint(), splits,
            kind="replay", generation=plan.generation, target=plan.target, schemas=schemas,
        )  # fmt: skip

    def _catch_up_flow(self, seq: int) -> None:
        """The outputs' current generation must hold every committed load before it is copied."""
        if not self.spec.outputs:
            return
        from pipelines.flow.run import FlowRun  # noqa: PLC0415

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
        return storage_for(path, spark=self.spark, webhdfs_url=self.spec.webhdfs_url_for(path))

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
            schemas=reloaded.schemas if reloaded else latest.schemas,  # what the next run's columns evolve from
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
                original = pq.ParquetFile(io.BytesIO(self.storage.read_bytes(source)))
                table = original.read()
                table = table.filter(pc.less(table["offset"], limit))
                # Spark's writer stores timestamps as INT96, which Arrow reads as naive nanoseconds:
                # written back as such, Spark could no longer read the column. Keep the file's form.
                int96 = any(column.physical_type == "INT96" for column in original.schema)
                buffer = io.BytesIO()
                pq.write_table(
                    table, buffer, compression=self.spec.raw.compression, use_deprecated_int96_timestamps=int96
                )
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
        from pipelines.ingest.run import PipelineRun  # noqa: PLC0415

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
        from pipelines.config.steps import topological_order  # noqa: PLC0415
        from pipelines.flow.publish import check_partitions  # noqa: PLC0415
        from pipelines.flow.run import FlowRun  # noqa: PLC0415
        from pipelines.flow.validation import output_staging_dir  # noqa: PLC0415

        flow = FlowRun(self.spec, self.spark, reporter=self.reporter)
        by_day = any(o.partition_by == ("dt",) for o in self.spec.outputs)
        scope = Scope(manifest.seq, by_day, tuple(sorted({(p[0],) if by_day else p for p in touched})))
        for step in topological_order(self.spec.transforms):
            flow.transforms.compute_step(manifest.seq, step, scope, [manifest])
        for output in self.spec.outputs:
            flow.validation.validate_output(manifest.seq, output)
            storage = self._output_storage(output.path)
            staged_root = output_staging_dir(self.spec.name, manifest.seq, output)
            old, new = generation_dir(output.path, current), generation_dir(output.path, manifest.generation)
            for partition in sorted(existing_partitions(storage, old, output)):
                if not scope.holds(partition):
                    relative = partition_path(output.partition_by, partition)
                    storage.copy_tree(f"{old}/{relative}", f"{new}/{relative}")
            recomputed = sorted(existing_partitions(storage, staged_root, output))
            check_partitions(output, recomputed, scope)
            for partition in recomputed:
                relative = partition_path(output.partition_by, partition)
                storage.rename_or_fail(f"{staged_root}/{relative}", f"{new}/{relative}")
            storage.delete(staged_root, recursive=True)
            self.reporter.note(
                f"output {output.name}: {counted(len(recomputed), 'partition')} recomputed for the new generation"
            )
