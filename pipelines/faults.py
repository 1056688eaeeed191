"""Crash points for fault tests: the driver dies (os._exit, no cleanup, like SIGKILL) at a named step.

Set ``PIPELINES_CRASH_AT=<point>`` (or ``<point>:<n>`` for a numbered point: ``n`` counts from 0,
so ``publish.after_file:1`` dies after the second file; the bare name is the first, ``:0``) in the
driver's environment. Points: plan.after_store, load.after_staging, commit.before_manifest,
commit.after_manifest, publish.after_file:<n>, publish.after_files, replay.after_plan,
replay.before_commit. Unset, this costs one dict lookup.
"""

from __future__ import annotations

import os
import sys

CRASH_EXIT_CODE = 137


def crash_point(name: str, number: int | None = None) -> None:
    wanted = os.environ.get("PIPELINES_CRASH_AT")
    if not wanted:
        return
    here = name if number is None else f"{name}:{number}"
    if wanted in (here, name) and (number is None or wanted == here or number == 0):
        sys.stderr.write(f"PIPELINES_CRASH_AT={wanted}: the driver dies at {here}\n")
        sys.stderr.flush()
        os._exit(CRASH_EXIT_CODE)
