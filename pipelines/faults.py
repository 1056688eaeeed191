"""Crash points for fault tests: the driver dies at a named step of the commit protocol.

The points are a family of kafkalog.faults (one grammar for every fault test: ``<point>`` or
``<point>@<n>``, the n-th time it is reached, from 1: ``publish.after_file@2`` dies after the second
file). Two ways to die, at the same points:

- ``PIPELINES_CRASH_AT=<target>`` in the driver's environment: the process exits at once
  (os._exit, no cleanup, like SIGKILL);
- ``simulated_crash(target)`` (the unit tier, in-process): ``Crash`` is raised there. Nothing cleans
  up after a Crash (code that cleans up on the way out re-raises it first, see ``is_crash``), and
  the leases the dying run held are left as a dead process leaves them.

Unarmed, a point costs one truth test.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import NoReturn

from kafkalog.faults import FaultPoints, FaultTarget

CRASH_EXIT_CODE = 137
POINTS = (
    "plan.after_store",
    "load.after_staging",
    "commit.before_manifest",
    "commit.after_manifest",
    "publish.after_file",
    "publish.after_files",
    "flow.outputs_shown",
    "replay.after_plan",
    "replay.before_commit",
    "tables.before_view",
)


class Crash(BaseException):
    """The driver's death at a crash point, simulated in-process (``simulated_crash``)."""


def is_crash(exc: BaseException) -> bool:
    """Whether ``exc`` is a simulated death, after which no cleanup may run."""
    return isinstance(exc, Crash)


def _die(target: FaultTarget) -> NoReturn:
    sys.stderr.write(f"PIPELINES_CRASH_AT={target}: the driver dies at {target}\n")
    sys.stderr.flush()
    os._exit(CRASH_EXIT_CODE)


def _raise(target: FaultTarget) -> NoReturn:
    raise Crash(f"simulated crash at {target}")


CRASH_POINTS = FaultPoints("PIPELINES_CRASH_AT", POINTS, _die)
crash_point = CRASH_POINTS.reach
"""The driver is at a crash point: it dies there if PIPELINES_CRASH_AT or a simulated crash says so."""


@contextlib.contextmanager
def simulated_crash(target: str) -> Iterator[None]:
    """Raise Crash at ``target`` (PIPELINES_CRASH_AT's grammar) while the body runs."""
    with CRASH_POINTS.armed(target, _raise):
        yield
