"""The socket server: one acceptor thread and N processor threads (the seeds' network layer).

The acceptor accepts connections, enforces the per-address limit and hands each connection to a
processor, round robin. A processor multiplexes its connections with a selector: it reads request
frames, has them handled, and writes the responses, log regions with ``os.sendfile`` (the bytes go
from the page cache to the socket without passing through Python).

Per connection, requests are handled one at a time in arrival order, so responses come back in
request order. A fetch that waits for data parks its connection (no further requests are read from
it) until the fetch completes. Reading stops while a connection has much unsent output, so a client
that sends but never reads cannot make the broker buffer without bound.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import selectors
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from kafkalog.errors import ProtocolError
from kafkalog.protocol import REGISTRY, ApiKey, decode_request, encode_response, peek_header
from kafkalog.protocol.apis import API_NAMES, api_name
from kafkalog.protocol.frames import client_id_of, refusal
from kafkalog.server.config import BrokerConfig
from kafkalog.server.deferred import DeferredResponse
from kafkalog.server.fetch import ParkedFetch
from kafkalog.server.handlers import NO_RESPONSE, RequestHandlers
from kafkalog.server.metrics import Metrics

logger = logging.getLogger(__name__)

_RECV_BYTES = 256 * 1024
_MAX_UNSENT_BYTES = 8 * 1024 * 1024  # stop reading requests from a connection with this much unsent
_HOUSEKEEPING_S = 0.25


@dataclass(eq=False)
class Connection:
    """One client connection, confined to its processor thread."""

    sock: socket.socket
    peer: tuple[str, int]
    last_active: float
    inbuf: bytearray = field(default_factory=bytearray)
    read_pos: int = 0
    frame_started: float | None = None
    out: collections.deque[Any] = field(default_factory=collections.deque)
    out_offset: int = 0
    out_bytes: int = 0
    parked: tuple[ParkedFetch | DeferredResponse, Any, Any] | None = None
    """A request waiting for its answer (a fetch for data, a join for its group) with its header
    and Api: none of the connection's later requests is read meanwhile."""
    events: int = 0
    closed: bool = False


class Processor(threading.Thread):
    """Serves the connections the acceptor gives it (see the module docstring)."""

    def __init__(self, index: int, server: SocketServer) -> None:
        super().__init__(name=f"kafkalog-network-{index}", daemon=True)
        self.server = server
        self.selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self.selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._incoming: collections.deque[tuple[socket.socket, tuple[str, int]]] = collections.deque()
        self._connections: set[Connection] = set()
        self._parked: set[Connection] = set()
        self._data_arrived = False

    # ------------------------------------------------------------------ from other threads

    @property
    def has_parked(self) -> bool:
        return bool(self._parked)

    def adopt(self, sock: socket.socket, peer: tuple[str, int]) -> None:
        self._incoming.append((sock, peer))
        self.wake()

    def wake(self, *, data_arrived: bool = False) -> None:
        if data_arrived:
            self._data_arrived = True
        with contextlib.suppress(BlockingIOError, OSError):  # already awake (buffer full), or shutting down
            self._wake_w.send(b"x")

    # ------------------------------------------------------------------ the loop

    def run(self) -> None:
        next_housekeeping = time.monotonic() + _HOUSEKEEPING_S
        while not self.server.stopping.is_set():
            now = time.monotonic()
            timeout = next_housekeeping - now
            for conn in self._parked:
                timeout = min(timeout, conn.parked[0].deadline - now if conn.parked else timeout)
            for key, mask in self.selector.select(max(0.0, timeout)):
                if key.data is None:
                    self._drain_wakeups()
                    continue
                conn = key.data
                try:
                    if mask & selectors.EVENT_READ:
                        self._on_readable(conn)
                    if mask & selectors.EVENT_WRITE and not conn.closed:
                        self._flush(conn)
                except Exception:
                    logger.exception("error serving %s:%d; closing the connection", *conn.peer)
                    self._close(conn)
            while self._incoming:
                self._register(*self._incoming.popleft())
            now = time.monotonic()
            if self._parked:
                self._retry_parked(now)
            if now >= next_housekeeping:
                self._housekeeping(now)
                next_housekeeping = now + _HOUSEKEEPING_S
        for conn in list(self._connections):
            self._close(conn)
        self.selector.close()
        self._wake_r.close()
        self._wake_w.close()

    def _drain_wakeups(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except BlockingIOError:
            pass

    def _register(self, sock: socket.socket, peer: tuple[str, int]) -> None:
        conn = Connection(sock, peer, last_active=time.monotonic())
        self._connections.add(conn)
        self._update_interest(conn)

    # ------------------------------------------------------------------ reading

    def _on_readable(self, conn: Connection) -> None:
        try:
            data = conn.sock.recv(_RECV_BYTES)
        except BlockingIOError:
            return
        except OSError as exc:
            logger.debug("connection from %s:%d failed: %s", *conn.peer, exc)
            self._close(conn)
            return
        if not data:
            self._close(conn)  # the client closed its side
            return
        now = time.monotonic()
        self.server.metrics.bytes_in += len(data)
        conn.last_active = now
        if conn.frame_started is None:
            conn.frame_started = now
        conn.inbuf += data
        self._process_frames(conn)
        self._update_interest(conn)

    def _process_frames(self, conn: Connection) -> None:
        limits = self.server.config.limits
        buf = conn.inbuf
        while conn.parked is None and not conn.closed and conn.out_bytes < _MAX_UNSENT_BYTES:
            start = conn.read_pos
            if len(buf) - start < 4:
                break
            size = int.from_bytes(buf[start : start + 4], "big", signed=True)
            if size < 0 or size > limits.max_request_bytes:
                logger.warning(
                    "closing connection from %s:%d: request size %d is outside [0, %d]",
                    *conn.peer, size, limits.max_request_bytes,
                )  # fmt: skip
                self.server.metrics.protocol_errors += 1
                self._close(conn)
                return
            if len(buf) - start - 4 < size:
                break
            frame = bytes(buf[start + 4 : start + 4 + size])
            conn.read_pos = start + 4 + size
            self._handle(conn, frame)
        if conn.read_pos and not conn.closed:
            del buf[: conn.read_pos]
            conn.read_pos = 0
            # The deadline runs from the first byte of a frame: more bytes of it do not reset it.
            conn.frame_started = time.monotonic() if buf else None

    def _handle(self, conn: Connection, frame: bytes) -> None:
        started = time.perf_counter()
        metrics = self.server.metrics
        try:
            api_key, api_version, correlation_id = peek_header(frame)
            if (api_key, api_version) not in REGISTRY:
                self._refuse(conn, frame, api_key, api_version, correlation_id)
                return
            header, api, body = decode_request(frame)
        except ProtocolError as exc:
            logger.info("closing connection from %s:%d: %s", *conn.peer, exc)
            metrics.protocol_errors += 1
            self._close(conn)
            return
        result = self.server.handlers.handle(header, api, body, peer=conn.peer[0])
        if result is NO_RESPONSE:
            metrics.record_request(api.key.name, time.perf_counter() - started)
            return
        if isinstance(result, ParkedFetch | DeferredResponse):
            conn.parked = (result, header, api)
            self._parked.add(conn)
            if isinstance(result, DeferredResponse):
                result.on_complete(self.wake)  # another thread answers it: look at it then
            return
        chunks, _ = encode_response(api, header.correlation_id, result)  # type: ignore[arg-type]
        # counted before the response leaves: a client that got it then reads the metrics sees it
        metrics.record_request(api.key.name, time.perf_counter() - started)
        self._send(conn, chunks)

    def _refuse(self, conn: Connection, frame: bytes, api_key: int, api_version: int, correlation_id: int) -> None:
        """A request of an API or version we do not serve: answered with an error where the client can
        read one (frames.refusal), the connection closed where not; logged either way, naming the
        request and the client (the header's client id can be read in every request version)."""
        metrics = self.server.metrics
        client_id = client_id_of(frame)
        what = f"{api_name(api_key)} v{api_version} from {client_id!r} at {conn.peer[0]}:{conn.peer[1]}"
        answer = refusal(api_key, api_version, correlation_id)
        if answer is None:
            logger.warning("closing the connection of %s: neither the API nor the version is known here", what)
            metrics.protocol_errors += 1
            self._close(conn)
            return
        if api_key == ApiKey.API_VERSIONS:  # the usual opening of a client newer than we are
            logger.debug("answered %s with our versions (v0, UNSUPPORTED_VERSION)", what)
        else:
            logger.warning("answered %s with UNSUPPORTED_VERSION: not served (docs/broker.md)", what)
        metrics.record_request(API_NAMES.get(api_key, str(api_key)), 0.0)
        self._send(conn, answer[0])

    def _retry_parked(self, now: float) -> None:
        data_arrived, self._data_arrived = self._data_arrived, False
        for conn in list(self._parked):
            if conn.parked is None:
                continue
            parked, header, api = conn.parked
            if isinstance(parked, DeferredResponse):
                body = parked.body
            else:
                expired = now >= parked.deadline
                if not (data_arrived or expired):
                    continue
                body = self.server.handlers.retry_fetch(parked, expired=expired)
            if body is None:
                continue
            conn.parked = None
            self._parked.discard(conn)
            chunks, _ = encode_response(api, header.correlation_id, body)
            self._send(conn, chunks)
            self._process_frames(conn)  # requests that arrived while it waited
            self._update_interest(conn)

    # ------------------------------------------------------------------ writing

    def _send(self, conn: Connection, chunks: list[Any]) -> None:
        if conn.closed:
            _close_regions(chunks)
            return
        for chunk in chunks:
            conn.out.append(chunk)
            conn.out_bytes += chunk.length if hasattr(chunk, "fd") else len(chunk)
        self._flush(conn)

    def _flush(self, conn: Connection) -> None:
        metrics = self.server.metrics
        while conn.out:
            chunk = conn.out[0]
            is_region = hasattr(chunk, "fd")
            length = chunk.length if is_region else len(chunk)
            try:
                if conn.out_offset >= length:
                    sent = 0
                elif is_region:
                    sent = os.sendfile(
                        conn.sock.fileno(), chunk.fd, chunk.position + conn.out_offset, length - conn.out_offset
                    )
                    if sent == 0:
                        raise OSError(f"{chunk.path} ended before the bytes the log promised")
                else:
                    sent = conn.sock.send(memoryview(chunk)[conn.out_offset :])
            except BlockingIOError:
                break
            except OSError as exc:
                logger.debug("sending to %s:%d failed: %s", *conn.peer, exc)
                self._close(conn)
                return
            conn.out_offset += sent
            conn.out_bytes -= sent
            metrics.bytes_out += sent
            conn.last_active = time.monotonic()
            if conn.out_offset >= length:
                conn.out.popleft()
                conn.out_offset = 0
                if is_region:
                    chunk.close()
        if not conn.out and conn.read_pos == 0 and conn.inbuf and conn.parked is None:
            self._process_frames(conn)  # requests held back while output was large
        self._update_interest(conn)

    def _update_interest(self, conn: Connection) -> None:
        if conn.closed:
            return
        limits = self.server.config.limits
        wants = 0
        if (
            conn.parked is None
            and conn.out_bytes < _MAX_UNSENT_BYTES
            and len(conn.inbuf) <= limits.max_request_bytes + 4
        ):
            wants |= selectors.EVENT_READ
        if conn.out:
            wants |= selectors.EVENT_WRITE
        if wants == conn.events:
            return
        if conn.events and wants:
            self.selector.modify(conn.sock, wants, conn)
        elif wants:
            self.selector.register(conn.sock, wants, conn)
        else:
            self.selector.unregister(conn.sock)
        conn.events = wants

    # ------------------------------------------------------------------ limits and closing

    def _housekeeping(self, now: float) -> None:
        limits = self.server.config.limits
        for conn in list(self._connections):
            if conn.parked is not None:
                continue
            if now - conn.last_active > limits.idle_timeout_ms / 1000:
                logger.info("closing idle connection from %s:%d", *conn.peer)
                self._close(conn)
            elif conn.frame_started is not None and now - conn.frame_started > limits.frame_read_timeout_ms / 1000:
                logger.warning(
                    "closing connection from %s:%d: a request took longer than %d ms to arrive",
                    *conn.peer, limits.frame_read_timeout_ms,
                )  # fmt: skip
                self._close(conn)

    def _close(self, conn: Connection) -> None:
        if conn.closed:
            return
        conn.closed = True
        if conn.events:
            self.selector.unregister(conn.sock)
            conn.events = 0
        conn.sock.close()
        _close_regions(conn.out)
        conn.out.clear()
        self._connections.discard(conn)
        self._parked.discard(conn)
        self.server.connection_closed(conn.peer[0])


def _close_regions(chunks: Any) -> None:
    for chunk in chunks:
        if hasattr(chunk, "fd"):
            chunk.close()


def open_listener(host: str, port: int) -> socket.socket:
    """Bind and listen (port 0 picks a free port), before anything needs to know the port."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
        listener.listen(1024)
    except OSError:
        listener.close()
        raise
    listener.settimeout(_HOUSEKEEPING_S)
    return listener


class SocketServer:
    """Listens, accepts and serves. ``start()`` binds (port 0 picks a free port: see ``port``)."""

    def __init__(
        self, config: BrokerConfig, handlers: RequestHandlers, metrics: Metrics, listener: socket.socket
    ) -> None:
        self.config = config
        self.handlers = handlers
        self.metrics = metrics
        self.stopping = threading.Event()
        self.processors = [Processor(i, self) for i in range(config.num_processors)]
        self._listener = listener
        self._acceptor: threading.Thread | None = None
        self._per_ip: collections.Counter[str] = collections.Counter()
        self._per_ip_lock = threading.Lock()
        self.port: int = listener.getsockname()[1]

    def start(self) -> None:
        for processor in self.processors:
            processor.start()
        self._acceptor = threading.Thread(target=self._accept_loop, name="kafkalog-acceptor", daemon=True)
        self._acceptor.start()

    def _accept_loop(self) -> None:
        turn = 0
        while not self.stopping.is_set():
            try:
                sock, peer = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                if self.stopping.is_set():
                    return
                logger.exception("accept failed")
                time.sleep(0.05)
                continue
            with self._per_ip_lock:
                if self._per_ip[peer[0]] >= self.config.limits.max_connections_per_ip:
                    self.metrics.connections_rejected += 1
                    sock.close()
                    logger.warning("refused a connection from %s: %d already open", peer[0], self._per_ip[peer[0]])
                    continue
                self._per_ip[peer[0]] += 1
            self.metrics.connections_accepted += 1
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.processors[turn % len(self.processors)].adopt(sock, peer)
            turn += 1

    def connection_closed(self, ip: str) -> None:
        with self._per_ip_lock:
            self._per_ip[ip] -= 1
            if self._per_ip[ip] <= 0:
                del self._per_ip[ip]
        self.metrics.connections_closed += 1

    @property
    def open_connections(self) -> int:
        with self._per_ip_lock:
            return sum(self._per_ip.values())

    def data_arrived(self) -> None:
        """Some partition got new messages: parked fetches should look again. Only processors with
        parked fetches are woken (a produce costs no extra system calls when nobody waits)."""
        for processor in self.processors:
            if processor.has_parked:
                processor.wake(data_arrived=True)

    def stop(self) -> None:
        self.stopping.set()
        self._listener.close()
        if self._acceptor is not None:
            self._acceptor.join()
        for processor in self.processors:
            processor.wake()
        for processor in self.processors:
            if processor.is_alive():
                processor.join()
