"""The partitions a dataset directory holds now, read from storage.

Role: the one listing of published partitions (``dt=…`` or ``dt=…/hour=…`` directories, named as
pipelines.layout names them), shared by the flow's publish, replay and the catalog's view of what
is published. Directories of any other name (``_staging``, ``_trash``, ``_quarantine``,
``_generations``) are never partitions.
"""

from __future__ import annotations

from pipelines.config.steps import Output
from pipelines.layout import Partition
from pipelines.storage import Storage


def existing_partitions(storage: Storage, base: str, output: Output) -> set[Partition]:
    """The partitions the output has now under ``base``, at its granularity."""
    found: set[Partition] = set()
    if not storage.exists(base):
        return found
    for day in storage.list(base):
        if not (day.is_dir and day.name.startswith("dt=")):
            continue
        if output.partition_by == ("dt",):
            found.add((day.name[3:],))
            continue
        for hour in storage.list(day.path):
            if hour.is_dir and hour.name.startswith("hour="):
                found.add((day.name[3:], hour.name[5:]))
    return found
