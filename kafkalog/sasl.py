"""SASL's mechanisms as both sides compute them: SCRAM's key derivation (RFC 5802) and a client's
exchange, PLAIN's one message (RFC 4616).

Role: the arithmetic the broker's checker (kafkalog.server.security.scram, .credentials) and every kafkalog
client (kafkalog.client.connection) share; no sockets, no Kafka framing. A client's exchange checks
the server's signature before it counts a login as done, so a server that does not hold the
credential cannot pretend to.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Mapping

from kafkalog.errors import KafkalogError

PLAIN = "PLAIN"
SCRAM_HASHES: Mapping[str, str] = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
"""SCRAM mechanism → its hash (hashlib's name), the two Kafka supports."""
MECHANISMS = (PLAIN, *SCRAM_HASHES)


class SaslLoginError(KafkalogError):
    """A login that cannot go on: the server's answer is malformed or its signature does not verify
    (the message never quotes the password)."""


def salted_password(hash_name: str, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's Hi(password, salt, i): PBKDF2 with HMAC of ``hash_name``. The password's UTF-8
    bytes, as Kafka's own SCRAM code uses them (no SASLprep), so both accept the same logins."""
    return hashlib.pbkdf2_hmac(hash_name, password.encode("utf-8"), salt, iterations)


def client_and_server_keys(hash_name: str, salted: bytes) -> tuple[bytes, bytes]:
    """(ClientKey, ServerKey) of a salted password (RFC 5802 section 3)."""
    return hmac.digest(salted, b"Client Key", hash_name), hmac.digest(salted, b"Server Key", hash_name)


def plain_message(user: str, password: str) -> bytes:
    """PLAIN's only message: no authorization identity, the user, the password (NUL-separated)."""
    return f"\0{user}\0{password}".encode()


class ScramClient:
    """A client's SCRAM exchange: ``first()``, then ``final(server_first)``, then
    ``verify(server_final)`` (SaslLoginError unless the server proved it knows the credential)."""

    def __init__(self, mechanism: str, user: str, password: str, *, nonce: str | None = None) -> None:
        if mechanism not in SCRAM_HASHES:
            raise SaslLoginError(f"unknown SCRAM mechanism {mechanism!r} (known: {', '.join(SCRAM_HASHES)})")
        self.mechanism = mechanism
        self._hash = SCRAM_HASHES[mechanism]
        self._password = password
        self._nonce = nonce or secrets.token_urlsafe(24)
        self._bare = f"n={user.replace('=', '=3D').replace(',', '=2C')},r={self._nonce}"
        self._expected_signature: bytes | None = None

    def first(self) -> bytes:
        return f"n,,{self._bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        text = _text(server_first, self.mechanism)
        fields = _fields(text, self.mechanism)
        nonce, salt, iterations = fields.get("r", ""), fields.get("s"), fields.get("i", "")
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise SaslLoginError(f"{self.mechanism}: the server's nonce does not extend ours")
        if not iterations.isdigit() or not 4096 <= int(iterations) <= 1_000_000 or salt is None:
            raise SaslLoginError(f"{self.mechanism}: the server's salt or iteration count is not usable")
        try:
            salt_bytes = base64.b64decode(salt, validate=True)
        except (binascii.Error, ValueError):
            raise SaslLoginError(f"{self.mechanism}: the server's salt is not base64") from None
        salted = salted_password(self._hash, self._password, salt_bytes, int(iterations))
        client_key, server_key = client_and_server_keys(self._hash, salted)
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._bare},{text},{without_proof}".encode()
        signature = hmac.digest(hashlib.new(self._hash, client_key).digest(), auth_message, self._hash)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._expected_signature = hmac.digest(server_key, auth_message, self._hash)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        fields = _fields(_text(server_final, self.mechanism), self.mechanism)
        if "e" in fields:
            raise SaslLoginError(f"{self.mechanism}: the server refused: {fields['e'][:200]}")
        expected = self._expected_signature
        try:
            signature = base64.b64decode(fields.get("v", ""), validate=True)
        except (binascii.Error, ValueError):
            raise SaslLoginError(f"{self.mechanism}: the server's signature is not base64") from None
        if expected is None or not hmac.compare_digest(signature, expected):
            raise SaslLoginError(f"{self.mechanism}: the server's signature does not verify (not the real server?)")


def _text(message: bytes, mechanism: str) -> str:
    if len(message) > 4096:
        raise SaslLoginError(f"{mechanism}: the server sent {len(message)} bytes, more than a SCRAM message")
    try:
        return message.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslLoginError(f"{mechanism}: the server's message is not UTF-8") from None


def _fields(text: str, mechanism: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for part in text.split(","):
        key, eq, value = part.partition("=")
        if len(key) != 1 or not eq:
            raise SaslLoginError(f"{mechanism}: malformed attribute {part[:40]!r} from the server")
        fields.setdefault(key, value)
    return fields
