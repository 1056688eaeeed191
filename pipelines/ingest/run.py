"""One run of a pipeline: recover → plan → load → reconcile → commit → publish.

The driver's side of exactly-once (the tasks' side is pipelines.executor; the state layout is pipelines.ledger.paths):

1. recover: finish publishing the newest manifest; remove attempts that can never commit.
2. plan: a stored, uncommitted plan is executed as it is (a retry after a crash loads exactly the
   same ranges); otherwise a new plan is made from the committed offsets and stored first.
3. load: Spark reads the splits (one task each) and writes Parquet, time-partitioned, into this
   attempt's staging directory (Spark's own commit keeps failed task attempts out of it). A
   schema'd decoder's schemas are read first, here on the driver, and shipped to the tasks; the
   manifest records the reader versions (a replay reads with those of the runs it replaces).
4. reconcile: per split, rows + quarantined + the offsets that hold no row (aborted records,
   markers, offsets compaction removed) = end - start, every offset in [start, end) exactly once
   (read back from the staged files); anything else fails the run before it can commit.
5. commit: the manifest is created if absent: the one atomic step that makes output and offsets
   visible together. A concurrent run that committed the same run number first wins.
6. publish: the staged files move to their final names (never over an existing file).
"""

from __future__ import annotations

import logging
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol
from urllib.parse import unquote

from kafkalog.client import SimpleConsumer
from kafkalog.client.kernels import KERNELS, describe_kernels
from pipelines import faults
from pipelines.config.pipeline import PipelineSpec
from pipelines.errors import ConcurrentRunError, PipelineError, ReconciliationError
from pipelines.executor.splits import open_consumer
from pipelines.ingest.plan import Planned, plan_run, task_brokers
from pipelines.ingest.reconcile import FileFacts, reconcile
from pipelines.ingest.stage import SparkStager, Staged
from pipelines.layout import generation_prefix
from pipelines.ledger import paths
from pipelines.ledger.records import Manifest, OutputFile, Plan
from pipelines.ledger.state import PipelineState, Recovered, lost_race
from pipelines.progress import Reporter, read_progress
from pipelines.schemas.resolved import Pin, RunSchemas, needs_schemas, recorded_pins, resolve_schemas
from pipelines.storage import Storage

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RunResult:
    """How a run ended. ``status``: committed | up-to-date | already-committed."""

    status: str
    manifest: Manifest | None = None
    message: str = ""
    completed: tuple[Manifest, ...] = field(default_factory=tuple)
    """Manifests this invocation committed (a pending plan completed first, then its own)."""


class Stager(Protocol):
    """The load stage: stages a plan's splits under a staging directory (SparkStager on a cluster;
    the unit tier runs the same task code in-process)."""

    def stage(self, plan: Plan, staging: str, progress_dir: str, schemas: RunSchemas | None = None) -> Staged: ...


class PipelineRun:
    """Runs one pipeline (see the module doc for the steps). ``spark``: the session the load stage
    runs on; ``stager`` and ``consumer``, given instead, replace Spark and the brokers (the unit
    tier's in-process load and in-memory cluster)."""

    def __init__(
        self,
        spec: PipelineSpec,
        spark: Any,
        *,
        storage: Storage | None = None,
        reporter: Reporter | None = None,
        task_faults: str = "",
        stager: Stager | None = None,
        consumer: Callable[[], SimpleConsumer] | None = None,
    ) -> None:
        self.spec = spec
        self.root = spec.raw.path.rstrip("/")
        self.state = PipelineState.for_spec(spec, spark) if storage is None else PipelineState(storage, self.root)
        self.storage = self.state.storage
        self.reporter = reporter or Reporter(quiet=True)
        self._consumer = consumer or (lambda: open_consumer(spec.source))
        self._brokers: list[str] | None = None
        log.info("pipeline %s: driver %s", spec.name, describe_kernels())
        self.stager: Stager = stager or SparkStager(
            spec, spark, self.storage, reporter=self.reporter, brokers=self.task_brokers, task_faults=task_faults
        )

    def consumer(self) -> SimpleConsumer:
        """The driver's consumer: through the bootstrap list, or bootstrapped from ZooKeeper."""
        return self._consumer()

    def task_brokers(self, consumer: SimpleConsumer | None = None) -> list[str]:
        """The brokers this run's tasks connect to, resolved once (see plan.task_brokers): for a
        ZooKeeper source, the brokers registered when the run planned (or first executed a plan)."""
        if self._brokers is None:
            self._brokers = task_brokers(self.spec.source, None if consumer is None else consumer.client)
        return self._brokers

    # ------------------------------------------------------------------ the run

    def run(self, *, run_id: str | None = None, replan: bool = False) -> RunResult:
        """The stages in order, each handing its result to the next: recover (the state, read once),
        plan (the stored plan to finish, then this run's own), execute each plan (load → reconcile →
        commit → publish)."""
        start = self.state.recovered(run_id)
        if start.done is not None:
            ends = ", ".join(f"{s.topic}-{s.partition}@{s.end}" for s in start.done.splits)
            message = f"run {run_id} already committed as #{start.done.seq} ({ends})"
            return RunResult("already-committed", start.done, message)
        if start.found_nothing:
            return RunResult("already-committed", start.latest, f"run {run_id} ran before and found nothing new")
        with self.consumer() as consumer:
            self.task_brokers(consumer)  # through the planning session: no second one to ZooKeeper
            planned = plan_run(
                self.spec,
                consumer,
                committed=start.offsets,
                next_seq=start.next_seq,
                stored=start.pending,
                run_id=run_id,
                replan=replan,
            )
        for note in planned.notes:
            self.reporter.note(note)
        if planned.discarded is not None:
            self.state.discard_plan(planned.discarded)
        return self._execute_planned(planned, start, run_id)

    def _execute_planned(self, planned: Planned, start: Recovered, run_id: str | None) -> RunResult:
        completed: list[Manifest] = []
        pending, plan = planned.pending, planned.new
        if pending is not None:
            self.reporter.note(f"completing run {pending.run_id} (#{pending.seq}), planned {pending.created_at}")
            completed.append(self.execute(pending))
        if plan is None:
            return RunResult("committed", completed[-1], completed=tuple(completed))
        if not any(s.size or s.lost_from is not None for s in plan.splits):
            message = "up to date: no new messages on " + ", ".join(f"{s.name}@{s.end}" for s in plan.splits)
            if run_id is not None:
                self.state.record_empty_run(run_id)
            latest = completed[-1] if completed else start.latest
            return RunResult("committed" if completed else "up-to-date", latest, message, tuple(completed))
        self.state.store_plan(plan)
        faults.crash_point("plan.after_store")
        completed.append(self.execute(plan))
        return RunResult("committed", completed[-1], completed=tuple(completed))

    # ------------------------------------------------------------------ executing a plan

    def execute(self, plan: Plan) -> Manifest:
        """Load, reconcile, commit and publish ``plan`` as a new attempt, holding the attempt's
        lease throughout, so that no other run deletes its staging while it works."""
        attempt = uuid.uuid4().hex[:8]
        staging = self.state.staging_dir(plan.seq, attempt)
        with self.state.leases.held(staging.rsplit("/", 1)[1]):
            log.info("run %s (#%d): attempt %s loads %d messages", plan.run_id, plan.seq, attempt, plan.total)
            try:
                manifest = self.load_and_reconcile(plan, attempt, staging)
                self.state.commit(manifest)
            except BaseException as exc:
                if faults.is_crash(exc):
                    raise  # a dead driver cleans nothing up
                self._discard(staging)
                lost_to = self._winner_of(plan, attempt, exc)
                if lost_to is not None:
                    raise lost_to from exc
                raise
            log.info("run %s committed as #%d (attempt %s)", plan.run_id, plan.seq, attempt)
            self.state.roll_forward(manifest)
        self.state.remove_dead_staging(manifest.seq)  # attempts of crashed drivers at this seq
        return manifest

    def _winner_of(self, plan: Plan, attempt: str, exc: BaseException) -> ConcurrentRunError | None:
        """If another run committed ``plan``'s seq while this attempt failed, the failure is that
        run's win (whatever it broke on the way): the ConcurrentRunError to raise instead."""
        if isinstance(exc, ConcurrentRunError) or not isinstance(exc, PipelineError):
            return None
        try:
            if not self.storage.exists(self.state.manifest_path(plan.seq)):
                return None
            other = self.state.manifest(plan.seq)
        except PipelineError:
            return None
        return ConcurrentRunError(
            f"{lost_race(plan.pipeline, plan.seq, other, plan.run_id, attempt)} (it failed while loading: {exc})"
        )

    def _discard(self, staging: str) -> None:
        try:
            self.storage.delete(staging, recursive=True)
        except PipelineError as exc:  # the next run removes it; the original error matters more
            self.reporter.note(f"could not remove {staging}: {exc}")

    def load_and_reconcile(self, plan: Plan, attempt: str, staging: str) -> Manifest:
        splits = [s for s in plan.splits if s.size > 0]
        started = datetime.now(UTC)
        # the tasks' progress files (local runs): the live view while loading, the split timings after
        schemas = self.run_schemas(plan)
        with tempfile.TemporaryDirectory(prefix="pipelines-progress-") as progress_dir:
            staged = self.stager.stage(plan, staging, progress_dir, schemas)
            data, quarantine = staged.data, staged.quarantine
            split_seconds = {
                f"{splits[index].topic}:{splits[index].partition}": round(item["seconds"], 3)
                for index, item in read_progress(progress_dir).items()
                if item.get("done") and index < len(splits) and "seconds" in item
            }
        results = reconcile(
            plan,
            data,
            quarantine,
            staged.coverage,
            aborted=staged.aborted,
            control=staged.control,
            compacted=staged.compacted,
        )
        generation = plan.generation if plan.kind == "replay" else self.state.current_generation()
        files = self._output_files(plan, staging, data, quarantine, generation_prefix(generation))
        stats: dict[str, Any] = {
            "seconds": round((datetime.now(UTC) - started).total_seconds(), 3),
            "bytes": sum(f.bytes for f in files if f.kind == "data"),
            "split_seconds": split_seconds,
            "driver_kernels": KERNELS,
            "task_kernels": sorted(staged.task_kernels),
        }
        self._check_kernels(staged)
        offsets = {f"{t}:{p}": o for (t, p), o in self.state.committed_offsets().items()}
        offsets.update({f"{s.topic}:{s.partition}": s.end for s in plan.splits})
        return Manifest(
            pipeline=plan.pipeline,
            seq=plan.seq,
            run_id=plan.run_id,
            committed_at=datetime.now(UTC).isoformat(),
            plan=plan,
            splits=tuple(results),
            files=tuple(files),
            attempt=attempt,
            offsets=offsets,
            stats=stats,
            kind=plan.kind,
            generation=generation,
            schemas={} if schemas is None else schemas.readers(),
        )

    def run_schemas(self, plan: Plan) -> RunSchemas | None:
        """The schemas ``plan`` is read with, read now, on the driver (None for a decoder that
        declares its columns), checked against those the newest committed run recorded (the raw
        table's columns: pipelines.schemas.evolution). A replay reads with the reader schemas that
        run recorded, by id (the newest of the runs it replaces, which reads the records of all of
        them), not the subjects' latest, unless its plan says ``schemas: latest``."""
        if not needs_schemas(self.spec.decoder):
            return None
        latest = self.state.latest()
        recorded = {} if latest is None else latest.schemas
        pinned: dict[str, Pin] = {}
        if plan.kind == "replay" and plan.schemas == "recorded":
            pinned = recorded_pins(recorded)
        topics = sorted({s.topic for s in plan.splits})
        return resolve_schemas(
            self.spec.decoder, topics, event_time=self.spec.event_time, pinned=pinned, recorded=recorded
        )

    def _check_kernels(self, staged: Staged) -> None:
        """Say which record kernels the tasks ran; warn when they ran the pure-Python ones."""
        if not staged.task_kernels:
            return
        ran = ", ".join(sorted(staged.task_kernels))
        log.info("tasks ran the %s record kernels (the driver: %s)", ran, KERNELS)
        if "pure Python" in staged.task_kernels:
            warning = (
                "tasks decoded with the pure-Python record kernels, several times slower than the C ones: ship "
                "those to the executors with the archive `python -m pipelines.app.ship` builds (--archives)"
            )
            log.warning(warning)
            self.reporter.note(f"warning: {warning}")

    def _output_files(
        self,
        plan: Plan,
        staging: str,
        data: list[FileFacts],
        quarantine: list[FileFacts],
        prefix: str = "",
    ) -> list[OutputFile]:
        """The files of a staged attempt with their final paths, under ``prefix`` (the directory of
        the generation they belong to, relative to the raw root)."""
        sizes = {self._relative(f.path): f.size for f in self.storage.walk_files(staging)}
        files = []
        for kind, facts in (("data", data), ("quarantine", quarantine)):
            for fact in facts:
                staged = self._relative(unquote(fact.file))
                if staged not in sizes:
                    raise ReconciliationError(f"{fact.file} was read, but it is not under {staging}")
                name = f"part-{plan.seq:06d}-{fact.topic}-{fact.partition}-{fact.min_offset}.parquet"
                if kind == "data":
                    partition_dirs = "/".join(p for p in staged.split("/") if p.startswith(("dt=", "hour=")))
                    final = f"{prefix}{partition_dirs}/{name}"
                else:
                    final = f"{prefix}_quarantine/seq={plan.seq:06d}/{name}"
                files.append(
                    OutputFile(
                        staged,
                        final,
                        kind,
                        fact.topic,
                        fact.partition,
                        fact.rows,
                        sizes[staged],
                        fact.min_offset,
                        fact.max_offset,
                    )
                )
        return files

    def _relative(self, path: str) -> str:
        """A path Spark or storage gave, relative to the raw root (schemes and authorities vary)."""
        relative = paths.staged_relative(path)
        if relative is None:
            raise ReconciliationError(f"{path} is not a staged file")
        return relative
