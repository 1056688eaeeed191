"""The socket server: one acceptor thread and N processor threads (the seeds' network layer).

The acceptor accepts connections, enforces the per-address limit and hands each connection to a
processor, round robin. A processor multiplexes its connections with a selector: it reads request
frames, has them handled, and writes the responses, log regions with ``os.sendfile`` (the bytes go
from the page cache to the socket without passing through Python).

Per connection, requests are handled one at a time in arrival order, so responses come back in
request order; requests read together are answered together, their responses written with one
``sendmsg``. A fetch that waits for data parks its connection (no further requests are read from
it) until the fetch completes. Reading stops while a connection has much unsent output, so a client
that sends but never reads cannot make the broker buffer without bound.

Each listener (kafkalog.server.listeners) has its security protocol. On a TLS listener the socket is
wrapped (kafkalog.server.security.tls) and its handshake driven by the selector like any read; log regions
are then read and sent through TLS in 64 KiB pieces, since the kernel cannot encrypt what sendfile
sends. On a SASL listener the connection's Session (kafkalog.server.security.session) admits nothing but
ApiVersions and the SASL requests until the client has logged in. A connection not through its TLS
handshake and login within the handshake timeout is closed, so strangers cannot hold slots.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import logging
import os
import selectors
import socket
import ssl
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kafkalog.errors import ProtocolError
from kafkalog.protocol import REGISTRY, ApiKey, decode_request, encode_response, peek_header
from kafkalog.protocol.apis import API_NAMES, api_name
from kafkalog.protocol.frames import client_id_of, refusal
from kafkalog.server.caller import ANONYMOUS, Caller
from kafkalog.server.config import BrokerConfig
from kafkalog.server.deferred import DeferredResponse
from kafkalog.server.fetch import ParkedFetch
from kafkalog.server.handlers import NO_RESPONSE, RequestHandlers
from kafkalog.server.listeners import Listener
from kafkalog.server.metrics import Metrics
from kafkalog.server.security.prelogin import LoginBuffers, RefusalLog
from kafkalog.server.security.session import Authenticator, Session
from kafkalog.server.security.tls import principal_of

logger = logging.getLogger(__name__)

_RECV_BYTES = 256 * 1024
_MAX_UNSENT_BYTES = 8 * 1024 * 1024  # stop reading requests from a connection with this much unsent
_PRELOGIN_UNSENT_BYTES = 64 * 1024  # the same before login: a stranger's unread answers cost memory
_HOUSEKEEPING_S = 0.25
_TLS_SEND_BYTES = 64 * 1024  # one TLS write: the same bytes are offered again after a want-write
_CORK_BYTES = 256 * 1024  # responses held back for one write while requests read together are answered
_GATHER_CHUNKS = 64  # at most this many queued responses (or their pieces) per write


@dataclass(frozen=True, slots=True)
class Security:
    """What secures the listeners: the TLS context (None: no TLS listener), the login checker
    (None: no SASL listener) and how long a connection has to get through both."""

    tls: ssl.SSLContext | None = None
    authenticator: Authenticator | None = None
    handshake_timeout_ms: int = 10_000
    mechanisms: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """The SASL mechanisms each SASL listener offers, by its name."""
    max_receive_bytes: int = 512 * 1024
    """The largest frame a connection not yet logged in may send (config.SaslSettings)."""
    max_login_buffer_bytes: int = 16 * 1024 * 1024
    """What the connections not yet logged in may hold together (config.SaslSettings)."""
    failed_authentication_delay_s: float = 0.1
    """How long a refused login's answer waits (config.SaslSettings)."""


_RAW_TOKEN = None
"""The header and Api of a parked bare SASL token (after SaslHandshake v0): it has neither."""


@dataclass(eq=False)
class Connection:
    """One client connection, confined to its processor thread."""

    sock: socket.socket
    """An ``ssl.SSLSocket`` on a TLS listener."""
    peer: tuple[str, int]
    listener: Listener
    session: Session
    last_active: float
    tls_handshaking: bool = False
    tls_wants_write: bool = False
    close_when_sent: bool = False
    """The last response is queued (a refused login): close once it is out."""
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
    corked: bool = False
    """Requests read together are being answered: their small responses wait to leave together."""
    held_before_login: int = 0
    """The bytes of ``inbuf`` counted in the server's LoginBuffers (while not logged in)."""
    refusal_due: float | None = None
    """When a refused login's answer, ready, may leave (the failed-authentication delay)."""


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
        self._incoming: collections.deque[tuple[socket.socket, tuple[str, int], Listener]] = collections.deque()
        self._connections: set[Connection] = set()
        self._parked: set[Connection] = set()
        self._data_arrived = False

    # ------------------------------------------------------------------ from other threads

    @property
    def has_parked(self) -> bool:
        return bool(self._parked)

    def adopt(self, sock: socket.socket, peer: tuple[str, int], listener: Listener) -> None:
        self._incoming.append((sock, peer, listener))
        self.wake()

    def close_unadopted(self) -> None:
        """After the loop ended: close the connections handed over too late to be served (the
        acceptor may adopt one while the server stops, after this processor's last look)."""
        while self._incoming:
            sock, peer, _ = self._incoming.popleft()
            sock.close()
            self.server.connection_closed(peer[0])

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
                if conn.refusal_due is not None:
                    timeout = min(timeout, conn.refusal_due - now)
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

    def _register(self, sock: socket.socket, peer: tuple[str, int], listener: Listener) -> None:
        now = time.monotonic()
        security = self.server.security
        protocol = listener.security_protocol
        deadline = now + security.handshake_timeout_ms / 1000 if protocol != "PLAINTEXT" else float("inf")
        session = Session(
            security.authenticator if protocol.uses_sasl else None,
            deadline=deadline,
            mechanisms=security.mechanisms.get(listener.name),
        )
        conn = Connection(sock, peer, listener, session, last_active=now, tls_handshaking=protocol.uses_tls)
        self._connections.add(conn)
        self._update_interest(conn)

    def _tls_handshake(self, conn: Connection) -> bool:
        """Drive the TLS handshake one step; True once it is done (the connection can be read)."""
        assert isinstance(conn.sock, ssl.SSLSocket)
        try:
            conn.sock.do_handshake()
        except ssl.SSLWantReadError:
            conn.tls_wants_write = False
            return False
        except ssl.SSLWantWriteError:
            conn.tls_wants_write = True
            return False
        except (ssl.SSLError, OSError) as exc:
            reason = getattr(exc, "verify_message", None) or getattr(exc, "reason", None) or exc
            logger.warning("TLS handshake with %s:%d on listener %s failed: %s", *conn.peer, conn.listener.name, reason)
            self.server.metrics.authentication_failures += 1
            self._close(conn)
            return False
        conn.tls_handshaking = conn.tls_wants_write = False
        if not conn.listener.security_protocol.uses_sasl:  # SSL: the certificate names the client
            conn.session.principal = principal_of(conn.sock.getpeercert()) or ANONYMOUS
            conn.session.deadline = float("inf")
            self.server.metrics.authentications += 1
            logger.debug("TLS client %s:%d is %s", *conn.peer, conn.session.principal)
        return True

    # ------------------------------------------------------------------ reading

    def _on_readable(self, conn: Connection) -> None:
        if conn.tls_handshaking and not self._tls_handshake(conn):
            self._update_interest(conn)
            return
        data = self._receive(conn)
        if not data:
            return
        now = time.monotonic()
        self.server.metrics.bytes_in += len(data)
        conn.last_active = now
        if conn.frame_started is None:
            conn.frame_started = now
        conn.inbuf += data
        if not self._held_before_login(conn):
            return
        self._process_frames(conn)
        self._held_before_login(conn)
        self._update_interest(conn)

    def _held_before_login(self, conn: Connection) -> bool:
        """Count ``conn``'s buffered bytes (read and not yet sent) in the budget of connections not
        yet logged in (give them back once it has logged in, or closed); False, the connection
        closed, when they would go over it."""
        held = 0 if conn.session.authenticated or conn.closed else len(conn.inbuf) + conn.out_bytes
        budget = self.server.login_buffers
        if budget.change(held - conn.held_before_login, holding=held):
            conn.held_before_login = held
            return True
        logger.warning(
            "closing connection from %s:%d on listener %s: connections not yet logged in hold %d bytes, "
            "and its %d more would go over sasl.max_login_buffer_bytes (%d)",
            *conn.peer, conn.listener.name, budget.held, held - conn.held_before_login, budget.limit,
        )  # fmt: skip
        self.server.metrics.protocol_errors += 1
        self._close(conn)
        return False

    def _receive(self, conn: Connection) -> bytes:
        """What the socket has (b"" when nothing, or when it closed: then the connection is closed).
        Under TLS, bytes already decrypted wait inside the SSL object where the selector cannot see
        them: they are read too."""
        try:
            data = conn.sock.recv(_RECV_BYTES)
            if data and isinstance(conn.sock, ssl.SSLSocket):
                while conn.sock.pending():
                    data += conn.sock.recv(_RECV_BYTES)
        except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return b""
        except OSError as exc:  # ssl.SSLError too (a close_notify, a bad record)
            logger.debug("connection from %s:%d failed: %s", *conn.peer, exc)
            self._close(conn)
            return b""
        if not data:
            self._close(conn)  # the client closed its side
        return data

    def _process_frames(self, conn: Connection) -> None:
        """Answer every whole request in the buffer, in order. Their responses leave together, in
        one write, once all are answered: a client that pipelines requests (librdkafka sends
        several produce requests at once) costs one send for them, not one each."""
        conn.corked = True
        try:
            self._answer_frames(conn)
        finally:
            conn.corked = False
        if conn.out and not conn.closed:
            self._flush(conn)

    def _answer_frames(self, conn: Connection) -> None:
        limits = self.server.config.limits
        buf = conn.inbuf
        unsent_limit = _MAX_UNSENT_BYTES if conn.session.authenticated else _PRELOGIN_UNSENT_BYTES
        while conn.parked is None and not conn.closed and not conn.close_when_sent and conn.out_bytes < unsent_limit:
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
            if size > self.server.security.max_receive_bytes and not conn.session.authenticated:
                # Kafka's InvalidReceiveException: before login, a frame is a login's few hundred bytes
                logger.warning(
                    "closing connection from %s:%d on listener %s: a frame of %d bytes before logging in "
                    "(sasl.max_receive_bytes is %d)",
                    *conn.peer, conn.listener.name, size, self.server.security.max_receive_bytes,
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
        session = conn.session
        if session.wants_raw_token:  # after SaslHandshake v0: a bare token, no Kafka header
            self._park_login(conn, session.authenticate(frame), _RAW_TOKEN, _RAW_TOKEN)
            return
        try:
            api_key, api_version, correlation_id = peek_header(frame)
            refusal = session.admits(api_key)
            if refusal is not None:
                logger.warning("closing connection from %s:%d on listener %s: %s", *conn.peer, conn.listener.name,
                               refusal.reason)  # fmt: skip
                metrics.authentication_failures += 1
                self._close(conn)
                return
            if (api_key, api_version) not in REGISTRY:
                self._refuse(conn, frame, api_key, api_version, correlation_id)
                return
            header, api, body = decode_request(frame)
        except ProtocolError as exc:
            logger.info("closing connection from %s:%d: %s", *conn.peer, exc)
            metrics.protocol_errors += 1
            self._close(conn)
            return
        if api.key == ApiKey.SASL_HANDSHAKE:
            answer = session.handshake(api.version, body["mechanism"])
            metrics.record_request(api.key.name, time.perf_counter() - started)
            self._send(conn, encode_response(api, header.correlation_id, answer)[0])
            self._close_if_refused(conn)
            return
        if api.key == ApiKey.SASL_AUTHENTICATE:
            metrics.record_request(api.key.name, time.perf_counter() - started)
            self._park_login(conn, session.authenticate(body["auth_bytes"] or b""), header, api)
            return
        caller = Caller(conn.peer[0], conn.listener.name, session.principal)
        result = self.server.handlers.handle(header, api, body, caller)
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

    def _park_login(self, conn: Connection, answer: DeferredResponse | None, header: Any, api: Any) -> None:
        """Wait for the checker thread's verdict on a login step (see ``_answer_login``)."""
        if answer is None:  # refused unchecked: too many logins waiting
            self._close_if_refused(conn)
            return
        conn.parked = (answer, header, api)
        self._parked.add(conn)
        answer.on_complete(self.wake)

    def _answer_login(self, conn: Connection, body: dict[str, Any], header: Any, api: Any) -> None:
        """Send a login step's answer: a SaslAuthenticate response, or a bare token (after v0, where
        a refusal is a closed connection, as Kafka's broker does)."""
        if api is _RAW_TOKEN:
            if conn.session.failure is None:
                token = body["auth_bytes"]
                self._send(conn, [len(token).to_bytes(4, "big") + token])
        else:
            self._send(conn, encode_response(api, header.correlation_id, body)[0])
        if conn.session.authenticated:
            self.server.metrics.authentications += 1
            conn.session.deadline = float("inf")
            logger.debug("%s:%d on listener %s logged in as %s (%s)", *conn.peer, conn.listener.name,
                        conn.session.principal, conn.session.mechanism)  # fmt: skip
        self._close_if_refused(conn)

    def _refusal_waits(self, conn: Connection, now: float) -> bool:
        """Whether a refused login's ready answer still waits out the failed-authentication delay
        (Kafka's ``connection.failed.authentication.delay.ms``): a client retrying a wrong password
        in a loop cannot make the broker check it faster."""
        if conn.refusal_due is None:
            conn.refusal_due = now + self.server.security.failed_authentication_delay_s
        return now < conn.refusal_due

    def _close_if_refused(self, conn: Connection) -> None:
        """A failed login: log why (never a secret: the session's reasons name the user and the
        mechanism only) and close once the answer has gone."""
        failure = conn.session.failure
        if failure is None:
            return
        self.server.metrics.authentication_failures += 1
        self.server.refusals.refused(conn.peer, conn.listener.name, failure)
        conn.close_when_sent = True
        if not conn.out:
            self._close(conn)

    def _retry_parked(self, now: float) -> None:
        data_arrived, self._data_arrived = self._data_arrived, False
        for conn in list(self._parked):
            if conn.parked is None:
                continue
            parked, header, api = conn.parked
            if isinstance(parked, DeferredResponse):
                body = parked.body
                if body is not None and (api is _RAW_TOKEN or api.key == ApiKey.SASL_AUTHENTICATE):
                    if conn.session.failure is not None and self._refusal_waits(conn, now):
                        continue
                    conn.parked = None
                    self._parked.discard(conn)
                    self._answer_login(conn, body, header, api)
                    if not conn.closed:
                        self._process_frames(conn)
                        if self._held_before_login(conn):  # logged in: its bytes are given back
                            self._update_interest(conn)
                    continue
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
        if not conn.corked or conn.out_bytes >= _CORK_BYTES:
            self._flush(conn)

    def _flush(self, conn: Connection) -> None:
        if conn.tls_handshaking:
            if self._tls_handshake(conn):
                self._process_frames(conn)  # a client may send its first request with the handshake's end
            self._update_interest(conn)
            return
        metrics = self.server.metrics
        tls = isinstance(conn.sock, ssl.SSLSocket)
        while conn.out:
            chunk = conn.out[0]
            is_region = hasattr(chunk, "fd")
            length = chunk.length if is_region else len(chunk)
            try:
                if conn.out_offset >= length:
                    sent = 0
                elif is_region and tls:  # no sendfile through TLS: read, then encrypt
                    wanted = min(length - conn.out_offset, _TLS_SEND_BYTES)
                    piece = os.pread(chunk.fd, wanted, chunk.position + conn.out_offset)
                    if len(piece) < wanted:
                        raise OSError(f"{chunk.path} ended before the bytes the log promised")
                    sent = conn.sock.send(piece)
                elif is_region:
                    sent = os.sendfile(
                        conn.sock.fileno(), chunk.fd, chunk.position + conn.out_offset, length - conn.out_offset
                    )
                    if sent == 0:
                        raise OSError(f"{chunk.path} ended before the bytes the log promised")
                elif tls:
                    sent = conn.sock.send(memoryview(chunk)[conn.out_offset : conn.out_offset + _TLS_SEND_BYTES])
                elif len(conn.out) > 1 and not hasattr(conn.out[1], "fd"):
                    self._send_gathered(conn)  # takes what it wrote off the queue itself
                    continue
                else:
                    sent = conn.sock.send(memoryview(chunk)[conn.out_offset :])
            except (BlockingIOError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
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
        if not conn.out and conn.close_when_sent:
            self._close(conn)
            return
        if not conn.out and conn.read_pos == 0 and conn.inbuf and conn.parked is None:
            self._process_frames(conn)  # requests held back while output was large
        if conn.held_before_login and not self._held_before_login(conn):
            return
        self._update_interest(conn)

    def _send_gathered(self, conn: Connection) -> None:
        """Write the queued byte chunks at the head of the output (up to the first log region) with
        one ``sendmsg``, and take what went off the queue."""
        pieces: list[Any] = [memoryview(conn.out[0])[conn.out_offset :]]
        for chunk in itertools.islice(conn.out, 1, _GATHER_CHUNKS):
            if hasattr(chunk, "fd"):
                break
            pieces.append(chunk)
        sent = conn.sock.sendmsg(pieces)
        conn.out_bytes -= sent
        self.server.metrics.bytes_out += sent
        conn.last_active = time.monotonic()
        left = sent
        while left and conn.out:
            rest = len(conn.out[0]) - conn.out_offset
            if left < rest:
                conn.out_offset += left
                break
            left -= rest
            conn.out.popleft()
            conn.out_offset = 0

    def _update_interest(self, conn: Connection) -> None:
        if conn.closed:
            return
        limits = self.server.config.limits
        wants = 0
        if conn.tls_handshaking:
            wants = selectors.EVENT_READ | (selectors.EVENT_WRITE if conn.tls_wants_write else 0)
        elif (
            conn.parked is None
            and not conn.close_when_sent
            and conn.out_bytes < (_MAX_UNSENT_BYTES if conn.session.authenticated else _PRELOGIN_UNSENT_BYTES)
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
            if now >= conn.session.deadline and (conn.tls_handshaking or not conn.session.authenticated):
                logger.warning(
                    "closing connection from %s:%d on listener %s: %s within %d ms",
                    *conn.peer, conn.listener.name,
                    "no TLS handshake" if conn.tls_handshaking else "not authenticated",
                    self.server.security.handshake_timeout_ms,
                )  # fmt: skip
                self.server.metrics.authentication_failures += 1
                self._close(conn)
                continue
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
        self.server.login_buffers.change(-conn.held_before_login, holding=0)
        conn.held_before_login = 0
        self.server.connection_closed(conn.peer[0])


def _close_regions(chunks: Any) -> None:
    for chunk in chunks:
        if hasattr(chunk, "fd"):
            chunk.close()


def open_listener(host: str, port: int) -> socket.socket:
    """Bind and listen (port 0 picks a free port), before anything needs to know the port."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
        listener.listen(1024)
    except OSError:
        listener.close()
        raise
    listener.setblocking(False)
    return listener


class SocketServer:
    """Listens on every listener, accepts and serves. The sockets are bound already (port 0 became
    a free port: see ``ports``)."""

    def __init__(
        self,
        config: BrokerConfig,
        handlers: RequestHandlers,
        metrics: Metrics,
        listeners: Sequence[tuple[Listener, socket.socket]],
        security: Security | None = None,
    ) -> None:
        self.config = config
        self.handlers = handlers
        self.metrics = metrics
        self.security = security or Security()
        self.login_buffers = LoginBuffers(self.security.max_login_buffer_bytes)
        """The bytes every connection not yet logged in holds, together (kafkalog.server.security.prelogin)."""
        self.refusals = RefusalLog()
        self.stopping = threading.Event()
        self.processors = [Processor(i, self) for i in range(config.num_processors)]
        self._listeners = list(listeners)
        self._acceptor: threading.Thread | None = None
        self._per_ip: collections.Counter[str] = collections.Counter()
        self._per_ip_lock = threading.Lock()
        self.ports: dict[str, int] = {listener.name: sock.getsockname()[1] for listener, sock in listeners}
        """Each listener's bound port, by name."""
        self.port: int = self.ports[listeners[0][0].name]
        """The first listener's port."""

    def start(self) -> None:
        for processor in self.processors:
            processor.start()
        self._acceptor = threading.Thread(target=self._accept_loop, name="kafkalog-acceptor", daemon=True)
        self._acceptor.start()

    def _accept_loop(self) -> None:
        turn = 0
        with selectors.DefaultSelector() as selector:
            for listener, sock in self._listeners:
                selector.register(sock, selectors.EVENT_READ, listener)
            while not self.stopping.is_set():
                for key, _ in selector.select(_HOUSEKEEPING_S):
                    try:
                        sock, peer = key.fileobj.accept()  # type: ignore[union-attr]
                    except (BlockingIOError, InterruptedError):
                        continue
                    except OSError:
                        if self.stopping.is_set():
                            return
                        logger.exception("accept failed")
                        time.sleep(0.05)  # a pause, not a retry: accept failing (out of descriptors) must not spin
                        continue
                    if self._admit(sock, peer, key.data):
                        try:
                            sock = self._wrapped(sock, key.data)
                        except (OSError, ValueError) as exc:
                            logger.warning("could not start TLS with %s:%d: %s", *peer, exc)
                            sock.close()
                            self.connection_closed(peer[0])
                            continue
                        self.processors[turn % len(self.processors)].adopt(sock, peer, key.data)
                        turn += 1

    def _admit(self, sock: socket.socket, peer: tuple[str, int], listener: Listener) -> bool:
        """Count the connection against its address's limit; wrap it in TLS on a TLS listener (the
        handshake itself is driven by its processor)."""
        with self._per_ip_lock:
            if self._per_ip[peer[0]] >= self.config.limits.max_connections_per_ip:
                self.metrics.connections_rejected += 1
                sock.close()
                logger.warning("refused a connection from %s: %d already open", peer[0], self._per_ip[peer[0]])
                return False
            self._per_ip[peer[0]] += 1
        self.metrics.connections_accepted += 1
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return True

    def _wrapped(self, sock: socket.socket, listener: Listener) -> socket.socket:
        if not listener.security_protocol.uses_tls:
            return sock
        assert self.security.tls is not None, "a TLS listener without a TLS context"
        return self.security.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)

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
        if self._acceptor is not None:
            self._acceptor.join()
        for _, sock in self._listeners:
            sock.close()
        if self.security.authenticator is not None:
            self.security.authenticator.close()
        for processor in self.processors:
            processor.wake()
        for processor in self.processors:
            if processor.is_alive():
                processor.join()
            processor.close_unadopted()
