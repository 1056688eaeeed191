"""The cleaner's offset map: key → the highest offset seen with it, in a fixed amount of memory.

Kafka's SkinnyOffsetMap: a table of 24-byte slots (a key's 128-bit hash and an offset) filled to a
load factor, so the cleaner's memory is the table whatever the keys (kafkalog.record's compaction
kernels define its layout and do the work). A hash stands for its key: two keys sharing all 128
bits would lose the older one's value (a chance of about n² / 2¹²⁹ for n keys).
"""

from __future__ import annotations

import ctypes

from kafkalog.errors import LogConfigError
from kafkalog.record import kernels
from kafkalog.record._fastpath_compact import MAP_SLOT_BYTES

MIN_MAP_BYTES = 1024 * MAP_SLOT_BYTES  # below this a log's key set is cleaned in too many passes


class OffsetMap:
    """A bounded key → offset map for one cleaning pass: ``put`` through the kernels, ``clear``
    between passes. Not thread-safe (one cleaner thread owns it)."""

    def __init__(self, memory_bytes: int, load_factor: float = 0.9) -> None:
        if memory_bytes < MIN_MAP_BYTES:
            raise LogConfigError(f"the cleaner's offset map needs at least {MIN_MAP_BYTES} bytes, not {memory_bytes}")
        if not 0.1 <= load_factor < 1:
            raise LogConfigError(f"the offset map's load factor must be in [0.1, 1), not {load_factor}")
        self.slots = memory_bytes // MAP_SLOT_BYTES
        self.max_entries = int(self.slots * load_factor)
        self.table = bytearray(self.slots * MAP_SLOT_BYTES)
        self.used = 1  # so that clear() fills it
        self.clear()
        """Keys held now."""

    @property
    def memory_bytes(self) -> int:
        """What the table takes: the map's whole memory, fixed when it was made."""
        return len(self.table)

    @property
    def room(self) -> int:
        """How many more keys fit."""
        return self.max_entries - self.used

    def clear(self) -> None:
        """Empty every slot (an empty slot is all 0xFF bytes), in place: memset, not a copy."""
        if self.used:
            ctypes.memset((ctypes.c_char * len(self.table)).from_buffer(self.table), 0xFF, len(self.table))
            self.used = 0

    def get(self, key: bytes) -> int:
        """The highest offset put for ``key``; -1 if none."""
        return int(kernels.map_get(self.table, key))
