"""Hadoop's FileSystem, reached through the Spark driver's JVM: the same filesystem Spark writes
with (hdfs://, file://, and every other scheme the cluster has), for the driver's commit steps.

HDFS's rename already refuses an existing destination (returns false); other Hadoop filesystems
(the local one among them) replace files, so ``rename`` checks first. That check and the rename are
two calls: on those filesystems a concurrent creator of the same path can slip in between, which is
why commit points (manifests) use create-if-absent, which every Hadoop filesystem makes atomic.

A NameNode that restarts is ridden out by Hadoop's own client (``ride_out_namenode_restarts``):
its retry policy waits while the NameNode is away or still in safe mode, for the driver's calls
and the tasks' writes alike, and the NameNode's retry cache (rebuilt from its edit log after a
restart) answers a repeated create or rename as it answered the first. While a call waits, a
line every ``WAIT_NOTE_EVERY_S`` says what it waits for.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

from kafkalog.retry import Backoff
from pipelines.errors import AlreadyExistsError, StorageError
from pipelines.java_errors import java_line
from pipelines.storage.base import FileStatus, Storage

log = logging.getLogger(__name__)

_STALE_CONNECTION = "java.io.EOFException"
"""What Hadoop's RPC client raises for a call sent down a connection the NameNode has closed."""
_READ_ATTEMPTS = 3
_READ_RETRY_WAIT = 0.5
"""Seconds between tries of a read (the client reconnects on the next call)."""

RETRY_POLICY = {
    "dfs.client.retry.policy.enabled": "true",
    # (sleep ms, tries) pairs, each sleep drawn from half to one and a half of it: ten tries about
    # a second apart, then 24 about 5 s apart: at most about 130 s for one call
    "dfs.client.retry.policy.spec": "1000,10,5000,24",
}
"""Hadoop's client retry policy for NameNode calls, applied unless the cluster's configuration
sets its own: it retries a call the NameNode refused in safe mode (SafeModeException), and one
whose connection failed (the NameNode away, or restarted under an open connection)."""
RETRY_BOUND_S = 130
"""About the longest the policy above waits for one call the NameNode refuses in safe mode. A
NameNode that does not answer at all is waited for longer: Hadoop applies the policy to making the
connection and again to the call."""
WAIT_NOTE_EVERY_S = 10.0


def ride_out_namenode_restarts(conf: Any) -> bool:
    """Give the Hadoop configuration ``conf`` (a Spark session's) each setting of ``RETRY_POLICY``
    that neither the cluster's files nor the session's settings chose; True if it gave them all. A FileSystem takes
    its configuration when it is first made (and is cached per scheme and authority), so this runs
    before the session's first call to HDFS: when the driver's storage is made."""
    given = False
    for name, value in RETRY_POLICY.items():
        sources = conf.getPropertySources(name)
        chosen = [str(source) for source in sources] if sources is not None else []
        if any(not source.endswith("-default.xml") for source in chosen):
            given = True  # the cluster's, or --conf spark.hadoop.<name>: theirs stands
            continue
        conf.set(name, value, "pipelines: ride out NameNode restarts")
    return not given


def session_settings(given: dict[str, str]) -> dict[str, str]:
    """``RETRY_POLICY`` as Spark settings (``spark.hadoop.…``) for a session about to start, less
    what ``given`` (its --conf and spark-defaults) or the cluster's ``hdfs-site.xml`` sets. Given
    before the session starts, it reaches every FileSystem the session makes: on YARN, Spark's
    client makes the HDFS one (to upload its files) before any of ours."""
    conf_dir = os.environ.get("HADOOP_CONF_DIR")
    site = Path(conf_dir, "hdfs-site.xml") if conf_dir else None
    cluster = site.read_text(errors="replace") if site is not None and site.is_file() else ""
    return {
        f"spark.hadoop.{name}": value
        for name, value in RETRY_POLICY.items()
        if f"spark.hadoop.{name}" not in given and f"<name>{name}</name>" not in cluster
    }


def _error(what: str, path: str, exc: Exception) -> StorageError:
    """The StorageError for a failed call: the Java exception's line, AlreadyExistsError for a refusal."""
    reason = java_line(exc)
    if "FileAlreadyExistsException" in reason:
        return AlreadyExistsError(f"{what} {path} refused: it already exists")
    return StorageError(f"{what} {path} failed: {reason}")


class HadoopStorage(Storage):
    """Storage over ``org.apache.hadoop.fs.FileSystem`` of a running SparkSession."""

    def __init__(self, spark: Any) -> None:
        self._jvm = spark._jvm
        self._conf = spark._jsc.hadoopConfiguration()
        ride_out_namenode_restarts(self._conf)

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
        retries = Backoff(first=_READ_RETRY_WAIT, cap=_READ_RETRY_WAIT, attempts=_READ_ATTEMPTS if idempotent else 1)
        while True:
            try:
                with _waiting_noted(what, path):
                    return action()
            except Exception as exc:  # py4j raises Py4JJavaError carrying the Java exception's text
                if _STALE_CONNECTION in str(exc) and retries.wait():
                    continue
                raise _error(what, path, exc) from exc

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


class _waiting_noted:
    """While the body runs longer than ``WAIT_NOTE_EVERY_S``, a warning every so often names the
    call and what it waits for (Hadoop's client retrying a NameNode away or in safe mode)."""

    def __init__(self, what: str, path: str) -> None:
        self._what, self._path = what, path
        self._done = threading.Event()
        self._started = 0.0

    def __enter__(self) -> None:
        self._started = time.monotonic()
        threading.Thread(target=self._note, name="hdfs-wait-note", daemon=True).start()

    def __exit__(self, *exc_info: object) -> None:
        self._done.set()

    def _note(self) -> None:
        while not self._done.wait(WAIT_NOTE_EVERY_S):
            waited = time.monotonic() - self._started
            log.warning(
                "waiting for the NameNode: %s %s has taken %.0f s (if the NameNode is restarting or in safe "
                "mode, Hadoop's client is retrying: a call it refuses is asked again for about %d s)",
                self._what,
                self._path,
                waited,
                RETRY_BOUND_S,
            )
