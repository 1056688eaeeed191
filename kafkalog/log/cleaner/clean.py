"""One cleaning pass over one log: Kafka's compaction.

The log's cleanable part is its sealed segments below the first uncleanable offset (the active
segment, an open transaction (the last stable offset), and a segment holding messages younger
than ``min.compaction.lag.ms`` are never cleaned; only whole segments are). Its dirty section
starts at the first dirty offset (where the last pass stopped). A pass:

1. reads the dirty section into the offset map (key → highest offset), from its first dirty
   offset until its end or until the map is full (``map_end``: the next pass goes on from there);
   records of aborted transactions, control batches and entries older than record batches are
   not put;
2. rewrites the cleanable segments below ``map_end`` group by group (each group as large as a
   segment may be) into ``.cleaned`` segments, keeping a record when its offset is at least its
   key's in the map; a tombstone (null value) or a transaction marker whose data is all gone only
   in a segment below the delete horizon (all of it first cleaned at least ``delete.retention.ms``
   ago: the cleaner's clock, never the records' timestamps; kafkalog.log.cleaner.cleaner); no
   record of an aborted transaction; each idempotent producer's last batch (emptied if need be); batches keep
   their base offsets, so offsets and timestamps stay and the log gets gaps;
3. swaps each cleaned group in (kafkalog.log.cleaner.swap) as soon as it is written.

Reading goes through the segments' own descriptors, outside the log's lock: appends and fetches
run meanwhile, and only each swap takes the lock, for a few renames.
"""

from __future__ import annotations

import bisect
import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from kafkalog.errors import LogError, StorageError
from kafkalog.log.cleaner import swap as swapping
from kafkalog.log.cleaner.offset_map import OffsetMap
from kafkalog.log.faults import crash_point
from kafkalog.log.files import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, segment_path
from kafkalog.log.index import OffsetIndex, TimeIndex
from kafkalog.log.log import Log
from kafkalog.log.scan import scan_file
from kafkalog.log.segment import LogSegment
from kafkalog.log.txn_index import TransactionIndex, TxnIndexEntry
from kafkalog.record import batch_format as batches
from kafkalog.record import decode_all, kernels
from kafkalog.record._fastpath_compact import rebuilt_batch
from kafkalog.record.codec import compress
from kafkalog.record.message import Codec

logger = logging.getLogger(__name__)

_WHOLE, _SPECIAL, _FULL = 0, 1, 2  # the batch kernels' statuses
_ENTRY_HEADER = 17  # bytes of an entry that tell its size and magic
_MAX_RELATIVE_OFFSET = 2**31 - 1


class CleanerStoppedError(LogError):
    """The cleaner was asked to stop in the middle of a pass: nothing of that group was swapped in."""


class OffsetMapTooSmallError(LogError):
    """One record batch holds more keys than the whole offset map: the map must be larger."""


class Stopping(Protocol):
    def is_set(self) -> bool: ...


@dataclass
class CleanStats:
    """What one pass did, for the log line and the metrics."""

    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    map_records: int = 0
    segments_cleaned: int = 0
    segments_written: int = 0
    longest_swap_ms: float = 0.0
    """The longest the log's lock was held to swap a cleaned segment in (appends wait that long)."""
    started: float = field(default_factory=time.monotonic)
    elapsed_s: float = 0.0

    @property
    def mb_per_s(self) -> float:
        return self.bytes_read / 1e6 / self.elapsed_s if self.elapsed_s else 0.0


@dataclass(frozen=True)
class Cleanable:
    """The part of a log a pass may clean: sealed segments from the log start, ``dirty_from`` the
    first dirty offset, ``segments`` the sealed segments below the first uncleanable offset."""

    segments: tuple[LogSegment, ...]
    dirty_from: int
    clean_bytes: int
    dirty_bytes: int

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


def cleanable_part(log: Log, first_dirty: int, now_ms: int) -> Cleanable:
    """What of ``log`` a pass may clean now (see the module doc), and how dirty it is."""
    segments = log.segments
    config = log.config
    stable = log.last_stable_offset
    lag_cutoff = now_ms - config.min_compaction_lag_ms
    cleanable: list[LogSegment] = []
    for segment in segments[:-1]:
        if segment.next_offset > stable:
            break  # an open transaction (or its marker) is in it
        if config.min_compaction_lag_ms and segment.next_offset > first_dirty and segment.max_timestamp > lag_cutoff:
            break  # messages too young to compact
        cleanable.append(segment)
    dirty_from = max(first_dirty, log.log_start_offset)
    clean_bytes = sum(s.size for s in cleanable if s.next_offset <= dirty_from)
    dirty_bytes = sum(s.size for s in cleanable if s.next_offset > dirty_from)
    return Cleanable(tuple(cleanable), dirty_from, clean_bytes, dirty_bytes)


class _Transactions:
    """The transactions met while walking a log in order (Kafka's CleanedTransactionMetadata): a
    transactional batch is aborted when it lies within an aborted transaction of its producer
    (from its first offset to its abort marker: the .txnindex entries), and a marker learns
    whether its transaction kept any data."""

    def __init__(self, aborted: list[TxnIndexEntry]) -> None:
        self._aborted: dict[int, list[tuple[int, int]]] = {}
        for entry in sorted(aborted, key=lambda e: e.first_offset):
            self._aborted.setdefault(entry.producer_id, []).append((entry.first_offset, entry.last_offset))
        self._kept_data: dict[int, bool] = {}

    def batch_aborted(self, producer_id: int, base_offset: int) -> bool:
        """Whether the transactional batch of ``producer_id`` at ``base_offset`` was aborted."""
        ranges = self._aborted.get(producer_id, ())
        at = bisect.bisect_right(ranges, (base_offset, 1 << 62)) - 1
        return at >= 0 and ranges[at][0] <= base_offset <= ranges[at][1]

    def data(self, producer_id: int, kept: bool) -> None:
        self._kept_data[producer_id] = self._kept_data.get(producer_id, False) or kept

    def marker(self, producer_id: int) -> bool:
        """A marker ends the producer's transaction: whether any of its batches stayed."""
        return self._kept_data.pop(producer_id, False)


def _aborted_entries(log: Log) -> list[TxnIndexEntry]:
    """Every aborted transaction the log's indexes list (each in the segment of its marker, which
    may lie past the cleanable part)."""
    return [entry for segment in log.segments for entry in segment.txn_index.entries]


class _Reader:
    """Whole entries of one segment file, read in chunks through the segment's own descriptor."""

    def __init__(self, segment: LogSegment, chunk_bytes: int, start: int = 0) -> None:
        self.name = segment.log_path
        self.size = segment.size
        self.fd = segment.open_reader()
        self.chunk_bytes = chunk_bytes
        self.buffer = b""
        self.buffer_start = start
        self.pos = start  # absolute position of the next entry

    def __enter__(self) -> _Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)

    def fill(self) -> bool:
        """Make the buffer hold a whole entry at ``pos`` (reading on from there if it does not);
        False at the end of the segment."""
        if self.pos >= self.size:
            return False
        at = self.pos - self.buffer_start
        if len(self.buffer) - at >= _ENTRY_HEADER and len(self.buffer) - at >= self._checked_size(self.buffer, at):
            return True
        self.buffer = os.pread(self.fd, min(self.chunk_bytes, self.size - self.pos), self.pos)
        self.buffer_start = self.pos
        if len(self.buffer) < _ENTRY_HEADER:
            raise LogError(f"{self.name}: {self.size - self.pos} bytes at its end are not a whole entry")
        need = self._checked_size(self.buffer, 0)
        if need > self.size - self.pos:
            raise LogError(f"{self.name}: the entry at byte {self.pos} runs past its end")
        if need > len(self.buffer):
            self.buffer = os.pread(self.fd, need, self.pos)
        return True

    def _checked_size(self, buffer: bytes, at: int) -> int:
        size = _entry_size(buffer, at)
        if size < (batches.BATCH_OVERHEAD if buffer[at + 16] == batches.MAGIC else 26):
            where = self.buffer_start + at
            raise LogError(f"{self.name}: the entry at byte {where} states an impossible size ({size})")
        return size

    @property
    def at(self) -> int:
        return self.pos - self.buffer_start

    @property
    def end(self) -> int:
        """Buffer position where the whole entries it holds end (at most its length)."""
        return len(self.buffer)


@contextmanager
def _named(reader: _Reader) -> Iterator[None]:
    """A kernel's ValueError (bytes it cannot read) as a LogError naming the segment and where."""
    try:
        yield
    except ValueError as exc:
        raise LogError(f"{reader.name}: the entry at byte {reader.pos} cannot be cleaned: {exc}") from exc


def _entry_size(buffer: bytes, at: int) -> int:
    return 12 + int.from_bytes(buffer[at + 8 : at + 12], "big", signed=True)


def build_offset_map(
    log: Log, cleanable: Cleanable, offset_map: OffsetMap, stats: CleanStats, chunk_bytes: int, stopping: Stopping
) -> int:
    """Step 1: put the dirty section's keys into ``offset_map``; returns ``map_end``, the offset
    up to which the map holds the section (its end, or where the map filled)."""
    offset_map.clear()
    try:
        return _fill_map(log, cleanable, offset_map, chunk_bytes, stopping)
    finally:
        stats.map_records = offset_map.used


def _fill_map(log: Log, cleanable: Cleanable, offset_map: OffsetMap, chunk_bytes: int, stopping: Stopping) -> int:
    dirty = [s for s in cleanable.segments if s.next_offset > cleanable.dirty_from]
    if not dirty:
        return cleanable.dirty_from
    end = dirty[-1].next_offset
    transactions = _Transactions(_aborted_entries(log))
    for segment in dirty:
        _verified(segment)
        start = segment.position_of(cleanable.dirty_from) if segment.base_offset < cleanable.dirty_from else 0
        with _Reader(segment, chunk_bytes, start) as reader, _named(reader):
            while reader.fill():
                if stopping.is_set():
                    raise CleanerStoppedError(f"{log.directory}: stopped while reading the dirty section")
                buffer = reader.buffer
                at, used, _, status = kernels.map_put_batches(
                    offset_map.table, offset_map.max_entries, offset_map.used, buffer, reader.at, len(buffer)
                )
                offset_map.used = used
                reader.pos = reader.buffer_start + at
                if status == _FULL:
                    header = batches.read_header(buffer, at)
                    if segment.base_offset > cleanable.dirty_from:
                        return segment.base_offset  # end at a segment: the next pass maps it whole
                    if offset_map.used == 0:
                        raise OffsetMapTooSmallError(
                            f"{log.directory}: the batch at offset {header.base_offset} holds "
                            f"{header.records_count} records, more than the cleaner's offset map can take "
                            f"({offset_map.max_entries}): give the cleaner more memory (dedupe_buffer_bytes)"
                        )
                    return header.base_offset
                if status == _SPECIAL:
                    if not _map_special(log, buffer, at, offset_map, transactions):
                        if segment.base_offset > cleanable.dirty_from:
                            return segment.base_offset
                        return batches.read_header(buffer, at).base_offset
                    reader.pos += _entry_size(buffer, at)
    return end


def _verified(segment: LogSegment) -> None:
    """Refuse to clean a segment that fails its checks (sizes, CRCs: once per segment and process):
    rewritten batches get new CRCs, which would make damage look whole."""
    corruption = segment.verify()
    if corruption is not None:
        raise LogError(f"{segment.log_path} is corrupt, so it is not cleaned: {corruption}")


def _map_special(log: Log, buffer: bytes, at: int, offset_map: OffsetMap, transactions: _Transactions) -> bool:
    """Put the keys of the entry the kernel stopped at; False if the map has no room for them."""
    if buffer[at + 16] != batches.MAGIC:
        return True  # an entry written before the log stored record batches: kept as it is, not compacted
    header = batches.read_header(buffer, at)
    if header.control:
        transactions.marker(header.producer_id)
        return True
    if header.transactional and transactions.batch_aborted(header.producer_id, header.base_offset):
        return True
    if header.records_count > offset_map.room:
        if offset_map.used == 0:
            raise OffsetMapTooSmallError(
                f"{log.directory}: the batch at offset {header.base_offset} holds {header.records_count} records, "
                f"more than the cleaner's offset map can take ({offset_map.max_entries}): give the cleaner more "
                "memory (dedupe_buffer_bytes)"
            )
        return False
    payload = batches.records_payload(buffer, header)
    offset_map.used = kernels.map_put_records(
        offset_map.table, offset_map.max_entries, offset_map.used, payload, header.records_count, header.base_offset
    )
    return True


def groups_of(segments: list[LogSegment], max_bytes: int) -> list[list[LogSegment]]:
    """Consecutive segments merged into groups that each fit one segment: its bytes, and offsets
    relative to the group's base within 32 bits (Kafka's groupSegmentsBySize)."""
    groups: list[list[LogSegment]] = []
    for segment in segments:
        if groups:
            group = groups[-1]
            size = sum(s.size for s in group) + segment.size
            span = segment.next_offset - 1 - group[0].base_offset
            if size <= max_bytes and span <= _MAX_RELATIVE_OFFSET:
                group.append(segment)
                continue
        groups.append([segment])
    return groups


class _Writer:
    """The ``.cleaned`` segment a group is rewritten into."""

    def __init__(self, directory: Path, base: int) -> None:
        self.directory = directory
        self.base = base
        self.path = segment_path(directory, base, LOG_SUFFIX + swapping.CLEANED_SUFFIX)
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        self.size = 0
        self.pending = bytearray()
        self.txn_entries: list[TxnIndexEntry] = []

    def write(self, flush_at: int) -> None:
        if len(self.pending) >= flush_at:
            self._drain()

    def _drain(self) -> None:
        written = 0
        with memoryview(self.pending) as view:
            while written < len(view):
                written += os.pwrite(self.fd, view[written:], self.size + written)
        self.size += written
        del self.pending[:]

    def finish(self, log: Log) -> list[str]:
        """Write the rest, fsync, and build the indexes; returns the suffixes of the files made."""
        self._drain()
        os.fsync(self.fd)
        suffixes = [LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX]
        max_bytes = max(log.config.index_max_bytes, 32)
        offsets = OffsetIndex(self._path(INDEX_SUFFIX), self.base, max_bytes=max_bytes, writable=True)
        times = TimeIndex(self._path(TIME_INDEX_SUFFIX), self.base, max_bytes=max_bytes, writable=True)
        try:
            read_fd = os.open(self.path, os.O_RDONLY)
            try:
                interval = log.config.index_interval_bytes
                scan = scan_file(
                    read_fd, 0, self.size, min_next_offset=self.base,
                    index_interval=interval, bytes_since_index=interval,
                )  # fmt: skip
            finally:
                os.close(read_fd)
            if scan.error is not None or scan.valid_end != self.size:
                reason = scan.error or f"a partial entry at byte {scan.valid_end}"
                raise LogError(f"{self.path}: the cleaned segment does not scan whole: {reason}")
            for position, offset, max_ts, max_offset in scan.index_points:
                if not offsets.is_full:
                    offsets.append(offset, position)
                times.maybe_append(max_ts, max_offset)
            times.maybe_append(scan.max_timestamp, scan.offset_of_max_timestamp)
            offsets.seal()
            times.seal()
        finally:
            offsets.close()
            times.close()
        if self.txn_entries:
            index = TransactionIndex(self._path(TXN_INDEX_SUFFIX))
            for entry in self.txn_entries:
                index.append(entry)
            index.flush()
            suffixes.append(TXN_INDEX_SUFFIX)
        os.close(self.fd)
        self.fd = -1
        crash_point("cleaner.clean.after_write")
        return suffixes

    def _path(self, suffix: str) -> Path:
        return segment_path(self.directory, self.base, suffix + swapping.CLEANED_SUFFIX)

    def abandon(self) -> None:
        """Remove what this group wrote (``.cleaned`` or already ``.swap``): the pass gave it up."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            self._path(suffix).unlink(missing_ok=True)
            segment_path(self.directory, self.base, suffix + swapping.SWAP_SUFFIX).unlink(missing_ok=True)


def clean_segments(
    log: Log,
    cleanable: Cleanable,
    map_end: int,
    offset_map: OffsetMap,
    horizon_offset: int,
    stats: CleanStats,
    chunk_bytes: int,
    stopping: Stopping,
) -> bool:
    """Steps 2 and 3 for the cleanable segments below ``map_end``; False if the log changed under
    the pass (a group was no longer the log's: nothing of it was swapped in). Tombstones and
    emptied markers go only from entries wholly below ``horizon_offset`` (see LogCleaner)."""
    segments = [s for s in cleanable.segments if s.base_offset < map_end]
    if not segments:
        return True
    config = log.config
    transactions = _Transactions(_aborted_entries(log))
    markers_kept: dict[int, TxnIndexEntry] = {
        entry.last_offset: entry for segment in segments for entry in segment.txn_index.entries
    }
    protected = log.last_batch_offsets()
    for group in groups_of(segments, config.segment_bytes):
        writer = _Writer(log.directory, group[0].base_offset)
        try:
            for segment in group:
                _clean_segment(segment, writer, offset_map, transactions, protected, horizon_offset, markers_kept,
                               stats, chunk_bytes, stopping)  # fmt: skip
            suffixes = writer.finish(log)
        except BaseException:
            writer.abandon()
            raise
        try:
            swapping.to_swap(log.directory, writer.base, suffixes)
            install = _installer(log, writer.base, suffixes, [s.base_offset for s in group], stats)
            replaced = log.replace_segments(group, install)
        except BaseException as exc:
            if not (log.directory / swapping.INTENT_FILE).exists():
                writer.abandon()  # not committed: the old segments stay
            else:  # committed, not finished: the next open finishes it; until then nothing may move
                log.quarantine(StorageError(f"{log.directory}: a cleaned segment's swap failed half way ({exc!r})"))
            raise
        if not replaced:
            writer.abandon()
            logger.info("%s: the log changed during cleaning (retention?): this pass stops", log.directory)
            return False
        swapping.remove_intent(log.directory)
        stats.segments_cleaned += len(group)
        stats.segments_written += 1
        stats.bytes_written += writer.size
    return True


def _installer(
    log: Log, base: int, suffixes: list[str], replaced: list[int], stats: CleanStats
) -> Callable[[], LogSegment]:
    """What ``Log.replace_segments`` runs under the log's lock: the swap, then the new segment."""

    def install() -> LogSegment:
        started = time.monotonic()
        swapping.write_intent(log.directory, base, suffixes, replaced)
        swapping.finish(log.directory, base, suffixes, replaced)
        segment = LogSegment(log.directory, base, log.config, create=False)
        stats.longest_swap_ms = max(stats.longest_swap_ms, (time.monotonic() - started) * 1000)
        return segment

    return install


def _clean_segment(
    segment: LogSegment,
    writer: _Writer,
    offset_map: OffsetMap,
    transactions: _Transactions,
    protected: set[int],
    horizon_offset: int,
    markers_kept: dict[int, TxnIndexEntry],
    stats: CleanStats,
    chunk_bytes: int,
    stopping: Stopping,
) -> None:
    """Rewrite one segment into ``writer``. Its entries before the delete horizon (wholly below
    ``horizon_offset``) lose their tombstones and emptied markers; those from the entry holding it
    on keep them (the kernels are called on each side of that byte)."""
    table = offset_map.table
    _verified(segment)
    if horizon_offset <= segment.base_offset:
        horizon_at = 0
    elif horizon_offset >= segment.next_offset:
        horizon_at = segment.size
    else:
        horizon_at = segment.position_of(horizon_offset)
    with _Reader(segment, chunk_bytes) as reader, _named(reader):
        while reader.fill():
            if stopping.is_set():
                raise CleanerStoppedError(f"{segment.log_path}: stopped while cleaning")
            buffer = reader.buffer
            retain_deletes = reader.pos >= horizon_at
            stop = len(buffer) if retain_deletes else min(len(buffer), horizon_at - reader.buffer_start)
            at, status, read, kept = kernels.filter_batches(
                table, buffer, reader.at, stop, writer.pending, retain_deletes, protected
            )
            stats.records_read += read
            stats.records_kept += kept
            stats.bytes_read += at - reader.at
            reader.pos = reader.buffer_start + at
            if status == _SPECIAL:
                size = _entry_size(buffer, at)
                _clean_special(buffer, at, size, writer, offset_map, transactions, protected, retain_deletes,
                               markers_kept, stats)  # fmt: skip
                stats.bytes_read += size
                reader.pos += size
            writer.write(chunk_bytes)


def _legacy_stays(entry: bytes, offset_map: OffsetMap) -> bool:
    """Whether a v0/v1 entry (written before the log stored record batches) stays: unless every
    message in it has a later record of its key (in the map). Its tombstones stay: the keys of
    such entries are not in the map, so a tombstone removed could bring an older value back. A
    compressed wrapper stays whole while any message in it does."""
    return any(message.key is None or offset_map.get(message.key) <= message.offset for message in decode_all(entry))


def _clean_special(
    buffer: bytes,
    at: int,
    size: int,
    writer: _Writer,
    offset_map: OffsetMap,
    transactions: _Transactions,
    protected: set[int],
    retain_deletes: bool,
    markers_kept: dict[int, TxnIndexEntry],
    stats: CleanStats,
) -> None:
    """What stays of an entry the batch kernel does not take: a v0/v1 entry (kept as it is), a
    transaction marker, a transactional or compressed batch."""
    out = writer.pending
    if buffer[at + 16] != batches.MAGIC:
        if _legacy_stays(buffer[at : at + size], offset_map):
            out += buffer[at : at + size]
        return
    header = batches.read_header(buffer, at)
    fields = batches.BATCH_HEADER.unpack_from(buffer, at)
    if header.control:
        # Kafka's rule: a marker goes once its transaction has no data left and its delete
        # horizon passed (a consumer reading from the start within delete.retention.ms sees it)
        if transactions.marker(header.producer_id) or retain_deletes:
            out += buffer[at : at + size]
            entry = markers_kept.get(header.base_offset)
            if entry is not None:
                writer.txn_entries.append(entry)
        return
    count = header.records_count
    stats.records_read += count
    if header.transactional and transactions.batch_aborted(header.producer_id, header.base_offset):
        records, kept, max_delta = b"", 0, 0
    else:
        payload = batches.records_payload(buffer, header)
        records, kept, max_delta = kernels.filter_records(
            offset_map.table, payload, count, header.base_offset, retain_deletes
        )
    if header.transactional:
        # a batch kept empty (a producer's last) is data too: replayed without its marker it
        # would open a transaction for good
        transactions.data(header.producer_id, kept > 0 or header.last_offset in protected)
    stats.records_kept += kept
    if kept == count and count:
        out += buffer[at : at + size]
    elif kept:
        codec = header.codec
        body = records if codec == Codec.NONE else compress(codec, records, magic=batches.MAGIC)
        log_append = header.attributes & batches.TIMESTAMP_TYPE_BIT
        max_timestamp = header.max_timestamp if log_append else header.base_timestamp + max_delta
        out += rebuilt_batch(fields, body, kept, max_timestamp)
    elif header.last_offset in protected:
        # an idempotent producer's last batch: its sequence numbers stay, its records go
        attributes = header.attributes & ~batches.CODEC_MASK
        out += rebuilt_batch(fields, b"", 0, header.max_timestamp, attributes)
