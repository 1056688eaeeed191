"""Reconciliation: what the staged files hold, read from the files themselves, against the plan.

Role: the last check before a commit. For every split, rows + quarantined records + the offsets
that hold no row (records of aborted transactions and transaction markers a read-committed source
skipped, offsets the log cleaner of a compacted topic removed) must equal end - start and together
hold every offset in [start, end) exactly once; anything else fails the run before it can commit.
The files of skipped offsets hold ranges (pipelines.executor.offsets): a file's ``rows`` are then
the offsets its ranges hold. The facts come from the staged Parquet files, never from what the tasks
said they wrote: with Arrow on the driver for local paths (footers and the offset column, no Spark
job), or with two small Spark jobs for other filesystems.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipelines.errors import ReconciliationError
from pipelines.executor.offsets import range_offsets
from pipelines.executor.splits import SplitKey
from pipelines.ledger.records import Plan, SplitResult
from pipelines.storage.local import local_path


@dataclass(frozen=True, slots=True)
class FileFacts:
    """What one staged file holds."""

    file: str
    """The path the file was read from (a local path, or the URL Spark reported)."""
    topic: str
    partition: int
    rows: int
    """Its rows; for a file of skipped ranges, the offsets they hold."""
    min_offset: int
    max_offset: int
    min_event: str | None = None
    max_event: str | None = None
    """ISO-8601 UTC; None for quarantine files."""

    @property
    def key(self) -> SplitKey:
        return (self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class OffsetCoverage:
    """Per split, over data and quarantine files together."""

    distinct: int
    lowest: int | None
    highest: int | None


# ---------------------------------------------------------------------------------------------
# reading the facts


def inspect_local(
    paths: list[str], planned: dict[SplitKey, tuple[int, int]]
) -> tuple[list[FileFacts], dict[SplitKey, OffsetCoverage]]:
    """Facts of local Parquet files (plain paths or file://) and the offset coverage of every split
    they hold, with Arrow, one batch at a time: memory is one byte per planned offset (a "seen"
    map per split, ``planned`` giving each split's [start, end)) plus one batch, whatever the size
    of the files."""
    facts: list[FileFacts] = []
    seen = {key: np.zeros(end - start, dtype=np.bool_) for key, (start, end) in planned.items()}
    repeated: dict[SplitKey, int] = {}
    spans: dict[SplitKey, tuple[int, int]] = {}
    for path in paths:
        fact, offsets = _read_file(path)
        facts.append(fact)
        key = fact.key
        low, high = spans.get(key, (fact.min_offset, fact.max_offset))
        spans[key] = (min(low, fact.min_offset), max(high, fact.max_offset))
        start, end = planned.get(key, (0, 0))
        marks = seen.setdefault(key, np.zeros(0, dtype=np.bool_))
        for batch in offsets:
            # offsets outside the plan fail the span check; they count as distinct here so the
            # message names the span, not a duplicate that is not there
            inside = np.unique(batch[(batch >= start) & (batch < end)] - start)
            in_range = int(np.count_nonzero((batch >= start) & (batch < end)))
            repeats = in_range - len(inside) + int(np.count_nonzero(marks[inside]))
            marks[inside] = True
            repeated[key] = repeated.get(key, 0) + repeats
    coverage = {}
    for key, (low, high) in spans.items():
        rows = sum(f.rows for f in facts if f.key == key)
        coverage[key] = OffsetCoverage(rows - repeated.get(key, 0), low, high)
    return facts, coverage


def _read_file(path: str) -> tuple[FileFacts, list[np.ndarray]]:
    """One staged file's facts and its offsets (as numpy batches; a file of skipped ranges
    [offset, last] gives the offsets the ranges hold)."""
    local = local_path(path)
    try:
        parquet = pq.ParquetFile(local)
        names = parquet.schema_arrow.names
        columns = [c for c in ("topic", "partition", "offset", "last", "event_time") if c in names]
        batches = list(parquet.iter_batches(batch_size=1 << 16, columns=columns))
    except (OSError, ValueError) as exc:
        raise ReconciliationError(f"cannot read staged file {path}: {exc}") from exc
    if sum(b.num_rows for b in batches) == 0:
        raise ReconciliationError(f"staged file {path} holds no rows")
    topics: set[str] = set()
    partitions: set[int] = set()
    offsets: list[np.ndarray] = []
    low_event = high_event = None
    for batch in batches:
        topics.update(pc.unique(batch.column("topic")).to_pylist())
        partitions.update(pc.unique(batch.column("partition")).to_pylist())
        if "last" in batch.schema.names:
            firsts, lasts = batch.column("offset").to_numpy(), batch.column("last").to_numpy()
            if bool(np.any(lasts < firsts)):
                raise ReconciliationError(f"staged file {path} holds a range whose last offset is below its first")
            offsets += range_offsets(firsts, lasts)
        else:
            offsets.append(batch.column("offset").to_numpy())
        if "event_time" in batch.schema.names:
            bounds = pc.min_max(batch.column("event_time"))
            low, high = bounds["min"].as_py(), bounds["max"].as_py()
            if low is not None:
                low_event = low if low_event is None else min(low_event, low)
                high_event = high if high_event is None else max(high_event, high)
    if len(topics) != 1 or len(partitions) != 1:
        raise ReconciliationError(f"staged file {path} holds rows of more than one split")
    (topic,), (partition,) = topics, partitions
    fact = FileFacts(
        path,
        topic,
        partition,
        sum(len(o) for o in offsets),
        int(min(int(o.min()) for o in offsets)),
        int(max(int(o.max()) for o in offsets)),
        _iso(low_event) if low_event is not None else None,
        _iso(high_event) if high_event is not None else None,
    )
    return fact, offsets


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat()


def spark_file_facts(spark: Any, directory: str, *, ranges: bool = False) -> list[FileFacts]:
    """The facts of the Parquet files under ``directory``, with Spark (for filesystems only Spark
    reaches): one grouped scan. ``ranges``: files of skipped ranges [offset, last]."""
    from pyspark.sql import functions as F  # noqa: PLC0415 - Spark's own convention

    frame = spark.read.parquet(directory)
    last = "last" if ranges else "offset"
    aggregates = [
        (F.sum(F.col("last") - F.col("offset") + 1) if ranges else F.count(F.lit(1))).alias("rows"),
        F.min("offset").alias("min_offset"),
        F.max(last).alias("max_offset"),
    ]
    if "event_time" in frame.columns:
        aggregates += [F.min("event_time").alias("min_event"), F.max("event_time").alias("max_event")]
    grouped = frame.groupBy(F.input_file_name().alias("file"), "topic", "partition").agg(*aggregates)
    facts = []
    for row in grouped.collect():
        item = row.asDict()
        low, high = item.get("min_event"), item.get("max_event")
        facts.append(
            FileFacts(
                item["file"],
                item["topic"],
                item["partition"],
                item["rows"],
                item["min_offset"],
                item["max_offset"],
                _iso(low) if low is not None else None,
                _iso(high) if high is not None else None,
            )
        )
    return facts


def spark_coverage(
    spark: Any, directories: list[str], range_directories: Sequence[str] = ()
) -> dict[SplitKey, OffsetCoverage]:
    """The offset coverage of every split over the Parquet files under ``directories`` and the files
    of skipped ranges under ``range_directories`` (each range's offsets), with Spark."""
    if not directories and not range_directories:
        return {}
    from pyspark.sql import functions as F  # noqa: PLC0415

    union = None
    frames = [spark.read.parquet(d).select("topic", "partition", "offset") for d in directories] + [
        spark.read.parquet(d).select("topic", "partition", F.explode(F.sequence("offset", "last")).alias("offset"))
        for d in range_directories
    ]  # a staged range holds at most pipelines.executor.offsets.MAX_RANGE_OFFSETS offsets
    for frame in frames:
        union = frame if union is None else union.unionByName(frame)
    assert union is not None
    rows = (
        union.groupBy("topic", "partition")
        .agg(F.countDistinct("offset").alias("n"), F.min("offset").alias("lo"), F.max("offset").alias("hi"))
        .collect()
    )
    return {(r["topic"], r["partition"]): OffsetCoverage(r["n"], r["lo"], r["hi"]) for r in rows}


# ---------------------------------------------------------------------------------------------
# the check


def reconcile(
    plan: Plan,
    data: list[FileFacts],
    quarantine: list[FileFacts],
    coverage: dict[SplitKey, OffsetCoverage],
    *,
    aborted: Sequence[FileFacts] = (),
    control: Sequence[FileFacts] = (),
    compacted: Sequence[FileFacts] = (),
) -> list[SplitResult]:
    """The per-split results of ``plan``, or ReconciliationError naming the split and the problem.
    ``aborted`` and ``control``: the files of offsets a read-committed source skipped; ``compacted``:
    those of offsets the log cleaner removed."""
    planned = {split.key for split in plan.splits}
    for fact in [*data, *quarantine, *aborted, *control, *compacted]:
        if fact.key not in planned:
            raise ReconciliationError(
                f"run #{plan.seq}: staged file {fact.file} holds rows of {fact.topic}-{fact.partition}, "
                "which the plan does not load"
            )
    results = []
    for split in plan.splits:
        rows = sum(f.rows for f in data if f.key == split.key)
        quarantined = sum(f.rows for f in quarantine if f.key == split.key)
        skipped_aborted = sum(f.rows for f in aborted if f.key == split.key)
        skipped_control = sum(f.rows for f in control if f.key == split.key)
        removed = sum(f.rows for f in compacted if f.key == split.key)
        accounted = rows + quarantined + skipped_aborted + skipped_control + removed
        covered = coverage.get(split.key, OffsetCoverage(0, None, None))
        problems = []
        if accounted != split.size:
            skipped = (
                f" + aborted {skipped_aborted} + markers {skipped_control}"
                if skipped_aborted or skipped_control
                else ""
            ) + (f" + compacted {removed}" if removed else "")
            problems.append(f"rows {rows} + quarantined {quarantined}{skipped} != end - start = {split.size}")
        if covered.distinct != accounted:
            problems.append(f"{accounted - covered.distinct} offsets appear more than once")
        if split.size and (covered.lowest != split.start or covered.highest != split.end - 1):
            problems.append(f"offsets span {covered.lowest}..{covered.highest}, not {split.start}..{split.end - 1}")
        if problems:
            raise ReconciliationError(
                f"run #{plan.seq} {split.name} [{split.start}, {split.end}): " + "; ".join(problems)
            )
        events = [f for f in data if f.key == split.key and f.min_event]
        results.append(
            SplitResult(
                split.topic,
                split.partition,
                split.start,
                split.end,
                rows,
                quarantined,
                min_event_time=min((f.min_event for f in events if f.min_event), default=None),
                max_event_time=max((f.max_event for f in events if f.max_event), default=None),
                lost_from=split.lost_from,
                lost_to=split.lost_to,
                aborted=skipped_aborted,
                control=skipped_control,
                compacted=removed,
            )
        )
    return results
