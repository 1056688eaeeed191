"""After the load: transforms in their graph → validate → publish, for one committed load run.

Role: the driver's side of the warehouse outputs of a pipeline: which loads a flow covers and which
partitions, and the stages in order. Each stage can run alone (one Airflow task each) or all in one
go (``run_all``), and each is idempotent:

- **scope**: a flow run targets a committed load #seq and covers every committed load after the
  last published one up to #seq (so a load whose flow failed, or that completed another run's
  plan, is caught up by the next flow, and an older flow never publishes over a newer one). Its
  partitions are those these loads touched (from their manifests), widened to whole days if any
  output is partitioned by day.
- **step**: one Spark SQL step over the scope's committed raw rows (pipelines.flow.transforms).
- **validate**: per output, great-expectations on the staged rows of its step; what passes is
  staged for publishing (pipelines.flow.validation). Once a publish has started, validation of
  that output is a no-op.
- **publish**: per output, the staged partitions swapped in, readers kept whole
  (pipelines.flow.publish). Once the markers exist, every stage is a no-op: re-running an Airflow
  task of a published run changes nothing.

One flow at a time per pipeline (Airflow's max_active_runs=1 does that; by hand, do not run two).
"""

from __future__ import annotations

from typing import Any

from pipelines.config.pipeline import PipelineSpec
from pipelines.config.steps import topological_order, unbuilt
from pipelines.errors import FlowError
from pipelines.flow import expect
from pipelines.flow.publish import Publisher, Readers
from pipelines.flow.transforms import Transforms
from pipelines.flow.validation import Validator
from pipelines.layout import Partition, Scope, partition_of
from pipelines.ledger import paths
from pipelines.ledger.state import PipelineState
from pipelines.progress import Reporter
from pipelines.storage import Storage, storage_for


class FlowRun:
    """The flow stages of one pipeline (see the module doc); ``spark`` may be None for publish.
    ``readers``: readers by name, kept whole through publish (None: only readers by path)."""

    def __init__(
        self, spec: PipelineSpec, spark: Any, *, reporter: Reporter | None = None, readers: Readers | None = None
    ) -> None:
        if not spec.outputs:
            raise FlowError(f"pipeline {spec.name} has no outputs: nothing to transform or publish")
        not_built = unbuilt(spec.outputs)
        if not_built is not None:
            raise FlowError(not_built)
        self.spec = spec
        self.spark = spark
        self.root = spec.raw.path.rstrip("/")
        self.state = PipelineState.for_spec(spec, spark)
        self.reporter = reporter or Reporter(quiet=True)
        self.readers = readers
        if spark is not None:  # dt=2026-01-01/hour=05 must stay strings ("05", not 5)
            spark.conf.set("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
        self.transforms = Transforms(spec, spark, self.state, self.reporter)
        self.validation = Validator(spec, spark, self.state, self.reporter, self._storage)
        self.publisher = Publisher(spec, self.state, self.reporter, self._storage)

    def _storage(self, path: str) -> Storage:
        """The filesystem Spark writes ``path`` with when there is a session; else local or WebHDFS."""
        return storage_for(path, spark=self.spark, webhdfs_url=self.spec.webhdfs_url_for(path))

    # ------------------------------------------------------------------ which run, which partitions

    def seq_for(self, run_id: str | None) -> int | None:
        """The load the flow targets: the one run ``run_id`` committed (or, if it found nothing new,
        the newest when it ran), or the newest; None: nothing to do. Finishes the raw layer's
        publishing first (a load that committed but died publishing)."""
        self.state.recover()
        if run_id is None:
            latest = self.state.latest()
            if latest is None:
                raise FlowError(f"pipeline {self.spec.name}: no load committed yet; load first")
            return latest.seq
        recorded, _ = self.state.run_record(run_id)
        if recorded:
            return self.state.run_target(run_id)
        manifest = self.state.committed_run(run_id)
        if manifest is None:
            raise FlowError(f"pipeline {self.spec.name}: run {run_id!r} has not loaded (or not finished); load first")
        return manifest.seq

    def last_published(self) -> int:
        """The newest load whose flow was published (0 if none)."""
        directory = paths.flow_root(self.root)
        if not self.state.storage.exists(directory):
            return 0
        seqs = [int(e.name) for e in self.state.storage.list(directory) if e.is_dir and e.name.isdigit()]
        return max((q for q in seqs if self.published(q)), default=0)

    def covered(self, seq: int) -> list[int]:
        """The loads a flow targeting #seq covers: committed, after the last published, up to #seq
        (empty if #seq is published or superseded by a newer published flow)."""
        floor = self.last_published()
        return [q for q in self.state.committed_seqs() if floor < q <= seq]

    def scope(self, seq: int) -> Scope:
        by_day = any(o.partition_by == ("dt",) for o in self.spec.outputs)
        touched = set()
        for covered in self.covered(seq):
            manifest = self.state.manifest(covered)
            touched |= {partition_of(f.path) for f in manifest.files if f.kind == "data"}
        partitions = {(p[0],) if by_day else p for p in touched if p is not None}
        return Scope(seq, by_day, tuple(sorted(partitions)))

    def _nothing_to_do(self, seq: int, what: str) -> bool:
        if not self.covered(seq):
            self.reporter.note(f"run #{seq} is published already (or superseded by a newer flow): no {what}")
            return True
        if not self.scope(seq).partitions:
            self.reporter.note(f"run #{seq} touched no partition (only quarantined records?): no {what}")
            return True
        return False

    def published(self, seq: int) -> bool:
        return self.publisher.published(seq)

    # ------------------------------------------------------------------ the stages

    def run_step(self, seq: int, name: str) -> int:
        """Run step ``name`` of the flow for load run ``seq``; returns its row count."""
        steps = {t.name: t for t in self.spec.transforms}
        if name not in steps:
            raise FlowError(f"pipeline {self.spec.name}: no transform named {name!r} (steps: {', '.join(steps)})")
        if self._nothing_to_do(seq, f"step {name}"):
            return 0
        return self.transforms.compute_step(seq, steps[name], self.scope(seq))

    def validate(self, seq: int) -> list[expect.Validation]:
        """Check every output's staged rows and stage what passes for publishing."""
        if self._nothing_to_do(seq, "validation"):
            return []
        results = []
        for output in self.spec.outputs:
            if self.publisher.started(seq, output):
                self.reporter.note(f"output {output.name}: publishing of run #{seq} has started; not validated again")
                continue
            results.append(self.validation.validate_output(seq, output))
        return results

    def publish(self, seq: int) -> dict[str, list[Partition]]:
        """Swap every output's staged partitions in; returns the partitions replaced per output."""
        return self.publisher.publish(seq, self.covered(seq), self.scope(seq), readers=self.readers)

    def run_all(self, seq: int) -> dict[str, list[Partition]]:
        if self._nothing_to_do(seq, "flow"):
            if self.covered(seq):  # an empty scope: record it as done
                return self.publish(seq)
            return {}
        for step in topological_order(self.spec.transforms):
            self.run_step(seq, step.name)
        self.validate(seq)
        return self.publish(seq)
