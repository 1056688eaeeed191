"""The task-side Parquet writer (sink.py) and the Arrow reconciliation of its files (reconcile.py)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.config.pipeline import Decoder, EventTime
from pipelines.errors import ReconciliationError, StorageError
from pipelines.executor.decode import ChunkDecoder
from pipelines.executor.offsets import OffsetRange, ranges_batch
from pipelines.executor.rows import BadRecord, Message
from pipelines.executor.sink import StagedFile, StagingWriter, staged_files_batch
from pipelines.executor.source import quarantine_batch
from pipelines.executor.splits import Split
from pipelines.ingest.reconcile import (
    FileFacts,
    OffsetCoverage,
    inspect_local,
    reconcile,
    spark_coverage,
    spark_file_facts,
)
from pipelines.ledger.records import Plan

START = datetime(2026, 3, 1, 22, 0, tzinfo=UTC)
PLANNED = {("events", 3): (10, 14)}


def rows(first_offset: int, minutes: list[int]) -> pa.Table:
    """Decoded rows with offsets first_offset.. and event times START + minutes."""
    decoder = ChunkDecoder(Decoder(format="json", schema={"n": "long"}), EventTime(), "events", 3)
    messages = [
        Message(first_offset + i, int((START + timedelta(minutes=m)).timestamp() * 1000), 0, b"k", b'{"n": %d}' % i)
        for i, m in enumerate(minutes)
    ]
    table, bad = decoder.decode(messages, broker=1)
    assert bad == []
    return table


def writer(root: Path, **kwargs: int) -> StagingWriter:
    return StagingWriter(root, topic="events", partition=3, compression="snappy", **kwargs)


def test_rows_land_in_one_file_per_hour_named_by_their_first_offset(tmp_path: Path) -> None:
    sink = writer(tmp_path)
    sink.write_rows(rows(100, [0, 10, 70]))  # 22:00, 22:10, 23:10
    sink.write_rows(rows(103, [80, 130]))  # 23:20, next day 00:10
    files = sink.close()
    assert [(f.path, f.rows, f.min_offset, f.max_offset) for f in files] == [
        ("dt=2026-03-01/hour=22/part-events-3-100.parquet", 2, 100, 101),
        ("dt=2026-03-01/hour=23/part-events-3-102.parquet", 2, 102, 103),
        ("dt=2026-03-02/hour=00/part-events-3-104.parquet", 1, 104, 104),
    ]
    table = pq.read_table(tmp_path / files[1].path)
    assert "dt" not in table.column_names and "hour" not in table.column_names  # they are the path
    assert table.column("offset").to_pylist() == [102, 103]
    assert table.column("n").to_pylist() == [2, 0]


def test_row_groups_are_buffered_and_open_files_are_bounded(tmp_path: Path) -> None:
    sink = writer(tmp_path, row_group_bytes=1, max_open=2)
    sink.write_rows(rows(0, [0, 61, 122]))  # three hours, only two files open: hour 22 closes
    sink.write_rows(rows(3, [1]))  # hour 22 again: a new file
    files = sink.close()
    assert sorted(f.path for f in files) == [
        "dt=2026-03-01/hour=22/part-events-3-0.parquet",
        "dt=2026-03-01/hour=22/part-events-3-3.parquet",
        "dt=2026-03-01/hour=23/part-events-3-1.parquet",
        "dt=2026-03-02/hour=00/part-events-3-2.parquet",
    ]
    big = writer(tmp_path / "big", row_group_bytes=1)
    for first in range(0, 30, 10):
        big.write_rows(rows(first, [0] * 10))
    (only,) = big.close()
    assert pq.ParquetFile(tmp_path / "big" / only.path).metadata.num_row_groups == 3
    buffered = writer(tmp_path / "buffered")
    for first in range(0, 30, 10):
        buffered.write_rows(rows(first, [0] * 10))
    (only,) = buffered.close()
    assert pq.ParquetFile(tmp_path / "buffered" / only.path).metadata.num_row_groups == 1


def test_quarantined_records_go_to_their_own_file(tmp_path: Path) -> None:
    sink = writer(tmp_path)
    split = Split("events", 3, 1, 0, 10)
    bad = [BadRecord(4, 0, None, b"x", "not JSON"), BadRecord(9, 0, b"k", b"", "empty")]
    sink.write_quarantine(pa.Table.from_batches([quarantine_batch(split, bad)]))
    sink.write_rows(rows(0, [0]))
    files = sink.close()
    assert [(f.kind, f.path, f.rows) for f in files] == [
        ("data", "dt=2026-03-01/hour=22/part-events-3-0.parquet", 1),
        ("quarantine", "part-events-3-4.parquet", 2),
    ]
    assert pq.read_table(tmp_path / "part-events-3-4.parquet").column("reason").to_pylist() == ["not JSON", "empty"]


def test_an_aborted_writer_reports_nothing(tmp_path: Path) -> None:
    sink = writer(tmp_path)
    sink.write_rows(rows(0, [0, 70]))
    sink.abort()
    assert sink.close() == []


def test_a_write_that_fails_names_the_split_and_the_directory(tmp_path: Path) -> None:
    # the task's error reaches the driver through Spark: it must say which split and where
    blocked = tmp_path / "stage"
    blocked.write_text("a file where the attempt directory should be")
    where = re.escape(str(blocked / "tasks" / "0-abc"))
    sink = writer(blocked / "tasks" / "0-abc")
    with pytest.raises(StorageError, match=rf"^events-3: writing staged files under {where} failed: "):
        sink.write_rows(rows(100, [0]))
    sink.abort()


def test_reports_travel_as_one_arrow_batch() -> None:
    files = [StagedFile("data", "a/b.parquet", "events", 3, 5, 10, 14, kernels="C")]
    batch = staged_files_batch(files)
    assert batch.to_pylist() == [
        {
            "kind": "data",
            "path": "a/b.parquet",
            "topic": "events",
            "partition": 3,
            "rows": 5,
            "min_offset": 10,
            "max_offset": 14,
            "kernels": "C",
        }
    ]


# ---------------------------------------------------------------------------------------------
# reading the files back


def test_inspect_local_reads_facts_and_offset_coverage_from_the_files(tmp_path: Path) -> None:
    sink = writer(tmp_path)
    sink.write_rows(rows(10, [0, 0, 70]))
    sink.write_rows(rows(13, [0]))
    files = sink.close()
    facts, coverage = inspect_local([str(tmp_path / f.path) for f in files], PLANNED)
    assert sorted((f.rows, f.min_offset, f.max_offset) for f in facts) == [(1, 12, 12), (3, 10, 13)]
    assert min(f.min_event or "" for f in facts) == START.isoformat()
    assert coverage == {("events", 3): OffsetCoverage(4, 10, 13)}
    # a second copy of a file: the same offsets twice, seen in the coverage
    copy = tmp_path / "copy.parquet"
    copy.write_bytes((tmp_path / min(files, key=lambda f: f.rows).path).read_bytes())
    _, coverage = inspect_local([str(tmp_path / f.path) for f in files] + [f"file://{copy}"], PLANNED)
    assert coverage == {("events", 3): OffsetCoverage(4, 10, 13)}
    facts, _ = inspect_local([str(tmp_path / f.path) for f in files] + [f"file://{copy}"], PLANNED)
    assert sum(f.rows for f in facts) == 5  # five rows, four distinct offsets: reconcile refuses


def _skipped_files(root: Path) -> list[StagedFile]:
    """Rows 10-11 and 14, offsets 12-13 compacted away, 15 a marker: events-3 [10, 16) staged."""
    sink = writer(root)
    sink.write_rows(rows(10, [0, 0]))
    sink.write_skipped("compacted", pa.Table.from_batches([ranges_batch("events", 3, [OffsetRange(12, 13, "x")])]))
    sink.write_rows(rows(14, [0]))
    sink.write_skipped("control", pa.Table.from_batches([ranges_batch("events", 3, [OffsetRange(15, 15, "x")])]))
    return sink.close()


def test_skipped_offsets_are_staged_as_ranges_and_read_back_as_the_offsets_they_hold(tmp_path: Path) -> None:
    files = _skipped_files(tmp_path)
    ranges = {f.kind: (f.path, f.rows, f.min_offset, f.max_offset) for f in files if f.kind != "data"}
    assert ranges == {
        "compacted": ("compacted/part-events-3-12.parquet", 2, 12, 13),
        "control": ("control/part-events-3-15.parquet", 1, 15, 15),
    }
    planned = {("events", 3): (10, 16)}
    facts, coverage = inspect_local([str(tmp_path / f.path) for f in files], planned)
    assert sorted((f.rows, f.min_offset, f.max_offset) for f in facts) == [(1, 15, 15), (2, 12, 13), (3, 10, 14)]
    assert coverage == {("events", 3): OffsetCoverage(6, 10, 15)}
    plan = Plan("p", 1, "r", "now", "fp", (Split("events", 3, 1, 10, 16),))
    by_kind = {f.kind: [x for x in facts if x.file == str(tmp_path / f.path)] for f in files}
    (result,) = reconcile(
        plan, by_kind["data"], [], coverage, control=by_kind["control"], compacted=by_kind["compacted"]
    )
    assert (result.rows, result.control, result.compacted) == (3, 1, 2)
    # a range that says a row's offset was removed too: that offset counts twice
    overlap = tmp_path / "overlap.parquet"
    pq.write_table(pa.Table.from_batches([ranges_batch("events", 3, [OffsetRange(11, 13, "x")])]), overlap)
    paths = [str(tmp_path / f.path) for f in files if f.kind != "compacted"] + [str(overlap)]
    facts, coverage = inspect_local(paths, planned)
    compacted = [f for f in facts if f.file == str(overlap)]
    with pytest.raises(ReconciliationError, match=r"rows 3 \+ quarantined 0 \+ aborted 0 \+ markers 1 \+ compacted 3"):
        reconcile(plan, [f for f in facts if f not in compacted and f.min_offset != 15], [], coverage,
                  control=[f for f in facts if f.min_offset == 15], compacted=compacted)  # fmt: skip


def test_spark_reads_staged_ranges_like_the_driver(tmp_path: Path, spark: object) -> None:
    files = _skipped_files(tmp_path)
    (compacted,) = spark_file_facts(spark, str(tmp_path / "compacted"), ranges=True)
    assert (compacted.rows, compacted.min_offset, compacted.max_offset) == (2, 12, 13)
    coverage = spark_coverage(
        spark, [str(tmp_path / f.path) for f in files if f.kind == "data"], [str(tmp_path / "compacted")]
    )
    assert coverage == {("events", 3): OffsetCoverage(5, 10, 14)}


def test_inspect_local_refuses_files_it_cannot_trust(tmp_path: Path) -> None:
    with pytest.raises(ReconciliationError, match=r"cannot read staged file .*missing"):
        inspect_local([str(tmp_path / "missing.parquet")], PLANNED)
    (tmp_path / "torn.parquet").write_bytes(b"PAR1 then nothing")
    with pytest.raises(ReconciliationError, match=r"cannot read staged file .*torn"):
        inspect_local([str(tmp_path / "torn.parquet")], PLANNED)
    mixed = pa.table({"topic": ["a", "b"], "partition": pa.array([0, 0], pa.int32()), "offset": [1, 2]})
    pq.write_table(mixed, tmp_path / "mixed.parquet")
    with pytest.raises(ReconciliationError, match="more than one split"):
        inspect_local([str(tmp_path / "mixed.parquet")], PLANNED)
    pq.write_table(mixed.slice(0, 0), tmp_path / "empty.parquet")
    with pytest.raises(ReconciliationError, match="no rows"):
        inspect_local([str(tmp_path / "empty.parquet")], PLANNED)


def test_spark_reads_task_written_files_like_its_own(tmp_path: Path, spark: object) -> None:
    sink = writer(tmp_path / "raw")
    sink.write_rows(rows(0, [0, 70, 140]))
    sink.close()
    frame = spark.read.option("basePath", str(tmp_path / "raw")).parquet(str(tmp_path / "raw"))  # type: ignore[attr-defined]
    got = sorted((r["offset"], str(r["dt"]), int(r["hour"])) for r in frame.collect())
    assert got == [(0, "2026-03-01", 22), (1, "2026-03-01", 23), (2, "2026-03-02", 0)]


def test_reconcile_refuses_a_file_of_a_split_the_plan_does_not_load() -> None:
    plan = Plan("p", 1, "r", "now", "fp", (Split("events", 3, 1, 10, 12),))
    mine = FileFacts("/s/a.parquet", "events", 3, 2, 10, 11)
    other = FileFacts("/s/b.parquet", "events", 4, 1, 0, 0)
    assert [r.rows for r in reconcile(plan, [mine], [], {("events", 3): OffsetCoverage(2, 10, 11)})] == [2]
    with pytest.raises(ReconciliationError, match="holds rows of events-4, which the plan does not load"):
        reconcile(plan, [mine, other], [], {("events", 3): OffsetCoverage(2, 10, 11)})
