"""Local files (plain paths and file:// URLs) with HDFS semantics: renames never replace.

POSIX rename(2) silently replaces an existing file (and an empty directory), so renames here use
Linux renameat2(RENAME_NOREPLACE), which refuses atomically; where the kernel or filesystem lacks it,
files fall back to link(2)+unlink(2) (link fails with EEXIST) and directories to a checked rename.
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
from pathlib import Path

from pipelines.errors import AlreadyExistsError, StorageError
from pipelines.storage.base import FileStatus, Storage

_AT_FDCWD = -100
_RENAME_NOREPLACE = 1


def _load_renameat2() -> object | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        function = libc.renameat2
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


_renameat2 = _load_renameat2()


def local_path(path: str) -> str:
    """``file:///a/b`` or ``file:/a/b`` or ``/a/b`` as ``/a/b``."""
    if path.startswith("file://"):
        return path[len("file://") :]
    if path.startswith("file:"):
        return path[len("file:") :]
    return path


def rename_noreplace(src: str, dst: str) -> bool:
    """Rename without replacing; False if ``dst`` exists or ``src`` is missing. Raises OSError otherwise."""
    if _renameat2 is not None:
        result = _renameat2(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), _RENAME_NOREPLACE)  # type: ignore[operator]
        if result == 0:
            return True
        code = ctypes.get_errno()
        if code in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOENT):
            return False
        if code not in (errno.EINVAL, errno.ENOSYS):
            raise OSError(code, os.strerror(code), src)
    if os.path.isdir(src):
        if os.path.lexists(dst):
            return False
        os.rename(src, dst)  # a race with a concurrent creator of dst remains; see the module doc
        return True
    try:
        os.link(src, dst)
    except FileExistsError:
        return False
    except FileNotFoundError:
        return False
    os.unlink(src)
    return True


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LocalStorage(Storage):
    """Local filesystem. Paths keep the form they were given in (plain or file://)."""

    def exists(self, path: str) -> bool:
        return os.path.lexists(local_path(path))

    def read_bytes(self, path: str) -> bytes:
        try:
            return Path(local_path(path)).read_bytes()
        except OSError as exc:
            raise StorageError(f"reading {path} failed: {exc.strerror or exc}") from exc

    def write_bytes(self, path: str, data: bytes) -> None:
        target = local_path(path)
        try:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError as exc:
            raise AlreadyExistsError(f"creating {path} refused: it already exists") from exc
        except OSError as exc:
            raise StorageError(f"creating {path} failed: {exc.strerror or exc}") from exc
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except OSError as exc:
            os.close(fd)
            os.unlink(target)
            raise StorageError(f"writing {path} failed: {exc.strerror or exc}") from exc
        os.close(fd)
        _fsync_dir(os.path.dirname(target))

    def copy(self, src: str, dst: str) -> None:
        """A hard link where the filesystem allows it (published files are immutable: a later
        delete of either name leaves the other whole), else a byte copy."""
        source, target = local_path(src), local_path(dst)
        try:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.link(source, target)
        except FileExistsError as exc:
            raise AlreadyExistsError(f"copying {src} to {dst} refused: {dst} already exists") from exc
        except OSError:
            super().copy(src, dst)

    def rename(self, src: str, dst: str) -> bool:
        source, target = local_path(src), local_path(dst)
        if not os.path.lexists(source):
            return False
        try:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            done = rename_noreplace(source, target)
            if done:
                _fsync_dir(os.path.dirname(target))
        except OSError as exc:
            raise StorageError(f"renaming {src} to {dst} failed: {exc.strerror or exc}") from exc
        return done

    def list(self, path: str) -> list[FileStatus]:
        directory = local_path(path)
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StorageError(f"listing {path} failed: {exc.strerror or exc}") from exc
        prefix = path.rstrip("/")
        out = []
        for entry in entries:
            is_dir = entry.is_dir(follow_symlinks=False)
            size = 0 if is_dir else entry.stat(follow_symlinks=False).st_size
            out.append(FileStatus(f"{prefix}/{entry.name}", entry.name, is_dir, size))
        return out

    def delete(self, path: str, *, recursive: bool = False) -> bool:
        target = local_path(path)
        try:
            if os.path.isdir(target) and not os.path.islink(target):
                if recursive:
                    shutil.rmtree(target)
                else:
                    os.rmdir(target)
            else:
                os.unlink(target)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise StorageError(f"deleting {path} failed: {exc.strerror or exc}") from exc
        return True
