"""Named failure points, for testing that a thread dying inside the mirror stops the whole process.

A test runs the mirror with ``KAFKALOG_FAIL_AT=<name>`` (or ``<name>@<n>``: the n-th time the point
is reached); there the calling thread raises InjectedFault, as an unexpected bug would. Without the
variable a point costs one comparison.
"""

from __future__ import annotations

import os
import threading

_target = os.environ.get("KAFKALOG_FAIL_AT") or None
_name, _, _count = (_target or "").partition("@")
_remaining = int(_count) if _count else 1
_lock = threading.Lock()


class InjectedFault(RuntimeError):
    """Raised at a failure point named by KAFKALOG_FAIL_AT (never in normal runs)."""


def fail_point(name: str) -> None:
    global _remaining
    if _target is None or name != _name:
        return
    with _lock:
        _remaining -= 1
        if _remaining == 0:
            raise InjectedFault(f"injected failure at {name} (KAFKALOG_FAIL_AT={_target})")
