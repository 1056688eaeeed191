"""After the load: transforms in their graph → validate → publish, for one committed load run.

Role: the driver's side of the warehouse outputs of a pipeline. Each stage can run alone (one
Airflow task each) or all in one go (``run_all``), and each is idempotent:

- **scope**: a flow run targets a committed load #seq and covers every committed load after the
  last published one up to #seq (so a load whose flow failed, or that completed another run's
  plan, is caught up by the next flow, and an older flow never publishes over a newer one). Its
  partitions are those these loads touched (from their manifests), widened to whole days if any
  output is partitioned by day. The ``raw`` view holds every committed raw row of those partitions,
  from every load (late data included), read through the manifests' file lists, never by listing
  directories, so uncommitted files are never read.
- **step**: one Spark SQL step; its dependencies are read from their staged results; its own result
  is staged (overwritten) under ``<raw>/_pipeline/flow/<seq>/steps/<name>/``.
- **validate**: per output, great-expectations on the staged rows of its step. Policy fail: the
  run stops, nothing of it is published. Policy quarantine: failing rows go to
  ``<output>/_quarantine/seq=<seq>/`` with their reasons, the rest is staged for publishing under
  ``<output>/_staging/<pipeline>-<seq>/``, within ``max_quarantine_share``. Results are kept as
  JSON under ``<raw>/_pipeline/flow/<seq>/validation/``: GX's on the rows it validated (the rows
  kept, under quarantine) and, under ``loaded``, every check on the rows as loaded (expect.Loaded).
- **publish**: per output, the partitions to replace (stored first, so a retry replaces the same
  ones) are swapped in: the old partition directory moves to ``_trash``, the staged one into its
  place (renames that never replace); once all are in place a file says so (a retry after it only
  cleans up: the staged rows may be half deleted by then), then the trash and the staged rows are
  deleted and a marker records the publish.
  A partition in scope for which the run produced no rows is removed; rows outside the scope are
  refused (they would replace a partition computed from other rows). Once a publish has started,
  validation of that output is a no-op; once the markers exist, every stage is: re-running an
  Airflow task of a published run changes nothing.

One flow at a time per pipeline (Airflow's max_active_runs=1 does that; by hand, do not run two).

Readers of an output see each partition either old or new. Readers by path find a partition being
swapped missing for the moment between its two renames (rewind/replay generations close that);
readers by name (``readers``, the metastore) never do, and see the run's partitions all at once:
publish shows them the staged rows first (one change), puts a copy of those rows in place, and
points them back (``_swap_keeping_staged``).
"""

from __future__ import annotations

import contextlib
import json
import re
from typing import Any, Protocol

from rich.markup import escape

from pipelines import faults
from pipelines.config.pipeline import PipelineSpec
from pipelines.config.steps import RAW_VIEW, Output, topological_order
from pipelines.errors import AlreadyExistsError, FlowError, StorageError, ValidationError
from pipelines.executor.decode import spark_ddl
from pipelines.flow import expect
from pipelines.layout import (
    Partition,
    Scope,
    generation_dir,
    partition_of,
    partition_of_dir,
    partition_path,
)
from pipelines.ledger import paths
from pipelines.ledger.partitions import existing_partitions
from pipelines.ledger.records import Manifest
from pipelines.ledger.state import PipelineState
from pipelines.progress import Reporter, counted
from pipelines.storage import Storage, storage_for

_DT = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_HOUR = re.compile(r"^\d{2}$")


class Readers(Protocol):
    """Where readers by name (a metastore, pipelines.catalog) find an output's partitions. Publish
    shows them the run's partitions at their staged rows before it swaps the directories, and at
    the final ones after: a reader by name never finds a partition missing between the two renames,
    nor a part of the run."""

    def shows(self, output: Output, generation: int) -> bool:
        """Whether readers by name see ``output``'s ``generation`` now (its table is registered)."""

    def stage(self, output: Output, generation: int, locations: dict[Partition, str], removed: list[Partition]) -> None:
        """Readers by name read each partition of ``locations`` there and no longer ``removed``,
        all from one moment."""

    def settle(
        self, output: Output, generation: int, locations: dict[Partition, str], removed: list[Partition]
    ) -> None:
        """The same partitions, now at their final ``locations``: the rows readers by name read do
        not change."""


class FlowRun:
    """The flow stages of one pipeline (see the module doc); ``spark`` may be None for publish.
    ``readers``: readers by name, kept whole through publish (None: only readers by path)."""

    def __init__(
        self, spec: PipelineSpec, spark: Any, *, reporter: Reporter | None = None, readers: Readers | None = None
    ) -> None:
        if not spec.outputs:
            raise FlowError(f"pipeline {spec.name} has no outputs: nothing to transform or publish")
        self.spec = spec
        self.spark = spark
        self.root = spec.raw.path.rstrip("/")
        self.state = PipelineState.for_spec(spec, spark)
        self.raw_storage = self.state.storage
        self.reporter = reporter or Reporter(quiet=True)
        self.readers = readers
        if spark is not None:  # dt=2026-01-01/hour=05 must stay strings ("05", not 5)
            spark.conf.set("spark.sql.sources.partitionColumnTypeInference.enabled", "false")

    def _storage(self, path: str) -> Storage:
        """The filesystem Spark writes ``path`` with when there is a session; else local or WebHDFS."""
        return storage_for(path, spark=self.spark, webhdfs_url=self.spec.webhdfs_url_for(path))

    # ------------------------------------------------------------------ which run, which partitions

    def seq_for(self, run_id: str | None) -> int | None:
        """The load the flow targets: the one run ``run_id`` committed (or, if it found nothing new,
        the newest when it ran), or the newest; None: nothing to do. Finishes the raw layer's
        publishing first (a load that committed but died publishing)."""
        self.state.recover()
        if run_id is None:
            latest = self.state.latest()
            if latest is None:
                raise FlowError(f"pipeline {self.spec.name}: no load committed yet; load first")
            return latest.seq
        recorded, _ = self.state.run_record(run_id)
        if recorded:
            return self.state.run_target(run_id)
        manifest = self.state.committed_run(run_id)
        if manifest is None:
            raise FlowError(f"pipeline {self.spec.name}: run {run_id!r} has not loaded (or not finished); load first")
        return manifest.seq

    def last_published(self) -> int:
        """The newest load whose flow was published (0 if none)."""
        directory = paths.flow_root(self.root)
        if not self.raw_storage.exists(directory):
            return 0
        seqs = [int(e.name) for e in self.raw_storage.list(directory) if e.is_dir and e.name.isdigit()]
        return max((q for q in seqs if self.published(q)), default=0)

    def covered(self, seq: int) -> list[int]:
        """The loads a flow targeting #seq covers: committed, after the last published, up to #seq
        (empty if #seq is published or superseded by a newer published flow)."""
        floor = self.last_published()
        return [q for q in self.state.committed_seqs() if floor < q <= seq]

    def scope(self, seq: int) -> Scope:
        by_day = any(o.partition_by == ("dt",) for o in self.spec.outputs)
        touched = set()
        for covered in self.covered(seq):
            manifest = self.state.manifest(covered)
            touched |= {partition_of(f.path) for f in manifest.files if f.kind == "data"}
        partitions = {(p[0],) if by_day else p for p in touched if p is not None}
        return Scope(seq, by_day, tuple(sorted(partitions)))

    def _nothing_to_do(self, seq: int, what: str) -> bool:
        if not self.covered(seq):
            self.reporter.note(f"run #{seq} is published already (or superseded by a newer flow): no {what}")
            return True
        if not self.scope(seq).partitions:
            self.reporter.note(f"run #{seq} touched no partition (only quarantined records?): no {what}")
            return True
        return False

    def _raw_files(self, scope: Scope, manifests: list[Manifest] | None = None) -> list[str]:
        """The raw data files in ``scope`` of the current generation (or of ``manifests``)."""
        files = []
        for manifest in self.state.generation_manifests() if manifests is None else manifests:
            for item in manifest.files:
                where = partition_of(item.path) if item.kind == "data" else None
                if where is not None and scope.covers(*where):
                    files.append(self.state.path(item.path))
        return files

    def _tag(self, seq: int) -> str:
        return f"{self.spec.name}-{seq:06d}"

    # ------------------------------------------------------------------ markers

    def _published_marker(self, seq: int, output: Output) -> str:
        return paths.published_marker(self.root, seq, output.name)

    def _publish_plan(self, seq: int, output: Output) -> str:
        return paths.publish_plan(self.root, seq, output.name)

    def _publish_swapped(self, seq: int, output: Output) -> str:
        """Written once every partition of the plan is in place, before the staged rows are deleted:
        a retry after that only cleans up (the staged rows may be half deleted by then)."""
        return paths.publish_swapped(self.root, seq, output.name)

    def published(self, seq: int) -> bool:
        return all(self.raw_storage.exists(self._published_marker(seq, o)) for o in self.spec.outputs)

    # ------------------------------------------------------------------ steps

    def _register_raw(self, scope: Scope, manifests: list[Manifest] | None = None) -> None:
        files = self._raw_files(scope, manifests)
        # Read with the schema the pipeline declares, never one file's: Spark takes the schema of a
        # single footer, so over a layer whose older files predate a column (headers and
        # timestamp_type came later) the column would vanish or not depending on the file picked.
        # Declared, every row has every column; files without one give nulls there.
        schema = spark_ddl(self.spec.decoder)
        if files:
            frame = self.spark.read.schema(schema).option("basePath", self.root).parquet(*files)
        else:  # nothing in scope (a run of only quarantined records): an empty view of the raw schema
            frame = self.spark.createDataFrame([], schema)
        frame.createOrReplaceTempView(RAW_VIEW)

    def run_step(self, seq: int, name: str) -> int:
        """Run step ``name`` of the flow for load run ``seq``; returns its row count."""
        steps = {t.name: t for t in self.spec.transforms}
        if name not in steps:
            raise FlowError(f"pipeline {self.spec.name}: no transform named {name!r} (steps: {', '.join(steps)})")
        if self._nothing_to_do(seq, f"step {name}"):
            return 0
        return self.compute_step(seq, steps[name], self.scope(seq))

    def compute_step(self, seq: int, step: Any, scope: Scope, manifests: list[Manifest] | None = None) -> int:
        """Run ``step`` over the raw rows of ``scope`` (from the current generation, or from
        ``manifests``) and stage its result in run ``seq``'s flow directory; returns its row count."""
        name = step.name
        for dependency in step.depends_on:
            where = paths.step_dir(self.root, seq, dependency)
            if dependency != RAW_VIEW and not self.raw_storage.exists(f"{where}/_SUCCESS"):
                raise FlowError(f"step {name} needs step {dependency} of run #{seq}, which has not run")
        try:
            self._register_raw(scope, manifests)
            for dependency in step.depends_on:
                if dependency != RAW_VIEW:
                    self.spark.read.parquet(paths.step_dir(self.root, seq, dependency)).createOrReplaceTempView(
                        dependency
                    )
            frame = self.spark.sql(step.sql)
            frame.write.mode("overwrite").parquet(paths.step_dir(self.root, seq, name))
        except Exception as exc:  # Spark's analysis and execution errors: name the step
            raise FlowError(f"transform {name} of run #{seq} failed: {_first_line(exc)}") from exc
        rows: int = self.spark.read.parquet(paths.step_dir(self.root, seq, name)).count()
        self.reporter.note(f"step {name}: {rows:,} rows")
        return rows

    # ------------------------------------------------------------------ validate

    def validate(self, seq: int) -> list[expect.Validation]:
        """Check every output's staged rows and stage what passes for publishing."""
        if self._nothing_to_do(seq, "validation"):
            return []
        results = []
        for output in self.spec.outputs:
            if self.raw_storage.exists(self._publish_plan(seq, output)):
                self.reporter.note(f"output {output.name}: publishing of run #{seq} has started; not validated again")
                continue
            results.append(self.validate_output(seq, output))
        return results

    def validate_output(self, seq: int, output: Output) -> expect.Validation:
        """Check ``output``'s staged step rows of run ``seq`` and stage what passes under
        ``<output>/_staging/<pipeline>-<seq>/`` (see the module doc)."""
        where = paths.step_dir(self.root, seq, output.source)
        if not self.raw_storage.exists(f"{where}/_SUCCESS"):
            raise FlowError(f"output {output.name} needs step {output.source} of run #{seq}, which has not run")
        frame = self.spark.read.parquet(where)
        missing = [c for c in output.partition_by if c not in frame.columns]
        if missing:
            raise FlowError(
                f"output {output.name}: step {output.source} has no column {missing[0]!r} "
                f"(partition_by {list(output.partition_by)} needs it)"
            )
        staged = f"{output.path.rstrip('/')}/_staging/{self._tag(seq)}"
        quarantine_dir = f"{output.path.rstrip('/')}/_quarantine/seq={seq:06d}"
        storage = self._storage(output.path)
        # what an earlier validation of this run staged must not survive a failing one
        storage.delete(staged, recursive=True)
        storage.delete(quarantine_dir, recursive=True)
        policy = {"on_failure": output.on_failure}
        if output.on_failure == "quarantine" and output.expectations:
            try:
                with expect.split_for_quarantine(
                    frame, output.expectations, output.name, output.max_quarantine_share
                ) as (good, bad, validation):
                    assert validation.loaded is not None and validation.loaded.failing is not None  # a split sets both
                    if validation.loaded.failing:
                        bad.write.mode("overwrite").option("compression", output.compression).parquet(quarantine_dir)
                    self._stage(good, output, staged)
            except expect.QuarantineRefused as exc:
                kept = exc.kept.to_json() if exc.kept is not None else {"output": output.name}
                record = {**kept, **policy, "success": False, "error": str(exc), "quarantined": 0}
                self._save_validation(seq, output, {**record, "loaded": exc.loaded.to_json()})
                raise
        else:
            # GX on the rows as loaded (policy fail), and a few values of what failed
            validation = expect.as_loaded(
                frame, output.expectations, expect.validate(frame, output.expectations, output.name)
            )
            if not validation.success:
                self._save_validation(seq, output, {**validation.to_json(), **policy, "quarantined": 0})
                assert validation.loaded is not None  # as_loaded's
                checks = zip(validation.checks, validation.loaded.checks, strict=True)
                failed = [(c, loaded) for c, loaded in checks if not c.success]
                raise ValidationError(
                    f"output {output.name} of run #{seq}: {counted(len(failed), 'expectation')} failed: "
                    + "; ".join(f"{c.expectation}: {c.observed}{_for_example(loaded)}" for c, loaded in failed[:5])
                    + " (nothing of this run is published)"
                )
            self._stage(frame, output, staged)
        quarantined = validation.loaded.failing if validation.loaded is not None else None
        self._save_validation(seq, output, {**validation.to_json(), **policy, "quarantined": quarantined or 0})
        note_validation(self.reporter, output.name, validation)
        return validation

    @staticmethod
    def _stage(frame: Any, output: Output, staged: str) -> None:
        """Write the rows ``output`` publishes under its staging directory ``staged``."""
        frame.write.mode("overwrite").partitionBy(*output.partition_by).option(
            "compression", output.compression
        ).parquet(staged)

    def _save_validation(self, seq: int, output: Output, document: dict[str, Any]) -> None:
        path = paths.validation_record(self.root, seq, output.name)
        self.raw_storage.delete(path)
        self.raw_storage.write_new(path, json.dumps(document, indent=1, default=str).encode())

    # ------------------------------------------------------------------ publish

    def publish(self, seq: int) -> dict[str, list[Partition]]:
        """Swap every output's staged partitions in; returns the partitions replaced per output."""
        covered = self.covered(seq)
        scope = self.scope(seq)
        done = {}
        for output in self.spec.outputs:
            if self.raw_storage.exists(self._published_marker(seq, output)) or not covered:
                self.reporter.note(f"output {output.name}: run #{seq} is published already")
                continue
            try:
                done[output.name] = self._publish_output(seq, output, scope) if scope.partitions else []
                record = json.dumps({"target": seq, "partitions": done[output.name]}).encode()
                for each in covered:  # the loads this flow covered are done for this output
                    with contextlib.suppress(AlreadyExistsError):
                        self.raw_storage.write_new(self._published_marker(each, output), record)
            except StorageError as exc:
                raise FlowError(f"publishing {output.name} of run #{seq}: {exc} (publish again to finish)") from exc
        return done

    def staged_root(self, seq: int, output: Output) -> str:
        return f"{output.path.rstrip('/')}/_staging/{self._tag(seq)}"

    def _publish_output(self, seq: int, output: Output, scope: Scope) -> list[Partition]:
        storage = self._storage(output.path)
        # partitions are swapped in the output's current generation (its root until a replay)
        base = generation_dir(output.path, self.state.current_generation())
        staged_root = self.staged_root(seq, output)
        trash_root = f"{output.path.rstrip('/')}/_trash/{self._tag(seq)}"
        plan_path = self._publish_plan(seq, output)
        if self.raw_storage.exists(plan_path):
            stored = json.loads(self.raw_storage.read_bytes(plan_path))
            replace = [tuple(p) for p in stored["replace"]]
            remove = [tuple(p) for p in stored["remove"]]
        else:
            if not storage.exists(f"{staged_root}/_SUCCESS"):
                raise FlowError(f"output {output.name} of run #{seq} was not validated: validate before publishing")
            staged = {partition_of_dir(f.path[len(staged_root) + 1 :]) for f in storage.walk_files(staged_root)}
            if scope.by_day:  # every existing partition of the days in scope: all were recomputed
                existing = existing_partitions(storage, base, output)
                in_scope = {p for p in existing if (p[0],) in scope.partitions}
            else:
                in_scope = set(scope.partitions)
            replace = sorted(p for p in staged if p is not None)
            self.check_partitions(output, replace, scope)
            remove = sorted(in_scope - set(replace))
            # stored before the first rename: a retry after a crash finishes the same publish
            self.raw_storage.write_new(plan_path, json.dumps({"replace": replace, "remove": remove}).encode())
        copy_root = f"{output.path.rstrip('/')}/_staging/{self._tag(seq)}-copy"
        swapped = self._publish_swapped(seq, output)
        if not self.raw_storage.exists(swapped):
            self._swap_in(seq, output, storage, base, staged_root, trash_root, copy_root, replace, remove)
            with contextlib.suppress(AlreadyExistsError):
                self.raw_storage.write_new(swapped, b"")
        partitions = replace + remove
        storage.delete(trash_root, recursive=True)
        storage.delete(staged_root, recursive=True)
        storage.delete(copy_root, recursive=True)
        self.reporter.note(f"output {output.name}: {counted(len(partitions), 'partition')} published from run #{seq}")
        return partitions

    def _swap_in(
        self,
        seq: int,
        output: Output,
        storage: Storage,
        base: str,
        staged_root: str,
        trash_root: str,
        copy_root: str,
        replace: list[Partition],
        remove: list[Partition],
    ) -> None:
        """The partitions of the plan swapped into ``base`` (readers by name shown each at once)."""
        generation = self.state.current_generation()
        by_name = self.readers is not None and self.readers.shows(output, generation)
        if by_name:  # readers by name read the staged rows while the directories are swapped
            assert self.readers is not None
            rows_at = {p: f"{staged_root}/{partition_path(output.partition_by, p)}" for p in replace}
            self.readers.stage(output, generation, {p: d for p, d in rows_at.items() if storage.exists(d)}, remove)
            faults.crash_point("flow.outputs_shown")
        for partition, has_rows in [*((p, True) for p in replace), *((p, False) for p in remove)]:
            relative = partition_path(output.partition_by, partition)
            final, new, old = f"{base}/{relative}", f"{staged_root}/{relative}", f"{trash_root}/{relative}"
            try:
                if has_rows and by_name:
                    self._swap_keeping_staged(storage, new, final, old, f"{copy_root}/{relative}")
                elif has_rows and storage.exists(new):  # not swapped yet (else an earlier attempt did)
                    if storage.exists(final):
                        storage.rename_or_fail(final, old)
                    storage.rename_or_fail(new, final)
                elif not has_rows and storage.exists(final) and not storage.exists(old):
                    storage.rename_or_fail(final, old)  # in scope, no rows any more
            except StorageError as exc:
                raise FlowError(f"publishing {output.name} partition {relative} of run #{seq}: {exc}") from exc
        if by_name:
            assert self.readers is not None
            self.readers.settle(
                output, generation, {p: f"{base}/{partition_path(output.partition_by, p)}" for p in replace}, remove
            )

    @staticmethod
    def _swap_keeping_staged(storage: Storage, new: str, final: str, old: str, copy: str) -> None:
        """Swap a partition in while readers by name read its staged rows at ``new``: a copy of
        them takes the final place, so ``new`` stays whole until readers are pointed back.
        Idempotent: after a crash at any step, doing it again ends with the staged rows in place."""
        if storage.exists(old) and storage.exists(final):
            return  # swapped by an earlier attempt (the trash is made only by a swap)
        if not storage.exists(new):
            if storage.exists(final):
                return  # swapped and cleaned up by an earlier attempt
            raise FlowError(f"the staged rows of {final} are gone and the partition is not in place")
        storage.delete(copy, recursive=True)  # a copy a crash cut short is made again
        storage.copy_tree(new, copy)
        if storage.exists(final):
            storage.rename_or_fail(final, old)
        storage.rename_or_fail(copy, final)

    @staticmethod
    def check_partitions(output: Output, partitions: list[Partition], scope: Scope) -> None:
        """Staged rows may replace only partitions the flow recomputed, named as the raw layer names them."""
        for partition in partitions:
            relative = partition_path(output.partition_by, partition)
            if not _DT.match(partition[0]) or (len(partition) > 1 and not _HOUR.match(partition[1])):
                raise FlowError(f"output {output.name}: partition {relative} is not dt=YYYY-MM-DD[/hour=HH]")
            if not scope.holds(partition):
                raise FlowError(
                    f"output {output.name}: rows for partition {relative}, outside the partitions run "
                    f"#{scope.seq} recomputed; a step must keep the dt/hour of its raw rows"
                )

    # ------------------------------------------------------------------ everything

    def run_all(self, seq: int) -> dict[str, list[Partition]]:
        if self._nothing_to_do(seq, "flow"):
            if self.covered(seq):  # an empty scope: record it as done
                return self.publish(seq)
            return {}
        for step in topological_order(self.spec.transforms):
            self.run_step(seq, step.name)
        self.validate(seq)
        return self.publish(seq)


def note_validation(reporter: Reporter, output: str, validation: expect.Validation) -> None:
    """Print :func:`validation_line` as it is written: on a console, rich would take a pattern's
    ``[a-z]`` for markup and drop it; a log (quiet) gets the text itself."""
    line = validation_line(output, validation)
    reporter.note(line if reporter.quiet else escape(line))


def validation_line(output: str, validation: expect.Validation) -> str:
    """The line a validation prints: the rows as loaded, which checks fail on them and how many
    rows each (the quarantine took them out), and GX's verdict on the rows kept (published)."""
    total = len(validation.checks)
    if not total:
        return f"output {output}: {validation.rows:,} rows (no expectations)"
    every = "its 1 check" if total == 1 else f"all {total} checks"
    loaded = validation.loaded
    if loaded is None or loaded.failing is None:  # policy fail: GX judged the rows as loaded
        return f"output {output}: {validation.rows:,} rows as loaded pass {every}"
    if not loaded.failing:
        return f"output {output}: {loaded.rows:,} rows as loaded pass {every}, none quarantined"
    failing = ", ".join(f"{c.expectation} fails {c.unexpected:,}" for c in loaded.checks if c.unexpected)
    return (
        f"output {output}: {loaded.rows:,} rows as loaded, {loaded.failing:,} quarantined ({failing}); "
        f"the {validation.rows:,} rows kept pass {every}"
    )


def _for_example(loaded: expect.LoadedCheck) -> str:
    """A few failing values for an error message (already cut short and escaped by expect)."""
    values = [sample.value for sample in loaded.samples[:3]]
    return f", e.g. {', '.join(values)}" if values else ""


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:500] if text else type(exc).__name__
