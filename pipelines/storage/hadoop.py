"""Hadoop's FileSystem, reached through the Spark driver's JVM: the same filesystem Spark writes
with (hdfs://, file://, and every other scheme the cluster has), for the driver's commit steps.

HDFS's rename already refuses an existing destination (returns false); other Hadoop filesystems
(the local one among them) replace files, so ``rename`` checks first. That check and the rename are
two calls: on those filesystems a concurrent creator of the same path can slip in between, which is
why commit points (manifests) use create-if-absent, which every Hadoop filesystem makes atomic.
"""

from __future__ import annotations

import time
from typing import Any

from pipelines.errors import AlreadyExistsError, StorageError
from pipelines.storage.base import FileStatus, Storage

_STALE_CONNECTION = "java.io.EOFException"
"""What Hadoop's RPC client raises for a call sent down a connection the NameNode has closed."""
_READ_ATTEMPTS = 3
_READ_RETRY_WAIT = 0.5
"""Seconds between tries of a read (the client reconnects on the next call)."""


def _error(what: str, path: str, exc: Exception) -> StorageError:
    """The StorageError for a failed call: the Java exception's line, AlreadyExistsError for a refusal."""
    text = str(exc).strip().splitlines()
    reason = next((line for line in text if "Exception" in line), text[0] if text else repr(exc))
    if "FileAlreadyExistsException" in reason:
        return AlreadyExistsError(f"{what} {path} refused: it already exists")
    return StorageError(f"{what} {path} failed: {reason.strip()}")


class HadoopStorage(Storage):
    """Storage over ``org.apache.hadoop.fs.FileSystem`` of a running SparkSession."""

    def __init__(self, spark: Any) -> None:
        self._jvm = spark._jvm
        self._conf = spark._jsc.hadoopConfiguration()

    def _path(self, path: str) -> Any:
        return self._jvm.org.apache.hadoop.fs.Path(path)

    def _fs(self, path: Any) -> Any:
        return path.getFileSystem(self._conf)

    def _call(self, what: str, path: str, action: Any, *, idempotent: bool = False) -> Any:
        """``action()``, its Java exception turned into StorageError naming ``what`` and ``path``.

        ``idempotent`` (reads): after a NameNode restart, the client's first call goes down the
        connection the old NameNode closed and fails with an EOFException that Hadoop does not
        retry; a read is asked once more. Writes are never repeated: a rename or create whose
        answer was lost may have happened."""
        attempts = _READ_ATTEMPTS if idempotent else 1
        for attempt in range(1, attempts + 1):
            try:
                return action()
            except Exception as exc:  # py4j raises Py4JJavaError carrying the Java exception's text
                if attempt < attempts and _STALE_CONNECTION in str(exc):
                    time.sleep(_READ_RETRY_WAIT)
                    continue
                raise _error(what, path, exc) from exc
        raise AssertionError("unreachable: the last attempt returns or raises")

    def exists(self, path: str) -> bool:
        p = self._path(path)
        return bool(self._call("checking", path, lambda: self._fs(p).exists(p), idempotent=True))

    def read_bytes(self, path: str) -> bytes:
        p = self._path(path)

        def read() -> bytes:
            fs = self._fs(p)
            size = fs.getFileStatus(p).getLen()
            stream = fs.open(p)
            try:
                data = self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream, size)
            finally:
                stream.close()
            return bytes(data)

        return bytes(self._call("reading", path, read, idempotent=True))

    def write_bytes(self, path: str, data: bytes) -> None:
        p = self._path(path)

        def write() -> None:
            stream = self._fs(p).create(p, False)  # overwrite=false: refused if it exists
            try:
                stream.write(bytearray(data))
                stream.hsync()
            finally:
                stream.close()

        self._call("creating", path, write)

    def rename(self, src: str, dst: str) -> bool:
        s, d = self._path(src), self._path(dst)

        def move() -> bool:
            fs = self._fs(s)
            if fs.exists(d) or not fs.exists(s):
                return False
            fs.mkdirs(d.getParent())
            return bool(fs.rename(s, d))

        return bool(self._call("renaming", f"{src} to {dst}", move))

    def list(self, path: str) -> list[FileStatus]:
        p = self._path(path)

        def listing() -> list[FileStatus] | None:
            fs = self._fs(p)
            if not fs.exists(p):
                return []
            if not fs.getFileStatus(p).isDirectory():
                return None  # listStatus would list the file as its own only entry, at <path>/<name>
            prefix = path.rstrip("/")
            out = []
            for status in fs.listStatus(p):
                name = status.getPath().getName()
                out.append(FileStatus(f"{prefix}/{name}", name, bool(status.isDirectory()), int(status.getLen())))
            return sorted(out, key=lambda f: f.name)

        result: list[FileStatus] | None = self._call("listing", path, listing, idempotent=True)
        if result is None:
            raise StorageError(f"listing {path} failed: it is a file, not a directory")
        return result

    def delete(self, path: str, *, recursive: bool = False) -> bool:
        p = self._path(path)
        return bool(self._call("deleting", path, lambda: self._fs(p).delete(p, recursive)))
