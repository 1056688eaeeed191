"""The result of validating produced data for a log: what is written, and what the indexes learn."""

from __future__ import annotations

from typing import NamedTuple


class ValidatedSet(NamedTuple):
    """A message set checked and given offsets, ready to be written as is.

    ``index_points`` are (position in ``data``, offset, max timestamp so far, offset of that max)
    where sparse offset and time indexes should point, per ``index_interval_bytes`` ("so far" is
    within this set); ``bytes_since_index`` carries the byte count on to the next append.
    ``max_timestamp``/``offset_of_max_timestamp`` use shallow offsets (a wrapper's last offset).
    """

    data: bytes | bytearray
    first_offset: int
    next_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    index_points: list[tuple[int, int, int, int]]
    bytes_since_index: int

    @property
    def message_count(self) -> int:
        """Number of logical messages (inner messages of wrappers counted one by one)."""
        return self.next_offset - self.first_offset
