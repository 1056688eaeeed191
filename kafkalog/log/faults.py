"""The log's crash points, for testing what a process killed mid-operation leaves on disk.

A test runs a child process with ``KAFKALOG_CRASH_AT=<name>`` (or ``<name>@<n>``: the n-th time
that point is reached; kafkalog.faults' grammar); when the code reaches that point the process exits
at once with ``os._exit(CRASH_EXIT_CODE)``: no flush, no cleanup, no finally blocks, like a SIGKILL.
Points are named ``<operation>.<moment>``, e.g. ``segment.append.after_write`` or
``log.roll.after_seal``. Without the variable a crash point costs one truth test.
"""

from __future__ import annotations

import os
from typing import NoReturn

from kafkalog.faults import FaultPoints, FaultTarget

CRASH_EXIT_CODE = 86

ATOMIC_WRITES = (
    "checkpoint", "log.start", "marker", "producers", "offsets", "producer_ids", "topic_config", "users", "acls",
    "stand-ins", "transactions", "cleaner.swap", "cleaner.horizons",
)  # fmt: skip
"""The ``crash_prefix`` of every write_atomically caller: each has ``<prefix>.tmp_written``,
``.tmp_synced`` and ``.renamed`` (from ``offsets`` on they are the broker's files, written with the
log's writer; ``transactions`` is the transaction coordinator's store; ``cleaner.swap`` the log
cleaner's swap intent, ``cleaner.horizons`` its notes of when each pass ran)."""

POINTS = (
    "segment.append.after_write",
    "segment.append.after_index",
    "segment.delete.after_rename",
    "segment.delete.after_unlink",
    "log.flush.after_fsync",
    "log.roll.before_seal",
    "log.roll.after_seal",
    "log.roll.after_create",
    "log.retention.before_delete",
    "log.marker.after_append",
    "txnindex.append.after_write",
    "manager.close.before_marker",
    "txn.markers.after_append",
    "cleaner.clean.after_write",
    "cleaner.swap.after_swap_rename",
    "cleaner.swap.after_delete_rename",
    "cleaner.swap.after_delete",
    "cleaner.swap.after_final_rename",
    "cleaner.swap.before_intent_removed",
    *(f"{prefix}.{moment}" for prefix in ATOMIC_WRITES for moment in ("tmp_written", "tmp_synced", "renamed")),
)


def _die(target: FaultTarget) -> NoReturn:
    os._exit(CRASH_EXIT_CODE)


CRASH_POINTS = FaultPoints("KAFKALOG_CRASH_AT", POINTS, _die)
crash_point = CRASH_POINTS.reach
"""Exit the process immediately if KAFKALOG_CRASH_AT asked to crash here (this time)."""
