"""What readers by name see of an output while its partitions are published.

Role: pipelines.flow.run.Readers for the metastore. Publish swaps an output's partition
directories in place (two renames); a reader by name would find a partition missing between them.
So publish first points the registered partitions at their staged rows (new ones are added there,
removed ones dropped), swaps copies of them in, then points the partitions back at their final
directories. Only an output whose generation table is registered is concerned: before the first
sync there is no reader by name, and the sync after publish registers it.
"""

from __future__ import annotations

import logging
from typing import Any

from pipelines.catalog.connection import Metastore, attach
from pipelines.catalog.desired import absolute_location, physical_name, quoted
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

    def shows(self, output: Output, generation: int) -> bool:
        """Whether ``output``'s generation table is registered. A metastore that cannot answer is
        no reason to hold the publish back: it goes on as for readers by path, and the sync after
        it reports the metastore's error."""
        try:
            return self.catalog.table(self.database, physical_name(output.table_name, generation)) is not None
        except CatalogError as exc:
            log.warning("publishing %s without the metastore: %s", output.name, exc)
            return False

    def show(self, output: Output, generation: int, locations: dict[Partition, str], removed: list[Partition]) -> None:
        table = physical_name(output.table_name, generation)
        qualified = f"{quoted(self.database)}.{quoted(table)}"
        columns = output.partition_by
        registered = self.catalog.partitions(self.database, table, columns)
        wanted = {p: absolute_location(where) for p, where in locations.items()}
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
