"""Who is on a connection: its SASL login, step by step, and the principal it acts as.

Role: the network layer asks a connection's :class:`Session` whether a request may be served
(``admits``) and hands it the SASL requests; the session answers them and names the principal
(``User:alice``) the handlers and ACLs see. It knows nothing of sockets; the checking of secrets is
kafkalog.server.security.scram's, run off the network threads by the :class:`Authenticator`.

States, as Kafka's broker has them::

    on a SASL listener:  HANDSHAKE ─SaslHandshake v1→ AUTHENTICATE ─SaslAuthenticate…→ AUTHENTICATED
                                   ─SaslHandshake v0→ RAW_TOKENS (bare size-prefixed tokens) ─…→ AUTHENTICATED
                         any failure → FAILED (the answer is sent, then the connection closed)
    elsewhere:           AUTHENTICATED from the start (the TLS certificate's subject, or ANONYMOUS)

Invariants: before AUTHENTICATED only ApiVersions and the SASL requests are admitted (anything else
closes the connection, as Kafka does); a login that fails is answered with Kafka's error and a
reason naming the user and mechanism, never a secret; the exchange's bytes are bounded
(scram.MAX_MESSAGE_BYTES).
"""

from __future__ import annotations

import concurrent.futures
import enum
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from kafkalog.protocol import ApiKey, ErrorCode
from kafkalog.sasl import PLAIN
from kafkalog.server.caller import ANONYMOUS
from kafkalog.server.deferred import DeferredResponse
from kafkalog.server.security.credentials import CredentialError, UsersFile, stand_in_secret
from kafkalog.server.security.scram import SaslAuthenticationError, ScramServer, StandIns, Step, plain_login

logger = logging.getLogger(__name__)

_BEFORE_LOGIN = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})

MAX_PENDING_LOGINS = 256
"""Logins waiting for the checker at once; a connection beyond this is refused at its handshake
(a flood of logins cannot grow the queue without bound)."""


class State(enum.Enum):
    HANDSHAKE = "waiting for SaslHandshake"
    AUTHENTICATE = "waiting for SaslAuthenticate"
    RAW_TOKENS = "waiting for a bare SASL token"
    AUTHENTICATED = "authenticated"
    FAILED = "failed"


class Exchange:
    """One mechanism's exchange: ``step`` each client message (PLAIN is one step, SCRAM two)."""

    def __init__(self, mechanism: str, users: UsersFile, stand_ins: StandIns) -> None:
        self.mechanism = mechanism
        self._users = users
        self._stand_ins = stand_ins
        self._scram = None if mechanism == PLAIN else ScramServer(mechanism, users.credential, stand_ins)

    def step(self, message: bytes) -> Step:
        if self._scram is None:
            return plain_login(message, self._users.credential, self._stand_ins)
        return self._scram.step(message)


class Authenticator:
    """The broker's side of every login: the users file, the mechanisms offered, and one thread
    that checks secrets (a PLAIN login derives keys with PBKDF2, milliseconds of CPU: on the network
    thread a flood of bad logins would stall every client)."""

    def __init__(self, users_file: UsersFile, mechanisms: tuple[str, ...]) -> None:
        self.users = users_file
        self.mechanisms = mechanisms
        # the stand-in credentials of unknown users, from a secret kept beside the users file
        self._stand_ins = StandIns(stand_in_secret(users_file.path), users_file.iteration_counts)
        self._checker = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="kafkalog-sasl")
        self._pending = 0
        self._lock = threading.Lock()
        self._file_seen = self._file_stamp()
        self.failures = 0
        self.successes = 0

    def exchange(self, mechanism: str) -> Exchange:
        return Exchange(mechanism, self.users, self._stand_ins)

    def check(self, exchange: Exchange, message: bytes, done: Callable[[Step | SaslAuthenticationError], None]) -> bool:
        """Run ``exchange.step(message)`` on the checker thread, then ``done`` with its result there;
        False (nothing run) when too many logins wait already."""
        with self._lock:
            if self._pending >= MAX_PENDING_LOGINS:
                return False
            self._pending += 1

        def run() -> None:
            try:
                self._reload_if_changed()
                outcome: Step | SaslAuthenticationError = exchange.step(message)
            except SaslAuthenticationError as exc:
                outcome = exc
            except Exception as exc:  # a bug must fail the login, not leave the connection waiting
                logger.exception("checking a %s login failed", exchange.mechanism)
                outcome = SaslAuthenticationError(f"{exchange.mechanism}: the broker could not check the login ({exc})")
            finally:
                with self._lock:
                    self._pending -= 1
            with self._lock:
                if isinstance(outcome, SaslAuthenticationError):
                    self.failures += 1
                elif outcome.user is not None:
                    self.successes += 1
            done(outcome)

        self._checker.submit(run)
        return True

    def _file_stamp(self) -> tuple[int, int] | None:
        try:
            stat = self.users.path.stat()
        except OSError:
            return None
        return stat.st_mtime_ns, stat.st_size

    def _reload_if_changed(self) -> None:
        """``kafkalog users`` replaced the file: the next login sees the change (a broken file keeps
        the users last read, and says so)."""
        stamp = self._file_stamp()
        if stamp == self._file_seen:
            return
        self._file_seen = stamp
        try:
            self.users.reload()
            logger.info("read the users file %s again: %d users", self.users.path, len(self.users.users()))
        except CredentialError as exc:
            logger.error("kept the users as they were: %s", exc)  # noqa: TRY400 (the message says it all)

    def close(self) -> None:
        self._checker.shutdown(wait=False, cancel_futures=True)


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a connection is closed without serving a request (logged by the network layer)."""

    reason: str


class Session:
    """One connection's login state and principal (see the module doc). Confined to the
    connection's network thread, but for the checker thread's completion of a DeferredResponse."""

    def __init__(
        self,
        authenticator: Authenticator | None,
        *,
        principal: str = ANONYMOUS,
        deadline: float,
        mechanisms: tuple[str, ...] | None = None,
    ) -> None:
        self._authenticator = authenticator
        self._mechanisms = mechanisms
        """What this connection's listener offers (default: the authenticator's)."""
        self.state = State.HANDSHAKE if authenticator is not None else State.AUTHENTICATED
        self.principal = principal if authenticator is None else ANONYMOUS
        self.deadline = deadline
        """When a connection still not through its TLS handshake or login is closed (time.monotonic)."""
        self._exchange: Exchange | None = None
        self.mechanism: str | None = None
        self.failure: str | None = None
        """Why the login failed, once it has (the network layer logs it and closes the connection)."""

    @property
    def authenticated(self) -> bool:
        return self.state is State.AUTHENTICATED

    @property
    def wants_raw_token(self) -> bool:
        """The next frame is a bare SASL token (after SaslHandshake v0), not a Kafka request."""
        return self.state is State.RAW_TOKENS

    def admits(self, api_key: int) -> Refusal | None:
        """None if a request of ``api_key`` may be served now; else why the connection closes."""
        if self.state is State.AUTHENTICATED:
            return None
        if api_key not in _BEFORE_LOGIN:
            return Refusal(f"sent {ApiKey(api_key).name if api_key in ApiKey._value2member_map_ else api_key} "
                           f"before authenticating ({self.state.value})")  # fmt: skip
        if api_key == ApiKey.SASL_AUTHENTICATE and self.state is not State.AUTHENTICATE:
            return Refusal(f"sent SaslAuthenticate while {self.state.value}")
        return None

    # ------------------------------------------------------------------ SaslHandshake

    def handshake(self, version: int, mechanism: str) -> dict[str, object]:
        """The answer to SaslHandshake: the mechanisms offered, and the exchange begun if the
        client's is one of them. On a listener without SASL: UNSUPPORTED_SASL_MECHANISM and none
        offered, which clients report as "the broker supports no SASL mechanism" (Kafka answers
        ILLEGAL_SASL_STATE, which says less)."""
        authenticator = self._authenticator
        if authenticator is None:
            return {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "mechanisms": []}
        offered = list(self._mechanisms or authenticator.mechanisms)
        if self.state is not State.HANDSHAKE:
            self._fail(f"a second SaslHandshake while {self.state.value}")
            return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": offered}
        if mechanism not in offered:
            self._fail(f"asked for mechanism {mechanism[:64]!r}; offered: {', '.join(offered)}")
            return {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "mechanisms": offered}
        self.mechanism = mechanism
        self._exchange = authenticator.exchange(mechanism)
        self.state = State.AUTHENTICATE if version >= 1 else State.RAW_TOKENS
        return {"error_code": ErrorCode.NONE, "mechanisms": offered}

    # ------------------------------------------------------------------ the exchange

    def authenticate(self, message: bytes) -> DeferredResponse | None:
        """Check the client's next message (a SaslAuthenticate's bytes, or a bare token): the answer
        comes from the checker thread as ``{"error_code", "error_message", "auth_bytes"}``. None:
        refused at once (too many logins waiting); ``failure`` says why."""
        exchange, authenticator = self._exchange, self._authenticator
        answer = DeferredResponse()
        if exchange is None or authenticator is None:  # no handshake (or no SASL on this listener)
            self._fail(f"SaslAuthenticate while {self.state.value}")
            answer.complete({"error_code": ErrorCode.ILLEGAL_SASL_STATE, "error_message": self.failure,
                             "auth_bytes": b""})  # fmt: skip
            return answer

        def done(outcome: Step | SaslAuthenticationError) -> None:
            if isinstance(outcome, SaslAuthenticationError):
                self._fail(str(outcome))
                answer.complete({"error_code": ErrorCode.SASL_AUTHENTICATION_FAILED, "error_message": str(outcome),
                                 "auth_bytes": b""})  # fmt: skip
                return
            if outcome.user is not None:
                self.state, self.principal = State.AUTHENTICATED, f"User:{outcome.user}"
                self._exchange = None
            answer.complete({"error_code": ErrorCode.NONE, "error_message": None, "auth_bytes": outcome.reply})

        if not authenticator.check(exchange, message, done):
            self._fail(f"more than {MAX_PENDING_LOGINS} logins are waiting to be checked")
            return None
        return answer

    def _fail(self, reason: str) -> None:
        self.state, self.failure = State.FAILED, reason

    def expired(self, now: float) -> bool:
        """Still not authenticated at its deadline."""
        return self.state is not State.AUTHENTICATED and now >= self.deadline


def handshake_deadline(timeout_ms: int) -> float:
    return time.monotonic() + timeout_ms / 1000
