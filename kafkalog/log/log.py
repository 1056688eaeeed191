"""Log: one topic-partition, an ordered list of segments with one active segment at the end."""

from __future__ import annotations

import bisect
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from kafkalog.errors import (
    CorruptSegmentError,
    InvalidRecordError,
    LogClosedError,
    LogError,
    OffsetOutOfRangeError,
    StorageError,
    UnsupportedForMessageFormatError,
)
from kafkalog.log.cleaner import swap as cleaner_swap
from kafkalog.log.cleaner.keys import refuse_keyless
from kafkalog.log.config import LogConfig
from kafkalog.log.faults import crash_point
from kafkalog.log.files import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TMP_SUFFIX,
    TXN_INDEX_SUFFIX,
    fsync_dir,
    parse_base_offset,
    write_atomically,
)
from kafkalog.log.producer_state import (
    SNAPSHOT_SUFFIX,
    CompletedTxn,
    MarkerBatch,
    ProducerState,
    ProducerStateManager,
    VerificationGuard,
    batches_in_file,
    producer_batch,
)
from kafkalog.log.region import FileRegion
from kafkalog.log.segment import LogSegment, SegmentDeletedError
from kafkalog.log.txn_index import AbortedTxn, TxnIndexEntry
from kafkalog.record import Message, decode_all
from kafkalog.record import batch_format as batches
from kafkalog.record.batch_control import batch_attributes, encode_marker
from kafkalog.record.validate import ValidatedSet, validate_for_append

logger = logging.getLogger(__name__)

Clock = Callable[[], int]
LATEST_TIME = -1
EARLIEST_TIME = -2
MAX_TIMESTAMP = -3
_TIME_SEARCH_READ_BYTES = 1024 * 1024


LOG_START_FILE = "log-start-offset"
"""The log start offset DeleteRecords set, as text; absent: the first segment's base offset."""


def _read_start_floor(path: Path) -> int:
    try:
        text = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return 0
    except (OSError, UnicodeDecodeError) as exc:
        raise StorageError(f"{path} is unreadable: {exc}") from exc
    if not text.isdigit():
        # a wrong log start would serve deleted records again: refuse to guess
        raise StorageError(f"{path} does not hold an offset: {text[:40]!r}")
    return int(text)


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class AppendInfo(NamedTuple):
    """Where an append landed. ``log_append_time`` is the broker time messages were stamped with
    when the log uses log-append time, else -1."""

    first_offset: int
    last_offset: int
    log_append_time: int

    @property
    def message_count(self) -> int:
        return self.last_offset - self.first_offset + 1


class ReadInfo(NamedTuple):
    """The result of a read: a region of one segment (None when there was nothing to read) and the
    log's bounds when it was read. The caller closes the region."""

    region: FileRegion | None
    log_start_offset: int
    log_end_offset: int
    last_stable_offset: int = -1
    """The log's last stable offset when it was read (at most ``log_end_offset``)."""
    upper_bound_offset: int = -1
    """An offset past every message of the region (the first offset of the entry after it, at most
    the read's ``max_offset``): read committed lists the aborted transactions of [the fetch offset,
    this), as Kafka bounds them. The read offset itself when there is no region."""


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int


class Log:
    """An append-only log of messages for one partition, stored as segments in one directory.

    Thread-safe. Appends, rolls, flushes, retention, truncation and close are serialized by one lock.
    Reads take no log lock: they work from an immutable snapshot of the segment list and read through
    their own file descriptors, so they run concurrently with appends and with retention (a read that
    loses a race with retention retries and then sees the new log start).

    ``recovery_point`` is the offset below which everything is known to be fsynced. Every segment but
    the active one is entirely flushed (rolling fsyncs it), so a torn write can only be in the active
    segment above the recovery point; corruption anywhere else is reported, never truncated away.

    Transactions (KIP-98): a producer's transactional batches are undecided until the marker that
    ``append_marker`` writes; ``last_stable_offset`` (the LSO) is the first offset of the oldest open
    transaction, else the log end. Each aborted transaction is an entry of the .txnindex of the
    segment holding its marker (kafkalog.log.txn_index), written before the LSO passes it, so a
    reader that sees an LSO finds every abort below it. When that write fails the marker is already
    in the segment and its transaction closed: the log is then quarantined (``index_failure``)
    until it is opened again, which rebuilds the entry from the log.
    """

    def __init__(
        self,
        directory: Path,
        config: LogConfig | None = None,
        *,
        recovery_point: int = 0,
        clean_shutdown: bool = False,
        clock: Clock = wall_clock_ms,
    ) -> None:
        self.directory = Path(directory)
        self.config = config or LogConfig()
        self.clock = clock
        self._lock = threading.RLock()
        self._closed = False
        self.corruption: CorruptSegmentError | None = None
        self.index_failure: StorageError | None = None
        """Set when an aborted transaction's .txnindex entry could not be written after its marker
        was: the index no longer lists every abort below the LSO. Appends, markers and
        read-committed reads raise it until the log is opened again (recovery replays the marker
        and writes the entry) or truncated (which rebuilds every entry)."""
        self._unflushed_messages = 0
        self._oldest_unflushed_ms: int | None = None
        self._truncated_to: int | None = None
        """The lowest log end a truncation left since the cleaner last took it (``take_truncation``):
        what the cleaner read beyond it was replaced."""
        self.directory.mkdir(parents=True, exist_ok=True)
        segments = self._load(recovery_point, clean_shutdown)
        self._set_segments(segments)
        self._log_end_offset = segments[-1].next_offset
        self._recovery_point = self._log_end_offset
        self._start_floor = _read_start_floor(self.directory / LOG_START_FILE)
        """The log start set by DeleteRecords (0: none): offsets below it are gone even where their
        segment stays (the segment still holds messages at or above it)."""
        self.producers = ProducerStateManager(self.directory, expiration_ms=self.config.producer_id_expiration_ms)
        self._stable = self._log_end_offset
        """The last stable offset, published whole after every change (lock-free readers)."""
        self._load_producers(snapshot=not any(s.txn_index_lost for s in segments))
        self.corruption = next((s.corruption for s in segments if s.corruption is not None), None)
        if self.corruption is not None and self.config.on_corruption == "fail":
            self.close()
            raise self.corruption

    def __repr__(self) -> str:
        return f"Log({self.directory}, start={self.log_start_offset}, end={self.log_end_offset})"

    # ------------------------------------------------------------------ loading

    def _load(self, recovery_point: int, clean_shutdown: bool) -> list[LogSegment]:
        cleaner_swap.recover(self.directory)  # a cleaned segment half swapped in: finish the swap
        bases = self._clean_directory()
        segments = [LogSegment(self.directory, base, self.config, create=False) for base in bases]
        if not segments:
            segments = [LogSegment.create_active(self.directory, 0, self.config)]
            clean_shutdown = True  # a new log: nothing to recover
        for segment, following in itertools.pairwise(segments):
            segment.next_offset = following.base_offset
        for segment in segments:
            segment.on_corruption = self._note_corruption
        active = segments[-1]
        if not clean_shutdown:
            # Sealed segments were fsynced when the log rolled past them: invalid bytes there are
            # corruption. Only the active segment may end in a torn write above the recovery point.
            first = max(0, bisect.bisect_right([s.base_offset for s in segments], recovery_point) - 1)
            logger.info(
                "recovering %s from offset %d after an unclean shutdown (%d segment(s) to check)",
                self.directory, recovery_point, len(segments) - first,
            )  # fmt: skip
            for segment in segments[first:]:
                flushed = recovery_point if segment is active else 1 << 62
                segment.recover(flushed_offset=flushed)
            for segment, following in itertools.pairwise(segments):
                # a cleaned segment may end in a gap: its range still runs to the next one's base
                segment.next_offset = following.base_offset
        active.activate()
        if not clean_shutdown:
            active.flush()  # what recovery kept is now the flushed state
        return segments

    def _load_producers(self, snapshot: bool = True) -> None:
        """The producers' state: the newest snapshot, then every batch and marker after it. The
        aborted-transaction entries of the markers replayed are written again (a crash may have
        lost them, or kept them while losing their marker): the entries are a function of the log."""
        start = self.producers.load(self._log_end_offset) if snapshot else 0
        for segment in self.segments:
            if segment.next_offset <= start:
                continue
            segment.txn_index.truncate_to(start)
            if not segment.size:
                continue
            fd = os.open(segment.log_path, os.O_RDONLY)
            try:
                completed = self.producers.replay(batches_in_file(fd, 0, segment.size, start))
            finally:
                os.close(fd)
            for txn in completed:
                self._index_if_aborted(segment, txn)
        self._publish_stable()

    def _index_if_aborted(self, segment: LogSegment, txn: CompletedTxn) -> None:
        """Write an aborted transaction's entry; on failure quarantine the log (``index_failure``)
        and raise: its marker is in the segment and its transaction closed, so the next append
        would move the LSO past an abort that read-committed readers cannot find."""
        if not txn.aborted:
            return
        entry = TxnIndexEntry(txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset)
        try:
            segment.txn_index.append(entry)
        except (OSError, LogError) as exc:
            self.index_failure = StorageError(
                f"{self.directory}: the aborted transaction of producer {txn.producer_id} at offsets "
                f"{txn.first_offset}-{txn.last_offset} is not in {segment.txn_index_path.name} ({exc}): "
                "appends and read-committed reads refused until the log is opened again"
            )
            logger.error("%s", self.index_failure)  # noqa: TRY400 (the reason is the message)
            raise self.index_failure from exc

    def _publish_stable(self) -> None:
        first = self.producers.first_unstable_offset()
        end = self._log_end_offset
        self._stable = end if first is None else min(first, end)

    def _clean_directory(self) -> list[int]:
        """Finish interrupted deletions and drop leftovers; return the base offsets of the segments."""
        bases: list[int] = []
        indexes: list[tuple[Path, int]] = []
        for path in sorted(self.directory.iterdir()):
            name = path.name
            if name.endswith((DELETED_SUFFIX, TMP_SUFFIX)):
                logger.warning("removing leftover file %s", path)
                path.unlink()
                continue
            base = parse_base_offset(name, LOG_SUFFIX)
            if base is not None:
                bases.append(base)
                continue
            if name.endswith((SNAPSHOT_SUFFIX, SNAPSHOT_SUFFIX + ".unreadable")) or name == LOG_START_FILE:
                continue  # producer state snapshots (kafkalog.log.producer_state), the log start
            for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                index_base = parse_base_offset(name, suffix)
                if index_base is not None:
                    indexes.append((path, index_base))
                    break
            else:
                logger.warning("ignoring unknown file %s in a log directory", path)
        known = set(bases)
        for path, base in indexes:
            if base not in known:
                logger.warning("removing index file %s, which has no log segment", path)
                path.unlink()
        return sorted(bases)

    def _note_corruption(self, corruption: CorruptSegmentError) -> None:
        if self.corruption is None:
            self.corruption = corruption

    # ------------------------------------------------------------------ state

    def _set_segments(self, segments: list[LogSegment]) -> None:
        # One tuple swap publishes a consistent pair to lock-free readers.
        self._view = (tuple(segments), [s.base_offset for s in segments])

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return self._view[0]

    @property
    def active_segment(self) -> LogSegment:
        return self._view[0][-1]

    @property
    def log_start_offset(self) -> int:
        return min(max(self._view[0][0].base_offset, self._start_floor), self._log_end_offset)

    @property
    def log_end_offset(self) -> int:
        """The offset the next appended message will get."""
        return self._log_end_offset

    @property
    def last_stable_offset(self) -> int:
        """The offset below which every transaction is decided: the first offset of the oldest open
        transaction, else the log end (no replication: the high watermark is the log end); never
        below the log start."""
        return max(self._stable, self.log_start_offset)

    def last_batch_offsets(self) -> set[int]:
        """The last offset of each known producer's last batch (the cleaner keeps those batches)."""
        with self._lock:
            return self.producers.last_batch_offsets()

    def producer_states(self) -> list[ProducerState]:
        """Every producer this partition knows (DescribeProducers), by id."""
        with self._lock:
            return self.producers.states()

    @property
    def recovery_point(self) -> int:
        """Everything below this offset is fsynced."""
        return self._recovery_point

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def reconfigure(self, config: LogConfig) -> None:
        """Take new settings (a topic's configs altered at run time): appends, the next roll,
        retention and flushing follow them from now on; what is written stays as it is."""
        with self._lock:
            self.config = config
            self.active_segment.config = config
            self.producers.expiration_ms = config.producer_id_expiration_ms

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"log {self.directory} is closed")

    def _check_writable(self) -> None:
        """Open, and not quarantined (a corrupt segment, or an aborted transaction missing from
        the index: see ``index_failure``)."""
        self._check_open()
        if self.corruption is not None:
            raise self.corruption
        if self.index_failure is not None:
            raise self.index_failure

    def verification_guard(self, producer_id: int) -> VerificationGuard:
        """The guard to take before asking the transaction coordinator whether ``producer_id``'s
        open transaction has this partition, and to pass to ``append`` after (KIP-890 part 1; see
        kafkalog.log.producer_state): a marker for the producer in between drops it, and the append
        can then open no transaction. The producer's existing guard if it has one."""
        with self._lock:
            return self.producers.verification_guard(producer_id, self.clock())

    # ------------------------------------------------------------------ appending

    def append(
        self, data: bytes | bytearray | memoryview, *, verification_guard: VerificationGuard | None = None
    ) -> AppendInfo:
        """Validate a message set, assign its offsets and append it.

        Returns once the bytes are written (in the page cache), and fsynced if the flush policy says
        so now. Raises CorruptRecordError, RecordTooLargeError or InvalidTimestampError for a bad
        set (nothing is appended), StorageError for an I/O failure (nothing stays appended), and the
        CorruptSegmentError that quarantined the log, if any. A batch of an idempotent producer that
        was appended already is not appended again: its first append's offsets are returned
        (kafkalog.log.producer_state; OutOfOrderSequenceError or InvalidProducerEpochError for one
        that does not follow the producer's last batch). A transactional batch opens its producer's
        transaction (InvalidTxnStateError for a non-transactional one while it is open); a control
        batch (only ``append_marker`` writes them), or a transactional batch not sent alone by its
        producer, is InvalidRecordError. With ``verification_guard`` (from ``verification_guard``,
        taken before the coordinator verified the partition), a transactional batch that would open
        its producer's transaction is InvalidTxnStateError if a marker or truncation dropped that
        guard meanwhile; without one nothing is checked (the caller verified nothing).
        """
        with self._lock:
            self._check_writable()
            producer = producer_batch(data)
            if producer is not None:
                if producer.control:
                    raise InvalidRecordError(f"producer {producer.producer_id}: clients may not write control records")
                if self.config.message_format != 2:
                    raise UnsupportedForMessageFormatError(
                        "an idempotent producer's batch needs message format v2 (the topic stores v1)"
                    )
                duplicate = self.producers.check(producer, verification_guard=verification_guard)
                if duplicate is not None:
                    return AppendInfo(duplicate.first_offset, duplicate.last_offset, -1)
            elif self.config.message_format != 2 and batches.is_batch(data):
                self._refuse_unowned(data)  # a v1 log: the bits would be lost in the conversion
            now = self.clock()
            batch = self._validate(data, now)
            if producer is None and self.config.message_format == 2:
                self._refuse_unowned(batch.data)
            if self.config.compact:
                refuse_keyless(batch.data, self.directory.name)
            self._write(batch, now)
            if producer is not None:
                self.producers.appended(producer, batch.first_offset, batch.next_offset - 1, now)
                if producer.transactional:
                    self._publish_stable()
            return self._appended(batch, now)

    @staticmethod
    def _refuse_unowned(data: bytes | bytearray | memoryview) -> None:
        """Refuse control batches, and transactional ones outside one producer's single batch."""
        attributes = batch_attributes(data)
        if attributes & batches.CONTROL_BIT:
            raise InvalidRecordError("clients may not write control records")
        if attributes & batches.TRANSACTIONAL_BIT:
            raise InvalidRecordError("a transactional batch must be sent alone, with its producer id")

    def append_marker(
        self, producer_id: int, producer_epoch: int, *, commit: bool, coordinator_epoch: int
    ) -> AppendInfo:
        """Write a transaction marker (a control batch, kafkalog.record.batch_control) ending
        ``producer_id``'s open transaction: committed, or aborted (an entry of the active
        segment's aborted-transaction index, written before the last stable offset moves past
        it). A marker for a producer with nothing open is written too, and ends nothing.

        Raises InvalidProducerEpochError for an epoch older than the producer's,
        TransactionCoordinatorFencedError for a coordinator epoch older than its last marker's,
        UnsupportedForMessageFormatError in a log of message format v1, and as ``append``.
        """
        with self._lock:
            self._check_writable()
            if self.config.message_format != 2:
                raise UnsupportedForMessageFormatError(
                    "transaction markers need message format v2 (the topic stores v1)"
                )
            self.producers.check_marker(producer_id, producer_epoch, coordinator_epoch)
            now = self.clock()
            data = encode_marker(
                producer_id, producer_epoch, commit=commit, coordinator_epoch=coordinator_epoch, timestamp=now
            )
            batch = self._validate(data, now)
            segment = self._write(batch, now)
            crash_point("log.marker.after_append")
            marker = MarkerBatch(producer_id, producer_epoch, commit, coordinator_epoch)
            completed = self.producers.marker_appended(marker, batch.first_offset, now)
            if completed is not None:
                self._index_if_aborted(segment, completed)
            self._publish_stable()
            return self._appended(batch, now)

    def _validate(self, data: bytes | bytearray | memoryview, now: int) -> ValidatedSet:
        return validate_for_append(
            data,
            self._log_end_offset,
            now_ms=now,
            log_append_time=self.config.log_append_time,
            max_message_bytes=self.config.max_message_bytes,
            index_interval_bytes=self.config.index_interval_bytes,
            bytes_since_index=self.active_segment.bytes_since_index,
            max_decompressed_bytes=self.config.max_decompressed_bytes,
            message_format=self.config.message_format,
        )

    def _write(self, batch: ValidatedSet, now: int) -> LogSegment:
        """Append a validated set to the active segment (rolling first if due); return that segment."""
        active = self.active_segment
        if active.should_roll(len(batch.data), batch.next_offset - batch.first_offset, now):
            active = self._roll()
        active.append(batch, now)
        self._log_end_offset = batch.next_offset
        return active

    def _appended(self, batch: ValidatedSet, now: int) -> AppendInfo:
        """After a write: the LSO follows the end (unless a transaction holds it), flush if due."""
        if self.producers.first_unstable_offset() is None:
            self._stable = self._log_end_offset
        self._unflushed_messages += batch.next_offset - batch.first_offset
        if self._oldest_unflushed_ms is None:
            self._oldest_unflushed_ms = now
        config = self.config
        if config.flush_messages is not None or config.flush_ms is not None:
            self._flush_if_due(now)
        return AppendInfo(batch.first_offset, batch.next_offset - 1, now if config.log_append_time else -1)

    def _flush_if_due(self, now: int) -> None:
        config = self.config
        if (config.flush_messages is not None and self._unflushed_messages >= config.flush_messages) or (
            config.flush_ms is not None
            and self._oldest_unflushed_ms is not None
            and now - self._oldest_unflushed_ms >= config.flush_ms
        ):
            self.flush()

    def maybe_flush(self, now: int | None = None) -> None:
        """Fsync if the time-based flush policy is due (the LogManager calls this periodically)."""
        with self._lock:
            if not self._closed:
                self._flush_if_due(self.clock() if now is None else now)

    def flush(self) -> None:
        """Fsync everything appended so far and advance the recovery point to the log end."""
        with self._lock:
            self._check_open()
            end = self._log_end_offset
            self.active_segment.flush()
            crash_point("log.flush.after_fsync")
            self._recovery_point = end
            self._unflushed_messages = 0
            self._oldest_unflushed_ms = None

    def roll(self) -> LogSegment:
        """Seal the active segment (if it holds anything) and start a new one at the log end."""
        with self._lock:
            self._check_open()
            if self.active_segment.size == 0:
                return self.active_segment
            return self._roll()

    def _roll(self) -> LogSegment:
        old = self.active_segment
        crash_point("log.roll.before_seal")
        old.seal()  # fsyncs: from now on only the new segment can hold unflushed bytes
        crash_point("log.roll.after_seal")
        new = LogSegment.create_active(self.directory, self._log_end_offset, self.config)
        new.on_corruption = self._note_corruption
        fsync_dir(self.directory)
        crash_point("log.roll.after_create")
        self._set_segments([*self.segments, new])
        self._recovery_point = max(self._recovery_point, new.base_offset)
        if len(self.producers) and self.index_failure is None:  # replaying on load then starts from here
            self.producers.take_snapshot(new.base_offset, self.clock())
        return new

    # ------------------------------------------------------------------ reading

    def read(
        self, offset: int, max_bytes: int, *, min_one_message: bool = False, max_offset: int | None = None
    ) -> ReadInfo:
        """A region holding messages from ``offset`` on, at most ``max_bytes`` long (one segment's
        worth at most; it may end inside a message). Raises OffsetOutOfRangeError outside
        [log_start_offset, log_end_offset]; at log_end_offset the region is None.

        The region may start before ``offset`` when a compressed wrapper holds it. With
        ``min_one_message`` the first message is returned whole even if larger than ``max_bytes``.
        With ``max_offset`` (a batch boundary: a read-committed fetch passes the last stable offset)
        nothing at or past it is returned; such a read raises ``index_failure`` if it is set (the
        aborted transactions it would need may be missing from the index).
        """
        if max_offset is not None and self.index_failure is not None:
            raise self.index_failure
        while True:
            stable = self._stable  # published after the end: read first, it is never past the end read
            end = self._log_end_offset
            segments, bases = self._view
            start = min(max(segments[0].base_offset, self._start_floor), end)
            stable = max(stable, start)
            if offset < start or offset > end:
                raise OffsetOutOfRangeError(offset, start, end, where=str(self.directory))
            limit = end if max_offset is None else min(max_offset, end)
            if offset >= limit:
                return ReadInfo(None, start, end, stable, offset)
            try:
                for segment in segments[bisect.bisect_right(bases, offset) - 1 :]:
                    if segment.base_offset >= limit:
                        break
                    region = segment.read(offset, max_bytes, min_one_message=min_one_message, max_offset=max_offset)
                    if region is not None:
                        try:
                            bound = segment.offset_bound(region.position + region.length)
                        except SegmentDeletedError:  # deleted meanwhile: the region still reads
                            bound = segment.next_offset
                        bound = bound if max_offset is None else min(bound, max_offset)
                        return ReadInfo(region, start, end, stable, bound)
            except SegmentDeletedError:
                continue  # retention removed it meanwhile: look again at the new bounds
            return ReadInfo(None, start, end, stable, offset)

    def aborted_transactions(self, start: int, end: int) -> list[AbortedTxn]:
        """The aborted transactions with offsets in [``start``, ``end``) (producer id and first
        offset), from the aborted-transaction indexes of the segment holding ``start`` and the
        following ones, as far as an entry's last stable offset says a later abort cannot begin
        before ``end``. Lock-free, like ``read``. Raises ``index_failure`` if it is set (an abort may
        be missing)."""
        if self.index_failure is not None:
            raise self.index_failure
        found: list[AbortedTxn] = []
        if end <= start:
            return found
        segments, bases = self._view
        for segment in segments[max(0, bisect.bisect_right(bases, start) - 1) :]:
            listed, complete = segment.txn_index.collect(start, end)
            found += listed
            if complete:
                break
        return found

    def read_messages(self, offset: int, max_bytes: int = 1024 * 1024) -> list[Message]:
        """Decoded messages from ``offset`` on (CRCs checked), from at most ``max_bytes`` of log."""
        info = self.read(offset, max_bytes, min_one_message=True)
        if info.region is None:
            return []
        with info.region as region:
            return decode_all(region.read(), min_offset=offset)

    def offsets_before(self, timestamp: int, max_count: int) -> list[int]:
        """The seeds' getOffsetsBefore: segment start offsets, newest first, at most ``max_count``.

        ``timestamp`` -1 (latest) starts with the log end offset, -2 (earliest) gives the log start.
        Otherwise the answer starts at the newest segment whose newest message is not after
        ``timestamp`` (the log end counts as a segment of "now" when the active one holds data).
        """
        while True:
            segments = self.segments
            end = self._log_end_offset
            try:
                candidates = [(s.base_offset, s.max_timestamp) for s in segments]
                break
            except SegmentDeletedError:
                continue  # retention removed one meanwhile: take a new snapshot
        if timestamp not in (LATEST_TIME, EARLIEST_TIME):
            # a sealed segment the cleaner emptied has no timestamp to answer with
            candidates = [c for c, s in zip(candidates, segments, strict=True) if s.size or s is segments[-1]]
        if segments[-1].size > 0:
            candidates.append((end, self.clock()))
        floor = self._start_floor  # a segment start below the log start (DeleteRecords) is gone
        starts = [(max(offset, floor), ts) for offset, ts in candidates]
        if timestamp == LATEST_TIME:
            first = len(starts) - 1
        elif timestamp == EARLIEST_TIME:
            first = 0
        else:
            first = next((i for i in range(len(starts) - 1, -1, -1) if starts[i][1] <= timestamp), -1)
        return [starts[i][0] for i in range(first, max(first - max_count, -1), -1)]

    def offset_for_timestamp(self, timestamp: int) -> OffsetAndTimestamp | None:
        """The first message whose timestamp is at least ``timestamp`` (offset and its timestamp),
        exact to the message even when timestamps are out of order; None if there is none (a
        caller rewinding to the future should start at the log end)."""
        floor = self._start_floor
        for segment in self.segments:
            try:
                if segment.max_timestamp < timestamp or segment.next_offset <= floor:
                    continue  # every message in it is older, or deleted (DeleteRecords)
                start = segment.find_offset_by_timestamp(timestamp)
                if start is None:
                    continue
                found = self._search_timestamp(segment, max(start[1], segment.base_offset, floor), timestamp)
            except SegmentDeletedError:
                continue  # retention removed it meanwhile: its messages are gone, look further on
            if found is not None:
                return found
        return None

    def offset_of_max_timestamp(self) -> OffsetAndTimestamp | None:
        """The message with the largest timestamp (the first of them, where several share it), as
        ListOffsets v7's MAX_TIMESTAMP asks (KIP-734); None for a log with no timestamped message.
        Each segment keeps its largest timestamp and the entry that holds it (a batch or wrapper,
        known by its last offset), so only that one entry is read, to find the record inside it."""
        best: tuple[int, int, LogSegment] | None = None
        for segment in self.segments:
            try:
                timestamp, offset = segment.max_timestamp, segment.offset_of_max_timestamp
            except SegmentDeletedError:
                continue
            if timestamp >= 0 and offset >= 0 and (best is None or timestamp > best[0]):
                best = (timestamp, offset, segment)
        if best is None:
            return None
        timestamp, offset, segment = best
        try:
            region = segment.read(offset, _TIME_SEARCH_READ_BYTES, min_one_message=True)
        except SegmentDeletedError:
            return None  # retention removed it meanwhile: asked again, the next largest answers
        if region is not None:
            with region:
                for message in decode_all(region.read()):
                    if message.timestamp == timestamp:
                        return OffsetAndTimestamp(message.offset, timestamp)
        return OffsetAndTimestamp(offset, timestamp)  # the entry's own offset (an uncompressed v0/v1 message)

    def _search_timestamp(self, segment: LogSegment, offset: int, timestamp: int) -> OffsetAndTimestamp | None:
        # Start at the entry holding ``offset``: with compressed wrappers that may be earlier.
        while True:
            region = segment.read(offset, _TIME_SEARCH_READ_BYTES, min_one_message=True)
            if region is None:
                return None
            with region:
                messages = decode_all(region.read())
            if not messages:
                return None
            for message in messages:
                if message.timestamp >= timestamp:
                    return OffsetAndTimestamp(message.offset, message.timestamp)
            offset = messages[-1].offset + 1

    # ------------------------------------------------------------------ retention and truncation

    def enforce_retention(self, now: int | None = None) -> int:
        """Delete the oldest segments that retention by age or size no longer keeps; return how many.

        Age is judged by each segment's newest message timestamp, never by file times. A pass that
        finds nothing to delete changes nothing, so running it twice is harmless.
        """
        with self._lock:
            self._check_open()
            if not self.config.delete:
                return 0  # cleanup.policy=compact: the cleaner keeps the log small, not retention
            if self.index_failure is not None:
                return 0  # quarantined: the next opening must find the segments it knew
            now = self.clock() if now is None else now
            segments = list(self.segments)
            doomed: list[LogSegment] = []
            if self.config.retention_ms is not None:
                cutoff = now - self.config.retention_ms
                for segment in segments:
                    if segment.size == 0 and segment is not segments[-1]:
                        doomed.append(segment)  # emptied by the cleaner: nothing in it to keep
                        continue
                    if segment.size == 0 or segment.max_timestamp >= cutoff:
                        break
                    doomed.append(segment)
            if self.config.retention_bytes is not None:
                excess = sum(s.size for s in segments) - sum(s.size for s in doomed) - self.config.retention_bytes
                for segment in segments[len(doomed) : -1]:
                    if excess - segment.size < 0:
                        break
                    doomed.append(segment)
                    excess -= segment.size
            if not doomed:
                return 0
            if doomed[-1] is self.active_segment:
                self._roll()  # the active segment expired too: continue in a fresh, empty one
            keep = [s for s in self.segments if s not in doomed]
            self._set_segments(keep)  # readers see the new log start from here on
            for segment in doomed:
                logger.info("retention: deleting %s (newest message at %d)", segment.log_path, segment.max_timestamp)
                crash_point("log.retention.before_delete")
                segment.delete()
            fsync_dir(self.directory)
            return len(doomed)

    @property
    def closed(self) -> bool:
        return self._closed

    def take_truncation(self) -> int | None:
        """The lowest log end truncations left since the last call (None: none), and forget it:
        the cleaner starts over from there."""
        with self._lock:
            found, self._truncated_to = self._truncated_to, None
            return found

    @property
    def truncated_since_taken(self) -> bool:
        return self._truncated_to is not None

    def quarantine(self, failure: StorageError) -> None:
        """Refuse appends, read-committed reads and retention until the log is opened again (as
        ``index_failure`` does): what is on disk no longer matches the segments in memory (a
        cleaned segment's swap failed after its intent was written; the next opening finishes it)."""
        with self._lock:
            logger.error("%s", failure)
            if self.index_failure is None:
                self.index_failure = failure

    def replace_segments(self, old: list[LogSegment], install: Callable[[], LogSegment]) -> bool:
        """Put a cleaned segment where the run of segments ``old`` is, if they are still the log's
        (retention or a truncation may have removed some meanwhile: then nothing changes and False
        is returned). ``install`` moves the files (kafkalog.log.cleaner.swap) and opens the new
        segment; it runs under the log's lock, so appends and rolls wait for it and reads do not.
        The replaced segments keep their descriptors on the unlinked files until they are
        detached, after the new list is published: a read meanwhile still gets their bytes, and a
        failure inside ``install`` leaves the log serving the old ones (the next open finishes
        the swap on disk)."""
        with self._lock:
            self._check_open()
            segments = list(self.segments)
            try:
                first = next(i for i, s in enumerate(segments) if s is old[0])
            except StopIteration:
                return False
            if segments[first : first + len(old)] != old or first + len(old) >= len(segments):
                return False  # changed, or the active segment would be among them
            new = install()
            new.next_offset = segments[first + len(old)].base_offset
            new.on_corruption = self._note_corruption
            self._set_segments([*segments[:first], new, *segments[first + len(old) :]])
            for segment in old:
                segment.detach()
            return True

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: make ``offset`` the log start (durably, before answering), deleting the
        segments entirely below it; returns the new log start (the low watermark). Raises
        OffsetOutOfRangeError for an offset beyond the log end. Below the current start: no change."""
        with self._lock:
            self._check_open()
            if self.index_failure is not None:
                raise self.index_failure  # quarantined: nothing may move until it is opened again
            end = self._log_end_offset
            if not 0 <= offset <= end:
                raise OffsetOutOfRangeError(offset, self.log_start_offset, end, where=str(self.directory))
            if offset <= self.log_start_offset:
                return self.log_start_offset
            write_atomically(self.directory / LOG_START_FILE, b"%d\n" % offset, crash_prefix="log.start")
            self._start_floor = offset
            active = self.active_segment
            # an empty active segment holds nothing below the offset: it stays (a roll would
            # create its own file again)
            doomed = [s for s in self.segments if s.next_offset <= offset and (s is not active or s.size)]
            if doomed:
                if doomed[-1] is self.active_segment:
                    self._roll()  # everything is deleted: continue in a fresh, empty segment
                self._set_segments([s for s in self.segments if s not in doomed])
                for segment in doomed:
                    logger.info("delete records: deleting %s (below the new log start %d)", segment.log_path, offset)
                    segment.delete()
                fsync_dir(self.directory)
            return self.log_start_offset

    def truncate_to(self, offset: int) -> None:
        """Remove every message at ``offset`` and after (an operator's tool, e.g. to cut away a
        quarantined corrupt message). A compressed wrapper that straddles ``offset`` goes whole."""
        with self._lock:
            self._check_open()
            if offset < 0:
                raise LogError(f"{self.directory}: cannot truncate to offset {offset}: offsets start at 0")
            if offset >= self._log_end_offset:
                return
            end_before = self._log_end_offset
            segments = list(self.segments)
            keep = [s for s in segments if s.base_offset < offset]
            drop = [s for s in segments if s.base_offset >= offset]
            first_cut: int | None = None
            if keep:
                last = keep[-1]
                first_cut = last.first_offset_from(offset)
                last.truncate_to(offset)
                if last is not segments[-1]:
                    last.activate()
            else:
                start = offset
                for segment in drop:
                    segment.delete()
                drop = []
                keep = [LogSegment.create_active(self.directory, start, self.config)]
                keep[0].on_corruption = self._note_corruption
            for segment in drop:
                segment.delete()
            self._set_segments(keep)
            keep[-1].flush()
            fsync_dir(self.directory)
            # in a compacted log the end is where the first entry cut began (or the offset asked
            # for, in a gap), not the last kept record's next offset: offsets compacted away
            # below it must never be given out again
            if first_cut == -1:  # inside a v0/v1 wrapper: its messages go with it, no gap
                cut_at = keep[-1].next_offset
            else:
                cut_at = offset if first_cut is None else min(offset, first_cut)
            cut_at = max(keep[-1].next_offset, min(cut_at, end_before))
            if cut_at > keep[-1].next_offset:
                # an end past the last record is durable only as a segment's name: continue in
                # an empty one based there
                last = keep[-1]
                if last.size:
                    last.seal()
                else:
                    last.delete()
                    keep = keep[:-1]
                active = LogSegment.create_active(self.directory, cut_at, self.config)
                active.on_corruption = self._note_corruption
                keep = [*keep, active]
                self._set_segments(keep)
                fsync_dir(self.directory)
            self._stable = min(self._stable, cut_at)  # rebuilt below with the producers
            self._log_end_offset = cut_at
            self._truncated_to = cut_at if self._truncated_to is None else min(self._truncated_to, cut_at)
            self._recovery_point = self._log_end_offset
            self.corruption = next((s.corruption for s in keep if s.corruption is not None), None)
            if self._start_floor > self._log_end_offset:  # the log start cannot be beyond its end
                self._start_floor = self._log_end_offset
                write_atomically(self.directory / LOG_START_FILE, b"%d\n" % self._start_floor, crash_prefix="log.start")
            self.producers.truncate()  # snapshots may describe what was cut: rebuild from the log
            self.index_failure = None  # the replay below writes every entry again (or fails again)
            self._load_producers(snapshot=False)

    def verify(self) -> CorruptSegmentError | None:
        """Validate every segment completely; return the first corruption found (also logged)."""
        for segment in self.segments:
            try:
                corruption = segment.verify()
            except SegmentDeletedError:
                continue  # removed meanwhile (retention, the cleaner's swap): nothing left to check
            if corruption is not None:
                return corruption
        return None

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        """Flush and close every segment; the log end becomes the recovery point."""
        with self._lock:
            if self._closed:
                return
            try:
                self.active_segment.flush()
                self._recovery_point = self._log_end_offset
                # with an index entry missing, no snapshot past its marker: the next load must
                # replay that marker, which writes the entry again
                if len(self.producers) and self.index_failure is None:
                    self.producers.take_snapshot(self._log_end_offset, self.clock())
            finally:
                for segment in self.segments:
                    segment.close()
                self._closed = True
