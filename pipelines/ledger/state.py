"""The pipeline's state beside its output: plans, staged attempts, committed manifests.

Role: the commit protocol over the ledger's files (where each lives: pipelines.ledger.paths; what
they hold: pipelines.ledger.records). Published data sits beside them, under the raw layer's root::

    dt=YYYY-MM-DD/hour=HH/*.parquet       published data
    _quarantine/seq=<seq>/*.parquet       published bad records (raw bytes + reason)

Invariants:
- ``manifests/<seq>`` is created only if absent (no-overwrite create: temp file + no-replace
  rename), so of two runs that planned the same seq exactly one commits.
- A manifest lists every file of its run by staged and final path. Publishing moves them (never
  onto an existing path). A crash during publishing leaves a state ``roll_forward`` completes; it is
  idempotent and runs at the start of every run and status command.
- Offsets are read only from committed manifests; files of uncommitted attempts are never visible
  outside ``_pipeline/staging`` and are removed by the next run.
"""

from __future__ import annotations

import contextlib
import json
import logging
from dataclasses import dataclass
from typing import Any

from pipelines import faults
from pipelines.config.pipeline import PipelineSpec
from pipelines.errors import AlreadyExistsError, CommitError, ConcurrentRunError, PlanError, StorageError
from pipelines.executor.splits import SplitKey
from pipelines.ledger import paths
from pipelines.ledger.lease import Leases
from pipelines.ledger.records import Manifest, Plan
from pipelines.storage import Storage, storage_for

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Recovered:
    """What a run starts from, read once after recovery (``PipelineState.recovered``), so that
    planning needs nothing more of the state."""

    latest: Manifest | None
    """The newest committed manifest (published in full by the recovery)."""
    offsets: dict[SplitKey, int]
    """Split → the next offset to load (the newest manifest's ends)."""
    pending: Plan | None
    """The stored plan of the next seq, if a run planned it and did not commit."""
    done: Manifest | None = None
    """For a named run: its manifest, if it committed."""
    found_nothing: bool = False
    """For a named run: it ran before and found nothing new."""

    @property
    def next_seq(self) -> int:
        return (self.latest.seq if self.latest else 0) + 1


def lost_race(pipeline: str, seq: int, winner: Manifest, run_id: str, attempt: str) -> str:
    """The words of run ``run_id``, whose attempt ``attempt`` lost run #``seq`` to ``winner``. Two
    runs executing one stored plan share its run id (the second completes the first's plan), so
    each is named by its attempt as well."""
    this = "of the same plan" if run_id == winner.run_id else f"of run {run_id}"
    return (
        f"pipeline {pipeline}: attempt {winner.attempt} of run {winner.run_id} committed run #{seq} first; "
        f"this process's attempt {attempt} {this} discards its output"
    )


class PipelineState:
    """Reads and changes the state of one pipeline under ``root`` through ``storage``."""

    def __init__(self, storage: Storage, root: str) -> None:
        self.storage = storage
        self.root = root.rstrip("/")
        self.meta = paths.meta_dir(self.root)
        self.leases = Leases(storage, self.meta)

    @classmethod
    def for_spec(cls, spec: PipelineSpec, spark: Any = None) -> PipelineState:
        """The state of ``spec``'s pipeline through the storage its raw layer is on: the one Spark
        writes with when there is a session, else local files or WebHDFS (the tools' storage)."""
        root = spec.raw.path
        return cls(storage_for(root, spark=spark, webhdfs_url=spec.webhdfs_url_for(root)), root)

    # ------------------------------------------------------------------ paths

    def path(self, relative: str) -> str:
        return f"{self.root}/{relative}"

    def manifest_path(self, seq: int) -> str:
        return paths.manifest_path(self.root, seq)

    def plan_path(self, seq: int) -> str:
        return paths.plan_path(self.root, seq)

    def staging_dir(self, seq: int, attempt: str) -> str:
        return paths.staging_dir(self.root, seq, attempt)

    # ------------------------------------------------------------------ reading

    def committed_seqs(self) -> list[int]:
        seqs = []
        for entry in self.storage.list(paths.manifests_dir(self.root)):
            stem, _, ext = entry.name.partition(".")
            if ext == "json" and stem.isdigit() and not entry.is_dir:
                seqs.append(int(stem))
        return sorted(seqs)

    def manifest(self, seq: int) -> Manifest:
        path = self.manifest_path(seq)
        return Manifest.loads(self.storage.read_bytes(path), path)

    def latest(self) -> Manifest | None:
        seqs = self.committed_seqs()
        return self.manifest(seqs[-1]) if seqs else None

    def current_generation(self) -> int:
        """The generation readers and runs use: the newest manifest's (0 before any replay)."""
        latest = self.latest()
        return latest.generation if latest is not None else 0

    def generation_manifests(self, generation: int | None = None) -> list[Manifest]:
        """The manifests whose files make up ``generation`` (default: the current one), oldest
        first: its replay's (which lists every file the generation started with) and the loads
        after it."""
        manifests = [self.manifest(seq) for seq in self.committed_seqs()]
        wanted = manifests[-1].generation if generation is None and manifests else (generation or 0)
        return [m for m in manifests if m.generation == wanted]

    def committed_offsets(self) -> dict[SplitKey, int]:
        """Split → the next offset to load: the end in the newest manifest that has the split."""
        latest = self.latest()
        return latest.end_offsets() if latest is not None else {}

    def pending_plan(self) -> Plan | None:
        """The stored plan of the next seq, if a run planned it and did not commit."""
        seqs = self.committed_seqs()
        seq = (seqs[-1] if seqs else 0) + 1
        path = self.plan_path(seq)
        if not self.storage.exists(path):
            return None
        try:
            return Plan.from_json(json.loads(self.storage.read_bytes(path)))
        except (ValueError, PlanError) as exc:  # not JSON, or JSON that is not a plan
            raise PlanError(f"{path}: the stored plan is unreadable: {exc}") from exc

    def run_record(self, run_id: str) -> tuple[bool, int | None]:
        """(recorded, seq) from the ``runs/`` index: a run id is recorded once its run finished,
        with the seq it committed, or None if it found nothing new to load."""
        record = self._run_pointer(run_id)
        if record is None:
            return False, None
        return True, None if record["seq"] is None else int(record["seq"])

    def run_target(self, run_id: str) -> int | None:
        """The seq the later stages of run ``run_id`` work on: the one it committed or, for a run
        that found nothing new, the newest committed when it ran (None: nothing was ever loaded)."""
        record = self._run_pointer(run_id)
        if record is None:
            return None
        value = record["seq"] if record["seq"] is not None else record.get("target")
        return None if value is None else int(value)

    def _run_pointer(self, run_id: str) -> dict[str, Any] | None:
        pointer = paths.run_pointer(self.root, run_id)
        if not self.storage.exists(pointer):
            return None
        record: dict[str, Any] = json.loads(self.storage.read_bytes(pointer))
        return record

    def committed_run(self, run_id: str) -> Manifest | None:
        """The manifest of run ``run_id`` if it committed (``runs/`` index, then the newest manifest,
        which covers a crash between the commit and the index write)."""
        recorded, seq = self.run_record(run_id)
        if recorded:
            return None if seq is None else self.manifest(seq)
        latest = self.latest()
        return latest if latest is not None and latest.run_id == run_id else None

    def record_empty_run(self, run_id: str) -> None:
        """Remember that run ``run_id`` found nothing to load (so its later stages have nothing to do
        and a retry of it is a no-op)."""
        with contextlib.suppress(AlreadyExistsError):  # a retry of the same run recorded it first
            latest = self.latest()
            record = {"seq": None, "target": latest.seq if latest else None}
            self.storage.write_new(paths.run_pointer(self.root, run_id), json.dumps(record).encode())

    # ------------------------------------------------------------------ changing

    def store_plan(self, plan: Plan) -> None:
        try:
            self.storage.write_new(self.plan_path(plan.seq), plan.dumps())
        except AlreadyExistsError as exc:
            raise ConcurrentRunError(
                f"pipeline {plan.pipeline}: another run planned run #{plan.seq} at the same time; "
                "only one run of a pipeline loads at a time (this one stops without loading)"
            ) from exc

    def discard_plan(self, seq: int) -> None:
        self.storage.delete(self.plan_path(seq))

    def commit(self, manifest: Manifest) -> None:
        """The commit point: the manifest appears whole, or not at all, and never over another."""
        faults.crash_point("commit.before_manifest")
        try:
            self.storage.write_new(self.manifest_path(manifest.seq), manifest.dumps())
        except AlreadyExistsError as exc:
            winner = self.manifest(manifest.seq)
            raise ConcurrentRunError(
                lost_race(manifest.pipeline, manifest.seq, winner, manifest.run_id, manifest.attempt)
            ) from exc
        log.info("pipeline %s: run %s committed as #%d", manifest.pipeline, manifest.run_id, manifest.seq)
        faults.crash_point("commit.after_manifest")

    def roll_forward(self, manifest: Manifest) -> int:
        """Publish ``manifest``'s files (idempotent; safe against a concurrent publisher).
        Returns how many files this call moved."""
        moved = 0
        for item in manifest.files:
            final, staged = self.path(item.path), self.path(item.staged)
            if self.storage.exists(final):
                continue
            if not self.storage.exists(staged):
                raise CommitError(
                    f"run #{manifest.seq} ({manifest.run_id}) lists {item.path}, but neither it nor its staged "
                    f"copy {item.staged} exists: the output was changed outside the pipeline"
                )
            try:
                self.storage.rename_or_fail(staged, final)
            except AlreadyExistsError:
                continue  # a concurrent roll-forward published it between our checks
            except StorageError as exc:
                raise CommitError(f"publishing run #{manifest.seq}: {exc}") from exc
            moved += 1
            faults.crash_point("publish.after_file")
        faults.crash_point("publish.after_files")
        if moved:
            log.info("run #%d: published %d files", manifest.seq, moved)
        self.storage.delete(self.staging_dir(manifest.seq, manifest.attempt), recursive=True)
        self._index_run(manifest)
        return moved

    def _index_run(self, manifest: Manifest) -> None:
        pointer = paths.run_pointer(self.root, manifest.run_id)
        if not self.storage.exists(pointer):
            # a concurrent roll-forward of the same manifest may have written it first
            with contextlib.suppress(AlreadyExistsError):
                self.storage.write_new(pointer, json.dumps({"seq": manifest.seq}).encode())

    def recover(self) -> Manifest | None:
        """Start of every run: finish publishing the newest manifest, remove dead attempts."""
        latest = self.latest()
        if latest is not None:
            self.roll_forward(latest)
        self.remove_dead_staging(latest.seq if latest else 0)
        return latest

    def recovered(self, run_id: str | None = None) -> Recovered:
        """Recover, then read everything a run plans from (``run_id``: whether that run is done)."""
        latest = self.recover()
        done, found_nothing = None, False
        if run_id is not None:
            done = self.committed_run(run_id)
            found_nothing = done is None and self.run_record(run_id)[0]
        offsets = latest.end_offsets() if latest is not None else {}
        return Recovered(latest, offsets, self.pending_plan(), done, found_nothing)

    def remove_dead_staging(self, committed_seq: int) -> list[str]:
        """Delete the staging of dead attempts at seqs already committed (crashed drivers, losers
        that died), and their leases. An attempt whose lease is alive is left alone even though its
        seq is committed: it is a run still loading, which finds out at its commit that it lost and
        removes its own staging (see pipelines.ledger.lease)."""
        removed = []
        staging = paths.staging_root(self.root)
        attempts = {e.name for e in self.storage.list(staging)}
        attempts |= {e.name for e in self.storage.list(self.leases.dir)}  # a lease whose staging was published
        for name in sorted(attempts):
            stem = name.partition("-")[0]
            if stem.isdigit() and int(stem) <= committed_seq and not self.leases.alive(name):
                if self.storage.delete(f"{staging}/{name}", recursive=True):
                    removed.append(f"{staging}/{name}")
                    log.info("removed the staging of dead attempt %s", name)
                self.leases.release(name)
        return removed
