"""One TCP connection to one broker: requests pipelined, responses matched in order.

Requests may stay in flight between calls (``submit``, then ``answer``): a producer keeps several
outstanding while it builds the next. A broker answers a connection's requests in the order they
came, so the connection keeps the ones in flight in that order and whoever reads a response hands
it to its request; ``send_many`` (submit, then answer each) works beside them from any thread.

The network is untrusted here too: a response's size prefix is bounded before anything is allocated
and a malformed response raises ProtocolError (the connection is then dropped). On connect the
connection asks the broker's API versions; a broker that predates ApiVersions (Kafka 0.9 closes the
connection on an unknown API) is taken to speak the 0.9 set. With ClientSecurity the socket is
wrapped in TLS first and the client logs in (SaslHandshake v1, then SaslAuthenticate) after the
versions are known, before any other request.
"""

from __future__ import annotations

import logging
import socket
import ssl
import struct
import threading
from collections import deque
from typing import Any

from kafkalog.client.security import PLAINTEXT, ClientSecurity
from kafkalog.errors import (
    AuthenticationError,
    KafkaConnectionError,
    ProtocolError,
    RequestTimedOutError,
    UnsupportedByBrokerError,
)
from kafkalog.protocol import VERSION_RANGES, Api, ApiKey, decode_response, encode_request, lookup
from kafkalog.sasl import PLAIN, SaslLoginError, ScramClient, plain_message

logger = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_READ_AHEAD = 64 * 1024

PROBE_TIMEOUT_S = 2.0
"""How long to wait for an ApiVersions answer before taking the broker for Kafka 0.9."""

KAFKA_0_9_VERSIONS: dict[int, tuple[int, int]] = {
    ApiKey.PRODUCE: (0, 1),
    ApiKey.FETCH: (0, 1),
    ApiKey.LIST_OFFSETS: (0, 0),
    ApiKey.METADATA: (0, 0),
    ApiKey.OFFSET_COMMIT: (0, 2),
    ApiKey.OFFSET_FETCH: (0, 1),
    ApiKey.FIND_COORDINATOR: (0, 0),
}
"""What a Kafka 0.9 broker serves (of the APIs we use): no ApiVersions, no CreateTopics."""


class InFlight:
    """A request sent on a connection and not yet answered: then its response, or the error that
    ended the connection before the response came."""

    __slots__ = ("api", "correlation_id", "error", "response")

    def __init__(self, correlation_id: int, api: Api) -> None:
        self.correlation_id = correlation_id
        self.api = api
        self.response: dict[str, Any] | None = None
        self.error: Exception | None = None


class BrokerConnection:
    """A connection to ``host:port``. Thread-safe: one lock guards the socket and the requests in
    flight on it (a send, and the read of one response, are each atomic)."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str = "kafkalog",
        timeout_ms: int = 30_000,
        max_response_bytes: int = 256 * 1024 * 1024,
        versions: dict[int, tuple[int, int]] | None = None,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        self.host = host
        self.security = security
        self._tls = security.tls_context() if security.uses_tls else None
        self.port = port
        self.client_id = client_id
        self.timeout = timeout_ms / 1000
        self.max_response_bytes = max_response_bytes
        self._versions: dict[int, tuple[int, int]] | None = versions
        self._sock: socket.socket | None = None
        self._correlation = 0
        self._lock = threading.Lock()
        self._received = bytearray()
        """Bytes read from the socket beyond the responses taken so far."""
        self._in_flight: deque[InFlight] = deque()
        """Requests sent on the current socket and not answered yet, oldest first."""

    def __repr__(self) -> str:
        return f"BrokerConnection({self.host}:{self.port})"

    # ------------------------------------------------------------------ connecting

    def _connect(self) -> socket.socket:
        if self._sock is not None:
            return self._sock
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
        except OSError as exc:
            raise KafkaConnectionError(f"cannot connect to {self.host}:{self.port}: {exc}") from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self._tls is not None:
            sock = self._tls_handshake(sock)
        self._sock = sock
        if self._versions is None:
            self._versions = self._negotiate()
        if self.security.uses_sasl:
            self._login()
        return self._sock

    def _tls_handshake(self, sock: socket.socket) -> socket.socket:
        assert self._tls is not None
        try:
            return self._tls.wrap_socket(sock, server_hostname=self.host)
        except ssl.SSLCertVerificationError as exc:
            sock.close()
            raise AuthenticationError(
                f"{self.host}:{self.port}: the broker's certificate is not trusted: {exc.verify_message}"
            ) from None
        except (ssl.SSLError, OSError) as exc:
            sock.close()
            raise KafkaConnectionError(f"TLS handshake with {self.host}:{self.port} failed: {exc}") from exc

    def _login(self) -> None:
        """SaslHandshake v1, then the mechanism's exchange in SaslAuthenticate requests. A refusal is
        AuthenticationError with the broker's reason (which names the user, never the password)."""
        security = self.security
        where = f"{self.host}:{self.port}"
        try:
            handshake = self._roundtrip([(lookup(ApiKey.SASL_HANDSHAKE, 1), {"mechanism": security.mechanism})])[0]
            if handshake["error_code"] != 0:
                offered = ", ".join(handshake["mechanisms"]) or "none"
                raise AuthenticationError(f"{where} does not offer SASL {security.mechanism} (it offers: {offered})")
            authenticate = self.api_unlocked(ApiKey.SASL_AUTHENTICATE)
            assert security.username is not None and security.password is not None  # ClientSecurity checked
            if security.mechanism == PLAIN:
                self._authenticate(authenticate, plain_message(security.username, security.password))
                return
            scram = ScramClient(security.mechanism, security.username, security.password)
            server_first = self._authenticate(authenticate, scram.first())
            scram.verify(self._authenticate(authenticate, scram.final(server_first)))
        except SaslLoginError as exc:
            self.close()
            raise AuthenticationError(f"{where}: {exc}") from None
        except AuthenticationError:
            self.close()
            raise
        logger.debug("%s: logged in as %s (%s)", where, security.username, security.mechanism)

    def _authenticate(self, api: Api, message: bytes) -> bytes:
        answer = self._roundtrip([(api, {"auth_bytes": message})])[0]
        if answer["error_code"] != 0:
            reason = answer["error_message"] or f"error {answer['error_code']}"
            raise AuthenticationError(f"{self.host}:{self.port} refused the login: {reason}")
        return bytes(answer["auth_bytes"])

    def _negotiate(self) -> dict[int, tuple[int, int]]:
        assert self._sock is not None
        self._sock.settimeout(min(self.timeout, PROBE_TIMEOUT_S))
        try:
            response = self._roundtrip([(lookup(ApiKey.API_VERSIONS, 0), {})])[0]
        except (KafkaConnectionError, RequestTimedOutError):
            # A 0.9 broker fails on an API it does not know and never answers (nor closes): after a
            # short wait, reconnect and speak 0.9's set of APIs.
            logger.info("%s:%d does not answer ApiVersions: using Kafka 0.9 API versions", self.host, self.port)
            self.close()
            self._versions = dict(KAFKA_0_9_VERSIONS)
            self._connect()
            return self._versions
        finally:
            if self._sock is not None:
                self._sock.settimeout(self.timeout)
        if response["error_code"] != 0:
            raise ProtocolError(f"{self.host}:{self.port} answered ApiVersions with error {response['error_code']}")
        return {v["api_key"]: (v["min_version"], v["max_version"]) for v in response["api_versions"]}

    def close(self) -> None:
        """Drop the socket; the next request reconnects (keeping the negotiated versions). Requests
        still in flight on it will never be answered: each gets KafkaConnectionError."""
        if self._in_flight:
            self._abandon(KafkaConnectionError(f"the connection to {self.host}:{self.port} was closed"))
        self._received.clear()  # the rest of a response the next socket will never continue
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    # ------------------------------------------------------------------ requests

    def api(self, key: ApiKey) -> Api:
        """The highest version of ``key`` both sides speak."""
        with self._lock:
            self._connect()
            return self.api_unlocked(key)

    def api_unlocked(self, key: ApiKey) -> Api:
        """``api`` for a caller that holds the lock and is connected (the login)."""
        assert self._versions is not None
        ours = VERSION_RANGES[key]
        theirs = self._versions.get(int(key))
        if theirs is None or theirs[0] > ours[1] or theirs[1] < ours[0]:
            raise UnsupportedByBrokerError(f"{self.host}:{self.port} does not serve {key.name} in a version we speak")
        return lookup(key, min(ours[1], theirs[1]))

    def request(self, api: Api, body: dict[str, Any]) -> dict[str, Any]:
        return self.send_many([(api, body)])[0]

    def send_many(
        self, requests: list[tuple[Api, dict[str, Any]]], *, expect_response: bool = True
    ) -> list[dict[str, Any]]:
        """Send requests back to back (pipelined) and return their responses in order. Any failure
        drops the connection (so nothing half-read remains) and raises."""
        return [self.answer(sent) for sent in self.submit(requests, expect_response=expect_response)]

    def submit(self, requests: list[tuple[Api, dict[str, Any]]], *, expect_response: bool = True) -> list[InFlight]:
        """Send requests back to back and return at once: each one's InFlight, to ``answer`` later
        (none when ``expect_response`` is false: acks=0 Produce, which a broker never answers).
        A failure drops the connection and raises."""
        with self._lock:
            try:
                self._connect()
                return self._send_locked(requests, expect_response=expect_response)
            except (KafkaConnectionError, RequestTimedOutError, ProtocolError) as exc:
                self._abandon(exc)
                self.close()
                raise

    def answer(self, sent: InFlight) -> dict[str, Any]:
        """The response to ``sent``, reading (and handing to their requests) the responses before it
        as they come. Raises the error that ended the connection before it was answered; a
        failure while reading drops the connection, and every request in flight on it fails."""
        with self._lock:
            while sent.response is None and sent.error is None:
                try:
                    self._read_next_locked()
                except (KafkaConnectionError, RequestTimedOutError, ProtocolError) as exc:
                    self._abandon(exc)  # the requests behind it share its fate, and its cause
                    self.close()
                    raise
            if sent.error is not None:
                raise sent.error
            assert sent.response is not None
            return sent.response

    def _roundtrip(self, requests: list[tuple[Api, dict[str, Any]]]) -> list[dict[str, Any]]:
        """send_many for the connection's own exchanges while it connects (holding the lock,
        nothing else in flight yet)."""
        sent = self._send_locked(requests, expect_response=True)
        while self._in_flight:
            self._read_next_locked()
        return [request.response for request in sent if request.response is not None]

    def _send_locked(self, requests: list[tuple[Api, dict[str, Any]]], *, expect_response: bool) -> list[InFlight]:
        sock = self._sock
        assert sock is not None
        sent = []
        frames = []
        for api, body in requests:
            self._correlation = (self._correlation + 1) & 0x7FFFFFFF
            frames.append(encode_request(api, self._correlation, self.client_id, body))
            sent.append(InFlight(self._correlation, api))
        try:
            sock.sendall(b"".join(frames))
        except TimeoutError as exc:
            raise RequestTimedOutError(
                f"{self.host}:{self.port} did not take a request within {self.timeout:.1f} s"
            ) from exc
        except OSError as exc:
            raise KafkaConnectionError(f"connection to {self.host}:{self.port} failed: {exc}") from exc
        if not expect_response:
            return []
        self._in_flight.extend(sent)
        return sent

    def _read_next_locked(self) -> None:
        """Read one response and give it to the oldest request in flight."""
        sock = self._sock
        if sock is None or not self._in_flight:  # closed under us: close() failed the requests
            raise KafkaConnectionError(f"the connection to {self.host}:{self.port} was closed")
        oldest = self._in_flight[0]
        try:
            response = self._read_response(sock, oldest.correlation_id, oldest.api)
        except TimeoutError as exc:
            raise RequestTimedOutError(f"{self.host}:{self.port} did not answer within {self.timeout:.1f} s") from exc
        except OSError as exc:
            raise KafkaConnectionError(f"connection to {self.host}:{self.port} failed: {exc}") from exc
        self._in_flight.popleft()
        oldest.response = response

    def _abandon(self, error: Exception) -> None:
        """Fail every request in flight (the socket that would have answered them is gone)."""
        while self._in_flight:
            self._in_flight.popleft().error = error

    def _read_response(self, sock: socket.socket, correlation_id: int, api: Api) -> dict[str, Any]:
        size = _SIZE.unpack(self._recv_exact(sock, 4))[0]
        if not 4 <= size <= self.max_response_bytes:
            raise ProtocolError(f"{self.host}:{self.port} sent a response size of {size} bytes")
        frame = self._recv_exact(sock, size)
        answered, body = decode_response(api, frame)
        if answered != correlation_id:
            raise ProtocolError(f"{self.host}:{self.port} answered request {answered}, expected {correlation_id}")
        return body

    def _recv_exact(self, sock: socket.socket, count: int) -> bytes | bytearray:
        # Reads ahead: one recv often brings several small responses (a producer's window), each
        # recv is a system call and a trip away from the GIL and back.
        received = self._received
        if count > _READ_AHEAD:
            return self._recv_large(sock, count)
        while len(received) < count:
            chunk = sock.recv(max(count - len(received), _READ_AHEAD))
            if not chunk:
                raise KafkaConnectionError(f"{self.host}:{self.port} closed the connection")
            received += chunk
        data = bytes(received[:count])
        del received[:count]  # from the front: CPython moves its start, not the bytes
        return data

    def _recv_large(self, sock: socket.socket, count: int) -> bytearray:
        """``count`` bytes read straight into their own buffer (a fetch's megabytes): what was read
        ahead, then the socket's into the rest, copied once, not joined, sliced and copied again."""
        received = self._received
        out = bytearray(count)
        view = memoryview(out)
        have = min(len(received), count)
        view[:have] = received[:have]
        del received[:have]
        while have < count:
            got = sock.recv_into(view[have:], count - have)
            if not got:
                raise KafkaConnectionError(f"{self.host}:{self.port} closed the connection")
            have += got
        return out
