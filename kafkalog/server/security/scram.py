"""The server's side of a SASL login: SCRAM-SHA-256/512 (RFC 5802, RFC 7677) and PLAIN (RFC 4616).

Role: given the bytes a client sends in SaslAuthenticate requests, answer with the bytes to send
back, and in the end name the authenticated user or refuse. It knows nothing of sockets or of the
Kafka protocol's framing (the handlers carry its bytes); credentials come from a lookup
(kafkalog.server.security.credentials).

A SCRAM exchange is two round trips::

    client-first   n,,n=<user>,r=<client nonce>          → server-first  r=<nonce>,s=<salt>,i=<iterations>
    client-final   c=biws,r=<nonce>,p=<proof>            → server-final  v=<server signature>

Invariants: every client message is untrusted (size-bounded, parsed strictly; a malformed one is
refused with the reason, never a traceback); a user that does not exist gets a stand-in
credential (``StandIns``: a salt of a real one's length, an iteration count real users have,
stable per name) and fails at the proof, like a wrong password, so neither the exchange nor its
timing tells which users exist; the refusal never quotes a password or a proof; secrets are
compared in constant time.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from kafkalog.errors import KafkalogError
from kafkalog.sasl import PLAIN
from kafkalog.server.security.credentials import DEFAULT_ITERATIONS, MECHANISMS, SALT_BYTES, ScramCredential, hash_name

SUPPORTED = (PLAIN, *MECHANISMS)
"""The SASL mechanisms a broker offers in its SaslHandshake answer."""

MAX_MESSAGE_BYTES = 4096
"""A client's SASL message is a few hundred bytes; anything larger is refused unread."""

Lookup = Callable[[str, str], ScramCredential | None]
"""(user, mechanism) → the user's credential for it, or None."""
Counts = Callable[[str], list[int]]
"""mechanism → the iteration counts the users' credentials have (kafkalog.server.security.credentials)."""


class StandIns:
    """Credentials for users that do not exist, indistinguishable from real ones by what a client
    sees: a salt of a real salt's length (``SALT_BYTES``, whatever the hash), an iteration count
    that real users of the mechanism have (one of them, chosen by the name: a second try agrees),
    or the default when none has one; the same salt for the same name while the secret is the
    same (kept beside the users file: across restarts, and on brokers that share the file); keys
    that match no password. PLAIN logins are checked against both mechanisms, real credentials
    or stand-ins, so that they cost the same PBKDF2 work whoever asks."""

    def __init__(self, secret: bytes, counts: Counts) -> None:
        self._secret = secret
        self._counts = counts

    def credential(self, user: str, mechanism: str) -> ScramCredential:
        """The stand-in of ``user`` for ``mechanism``: its iteration count is one real user's of
        that mechanism (drawn by the name, so counts weigh as often as users have them)."""
        name = hash_name(mechanism)
        pick = hmac.digest(self._secret, f"user:{mechanism}:{user}".encode(), "sha256")
        salt = hmac.digest(self._secret, f"salt:{mechanism}:{user}".encode(), "sha512")[:SALT_BYTES]
        counts = self._counts(mechanism) or [DEFAULT_ITERATIONS]
        iterations = counts[int.from_bytes(pick[:8], "big") % len(counts)]
        size = hashlib.new(name).digest_size
        return ScramCredential(mechanism, salt, os.urandom(size), os.urandom(size), iterations)


class SaslAuthenticationError(KafkalogError):
    """A login refused: the message says why in terms safe to show the client and to log (the
    user name, the mechanism, "invalid credentials" or what was malformed; never a secret)."""


@dataclass(frozen=True, slots=True)
class Step:
    """One answer of an exchange: the bytes for the client, and the user once authenticated."""

    reply: bytes
    user: str | None = None


class ScramServer:
    """One SCRAM exchange on one connection: call :meth:`step` with each client message."""

    def __init__(self, mechanism: str, lookup: Lookup, stand_ins: StandIns, *, nonce: str | None = None) -> None:
        hash_name(mechanism)  # CredentialError for an unknown mechanism
        self.mechanism = mechanism
        self.lookup = lookup
        self.stand_ins = stand_ins
        self._nonce = nonce  # a fixed server nonce: for RFC 7677's test vector only
        self._state: _Sent | None = None
        self._done = False

    def step(self, message: bytes) -> Step:
        """The answer to the client's next message; SaslAuthenticationError to refuse."""
        if self._done:
            raise SaslAuthenticationError(f"{self.mechanism}: the exchange is over")
        text = _text(message, self.mechanism)
        if self._state is None:
            return self._first(text)
        self._done = True
        return self._final(text, self._state)

    def _first(self, text: str) -> Step:
        header, comma, bare = _split_gs2(text, self.mechanism)
        fields = _fields(bare, self.mechanism)
        if "m" in fields:
            raise SaslAuthenticationError(f"{self.mechanism}: mandatory extensions are not supported")
        user, client_nonce = _unescape(fields.get("n"), self.mechanism), fields.get("r")
        if not client_nonce or not _printable(client_nonce):
            raise SaslAuthenticationError(f"{self.mechanism}: the client-first message has no valid nonce (r=)")
        credential = self.lookup(user, self.mechanism)
        known = credential is not None
        if credential is None:  # answered like a known user; the proof cannot match
            credential = self.stand_ins.credential(user, self.mechanism)
        nonce = client_nonce + (self._nonce or secrets.token_urlsafe(24))
        server_first = f"r={nonce},s={base64.b64encode(credential.salt).decode()},i={credential.iterations}"
        self._state = _Sent(header + comma, bare, server_first, nonce, user, credential, known)
        return Step(server_first.encode())

    def _final(self, text: str, sent: _Sent) -> Step:
        without_proof, _, proof_field = text.rpartition(",p=")
        fields = _fields(without_proof, self.mechanism)
        channel = base64.b64encode(sent.gs2_header.encode()).decode()
        if fields.get("c") != channel:
            raise SaslAuthenticationError(
                f"{self.mechanism}: channel binding data (c=) does not match the first message"
            )
        if fields.get("r") != sent.nonce:
            raise SaslAuthenticationError(f"{self.mechanism}: the nonce (r=) does not match the server's")
        try:
            proof = base64.b64decode(proof_field, validate=True)
        except (binascii.Error, ValueError):
            raise SaslAuthenticationError(f"{self.mechanism}: the proof (p=) is not base64") from None
        name = hash_name(self.mechanism)
        auth_message = f"{sent.client_first_bare},{sent.server_first},{without_proof}".encode()
        client_signature = hmac.digest(sent.credential.stored_key, auth_message, name)
        if len(proof) != len(client_signature):
            raise SaslAuthenticationError(f"{self.mechanism}: authentication failed for user {sent.user!r}")
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        matches = hmac.compare_digest(hashlib.new(name, client_key).digest(), sent.credential.stored_key)
        if not (matches and sent.known):
            raise SaslAuthenticationError(f"{self.mechanism}: authentication failed for user {sent.user!r}")
        server_signature = hmac.digest(sent.credential.server_key, auth_message, name)
        return Step(f"v={base64.b64encode(server_signature).decode()}".encode(), user=sent.user)


@dataclass(frozen=True, slots=True)
class _Sent:
    """What the first round trip fixed, for the second."""

    gs2_header: str
    client_first_bare: str
    server_first: str
    nonce: str
    user: str
    credential: ScramCredential
    known: bool


def plain_login(message: bytes, lookup: Lookup, stand_ins: StandIns) -> Step:
    """A PLAIN login (RFC 4616: ``authzid NUL authcid NUL passwd``), checked against the user's
    SCRAM credential (SCRAM-SHA-512 first, else SCRAM-SHA-256). An authorization identity other
    than the user is refused (acting as another user is not supported). A user that does not
    exist is checked against a stand-in credential: the same derivation, so the refusal takes as
    long as a wrong password's."""
    text = _text(message, PLAIN)
    parts = text.split("\0")
    if len(parts) != 3:
        raise SaslAuthenticationError(f"{PLAIN}: expected authzid NUL user NUL password")
    authzid, user, password = parts
    if not user or not password:
        raise SaslAuthenticationError(f"{PLAIN}: the user and the password must not be empty")
    if authzid and authzid != user:
        raise SaslAuthenticationError(f"{PLAIN}: user {user!r} may not act as {authzid!r}")
    # Both derivations, with the user's credentials or stand-ins, whoever asks: a login costs the
    # same whether the user exists and whichever mechanisms it has (the first one it has decides)
    matched = []
    for mechanism in ("SCRAM-SHA-512", "SCRAM-SHA-256"):
        credential = lookup(user, mechanism)
        checked = credential or stand_ins.credential(user, mechanism)
        matched.append((credential is not None, checked.matches_password(password)))
    if not next((matches for real, matches in matched if real), False):
        raise SaslAuthenticationError(f"{PLAIN}: authentication failed for user {user!r}")
    return Step(b"", user=user)


def _text(message: bytes, mechanism: str) -> str:
    if len(message) > MAX_MESSAGE_BYTES:
        raise SaslAuthenticationError(f"{mechanism}: a message of {len(message)} bytes is over {MAX_MESSAGE_BYTES}")
    try:
        return message.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslAuthenticationError(f"{mechanism}: the message is not UTF-8") from None


def _split_gs2(text: str, mechanism: str) -> tuple[str, str, str]:
    """(gs2 header without its last comma, ",", client-first-bare). Channel binding ("p=") is not
    offered, so only "n" and "y" flags are taken; an authzid other than none is refused."""
    flag, comma1, rest = text.partition(",")
    authzid, comma2, bare = rest.partition(",")
    if not comma1 or not comma2 or flag not in ("n", "y"):
        raise SaslAuthenticationError(f"{mechanism}: the client-first message does not start with a gs2 header (n,,)")
    if authzid:
        raise SaslAuthenticationError(f"{mechanism}: an authorization identity (a=) is not supported")
    return f"{flag},{authzid}", ",", bare


def _fields(text: str, mechanism: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for part in text.split(","):
        key, eq, value = part.partition("=")
        if len(key) != 1 or not eq or key in fields:
            raise SaslAuthenticationError(f"{mechanism}: malformed attribute {part[:40]!r}")
        fields[key] = value
    return fields


def _unescape(name: str | None, mechanism: str) -> str:
    """A SCRAM user name (``=2C`` is a comma, ``=3D`` an equals sign; any other ``=`` is malformed)."""
    if not name:
        raise SaslAuthenticationError(f"{mechanism}: the client-first message names no user (n=)")
    out, index = [], 0
    while index < len(name):
        if name[index] == "=":
            escape = name[index : index + 3]
            if escape not in ("=2C", "=3D"):
                raise SaslAuthenticationError(f"{mechanism}: malformed user name escape {escape!r}")
            out.append("," if escape == "=2C" else "=")
            index += 3
        else:
            out.append(name[index])
            index += 1
    return "".join(out)


def _printable(nonce: str) -> bool:
    return all(0x21 <= ord(c) <= 0x7E and c != "," for c in nonce)
