"""The aborted-transaction index of a segment: ``<base offset, 20 digits>.txnindex``, Kafka's layout.

    entry (34 bytes) =>
      Version           int16  0
      ProducerId        int64
      FirstOffset       int64  the transaction's first offset
      LastOffset        int64  the offset of its ABORT marker
      LastStableOffset  int64  the log's last stable offset once it was aborted

An entry lives in the index of the segment that holds its ABORT marker, so entries rise by last
offset. A read-committed fetch asks which aborted transactions touch the offsets it returns
(``Log.aborted_transactions``); LastStableOffset says where it may stop looking: a transaction
aborted later was still open then, so it began at or after that offset, or began later still.

The index is derived from the log: recovery and truncation rebuild the entries of the markers they
replay (kafkalog.log.log); a partial trailing entry (a torn write) is dropped when it is opened.
"""

from __future__ import annotations

import logging
import os
import struct
from pathlib import Path
from typing import NamedTuple

from kafkalog.errors import StorageError
from kafkalog.log.faults import crash_point
from kafkalog.log.index import CorruptIndexError

logger = logging.getLogger(__name__)

_ENTRY = struct.Struct(">hqqqq")  # Version, ProducerId, FirstOffset, LastOffset, LastStableOffset
ENTRY_SIZE = _ENTRY.size  # 34
_VERSION = 0


class AbortedTxn(NamedTuple):
    """An aborted transaction as Fetch lists it: its producer and its first offset."""

    producer_id: int
    first_offset: int


class TxnIndexEntry(NamedTuple):
    """One entry of a .txnindex (see the module doc)."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    """The entries of one segment's .txnindex, kept in memory and appended to the file.

    Changes (append, truncate, flush, delete) come from the owning segment under the log's lock;
    ``entries`` is a tuple replaced whole on every change, so readers take it without a lock. The
    file exists only once an entry was appended (most segments never hold an abort).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._dirty = False
        self.entries: tuple[TxnIndexEntry, ...] = self._read()

    def _read(self) -> tuple[TxnIndexEntry, ...]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return ()
        except OSError as exc:
            raise StorageError(f"cannot read {self.path}: {exc}") from exc
        whole = len(data) - len(data) % ENTRY_SIZE
        if whole != len(data):
            logger.warning(
                "%s ends in a partial entry (a torn write): dropping its %d bytes", self.path, len(data) - whole
            )
            self._truncate_file(whole)
        entries = []
        for version, *fields in _ENTRY.iter_unpack(data[:whole]):
            if version != _VERSION:
                raise CorruptIndexError(f"{self.path}: an entry has version {version}, not {_VERSION}")
            entries.append(TxnIndexEntry(*fields))
        return tuple(entries)

    def append(self, entry: TxnIndexEntry) -> None:
        """Add the entry of a transaction just aborted (its marker follows every entry's)."""
        if self.entries and entry.last_offset <= self.entries[-1].last_offset:
            raise CorruptIndexError(
                f"{self.path}: an entry ending at {entry.last_offset} does not follow the last one "
                f"({self.entries[-1].last_offset})"
            )
        data = _ENTRY.pack(_VERSION, *entry)
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
        except OSError as exc:
            raise StorageError(f"cannot append to {self.path}: {exc}") from exc
        crash_point("txnindex.append.after_write")
        self._dirty = True
        self.entries = (*self.entries, entry)

    def truncate_to(self, offset: int) -> None:
        """Forget the entries whose marker is at ``offset`` or after (cut from the log)."""
        kept = tuple(e for e in self.entries if e.last_offset < offset)
        if len(kept) != len(self.entries):
            self._truncate_file(len(kept) * ENTRY_SIZE)
            self.entries = kept

    def _truncate_file(self, size: int) -> None:
        try:
            if size == 0:
                self.path.unlink(missing_ok=True)
                self._dirty = False
                return
            os.truncate(self.path, size)
        except OSError as exc:
            raise StorageError(f"cannot truncate {self.path} to {size} bytes: {exc}") from exc
        self._dirty = True

    def flush(self) -> None:
        """Make the appended entries durable (with the segment's own flush)."""
        if not self._dirty:
            return
        try:
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise StorageError(f"cannot fsync {self.path}: {exc}") from exc
        self._dirty = False

    def collect(self, start: int, end: int) -> tuple[list[AbortedTxn], bool]:
        """The aborted transactions with offsets in [``start``, ``end``), and whether the search is
        complete (an entry's last stable offset reached ``end``: no later index can add one)."""
        found = []
        complete = False
        for entry in self.entries:
            if entry.last_offset >= start and entry.first_offset < end:
                found.append(AbortedTxn(entry.producer_id, entry.first_offset))
            if entry.last_stable_offset >= end:
                complete = True
                break
        return found, complete
