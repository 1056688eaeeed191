"""What strangers may cost the broker: the bytes held for connections not yet logged in, and the
log lines of refused logins.

Role: the network layer asks :class:`LoginBuffers` before it keeps more bytes of a connection that
has not logged in, and tells :class:`RefusalLog` of every refused login. Neither knows of sockets.

Invariants: the bytes of every connection not yet logged in, together, never exceed the budget (a
connection whose bytes would is closed by the caller, its bytes given back); a refused login is
logged at once the first time an address is seen in an interval, and the rest of that
interval's are counted into the next line for it, so a client retrying a wrong password cannot
flood the log; the table of what was seen is bounded.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable

logger = logging.getLogger("kafkalog.server.network")

ALWAYS_ADMITTED = 16 * 1024
"""Bytes a connection not yet logged in may hold whatever the budget says (a login's few frames)."""
REFUSALS_INTERVAL_S = 60.0
REASON_SHOWN = 200
"""Characters of a refusal's reason put in a log line (a client chooses the user name in it)."""
REFUSALS_REMEMBERED = 4096
"""(host, reason) pairs counted at once; the oldest is forgotten first (and its count logged)."""


class LoginBuffers:
    """A budget of bytes shared by every connection not yet logged in (all network threads)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._held = 0
        self._lock = threading.Lock()

    @property
    def held(self) -> int:
        return self._held

    def change(self, delta: int, *, holding: int) -> bool:
        """Hold ``delta`` more bytes (or give back, when negative) for a connection that will then
        hold ``holding``; False, holding nothing more, if that would go over the budget. A
        connection holding at most ``ALWAYS_ADMITTED`` is admitted past it (counted all the same):
        a login's frames are that small, so strangers filling the budget with large frames close
        only their own connections, never a client logging in."""
        with self._lock:
            if delta > 0 and self._held + delta > self.limit and holding > ALWAYS_ADMITTED:
                return False
            self._held += delta
            return True


class RefusalLog:
    """Refused logins as log lines, at most one per client address and interval (see module doc).
    Keyed by the address alone: the reason names the user and the mechanism, which the client
    chooses, so a key holding it would give a line per made-up name."""

    def __init__(self, interval_s: float = REFUSALS_INTERVAL_S, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval_s = interval_s
        self._clock = clock
        self._seen: collections.OrderedDict[str, list[float]] = collections.OrderedDict()
        self._lock = threading.Lock()

    def refused(self, peer: tuple[str, int], listener: str, reason: str) -> None:
        now = self._clock()
        host = peer[0]
        with self._lock:
            entry = self._seen.get(host)
            if entry is not None and now - entry[0] < self.interval_s:
                entry[1] += 1
                return
            unsaid = int(entry[1]) if entry is not None else 0
            self._seen[host] = [now, 0]
            self._seen.move_to_end(host)
            forgotten = self._seen.popitem(last=False) if len(self._seen) > REFUSALS_REMEMBERED else None
        shown = reason if len(reason) <= REASON_SHOWN else reason[:REASON_SHOWN] + "…"
        more = f" ({unsaid} more from {host} in the {self.interval_s:.0f} s before)" if unsaid else ""
        logger.info("login from %s:%d on listener %s refused: %s%s", *peer, listener, shown, more)
        if forgotten is not None and forgotten[1][1]:
            old_host, (_, count) = forgotten
            logger.info("%d more logins from %s were refused", int(count), old_host)
