"""The sparse indexes of a segment: OffsetIndex (.index) and TimeIndex (.timeindex).

Both are Kafka's layouts: fixed-width big-endian entries in a memory-mapped file that grows (really
allocated, by doubling) while the segment is active and is trimmed to its entries when sealed.

    .index      entry = relative offset (int32) + byte position in the .log (int32)
    .timeindex  entry = timestamp (int64) + relative offset (int32)

An index holds no file descriptor while open, only its map (kafkalog.log.mapped: a map outlives
the descriptor it was made from): a broker with 10,000 partitions then needs one descriptor per segment, its .log, as
Kafka's does, not three. The file is opened for the moments that need it (growing, sealing,
trimming) and closed again.

Indexes are caches: everything in them can be rebuilt from the .log. They are trusted only after a
structural check (``problem()``), and a read that lands where the index said a message starts
re-checks it; any disagreement makes the segment rebuild its indexes from the log.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar

from kafkalog.errors import LogError
from kafkalog.log.mapped import MappedFile

_FIRST_ALLOCATION = 4096  # bytes an index file gets when it becomes writable; it doubles as it fills


class CorruptIndexError(LogError):
    """An index file's bytes cannot be its entries (size not a multiple of the entry size, ...)."""


def _check_whole_entries(path: Path, size: int, entry_size: int) -> None:
    if size % entry_size:
        raise CorruptIndexError(f"{path}: size {size} is not a multiple of {entry_size}")


class IndexFile:
    """Fixed-width entries in a memory-mapped file. Not thread-safe: the owning LogSegment calls it
    under its lock (appends, lookups, sealing and growing all remap or read the map)."""

    ENTRY: ClassVar[struct.Struct]

    def __init__(self, path: Path, base_offset: int, *, max_bytes: int, writable: bool) -> None:
        self.path = path
        self.base_offset = base_offset
        self._entry_size = self.ENTRY.size
        self._closed = False
        self._mmap: MappedFile | None = None
        self._last: tuple[int, tuple[int, ...]] = (-1, ())
        with self._opened(create=True) as fd:
            size = os.fstat(fd).st_size
            _check_whole_entries(path, size, self._entry_size)
            self.entries = size // self._entry_size
            self._capacity = self._max_capacity = self.entries
            if writable:
                self._max_capacity = max(max_bytes // self._entry_size, self.entries)
                self._allocate(
                    fd, min(self._max_capacity, max(self.entries * 2, _FIRST_ALLOCATION // self._entry_size))
                )
            elif size:
                self._mmap = MappedFile(fd, size, writable=False)

    @contextmanager
    def _opened(self, *, create: bool = False) -> Iterator[int]:
        """The file's descriptor for one operation; closed after it (the map stays)."""
        fd = os.open(self.path, os.O_RDWR | (os.O_CREAT if create else 0), 0o644)
        try:
            yield fd
        finally:
            os.close(fd)

    @property
    def is_full(self) -> bool:
        return self.entries >= self._max_capacity

    @property
    def size_in_bytes(self) -> int:
        return self.entries * self._entry_size

    def make_writable(self, max_bytes: int) -> None:
        """Map the file for appends, growing it on demand up to ``max_bytes`` (at least its entries)."""
        self._max_capacity = max(max_bytes // self._entry_size, self.entries)
        with self._opened() as fd:
            self._allocate(fd, min(self._max_capacity, max(self.entries * 2, _FIRST_ALLOCATION // self._entry_size)))

    def _allocate(self, fd: int, capacity: int) -> None:
        if self._mmap is not None:
            self._mmap.close()
            self._mmap = None
        length = capacity * self._entry_size
        # Real allocation, not a sparse file: a store into an unbacked page on a full disk would
        # kill the process with SIGBUS instead of failing an append. Growing by doubling keeps
        # the disk used proportional to the entries (a few remaps over a segment's life).
        os.posix_fallocate(fd, 0, length)
        self._mmap = MappedFile(fd, length, writable=True)
        self._capacity = capacity

    def entry(self, i: int) -> tuple[int, ...]:
        assert self._mmap is not None
        return self.ENTRY.unpack_from(self._mmap.buffer, i * self._entry_size)

    def _append(self, *values: int) -> None:
        if self.entries >= self._capacity:
            if self.entries >= self._max_capacity or self._mmap is None:
                raise LogError(f"{self.path} is full ({self.entries} entries)")
            with self._opened() as fd:
                self._allocate(fd, min(self._max_capacity, self._capacity * 2))
        assert self._mmap is not None
        self.ENTRY.pack_into(self._mmap.buffer, self.entries * self._entry_size, *values)
        self.entries += 1
        self._last = (self.entries, values)

    def _last_entry(self) -> tuple[int, ...]:
        # Appends are hot: remember the last entry instead of unpacking it from the map each time.
        cached_count, values = self._last
        if cached_count == self.entries:
            return values
        return self.entry(self.entries - 1)

    def _last_below(self, limit: int) -> int:
        """Index of the last entry whose first field is below ``limit`` (entries rise), or -1."""
        lo, hi = 0, self.entries - 1
        found = -1
        while lo <= hi:
            mid = (lo + hi) // 2
            if self.entry(mid)[0] < limit:
                found = mid
                lo = mid + 1
            else:
                hi = mid - 1
        return found

    def all_entries(self) -> list[tuple[int, ...]]:
        if self._mmap is None or not self.entries:
            return []
        return list(self.ENTRY.iter_unpack(self._mmap[: self.entries * self._entry_size]))

    def reset(self) -> None:
        """Forget every entry (before a rebuild)."""
        self.entries = 0

    def flush(self) -> None:
        if self._mmap is not None and self._capacity:
            self._mmap.flush()

    def seal(self) -> None:
        """Trim the file to its entries, make it durable, and map it read-only."""
        used = self.entries * self._entry_size
        if self._mmap is not None:
            self._mmap.flush()
            self._mmap.close()
            self._mmap = None
        with self._opened() as fd:
            os.ftruncate(fd, used)
            os.fsync(fd)
            self._capacity = self._max_capacity = self.entries
            if used:
                self._mmap = MappedFile(fd, used, writable=False)

    def close(self, *, trim: bool = True) -> None:
        """Close; with ``trim``, first cut the file to its entries (an allocated tail would read as
        bogus entries). Without it the file is left as it is: it is about to be deleted or rebuilt."""
        if self._closed:
            return
        self._closed = True
        if self._mmap is not None:
            self._mmap.close()
            self._mmap = None
        if trim:
            with self._opened() as fd:
                os.ftruncate(fd, self.entries * self._entry_size)


class OffsetIndex(IndexFile):
    """Maps offsets to byte positions in the segment's .log, sparsely: an entry (o, p) says the
    entry stored with offset o starts at position p. Lookups find the greatest entry at or below an
    offset; the log is then scanned forward from there."""

    ENTRY = struct.Struct(">ii")

    def append(self, offset: int, position: int) -> None:
        relative = offset - self.base_offset
        if self.entries:
            last_relative, last_position = self._last_entry()
            if relative <= last_relative or position <= last_position:
                raise LogError(f"{self.path}: entry ({offset}, {position}) does not follow the last one")
        self._append(relative, position)

    def last(self) -> tuple[int, int]:
        """(offset, position) of the last entry, or (base_offset, 0) when empty."""
        if not self.entries:
            return self.base_offset, 0
        relative, position = self.entry(self.entries - 1)
        return self.base_offset + relative, position

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the greatest entry with offset <= ``offset``; (base, 0) if none."""
        found = self._last_below(offset - self.base_offset + 1)
        if found < 0:
            return self.base_offset, 0
        relative, position = self.entry(found)
        return self.base_offset + relative, position

    def floor_position(self, position: int) -> tuple[int, int]:
        """(offset, position) of the last entry at byte ``position`` or before; (base, 0) if none."""
        lo, hi = 0, self.entries
        while lo < hi:  # entries rise by position too
            mid = (lo + hi) // 2
            if self.entry(mid)[1] <= position:
                lo = mid + 1
            else:
                hi = mid
        if lo == 0:
            return self.base_offset, 0
        relative, found = self.entry(lo - 1)
        return self.base_offset + relative, found

    def problem(self, log_size: int) -> str | None:
        """Why the entries cannot be right for a .log of ``log_size`` bytes, or None."""
        last_relative, last_position = -1, -1
        for relative, position in self.all_entries():
            if relative <= last_relative or position <= last_position:
                return f"entries do not rise at relative offset {relative}, position {position}"
            last_relative, last_position = relative, position
        if last_position >= log_size:
            return f"an entry points at position {last_position}, beyond the log's {log_size} bytes"
        return None


class TimeIndex(IndexFile):
    """Maps timestamps to offsets, sparsely: an entry (t, o) says that t is the largest timestamp
    of every message up to and including offset o (and the message at o carries it). Entries rise
    strictly in both fields; the last one holds the segment's largest timestamp once sealed."""

    ENTRY = struct.Struct(">qi")

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Append (timestamp, offset) if it raises the largest timestamp recorded so far."""
        if timestamp < 0 or offset < self.base_offset:
            return  # "no timestamp" (an empty segment's maximum) is not an entry
        if self.entries:
            last_ts, last_relative = self._last_entry()
            if timestamp <= last_ts or offset - self.base_offset <= last_relative:
                return
        if not self.is_full:
            self._append(timestamp, offset - self.base_offset)

    def last(self) -> tuple[int, int] | None:
        """(timestamp, offset) of the last entry, or None when empty."""
        if not self.entries:
            return None
        timestamp, relative = self.entry(self.entries - 1)
        return timestamp, self.base_offset + relative

    def offset_below(self, timestamp: int) -> int | None:
        """Offset o of the last entry (t, o) with t < ``timestamp``: every message up to o is older
        than ``timestamp``, so a search for it may start after o. None if there is no such entry."""
        found = self._last_below(timestamp)
        if found < 0:
            return None
        return self.base_offset + self.entry(found)[1]

    def problem(self, next_offset: int) -> str | None:
        """Why the entries cannot be right for a segment ending before ``next_offset``, or None."""
        last_ts, last_relative = -2, -1
        for timestamp, relative in self.all_entries():
            if timestamp <= last_ts or relative <= last_relative:
                return f"entries do not rise at timestamp {timestamp}, relative offset {relative}"
            last_ts, last_relative = timestamp, relative
        if last_relative >= 0 and self.base_offset + last_relative >= next_offset:
            return f"an entry names offset {self.base_offset + last_relative}, beyond the segment's end {next_offset}"
        return None
