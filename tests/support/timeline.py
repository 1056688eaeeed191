"""Where a test run's time went: each test's start and end on its worker, and a summary by worker
and by unit of work (``tests.support.work_split``).

``make test`` sets ``TEST_TIMELINE`` (``.cache/test-timeline.jsonl``): every worker appends one JSON
line per test (its node id, worker, unit, start and end as wall-clock seconds, setup and teardown
included). ``python -m tests.support.timeline [FILE]`` prints when each worker started and ended, how
long it was busy, and the longest units: what ``work_split.LONG_UNITS`` should say and where a run's
minutes are. A line is one ``write`` of a file opened for appending, so workers do not interleave
within a line.
"""

from __future__ import annotations

import json
import os
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from tests.support.work_split import unit_of

ENV = "TEST_TIMELINE"
"""The environment variable naming the file to append to (unset: nothing is recorded)."""


def machine_idle() -> float:
    """Seconds the machine's processors have been idle since boot, summed over them (``/proc/stat``):
    the difference over a test says whether it kept the processors busy or waited."""
    with Path("/proc/stat").open() as stat:
        fields = stat.readline().split()
    return (int(fields[4]) + int(fields[5])) / os.sysconf("SC_CLK_TCK")  # idle + iowait


def record(path: str, nodeid: str, worker: str, started: float, ended: float, idle: float) -> None:
    """``idle``: processor-seconds the whole machine was idle while the test ran (both workers)."""
    line = json.dumps(
        {"test": nodeid, "worker": worker, "unit": unit_of(nodeid), "start": started, "end": ended, "idle": idle}
    )
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def summary(lines: list[dict[str, Any]], top: int = 25) -> str:
    """Per worker: first start, last end, busy seconds; then the ``top`` units by seconds."""
    if not lines:
        return "no tests recorded"
    origin = min(line["start"] for line in lines)
    out = []
    by_worker: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for line in lines:
        by_worker[line["worker"]].append(line)
    for worker, tests in sorted(by_worker.items()):
        first, last = min(t["start"] for t in tests), max(t["end"] for t in tests)
        busy = sum(t["end"] - t["start"] for t in tests)
        out.append(
            f"{worker}: {len(tests)} tests from {first - origin:7.1f} s to {last - origin:7.1f} s, busy {busy:7.1f} s"
        )
    units: dict[str, float] = defaultdict(float)
    idle: dict[str, float] = defaultdict(float)
    where: dict[str, str] = {}
    for line in lines:
        units[line["unit"]] += line["end"] - line["start"]
        idle[line["unit"]] += line.get("idle", 0.0)
        where[line["unit"]] = line["worker"]
    out.append(
        f"the {top} longest units (seconds, summed over their tests; processor-seconds the machine was idle "
        "meanwhile; the worker that ran them):"
    )
    for unit, seconds in sorted(units.items(), key=lambda item: -item[1])[:top]:
        out.append(f"{seconds:8.1f}  {idle[unit]:8.1f}  {where[unit]:5}  {unit}")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    path = Path(argv[0] if argv else ".cache/test-timeline.jsonl")
    lines = [json.loads(text) for text in path.read_text().splitlines() if text.strip()]
    sys.stdout.write(summary(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
