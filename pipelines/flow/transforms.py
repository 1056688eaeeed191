"""The flow's transforms: the pipeline's Spark SQL steps, one at a time, over a scope's raw rows.

Role: the ``raw`` view holds every committed raw row of the scope's partitions, from every load
(late data included), read through the manifests' file lists, never by listing directories, so
uncommitted files are never read. A step's dependencies are read from their staged results; its
own result is staged (overwritten) under ``<raw>/_pipeline/flow/<seq>/steps/<name>/``
(pipelines.ledger.paths.step_dir).

Invariants: a step runs only once every step it depends on has staged its result for the same
load; a step that fails in Spark is a FlowError naming it and the load.
"""

from __future__ import annotations

from typing import Any

from pipelines.config.pipeline import PipelineSpec
from pipelines.config.steps import RAW_VIEW
from pipelines.errors import FlowError
from pipelines.executor.rows import ddl_of, table_schema
from pipelines.layout import Scope, partition_of
from pipelines.ledger import paths
from pipelines.ledger.records import Manifest, newest_schemas, topics_of
from pipelines.ledger.state import PipelineState
from pipelines.progress import Reporter
from pipelines.schemas.resolved import needs_schemas, spec_schemas


class Transforms:
    """The transform steps of ``spec``'s flow, run by ``spark`` over the raw layer of ``state``."""

    def __init__(self, spec: PipelineSpec, spark: Any, state: PipelineState, reporter: Reporter) -> None:
        self.spec = spec
        self.spark = spark
        self.state = state
        self.reporter = reporter

    def raw_files(self, scope: Scope, manifests: list[Manifest] | None = None) -> list[str]:
        """The raw data files in ``scope`` of the current generation (or of ``manifests``)."""
        files = []
        for manifest in self.state.generation_manifests() if manifests is None else manifests:
            for item in manifest.files:
                where = partition_of(item.path) if item.kind == "data" else None
                if where is not None and scope.covers(*where):
                    files.append(self.state.path(item.path))
        return files

    def _register_raw(self, scope: Scope, manifests: list[Manifest] | None = None) -> None:
        files = self.raw_files(scope, manifests)
        # Read with the schema the pipeline declares, never one file's: Spark takes the schema of a
        # single footer, so over a layer whose older files predate a column (headers and
        # timestamp_type came later) the column would vanish or not depending on the file picked.
        # Declared, every row has every column; files without one give nulls there.
        schemas = None
        if needs_schemas(self.spec.decoder):  # the columns of the schemas the newest run read with
            loaded = self.state.generation_manifests() if manifests is None else manifests
            schemas = spec_schemas(self.spec, topics_of(loaded), newest_schemas(loaded))
        schema = ddl_of(table_schema(self.spec.decoder, schemas))  # with the columns the table keeps
        if files:
            frame = self.spark.read.schema(schema).option("basePath", self.state.root).parquet(*files)
        else:  # nothing in scope (a run of only quarantined records): an empty view of the raw schema
            frame = self.spark.createDataFrame([], schema)
        frame.createOrReplaceTempView(RAW_VIEW)

    def compute_step(self, seq: int, step: Any, scope: Scope, manifests: list[Manifest] | None = None) -> int:
        """Run ``step`` over the raw rows of ``scope`` (from the current generation, or from
        ``manifests``) and stage its result in run ``seq``'s flow directory; returns its row count."""
        name = step.name
        root = self.state.root
        for dependency in step.depends_on:
            where = paths.step_dir(root, seq, dependency)
            if dependency != RAW_VIEW and not self.state.storage.exists(f"{where}/_SUCCESS"):
                raise FlowError(f"step {name} needs step {dependency} of run #{seq}, which has not run")
        try:
            self._register_raw(scope, manifests)
            for dependency in step.depends_on:
                if dependency != RAW_VIEW:
                    self.spark.read.parquet(paths.step_dir(root, seq, dependency)).createOrReplaceTempView(dependency)
            frame = self.spark.sql(step.sql)
            frame.write.mode("overwrite").parquet(paths.step_dir(root, seq, name))
        except Exception as exc:  # Spark's analysis and execution errors: name the step
            raise FlowError(f"transform {name} of run #{seq} failed: {_first_line(exc)}") from exc
        rows: int = self.spark.read.parquet(paths.step_dir(root, seq, name)).count()
        self.reporter.note(f"step {name}: {rows:,} rows")
        return rows


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:500] if text else type(exc).__name__
