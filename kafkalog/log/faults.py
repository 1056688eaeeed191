"""Named crash points, for testing what a process killed mid-operation leaves on disk.

A test runs a child process with ``KAFKALOG_CRASH_AT=<name>`` (or ``<name>@<n>`` for the n-th time
that point is reached); when the code reaches that point the process exits at once with
``os._exit(CRASH_EXIT_CODE)``: no flush, no cleanup, no finally blocks, like a SIGKILL.
Points are named ``<operation>.<moment>``, e.g. ``segment.append.after_write`` or
``log.roll.after_seal``. Without the variable a crash point costs one comparison.
"""

from __future__ import annotations

import os

CRASH_EXIT_CODE = 86
_target = os.environ.get("KAFKALOG_CRASH_AT") or None
_name, _, _count = (_target or "").partition("@")
_remaining = int(_count) if _count else 1


def crash_point(name: str) -> None:
    """Exit the process immediately if the environment asked to crash here."""
    global _remaining
    if _target is None or name != _name:
        return
    _remaining -= 1
    if _remaining <= 0:
        os._exit(CRASH_EXIT_CODE)
