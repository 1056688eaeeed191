"""What a replay rewinds to: a time, offsets per split, or an earlier run, as the operator names it.

Role: the operator's words, parsed and checked once; the replay's plan (pipelines.replay.plan) turns
a target into an offset per split.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipelines.errors import ReplayError
from pipelines.executor.splits import SplitKey

SCHEMA_CHOICES = ("recorded", "latest")
"""What ``--schema`` takes: the reader schemas of a replay (RewindTarget.schemas)."""


@dataclass(frozen=True, slots=True)
class RewindTarget:
    """Where to rewind to: exactly one of a time (ms since the epoch), offsets per split, a run;
    and the reader schemas the replay reads schema'd values with."""

    time_ms: int | None = None
    offsets: Mapping[SplitKey, int] | None = None
    run_id: str | None = None
    schemas: str = "recorded"
    """``recorded``: the reader schemas the newest committed run recorded (the replaced runs');
    ``latest``: the subjects' latest, as the next load would read with (``--schema latest``)."""

    def __post_init__(self) -> None:
        given = sum(x is not None for x in (self.time_ms, self.offsets, self.run_id))
        if given != 1:
            raise ReplayError("give exactly one rewind target: a time, an offsets file or a run id")
        if self.schemas not in SCHEMA_CHOICES:
            raise ReplayError(f"--schema {self.schemas!r}: give one of {', '.join(SCHEMA_CHOICES)}")

    def describe(self) -> str:
        if self.time_ms is not None:
            return "time " + datetime.fromtimestamp(self.time_ms / 1000, UTC).isoformat(timespec="milliseconds")
        if self.run_id is not None:
            return f"run {self.run_id}"
        assert self.offsets is not None
        return "offsets " + ", ".join(f"{t}-{p}@{o}" for (t, p), o in sorted(self.offsets.items()))


def parse_time(text: str) -> int:
    """Milliseconds since the epoch from ISO 8601 (a time without an offset is UTC) or an integer
    of milliseconds."""
    value = text.strip()
    if value.lstrip("-").isdigit():
        return int(value)
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ReplayError(f"rewind time {text!r} is neither ISO 8601 nor milliseconds since the epoch") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def load_offsets(path: str) -> dict[SplitKey, int]:
    """A rewind offsets file: JSON, ``{"topic:partition": offset, ...}`` or
    ``[{"topic": t, "partition": p, "offset": o}, ...]`` (what ``pipelines offsets --json`` prints)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ReplayError(f"{path}: cannot read the rewind offsets: {exc}") from exc
    out: dict[SplitKey, int] = {}
    try:
        if isinstance(data, dict):
            for name, offset in data.items():
                topic, sep, partition = name.rpartition(":")
                if not sep or not topic:
                    raise ValueError(f"key {name!r} is not topic:partition")
                out[(topic, int(partition))] = _offset(offset)
        elif isinstance(data, list):
            for item in data:
                out[(str(item["topic"]), int(item["partition"]))] = _offset(item["offset"])
        else:
            raise TypeError("expected an object or a list")
    except (KeyError, TypeError, ValueError) as exc:
        raise ReplayError(f"{path}: not a rewind offsets file: {exc}") from exc
    if not out:
        raise ReplayError(f"{path}: names no split")
    return out


def _offset(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"offset {value!r} is not a non-negative integer")
    return value
