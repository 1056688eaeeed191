"""The load stage: Spark reads a plan's splits (one task each) and stages them as Parquet.

Role: the only part of a load that runs on executors. ``SparkStager.stage`` starts the Spark job over
the splits, waits, and returns what was staged, as facts read back from the files themselves (the
reconciliation that follows trusts nothing a task merely said). Two ways to stage:

- tasks write (``raw.tasks_write``, the default): each task writes its split's Parquet files itself
  (pipelines.executor.sink) and reports them; the files the successful attempts reported count;
- Spark writes: Spark's partitioned writer stages the rows (its commit protocol keeps failed task
  attempts out); a second pass quarantines the bad records of splits that came up short, and a
  third stages the offsets that hold no row in splits still short.

Either way the offsets that hold no row (records of aborted transactions and transaction markers a
read-committed source skips, offsets the log cleaner of a compacted topic removed) are staged too,
as ranges, one file per reason (pipelines.executor.offsets), so that reconciliation accounts for
every offset from the files alone.

An error raised in a task comes back as the pipelines error it was (``cause_of``), not Spark's text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from kafkalog.faults import parse_target
from pipelines import errors as errors_module
from pipelines import faults
from pipelines.config.pipeline import PipelineSpec
from pipelines.errors import DataLossError, LoadError, PipelineError, ReconciliationError
from pipelines.executor.offsets import SKIPPED_REASONS
from pipelines.executor.source import TASK_FAULTS, KafkalogSource
from pipelines.executor.splits import Split, SplitKey
from pipelines.ingest.reconcile import FileFacts, OffsetCoverage, inspect_local, spark_coverage, spark_file_facts
from pipelines.java_errors import first_cause, java_line, lines_of
from pipelines.ledger.records import Plan
from pipelines.progress import Reporter
from pipelines.schemas.resolved import RunSchemas
from pipelines.storage import Storage
from pipelines.storage.local import local_path


@dataclass(frozen=True, slots=True)
class Staged:
    """What an attempt staged: data files, quarantine files, the files of skipped offsets, and
    each split's offset coverage (over all of them)."""

    data: list[FileFacts]
    quarantine: list[FileFacts]
    coverage: dict[SplitKey, OffsetCoverage] = field(default_factory=dict)
    task_kernels: frozenset[str] = frozenset()
    """The record kernels the tasks ran ("C", "pure Python"), as they reported them (tasks that
    write their own files report it; empty when Spark's writer staged the rows)."""
    aborted: list[FileFacts] = field(default_factory=list)
    """Offsets of records of aborted transactions (a read-committed source)."""
    control: list[FileFacts] = field(default_factory=list)
    """Offsets of transaction markers."""
    compacted: list[FileFacts] = field(default_factory=list)
    """Offsets the log cleaner of a compacted topic removed."""


class SparkStager:
    """Stages splits through Spark (see the module doc). ``brokers``: what tasks connect through."""

    def __init__(
        self,
        spec: PipelineSpec,
        spark: Any,
        storage: Storage,
        *,
        reporter: Reporter,
        brokers: Callable[[], list[str]],
        task_faults: str = "",
    ) -> None:
        self.spec = spec
        self.spark = spark
        self.storage = storage
        self.reporter = reporter
        self.brokers = brokers
        if task_faults:  # refused here, before any task runs, rather than as a failed task
            parse_target(task_faults, TASK_FAULTS, "task_faults")
        self.task_faults = task_faults
        self.schemas: RunSchemas | None = None
        """The schemas of the plan being staged (pipelines.schemas.resolved), None for a decoder without."""
        spark.dataSource.register(KafkalogSource)

    def stage(self, plan: Plan, staging: str, progress_dir: str, schemas: RunSchemas | None = None) -> Staged:
        """Load the splits of ``plan`` that have messages into ``staging`` (tasks report progress
        into ``progress_dir``); the facts of the staged files. ``schemas``: the run's, read by the
        driver (pipelines.schemas.resolved), shipped to the tasks in their options."""
        splits = [s for s in plan.splits if s.size > 0]
        self.schemas = schemas
        if self.spec.raw.tasks_write:
            return self._stage_by_tasks(plan, splits, staging, progress_dir)
        return self._stage_by_spark(plan, splits, staging, progress_dir)

    def _options(self, splits: list[Split], emit: str, progress_dir: str | None) -> dict[str, str]:
        spec = self.spec
        source = asdict(spec.source)
        # the secrets go in options of their own, whose names Spark redacts in plans, logs and its
        # UI (spark.redaction.regex matches "password"); never inside the readable "spec"
        secrets = {key: source["security"].pop(key) or "" for key in ("password", "key_password")}
        settings = {
            "source": source,
            "decoder": spec.decoder.settings(),  # without the registry's credentials
            "event_time": asdict(spec.event_time),
            "bad_records": asdict(spec.bad_records),
            "brokers": self.brokers(),  # tasks connect through these (see pipelines.executor.source)
        }
        options = {
            "spec": json.dumps(settings, default=str),  # (paths as text)
            "schemas": "" if self.schemas is None else self.schemas.to_json(),
            "splits": json.dumps([asdict(s) for s in splits]),
            "emit": emit,
            "faults": self.task_faults,
            "source_password": secrets["password"],
            "source_key_password": secrets["key_password"],
        }
        if progress_dir:
            options["progress_dir"] = progress_dir
        return options

    def _in_spark(self, what: str, action: Callable[[], None]) -> None:
        try:
            action()
        except Exception as exc:  # Spark raises its own exception types; find our cause in them
            raise cause_of(exc, what) from exc

    def _read_splits(self, plan: Plan, splits: list[Split], options: dict[str, str], progress_dir: str) -> Any:
        """Runs the source over ``splits`` with a live progress view; returns the collected rows."""
        frame = self.spark.read.format("kafkalog").options(**options).load()
        with self.reporter.loading(f"run {plan.run_id} (#{plan.seq})", splits, progress_dir):
            rows: list[Any] = []
            self._in_spark(f"loading run #{plan.seq}", lambda: rows.extend(frame.collect()))
        return rows

    def _stage_by_tasks(self, plan: Plan, splits: list[Split], staging: str, progress_dir: str) -> Staged:
        """Each task writes its split's files itself (pipelines.executor.sink); the files that count are those the
        successful task attempts reported, checked by reading them back with Arrow."""
        reported: list[Any] = []
        if splits:
            options = {
                **self._options(splits, "files", progress_dir),
                "stage_dir": local_path(staging),
                "compression": self.spec.raw.compression,
            }
            reported = self._read_splits(plan, splits, options, progress_dir)
        faults.crash_point("load.after_staging")
        return staged_from_reports(plan, staging, reported)

    def _stage_by_spark(self, plan: Plan, splits: list[Split], staging: str, progress_dir: str) -> Staged:
        """Spark's partitioned writer stages the rows (its commit protocol keeps failed task
        attempts out); a second pass quarantines bad records of the splits that were short."""
        data_dir, quarantine_dir = f"{staging}/data", f"{staging}/quarantine"
        compression = self.spec.raw.compression
        if splits:
            frame = self.spark.read.format("kafkalog").options(**self._options(splits, "data", progress_dir)).load()
            with self.reporter.loading(f"run {plan.run_id} (#{plan.seq})", splits, progress_dir):
                self._in_spark(
                    f"loading run #{plan.seq}",
                    lambda: (
                        frame.write.partitionBy("dt", "hour")
                        .option("compression", compression)
                        .mode("errorifexists")
                        .parquet(data_dir)
                    ),
                )
        faults.crash_point("load.after_staging")
        data = spark_file_facts(self.spark, data_dir) if self._has_parquet(data_dir) else []
        rows_by_split: dict[tuple[str, int], int] = {}
        for fact in data:
            rows_by_split[fact.key] = rows_by_split.get(fact.key, 0) + fact.rows
        short = [s for s in splits if rows_by_split.get(s.key, 0) < s.size]
        quarantine: list[FileFacts] = []
        if short and self.spec.bad_records.policy == "quarantine":
            frame = self.spark.read.format("kafkalog").options(**self._options(short, "quarantine", None)).load()
            self._in_spark(
                f"quarantining bad records of run #{plan.seq}",
                lambda: frame.write.option("compression", compression).mode("errorifexists").parquet(quarantine_dir),
            )
            if self._has_parquet(quarantine_dir):
                quarantine = spark_file_facts(self.spark, quarantine_dir)
        for fact in quarantine:
            rows_by_split[fact.key] = rows_by_split.get(fact.key, 0) + fact.rows
        short = [s for s in short if rows_by_split.get(s.key, 0) < s.size]
        skipped_dir = f"{staging}/skipped"
        skipped: dict[str, list[FileFacts]] = {reason: [] for reason in SKIPPED_REASONS}
        # markers are skipped reading uncommitted too, and compaction removes offsets either way
        if short:
            frame = self.spark.read.format("kafkalog").options(**self._options(short, "skipped", None)).load()
            self._in_spark(
                f"staging the offsets run #{plan.seq} skips (aborted transactions, markers, compacted)",
                lambda: frame.write.partitionBy("reason").mode("errorifexists").parquet(skipped_dir),
            )
            for reason in skipped:
                if self._has_parquet(f"{skipped_dir}/reason={reason}"):
                    skipped[reason] = spark_file_facts(self.spark, f"{skipped_dir}/reason={reason}", ranges=True)
        directories = [d for d, facts in ((data_dir, data), (quarantine_dir, quarantine)) if facts]
        ranges = [f"{skipped_dir}/reason={reason}" for reason, facts in skipped.items() if facts]
        return Staged(
            data,
            quarantine,
            spark_coverage(self.spark, directories, ranges),
            aborted=skipped["aborted"],
            control=skipped["control"],
            compacted=skipped["compacted"],
        )

    def _has_parquet(self, directory: str) -> bool:
        return any(f.name.endswith(".parquet") for f in self.storage.walk_files(directory))


def staged_from_reports(plan: Plan, staging: str, reported: list[Any]) -> Staged:
    """The Staged of an attempt whose tasks wrote their own files: the files the successful task
    attempts reported (rows of pipelines.executor.sink's STAGED_FILE_DDL, paths relative to
    ``staging``), each read back with Arrow and checked against what its task said."""
    paths: dict[str, list[str]] = {kind: [] for kind in ("data", "quarantine", *SKIPPED_REASONS)}
    for row in reported:
        paths[row["kind"]].append(f"{staging}/{row['path']}")
    planned = {s.key: (s.start, s.end) for s in plan.splits}
    data, coverage = inspect_local([path for kind in paths.values() for path in kind], planned)
    claimed = {f"{staging}/{row['path']}": row for row in reported}
    for fact in data:
        said = claimed[fact.file]
        if (said["rows"], said["min_offset"], said["max_offset"]) != (fact.rows, fact.min_offset, fact.max_offset):
            raise ReconciliationError(
                f"staged file {fact.file} holds rows {fact.rows}, offsets {fact.min_offset}..{fact.max_offset}; "
                f"its task reported {said['rows']}, {said['min_offset']}..{said['max_offset']}"
            )
    kind_of = {path: kind for kind, kind_paths in paths.items() for path in kind_paths}
    return Staged(
        [f for f in data if kind_of[f.file] == "data"],
        [f for f in data if kind_of[f.file] == "quarantine"],
        coverage,
        frozenset(row["kernels"] for row in reported if row["kernels"]),
        aborted=[f for f in data if kind_of[f.file] == "aborted"],
        control=[f for f in data if kind_of[f.file] == "control"],
        compacted=[f for f in data if kind_of[f.file] == "compacted"],
    )


_OUR_ERROR = re.compile(r"pipelines\.errors\.(\w+): (.+)")


def cause_of(exc: Exception, what: str) -> PipelineError:
    """Our error raised in a task, recovered from Spark's wrapping (the last one in the text is
    the task's own; earlier ones may be from retried attempts)."""
    text = str(exc)
    found = _OUR_ERROR.findall(text)
    if found:
        name, message = found[-1]
        kind = getattr(errors_module, name, None)
        if isinstance(kind, type) and issubclass(kind, PipelineError):
            if kind is DataLossError:
                return LoadError(f"{what}: {message}")
            return kind(f"{what}: {message}")
    reason = java_line(exc)
    first = first_cause(lines_of(exc))
    if first and first not in reason:
        return LoadError(f"{what} failed in Spark: {reason[:400]} (first cause: {first[:400]})")
    return LoadError(f"{what} failed in Spark: {reason[:500]}")
