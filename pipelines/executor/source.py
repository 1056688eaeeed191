"""The Spark source: one input partition per split; each task reads exactly [start, end) of its split.

Built on PySpark's Python Data Source API. ``read`` runs in a Python worker on an executor: it fetches
its split with kafkalog's SimpleConsumer (every CRC checked, compressed sets unpacked), decodes each
fetched chunk into an Arrow batch (never the whole split in memory), and yields either the rows
(``emit=data``), the bad records (``emit=quarantine``), the offsets that hold no row (``emit=skipped``:
records of aborted transactions and transaction markers a read-committed source skips, and offsets
the log cleaner of a compacted topic removed, as ranges with their reason: pipelines.executor.offsets),
or writes all of them as Parquet itself and yields one row per file (``emit=files``, see sink.py).
Settings arrive as options (JSON strings): executors see nothing of the driver's Python state or
environment.

A task connects through the brokers the driver resolved for the run (``brokers`` in the settings:
the bootstrap list, or for a source that names ZooKeeper the brokers registered when the run
planned), so that tasks open no ZooKeeper session. Only if none of those brokers answers (they moved
since) does a task of a ZooKeeper source bootstrap from ZooKeeper instead, once.

A task that cannot finish its split raises; Spark retries it from the split's start (no partial
progress of a failed attempt is trusted), and the driver's reconciliation checks the result.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from operator import itemgetter
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from kafkalog.client import ClientSecurity, SimpleConsumer
from kafkalog.client.kernels import KERNELS, describe_kernels
from kafkalog.faults import FaultPoints, FaultTarget
from kafkalog.retry import Backoff
from pipelines.config.pipeline import BadRecords, Decoder, EventTime, Source
from pipelines.errors import BadRecordError, DataLossError, LoadError, PlanError
from pipelines.executor.decode import ChunkDecoder
from pipelines.executor.offsets import SKIPPED_DDL, SKIPPED_REASONS, OffsetRange, compacted_gaps, ranges_batch
from pipelines.executor.rows import HEADERS, BadRecord, Message, ddl_of, headers_column, spark_ddl, timestamp_types
from pipelines.executor.sink import STAGED_FILE_DDL, StagingWriter, staged_files_batch
from pipelines.executor.splits import Split, open_consumer
from pipelines.schemas.resolved import RunSchemas

log = logging.getLogger(__name__)

QUARANTINE_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.int64()),
        ("timestamp_type", pa.int32()),
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("headers", HEADERS),
        ("reason", pa.string()),
    ]
)
"""A quarantined message: everything it carried, as the broker gave it (``timestamp`` in ms, -1 for
none; ``timestamp_type`` and ``headers`` as in raw rows), so that it can be replayed once fixed."""
QUARANTINE_DDL = ddl_of(QUARANTINE_SCHEMA)
_NOT_AUTHORIZED = (29, 31)  # TOPIC_ and CLUSTER_AUTHORIZATION_FAILED


class SplitPartition(InputPartition):
    """One split, as Spark hands it to a task."""

    def __init__(self, index: int, split: dict[str, Any]) -> None:
        super().__init__(index)
        self.index = index
        self.split = split


class KafkalogSource(DataSource):
    """``spark.read.format("kafkalog")`` with options spec (JSON), splits (JSON), emit (data |
    quarantine | skipped | files), progress_dir, and for files: stage_dir (a local path) and
    compression."""

    @classmethod
    def name(cls) -> str:
        return "kafkalog"

    def schema(self) -> str:
        emit = self.options.get("emit", "data")
        if emit == "quarantine":
            return QUARANTINE_DDL
        if emit == "files":
            return STAGED_FILE_DDL
        if emit == "skipped":
            return SKIPPED_DDL
        return spark_ddl(Decoder.from_settings(json.loads(self.options["spec"])["decoder"]), schemas_of(self.options))

    def reader(self, schema: Any) -> DataSourceReader:
        return SplitReader(dict(self.options))


def schemas_of(options: Mapping[str, str]) -> RunSchemas | None:
    """The run's schemas the driver sent (pipelines.schemas.resolved), for a decoder that reads them."""
    text = options.get("schemas")
    return None if not text else RunSchemas.from_json(text)


def source_of(source: dict[str, Any], options: dict[str, str]) -> Source:
    """The Source the driver sent, its secrets from their own options (pipelines.ingest.stage)."""
    security = source["security"]
    paths = {key: None if security[key] is None else Path(security[key]) for key in ("ca_file", "certificate", "key")}
    secrets = {key: options.get(f"source_{key}") or None for key in ("password", "key_password")}
    return Source(**{
        **source,
        "bootstrap": None if source["bootstrap"] is None else tuple(source["bootstrap"]),
        "security": ClientSecurity(**{**security, **paths, **secrets}),
    })  # fmt: skip


class SplitReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.options = options

    def partitions(self) -> list[InputPartition]:
        return [SplitPartition(i, split) for i, split in enumerate(json.loads(self.options["splits"]))]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, SplitPartition)
        settings = json.loads(self.options["spec"])
        split = Split(**partition.split)
        emit = self.options.get("emit", "data")
        _log_kernels()
        progress = _Progress(self.options.get("progress_dir"), partition.index, split)
        fault = _TaskFault(self.options.get("faults", ""))
        task = SplitTask(
            source_of(settings["source"], self.options),
            Decoder.from_settings(settings["decoder"]),
            EventTime(**settings["event_time"]),
            BadRecords(**settings["bad_records"]),
            split,
            brokers=settings["brokers"],
            schemas=schemas_of(self.options),
        )
        if emit == "files":
            yield write_split(
                task,
                self.options["stage_dir"],
                self.options.get("compression", "snappy"),
                partition.index,
                progress,
                fault,
            )
            return
        for chunk in task.chunks():
            if emit == "quarantine":
                if chunk.bad:
                    yield quarantine_batch(split, chunk.bad)
            elif emit == "skipped":
                for reason in SKIPPED_REASONS:
                    ranges = skipped_batch(split, chunk.skipped, reason)
                    if ranges.num_rows:
                        yield ranges.append_column("reason", pa.repeat(reason, ranges.num_rows).cast(pa.string()))
            else:
                yield from chunk.rows.to_batches()
                fault.after_rows(chunk.rows.num_rows)
            progress.update(task.done, task.bytes)
        progress.update(task.done, task.bytes, done=True)


def write_split(
    task: SplitTask,
    stage_dir: str,
    compression: str,
    index: int,
    progress: _Progress | None = None,
    fault: _TaskFault | None = None,
) -> pa.RecordBatch:
    """``emit=files``: the task writes its split as Parquet under a directory of its own inside
    ``stage_dir`` (a local path) and returns one row per complete file (see sink.py)."""
    progress = progress or _Progress(None, index, task.split)
    fault = fault or _TaskFault("")
    attempt_dir = f"tasks/{index}-{uuid.uuid4().hex[:12]}"
    split = task.split
    writer = StagingWriter(
        Path(stage_dir) / attempt_dir,
        topic=split.topic,
        partition=split.partition,
        compression=compression,
    )
    try:
        for chunk in task.chunks():
            writer.write_rows(chunk.rows)
            if chunk.bad:
                writer.write_quarantine(pa.Table.from_batches([quarantine_batch(split, chunk.bad)]))
            for reason in SKIPPED_REASONS if chunk.skipped else ():
                writer.write_skipped(reason, pa.Table.from_batches([skipped_batch(split, chunk.skipped, reason)]))
            fault.after_rows(chunk.rows.num_rows)
            progress.update(task.done, task.bytes)
        files = writer.close()
    except BaseException:
        writer.abort()
        raise
    progress.update(task.done, task.bytes, done=True)
    return staged_files_batch([replace(f, path=f"{attempt_dir}/{f.path}", kernels=KERNELS) for f in files])


_kernels_logged: list[bool] = []


def _log_kernels() -> None:
    """Once per Python worker: which record kernels its tasks decode with (a warning if not the C
    ones: a task then decodes several times slower than the driver; pipelines.app.ship says how to
    ship them)."""
    if _kernels_logged:
        return
    _kernels_logged.append(True)
    if KERNELS == "C":
        log.info("executor %s", describe_kernels())
    else:
        log.warning("executor %s; ship them with the archive of `python -m pipelines.app.ship`", describe_kernels())


def quarantine_batch(split: Split, bad: list[BadRecord]) -> pa.RecordBatch:
    """The quarantine rows (QUARANTINE_SCHEMA) of a split's bad records."""
    stamps = pa.array([b.timestamp for b in bad], pa.int64())
    return pa.RecordBatch.from_pydict(
        {
            "topic": [split.topic] * len(bad),
            "partition": [split.partition] * len(bad),
            "offset": [b.offset for b in bad],
            "timestamp": stamps,
            "timestamp_type": timestamp_types(stamps, [b.timestamp_type for b in bad]),
            "key": [b.key for b in bad],
            "value": [b.value for b in bad],
            "headers": headers_column([b.headers for b in bad]),
            "reason": [b.reason for b in bad],
        },
        schema=QUARANTINE_SCHEMA,
    )


def skipped_batch(split: Split, skipped: Sequence[OffsetRange], reason: str) -> pa.RecordBatch:
    """OFFSET_RANGES_SCHEMA rows (pipelines.executor.offsets) of ``skipped``'s ranges of ``reason``."""
    return ranges_batch(split.topic, split.partition, [s for s in skipped if s.reason == reason])


class Chunk(NamedTuple):
    """What one fetch of a split gave: together, every offset from where it began up to where the
    next one begins, once."""

    rows: pa.Table
    bad: list[BadRecord]
    skipped: list[OffsetRange]
    """The offsets that hold no row, in offset order: aborted records and markers (reading
    committed), and what compaction removed (pipelines.executor.offsets)."""


class SplitTask:
    """Reads one split: fetch, account for every offset (rows, bad records, skipped, compacted),
    decode, apply the bad-record policy. Connects through ``brokers`` (what the driver resolved;
    default: the source's bootstrap list, or its ZooKeeper). ``schemas``: the run's, for a decoder
    whose columns come from them (the driver read them; the task never asks a registry)."""

    def __init__(
        self,
        source: Source,
        decoder: Decoder,
        event_time: EventTime,
        bad: BadRecords,
        split: Split,
        *,
        brokers: Sequence[str] | None = None,
        consumer: Callable[[], SimpleConsumer] | None = None,
        schemas: RunSchemas | None = None,
    ) -> None:
        self.source = source
        self.split = split
        self.brokers = list(brokers or source.bootstrap or ())
        self.bad_policy = bad
        self.decoder = ChunkDecoder(decoder, event_time, split.topic, split.partition, schemas)
        self.loaded = 0
        self.quarantined = 0
        self.skipped = 0
        """Offsets skipped reading committed: aborted records and transaction markers."""
        self.compacted = 0
        """Offsets the log cleaner removed (a compacted topic): no record is there any more."""
        self.done = 0
        """Offsets of the split accounted for so far, of every kind: the task's progress."""
        self.bytes = 0
        self.from_zookeeper = not self.brokers
        """The task bootstrapped from ZooKeeper (no brokers were given, or none of them answered)."""
        self._consumer: Any = None
        self._open = consumer or (lambda: open_consumer(self.source, self.brokers))
        self._policy_checked = False
        """The topic's cleanup.policy was read once (at the first gap) and says compact."""

    def chunks(self) -> Iterator[Chunk]:
        """One Chunk per fetch, covering [start, end) exactly between them, in offset order."""
        split = self.split
        self._consumer = self._open()
        try:
            offset = split.start
            while offset < split.end:
                messages, skipped, broker, last = self._fetch(offset)
                offsets = np.fromiter(map(itemgetter(0), messages), np.int64, len(messages))
                gaps = compacted_gaps(offset, last, offsets, skipped, where=split.name)
                if gaps:
                    self._check_compacted(gaps[0])
                if messages:
                    table, bad = self.decoder.decode(messages, broker)
                    self._judge(bad)
                else:  # only markers, aborted records or removed offsets here
                    table, bad = self.decoder.schema.empty_table(), []
                self.loaded += len(messages)
                self.skipped += sum(s.offsets for s in skipped)
                self.compacted += sum(g.offsets for g in gaps)
                self.bytes += sum(map(len, filter(None, map(itemgetter(4), messages))))  # value bytes
                self.done = last + 1 - split.start
                offset = last + 1
                yield Chunk(table, bad, sorted([*skipped, *gaps]))
        finally:
            self._consumer.close()

    def _check_compacted(self, gap: OffsetRange) -> None:
        """The first gap of the task: missing offsets are compaction only on a topic whose
        cleanup.policy says compact. Where the broker says otherwise they are loss, and the split
        fails; where it cannot tell (a broker without DescribeConfigs v1+, before Kafka 1.1; a
        principal without the DescribeConfigs ACL) the gap is taken as compaction."""
        if self._policy_checked:
            return
        from kafkalog.errors import BrokerResponseError, KafkalogError  # noqa: PLC0415

        split = self.split
        try:
            configs = self._consumer.topic_configs(split.topic, ["cleanup.policy"])
        except BrokerResponseError as exc:
            if exc.error_code not in _NOT_AUTHORIZED:
                raise LoadError(f"{split.name}: offsets {gap.first}-{gap.last} are missing and the topic's "
                                f"cleanup.policy cannot be read ({exc})") from exc  # fmt: skip
            # a principal that may read the topic but not describe its configs (DescribeConfigs
            # needs its own ACL): it cannot tell, as an old broker cannot
            log.warning(
                "%s: offsets %d-%d are missing; the topic's cleanup.policy is not readable by this principal (%s): "
                "taken as compaction", split.name, gap.first, gap.last, exc.error_name,
            )  # fmt: skip
            configs = None
        except KafkalogError as exc:
            raise LoadError(f"{split.name}: offsets {gap.first}-{gap.last} are missing and the topic's "
                            f"cleanup.policy cannot be read ({exc})") from exc  # fmt: skip
        policy = None if configs is None else configs.get("cleanup.policy")
        if policy is not None and "compact" not in policy:
            raise LoadError(
                f"{split.name}: offsets {gap.first}-{gap.last} are missing from the log, and the topic's "
                f"cleanup.policy is {policy!r}, not compact: records were lost (a broker that removed them), "
                "so nothing of this split is loaded"
            )
        self._policy_checked = True

    def _fetch(self, offset: int) -> tuple[list[Message], list[OffsetRange], int, int]:
        """The next messages of the split from ``offset``, the ranges a read-committed source skips
        among them, the leader that served them, and the last offset the fetch accounted for (at
        least ``offset``: past its messages when compaction removed what follows them); retrying a
        broker that is down or moved for up to ``retry_ms``, and a fetch that accounts for nothing
        (the records are not there yet) as long."""
        from kafkalog.errors import KafkalogError, OffsetOutOfRangeError  # noqa: PLC0415

        split = self.split
        backoff = Backoff(first=0.1, cap=2.0, budget_s=self.source.retry_ms / 1000)
        while True:
            consumer = self._consumer
            try:
                result = consumer.fetch(split.topic, split.partition, offset)
                broker = consumer.client.topic(split.topic).leaders.get(split.partition, -1)
            except OffsetOutOfRangeError as exc:
                raise DataLossError(
                    split.topic, split.partition, offset, exc.log_start_offset, exc.log_end_offset
                ) from exc
            except KafkalogError as exc:
                if self._rediscover():
                    continue
                consumer.client.invalidate(split.topic)
                if not backoff.wait():
                    raise LoadError(
                        f"{split.name}: fetching offset {offset} failed for {self.source.retry_ms} ms: {exc}"
                    ) from exc
                continue
            messages: list[Message] = result.messages
            # How far the fetch read: its last batch, which may end in offsets compaction removed
            # or be a batch it emptied; the records past the split's end that a fetch returns
            # prove as much (a fetch from a removed offset returns the next record that is left).
            # Never beyond the split: what lies there is the next run's.
            last = max(
                result.last_offset,
                messages[-1].offset if messages else -1,
                max((s.last for s in result.skipped), default=-1),
            )
            if messages and messages[-1].offset >= split.end:
                messages = [m for m in messages if m.offset < split.end]
            skipped = [
                OffsetRange(max(s.first, offset), min(s.last, split.end - 1), s.reason)
                for s in result.skipped
                if s.last >= offset and s.first < split.end
            ]
            if last >= offset:
                return messages, skipped, broker, min(last, split.end - 1)
            # Nothing at or after ``offset`` came back: not compaction (the records the split
            # was planned up to are not readable yet, or gone), so never counted as done.
            if result.high_watermark < split.end and offset >= result.high_watermark:
                raise PlanError(
                    f"{split.name}: planned end offset {split.end} > log end {result.high_watermark}; the broker "
                    "lost messages after the run was planned"
                )
            if backoff.spent:
                raise LoadError(f"{split.name}: no message at offset {offset} for {self.source.retry_ms} ms")

    def _rediscover(self) -> bool:
        """For a source that names ZooKeeper, when none of the brokers the driver shipped answers (the
        cluster moved since the run planned): bootstrap from ZooKeeper instead, once per task.
        True if the task now has a new consumer."""
        from kafkalog.errors import KafkaConnectionError, KafkalogError  # noqa: PLC0415

        if self.source.zookeeper is None or self.from_zookeeper:
            return False
        try:
            self._consumer.client.any_broker()
        except KafkaConnectionError:
            pass  # nobody answers: ask the registry
        else:
            return False  # the cluster answers (a leader is down or moved): retrying is what helps
        self.from_zookeeper = True
        try:
            fresh = open_consumer(self.source)
        except KafkalogError:
            return False  # ZooKeeper is unreachable too: go on retrying the brokers
        self._consumer.close()
        self._consumer = fresh
        return True

    def _judge(self, bad: list[BadRecord]) -> None:
        if not bad:
            return
        split = self.split
        if self.bad_policy.policy == "fail":
            first = bad[0]
            raise BadRecordError(
                f"{split.name} offset {first.offset}{_key_text(first.key)} cannot be decoded: "
                f"{_reason_text(first.reason)}; bad_records.policy is fail, so the run stops and commits nothing. "
                "To load the rest, set bad_records.policy: quarantine and run again: such messages are then kept "
                "aside with their bytes and reason, in the raw layer's _quarantine/"
            )
        self.quarantined += len(bad)
        allowed = self.bad_policy.max_share * split.size
        if self.quarantined > allowed:
            raise BadRecordError(
                f"{split.name}: {self.quarantined} bad records so far, more than bad_records.max_share="
                f"{self.bad_policy.max_share} of the split's {split.size} messages (latest at offset "
                f"{bad[-1].offset}: {bad[-1].reason})"
            )


def _key_text(key: bytes | None) -> str:
    """`` (key '57')`` for an error line: the key as text if it is short printable UTF-8, else its size."""
    if key is None:
        return ""
    try:
        text = key.decode("utf-8")
    except UnicodeDecodeError:
        return f" (a {len(key)}-byte binary key)"
    return f" (key {text!r})" if len(text) <= 60 and text.isprintable() else f" (a {len(key)}-byte key)"


def _reason_text(reason: str) -> str:
    """A decoder's reason on one line, without Arrow's "in row 0" (the message was parsed alone)."""
    return " ".join(reason.replace(" in row 0", "").split())


class _Progress:
    """Writes a task's progress where the driver can see it (a local directory; on a remote cluster
    the directory does not exist on the executor and progress is only per task, from Spark)."""

    def __init__(self, directory: str | None, index: int, split: Split) -> None:
        self.path = Path(directory) / f"{index}.json" if directory and Path(directory).is_dir() else None
        self.split = split
        self.last = 0.0
        self.started = time.monotonic()

    def update(self, messages: int, size: int, *, done: bool = False) -> None:
        """``messages``: the split's offsets done so far (rows, bad records, skipped and compacted
        offsets alike), which the driver's bars count against the split's size; ``size``: value bytes."""
        now = time.monotonic()
        if self.path is None or (not done and now - self.last < 0.5):
            return
        self.last = now
        temp = self.path.with_suffix(f".{os.getpid()}.tmp")
        temp.write_text(json.dumps({"messages": messages, "bytes": size, "seconds": now - self.started, "done": done}))
        temp.replace(self.path)  # progress only: overwriting the previous report is the point


TASK_FAULTS = ("fail_after_rows", "exit_after_rows")
"""The points of the job option ``faults`` (a test hook, kafkalog.faults' grammar): a task reaches
both once per row it produces; ``fail_after_rows@N`` raises and ``exit_after_rows@N`` kills the
Python worker at the N-th row, in the first attempt of every task only (the retry then succeeds)."""


class _TaskFault:
    """The task faults of one task (none when the option is empty)."""

    def __init__(self, target: str) -> None:
        self.points = FaultPoints("faults", TASK_FAULTS, self._fail, target=target) if target else None

    @staticmethod
    def _fail(target: FaultTarget) -> None:
        if target.name == "exit_after_rows":
            os._exit(1)
        raise RuntimeError(f"injected task failure at {target} (the job option faults)")

    def after_rows(self, rows: int) -> None:
        if self.points is None:
            return
        from pyspark import TaskContext  # noqa: PLC0415

        context = TaskContext.get()
        if context is None or context.attemptNumber() != 0:
            return
        for name in TASK_FAULTS:
            self.points.reach(name, rows)
