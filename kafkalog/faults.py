"""Fault points: named places where a test makes a process fail on purpose.

Role: one mechanism and one grammar for every fault test of the project. A family of points
(``FaultPoints``) has an environment variable that names where to fail, the names it knows, and
what failing means there: the log's crash points exit the process at once (KAFKALOG_CRASH_AT, like
a SIGKILL), the mirror's failure points raise in the calling thread (KAFKALOG_FAIL_AT, like a bug),
the pipelines' crash points kill the driver (PIPELINES_CRASH_AT), the pipelines' task faults
fail a Spark task (a job option). The code under test calls ``points.reach(name)`` where a fault
may happen; unarmed, that costs one truth test.

Grammar, the same for every family: ``<name>`` or ``<name>@<n>``, the n-th time the point is
reached, counting from 1 (the bare name is the first time). A point reached with a weight
(``reach(name, times=rows)``) counts that many at once. A name the family does not know is refused
when the target is read, with the closest known one: a misspelt target would otherwise never fire
and its test would pass for the wrong reason.

In-process tests arm a target for the length of a block instead (``armed``), with an action of
their own (raising rather than exiting, say).
"""

from __future__ import annotations

import contextlib
import difflib
import os
import threading
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass

from kafkalog.errors import KafkalogError


class FaultTargetError(KafkalogError):
    """A fault target that does not parse or names no known point."""


@dataclass(frozen=True, slots=True)
class FaultTarget:
    """Where to fail: a point's name and the time it is reached there (from 1)."""

    name: str
    nth: int = 1

    def __str__(self) -> str:
        return self.name if self.nth == 1 else f"{self.name}@{self.nth}"


def parse_target(text: str, known: Collection[str], where: str) -> FaultTarget:
    """``<name>`` or ``<name>@<n>``; ``where`` names the source of ``text`` in errors."""
    name, sep, count = text.strip().partition("@")
    if sep and (not count.isdigit() or int(count) < 1):
        raise FaultTargetError(f"{where}={text!r}: the count after @ must be a whole number from 1")
    if name not in known:
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise FaultTargetError(f"{where}={text!r}: no such point ({hint}known: {', '.join(sorted(known))})")
    return FaultTarget(name, int(count) if sep else 1)


@dataclass(slots=True)
class _Armed:
    target: FaultTarget
    act: Callable[[FaultTarget], None]
    remaining: int


class FaultPoints:
    """One family of fault points.

    Invariant: a target fires once, the n-th time its point is reached (then it is spent), by
    calling the action with the target; the action exits the process or raises.
    """

    def __init__(
        self, variable: str, known: Collection[str], act: Callable[[FaultTarget], None], *, target: str | None = None
    ) -> None:
        """``target``: armed from the start (default: the value of ``variable`` in the environment,
        read now: a child process is given it when it starts)."""
        self.variable = variable
        self.known = tuple(known)
        self._act = act
        self._armed: list[_Armed] = []
        self._lock = threading.Lock()
        text = os.environ.get(variable) if target is None else target
        if text:
            self._arm(parse_target(text, self.known, variable), act)

    def __bool__(self) -> bool:
        """Whether any target is armed."""
        return bool(self._armed)

    def _arm(self, target: FaultTarget, act: Callable[[FaultTarget], None]) -> _Armed:
        armed = _Armed(target, act, target.nth)
        with self._lock:
            self._armed.append(armed)
        return armed

    @contextlib.contextmanager
    def armed(self, target: str, act: Callable[[FaultTarget], None] | None = None) -> Iterator[FaultTarget]:
        """Arm ``target`` (the grammar above) while the block runs, failing with ``act`` (default:
        the family's action)."""
        armed = self._arm(parse_target(target, self.known, self.variable), act or self._act)
        try:
            yield armed.target
        finally:
            with self._lock:
                self._armed.remove(armed)

    def reach(self, name: str, times: int = 1) -> None:
        """The code is at point ``name`` (``times`` times at once): fail if a target says so."""
        if not self._armed:
            return
        fire = None
        with self._lock:
            for armed in self._armed:
                if armed.target.name == name and armed.remaining > 0:
                    armed.remaining -= times
                    if armed.remaining <= 0:
                        fire = armed
                        break
        if fire is not None:
            fire.act(fire.target)
