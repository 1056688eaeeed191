"""kafkalog's schema registry served from a thread of the test process, for the unit tier: the real
REST API, compatibility checks and error bodies (``kafkalog.schema_registry``: RegistryServer over
a Registry), its state in a MemoryStore instead of a ``_schemas`` topic, so no broker is needed.
Tests that need the topic, the election or a registry process use tests.support.schema_registry's
``RegistryProcess``.

Schemas are registered through the HTTP API as a producer's serializer registers them: an
incompatible one is refused as the registry refuses it, unless the subject's level is set to NONE
first (``register(..., compatibility="NONE")``, as a user does with ``PUT /config/{subject}``).

``unavailable_registry()`` is something else: a listener that answers every request 503 (a registry
behind a proxy whose backend is down), recording the paths asked.
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from kafkalog.schema_registry.api import Api, Request, Response
from kafkalog.schema_registry.auth import BasicAuth, hash_password
from kafkalog.schema_registry.election import StaticPrimary
from kafkalog.schema_registry.forward import Forwarder
from kafkalog.schema_registry.records import SchemaValue, schema_key
from kafkalog.schema_registry.registry import Registry
from kafkalog.schema_registry.server import RegistryServer
from kafkalog.schema_registry.store import MemoryStore
from kafkalog.schemas.model import SchemaType


class _RecordingApi(Api):
    """The registry's API, noting the path of every request it handles (what a reader asked)."""

    def __init__(self, registry: Registry, asked: list[str]) -> None:
        super().__init__(registry)
        self.asked = asked

    def handle(self, request: Request) -> Response:
        self.asked.append("/" + "/".join(request.segments))
        return super().handle(request)


class LocalRegistry:
    """kafkalog registry on 127.0.0.1 (``url``) while entered; ``tls``: a server-side context (https),
    ``client_tls``: the context the test's own calls (``register``) use with it."""

    def __init__(
        self,
        username: str | None = None,
        password: str | None = None,
        tls: ssl.SSLContext | None = None,
        client_tls: ssl.SSLContext | None = None,
    ) -> None:
        self.username = username
        self.password = password
        self.tls = tls
        self.client_tls = client_tls
        self.store = MemoryStore()
        self.requests: list[str] = []
        """The path of every request handled, in order (without its query)."""
        auth = None
        if username is not None and password is not None:
            auth = BasicAuth({username: hash_password(password, iterations=1000)})
        self._server = RegistryServer(
            _RecordingApi(Registry(self.store), self.requests),
            self.store,
            StaticPrimary(None),
            Forwarder(timeout_s=5),
            port=0,
            tls=tls,
            auth=auth,
        )

    def __enter__(self) -> LocalRegistry:
        self._server.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._server.stop()

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self._server.port}"

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """One request to the API, logged in when the registry asks for it: (status, JSON answer)."""
        request = urllib.request.Request(
            self.url + path, data=None if body is None else json.dumps(body).encode(), method=method
        )
        request.add_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        if self.username is not None:
            token = base64.b64encode(f"{self.username}:{self.password}".encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        context = self.client_tls
        if self.tls is not None and context is None:
            context = ssl.create_default_context()
            context.check_hostname, context.verify_mode = False, ssl.CERT_NONE  # the test's own server
        try:
            with urllib.request.urlopen(request, timeout=30, context=context) as answer:
                return answer.status, json.loads(answer.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def register(
        self,
        subject: str,
        schema: str | dict[str, Any],
        schema_type: str = "AVRO",
        *,
        compatibility: str | None = None,
        references: list[dict[str, Any]] | None = None,
    ) -> int:
        """Register ``schema`` under ``subject`` (its level first set to ``compatibility`` if given):
        its global id. Raises if the registry refuses it."""
        if compatibility is not None:
            status, answer = self.call("PUT", f"/config/{subject}", {"compatibility": compatibility})
            assert status == 200, (status, answer)
        text = schema if isinstance(schema, str) else json.dumps(schema)
        body: dict[str, Any] = {"schema": text, "schemaType": schema_type}
        if references:
            body["references"] = references
        status, answer = self.call("POST", f"/subjects/{subject}/versions", body)
        if status != 200:
            raise AssertionError(f"the registry refused {subject}: {status} {answer}")
        return int(answer["id"])

    def write_record(self, subject: str, version: int, schema_id: int, text: str, schema_type: str = "AVRO") -> None:
        """Put a version of ``subject`` straight into the state, unchecked, as a registry of another
        make (or an older kafkalog) may have left it in the topic: how a schema the registry would
        refuse today reaches a reader."""
        value = SchemaValue(subject, version, schema_id, text, SchemaType(schema_type))
        self.store.write([(schema_key(subject, version), value.encode())])

    def soft_delete(self, subject: str, version: int) -> None:
        status, answer = self.call("DELETE", f"/subjects/{subject}/versions/{version}")
        assert status == 200, (status, answer)

    def hard_delete(self, subject: str, version: int) -> None:
        """Delete the version for good (soft first, as the API demands): its id stays readable by id
        while another version or subject holds it, as in Confluent's registry."""
        self.soft_delete(subject, version)
        status, answer = self.call("DELETE", f"/subjects/{subject}/versions/{version}?permanent=true")
        assert status == 200, (status, answer)


@contextmanager
def unavailable_registry() -> Iterator[tuple[str, list[str]]]:
    """(url, the paths asked) of a listener that answers every request 503 with a registry's
    error body."""
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            asked.append(self.path)
            data = json.dumps({"error_code": 50003, "message": "Error while forwarding the request"}).encode()
            self.send_response(503)
            self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
