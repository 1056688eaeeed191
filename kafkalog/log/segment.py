"""LogSegment: one .log file of message-set entries, its two sparse indexes and its aborted transactions.

A segment holds the entries with offsets from ``base_offset`` up to (not including) the next
segment's base offset, back to back from byte 0 to ``size``. Only the last segment of a log (the
active one) is appended to; every other one is sealed: its bytes and indexes were fsynced when the
log rolled past it, so a sealed segment is never the victim of a torn write.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

from kafkalog.errors import CorruptSegmentError, LogError, StorageError
from kafkalog.log.config import LogConfig
from kafkalog.log.faults import crash_point
from kafkalog.log.files import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    segment_path,
)
from kafkalog.log.index import CorruptIndexError, OffsetIndex, TimeIndex
from kafkalog.log.region import FileRegion
from kafkalog.log.scan import ScanResult, scan_file
from kafkalog.log.txn_index import TransactionIndex
from kafkalog.record import batch_format as batches
from kafkalog.record.validate import ValidatedSet

logger = logging.getLogger(__name__)

_HEADER = 12
_MAGIC_POS = batches.MAGIC_POS
_BATCH_MAGIC = batches.MAGIC
_LAST_DELTA_POS = batches.LAST_OFFSET_DELTA_POS
_BATCH_HEADER = _LAST_DELTA_POS + 4  # the bytes of a batch up to its last offset delta
_WALK_CHUNK = 64 * 1024
_MAX_RELATIVE_OFFSET = 2**31 - 1
_UNKNOWN_END = 1 << 62


class SegmentDeletedError(LogError):
    """The segment was deleted (retention) between finding it and reading it: look again."""


class LogSegment:
    """One segment file and its indexes.

    Changes (append, seal, truncate, rebuild, delete) come from the owning Log under its lock.
    Reads may run concurrently: they take this segment's small lock only to look up the index and
    to duplicate the file descriptor, then read through their own descriptor, so a concurrent
    delete cannot pull the file out from under them. The first ``verified_size`` bytes are known
    valid in this process (appended here, or scanned); reads beyond that verify first, once.
    """

    def __init__(self, directory: Path, base_offset: int, config: LogConfig, *, create: bool) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.config = config
        self.log_path = segment_path(directory, base_offset, LOG_SUFFIX)
        self.index_path = segment_path(directory, base_offset, INDEX_SUFFIX)
        self.time_index_path = segment_path(directory, base_offset, TIME_INDEX_SUFFIX)
        self.txn_index_path = segment_path(directory, base_offset, TXN_INDEX_SUFFIX)
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        try:
            self._fd = os.open(self.log_path, flags, 0o644)
        except OSError as exc:
            raise StorageError(f"cannot open segment {self.log_path}: {exc}") from exc
        self.size = os.fstat(self._fd).st_size
        self.next_offset = base_offset  # exact for the active segment; the Log sets sealed ones
        self.verified_size = 0
        self.bytes_since_index = config.index_interval_bytes  # index the first entry
        self.first_append_ms: int | None = None
        self.corruption: CorruptSegmentError | None = None
        self._max_timestamp: int | None = -1 if create else None  # None: not known yet
        self._offset_of_max = -1
        self._offset_index: OffsetIndex | None = None
        self._time_index: TimeIndex | None = None
        self._active = False
        self._lock = threading.RLock()
        self._closed = False
        self.on_corruption: Callable[[CorruptSegmentError], None] | None = None
        self.txn_index_lost = False
        """The .txnindex was unreadable and is gone: the log rebuilds it from a full replay."""
        try:
            self.txn_index = TransactionIndex(self.txn_index_path)
        except CorruptIndexError as exc:
            logger.warning("removing %s, to be rebuilt from the log: %s", self.txn_index_path, exc)
            self.txn_index_path.unlink()
            self.txn_index = TransactionIndex(self.txn_index_path)
            self.txn_index_lost = True

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path.name}, size={self.size}, next_offset={self.next_offset})"

    # ------------------------------------------------------------------ indexes

    def _indexes(self) -> tuple[OffsetIndex, TimeIndex]:
        """The indexes, opened (and checked, or rebuilt) on first use."""
        with self._lock:
            if self._closed:
                # Deleted by retention (or closed) after the caller found it: never reopen (or
                # recreate) the files of a deleted segment.
                raise SegmentDeletedError(f"{self.log_path} was deleted")
            if self._offset_index is None or self._time_index is None:
                self._load_indexes()
            assert self._offset_index is not None and self._time_index is not None
            return self._offset_index, self._time_index

    def _load_indexes(self) -> None:
        problem = None
        max_bytes = self.config.index_max_bytes
        try:
            missing = not self.index_path.exists() or not self.time_index_path.exists()
            self._offset_index = OffsetIndex(self.index_path, self.base_offset, max_bytes=max_bytes, writable=False)
            self._time_index = TimeIndex(self.time_index_path, self.base_offset, max_bytes=max_bytes, writable=False)
            # The active segment's end is not known until its tail is scanned: activate() checks it.
            end = _UNKNOWN_END if self._active else self.next_offset
            if missing and self.size:
                problem = "an index file is missing"
            else:
                problem = self._offset_index.problem(self.size) or self._time_index.problem(end)
        except CorruptIndexError as exc:
            problem = str(exc)
        if problem is not None:
            logger.warning("rebuilding the indexes of %s: %s", self.log_path, problem)
            self.rebuild_indexes()
        elif self._max_timestamp is None:
            last = self._time_index.last() if self._time_index else None
            self._max_timestamp, self._offset_of_max = last if last else (-1, -1)
        if self._active:
            self._open_indexes_writable()

    def _open_indexes_writable(self) -> None:
        assert self._offset_index is not None and self._time_index is not None
        self._offset_index.make_writable(self.config.index_max_bytes)
        self._time_index.make_writable(self.config.index_max_bytes)

    def rebuild_indexes(self) -> ScanResult:
        """Scan the whole .log, validating it, and rebuild both indexes from what is valid."""
        with self._lock:
            for index in (self._offset_index, self._time_index):
                if index is not None:
                    index.close(trim=False)
            for path in (self.index_path, self.time_index_path):
                path.unlink(missing_ok=True)
            max_bytes = self.config.index_max_bytes
            self._offset_index = OffsetIndex(self.index_path, self.base_offset, max_bytes=max_bytes, writable=True)
            self._time_index = TimeIndex(self.time_index_path, self.base_offset, max_bytes=max_bytes, writable=True)
            result = self._scan(0, self.size)
            self._index_points(result.index_points)
            self._max_timestamp = result.max_timestamp
            self._offset_of_max = result.offset_of_max_timestamp
            self._time_index.maybe_append(result.max_timestamp, result.offset_of_max_timestamp)
            self.bytes_since_index = result.bytes_since_index
            if result.error is None:
                self.verified_size = result.valid_end
            if not self._active:
                self._offset_index.seal()
                self._time_index.seal()
            return result

    def _scan(self, start: int, end: int) -> ScanResult:
        return scan_file(
            self._fd,
            start,
            end,
            min_next_offset=self.base_offset,
            index_interval=self.config.index_interval_bytes,
            bytes_since_index=self.config.index_interval_bytes,
        )

    def _index_points(self, points: list[tuple[int, int, int, int]]) -> None:
        assert self._offset_index is not None and self._time_index is not None
        for position, offset, max_ts, max_offset in points:
            if not self._offset_index.is_full:
                self._offset_index.append(offset, position)
            self._time_index.maybe_append(max_ts, max_offset)

    @property
    def max_timestamp(self) -> int:
        """The largest message timestamp in the segment (-1 when empty)."""
        if self._max_timestamp is None:
            self._indexes()
        assert self._max_timestamp is not None
        return self._max_timestamp

    @property
    def offset_of_max_timestamp(self) -> int:
        _ = self.max_timestamp
        return self._offset_of_max

    # ------------------------------------------------------------------ opening

    @classmethod
    def create_active(cls, directory: Path, base_offset: int, config: LogConfig) -> LogSegment:
        """A new, empty segment ready for appends."""
        segment = cls(directory, base_offset, config, create=True)
        segment._active = True
        return segment

    def activate(self) -> None:
        """Make this (last) segment the active one: indexes writable, and its end found by
        scanning forward from the last index entry (which must point where it says)."""
        with self._lock:
            self._active = True
            if self._offset_index is not None:
                self._open_indexes_writable()
            offset_index, time_index = self._indexes()
            last_offset, position = offset_index.last()
            at_index = self._entry_offsets_at(position)
            if offset_index.entries and (at_index is None or at_index[1] != last_offset):
                logger.warning(
                    "rebuilding the indexes of %s: its last entry points at the wrong message", self.log_path
                )
                self.rebuild_indexes()
                self._open_indexes_writable()
                offset_index, time_index = self._indexes()
                last_offset, position = offset_index.last()
                at_index = self._entry_offsets_at(position)
            # the scan starts with the indexed entry itself: a batch there begins at its base offset
            floor = at_index[0] if offset_index.entries and at_index is not None else self.base_offset
            result = scan_file(
                self._fd,
                position,
                self.size,
                min_next_offset=floor,
                index_interval=self.config.index_interval_bytes,
                bytes_since_index=0,
            )
            if result.error is not None or result.valid_end != self.size:
                self._quarantine_scan(result)
            self.next_offset = result.last_offset + 1 if result.entries else max(last_offset, self.base_offset)
            if result.max_timestamp > self.max_timestamp:
                self._max_timestamp, self._offset_of_max = result.max_timestamp, result.offset_of_max_timestamp
            self.bytes_since_index = result.bytes_since_index
            if self.size == 0:
                self.next_offset = self.base_offset
            last_time = time_index.last()
            if last_time is not None and last_time[1] >= self.next_offset:
                logger.warning("rebuilding the indexes of %s: the time index runs past the log", self.log_path)
                self.rebuild_indexes()
                self._open_indexes_writable()

    def _entry_offsets_at(self, position: int) -> tuple[int, int] | None:
        """(first, last) offset of the entry at ``position``: the stored offset twice for a v0/v1
        entry (a wrapper stores its last), base and base + last delta for a magic 2 batch."""
        header = os.pread(self._fd, _BATCH_HEADER, position)
        if len(header) < _HEADER:
            return None
        stored = int.from_bytes(header[:8], "big", signed=True)
        if len(header) == _BATCH_HEADER and header[_MAGIC_POS] == _BATCH_MAGIC:
            return stored, stored + int.from_bytes(header[_LAST_DELTA_POS:_BATCH_HEADER], "big")
        return stored, stored

    def recover(self, *, flushed_offset: int) -> int:
        """Validate the whole segment after an unclean shutdown and rebuild its indexes.

        Invalid bytes at or after ``flushed_offset`` (never fsynced) are a torn write: the segment is
        truncated to its last valid entry and the number of bytes dropped is returned. Invalid bytes
        before it are corruption: nothing is truncated, and the segment is quarantined.
        """
        with self._lock:
            result = self.rebuild_indexes()
            self.next_offset = result.last_offset + 1 if result.entries else self.base_offset
            if result.valid_end == self.size:
                return 0
            first_bad_offset = self.next_offset
            if first_bad_offset < flushed_offset:
                self._quarantine_scan(result)
                return 0
            dropped = self.size - result.valid_end
            logger.warning(
                "recovery of %s: truncating %d bytes at byte position %d (offset %d): %s",
                self.log_path, dropped, result.valid_end, first_bad_offset,
                result.error or "a partial message at the end",
            )  # fmt: skip
            self._truncate_file(result.valid_end)
            self.verified_size = self.size
            return dropped

    def _quarantine_scan(self, result: ScanResult) -> None:
        """Quarantine at the first byte a scan could not accept (an invalid or partial entry)."""
        if result.error is not None:
            self._quarantine(result.error_position, self._offset_after(result), result.error)
        else:
            self._quarantine(result.valid_end, self._offset_after(result), "the segment ends inside a message")

    def _offset_after(self, result: ScanResult) -> int | None:
        return result.last_offset + 1 if result.entries else None

    def _quarantine(self, position: int, offset: int | None, reason: str) -> None:
        self.corruption = CorruptSegmentError(str(self.log_path), position, offset, reason)
        logger.error("%s", self.corruption)
        if self.on_corruption is not None:
            self.on_corruption(self.corruption)

    def _truncate_file(self, size: int) -> None:
        try:
            os.ftruncate(self._fd, size)
            os.fsync(self._fd)
        except OSError as exc:
            raise StorageError(f"cannot truncate {self.log_path} to {size} bytes: {exc}") from exc
        self.size = size
        self.verified_size = min(self.verified_size, size)
        if self.corruption is not None and self.corruption.position >= size:
            logger.warning(
                "%s: truncation removed the corrupt message at byte %d", self.log_path, self.corruption.position
            )
            self.corruption = None

    # ------------------------------------------------------------------ writing

    def should_roll(self, incoming_bytes: int, incoming_messages: int, now_ms: int) -> bool:
        """Whether an append of this size must go to a new segment."""
        if self.size == 0:
            return False
        config = self.config
        offset_index, time_index = self._offset_index, self._time_index
        roll_ms = config.segment_ms
        if config.compact and config.max_compaction_lag_ms is not None:
            # the active segment is never cleaned: roll it in time for the lag bound (Kafka's rule)
            roll_ms = min(roll_ms or config.max_compaction_lag_ms, config.max_compaction_lag_ms)
        return (
            self.size + incoming_bytes > config.segment_bytes
            or (roll_ms is not None and self.first_append_ms is not None and now_ms - self.first_append_ms >= roll_ms)
            or (offset_index is not None and offset_index.is_full)
            or (time_index is not None and time_index.is_full)
            or self.next_offset + incoming_messages - self.base_offset > _MAX_RELATIVE_OFFSET
        )

    def append(self, batch: ValidatedSet, now_ms: int) -> None:
        """Write a validated message set at the end; on an I/O error nothing of it stays."""
        with self._lock:
            offset_index, time_index = self._offset_index, self._time_index
            if offset_index is None or time_index is None:
                offset_index, time_index = self._indexes()
            position = self.size
            data = memoryview(batch.data)
            try:
                written = 0
                while written < len(data):
                    written += os.pwrite(self._fd, data[written:], position + written)
            except OSError as exc:
                try:
                    os.ftruncate(self._fd, position)
                except OSError:
                    logger.exception("cannot cut %s back to %d bytes after a failed write", self.log_path, position)
                raise StorageError(f"cannot append to {self.log_path}: {exc}") from exc
            crash_point("segment.append.after_write")
            segment_max = self.max_timestamp
            for point_pos, point_offset, point_max, point_max_offset in batch.index_points:
                offset_index.append(point_offset, position + point_pos)
                if point_max > segment_max:
                    time_index.maybe_append(point_max, point_max_offset)
            if self.verified_size == position:
                self.verified_size = position + len(data)
            self.size = position + len(data)
            self.next_offset = batch.next_offset
            self.bytes_since_index = batch.bytes_since_index
            if batch.max_timestamp > self.max_timestamp:
                self._max_timestamp, self._offset_of_max = batch.max_timestamp, batch.offset_of_max_timestamp
            if self.first_append_ms is None:
                self.first_append_ms = now_ms
            crash_point("segment.append.after_index")

    def flush(self) -> None:
        """Make everything appended so far durable (log bytes and indexes)."""
        with self._lock:
            try:
                os.fdatasync(self._fd)
            except OSError as exc:
                raise StorageError(f"cannot fsync {self.log_path}: {exc}") from exc
            for index in (self._offset_index, self._time_index):
                if index is not None:
                    index.flush()
            self.txn_index.flush()

    def seal(self) -> None:
        """Stop being the active segment: record the largest timestamp, trim and fsync everything."""
        with self._lock:
            offset_index, time_index = self._indexes()
            time_index.maybe_append(self.max_timestamp, self._offset_of_max)
            self.flush()
            offset_index.seal()
            time_index.seal()
            self._active = False

    def truncate_to(self, offset: int) -> None:
        """Drop every entry whose offset is ``offset`` or more (a compressed wrapper goes whole)."""
        with self._lock:
            fd = self._fd
            position = self._walk_to(fd, offset, self.size, self._indexes()[0].lookup(offset))
            if position is None:
                return
            self._truncate_file(position[0])
            self.txn_index.truncate_to(offset)
            result = self.rebuild_indexes()
            self.next_offset = result.last_offset + 1 if result.entries else self.base_offset
            if self._active:
                self._open_indexes_writable()

    # ------------------------------------------------------------------ reading

    def _dup_fd(self) -> int:
        with self._lock:
            if self._closed:
                raise SegmentDeletedError(f"{self.log_path} was deleted")
            return os.dup(self._fd)

    def _walk_to(self, fd: int, offset: int, size: int, start: tuple[int, int]) -> tuple[int, int, int] | None:
        """(position, stored offset, entry size) of the first entry whose stored offset is at least
        ``offset``, walking forward from ``start``, the index entry (offset, position) at or below
        it (which must point where it says); None past the end."""
        index_offset, position = start
        checked = position == 0
        buffer = b""
        buffer_start = position
        while position + _HEADER <= size:
            # enough of the entry to know its last offset: a magic 2 batch states it at byte 23
            need = min(_BATCH_HEADER, size - position)
            if position + need > buffer_start + len(buffer):
                buffer_start = position
                buffer = os.pread(fd, min(max(_WALK_CHUNK, need), size - position), position)
                if len(buffer) < _HEADER:
                    return None
            at = position - buffer_start
            stored_offset = int.from_bytes(buffer[at : at + 8], "big", signed=True)
            entry_size = _HEADER + int.from_bytes(buffer[at + 8 : at + 12], "big", signed=True)
            if len(buffer) - at >= _BATCH_HEADER and buffer[at + _MAGIC_POS] == _BATCH_MAGIC:
                # a batch stores its base offset: it is found, indexed and cut by its last one
                stored_offset += int.from_bytes(buffer[at + _LAST_DELTA_POS : at + _LAST_DELTA_POS + 4], "big")
            if not checked:
                checked = True
                if stored_offset != index_offset:
                    raise _IndexMismatchError(position, index_offset, stored_offset)
            if stored_offset >= offset:
                return position, stored_offset, entry_size
            if entry_size < 26:
                return None  # corrupt bytes: verification reports them
            position += entry_size
        return None

    def read(
        self, offset: int, max_bytes: int, *, min_one_message: bool = False, max_offset: int | None = None
    ) -> FileRegion | None:
        """A region of at most ``max_bytes`` starting at the entry holding ``offset`` (a compressed
        wrapper holding it starts earlier); None if the segment has no entry at or after it.
        With ``min_one_message`` the first entry is returned whole even if larger than max_bytes.
        With ``max_offset`` the region ends before the entry holding that offset (a batch boundary
        for the last stable offset): None when nothing comes before it."""
        fd = self._dup_fd()
        try:
            size = self.size
            found = self._find(fd, offset, size)
            if found is not None and max_offset is not None:
                stop = self._find(fd, max_offset, size)
                if stop is not None:
                    size = stop[0]
                    if found[0] >= size:
                        found = None
            if found is None:
                os.close(fd)
                return None
            position, _, entry_size = found
            length = min(max_bytes, size - position)
            if min_one_message:
                length = max(length, min(entry_size, size - position))
            length = self._verified_length(position, length)
            return FileRegion(fd, position, length, str(self.log_path))
        except BaseException:
            os.close(fd)
            raise

    def offset_bound(self, end: int) -> int:
        """An offset past every message of the entries that start before byte ``end``: the stored
        offset of the first entry starting at or after it (found from the index entry before it),
        else the segment's next offset. Read committed lists the aborted transactions below it."""
        with self._lock:
            _, position = self._indexes()[0].floor_position(end)
        fd = self._dup_fd()
        try:
            size = self.size
            while position < min(end, size):
                header = os.pread(fd, _HEADER, position)
                length = int.from_bytes(header[8:12], "big", signed=True) if len(header) == _HEADER else -1
                if length < 0:
                    return self.next_offset  # corrupt or cut: the end of the segment bounds it
                position += _HEADER + length
            if position + 8 > size:
                return self.next_offset
            return int.from_bytes(os.pread(fd, 8, position), "big", signed=True)
        finally:
            os.close(fd)

    def _find(self, fd: int, offset: int, size: int) -> tuple[int, int, int] | None:
        with self._lock:  # the map may be remapped by appends, sealing or a rebuild
            start = self._indexes()[0].lookup(offset)
        try:
            return self._walk_to(fd, offset, size, start)
        except _IndexMismatchError as mismatch:
            logger.warning("rebuilding the indexes of %s: %s", self.log_path, mismatch)
            with self._lock:
                self.rebuild_indexes()
                if self._active:
                    self._open_indexes_writable()
                start = self._indexes()[0].lookup(offset)
            return self._walk_to(fd, offset, size, start)

    def _verified_length(self, position: int, length: int) -> int:
        """``length`` cut short before corrupt bytes, verifying unverified bytes first (once)."""
        end = position + length
        if end > self.verified_size and self.corruption is None:
            with self._lock:
                if self._closed:  # its descriptor number may already belong to another file
                    raise SegmentDeletedError(f"{self.log_path} was deleted")
                if end > self.verified_size and self.corruption is None:
                    result = self._scan(0, self.size) if self.verified_size == 0 else self._scan_tail()
                    if result.error is not None:
                        self._quarantine_scan(result)
                    else:
                        self.verified_size = max(self.verified_size, result.valid_end)
        if self.corruption is not None and end > self.corruption.position:
            if position >= self.corruption.position:
                raise self.corruption
            return self.corruption.position - position
        return length

    def _scan_tail(self) -> ScanResult:
        # Entries are verified in order, so the next one starts exactly at verified_size.
        return scan_file(
            self._fd, self.verified_size, self.size, min_next_offset=self.base_offset,
            index_interval=1 << 62, bytes_since_index=0,
        )  # fmt: skip

    def verify(self) -> CorruptSegmentError | None:
        """Validate every byte (size, magic, CRC, rising offsets); return the corruption, if any."""
        with self._lock:
            if self._closed:  # its descriptor number may already belong to another file
                raise SegmentDeletedError(f"{self.log_path} was deleted")
            if self.verified_size < self.size and self.corruption is None:
                result = self._scan(0, self.size)
                if result.error is not None or result.valid_end != self.size:
                    self._quarantine_scan(result)
                else:
                    self.verified_size = self.size
            return self.corruption

    def find_offset_by_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(position, stored offset) of the entry to start a timestamp search from: just after the
        last time-index entry older than ``timestamp``."""
        with self._lock:
            below = self._indexes()[1].offset_below(timestamp)
        start = self.base_offset if below is None else below + 1
        fd = self._dup_fd()
        try:
            found = self._find(fd, start, self.size)
        finally:
            os.close(fd)
        return None if found is None else (found[0], found[1])

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        """Close cleanly: the active segment records its largest timestamp and trims its indexes."""
        with self._lock:
            if self._closed:
                return
            if self._active and self._time_index is not None and self._max_timestamp is not None:
                self._time_index.maybe_append(self._max_timestamp, self._offset_of_max)
            for index in (self._offset_index, self._time_index):
                if index is not None:
                    index.close()
            os.close(self._fd)
            self._closed = True

    def position_of(self, offset: int) -> int:
        """The byte position of the entry holding ``offset`` or, in a gap, the first after it
        (the segment's size if none)."""
        fd = self._dup_fd()
        try:
            found = self._find(fd, offset, self.size)
        finally:
            os.close(fd)
        return self.size if found is None else found[0]

    def first_offset_from(self, offset: int) -> int | None:
        """The first offset of the entry holding ``offset`` or, in a gap, of the next one; None if
        the segment has none at or after it; -1 for a v0/v1 compressed wrapper, which states only
        its last offset."""
        fd = self._dup_fd()
        try:
            found = self._find(fd, offset, self.size)
            if found is None:
                return None
            header = os.pread(fd, _BATCH_HEADER, found[0])
        finally:
            os.close(fd)
        if len(header) == _BATCH_HEADER and header[_MAGIC_POS] == _BATCH_MAGIC:
            return int.from_bytes(header[:8], "big", signed=True)
        if len(header) > _MAGIC_POS + 1 and header[_MAGIC_POS + 1] & 0x07:
            return -1  # a compressed wrapper: where its messages begin is inside it
        return found[1]

    def open_reader(self) -> int:
        """A descriptor of its own on the segment's file, for a reader that walks it outside the
        log's lock (the cleaner): the caller closes it. SegmentDeletedError once it was deleted."""
        return self._dup_fd()

    def detach(self) -> None:
        """Close the files without touching them: the segment was replaced (the cleaner deletes
        its files itself). Readers that found it get SegmentDeletedError and look again."""
        with self._lock:
            if self._closed:
                return
            for index in (self._offset_index, self._time_index):
                if index is not None:
                    index.close(trim=False)
            os.close(self._fd)
            self._closed = True

    def delete(self) -> None:
        """Remove the segment's files: rename each to .deleted first, so that a crash in the middle
        leaves names that the next open recognises and finishes deleting."""
        with self._lock:
            if not self._closed:
                for index in (self._offset_index, self._time_index):
                    if index is not None:
                        index.close(trim=False)
                os.close(self._fd)
                self._closed = True
            renamed = []
            for path in (self.log_path, self.index_path, self.time_index_path, self.txn_index_path):
                if path.exists():
                    target = path.with_name(path.name + DELETED_SUFFIX)
                    path.rename(target)
                    renamed.append(target)
                    crash_point("segment.delete.after_rename")
            for path in renamed:
                path.unlink(missing_ok=True)
                crash_point("segment.delete.after_unlink")


class _IndexMismatchError(LogError):
    def __init__(self, position: int, expected: int, found: int) -> None:
        super().__init__(f"the index says offset {expected} starts at byte {position}, but offset {found} does")
