"""File names of a log directory, and the few file operations whose order makes them crash-safe.

Segment files are named by their base offset, zero-padded to 20 digits so that ``ls`` sorts them
numerically: ``00000000000000000042.log`` with ``.index`` and ``.timeindex`` beside it, and
``.txnindex`` once a transaction aborted in it.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from kafkalog.errors import StorageError
from kafkalog.log.faults import crash_point

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"  # the aborted transactions whose markers the segment holds
DELETED_SUFFIX = ".deleted"  # a segment file being deleted (renamed first, so a crash can finish it)
TMP_SUFFIX = ".tmp"  # a checkpoint being written
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
_DIGITS = 20


def filename_prefix(offset: int) -> str:
    """The 20-digit zero-padded name stem of the segment whose base offset is ``offset``."""
    return f"{offset:0{_DIGITS}d}"


def segment_path(directory: Path, base_offset: int, suffix: str) -> Path:
    return directory / (filename_prefix(base_offset) + suffix)


def parse_base_offset(name: str, suffix: str) -> int | None:
    """The base offset named by ``name`` if it is ``<20 digits><suffix>``, else None."""
    if not name.endswith(suffix):
        return None
    stem = name[: -len(suffix)]
    if len(stem) != _DIGITS or not stem.isdigit():
        return None
    return int(stem)


def fsync_dir(directory: Path) -> None:
    """Make renames, creations and deletions inside ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def rename_new(source: Path, target: Path) -> None:
    """Rename ``source`` to ``target``, which must not exist (never silently replace a file)."""
    try:
        os.link(source, target)  # fails with EEXIST instead of replacing
    except OSError as exc:
        if exc.errno == errno.EEXIST:
            raise StorageError(f"cannot rename {source} to {target}: the target exists") from exc
        raise StorageError(f"cannot rename {source} to {target}: {exc}") from exc
    try:
        source.unlink()
    except OSError as exc:
        raise StorageError(f"renamed {source} to {target} but cannot remove the old name: {exc}") from exc


def write_atomically(path: Path, data: bytes, *, crash_prefix: str, fsync: bool = True) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old file or the new, never a mix.

    Write a temporary file, fsync it, rename it over ``path``, fsync the directory. This is the one
    place we rename onto an existing file on purpose: the replacement is the point, and rename(2)
    of a file onto a file is atomic on local filesystems. Without ``fsync`` the file is still
    replaced whole for a process that dies (the page cache keeps it), but a power cut may leave
    the old one: for state whose data follows the log's flush policy (never fsynced by default).
    """
    tmp = path.with_name(path.name + TMP_SUFFIX)
    try:
        with tmp.open("wb") as out:
            out.write(data)
            out.flush()
            crash_point(f"{crash_prefix}.tmp_written")
            if fsync:
                os.fsync(out.fileno())
        crash_point(f"{crash_prefix}.tmp_synced")
        tmp.replace(path)
        crash_point(f"{crash_prefix}.renamed")
        if fsync:
            fsync_dir(path.parent)
    except OSError as exc:
        raise StorageError(f"cannot write {path}: {exc}") from exc
