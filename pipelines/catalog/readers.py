"""What readers by name see of an output while its partitions are published.

Role: pipelines.flow.publish.Readers for the metastore. Publish swaps an output's partition
directories in place (two renames), and a run both replaces partitions and adds new ones: changed
one call at a time, a reader by name would find a partition missing between the renames, or the
run's new partitions beside the old rows of those it replaces. So every change readers see is one
change of the output's view:

- ``stage``: a second table, ``<name>__gen<g>__publishing``, is made like the generation's table
  with its partitions as the publish will leave them (the replaced and new ones at their staged
  rows, the removed ones gone), all added in one call; then the view switches to it, one
  ``ALTER VIEW``: the run's partitions appear at once, whole.
- the directories are swapped (readers read the staged rows meanwhile);
- ``settle``: the generation's table gets the same partitions at their final directories (nobody
  reads it now), the view switches back to it (the same rows), and the publishing table is dropped.

A crash in between leaves the view on the publishing table; publishing again, or the next sync
(pipelines.catalog.changes), switches it back and drops it. Only an output whose generation table
is registered is concerned: before the first sync there is no reader by name, and the sync after
publish registers it. If the view reads another table (none yet, or another generation during a
replay), the generation's table is changed directly: no reader by name reads it.
"""

from __future__ import annotations

import logging
from typing import Any

from pipelines.catalog.connection import Metastore, attach
from pipelines.catalog.desired import absolute_location, literal, physical_name, publishing_name, quoted, view_over
from pipelines.catalog.metastore import SparkMetastore, same_location
from pipelines.config.pipeline import PipelineSpec
from pipelines.config.steps import Output
from pipelines.errors import CatalogError
from pipelines.layout import Partition

log = logging.getLogger(__name__)


class MetastoreReaders:
    """Readers by name of ``spec``'s outputs, through the metastore ``metastore`` of ``spark``."""

    def __init__(self, spec: PipelineSpec, spark: Any, metastore: Metastore) -> None:
        self.database = spec.tables.database
        self.catalog = SparkMetastore(spark, metastore)

    def _qualified(self, table: str) -> str:
        return f"{quoted(self.database)}.{quoted(table)}"

    def shows(self, output: Output, generation: int) -> bool:
        """Whether ``output``'s generation table is registered. A metastore that cannot answer is
        no reason to hold the publish back: it goes on as for readers by path, and the sync after
        it reports the metastore's error."""
        try:
            return self.catalog.table(self.database, physical_name(output.table_name, generation)) is not None
        except CatalogError as exc:
            log.warning("publishing %s without the metastore: %s", output.name, exc)
            return False

    def stage(self, output: Output, generation: int, locations: dict[Partition, str], removed: list[Partition]) -> None:
        """Readers by name see, in one change, ``output``'s partitions with ``locations`` (the
        staged rows of those the run replaces or adds) and without ``removed``."""
        table = physical_name(output.table_name, generation)
        publishing = publishing_name(output.table_name, generation)
        wanted = {p: absolute_location(where) for p, where in locations.items()}
        read = self._read_by_view(output, table, publishing)
        if read == publishing:  # staged by an earlier attempt at this publish: the same partitions
            self._change(publishing, output, wanted, removed)
        elif read == table:
            registered = self.catalog.table(self.database, table)
            assert registered is not None  # shows() said so
            partitions = self.catalog.partitions(self.database, table, output.partition_by)
            partitions.update(wanted)
            for partition in removed:
                partitions.pop(partition, None)
            self.catalog.sql(f"DROP TABLE IF EXISTS {self._qualified(publishing)}")  # a crash's leftover
            self.catalog.sql(
                f"CREATE TABLE {self._qualified(publishing)} LIKE {self._qualified(table)} "
                f"LOCATION {literal(registered.location)}"
            )
            self.catalog.add_partitions(self._qualified(publishing), output.partition_by, partitions)  # one call
            self._switch(output, publishing)
        else:
            self._change(table, output, wanted, removed)

    def settle(
        self, output: Output, generation: int, locations: dict[Partition, str], removed: list[Partition]
    ) -> None:
        """Readers by name read ``output``'s generation table again, its partitions at their final
        ``locations`` and without ``removed`` (the rows they read while staged)."""
        table = physical_name(output.table_name, generation)
        publishing = publishing_name(output.table_name, generation)
        self._change(table, output, {p: absolute_location(w) for p, w in locations.items()}, removed)
        if self._read_by_view(output, table, publishing) == publishing:
            self._switch(output, table)
        self.catalog.sql(f"DROP TABLE IF EXISTS {self._qualified(publishing)}")  # external: no file is deleted

    def _read_by_view(self, output: Output, table: str, publishing: str) -> str | None:
        """Which of ``table`` and ``publishing`` the output's view reads (None: neither)."""
        view = self.catalog.table(self.database, output.table_name)
        if view is None or view.kind != "VIEW":
            return None
        for candidate in (table, publishing):
            if view.view_text == view_over(self.database, candidate):
                return candidate
        return None

    def _switch(self, output: Output, table: str) -> None:
        self.catalog.sql(f"ALTER VIEW {self._qualified(output.table_name)} AS {view_over(self.database, table)}")

    def _change(self, table: str, output: Output, wanted: dict[Partition, str], removed: list[Partition]) -> None:
        """``table``'s partitions changed in place, a call for each kind of change: only for a
        table no reader by name reads, or one already holding these changes (no call then)."""
        qualified = self._qualified(table)
        columns = output.partition_by
        registered = self.catalog.partitions(self.database, table, columns)
        self.catalog.add_partitions(qualified, columns, {p: w for p, w in wanted.items() if p not in registered})
        moves = {p: w for p, w in wanted.items() if p in registered and not same_location(registered[p], w)}
        self.catalog.relocate_partitions(self.database, table, columns, moves)  # all at once
        self.catalog.drop_partitions(qualified, columns, [p for p in removed if p in registered])


def readers_for(spec: PipelineSpec, spark: Any) -> MetastoreReaders | None:
    """The readers by name of ``spec``'s outputs through ``spark``, if its tables are registered there."""
    if spark is None or not spec.outputs:
        return None
    metastore = attach(spec, spark)
    return None if metastore is None else MetastoreReaders(spec, spark, metastore)
