"""The task side of staging: a split's rows written as Parquet by the task that read them.

Role: used when the raw layer is on a filesystem every task and the driver can open as local paths
(a local disk in local mode, a shared mount on a cluster). Each task attempt writes into its own
fresh directory, so a failed, killed or speculative attempt never touches another attempt's files;
it reports the files it completed as rows (``StagedFile``). The driver trusts only the reports of
the attempts Spark counted as successful, then reads the files themselves before committing (see
pipelines.ingest.reconcile); files of other attempts stay behind in staging and are deleted with it.

Layout under the attempt directory, the same as Spark's partitioned writer produces:
``dt=<dt>/hour=<hour>/part-<topic>-<partition>-<first offset>.parquet`` for rows (dt and hour are
in the path, not in the file), ``part-<topic>-<partition>-<first offset>.parquet`` for
quarantined records, and ``aborted/part-…``, ``control/part-…`` and ``compacted/part-…`` for the
offsets that hold no row (records of aborted transactions and transaction markers a read-committed
source skips, offsets the log cleaner of a compacted topic removed), as ranges
(pipelines.executor.offsets). Rows arrive in offset order, so a file's first offset is its lowest.

Memory stays bounded: rows are buffered per open (dt, hour) up to ``row_group_bytes`` and then
written as one row group; at most ``max_open`` files are open at once (late events spread over many
hours close the least recently used file, and a later row for that hour starts a new file).
"""

from __future__ import annotations

import contextlib
import os
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipelines.errors import StorageError

PARTITION_COLUMNS = ("dt", "hour")

STAGED_FILE_DDL = (
    "kind STRING, path STRING, topic STRING, `partition` INT, `rows` BIGINT, min_offset BIGINT, max_offset BIGINT, "
    "kernels STRING"
)
STAGED_FILE_SCHEMA = pa.schema(
    [
        ("kind", pa.string()),
        ("path", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("rows", pa.int64()),
        ("min_offset", pa.int64()),
        ("max_offset", pa.int64()),
        ("kernels", pa.string()),
    ]
)


@dataclass(frozen=True, slots=True)
class StagedFile:
    """A complete Parquet file a task wrote: ``path`` is relative to the attempt's staging root."""

    kind: str
    """data | quarantine | aborted | control | compacted"""
    path: str
    topic: str
    partition: int
    rows: int
    """Rows of a data or quarantine file; offsets of a file of skipped ranges (aborted, control,
    compacted), which holds fewer rows: one per range."""
    min_offset: int
    max_offset: int
    kernels: str = ""
    """The record kernels the task that wrote it ran (kafkalog.client.kernels.KERNELS)."""


def staged_files_batch(files: list[StagedFile]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(
        [
            {
                "kind": f.kind,
                "path": f.path,
                "topic": f.topic,
                "partition": f.partition,
                "rows": f.rows,
                "min_offset": f.min_offset,
                "max_offset": f.max_offset,
                "kernels": f.kernels,
            }
            for f in files
        ],
        schema=STAGED_FILE_SCHEMA,
    )


class _OpenFile:
    """One Parquet file being written, with its unwritten rows."""

    def __init__(self, root: Path, relative: str, schema: pa.Schema, compression: str) -> None:
        self.relative = relative
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        self.writer = pq.ParquetWriter(target, schema, compression=compression)
        self.pending: list[pa.Table] = []
        self.pending_bytes = 0
        self.rows = 0
        self.min_offset: int | None = None
        self.max_offset: int | None = None

    def add(self, table: pa.Table, row_group_bytes: int) -> None:
        offsets = table.column("offset")
        if self.min_offset is None:
            self.min_offset = offsets[0].as_py()
        if "last" in table.column_names:  # ranges [offset, last] of skipped offsets: count the offsets
            lasts = table.column("last")
            self.max_offset = lasts[-1].as_py()
            self.rows += pc.sum(pc.subtract(lasts, offsets)).as_py() + table.num_rows
        else:
            self.max_offset = offsets[-1].as_py()
            self.rows += table.num_rows
        self.pending.append(table)
        self.pending_bytes += table.nbytes
        if self.pending_bytes >= row_group_bytes:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            table = pa.concat_tables(self.pending)
            self.writer.write_table(table, row_group_size=table.num_rows)
            self.pending, self.pending_bytes = [], 0

    def close(self) -> None:
        self.flush()
        self.writer.close()


class StagingWriter:
    """Writes one split's rows (partitioned by dt/hour) and bad records under ``root``, a
    directory no other attempt uses. Call ``close`` for the list of complete files."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        topic: str,
        partition: int,
        compression: str,
        row_group_bytes: int = 8 << 20,
        max_open: int = 8,
    ) -> None:
        self.root = Path(root)
        self.topic = topic
        self.partition = partition
        self.compression = compression
        self.row_group_bytes = row_group_bytes
        self.max_open = max_open
        self._open: OrderedDict[str, _OpenFile] = OrderedDict()
        self._quarantine: _OpenFile | None = None
        self._skipped: dict[str, _OpenFile] = {}
        """Per reason (aborted, control, compacted): the ranges of offsets that hold no row."""
        self._done: list[StagedFile] = []

    def _failed(self, exc: Exception) -> StorageError:
        """An I/O failure (a full disk, a directory that cannot be made) as an error naming the split
        and the attempt's directory (it reaches the driver through Spark; see pipelines.ingest.stage.cause_of)."""
        return StorageError(f"{self.topic}-{self.partition}: writing staged files under {self.root} failed: {exc}")

    def write_rows(self, table: pa.Table) -> None:
        """Rows in offset order, with dt and hour columns (which go into the path, not the file)."""
        if table.num_rows == 0:
            return
        keys = pc.binary_join_element_wise(table.column("dt"), table.column("hour"), "/")
        distinct = pc.unique(keys).to_pylist()
        body = table.drop_columns(list(PARTITION_COLUMNS))
        try:
            for key in distinct:
                part = body if len(distinct) == 1 else body.filter(pc.equal(keys, key))
                self._file_for(key, part).add(part, self.row_group_bytes)
        except OSError as exc:  # pyarrow's I/O errors are OSErrors too
            raise self._failed(exc) from exc

    def write_quarantine(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        try:
            if self._quarantine is None:
                first = table.column("offset")[0].as_py()
                self._quarantine = _OpenFile(self.root, self._name("", first), table.schema, self.compression)
            self._quarantine.add(table, self.row_group_bytes)
        except OSError as exc:
            raise self._failed(exc) from exc

    def write_skipped(self, reason: str, table: pa.Table) -> None:
        """Ranges of offsets skipped for ``reason`` (aborted | control | compacted), in offset order."""
        if table.num_rows == 0:
            return
        try:
            opened = self._skipped.get(reason)
            if opened is None:
                first = table.column("offset")[0].as_py()
                opened = self._skipped[reason] = _OpenFile(
                    self.root, self._name(f"{reason}/", first), table.schema, self.compression
                )
            opened.add(table, self.row_group_bytes)
        except OSError as exc:
            raise self._failed(exc) from exc

    def _file_for(self, key: str, rows: pa.Table) -> _OpenFile:
        found = self._open.get(key)
        if found is not None:
            self._open.move_to_end(key)
            return found
        if len(self._open) >= self.max_open:
            _, oldest = self._open.popitem(last=False)
            self._finish(oldest, "data")
        dt, _, hour = key.partition("/")
        name = self._name(f"dt={dt}/hour={hour}/", rows.column("offset")[0].as_py())
        opened = _OpenFile(self.root, name, rows.schema, self.compression)
        self._open[key] = opened
        return opened

    def _name(self, directory: str, first_offset: int) -> str:
        return f"{directory}part-{self.topic}-{self.partition}-{first_offset}.parquet"

    def _finish(self, item: _OpenFile, kind: str) -> None:
        item.close()
        assert item.min_offset is not None and item.max_offset is not None
        self._done.append(
            StagedFile(kind, item.relative, self.topic, self.partition, item.rows, item.min_offset, item.max_offset)
        )

    def close(self) -> list[StagedFile]:
        """Finish every file; returns all files written, in the order they were completed."""
        try:
            while self._open:
                _, item = self._open.popitem(last=False)
                self._finish(item, "data")
            if self._quarantine is not None:
                self._finish(self._quarantine, "quarantine")
                self._quarantine = None
            while self._skipped:
                reason, item = self._skipped.popitem()
                self._finish(item, reason)
        except OSError as exc:
            raise self._failed(exc) from exc
        return list(self._done)

    def abort(self) -> None:
        """Close what is open without reporting it (the attempt failed; its directory is garbage)."""
        for item in [*self._open.values(), *([self._quarantine] if self._quarantine else []), *self._skipped.values()]:
            # the attempt is failing already; its files are never read
            with contextlib.suppress(OSError, pa.ArrowException):
                item.writer.close()
        self._open.clear()
        self._quarantine = None
        self._skipped.clear()
