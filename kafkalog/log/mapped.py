"""A memory map of a file that holds no file descriptor (the index files' maps).

The standard library's ``mmap.mmap`` keeps a duplicate of the descriptor it maps for as long as the
map lives (Python 3.13 adds ``trackfd=False``; this project runs on 3.11). With two indexes per
segment, a broker would hold three descriptors per segment, and 10,000 partitions would not fit a
20,000-descriptor limit. The kernel itself needs no descriptor once a file is mapped, so this maps
with libc's ``mmap`` directly and the caller closes its descriptor at once, as Kafka's JVM does.

The map is a ctypes char array over the mapped pages: ``struct.pack_into`` and ``unpack_from`` work
on it like on ``mmap.mmap``. Using it after ``close()`` raises ValueError, never touches unmapped
memory.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
from typing import Any

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
_libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_libc.msync.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_MAP_FAILED = ctypes.c_void_p(-1).value
_MS_SYNC = 4  # <sys/mman.h> on Linux


class MappedFile:
    """``length`` bytes of the file open as ``fd``, mapped shared (read-only unless ``writable``).
    The descriptor may be closed as soon as this returns."""

    __slots__ = ("_address", "_buffer", "length")

    def __init__(self, fd: int, length: int, *, writable: bool) -> None:
        if length <= 0:
            raise ValueError(f"cannot map {length} bytes")
        protection = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
        address = _libc.mmap(None, length, protection, mmap.MAP_SHARED, fd, 0)
        if address is None or address == _MAP_FAILED:
            error = ctypes.get_errno()
            raise OSError(error, f"mmap of {length} bytes failed: {os.strerror(error)}")
        self._address: int | None = address
        self._buffer: Any = (ctypes.c_char * length).from_address(address)
        self.length = length

    @property
    def buffer(self) -> Any:
        """The mapped bytes (a writable buffer of ``length`` bytes)."""
        if self._buffer is None:
            raise ValueError("the map is closed")
        return self._buffer

    def __getitem__(self, key: slice) -> bytes:
        return bytes(self.buffer[key])

    def flush(self) -> None:
        """Write the map's dirty pages to the file (msync), as ``mmap.mmap.flush``."""
        if self._address is None:
            raise ValueError("the map is closed")
        if _libc.msync(self._address, self.length, _MS_SYNC) != 0:
            error = ctypes.get_errno()
            raise OSError(error, f"msync failed: {os.strerror(error)}")

    def close(self) -> None:
        if self._address is None:
            return
        address, self._address, self._buffer = self._address, None, None
        _libc.munmap(address, self.length)
