"""A WebHDFS gateway for tests that ignores RENAME's ``renameoptions``: the one fault of a WebHDFS
server that the real NameNode (Hadoop's MiniDFSCluster, tests/hadoop) cannot produce, since Hadoop 3's
WebHDFS always honours the parameter. A gateway that drops it (HttpFS, say) serves the plain RENAME,
``FileSystem.rename``, where WebHdfsStorage asked for ``rename2``. Everything else WebHdfsStorage
relies on is asked of the real NameNode (tests/hadoop/test_storage_on_hdfs.py); this server keeps just
enough of the REST API over a local directory for a storage to work through it, as a NameNode does:

* CREATE is two requests. The first PUT is answered 307 with a Location (a datanode URL; here this
  same server with ``datanode=true``), without looking at the namespace; the second PUT, with the
  data, creates the file and its parents, and is refused when the path exists and overwrite is false
  (403 FileAlreadyExistsException; always for an existing directory).
* OPEN is also redirected (307) after checking that the path is a file (404 FileNotFoundException
  otherwise); the datanode step answers 200 with the bytes (offset, length).
* GETFILESTATUS, LISTSTATUS (404 when missing; a file lists as itself with an empty pathSuffix),
  MKDIRS ({"boolean": true}), DELETE (recursive flag; {"boolean": false} when missing; 403
  PathIsNotEmptyDirectoryException for a non-empty directory without it).
* RENAME, whatever its ``renameoptions``, is ``FileSystem.rename``: when the destination is an
  existing directory the source moves *into* it; otherwise {"boolean": false}, with nothing changed,
  when the source is missing, the (final) destination exists, its parent is missing, or it lies under
  the source; 403 ParentNotDirectoryException when an ancestor of the destination is a file.

Errors are ``{"RemoteException": {"exception", "javaClassName", "message"}}`` with the status codes
Hadoop's exception handlers use. Namespace operations hold one lock, as the NameNode's do.
"""

from __future__ import annotations

import json
import os
import posixpath
import shutil
import tempfile
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

PREFIX = "/webhdfs/v1"

_JAVA_CLASSES = {
    "FileNotFoundException": "java.io.FileNotFoundException",
    "IllegalArgumentException": "java.lang.IllegalArgumentException",
    "FileAlreadyExistsException": "org.apache.hadoop.fs.FileAlreadyExistsException",
    "ParentNotDirectoryException": "org.apache.hadoop.fs.ParentNotDirectoryException",
    "PathIsNotEmptyDirectoryException": "org.apache.hadoop.fs.PathIsNotEmptyDirectoryException",
}


class RemoteError(Exception):
    """A Java exception as WebHDFS reports it: HTTP status, simple class name, message."""

    def __init__(self, status: int, exception: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.exception = exception
        self.message = message

    def body(self) -> dict[str, Any]:
        java_class = _JAVA_CLASSES.get(self.exception, f"java.io.{self.exception}")
        return {"RemoteException": {"exception": self.exception, "javaClassName": java_class, "message": self.message}}


def _not_found(message: str) -> RemoteError:
    return RemoteError(HTTPStatus.NOT_FOUND, "FileNotFoundException", message)


def _forbidden(exception: str, message: str) -> RemoteError:
    # Hadoop's ExceptionHandler maps every IOException but FileNotFoundException to 403.
    return RemoteError(HTTPStatus.FORBIDDEN, exception, message)


def _bad_request(message: str) -> RemoteError:
    return RemoteError(HTTPStatus.BAD_REQUEST, "IllegalArgumentException", message)


class Namespace:
    """The HDFS namespace: absolute HDFS paths mapped onto a local directory, one lock for all changes."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.lock = threading.Lock()

    def local(self, hdfs_path: str) -> Path:
        normal = posixpath.normpath(hdfs_path)
        if not normal.startswith("/"):
            raise _bad_request(f"Path {hdfs_path} is not absolute")
        return self.root.joinpath(*[part for part in normal.split("/") if part])

    def check_parents(self, target: Path, hdfs_path: str) -> None:
        """403 ParentNotDirectoryException if a proper ancestor of ``target`` is a file."""
        for ancestor in reversed(target.relative_to(self.root).parents):
            local = self.root / ancestor
            if local.exists() and not local.is_dir():
                raise _forbidden("ParentNotDirectoryException", f"/{ancestor} (is not a directory) in {hdfs_path}")

    @staticmethod
    def status(local: Path, suffix: str) -> dict[str, Any]:
        info = local.lstat()
        is_dir = local.is_dir()
        return {
            "accessTime": int(info.st_atime * 1000),
            "blockSize": 0 if is_dir else 134217728,
            "childrenNum": len(list(local.iterdir())) if is_dir else 0,
            "fileId": info.st_ino,
            "group": "supergroup",
            "length": 0 if is_dir else info.st_size,
            "modificationTime": int(info.st_mtime * 1000),
            "owner": "hdfs",
            "pathSuffix": suffix,
            "permission": "755" if is_dir else "644",
            "replication": 0 if is_dir else 3,
            "storagePolicy": 0,
            "type": "DIRECTORY" if is_dir else "FILE",
        }


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # Clients keep connections alive; closing the server must not wait for them to hang up.
    block_on_close = False

    def __init__(self, namespace: Namespace) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.namespace = namespace

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as requests expects of a namenode
    timeout = 30  # an idle kept-alive connection ends its thread eventually
    disable_nagle_algorithm = True  # headers and body go out as two writes: no 40 ms delayed-ACK stall
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass  # a request line per call on stderr buries the test output

    def do_GET(self) -> None:
        self._serve("GET")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                chunk = self.rfile.read(size + 2)  # the chunk and its CRLF
                if size == 0:
                    return bytes(data)
                data += chunk[:-2]
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _serve(self, method: str) -> None:
        body = self._body()  # read it all even when refusing, or the kept-alive connection desyncs
        url = urlsplit(self.path)
        params = {key: values[-1] for key, values in parse_qs(url.query, keep_blank_values=True).items()}
        op = params.get("op", "").upper()
        try:
            if not url.path.startswith(PREFIX):
                raise RemoteError(HTTPStatus.NOT_FOUND, "IllegalArgumentException", f"{url.path}: not under {PREFIX}")
            hdfs_path = unquote(url.path[len(PREFIX) :]) or "/"
            handler = getattr(self, f"_{method.lower()}_{op.lower()}", None)
            if handler is None:
                raise _bad_request(f'Invalid value for webhdfs parameter "op": {method} {op or "(none)"}')
            handler(hdfs_path, params, body)
        except RemoteError as error:
            self._json(error.status, error.body())
        except Exception as exc:  # a bug here: a 500 the test reports, rather than a dropped connection
            bug = RemoteError(HTTPStatus.INTERNAL_SERVER_ERROR, "RuntimeException", f"test server: {exc!r}")
            self._json(bug.status, bug.body())

    def _send(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, payload: object) -> None:
        self._send(status, json.dumps(payload).encode(), "application/json")

    def _redirect(self, hdfs_path: str, params: dict[str, str]) -> None:
        query = urlencode({**params, "datanode": "true"})
        location = f"{self.server.url}{PREFIX}{quote(hdfs_path)}?{query}"
        self._send(HTTPStatus.TEMPORARY_REDIRECT, b"", "application/octet-stream", {"Location": location})

    # GET

    def _get_getfilestatus(self, hdfs_path: str, params: dict[str, str], body: bytes) -> None:
        ns = self.server.namespace
        with ns.lock:
            local = ns.local(hdfs_path)
            if not local.exists():
                raise _not_found(f"File does not exist: {hdfs_path}")
            status = ns.status(local, "")
        self._json(HTTPStatus.OK, {"FileStatus": status})

    def _get_liststatus(self, hdfs_path: str, params: dict[str, str], body: bytes) -> None:
        ns = self.server.namespace
        with ns.lock:
            local = ns.local(hdfs_path)
            if not local.exists():
                raise _not_found(f"File {hdfs_path} does not exist.")
            if local.is_dir():
                statuses = [ns.status(child, child.name) for child in sorted(local.iterdir(), key=_utf8_name)]
            else:
                statuses = [ns.status(local, "")]
        self._json(HTTPStatus.OK, {"FileStatuses": {"FileStatus": statuses}})

    def _get_open(self, hdfs_path: str, params: dict[str, str], body: bytes) -> None:
        ns = self.server.namespace
        with ns.lock:
            local = ns.local(hdfs_path)
            if not local.exists():
                raise _not_found(f"File does not exist: {hdfs_path}")
            if local.is_dir():
                raise _not_found(f"Path is not a file: {hdfs_path}")
            data = local.read_bytes() if params.get("datanode") == "true" else None
        if data is None:  # the namenode's answer: go read it from a datanode
            self._redirect(hdfs_path, params)
            return
        offset = int(params.get("offset") or 0)
        length = params.get("length")
        end = len(data) if not length else offset + int(length)
        self._send(HTTPStatus.OK, data[offset:end], "application/octet-stream")

    # PUT

    def _put_create(self, hdfs_path: str, params: dict[str, str], body: bytes) -> None:
        if params.get("datanode") != "true":
            self._redirect(hdfs_path, params)  # the namenode looks at nothing before redirecting
            return
        ns = self.server.namespace
        overwrite = params.get("overwrite", "false").lower() == "true"
        with ns.lock:
            local = ns.local(hdfs_path)
            ns.check_parents(local, hdfs_path)
            if local.is_dir():
                raise _forbidden("FileAlreadyExistsException", f"{hdfs_path} already exists as a directory")
            if local.exists() and not overwrite:
                raise _forbidden(
                    "FileAlreadyExistsException", f"{hdfs_path} for client {self.client_address[0]} already exists"
                )
            local.parent.mkdir(parents=True, exist_ok=True)
            local.write_bytes(body)
        location = f"webhdfs://127.0.0.1:{self.server.server_address[1]}{hdfs_path}"
        self._send(HTTPStatus.CREATED, b"", "application/octet-stream", {"Location": location})

    def _put_mkdirs(self, hdfs_path: str, params: dict[str, str], body: bytes) -> None:
        ns = self.server.namespace
        with ns.lock:
            local = ns.local(hdfs_path)
            ns.check_parents(local, hdfs_path)
            if local.exists() and not local.is_dir():
                raise _forbidden("FileAlreadyExistsException", f"Path is not a directory: {hdfs_path}")
            local.mkdir(parents=True, exist_ok=True)
        self._json(HTTPStatus.OK, {"boolean": True})

    def _put_rename(self, hdfs_path: str, params: dict[str, str], body: bytes) -> None:
        destination = params.get("destination", "")
        if not destination.startswith("/"):
            raise _bad_request(f"Invalid parameter value: destination = {destination!r} is not an absolute path")
        # renameoptions is ignored: the fault this server exists for
        ns = self.server.namespace
        with ns.lock:
            moved = self._rename(ns, posixpath.normpath(hdfs_path), posixpath.normpath(destination))
        self._json(HTTPStatus.OK, {"boolean": moved})

    @staticmethod
    def _rename(ns: Namespace, src: str, dst: str) -> bool:
        """FileSystem.rename (FSDirRenameOp.renameTo without options): False for every refusal but a
        file among the destination's ancestors, which the NameNode reports as an exception."""
        source, target = ns.local(src), ns.local(dst)
        if src == "/" or not source.exists():
            return False
        if target.is_dir():  # into the directory, under the source's name
            dst = posixpath.join(dst, posixpath.basename(src))
            target = ns.local(dst)
        if dst == src:
            return True
        if dst.startswith(src + "/") or target.exists():
            return False
        ns.check_parents(target, dst)
        if not target.parent.is_dir():
            return False
        source.rename(target)
        return True

    # DELETE

    def _delete_delete(self, hdfs_path: str, params: dict[str, str], body: bytes) -> None:
        recursive = params.get("recursive", "false").lower() == "true"
        ns = self.server.namespace
        with ns.lock:
            local = ns.local(hdfs_path)
            deleted = posixpath.normpath(hdfs_path) != "/" and local.exists()  # HDFS never deletes its root
            if deleted and local.is_dir():
                if any(local.iterdir()) and not recursive:
                    raise _forbidden(
                        "PathIsNotEmptyDirectoryException", f"`{hdfs_path} is non empty': Directory is not empty"
                    )
                shutil.rmtree(local)
            elif deleted:
                local.unlink()
        self._json(HTTPStatus.OK, {"boolean": deleted})


def _utf8_name(path: Path) -> bytes:
    return os.fsencode(path.name)


class WebHdfsServer:
    """The gateway on 127.0.0.1, in a thread, over ``root``.

    ``url`` is http://127.0.0.1:port; ``root`` the local directory holding the namespace (a temporary
    one, removed on exit, unless given). Use as a context manager.
    """

    def __init__(self, root: Path | None = None) -> None:
        self._given_root = root
        self._temp: tempfile.TemporaryDirectory[str] | None = None
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.root = root or Path()

    def __enter__(self) -> WebHdfsServer:
        if self._given_root is None:
            self._temp = tempfile.TemporaryDirectory(prefix="webhdfs-")
            self.root = Path(self._temp.name)
        self._server = _Server(Namespace(self.root))
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="webhdfs-server", daemon=True
        )
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._temp is not None:
            self._temp.cleanup()

    @property
    def _running(self) -> _Server:
        if self._server is None:
            raise RuntimeError("WebHdfsServer is not started (use it as a context manager)")
        return self._server

    @property
    def url(self) -> str:
        return self._running.url

    @property
    def port(self) -> int:
        return int(self._running.server_address[1])
