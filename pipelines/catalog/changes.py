"""What differs between the metastore and the pipeline's committed state, as changes to make.

Role: the comparison behind ``pipelines tables`` (which prints the changes) and every sync (which
makes them). Changes come in the order that keeps readers of the names whole: first everything
behind the names (databases, the generation tables, their columns and partitions), then the views
(each one change: a reader sees the old state or the new, never a part), then the tables of
generations that are no longer read. Planning only reads; each change is idempotent, so a sync
that died half-way is finished by the next.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from pipelines.catalog.desired import TableSpec, literal, physical_name, publishing_name, quoted, view_over
from pipelines.catalog.metastore import Registered, SparkMetastore, same_location
from pipelines.errors import CatalogError
from pipelines.progress import counted


@dataclass(frozen=True, slots=True)
class Change:
    """One change to the metastore: what it does, in words, and how."""

    table: str
    """The name it concerns, ``database.name``."""
    what: str
    apply: Callable[[SparkMetastore], object]
    switch: bool = False
    """A view's change: what readers of a name see."""


def _drop(qualified: str, metastore: SparkMetastore) -> None:
    metastore.sql(f"DROP TABLE IF EXISTS {qualified}")


def _columns_ddl(spec: TableSpec) -> str:
    return ", ".join(f"{quoted(name)} {kind}" for name, kind in spec.columns)


def _create_table(spec: TableSpec) -> Callable[[SparkMetastore], None]:
    partitioned = ", ".join(f"{quoted(c)} STRING" for c in spec.partition_columns)

    def apply(metastore: SparkMetastore) -> None:
        metastore.sql(
            f"CREATE EXTERNAL TABLE IF NOT EXISTS {spec.qualified(spec.table)} ({_columns_ddl(spec)}) "
            f"PARTITIONED BY ({partitioned}) STORED AS PARQUET LOCATION {literal(spec.location)}"
        )
        metastore.add_partitions(spec.qualified(spec.table), spec.partition_columns, spec.partitions)

    return apply


def _is_ours(view: Registered, spec: TableSpec) -> bool:
    """Whether a view under ``spec``'s name is one a sync made (it reads a generation table)."""
    behind = quoted(physical_name(spec.name, 0))[:-2]  # `<name>__gen, any generation
    return view.kind == "VIEW" and (view.view_text or "").startswith(f"SELECT * FROM {quoted(spec.database)}.{behind}")


def _shown(view_text: str | None) -> str:
    found = re.search(r"__gen(\d+)(__publishing)?`", view_text or "")
    if found is None:
        return "something else"
    return f"generation {found.group(1)}" + (" (a publish cut short)" if found.group(2) else "")


def database_change(metastore: SparkMetastore, database: str, location: str | None = None) -> list[Change]:
    """The database's creation, if it is missing: at ``location`` if given, else where the
    session's warehouse directory says."""
    if metastore.database_exists(database):
        return []
    where = "" if location is None else f" LOCATION {literal(location)}"
    return [
        Change(database, f"create database {database}",
               lambda m: m.sql(f"CREATE DATABASE IF NOT EXISTS {quoted(database)}{where}")),
    ]  # fmt: skip


def table_changes(
    metastore: SparkMetastore, spec: TableSpec, *, database_exists: bool
) -> tuple[list[Change], list[Change]]:
    """(changes behind the name, changes of the name itself and after) for one dataset (its
    database's creation is ``database_change``'s)."""
    name = f"{spec.database}.{spec.name}"
    table = f"{spec.database}.{spec.table}"
    behind: list[Change] = []
    switch: list[Change] = []
    existing_tables: list[str] = []
    grown = False
    if not database_exists:
        physical = view = None
    else:
        physical = metastore.table(spec.database, spec.table)
        view = metastore.table(spec.database, spec.name)
        existing_tables = metastore.tables(spec.database)
    if view is not None and not _is_ours(view, spec):
        raise CatalogError(
            f"{metastore.metastore.describe()}: {name} exists and is not the view pipelines keep for the "
            f"{spec.dataset} data ({view.kind.lower()}): rename it, or give the {spec.dataset} data another table "
            "name in the pipeline file"
        )
    if physical is None:
        behind.append(
            Change(table, f"create table {table} at {spec.location} with {counted(len(spec.partitions), 'partition')}",
                   _create_table(spec)),
        )  # fmt: skip
    elif (
        physical.kind == "VIEW"
        or not same_location(physical.location, spec.location)
        or physical.partition_columns != spec.partition_columns
    ):

        def recreate(m: SparkMetastore) -> None:
            m.sql(f"DROP TABLE IF EXISTS {spec.qualified(spec.table)}")
            _create_table(spec)(m)

        behind.append(
            Change(table, f"create {table} again at {spec.location} (it is at {physical.location or 'no location'}, "
                   f"partitioned by {list(physical.partition_columns)})", recreate),
        )  # fmt: skip
    else:
        missing = [(c, kind) for c, kind in spec.columns if c.lower() not in physical.columns]
        grown = bool(missing)
        if missing:
            added = ", ".join(f"{quoted(c)} {kind}" for c, kind in missing)
            behind.append(
                Change(table, f"add {'column' if len(missing) == 1 else 'columns'} {', '.join(c for c, _ in missing)} "
                              f"to {table}",
                       lambda m: m.sql(f"ALTER TABLE {spec.qualified(spec.table)} ADD COLUMNS ({added})")),
            )  # fmt: skip
        behind += _partition_changes(metastore, spec, table)
    # a publish under way or cut short keeps the view on its publishing table: it settles it
    held = publishing_name(spec.name, spec.generation)
    publish_holds = spec.publishing and view is not None and view.view_text == view_over(spec.database, held)
    if view is None:
        switch.append(
            Change(name, f"create view {name} over {table} (run #{spec.shown_run})",
                   lambda m: m.sql(f"CREATE VIEW {spec.qualified(spec.name)} AS {spec.view_sql()}"), switch=True),
        )  # fmt: skip
    elif (view.view_text != spec.view_sql() or grown) and not publish_holds:
        # a view keeps the columns its table had when it was made: one whose table grew is made again
        now = _shown(view.view_text)
        later = f"generation {spec.generation}"
        what = f"{now} → {later}" if now != later else f"up to run #{spec.shown_run}"
        what += " with the columns added" if grown else ""
        switch.append(
            Change(name, f"switch view {name}: {what}",
                   lambda m: m.sql(f"ALTER VIEW {spec.qualified(spec.name)} AS {spec.view_sql()}"), switch=True),
        )  # fmt: skip
    for other in existing_tables:
        if other == held and publish_holds:
            continue
        if re.fullmatch(re.escape(spec.name) + r"__gen\d+__publishing", other):  # a publish cut short: once
            switch.append(  # the view reads the generation's table again, nobody reads this one
                Change(f"{spec.database}.{other}", f"drop {spec.database}.{other} (left by a publish cut short)",
                       partial(_drop, spec.qualified(other))),
            )  # fmt: skip
        found = re.fullmatch(re.escape(spec.name) + r"__gen(\d+)", other)
        if found and int(found.group(1)) < spec.generation - 1:  # the one replaced last stays until gc
            old = physical_name(spec.name, int(found.group(1)))
            switch.append(
                Change(f"{spec.database}.{old}", f"drop {spec.database}.{old} (generation {found.group(1)}, collected)",
                       partial(_drop, spec.qualified(old))),
            )  # fmt: skip
    return behind, switch


def _partition_changes(metastore: SparkMetastore, spec: TableSpec, table: str) -> list[Change]:
    registered = metastore.partitions(spec.database, spec.table, spec.partition_columns)
    missing = {p: where for p, where in spec.partitions.items() if p not in registered}
    moved = {
        p: where for p, where in spec.partitions.items() if p in registered and not same_location(registered[p], where)
    }
    extra = sorted(p for p in registered if p not in spec.partitions)
    changes = []
    qualified = spec.qualified(spec.table)
    if missing:
        changes.append(
            Change(table, f"add {counted(len(missing), 'partition')} to {table}",
                   lambda m: m.add_partitions(qualified, spec.partition_columns, missing)),
        )  # fmt: skip
    if moved:
        changes.append(
            Change(table, f"move {counted(len(moved), 'partition')} of {table} to their directories",
                   lambda m: m.relocate_partitions(spec.database, spec.table, spec.partition_columns, moved)),
        )  # fmt: skip
    if extra:
        changes.append(
            Change(table, f"drop {counted(len(extra), 'partition')} of {table} no longer published",
                   lambda m: m.drop_partitions(qualified, spec.partition_columns, extra)),
        )  # fmt: skip
    return changes
