"""The registry's HTTP server: the standard library's threading server, with the bounds an open port needs.

Role: reads requests off connections (HTTP/1.1, kept alive), checks who is asking (TLS, HTTP basic
authentication), answers them from the REST API (kafkalog.schema_registry.api), or, for a write on a
registry that is not primary, forwards it (kafkalog.schema_registry.forward).

Every connection is untrusted, and nothing it sends before it logs in costs much:
- the TLS handshake runs in the connection's own thread, so a client that stalls it stalls nobody;
- a connection idle or stalled for ``socket_timeout_s`` is closed, and a request (its line, headers
  and body) must arrive whole within ``request_timeout_s`` of its first byte, however steadily it
  dribbles (slowloris): past it the connection is closed (408 when the body was late); at most
  ``max_connections`` are served at once (more are answered 503 and closed);
- with basic authentication every request must log in (401 otherwise), forwarded ones too, and the
  credentials are checked from the headers, before the body is read: a request refused 401 (or 429,
  kafkalog.schema_registry.auth's login budgets) closes its connection with its body unread;
- a body is read only when its ``Content-Length`` is at most ``max_body_bytes`` (413 past it, and
  411 for a chunked body: clients send a length); a request line and headers are bounded by
  ``http.server`` itself (64 KiB a line, 100 headers: 414 and 431).
"""

from __future__ import annotations

import io
import json
import logging
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final

from kafkalog.errors import KafkalogError
from kafkalog.schema_registry import errors
from kafkalog.schema_registry.api import CONTENT_TYPE, Api, Request, Response
from kafkalog.schema_registry.auth import BasicAuth
from kafkalog.schema_registry.election import Primary
from kafkalog.schema_registry.forward import FORWARDED_HEADER, Forwarder
from kafkalog.schema_registry.store import Store

log = logging.getLogger(__name__)

_FORWARDED_HEADERS: Final = ("Content-Type", "Authorization", "Accept")


@dataclass(frozen=True, slots=True)
class HttpLimits:
    max_body_bytes: int = 16 * 1024 * 1024
    max_connections: int = 256
    socket_timeout_s: float = 30.0
    request_timeout_s: float = 30.0
    """From a request's first byte to its last (request line, headers, body)."""


class RegistryServer:
    """Serves the API on ``host:port`` in background threads; ``port`` is the one bound."""

    def __init__(
        self,
        api: Api,
        store: Store,
        primary: Primary,
        forwarder: Forwarder,
        *,
        host: str = "127.0.0.1",
        port: int = 8081,
        limits: HttpLimits = HttpLimits(),
        tls: ssl.SSLContext | None = None,
        auth: BasicAuth | None = None,
        peer_addresses: frozenset[str] | None = None,
    ) -> None:
        """``peer_addresses``: the only addresses a forwarded request is taken from (None: any)."""
        self.api = api
        self.peer_addresses = peer_addresses
        self.store = store
        self.primary = primary
        self.forwarder = forwarder
        self.limits = limits
        self.tls = tls
        self.auth = auth
        self._slots = threading.BoundedSemaphore(limits.max_connections)
        registry = self

        class Handler(_Handler):
            server_of = registry
            timeout = limits.socket_timeout_s

        self.server = _Server((host, port), Handler, self)
        self.port: int = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, name="kafkalog-registry-http", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        if self._thread.is_alive():  # shutdown() waits for serve_forever, which must be running
            self.server.shutdown()
        self.server.server_close()

    # ------------------------------------------------------------------ one request

    def login(self, headers: dict[str, str], client: str) -> errors.ApiError | None:
        """Why the request's headers (by lower-case name) do not log in from address ``client``
        (401, or 429 when checking them would cost more than its budget), or None."""
        if self.auth is None:
            return None
        try:
            user = self.auth.user(headers.get("authorization"), client)
        except errors.ApiError as e:  # LoginThrottled
            return e
        return errors.unauthorized() if user is None else None

    def answer(self, method: str, target: str, body: bytes, headers: dict[str, str], client: str = "") -> Response:
        """The answer to one request read off a connection (its headers by lower-case name), logged
        in, from address ``client``."""
        if (
            self.peer_addresses is not None
            and headers.get(FORWARDED_HEADER.lower())
            and client not in self.peer_addresses
        ):
            return Response.of_error(errors.forwarded_from_stranger(client))
        try:
            request = Request.of(method, target, body, headers.get("content-type"))
        except errors.ApiError as e:
            return Response.of_error(e)
        try:
            if self.api.is_write(request) and not self.primary.is_primary():
                return self._forward(request, target, headers)
            return self.api.handle(request)
        except errors.ApiError as e:
            return Response.of_error(e)
        except KafkalogError as e:  # the store: StoreError, or a client error under it
            log.warning("%s %s: %s", method, target[:200], e)
            if getattr(e, "too_large", False):
                error = errors.schema_too_large(str(e))
            elif getattr(e, "timeout", False):
                error = errors.operation_timeout(str(e))
            else:
                error = errors.store_error(str(e))
            return Response.of_error(error)

    def _forward(self, request: Request, target: str, headers: dict[str, str]) -> Response:
        if headers.get(FORWARDED_HEADER.lower()):
            raise errors.forward_error(
                "Error while forwarding the request to the leader: this registry is not the leader"
            )
        url = self.primary.primary_url()
        if url is None:
            raise errors.leader_not_known()
        sent = {name: headers[name.lower()] for name in _FORWARDED_HEADERS if name.lower() in headers}
        answer = self.forwarder.forward(url, request.method, target, request.body, sent)
        if 200 <= answer.status < 300:
            try:  # the caller's next read here sees its write, as on the primary
                self.store.catch_up()
            except KafkalogError as e:
                log.warning("catching up after a forwarded write: %s", e)
        return Response(answer.status, answer.body, answer.content_type)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], handler: type[_Handler], registry: RegistryServer) -> None:
        self.registry = registry
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.registry._slots.acquire(blocking=False):
            _refuse(request)
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.registry._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("connection from %s ended with an error", client_address, exc_info=True)


def _refuse(sock: socket.socket) -> None:
    body = json.dumps({"error_code": 503, "message": "too many connections"}).encode()
    head = (
        "HTTP/1.1 503 Service Unavailable\r\n"
        f"Content-Type: {CONTENT_TYPE}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    try:
        sock.settimeout(1.0)
        sock.sendall(head.encode() + body)
    except OSError:
        pass


class _Deadline(io.RawIOBase):
    """A connection's reads, each bounded by the idle timeout and all of a request's together by the
    request timeout, counted from the first byte received after :meth:`arm`."""

    def __init__(self, sock: socket.socket, idle_s: float, request_s: float) -> None:
        self.sock = sock
        self.idle_s = idle_s
        self.request_s = request_s
        self.armed = False
        self.deadline: float | None = None

    def readable(self) -> bool:
        return True

    def arm(self) -> None:
        """A new request: its clock starts with its first byte (waiting for it is idleness)."""
        self.armed, self.deadline = True, None

    def readinto(self, buffer: Any) -> int:
        timeout = self.idle_s
        if self.deadline is not None:
            timeout = min(timeout, self.deadline - time.monotonic())
            if timeout <= 0:
                raise TimeoutError(f"request not received whole within {self.request_s:g} s")
        self.sock.settimeout(timeout)
        received = self.sock.recv_into(buffer)
        if received and self.armed and self.deadline is None:
            self.deadline = time.monotonic() + self.request_s
        return received


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "kafkalog-registry"
    sys_version = ""
    server_of: RegistryServer

    def setup(self) -> None:
        self.request.settimeout(self.timeout)
        tls = self.server_of.tls
        if tls is not None:
            self.request = tls.wrap_socket(self.request, server_side=True)  # the handshake, in this thread
        super().setup()
        limits = self.server_of.limits
        self._reader = _Deadline(self.connection, limits.socket_timeout_s, limits.request_timeout_s)
        plain, self.rfile = self.rfile, io.BufferedReader(self._reader, 65536)
        plain.close()  # the socket's own file, unused: closed, or the socket would wait for it to close

    def handle_one_request(self) -> None:
        self._reader.arm()
        super().handle_one_request()

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            if self.server_of.tls is not None:
                self.connection.close()

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def do_PUT(self) -> None:
        self._serve()

    def do_DELETE(self) -> None:
        self._serve()

    def do_PATCH(self) -> None:
        self._serve()

    def do_HEAD(self) -> None:
        length = (self.headers.get("Content-Length") or "0").strip()
        if length != "0" or self.headers.get("Transfer-Encoding") is not None:
            # a body is never read here: left in the stream it would be read as the next request
            self.close_connection = True
        self._send(Response.of_error(errors.method_not_allowed("HEAD")), head=True)

    def _serve(self) -> None:
        limit = self.server_of.limits.max_body_bytes
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self.close_connection = True
            self._send(Response.of_error(errors.ApiError(411, 411, "a request body needs a Content-Length")))
            return
        length_text = self.headers.get("Content-Length", "0").strip() or "0"
        if not length_text.isdigit() or len(length_text) > 12:
            self.close_connection = True
            self._send(Response.of_error(errors.ApiError(400, 400, "invalid Content-Length")))
            return
        length = int(length_text)
        headers = {name.lower(): value for name, value in self.headers.items()}
        client = str(self.client_address[0]) if self.client_address else ""
        refused = self.server_of.login(headers, client)
        if refused is None and length > limit:
            refused = errors.request_too_large(limit)
        if refused is not None:
            self.close_connection = True  # the body is never read: the connection cannot go on
            self._send(Response.of_error(refused))
            return
        try:
            body = self.rfile.read(length) if length else b""
        except TimeoutError as e:
            self.close_connection = True
            self._send(Response.of_error(errors.ApiError(408, 408, f"Request Timeout: {e}")))
            return
        if len(body) < length:
            self.close_connection = True
            return
        try:
            response = self.server_of.answer(self.command, self.path, body, headers, client)
        except Exception:
            log.exception("%s %s", self.command, self.path[:200])
            response = Response.of_error(errors.ApiError(500, 500, "Internal Server Error"))
        self._send(response)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own refusals (a request line or headers it cannot take, a method no handler
        serves) as Confluent error bodies too, never its HTML page."""
        status = int(code)
        if status == HTTPStatus.NOT_IMPLEMENTED:  # a method no route serves: Confluent's JAX-RS says 405
            error = errors.method_not_allowed(str(self.command)[:50])
        else:
            try:
                phrase = HTTPStatus(status).phrase
            except ValueError:
                phrase = "Error"
            error = errors.ApiError(status, status, f"HTTP {status} {phrase}" + (f": {message}" if message else ""))
        self.close_connection = True
        self._send(Response.of_error(error), head=self.command == "HEAD")

    def _send(self, response: Response, *, head: bool = False) -> None:
        self._reader.armed = False
        self.connection.settimeout(self.timeout)  # a read may have left it at a request's remaining time
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(response.body)))
        if response.status == 401:
            self.send_header("WWW-Authenticate", 'Basic realm="kafkalog-registry"')
        if response.status == 429:
            self.send_header("Retry-After", "1")
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if not head:
            self.wfile.write(response.body)

    def log_message(self, format: str, *args: object) -> None:
        log.debug("%s - %s", self.address_string(), format % args)
