"""Bringing a pipeline's tables up to date: the step every run ends with, and ``pipelines repair``.

Role: the metastore follows the committed state. A run syncs after its manifest is committed and
its files are in place (load), after its outputs are published (flow), and after a replay commits
(its new generation's tables, then the views switch to them). A crash between a commit and its
sync leaves the metastore one run behind, never wrong: readers see the last synced runs whole, and
the next sync (any run's, or ``pipelines repair``) catches up. The metastore being away fails the
sync with a CatalogError after the data is committed; nothing of the commit is undone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipelines import faults
from pipelines.catalog.changes import Change, database_change, table_changes
from pipelines.catalog.connection import Metastore, attach, database_location
from pipelines.catalog.desired import TableSpec, desired_tables
from pipelines.catalog.metastore import SparkMetastore
from pipelines.config.pipeline import PipelineSpec
from pipelines.ledger.state import PipelineState
from pipelines.progress import Reporter
from pipelines.storage import storage_for


@dataclass(frozen=True, slots=True)
class Comparison:
    """The pipeline's tables and what the metastore lacks of them."""

    metastore: Metastore
    tables: list[TableSpec]
    behind: list[Change]
    """Changes behind the names (tables, columns, partitions)."""
    switches: list[Change]
    """Changes of the names themselves, then drops of collected generations."""

    @property
    def changes(self) -> list[Change]:
        return [*self.behind, *self.switches]


def compare(spec: PipelineSpec, state: PipelineState, spark: Any, metastore: Metastore) -> Comparison:
    """What the metastore should hold for ``spec`` and the changes that would make it so."""
    catalog = SparkMetastore(spark, metastore)

    def storage_of(path: str) -> Any:
        return storage_for(path, spark=spark, webhdfs_url=spec.webhdfs_url_for(path))

    tables = desired_tables(spec, state, spark, storage_of)
    behind: list[Change] = (
        database_change(catalog, spec.tables.database, database_location(spec, spark)) if tables else []
    )
    database_exists = not behind
    switches: list[Change] = []
    for table in tables:
        first, then = table_changes(catalog, table, database_exists=database_exists)
        behind += first
        switches += then
    return Comparison(metastore, tables, behind, switches)


def apply(spark: Any, comparison: Comparison) -> None:
    """Make the changes of ``comparison``, behind the names first (see pipelines.catalog.changes)."""
    catalog = SparkMetastore(spark, comparison.metastore)
    for change in comparison.behind:
        change.apply(catalog)
    for change in comparison.switches:
        if change.switch:
            faults.crash_point("tables.before_view")
        change.apply(catalog)


def bring_up_to_date(spec: PipelineSpec, state: PipelineState, spark: Any, metastore: Metastore) -> Comparison:
    """Finish publishing the newest manifest (as every run starts by doing: what the raw view will
    show must be in place), then make the changes the metastore lacks; returns them."""
    latest = state.latest()
    if latest is not None:
        state.roll_forward(latest)
    comparison = compare(spec, state, spark, metastore)
    apply(spark, comparison)
    return comparison


def sync(spec: PipelineSpec, state: PipelineState, spark: Any, *, reporter: Reporter) -> Comparison | None:
    """Bring ``spec``'s tables up to date in the metastore ``spark`` talks to; None if the
    pipeline has no tables there (said once on ``reporter``)."""
    metastore = attach(spec, spark)
    if metastore is None:
        if spec.tables.metastore == "auto":
            reporter.note("tables: not registered (this Spark session has no Hive metastore; see docs/tables.md)")
        return None
    comparison = bring_up_to_date(spec, state, spark, metastore)
    if comparison.changes:
        shown = ", ".join(f"{t.database}.{t.name} (run #{t.shown_run})" for t in comparison.tables)
        reporter.note(f"tables: {shown} in {metastore.describe()}")
    return comparison
