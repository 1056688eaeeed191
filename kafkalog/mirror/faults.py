"""The mirror's failure points, for testing that a thread dying inside the mirror stops the whole process.

A test runs the mirror with ``KAFKALOG_FAIL_AT=<name>`` (or ``<name>@<n>``: the n-th time the point
is reached; kafkalog.faults' grammar); there the calling thread raises InjectedFault, as an
unexpected bug would. Without the variable a point costs one truth test.
"""

from __future__ import annotations

from typing import NoReturn

from kafkalog.faults import FaultPoints, FaultTarget

POINTS = ("mirror.send",)


class InjectedFault(RuntimeError):
    """Raised at a failure point named by KAFKALOG_FAIL_AT (never in normal runs)."""


def _raise(target: FaultTarget) -> NoReturn:
    raise InjectedFault(f"injected failure at {target.name} (KAFKALOG_FAIL_AT={target})")


FAIL_POINTS = FaultPoints("KAFKALOG_FAIL_AT", POINTS, _raise)
fail_point = FAIL_POINTS.reach
"""Raise InjectedFault if KAFKALOG_FAIL_AT asked to fail here (this time)."""
