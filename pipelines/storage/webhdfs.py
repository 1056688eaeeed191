"""HDFS through its WebHDFS REST API (the ``hdfs`` package, HdfsCLI), with the semantics of ``Storage``.

Paths are URLs of one filesystem: ``webhdfs://host:port/a/b`` (the namenode's HTTP address) or
``hdfs://namenode:8020/a/b`` together with the namenode's WebHDFS address (``webhdfs_url``, e.g.
``http://namenode:9870``), since this module speaks HTTP, never Hadoop RPC. Listings return paths in
the form they were asked in.

Renames use WebHDFS RENAME with ``renameoptions=NONE``, which the namenode serves with
``ClientProtocol.rename2`` (the rename of ``FileContext``): it never replaces the destination and
never moves the source *into* an existing directory. The plain RENAME (``FileSystem.rename``) does the
latter: renaming ``a`` onto an existing directory ``b`` succeeds and creates ``b/a``, which would
publish a run's output inside a directory that was meant to refuse it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import hdfs
from hdfs.util import HdfsError

from pipelines.addresses import is_http_address
from pipelines.errors import AlreadyExistsError, StorageError
from pipelines.storage.base import FileStatus, Storage

_DEFAULT_HTTP_PORT = 9870
"""The namenode's HTTP port in Hadoop 3 (``dfs.namenode.http-address``), the port webhdfs:// implies."""

_TIMEOUT = (10.0, 120.0)
"""Seconds to connect, and to wait for each read; without them a hung namenode hangs a commit forever."""

_READ_CHUNK = 1 << 20


def _cause(exc: BaseException) -> str:
    """The Java exception name and message WebHDFS sent, or the client-side error.

    Only the message's first line: a DataNode's refusal (of CREATE, OPEN) carries the NameNode's Java
    stack trace after it. A server that is not WebHDFS answers with a body the package keeps as bytes."""
    if isinstance(exc, HdfsError):
        message = exc.message.decode(errors="replace") if isinstance(exc.message, bytes) else str(exc.message)
        first = message.strip().partition("\n")[0].strip()
        return f"{exc.exception}: {first}" if exc.exception else first or type(exc).__name__
    return str(exc) or type(exc).__name__


@contextmanager
def _failures(action: str, webhdfs_url: str) -> Iterator[None]:
    """Turn the errors of the ``hdfs`` package into StorageError("<action> failed: <cause> (WebHDFS at
    <webhdfs_url>)").

    ``action`` names the operation and its path(s); ``webhdfs_url`` the address(es) asked, since a dead
    or wrong one (not a NameNode's WebHDFS) is the mistake to fix and the cause alone does not name it.
    requests' exceptions (connection refused, timeouts, a body cut short) derive from OSError, so
    catching OSError covers them without importing requests.
    """
    try:
        yield
    except (HdfsError, OSError) as exc:
        raise StorageError(f"{action} failed: {_cause(exc)} (WebHDFS at {webhdfs_url})") from exc


class WebHdfsStorage(Storage):
    """One HDFS filesystem seen through WebHDFS.

    Every path must start with ``prefix`` (``scheme://authority`` of the filesystem, as in the URL
    this storage was made for); the rest is the absolute HDFS path. Errors are StorageError naming the
    operation, the path and the cause (the Java exception WebHDFS reported, or the HTTP failure).
    Holds a connection pool: ``close()`` it (or use it as a context manager) when done.
    """

    def __init__(
        self,
        webhdfs_url: str,
        *,
        prefix: str,
        user: str | None = None,
        timeout: float | tuple[float, float] = _TIMEOUT,
    ) -> None:
        """``webhdfs_url``: http(s)://namenode:port, or several separated by ``;`` (HA namenodes, tried in
        turn). ``user``: the HDFS user (simple authentication); None means the local user name."""
        self.webhdfs_url = webhdfs_url
        self.prefix = prefix.rstrip("/")
        for address in webhdfs_url.split(";"):
            if not is_http_address(address):
                raise StorageError(
                    f"{prefix}: WebHDFS address {address!r} is not an http:// or https:// URL of a host "
                    "(http://namenode:9870)"
                )
        try:
            self._client: Any = hdfs.InsecureClient(webhdfs_url, user=user, timeout=timeout)
        except (KeyError, OSError) as exc:  # getpass.getuser() finds no name for this uid
            raise StorageError(f"{prefix}: no HDFS user name (pass user=...): {exc}") from exc

    @classmethod
    def for_url(cls, url: str, *, webhdfs_url: str | None = None, user: str | None = None) -> WebHdfsStorage:
        """The storage serving ``url``: ``webhdfs://host[:port]/path`` talks to http://host:port (9870 when
        no port is given); ``hdfs://namenode:8020/path`` needs ``webhdfs_url``, which also overrides the
        address of a webhdfs:// URL."""
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise StorageError(f"{url}: not a valid URL: {exc}") from exc
        if parts.scheme not in ("webhdfs", "hdfs"):
            raise StorageError(f"{url}: WebHdfsStorage serves webhdfs:// and hdfs:// URLs only")
        prefix = f"{parts.scheme}://{parts.netloc}"
        if webhdfs_url is None:
            if parts.scheme == "hdfs":
                raise StorageError(
                    f"{url}: hdfs:// is Hadoop RPC, which this tool does not speak; pass the namenode's "
                    "WebHDFS address as webhdfs_url (raw.webhdfs_url in a pipeline file, e.g. "
                    "http://namenode:9870), or use a webhdfs:// URL"
                )
            host = parts.hostname
            if not host:
                raise StorageError(f"{url}: a webhdfs:// URL needs the namenode's host (webhdfs://host:port/path)")
            if ":" in host:  # an IPv6 address: urlsplit dropped its brackets
                host = f"[{host}]"
            webhdfs_url = f"http://{host}:{port or _DEFAULT_HTTP_PORT}"
        return cls(webhdfs_url, prefix=prefix, user=user)

    def close(self) -> None:
        """Close the pooled HTTP connections."""
        # The session belongs to the InsecureClient (which sets user.name on it); it has no close of its own.
        self._client._session.close()

    def __enter__(self) -> WebHdfsStorage:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"WebHdfsStorage({self.prefix!r} via {self.webhdfs_url})"

    def _hdfs_path(self, path: str) -> str:
        """The absolute HDFS path of ``path``, which must be a URL of this filesystem."""
        if path == self.prefix:
            return "/"
        if not path.startswith(self.prefix + "/"):
            raise StorageError(f"{path}: not a path of {self.prefix} (this storage serves {self.prefix}/...)")
        return path[len(self.prefix) :]

    def exists(self, path: str) -> bool:
        hdfs_path = self._hdfs_path(path)
        with _failures(f"checking {path}", self.webhdfs_url):
            try:
                self._client.status(hdfs_path)
            except HdfsError as exc:
                if exc.exception == "FileNotFoundException":
                    return False
                raise
        return True

    def read_bytes(self, path: str) -> bytes:
        hdfs_path = self._hdfs_path(path)
        # A chunk size makes the package read through requests' iter_content, which reports a body cut
        # short as a requests error; its raw stream would raise urllib3's own exceptions instead.
        with (
            _failures(f"reading {path}", self.webhdfs_url),
            self._client.read(hdfs_path, chunk_size=_READ_CHUNK) as chunks,
        ):
            return b"".join(chunks)

    def write_bytes(self, path: str, data: bytes) -> None:
        """Create ``path`` (parents included) with ``data``; AlreadyExistsError if it exists.

        CREATE with overwrite=false is refused by HDFS itself (FileAlreadyExistsException), so the check
        and the creation are one step. The file is closed when this returns, i.e. acknowledged by every
        datanode of its pipeline: HDFS's durability. A failed upload can leave a partial file (HDFS
        creates the file before the data arrives); it is not deleted here, since after a refusal the file
        is someone else's. Publish with ``write_new`` so a partial file is only ever a temporary one.
        """
        hdfs_path = self._hdfs_path(path)
        with _failures(f"creating {path}", self.webhdfs_url):
            try:
                self._client.write(hdfs_path, data=data, overwrite=False)
            except HdfsError as exc:
                if exc.exception == "FileAlreadyExistsException":
                    raise AlreadyExistsError(f"creating {path} refused: it already exists") from exc
                raise

    def rename(self, src: str, dst: str) -> bool:
        """Move ``src`` to ``dst`` in one namenode operation, creating ``dst``'s parent if needed.

        False, with nothing changed, when ``dst`` exists (file or directory: an existing directory is
        never entered) or ``src`` is missing. Other failures raise StorageError.
        """
        source, target = self._hdfs_path(src), self._hdfs_path(dst)
        done = self._rename_once(src, dst, source, target)
        if done is not None:
            return done
        # The source or the destination's parent is missing; HDFS does not say which. Trying first and
        # creating the parent only when the source exists keeps the usual case to one request and leaves
        # no directory behind when there was nothing to move.
        if not self.exists(src):
            return False
        parent = target.rpartition("/")[0] or "/"
        with _failures(f"renaming {src} to {dst}: creating {parent}", self.webhdfs_url):
            self._client.makedirs(parent)
        return self._rename_once(src, dst, source, target) is True  # None: the source went away meanwhile

    def _rename_once(self, src: str, dst: str, source: str, target: str) -> bool | None:
        """One RENAME with renameoptions=NONE: True (moved), False (``dst`` exists), or None (the source
        or the destination's parent is missing, or a server without rename options refused)."""
        with _failures(f"renaming {src} to {dst}", self.webhdfs_url):
            try:
                # The raw endpoint, not Client.rename: that one sends no rename options and raises a bare
                # HdfsError("Unable to rename ...") for a false answer, indistinguishable from a failure.
                response = self._client._rename(source, destination=target, renameoptions="NONE")
            except HdfsError as exc:
                if exc.exception == "FileAlreadyExistsException":  # also "source and destination are the same"
                    return False
                if exc.exception == "IOException" and self.exists(dst):
                    # rename2 checks an existing destination's kind before refusing it for existing: a file
                    # onto a directory, or a directory onto a file, is IOException("Source ... and
                    # destination ... must both be directories"). dst exists all the same: a refusal.
                    return False
                if exc.exception == "FileNotFoundException":
                    return None
                raise
            if not response.content.strip():
                return True  # rename2 answers 200 with an empty body; its refusals are exceptions
            # A server that ignores renameoptions (HttpFS, say) answers the plain RENAME's boolean. Its
            # false covers a missing parent too, so it is retried like one (the retry refuses again if
            # dst exists). Its true may have moved src *into* an existing directory dst: such a server
            # cannot keep this method's contract, which only the namenode's WebHDFS endpoint does.
            answer = response.json()
        if not isinstance(answer, dict) or not isinstance(answer.get("boolean"), bool):
            raise StorageError(f"renaming {src} to {dst} failed: unexpected WebHDFS answer {answer!r}")
        return True if answer["boolean"] else None

    def list(self, path: str) -> list[FileStatus]:
        hdfs_path = self._hdfs_path(path)
        with _failures(f"listing {path}", self.webhdfs_url):
            try:
                entries = self._client.list(hdfs_path, status=True)
            except HdfsError as exc:
                if exc.exception == "FileNotFoundException":
                    return []
                raise
        prefix = path.rstrip("/")
        out = [
            FileStatus(f"{prefix}/{name}", name, status["type"] == "DIRECTORY", int(status["length"]))
            for name, status in entries
        ]
        # The namenode lists in byte order of the UTF-8 names, as sorting str does; an HttpFS or a
        # gateway in between promises nothing, so sort here too.
        return sorted(out, key=lambda entry: entry.name)

    def delete(self, path: str, *, recursive: bool = False) -> bool:
        hdfs_path = self._hdfs_path(path)
        with _failures(f"deleting {path}", self.webhdfs_url):
            # skip_trash (the default) deletes for good, as the local storage does; a non-empty
            # directory without recursive is refused by HDFS (PathIsNotEmptyDirectoryException).
            return bool(self._client.delete(hdfs_path, recursive=recursive))
