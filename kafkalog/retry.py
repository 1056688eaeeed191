"""Waiting between the attempts of an operation retried until it succeeds or its budget is spent.

Role: the one retry policy of the project (clients waiting for a leader or a coordinator, ZooKeeper
recipes waiting for a stale node to expire, a loader task waiting for a broker that is down). Each
caller keeps its own loop, because what counts as transient and what to do between attempts
(invalidate metadata, find a coordinator again) is its own; ``Backoff`` keeps the clock:

    backoff = Backoff(budget_s=30)
    while True:
        try:
            return attempt()
        except Transient as exc:
            if not backoff.wait():
                raise GaveUp(f"... for {backoff.elapsed:.0f} s: {exc}") from exc

Pure Python with no dependencies (it is shipped to Spark executors with the loader, which have
nothing installed); kazoo's KazooRetry covers only ZooKeeper's own connection errors.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(slots=True)
class Backoff:
    """The waits of one operation: ``first`` seconds, each next one ``factor`` times longer up to
    ``cap``; no further attempt once ``budget_s`` seconds have passed since it was made (None: no
    limit) or ``attempts`` attempts were made (None: no limit).

    Invariant: ``wait`` never sleeps past the budget, and answers False without sleeping once the
    budget or the attempts are spent.
    """

    first: float = 0.1
    cap: float = 2.0
    factor: float = 2.0
    budget_s: float | None = None
    attempts: int | None = None
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    started: float = field(init=False)
    made: int = field(init=False, default=1)
    """Attempts made so far (the first is made before any wait)."""
    _delay: float = field(init=False)

    def __post_init__(self) -> None:
        if self.first < 0 or self.cap < self.first or self.factor < 1:
            raise ValueError(
                f"backoff: need 0 <= first <= cap and factor >= 1, got {self.first}, {self.cap}, {self.factor}"
            )
        self.started = self.clock()
        self._delay = self.first

    @property
    def elapsed(self) -> float:
        """Seconds since the operation's first attempt."""
        return self.clock() - self.started

    @property
    def spent(self) -> bool:
        """Whether no further attempt is allowed."""
        out_of_time = self.budget_s is not None and self.elapsed >= self.budget_s
        return out_of_time or (self.attempts is not None and self.made >= self.attempts)

    def wait(self) -> bool:
        """Sleep before the next attempt and count it; False (no sleep) when none is allowed."""
        if self.spent:
            return False
        delay = self._delay
        if self.budget_s is not None:
            delay = min(delay, max(self.budget_s - self.elapsed, 0.0))
        self.sleep(delay)
        self._delay = min(self._delay * self.factor, self.cap)
        self.made += 1
        return True
