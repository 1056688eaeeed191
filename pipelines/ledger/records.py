"""The ledger's stored records: a run's plan and its manifest, as JSON beside the raw layer.

Role: the dataclasses written to ``_pipeline/plans/`` and ``_pipeline/manifests/`` (where:
pipelines.ledger.paths) and read back from them, nothing else: making a plan is the load's
(pipelines.ingest.plan), storing and committing them is the state's (pipelines.ledger.state).

Invariants: a stored record that is not one (not JSON, not an object, a key missing) is a
PlanError (a plan) or a CommitError (a manifest), never a KeyError or an AttributeError; a manifest
of another ``FORMAT_VERSION`` is refused. The fields' types are not checked: the ledger wrote them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from pipelines.errors import CommitError, PlanError
from pipelines.executor.splits import Split, SplitKey


@dataclass(frozen=True, slots=True)
class Plan:
    """What one run loads. ``seq`` is the number of the manifest it will commit."""

    pipeline: str
    seq: int
    run_id: str
    created_at: str
    spec_fingerprint: str
    splits: tuple[Split, ...] = field(default_factory=tuple)
    kind: str = "load"
    """load, or replay (pipelines.replay.run: the splits are the ranges reloaded into a new generation)."""
    generation: int = 0
    """The generation the run writes into (a replay: the one it creates)."""
    target: str = ""
    """A replay: what it rewinds to, as the operator gave it (for the history and the plan print)."""
    schemas: str = "recorded"
    """A replay of schema'd values: the reader schemas it reads with, ``recorded`` (those the
    newest committed run recorded, by id) or ``latest`` (as a load would)."""

    @property
    def total(self) -> int:
        return sum(s.size for s in self.splits)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "splits": [asdict(s) for s in self.splits]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Plan:
        try:
            splits = tuple(Split(**s) for s in data["splits"])
            return cls(
                pipeline=data["pipeline"],
                seq=int(data["seq"]),
                run_id=data["run_id"],
                created_at=data["created_at"],
                spec_fingerprint=data["spec_fingerprint"],
                splits=splits,
                kind=data.get("kind", "load"),
                generation=int(data.get("generation", 0)),
                target=data.get("target", ""),
                schemas=data.get("schemas", "recorded"),
            )
        except (KeyError, TypeError, ValueError) as exc:
            reason = f"key {exc.args[0]!r} is missing" if isinstance(exc, KeyError) and exc.args else repr(exc)
            raise PlanError(f"a stored plan is malformed: {reason}") from exc

    def dumps(self) -> bytes:
        return json.dumps(self.to_json(), indent=1, sort_keys=True).encode()


FORMAT_VERSION = 1


@dataclass(frozen=True, slots=True)
class OutputFile:
    """One committed file: where Spark staged it, where it is published, and what it holds."""

    staged: str
    """Relative to the raw root."""
    path: str
    """Relative to the raw root."""
    kind: str
    """data | quarantine"""
    topic: str
    partition: int
    rows: int
    bytes: int
    min_offset: int
    max_offset: int


@dataclass(frozen=True, slots=True)
class SplitResult:
    """What a run did to one split (the reconciliation's terms)."""

    topic: str
    partition: int
    start: int
    end: int
    rows: int
    quarantined: int
    filtered: int = 0
    min_event_time: str | None = None
    max_event_time: str | None = None
    lost_from: int | None = None
    lost_to: int | None = None
    aborted: int = 0
    """Offsets of records of aborted transactions, skipped reading committed (0 in manifests of
    runs before transactions were honoured)."""
    control: int = 0
    """Offsets of transaction markers (control records), never rows."""
    compacted: int = 0
    """Offsets the log cleaner of a compacted topic removed before the run read them (0 in
    manifests of runs before compacted topics were loaded).
    rows + quarantined + aborted + control + compacted = end - start."""


@dataclass(frozen=True, slots=True)
class Manifest:
    """A committed run."""

    pipeline: str
    seq: int
    run_id: str
    committed_at: str
    plan: Plan
    splits: tuple[SplitResult, ...]
    files: tuple[OutputFile, ...]
    attempt: str
    offsets: dict[str, int] = field(default_factory=dict)
    """Every split the pipeline ever loaded ("topic:partition") → the next offset to load (this run's
    ends over the previous manifest's), so the newest manifest alone holds all offsets."""
    format: int = FORMAT_VERSION
    stats: dict[str, Any] = field(default_factory=dict)
    kind: str = "load"
    """load, or replay: a replay's ``files`` are every raw file of the generation it created."""
    generation: int = 0
    """The generation of the raw layer and outputs this run's files belong to; the newest
    manifest's is the current one (see generation_dir)."""
    rewind: dict[str, int] = field(default_factory=dict)
    """A replay: "topic:partition" → the offset it reloaded from."""
    schemas: dict[str, Any] = field(default_factory=dict)
    """The reader schemas the run read values (and keys) into, when they came from a schema
    registry: ``{"values": {topic: {"subject", "version", "id"}}, "keys": {...}}`` (empty for a
    decoder without; pipelines.schemas.resolved)."""

    def end_offsets(self) -> dict[SplitKey, int]:
        out = {}
        for name, offset in self.offsets.items():
            topic, _, partition = name.rpartition(":")
            out[(topic, int(partition))] = offset
        return out

    def dumps(self) -> bytes:
        data = asdict(self)
        data["plan"] = self.plan.to_json()
        return json.dumps(data, indent=1, sort_keys=True).encode()

    @classmethod
    def loads(cls, raw: bytes, where: str) -> Manifest:
        try:
            data = json.loads(raw)
            if not isinstance(data, dict):
                raise CommitError(f"{where}: the manifest is unreadable: not a JSON object")
            if data.get("format") != FORMAT_VERSION:
                raise CommitError(f"{where}: manifest format {data.get('format')!r} is not {FORMAT_VERSION}")
            return cls(
                pipeline=data["pipeline"],
                seq=data["seq"],
                run_id=data["run_id"],
                committed_at=data["committed_at"],
                plan=Plan.from_json(data["plan"]),
                splits=tuple(SplitResult(**s) for s in data["splits"]),
                files=tuple(OutputFile(**f) for f in data["files"]),
                attempt=data["attempt"],
                offsets=data["offsets"],
                stats=data.get("stats", {}),
                kind=data.get("kind", "load"),
                generation=int(data.get("generation", 0)),
                rewind=data.get("rewind", {}),
                schemas=data.get("schemas", {}),
            )
        except (ValueError, KeyError, TypeError, PlanError) as exc:
            raise CommitError(f"{where}: the manifest is unreadable: {exc}") from exc


def topics_of(manifests: Iterable[Manifest]) -> set[str]:
    """The topics ``manifests``' runs loaded."""
    return {s.topic for m in manifests for s in m.splits}


def newest_schemas(manifests: Iterable[Manifest]) -> dict[str, Any]:
    """The reader schemas the newest of ``manifests`` recorded (empty for none)."""
    newest = max(manifests, key=lambda m: m.seq, default=None)
    return {} if newest is None else newest.schemas
