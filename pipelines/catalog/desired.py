"""What the metastore should hold for a pipeline, computed from its committed state alone.

Role: the truth side of the projection. For the raw layer and each output, one ``TableSpec``:

- a **table per generation**, ``<name>__gen<g>``: external, Parquet, partitioned like the data,
  located at the generation's directory, with one partition per directory that holds committed data
  (the raw layer's from the manifests of the generation; an output's from its published partitions);
- the **name readers use**, ``<name>``: a view over the current generation's table. A replay's
  switch is one change of the view; for the raw layer, the view also shows only the rows of runs
  whose files are all in place (offsets below the newest committed manifest's ends), so the files
  of a run being published stay invisible until the view changes with them, at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipelines.config.pipeline import PipelineSpec
from pipelines.config.steps import Output
from pipelines.executor.rows import spark_columns
from pipelines.layout import Partition, generation_dir, partition_of, partition_path
from pipelines.ledger.partitions import existing_partitions
from pipelines.ledger.records import Manifest, topics_of
from pipelines.ledger.state import PipelineState
from pipelines.schemas.resolved import spec_schemas
from pipelines.storage import Storage

Column = tuple[str, str]
"""(name, Spark/Hive type as DDL writes it)."""


def quoted(name: str) -> str:
    """An identifier as Spark and Hive SQL take it (backquoted)."""
    return "`" + name.replace("`", "``") + "`"


def literal(text: str) -> str:
    """A string literal as Spark and Hive SQL take it."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def absolute_location(path: str) -> str:
    """``path`` as a metastore location: a URL as it is, a local path as ``file:`` and absolute (a
    relative location would be resolved by each reader against its own directory, or the
    warehouse's)."""
    if "://" in path or path.startswith("file:"):
        return path
    return f"file:{Path(path).absolute()}"


def physical_name(name: str, generation: int) -> str:
    """The table behind the name ``name`` for generation ``generation``."""
    return f"{name}__gen{generation}"


def publishing_name(name: str, generation: int) -> str:
    """The table readers of the output ``name`` read while its generation ``generation`` is being
    published (pipelines.catalog.readers); there is none between publishes."""
    return f"{physical_name(name, generation)}__publishing"


def view_over(database: str, table: str, row_filter: str = "") -> str:
    """A view's query over ``database.table``: what ``ALTER VIEW … AS`` is given, and what the
    metastore keeps."""
    where = f" WHERE {row_filter}" if row_filter else ""
    return f"SELECT * FROM {quoted(database)}.{quoted(table)}{where}"


@dataclass(frozen=True, slots=True)
class TableSpec:
    """One dataset as the metastore should hold it (see the module doc)."""

    dataset: str
    """``raw`` or the output's name (as the pipeline file names it)."""
    database: str
    name: str
    """The name readers use (a view)."""
    generation: int
    location: str
    """The generation's directory."""
    columns: tuple[Column, ...]
    """The data columns, without the partition columns."""
    partition_columns: tuple[str, ...]
    partitions: dict[Partition, str] = field(default_factory=dict)
    """Partition values → directory."""
    row_filter: str = ""
    """The view's condition (raw: the rows of whole runs); empty: every row."""
    shown_run: int = 0
    """The newest run the view shows."""
    publishing: bool = False
    """An output with staged rows not yet cleaned up: a publish may be under way or cut short. If
    its view reads the generation's publishing table, the publish settles it (a sync switching
    it back would show readers the old rows until the publish is run again)."""

    @property
    def table(self) -> str:
        return physical_name(self.name, self.generation)

    def qualified(self, name: str) -> str:
        return f"{quoted(self.database)}.{quoted(name)}"

    def view_sql(self) -> str:
        """The view's query (``view_over`` the generation's table)."""
        return view_over(self.database, self.table, self.row_filter)


def visible_rows(ends: dict[tuple[str, int], int]) -> str:
    """The raw view's condition: a row's offset below its split's end (CASE without ELSE is null
    for a split the manifest does not know: such a row is not shown). No splits: no rows."""
    if not ends:
        return "false"
    topics: dict[str, list[tuple[int, int]]] = {}
    for (topic, partition), end in sorted(ends.items()):
        topics.setdefault(topic, []).append((partition, end))
    branches = " ".join(
        f"WHEN {literal(topic)} THEN CASE {quoted('partition')} "
        + " ".join(f"WHEN {partition} THEN {end}" for partition, end in splits)
        + " END"
        for topic, splits in topics.items()
    )
    return f"{quoted('offset')} < CASE {quoted('topic')} {branches} END"


def raw_table(spec: PipelineSpec, latest: Manifest, manifests: list[Manifest]) -> TableSpec:
    """The raw layer's table at ``latest`` (the newest committed manifest, published in full), from
    the ``manifests`` of its generation."""
    location = absolute_location(generation_dir(spec.raw.path, latest.generation))
    schemas = spec_schemas(spec, topics_of([*manifests, latest]), latest.schemas)  # the newest run's columns
    partitions: dict[Partition, str] = {}
    for manifest in manifests:
        for item in manifest.files:
            where = partition_of(item.path) if item.kind == "data" else None
            if where is not None:
                partitions[where] = f"{location}/{partition_path(('dt', 'hour'), where)}"
    return TableSpec(
        dataset="raw",
        database=spec.tables.database,
        name=spec.raw_table,
        generation=latest.generation,
        location=location,
        columns=tuple(spark_columns(spec.decoder, schemas)),
        partition_columns=("dt", "hour"),
        partitions=partitions,
        row_filter=visible_rows(latest.end_offsets()),
        shown_run=latest.seq,
    )


def output_table(
    spec: PipelineSpec, output: Output, generation: int, storage: Storage, spark: Any, seq: int
) -> TableSpec | None:
    """``output``'s table in ``generation`` from what is published there (None: nothing yet, so no
    schema to give it). Its columns are those of the published Parquet files, read by Spark."""
    directory = generation_dir(output.path, generation)
    found = existing_partitions(storage, directory, output)
    if not found:
        return None
    location = absolute_location(directory)
    partitions = {p: f"{location}/{partition_path(output.partition_by, p)}" for p in sorted(found)}
    staging = f"{output.path.rstrip('/')}/_staging"
    publishing = storage.exists(staging) and bool(storage.list(staging))
    newest = partitions[max(partitions)]  # the newest partition has every column a later step added
    schema = spark.read.parquet(newest).schema
    columns = tuple((f.name, f.dataType.simpleString()) for f in schema.fields if f.name not in output.partition_by)
    return TableSpec(
        dataset=output.name,
        database=spec.tables.database,
        name=output.table_name,
        generation=generation,
        location=location,
        columns=columns,
        partition_columns=output.partition_by,
        partitions=partitions,
        shown_run=seq,
        publishing=publishing,
    )


def desired_tables(spec: PipelineSpec, state: PipelineState, spark: Any, storage_of: Any) -> list[TableSpec]:
    """Every table the pipeline should have once its newest manifest is published, the raw
    layer's first: nothing before the first commit. Reads only (a sync publishes first, see
    pipelines.catalog.sync). ``storage_of(path)``: the storage an output is read with."""
    latest = state.latest()
    if latest is None:
        return []
    tables = [raw_table(spec, latest, state.generation_manifests(latest.generation))]
    for output in spec.outputs:
        table = output_table(spec, output, latest.generation, storage_of(output.path), spark, latest.seq)
        if table is not None:
            tables.append(table)
    return tables
