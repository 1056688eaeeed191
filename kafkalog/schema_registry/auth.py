"""HTTP basic authentication against a users file: one ``user:hash`` line per user.

A hash is ``pbkdf2-sha256$<iterations>$<salt, base64>$<key, base64>`` (``kafkalog registry-user``
writes the line; no password is ever stored or given in clear). Blank lines and lines starting with
``#`` are ignored. The file is read once, at start.

Checking a password costs a PBKDF2 run (tens of milliseconds by design); a client logs in on every
request, so a password once found right is remembered as its SHA-256 digest for the user, and later
requests compare digests. Every comparison is constant-time (``hmac.compare_digest``), and an
unknown user costs a PBKDF2 run too, so timing tells nothing of which users exist.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from kafkalog.schema_registry.errors import RegistryConfigError

SCHEME: Final = "pbkdf2-sha256"
DEFAULT_ITERATIONS: Final = 200_000
MAX_ITERATIONS: Final = 10_000_000
_MAX_HEADER: Final = 4096


@dataclass(frozen=True, slots=True)
class PasswordHash:
    iterations: int
    salt: bytes
    key: bytes

    def matches(self, password: str) -> bool:
        derived = hashlib.pbkdf2_hmac("sha256", password.encode(), self.salt, self.iterations, len(self.key))
        return hmac.compare_digest(derived, self.key)

    def __str__(self) -> str:
        salt, key = base64.b64encode(self.salt).decode(), base64.b64encode(self.key).decode()
        return f"{SCHEME}${self.iterations}${salt}${key}"

    @classmethod
    def of(cls, text: str) -> PasswordHash:
        """A hash as the file writes it; ValueError naming what is wrong."""
        parts = text.strip().split("$")
        if len(parts) != 4 or parts[0] != SCHEME:
            raise ValueError(f"expected {SCHEME}$<iterations>$<salt>$<key>")
        if not parts[1].isdigit() or not 1 <= int(parts[1]) <= MAX_ITERATIONS:
            raise ValueError(f"iterations must be 1 to {MAX_ITERATIONS}")
        try:
            salt, key = base64.b64decode(parts[2], validate=True), base64.b64decode(parts[3], validate=True)
        except binascii.Error:
            raise ValueError("salt and key must be base64") from None
        if len(salt) < 8 or len(key) < 16:
            raise ValueError("salt (8 bytes at least) or key (16 bytes at least) too short")
        return cls(int(parts[1]), salt, key)


def hash_password(password: str, iterations: int = DEFAULT_ITERATIONS) -> PasswordHash:
    salt = os.urandom(16)
    return PasswordHash(iterations, salt, hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations, 32))


def read_users(path: Path) -> dict[str, PasswordHash]:
    """The users of the file; RegistryConfigError naming the file and line that is wrong."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise RegistryConfigError(f"users_file: cannot read {path}: {e}") from None
    users: dict[str, PasswordHash] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        user, sep, hashed = line.partition(":")
        user = user.strip()
        if not sep or not user:
            raise RegistryConfigError(f"users_file: {path}:{number}: expected user:hash")
        if user in users:
            raise RegistryConfigError(f"users_file: {path}:{number}: user {user!r} given twice")
        try:
            users[user] = PasswordHash.of(hashed)
        except ValueError as e:
            raise RegistryConfigError(f"users_file: {path}:{number}: {e}") from None
    if not users:
        raise RegistryConfigError(f"users_file: {path} lists no user")
    return users


class BasicAuth:
    """Checks ``Authorization: Basic ...`` headers against the users. Thread-safe."""

    def __init__(self, users: Mapping[str, PasswordHash]) -> None:
        self._users = dict(users)
        self._known: dict[str, bytes] = {}
        """user -> SHA-256 of the password last found right."""
        self._lock = threading.Lock()
        # an unknown user costs what the costliest known one does: never less, or timing tells them apart
        self._dummy = hash_password("-", max((h.iterations for h in users.values()), default=DEFAULT_ITERATIONS))

    def user(self, header: str | None) -> str | None:
        """The user the header logs in, or None (missing, malformed, unknown user, wrong password)."""
        if header is None or len(header) > _MAX_HEADER:
            return None
        scheme, _, encoded = header.strip().partition(" ")
        if scheme.lower() != "basic":
            return None
        try:
            decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
        except ValueError:  # binascii.Error, UnicodeDecodeError, and a header that is not ASCII
            return None
        user, sep, password = decoded.partition(":")
        if not sep:
            return None
        digest = hashlib.sha256(password.encode()).digest()
        with self._lock:
            known = self._known.get(user)
        if known is not None and hmac.compare_digest(known, digest):
            return user
        stored = self._users.get(user)
        if stored is None:
            self._dummy.matches(password)  # the same cost as a known user's
            return None
        if not stored.matches(password):
            return None
        with self._lock:
            self._known[user] = digest
        return user


def set_user(path: Path, user: str, hashed: PasswordHash) -> bool:
    """Write ``user:hash`` into the users file (made if missing; readable by its owner only),
    replacing the user's line if there is one; True if it was there. Written whole (a temporary
    file renamed over it), so a registry never reads half a file."""
    if not user or ":" in user or user != user.strip() or any(ord(c) < 0x20 for c in user):
        raise RegistryConfigError(f"user {user!r}: not empty, no ':', no surrounding spaces or control characters")
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    found = False
    out = []
    for line in lines:
        if line.partition(":")[0].strip() == user and not line.lstrip().startswith("#"):
            if not found:
                out.append(f"{user}:{hashed}")
            found = True
        else:
            out.append(line)
    if not found:
        out.append(f"{user}:{hashed}")
    # a fresh file of a name nobody can guess (O_EXCL: never a symlink or a leftover planted there),
    # readable by its owner only whatever the umask, renamed over the file in the same directory
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as f:
            os.fchmod(f.fileno(), 0o600)
            f.write("\n".join(out) + "\n")
            f.flush()
            os.fsync(f.fileno())
        Path(temporary).replace(path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return found
