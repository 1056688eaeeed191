"""Crash points for fault tests: the driver dies at a named step of the commit protocol.

Two ways to die, with the same points:

- ``PIPELINES_CRASH_AT=<point>`` in the driver's environment (or ``<point>:<n>`` for a numbered
  point: ``n`` counts from 0, so ``publish.after_file:1`` dies after the second file; the bare name
  is the first, ``:0``): the process exits at once (os._exit, no cleanup, like SIGKILL);
- ``simulated_crash(point)`` (the unit tier, in-process): ``Crash`` is raised there. Nothing cleans
  up after a Crash (code that cleans up on the way out re-raises it first, see ``is_crash``), and
  the leases the dying run held are left as a dead process leaves them.

Points: plan.after_store, load.after_staging, commit.before_manifest, commit.after_manifest,
publish.after_file:<n>, publish.after_files, replay.after_plan, replay.before_commit. Unset, a point
costs one dict lookup.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

CRASH_EXIT_CODE = 137
POINTS = (
    "plan.after_store",
    "load.after_staging",
    "commit.before_manifest",
    "commit.after_manifest",
    "publish.after_file",
    "publish.after_files",
    "replay.after_plan",
    "replay.before_commit",
)

_simulated: list[str] = []


class Crash(BaseException):
    """The driver's death at a crash point, simulated in-process (``simulated_crash``)."""


def is_crash(exc: BaseException) -> bool:
    """Whether ``exc`` is a simulated death, after which no cleanup may run."""
    return isinstance(exc, Crash)


@contextlib.contextmanager
def simulated_crash(point: str) -> Iterator[None]:
    """Raise Crash at ``point`` (same grammar as PIPELINES_CRASH_AT) while the body runs."""
    if point.partition(":")[0] not in POINTS:
        raise ValueError(f"unknown crash point {point!r} (points: {', '.join(POINTS)})")
    _simulated.append(point)
    try:
        yield
    finally:
        _simulated.remove(point)


def _wanted(wanted: str, name: str, here: str, number: int | None) -> bool:
    return wanted in (here, name) and (number is None or wanted == here or number == 0)


def crash_point(name: str, number: int | None = None) -> None:
    here = name if number is None else f"{name}:{number}"
    for wanted in _simulated:
        if _wanted(wanted, name, here, number):
            raise Crash(f"simulated crash at {here}")
    configured = os.environ.get("PIPELINES_CRASH_AT")
    if configured and _wanted(configured, name, here, number):
        sys.stderr.write(f"PIPELINES_CRASH_AT={configured}: the driver dies at {here}\n")
        sys.stderr.flush()
        os._exit(CRASH_EXIT_CODE)
