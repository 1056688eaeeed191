"""A response given later: what a handler returns when the answer waits on other clients.

JoinGroup waits until every member of the group has rejoined, SyncGroup until the leader sent the
assignments. The handler returns a DeferredResponse; the network layer parks the connection (reads
none of its further requests, as Kafka mutes a channel with a request in flight) and sends the body
once some thread calls ``complete``. The first ``complete`` wins; later ones are ignored, so a
timer and a request racing to answer the same join cannot send two responses.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import Any


class DeferredResponse:
    """A response body that some thread will supply (see the module doc). Thread-safe."""

    deadline = math.inf
    """Never expires on its own: whoever created it must complete it (the group coordinator's
    timers do, at the latest after the group's rebalance timeout)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._body: dict[str, Any] | None = None
        self._listener: Callable[[], None] | None = None

    @property
    def body(self) -> dict[str, Any] | None:
        """The response body, or None while it waits."""
        return self._body

    def complete(self, body: dict[str, Any]) -> bool:
        """Supply the body; False (and nothing changes) if it was supplied already."""
        with self._lock:
            if self._body is not None:
                return False
            self._body = body
            listener = self._listener
        if listener is not None:
            listener()
        return True

    def on_complete(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` (from the completing thread) once the body is there; at once if it is."""
        with self._lock:
            self._listener = listener
            done = self._body is not None
        if done:
            listener()
