"""Walking a segment file's entries from disk in large chunks, validating each (size, magic, CRC,
rising offsets): the common pass behind recovery, index rebuilds and first-read verification."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from kafkalog.record import kernels

CHUNK_BYTES = 4 * 1024 * 1024
_HEADER = 12  # offset + size: enough to learn how long an entry is


@dataclass(slots=True)
class ScanResult:
    """What a scan of ``[start, end)`` of a file found.

    ``valid_end`` is where the last valid entry ends; ``error`` (reason) and ``error_position`` are
    set when an invalid entry was found there, else the scan stopped at ``end`` or at a partial
    trailing entry starting at ``valid_end``. Index points are absolute (position, offset, largest
    timestamp so far, its offset), "so far" counting from ``start``.
    """

    valid_end: int
    entries: int = 0
    last_offset: int = -1
    max_timestamp: int = -1
    offset_of_max_timestamp: int = -1
    index_points: list[tuple[int, int, int, int]] = field(default_factory=list)
    bytes_since_index: int = 0
    error: str | None = None
    error_position: int = -1


def scan_file(
    fd: int,
    start: int,
    end: int,
    *,
    min_next_offset: int,
    index_interval: int,
    bytes_since_index: int,
    verify_crc: bool = True,
) -> ScanResult:
    """Validate the entries of ``fd`` between byte ``start`` and ``end``, reading big chunks."""
    result = ScanResult(valid_end=start, bytes_since_index=bytes_since_index)
    position = start
    floor = min_next_offset
    want = CHUNK_BYTES
    while position < end:
        requested = min(want, end - position)
        chunk = os.pread(fd, requested, position)
        stop, entries, last_offset, max_ts, off_max, points, since, error = kernels.scan_entries(
            chunk, 0, len(chunk), verify_crc, floor, index_interval, result.bytes_since_index
        )
        for point_pos, point_offset, point_max, point_max_offset in points:
            if point_max > result.max_timestamp:
                result.max_timestamp, result.offset_of_max_timestamp = point_max, point_max_offset
            result.index_points.append(
                (position + point_pos, point_offset, result.max_timestamp, result.offset_of_max_timestamp)
            )
        if max_ts > result.max_timestamp:
            result.max_timestamp, result.offset_of_max_timestamp = max_ts, off_max
        if entries:
            result.entries += entries
            result.last_offset = last_offset
            floor = last_offset + 1
        result.bytes_since_index = since
        chunk_end = position + len(chunk)
        position += stop
        result.valid_end = position
        if error is not None:
            result.error, result.error_position = error[2], position
            return result
        if stop == len(chunk):
            want = CHUNK_BYTES
            continue
        # The kernel stopped at an entry this chunk cuts. At the end of the range (or file) that
        # entry is a partial trailing one; otherwise read again from it, big enough to hold it.
        if len(chunk) < requested or chunk_end >= end:
            break
        rest = chunk[stop:]
        needed = _HEADER + int.from_bytes(rest[8:12], "big", signed=True) if len(rest) >= _HEADER else _HEADER
        if position + needed > end:
            break
        want = max(CHUNK_BYTES, needed)
    return result
