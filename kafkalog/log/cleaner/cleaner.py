"""The cleaner thread: picks the dirtiest compacted log, cleans it, remembers where it stopped.

One thread per broker (Kafka's default of ``log.cleaner.threads``). Each round it looks at every log
whose cleanup.policy includes compact and cleans the one with the highest dirty ratio among those
at or above their ``min.cleanable.dirty.ratio``, or first any whose oldest dirty segment is older
than its ``max.compaction.lag.ms``; with none, it sleeps ``backoff_ms``. After a pass the log's
first dirty offset (where the next pass starts reading) is written to the data directory's
``cleaner-offset-checkpoint`` (Kafka's name and text layout). A lost or unreadable checkpoint is
safe: the log is read again from its start.

The delete horizon. A tombstone, and a transaction marker whose data is gone, stay at least
``delete.retention.ms`` after the pass that first cleaned them, by the broker's clock (Kafka's
rule, before KIP-534 wrote the horizon into the batches): never in that first pass, and never
judged by the records' own timestamps (a mirror or a restore writes old ones). Each pass notes
(its end offset, its time) in the data directory's ``cleaner-horizons`` (JSON, replaced
atomically; kept short by ``_note_pass``); a log's horizon offset is the highest end of the passes
at least ``delete.retention.ms`` old, and only entries wholly below it lose their tombstones. Lost,
the notes start again: tombstones then stay longer, never shorter. A truncation pulls the notes
and the first dirty offset back to the end it left (``Log.take_truncation``; at start-up, every
entry is pulled back to its log's end, for a truncation made with the broker stopped).

A log whose pass fails (an I/O error, damage the cleaner cannot read) is logged and left alone for
ten backoffs; the others go on being cleaned. Stopping interrupts a pass between batches; nothing
of an unfinished group is swapped in.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kafkalog.errors import LogClosedError, LogError, StorageError
from kafkalog.log.checkpoint import read_checkpoint, write_checkpoint
from kafkalog.log.cleaner.clean import (
    CleanerStoppedError,
    CleanStats,
    build_offset_map,
    clean_segments,
    cleanable_part,
)
from kafkalog.log.cleaner.offset_map import OffsetMap
from kafkalog.log.cleaner.settings import CleanerSettings
from kafkalog.log.files import write_atomically
from kafkalog.log.log import Clock, Log, wall_clock_ms
from kafkalog.log.segment import SegmentDeletedError
from kafkalog.topics import TopicPartition

logger = logging.getLogger(__name__)

CLEANER_CHECKPOINT_FILE = "cleaner-offset-checkpoint"
HORIZONS_FILE = "cleaner-horizons"
_HORIZONS_VERSION = 1
_FAILED_PAUSE_BACKOFFS = 10

LogsProvider = Callable[[], list[tuple[TopicPartition, Log, Path]]]
"""Every open log, its partition and its data directory (the LogManager's)."""


@dataclass(frozen=True)
class PassResult:
    """One finished pass: which log, from where to where, and what it did."""

    partition: TopicPartition
    dirty_ratio: float
    first_dirty: int
    map_end: int
    stats: CleanStats


class LogCleaner:
    """Compacts the logs ``logs`` provides (see the module doc). ``clean_once`` is one round,
    for tests and tools; ``start`` runs rounds in a thread until ``stop``."""

    def __init__(
        self, settings: CleanerSettings, logs: LogsProvider, data_dirs: list[Path], *, clock: Clock = wall_clock_ms
    ) -> None:
        self.settings = settings
        self._logs = logs
        self.clock = clock
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._map: OffsetMap | None = None
        # only the entries of logs there are, where they are (a deleted topic's must not come
        # back), and never past a log's end (a truncation made offline)
        ends = {(partition, data_dir): log.log_end_offset for partition, log, data_dir in logs()}
        self._first_dirty: dict[Path, dict[TopicPartition, int]] = {
            data_dir: {
                p: min(o, ends[(p, data_dir)])
                for p, o in read_checkpoint(data_dir / CLEANER_CHECKPOINT_FILE).items()
                if (p, data_dir) in ends
            }
            for data_dir in data_dirs
        }
        self._horizons: dict[Path, dict[TopicPartition, list[tuple[int, int]]]] = {
            data_dir: {
                p: [(min(end, ends[(p, data_dir)]), at) for end, at in marks]
                for p, marks in _read_horizons(data_dir / HORIZONS_FILE).items()
                if (p, data_dir) in ends
            }
            for data_dir in data_dirs
        }
        self._failed_until: dict[TopicPartition, float] = {}
        self.passes = 0
        self.last: PassResult | None = None
        self._totals = {"bytes_read_total": 0.0, "bytes_written_total": 0.0, "records_removed_total": 0.0}
        self._longest_swap_ms = 0.0

    # ------------------------------------------------------------------ state

    def first_dirty(self, partition: TopicPartition) -> int:
        """Where the next pass over ``partition`` starts reading (0 if none ran)."""
        with self._lock:
            return next((d[partition] for d in self._first_dirty.values() if partition in d), 0)

    def _start_of(self, partition: TopicPartition, log: Log) -> int:
        """The first dirty offset (the log start if it lies past the log's end)."""
        first = self.first_dirty(partition)
        return first if first <= log.log_end_offset else log.log_start_offset

    def _absorb_truncation(self, partition: TopicPartition, log: Log, data_dir: Path) -> None:
        """A truncation replaced what lies past the end it left: the next pass reads from there,
        and no note says data past it was cleaned."""
        end = log.take_truncation()
        if end is None:
            return
        with self._lock:
            offsets = self._first_dirty.setdefault(data_dir, {})
            if partition in offsets:
                offsets[partition] = min(offsets[partition], end)
            marks = self._horizons.setdefault(data_dir, {}).get(partition)
            if marks:
                marks[:] = [(min(mark_end, end), at) for mark_end, at in marks]
            self._write_state(data_dir)

    def horizon_offset(self, partition: TopicPartition, log: Log, now: int) -> int:
        """The offset below which tombstones and emptied markers may go (see the module doc)."""
        cutoff = now - log.config.delete_retention_ms
        with self._lock:
            marks = next((h[partition] for h in self._horizons.values() if partition in h), [])
            return max((end for end, at in marks if at <= cutoff), default=0)

    def forget(self, topic: str) -> None:
        """A topic was deleted: its partitions' entries go, from the files too."""
        with self._lock:
            for data_dir in self._first_dirty:
                offsets, horizons = self._first_dirty[data_dir], self._horizons.get(data_dir, {})
                gone = [p for p in {*offsets, *horizons} if p[0] == topic]
                for partition in gone:
                    offsets.pop(partition, None)
                    horizons.pop(partition, None)
                if gone:
                    self._write_state(data_dir)

    @staticmethod
    def _note_pass(marks: list[tuple[int, int]], end: int, now: int, log: Log) -> None:
        """Add (end, now) to a log's notes, kept short: the notes at least delete.retention.ms old
        become their highest one; a pass within a sixteenth of it of the last note replaces that
        note (its later time: tombstones then stay a little longer, never shorter)."""
        retention = log.config.delete_retention_ms
        if marks and now - marks[-1][1] < retention / 16:
            marks[-1] = (max(end, marks[-1][0]), now)
        else:
            marks.append((end, now))
        aged = [mark for mark in marks if mark[1] <= now - retention]
        if aged:
            marks[:] = [max(aged), *(mark for mark in marks if mark[1] > now - retention)]

    def _write_state(self, data_dir: Path) -> None:
        """The checkpoint and the horizons of ``data_dir`` (under the lock)."""
        try:
            write_checkpoint(data_dir / CLEANER_CHECKPOINT_FILE, dict(self._first_dirty.get(data_dir, {})))
            _write_horizons(data_dir / HORIZONS_FILE, self._horizons.get(data_dir, {}))
        except StorageError as exc:  # a pass stands; the next one just reads more, keeps more
            logger.warning("cannot write the cleaner's state in %s: %s", data_dir, exc)

    def metrics(self) -> dict[str, float]:
        """What the broker's /metrics shows of the cleaner (``kafkalog_cleaner_<name>``)."""
        last = self.last
        return {
            "passes_total": self.passes,
            **self._totals,
            "longest_swap_ms": self._longest_swap_ms,
            "last_pass_mb_per_second": last.stats.mb_per_s if last is not None else 0.0,
            "offset_map_bytes": self.map_memory_bytes,
        }

    @property
    def map_memory_bytes(self) -> int:
        """The offset map's memory (0 until the first pass needed it)."""
        return self._map.memory_bytes if self._map is not None else 0

    # ------------------------------------------------------------------ a round

    def clean_once(self, now: int | None = None) -> PassResult | None:
        """Clean the log that needs it most, if any; None when no log does."""
        now = self.clock() if now is None else now
        chosen = self._choose(now)
        if chosen is None:
            return None
        partition, log, data_dir = chosen
        try:
            return self._clean(partition, log, data_dir, now)
        except (CleanerStoppedError, LogClosedError, SegmentDeletedError):
            return None  # stopping, or the log changed under the pass (retention, deletion): next round
        except (LogError, OSError, ValueError) as exc:
            # ValueError: the kernels met bytes they cannot read (damage: verification names it)
            logger.error("cleaning %s-%d failed; it is left alone for a while: %s", *partition, exc)  # noqa: TRY400
            self._failed_until[partition] = time.monotonic() + _FAILED_PAUSE_BACKOFFS * self.settings.backoff_ms / 1000
            return None

    def _choose(self, now: int) -> tuple[TopicPartition, Log, Path] | None:
        best: tuple[tuple[bool, float], TopicPartition, Log, Path] | None = None
        for partition, log, data_dir in self._logs():
            config = log.config
            if not config.compact or self._failed_until.get(partition, 0) > time.monotonic():
                continue
            if log.index_failure is not None or log.corruption is not None:
                continue  # quarantined: opened again, it is cleaned again
            self._absorb_truncation(partition, log, data_dir)
            part = cleanable_part(log, self._start_of(partition, log), now)
            if not part.dirty_bytes:
                continue
            overdue = config.max_compaction_lag_ms is not None and any(
                s.next_offset > part.dirty_from and 0 <= s.max_timestamp < now - config.max_compaction_lag_ms
                for s in part.segments
            )
            if not overdue and part.dirty_ratio < config.min_cleanable_dirty_ratio:
                continue
            rank = (overdue, part.dirty_ratio)
            if best is None or rank > best[0]:
                best = (rank, partition, log, data_dir)
        return None if best is None else best[1:]

    def _clean(self, partition: TopicPartition, log: Log, data_dir: Path, now: int) -> PassResult:
        settings = self.settings
        if self._map is None:
            self._map = OffsetMap(settings.dedupe_buffer_bytes, settings.load_factor)
        part = cleanable_part(log, self._start_of(partition, log), now)
        horizon = self.horizon_offset(partition, log, now)
        stats = CleanStats()
        map_end = build_offset_map(log, part, self._map, stats, settings.io_buffer_bytes, self._stop)
        finished = clean_segments(log, part, map_end, self._map, horizon, stats, settings.io_buffer_bytes, self._stop)
        stats.elapsed_s = time.monotonic() - stats.started
        with self._lock:
            # not after a truncation meanwhile (the next pass takes it), nor for a log closed
            # meanwhile (a deleted topic: forget() took this lock after closing it)
            if finished and not log.closed and not log.truncated_since_taken:
                self._first_dirty.setdefault(data_dir, {})[partition] = map_end
                self._note_pass(self._horizons.setdefault(data_dir, {}).setdefault(partition, []), map_end, now, log)
                self._write_state(data_dir)
        result = PassResult(partition, part.dirty_ratio, part.dirty_from, map_end, stats)
        self.passes += 1
        self.last = result
        self._totals["bytes_read_total"] += stats.bytes_read
        self._totals["bytes_written_total"] += stats.bytes_written
        self._totals["records_removed_total"] += stats.records_read - stats.records_kept
        self._longest_swap_ms = max(self._longest_swap_ms, stats.longest_swap_ms)
        logger.info(
            "cleaned %s-%d (dirty ratio %.2f, offsets %d-%d in the map): %d of %d records kept, %.1f MB read in "
            "%.2f s (%.1f MB/s), %d segment(s) into %d, longest swap %.1f ms, offset map %d keys in %.1f MB",
            *partition, part.dirty_ratio, part.dirty_from, map_end, stats.records_kept, stats.records_read,
            stats.bytes_read / 1e6, stats.elapsed_s, stats.mb_per_s, stats.segments_cleaned,
            stats.segments_written, stats.longest_swap_ms, stats.map_records, self._map.memory_bytes / 1e6,
        )  # fmt: skip
        return result

    # ------------------------------------------------------------------ the thread

    def start(self) -> None:
        if self._thread is not None or not self.settings.enabled:
            return
        self._thread = threading.Thread(target=self._run, name="kafkalog-log-cleaner", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                result = self.clean_once()
            except Exception:
                logger.exception("the log cleaner's round failed; retrying after its backoff")
                result = None
            if result is None or result.map_end <= result.first_dirty:
                self._stop.wait(self.settings.backoff_ms / 1000)  # nothing to do, or no way forward now

    def stop(self) -> None:
        """Stop the thread, interrupting a pass between batches."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None


def _read_horizons(path: Path) -> dict[TopicPartition, list[tuple[int, int]]]:
    """The notes of ``path`` (see the module doc); empty, with a warning, if unreadable."""
    found: dict[TopicPartition, list[tuple[int, int]]] = {}
    try:
        document = json.loads(path.read_bytes())
        if document.get("format_version") != _HORIZONS_VERSION:
            raise ValueError(f"unknown format_version {document.get('format_version')!r}")
        for name, marks in document["partitions"].items():
            topic, _, partition = name.rpartition(" ")
            found[(topic, int(partition))] = [(int(end), int(at)) for end, at in marks]
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        logger.warning("ignoring %s (%s): tombstones stay until new passes age", path, exc)
        return {}
    return found


def _write_horizons(path: Path, horizons: dict[TopicPartition, list[tuple[int, int]]]) -> None:
    partitions = {f"{topic} {partition}": marks for (topic, partition), marks in sorted(horizons.items())}
    document = {"format_version": _HORIZONS_VERSION, "partitions": partitions}
    write_atomically(path, json.dumps(document).encode(), crash_prefix="cleaner.horizons")
