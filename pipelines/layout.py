"""Where things live under a dataset's root: the one description of the data's paths.

Role: pure functions of names, shared by the load, the flow, replay and the reports, so that every
part of the product finds a generation or a partition at the same place. Nothing here touches
storage. The pipeline's own files under ``<raw>/_pipeline/`` are the ledger's (pipelines.ledger.paths).

    <root>/dt=YYYY-MM-DD/hour=HH/…          generation 0 (what runs write until the first replay)
    <root>/_generations/<g>/dt=…/hour=…/…   generation g (a replay's)
"""

from __future__ import annotations

from dataclasses import dataclass

Partition = tuple[str, ...]
"""("2026-01-01", "05") for dt/hour, ("2026-01-01",) for dt."""


@dataclass(frozen=True, slots=True)
class Scope:
    """The raw partitions a flow run reads: (dt, hour) pairs, or whole days."""

    seq: int
    by_day: bool
    partitions: tuple[Partition, ...]

    def covers(self, dt: str, hour: str) -> bool:
        return ((dt,) if self.by_day else (dt, hour)) in self.partitions

    def holds(self, partition: Partition) -> bool:
        """Whether an output partition ((dt,) or (dt, hour)) was recomputed by this scope."""
        return (partition[0],) in self.partitions if self.by_day else partition in self.partitions


def partition_path(columns: tuple[str, ...], partition: Partition) -> str:
    """``dt=X/hour=Y`` of an output partition."""
    return "/".join(f"{k}={v}" for k, v in zip(columns, partition, strict=True))


def partition_of(path: str) -> tuple[str, str] | None:
    """(dt, hour) of a raw file path ``dt=X/hour=Y/name``, or None for files outside (quarantine)."""
    parts = dict(p.split("=", 1) for p in path.split("/")[:-1] if p.startswith(("dt=", "hour=")))
    if "dt" in parts and "hour" in parts:
        return parts["dt"], parts["hour"]
    return None


def partition_of_dir(relative: str) -> Partition | None:
    """("dt", "hour") values of a staged file ``dt=X/hour=Y/name`` (or ``dt=X/name``)."""
    values = [p.split("=", 1)[1] for p in relative.split("/")[:-1] if p.startswith(("dt=", "hour="))]
    return tuple(values) if values else None


def generation_dir(root: str, generation: int) -> str:
    """Where generation ``generation`` of a dataset (the raw layer, an output) rooted at ``root``
    lives: the root itself for generation 0 (what runs write until the first replay), else
    ``<root>/_generations/<g>`` (Spark, Hive and pyarrow skip ``_`` directories, so readers of the
    root keep seeing generation 0, whole)."""
    root = root.rstrip("/")
    return root if generation == 0 else f"{root}/{generation_prefix(generation).rstrip('/')}"


def generation_prefix(generation: int) -> str:
    """The relative directory of a generation under its dataset's root ("" for generation 0)."""
    return "" if generation == 0 else f"_generations/{generation:06d}/"
