"""The storage interface that commit, status and offset tools use (Spark writes data on its own).

Semantics follow HDFS, the strictest of the filesystems we run on: a rename never replaces an
existing path (it returns False instead, as HDFS does), paths are absolute URLs or local paths, and
directories are created on demand. Callers treat a False rename as an error (see ``rename_or_fail``).
"""

from __future__ import annotations

import builtins
import secrets
from abc import ABC, abstractmethod
from dataclasses import dataclass

from pipelines.errors import AlreadyExistsError, StorageError


@dataclass(frozen=True, slots=True)
class FileStatus:
    """One entry of a directory listing."""

    path: str
    """Full path (same form as the directory that was listed, joined with the name)."""
    name: str
    is_dir: bool
    size: int


class Storage(ABC):
    """A filesystem seen as paths. Implementations: local files, WebHDFS, Hadoop's FileSystem."""

    @abstractmethod
    def exists(self, path: str) -> bool: ...

    @abstractmethod
    def read_bytes(self, path: str) -> bytes:
        """The whole file; StorageError (naming the path) if it is missing or unreadable."""

    @abstractmethod
    def write_bytes(self, path: str, data: bytes) -> None:
        """Create ``path`` with ``data`` (parents created), durable when this returns.
        Raises AlreadyExistsError if ``path`` exists: nothing is overwritten."""

    @abstractmethod
    def rename(self, src: str, dst: str) -> bool:
        """Move ``src`` (file or directory) to ``dst`` in one step, creating ``dst``'s parent.
        Returns False, without changing anything, if ``dst`` exists or ``src`` does not."""

    @abstractmethod
    def list(self, path: str) -> list[FileStatus]:
        """Entries of directory ``path`` sorted by name; [] if it does not exist."""

    @abstractmethod
    def delete(self, path: str, *, recursive: bool = False) -> bool:
        """Remove ``path``; True if something was removed."""

    def join(self, *parts: str) -> str:
        """``parts`` joined with ``/`` (URLs and local paths alike)."""
        head, *rest = parts
        return "/".join([head.rstrip("/"), *(p.strip("/") for p in rest if p)])

    def write_new(self, path: str, data: bytes) -> None:
        """Publish ``data`` at ``path`` atomically: a temporary file beside it, renamed into place
        (never over an existing file). Readers see nothing or the whole content.

        Each call writes its own temporary (a random token in its name): two writers racing for
        the same path must not share, delete or rename each other's temporary, so that exactly one
        wins and the other sees ``AlreadyExistsError`` rather than a missing file."""
        parent, slash, name = path.rpartition("/")
        if not slash or not parent:
            raise StorageError(f"{path!r}: publishing needs a path inside a directory")
        temp = f"{parent}/.{name}.{secrets.token_hex(6)}.tmp"
        self.write_bytes(temp, data)
        try:
            self.rename_or_fail(temp, path)
        except StorageError:
            self.delete(temp)
            raise

    def copy(self, src: str, dst: str) -> None:
        """Give ``dst`` the content of file ``src`` (never over an existing file). For published
        files, which are never changed in place, so a filesystem may share the bytes."""
        self.write_bytes(dst, self.read_bytes(src))

    def copy_tree(self, src: str, dst: str) -> int:
        """``copy`` every file under directory ``src`` to the same place under ``dst``; returns
        how many."""
        count = 0
        for item in self.walk_files(src):
            self.copy(item.path, f"{dst.rstrip('/')}/{item.path[len(src.rstrip('/')) + 1 :]}")
            count += 1
        return count

    def rename_or_fail(self, src: str, dst: str) -> None:
        """``rename`` that treats False as the error it is, naming why."""
        try:
            done = self.rename(src, dst)
        except OSError as exc:
            raise StorageError(f"renaming {src} to {dst} failed: {exc}") from exc
        if done:
            return
        if self.exists(dst):
            raise AlreadyExistsError(f"renaming {src} to {dst} refused: {dst} already exists")
        if not self.exists(src):
            raise StorageError(f"renaming {src} to {dst} failed: {src} does not exist")
        raise StorageError(f"renaming {src} to {dst} returned false (the filesystem gave no reason)")

    def walk_files(self, path: str) -> builtins.list[FileStatus]:
        """Every file under ``path``, depth first, each directory's entries in name order."""
        out: builtins.list[FileStatus] = []
        for entry in self.list(path):
            if entry.is_dir:
                out.extend(self.walk_files(entry.path))
            else:
                out.append(entry)
        return out
