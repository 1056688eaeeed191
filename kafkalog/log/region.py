"""FileRegion: a byte range of a segment file, ready to be sent with sendfile or read."""

from __future__ import annotations

import os
from types import TracebackType

_MAGIC_POS = 16  # in every message format, an entry's magic byte sits at byte 16


class FileRegion:
    """``length`` bytes of a segment file from byte ``position``, through a descriptor of its own.

    The descriptor is a duplicate, so the region stays readable even if retention deletes the
    segment meanwhile (the kernel keeps the file until the last descriptor closes). The owner must
    ``close()`` it (or use it as a context manager). The region may end inside a message: readers
    stop before a partial trailing entry. Not thread-safe.
    """

    __slots__ = ("fd", "length", "path", "position")

    def __init__(self, fd: int, position: int, length: int, path: str) -> None:
        self.fd = fd
        self.position = position
        self.length = length
        self.path = path

    def __repr__(self) -> str:
        return f"FileRegion({self.path}, position={self.position}, length={self.length})"

    def read(self) -> bytes:
        """The region's bytes."""
        parts = []
        done = 0
        while done < self.length:
            chunk = os.pread(self.fd, self.length - done, self.position + done)
            if not chunk:
                break  # the file was truncated underneath (only an operator's truncation does this)
            parts.append(chunk)
            done += len(chunk)
        return b"".join(parts)

    def first_magic(self) -> int | None:
        """The magic byte of the region's first entry (None if the region is shorter than that)."""
        byte = os.pread(self.fd, 1, self.position + _MAGIC_POS) if self.length > _MAGIC_POS else b""
        return byte[0] if byte else None

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> FileRegion:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
