"""Generations after a replay: where readers find the current one, and deleting the older ones.

Role: ``pipelines location`` and ``pipelines gc``; run without Spark, through the tools' storage.
"""

from __future__ import annotations

from pipelines.config.pipeline import PipelineSpec
from pipelines.errors import ReplayError
from pipelines.layout import generation_dir
from pipelines.ledger.state import PipelineState
from pipelines.storage import storage_for


def current_locations(spec: PipelineSpec, state: PipelineState) -> dict[str, str]:
    """Where readers find the current generation: ``raw`` and each output by name."""
    generation = state.current_generation()
    out = {"raw": generation_dir(spec.raw.path, generation)}
    out.update({o.name: generation_dir(o.path, generation) for o in spec.outputs})
    return out


def garbage(spec: PipelineSpec, state: PipelineState) -> list[str]:
    """The directories of generations older than the current one (what ``pipelines gc`` deletes)."""
    current = state.current_generation()
    if current == 0:
        return []
    pending = state.pending_plan()
    if pending is not None and pending.kind == "replay":
        raise ReplayError(f"a replay ({pending.target}) is in progress: finish or abandon it before gc")
    out = []
    for root, storage in [
        (spec.raw.path, state.storage),
        *((o.path, storage_for(o.path, webhdfs_url=spec.webhdfs_url_for(o.path))) for o in spec.outputs),
    ]:
        base = root.rstrip("/")
        for entry in storage.list(base):  # generation 0: the root's own partitions (and raw quarantine)
            if entry.is_dir and (
                entry.name.startswith("dt=") or (root == spec.raw.path and entry.name == "_quarantine")
            ):
                out.append(entry.path)
        for entry in storage.list(f"{base}/_generations"):
            if entry.is_dir and entry.name.isdigit() and int(entry.name) < current:
                out.append(entry.path)
    return out


def collect_garbage(spec: PipelineSpec, state: PipelineState) -> list[str]:
    removed = []
    for path in garbage(spec, state):
        storage = (
            state.storage
            if path.startswith(spec.raw.path.rstrip("/"))
            else storage_for(path, webhdfs_url=spec.webhdfs_url_for(path))
        )
        storage.delete(path, recursive=True)
        removed.append(path)
    return removed
