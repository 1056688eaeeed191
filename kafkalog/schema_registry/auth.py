"""HTTP basic authentication against a users file: one ``user:hash`` line per user.

A hash is ``pbkdf2-sha256$<iterations>$<salt, base64>$<key, base64>`` (``kafkalog registry-user``
writes the line; no password is ever stored or given in clear). Blank lines and lines starting with
``#`` are ignored. The file is read once, at start.

Checking a password costs a PBKDF2 run (a tenth of a second at the default iterations, by
design); a client logs in on every request, so a password once found right is remembered as its
SHA-256 digest for the user, and later requests compare digests. Every comparison is constant-time
(``hmac.compare_digest``), and an unknown user costs a PBKDF2 run too, so timing tells nothing of
which users exist.

What an attacker who holds no password can make a registry spend is bounded:
- a hash's iterations are at most ``MAX_ITERATIONS`` (a file asking more is refused at start);
- a wrong password is remembered too (its digest, per user, the last ``FAILURES_KEPT``), so
  sending it again costs a SHA-256, not a PBKDF2;
- every PBKDF2 run is paid from two budgets of iterations (:class:`LoginLimits`): the client
  address's and the registry's. A login that neither can pay is not checked at all: 429, until the
  budget refills. A user whose password was found right before never needs a PBKDF2 run again, so
  clients logged in keep working while someone guesses.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from kafkalog.schema_registry.errors import ApiError, RegistryConfigError

SCHEME: Final = "pbkdf2-sha256"
DEFAULT_ITERATIONS: Final = 200_000
MAX_ITERATIONS: Final = 1_000_000
"""The costliest hash a users file may hold (half a second of a core here); more is refused at start."""
FAILURES_KEPT: Final = 4096
_MAX_HEADER: Final = 4096
_MAX_CLIENTS: Final = 4096


@dataclass(frozen=True, slots=True)
class LoginLimits:
    """The PBKDF2 iterations logins may cost, per second, refilled continuously: each client
    address's budget and the registry's, each holding at most ``burst_s`` seconds of its rate."""

    per_client_per_s: int = 1_000_000
    total_per_s: int = 2_000_000
    burst_s: float = 2.0

    def __post_init__(self) -> None:
        if self.per_client_per_s < 1 or self.total_per_s < 1 or self.burst_s <= 0:
            raise RegistryConfigError("login limits: rates of at least 1 iteration a second, a burst over 0 s")


class LoginThrottled(ApiError):
    """A login not checked: its client, or every client together, spent the iterations they may."""

    def __init__(self) -> None:
        super().__init__(429, 429, "Too many login attempts: retry later")


class _Bucket:
    """A budget that refills at ``rate`` a second up to ``capacity`` (callers hold a lock)."""

    __slots__ = ("capacity", "level", "rate", "stamp")

    def __init__(self, rate: float, capacity: float, now: float) -> None:
        self.rate, self.capacity, self.level, self.stamp = rate, capacity, capacity, now

    def refill(self, now: float) -> float:
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now
        return self.level


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

    def __init__(self, users: Mapping[str, PasswordHash], limits: LoginLimits = LoginLimits()) -> None:
        self._users = dict(users)
        self.limits = limits
        self._known: dict[str, bytes] = {}
        """user -> SHA-256 of the password last found right."""
        self._failed: OrderedDict[tuple[str, bytes], None] = OrderedDict()
        """(user, SHA-256 of a password found wrong), the latest last."""
        self._lock = threading.Lock()
        # an unknown user costs what the costliest known one does: never less, or timing tells them apart
        self._dummy = hash_password("-", max((h.iterations for h in users.values()), default=DEFAULT_ITERATIONS))
        now = time.monotonic()
        self._total = _Bucket(limits.total_per_s, limits.total_per_s * limits.burst_s, now)
        self._clients: OrderedDict[str, _Bucket] = OrderedDict()

    def _pay(self, client: str, cost: int) -> None:
        """Take ``cost`` iterations from the client's budget and the registry's; LoginThrottled
        (nothing taken) when either cannot pay. Call under the lock."""
        now = time.monotonic()
        bucket = self._clients.pop(client, None)
        if bucket is None:
            bucket = _Bucket(self.limits.per_client_per_s, self.limits.per_client_per_s * self.limits.burst_s, now)
            while len(self._clients) >= _MAX_CLIENTS:  # the address seen longest ago goes (a fresh one is full)
                self._clients.popitem(last=False)
        self._clients[client] = bucket
        # a hash costlier than a whole budget is paid once the budget is full, never refused for good
        if bucket.refill(now) < min(cost, bucket.capacity) or self._total.refill(now) < min(cost, self._total.capacity):
            raise LoginThrottled()
        bucket.level -= cost
        self._total.level -= cost

    def user(self, header: str | None, client: str = "") -> str | None:
        """The user the header logs in, or None (missing, malformed, unknown user, wrong password);
        LoginThrottled when checking it would cost a PBKDF2 run that ``client`` (its address) or
        the registry has no budget left for."""
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
        stored = self._users.get(user)
        with self._lock:
            known = self._known.get(user)
            if known is not None and hmac.compare_digest(known, digest):
                return user
            if (user, digest) in self._failed:
                self._failed.move_to_end((user, digest))
                return None
            self._pay(client, (stored or self._dummy).iterations)
        if stored is None:
            self._dummy.matches(password)  # the same cost as a known user's
            right = False
        else:
            right = stored.matches(password)
        with self._lock:
            if right:
                self._known[user] = digest
            else:
                self._failed[(user, digest)] = None
                while len(self._failed) > FAILURES_KEPT:
                    self._failed.popitem(last=False)
        return user if right else None


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
