"""Users and their secrets: SCRAM credentials (RFC 5802, RFC 7677), kept in a file, never the password.

Role: what SASL authentication checks a client against. A user has one credential per SCRAM
mechanism (SCRAM-SHA-256, SCRAM-SHA-512): a random salt, an iteration count and two keys derived
from the password, exactly as Kafka stores them (``salt``, ``stored_key``, ``server_key``,
``iterations``). The same credential checks a PLAIN login (the password is run through the same
derivation and compared with the stored key), so no password is stored anywhere, in any form a
stolen file gives back without a brute force.

Layout of the users file (JSON, replaced atomically; base64 for the byte strings)::

    {"format": 1, "users": {"alice": {"SCRAM-SHA-256": {"salt": "…", "stored_key": "…",
                                                       "server_key": "…", "iterations": 4096}}}}

Invariants: the file is read whole and checked (unknown mechanism, bad base64, an iteration count
out of Kafka's bounds, a key of the wrong length: CredentialError naming the file and the user); a
comparison of secrets takes the same time whatever differs (``hmac.compare_digest``); a user that
does not exist is answered like one whose password is wrong (``ScramServer`` in
kafkalog.server.security.scram derives a stand-in credential for it).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import logging
import os
import secrets
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafkalog import sasl
from kafkalog.errors import KafkalogError
from kafkalog.log.files import write_atomically
from kafkalog.sasl import SCRAM_HASHES

FORMAT = 1

MECHANISMS: Mapping[str, str] = SCRAM_HASHES
"""SCRAM mechanism → its hash (hashlib's name), the two Kafka supports."""

logger = logging.getLogger(__name__)

MIN_ITERATIONS = 4096
"""Kafka's bounds for a SCRAM credential's iteration count (RFC 7677 asks for at least 4096)."""
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096
SALT_BYTES = 32


class CredentialError(KafkalogError):
    """A users file or a credential that cannot be used: the message names the file, the user and
    what is wrong (never a secret)."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What the broker keeps of one password for one mechanism (RFC 5802 section 3)."""

    mechanism: str
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_json(self) -> dict[str, Any]:
        return {
            "salt": _b64(self.salt),
            "stored_key": _b64(self.stored_key),
            "server_key": _b64(self.server_key),
            "iterations": self.iterations,
        }

    def matches_password(self, password: str) -> bool:
        """Whether ``password`` derives this credential's stored key (a PLAIN login's check)."""
        derived = derive(self.mechanism, password, self.salt, self.iterations)
        return hmac.compare_digest(derived.stored_key, self.stored_key)


def hash_name(mechanism: str) -> str:
    """hashlib's name of ``mechanism``'s hash; CredentialError for a mechanism we do not have."""
    try:
        return MECHANISMS[mechanism]
    except KeyError:
        raise CredentialError(f"unknown SCRAM mechanism {mechanism!r} (known: {', '.join(MECHANISMS)})") from None


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's Hi(password, salt, i) with ``mechanism``'s hash (kafkalog.sasl.salted_password)."""
    return sasl.salted_password(hash_name(mechanism), password, salt, iterations)


def client_and_server_keys(mechanism: str, salted: bytes) -> tuple[bytes, bytes]:
    """(ClientKey, ServerKey) of a salted password (RFC 5802 section 3)."""
    return sasl.client_and_server_keys(hash_name(mechanism), salted)


def derive(mechanism: str, password: str, salt: bytes, iterations: int) -> ScramCredential:
    """The credential of ``password`` with this salt and iteration count."""
    _check_iterations(iterations, mechanism)
    client_key, server_key = client_and_server_keys(mechanism, salted_password(mechanism, password, salt, iterations))
    stored_key = hashlib.new(hash_name(mechanism), client_key).digest()
    return ScramCredential(mechanism, salt, stored_key, server_key, iterations)


def new_credential(mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS) -> ScramCredential:
    """A credential for ``password`` with a fresh random salt."""
    if not password:
        raise CredentialError("a password must not be empty")
    return derive(mechanism, password, os.urandom(SALT_BYTES), iterations)


def _check_iterations(iterations: int, mechanism: str) -> None:
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise CredentialError(
            f"{mechanism}: {iterations} iterations is outside {MIN_ITERATIONS}..{MAX_ITERATIONS} (Kafka's bounds)"
        )


class UsersFile:
    """The users and their credentials, in one JSON file (see the module doc). Thread-safe: the
    broker's network threads read while ``kafkalog users`` may have replaced the file, so every
    read of a credential sees the file as it was at the last ``reload``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._users: dict[str, dict[str, ScramCredential]] = {}
        self._counts: dict[str, list[int]] = {}
        self.reload()

    def reload(self) -> None:
        """Read the file again (an absent file is no users); CredentialError if it is not usable."""
        users = _read(self.path)
        with self._lock:
            self._set_users(users)

    def _set_users(self, users: dict[str, dict[str, ScramCredential]]) -> None:
        """Take ``users`` (the lock held), with each mechanism's iteration counts worked out once:
        a login's stand-in asks for them, and must not take longer than a real user's lookup."""
        self._users = users
        self._counts = {
            mechanism: sorted(found[mechanism].iterations for found in users.values() if mechanism in found)
            for mechanism in MECHANISMS
        }

    def credential(self, user: str, mechanism: str) -> ScramCredential | None:
        with self._lock:
            return self._users.get(user, {}).get(mechanism)

    def iteration_counts(self, mechanism: str) -> list[int]:
        """The iteration count of each user's ``mechanism`` credential, sorted (a count as often as
        users have it). Worked out when the file is read: as fast for 20,000 users as for one."""
        with self._lock:
            return self._counts.get(mechanism, [])

    def users(self) -> dict[str, list[str]]:
        """Every user and the mechanisms it has a credential for, sorted."""
        with self._lock:
            return {user: sorted(found) for user, found in sorted(self._users.items())}

    def set_password(
        self, user: str, password: str, mechanisms: list[str], iterations: int = DEFAULT_ITERATIONS
    ) -> None:
        """Add ``user`` or change its password, with a new salt per mechanism, and write the file."""
        _check_user(user)
        if not mechanisms:
            raise CredentialError("at least one SCRAM mechanism is needed")
        made = {mechanism: new_credential(mechanism, password, iterations) for mechanism in mechanisms}
        with self._lock:
            users = {name: dict(found) for name, found in self._users.items()}
            users[user] = made
            self._write(users)

    def remove(self, user: str) -> bool:
        """Remove ``user`` (False if there was none) and write the file."""
        with self._lock:
            if user not in self._users:
                return False
            users = {name: found for name, found in self._users.items() if name != user}
            self._write(users)
            return True

    def _write(self, users: dict[str, dict[str, ScramCredential]]) -> None:
        document = {
            "format": FORMAT,
            "users": {
                name: {mechanism: credential.to_json() for mechanism, credential in sorted(found.items())}
                for name, found in sorted(users.items())
            },
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(self.path, (json.dumps(document, indent=1) + "\n").encode(), crash_prefix="users")
        self.path.chmod(0o600)  # salted keys still invite a brute force: the broker's user alone reads them
        self._set_users(users)
        stand_in_secret(self.path)  # made by whoever may write here (the broker may not)


def _check_user(user: str) -> None:
    if not user or len(user) > 255 or any(ord(c) < 0x20 for c in user):
        raise CredentialError(f"a user name must be 1 to 255 printable characters, not {user!r}")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _read(path: Path) -> dict[str, dict[str, ScramCredential]]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise CredentialError(f"cannot read the users file {path}: {exc}") from exc
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise CredentialError(f"{path}: not JSON: {exc}") from exc
    if (
        not isinstance(document, dict)
        or document.get("format") != FORMAT
        or not isinstance(document.get("users"), dict)
    ):
        raise CredentialError(f"{path}: not a users file of format {FORMAT}")
    users: dict[str, dict[str, ScramCredential]] = {}
    for user, found in document["users"].items():
        if not isinstance(found, dict):
            raise CredentialError(f"{path}: user {user!r}: expected an object of mechanisms")
        users[user] = {mechanism: _credential(path, user, mechanism, fields) for mechanism, fields in found.items()}
    return users


def _credential(path: Path, user: str, mechanism: str, fields: Any) -> ScramCredential:
    where = f"{path}: user {user!r}, {mechanism}"
    try:
        size = hashlib.new(hash_name(mechanism)).digest_size
        salt, stored, server = (
            base64.b64decode(fields[key], validate=True) for key in ("salt", "stored_key", "server_key")
        )
        iterations = fields["iterations"]
    except CredentialError as exc:
        raise CredentialError(f"{where}: {exc}") from None
    except (KeyError, TypeError, binascii.Error) as exc:
        raise CredentialError(
            f"{where}: salt, stored_key, server_key (base64) and iterations are needed ({exc})"
        ) from None
    if not isinstance(iterations, int) or isinstance(iterations, bool):
        raise CredentialError(f"{where}: iterations must be a whole number")
    _check_iterations(iterations, where)
    if len(stored) != size or len(server) != size or not salt:
        raise CredentialError(f"{where}: keys of {size} bytes and a salt are needed")
    return ScramCredential(mechanism, salt, stored, server, iterations)


STAND_IN_SECRET_SUFFIX = ".stand-ins"


def stand_in_secret(users_path: Path) -> bytes:
    """The secret unknown users' stand-in salts are derived from: 32 random bytes in
    ``<users file>.stand-ins`` (mode 0600), made once; so a name's stand-in is the same after a
    restart and on every broker sharing the users file, as a real user's salt is. Where the file
    cannot be kept (a read-only directory), one for this run, and a warning: a name's stand-in
    salt then changes at each restart, which tells a watcher across restarts that it is made up."""
    path = users_path.with_name(users_path.name + STAND_IN_SECRET_SUFFIX)
    try:
        secret = path.read_bytes()
        if len(secret) == 32:
            return secret
        logger.warning("%s is not a 32-byte secret: making a new one", path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        logger.warning("cannot read %s (%s): unknown users' stand-ins change at each restart", path, exc)
        return secrets.token_bytes(32)
    secret = secrets.token_bytes(32)
    try:
        write_atomically(path, secret, crash_prefix="stand-ins")
        path.chmod(0o600)
    except OSError as exc:
        logger.warning("cannot keep %s (%s): unknown users' stand-ins change at each restart", path, exc)
    return path.read_bytes() if path.exists() and len(path.read_bytes()) == 32 else secret
