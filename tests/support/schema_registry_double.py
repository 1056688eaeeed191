"""A TEST DOUBLE of a schema registry: the three reads of Confluent's REST API a load makes, served
over a dict from a thread of the test process.

What it is for: testing the loader's registry client and a load of registry-framed values before
kafkalog's own schema registry (``kafkalog registry``) exists. It is a stand-in for a peer being
built, to be replaced by the real registry in these tests once that lands; it implements nothing
a producer needs (no registration over HTTP, no compatibility, no deletes over HTTP), so it proves
only the reader's side.

Served: ``GET /subjects/{s}/versions[?deleted=true]``, ``GET /subjects/{s}/versions/{v|latest}``,
``GET /schemas/ids/{id}[?subject=s]``, with Confluent's error bodies (``{"error_code": 40401,
"message": "Subject 's' not found."}``); optional basic auth (401 otherwise) and a switch that
makes every request answer 503 (a registry that is down but listening); https:// with a given
server-side TLS context.
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit


@dataclass
class _Version:
    version: int
    schema_id: int
    deleted: bool = False


@dataclass
class RegistryDouble:
    """Subjects and schemas in memory, served on 127.0.0.1 (``url``) while entered."""

    username: str | None = None
    password: str | None = None
    schemas: dict[int, tuple[str, str]] = field(default_factory=dict)
    """id → (schema type, text)."""
    subjects: dict[str, list[_Version]] = field(default_factory=dict)
    unavailable: bool = False
    """Answer every request 503 (the process is up, the registry is not)."""
    requests: list[str] = field(default_factory=list)
    """Every path asked, in order."""
    tls: ssl.SSLContext | None = None
    """Serve https:// with this server-side context (its certificate; a client one if it requires)."""

    def register(self, subject: str, schema: str | dict[str, Any], schema_type: str = "AVRO") -> int:
        """Add ``schema`` as the subject's next version (the same text keeps its global id); its id."""
        text = schema if isinstance(schema, str) else json.dumps(schema)
        found = [i for i, (kind, known) in self.schemas.items() if (kind, known) == (schema_type, text)]
        schema_id = found[0] if found else max(self.schemas, default=0) + 1
        self.schemas[schema_id] = (schema_type, text)
        versions = self.subjects.setdefault(subject, [])
        if not any(v.schema_id == schema_id for v in versions):
            versions.append(_Version(max((v.version for v in versions), default=0) + 1, schema_id))
        return schema_id

    def soft_delete(self, subject: str, version: int) -> None:
        next(v for v in self.subjects[subject] if v.version == version).deleted = True

    def hard_delete(self, subject: str, version: int) -> None:
        """The version is gone from the subject (its number is not listed, not even with
        ``deleted=true``); its schema stays readable by id, as Confluent's registry keeps it."""
        self.subjects[subject] = [v for v in self.subjects[subject] if v.version != version]

    def __enter__(self) -> RegistryDouble:
        double = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                double.requests.append(self.path)
                status, body = double.answer(self.path, self.headers.get("Authorization"))
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if self.tls is not None:
            self._server.socket = self.tls.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    @property
    def url(self) -> str:
        scheme = "http" if self.tls is None else "https"
        return f"{scheme}://127.0.0.1:{self._server.server_address[1]}"

    def answer(self, path: str, authorization: str | None) -> tuple[int, Any]:
        if self.unavailable:
            return 503, {"error_code": 50003, "message": "Error while forwarding the request to the leader"}
        if self.username is not None:
            expected = base64.b64encode(f"{self.username}:{self.password}".encode()).decode()
            if authorization != f"Basic {expected}":
                return 401, {"error_code": 40101, "message": "Unauthorized"}
        parts = urlsplit(path)
        query = parse_qs(parts.query)
        deleted = query.get("deleted", ["false"])[0].lower() == "true"
        segments = [unquote(s) for s in parts.path.strip("/").split("/")]
        if len(segments) >= 3 and segments[0] == "subjects" and segments[2] == "versions":
            versions = self.subjects.get(segments[1])
            if versions is None:
                return 404, {"error_code": 40401, "message": f"Subject '{segments[1]}' not found."}
            visible = [v for v in versions if deleted or not v.deleted]
            if len(segments) == 3:
                return 200, [v.version for v in visible]
            if len(segments) == 4:
                wanted = segments[3]
                chosen = (
                    [max(visible, key=lambda v: v.version)] if wanted in ("latest", "-1") and visible
                    else [v for v in visible if str(v.version) == wanted]
                )  # fmt: skip
                if not chosen:
                    return 404, {"error_code": 40402, "message": f"Version {wanted} not found."}
                version = chosen[0]
                kind, text = self.schemas[version.schema_id]
                body = {"subject": segments[1], "version": version.version, "id": version.schema_id, "schema": text}
                return 200, body if kind == "AVRO" else {**body, "schemaType": kind}
        if len(segments) == 3 and segments[:2] == ["schemas", "ids"] and segments[2].isdigit():
            found = self.schemas.get(int(segments[2]))
            if found is None:
                return 404, {"error_code": 40403, "message": f"Schema {segments[2]} not found"}
            kind, text = found
            return 200, {"schema": text} if kind == "AVRO" else {"schema": text, "schemaType": kind}
        return 404, {"error_code": 404, "message": "HTTP 404 Not Found"}
