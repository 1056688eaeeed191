"""Schema evolution between runs: the columns a new run's reader schema gives, against the raw
table's columns as the last committed run recorded them.

Role: one raw table is read across all its runs' Parquet files at once (the metastore's table,
the transforms' view of the raw layer), each file written with the columns of its run's reader
schema. A reader schema may change between runs (the subject's latest version moved on) only in
ways that keep every file readable in that one table:

- a column added: allowed; files of earlier runs have no such column and read as nulls there
  (Spark reads raw files with the table's declared schema, never one file's footer), and the
  metastore table gets the column (pipelines.catalog.changes adds missing columns);
- a column removed: allowed; the column stays in the table (``RunSchemas.kept``, recorded in the
  manifest with the reader schema it was last in), null in the rows of later runs;
- a column whose type changes, in any way: refused before anything is loaded, naming the subject,
  the recorded version and the new one, and the field. That includes the promotions Avro's schema
  resolution allows (int to long, float to double, int or long to float or double, string to
  bytes): a Hive table's column cannot change type in place, Spark's ``mergeSchema`` refuses two
  files whose column types differ, and engines other than Spark 4 read such files side by side
  differently; and a nested record's fields (a struct column's type). A reader schema pinned to
  the recorded version (``decoder.registry.version``) keeps loading into the old column type as
  long as Avro can read the new records into it;
- everything Avro's schema resolution refuses (a field made required, a type changed across
  families, an enum's symbol removed) is refused by the registry check of every writer version
  into the reader (pipelines.schemas.resolved), which includes the recorded reader itself.

Invariants: pure: the schemas are given (the recorded ones fetched by their global id by the
caller); the check is the same for every schema type, since it compares the Arrow columns the
schemas map to.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from pipelines.errors import PayloadSchemaError
from pipelines.schemas.resolved import RunSchemas, SubjectSchemas, columns_of, run_columns


@dataclass(frozen=True, slots=True)
class Recorded:
    """A reader schema as a manifest records it (``RunSchemas.readers``)."""

    subject: str
    version: int | None
    id: int

    @classmethod
    def of(cls, entry: Any) -> Recorded | None:
        """The entry's reference, None for an entry that is not one (a manifest of a run that
        read no registry schema)."""
        if not isinstance(entry, Mapping):
            return None
        subject, version, schema_id = entry.get("subject"), entry.get("version"), entry.get("id")
        if not isinstance(subject, str) or not isinstance(schema_id, int) or isinstance(schema_id, bool):
            return None
        return cls(subject, version if isinstance(version, int) and not isinstance(version, bool) else None, schema_id)


Lookup = Callable[[str, Recorded], SubjectSchemas]
"""(side, recorded reader) → its schema (``side``: ``values`` or ``keys``, whose registry it is in)."""


def evolve(schemas: RunSchemas, recorded: Mapping[str, Any], lookup: Lookup) -> RunSchemas:
    """``schemas`` with the columns the table keeps (``kept``), after checking that its reader
    schemas change the recorded ones (the newest committed run's ``schemas``) only as the module
    doc allows; PayloadSchemaError naming the subject, both versions and the first field that
    changed type. Nothing recorded (a first run, a decoder without a registry): ``schemas``."""
    values = _recorded_side(recorded, "values")
    if not values or not schemas.values:
        return schemas
    topic = min(schemas.values)
    before = values.get(topic) or values[min(values)]  # every topic of a run has the same columns
    previous = lookup("values", before)
    table: dict[str, tuple[pa.Field, SubjectSchemas]] = {
        f.name: (f, previous) for f in columns_of(previous, previous.describe())
    }
    for name, entry in (recorded.get("kept") or {}).items():
        reference = Recorded.of(entry)
        if reference is not None and name not in table:
            had = lookup("values", reference)
            table[name] = (columns_of(had, had.describe()).field(name), had)
    now = run_columns(schemas)
    reader = schemas.values[topic]
    for f in now:
        if f.name in table and not same_type(f.type, table[f.name][0].type):
            was, source = table[f.name]
            raise PayloadSchemaError(
                f"subject {reader.subject}: field {f.name} is {type_name(was.type)} in {_version(source, reader)}, "
                f"the raw table's column, and {type_name(f.type)} in {_version(reader, reader)}, this run's reader "
                "schema: a column of the raw table keeps its type (earlier runs' Parquet files are read beside this "
                "run's), so the run is refused before anything is loaded; read with the recorded version "
                "(decoder.registry.version) or load the subject into a new pipeline"
            )
    _check_keys(schemas, _recorded_side(recorded, "keys"), lookup)
    kept = {name: source for name, (_, source) in table.items() if name not in now.names}
    return replace(schemas, kept=kept)


def _check_keys(schemas: RunSchemas, recorded: Mapping[str, Recorded], lookup: Lookup) -> None:
    """The decoded key is one column (a struct of the key schema's fields): its type may not change."""
    if not recorded or not schemas.keys:
        return
    topic = min(schemas.keys)
    now = schemas.keys[topic]
    before = lookup("keys", recorded.get(topic) or recorded[min(recorded)])
    was, is_ = columns_of(before, before.describe()), columns_of(now, now.describe())
    if not same_type(pa.struct(list(was)), pa.struct(list(is_))):
        changed = next(
            (f.name for f in is_ if f.name not in was.names or not same_type(f.type, was.field(f.name).type)),
            next((n for n in was.names if n not in is_.names), "?"),
        )
        raise PayloadSchemaError(
            f"subject {now.subject}: the key field {changed} differs between {before.describe()}, the raw table's "
            f"key_decoded column, and {now.describe()}, this run's key reader schema: the decoded key is one column, "
            "whose type cannot change (the run is refused before anything is loaded)"
        )


def _version(schema: SubjectSchemas, reader: SubjectSchemas) -> str:
    """``version 2 (id 7)``, or the whole description for a schema of another subject."""
    if schema.subject != reader.subject:
        return schema.describe()
    return f"version {schema.reader_version} (id {schema.reader_id})"


def _recorded_side(recorded: Mapping[str, Any], side: str) -> dict[str, Recorded]:
    found = recorded.get(side)
    if not isinstance(found, Mapping):
        return {}
    out = {}
    for topic, entry in found.items():
        reference = Recorded.of(entry)
        if reference is not None:
            out[topic] = reference
    return out


def same_type(a: pa.DataType, b: pa.DataType) -> bool:
    """``a`` and ``b`` are the same column type, nested fields' nullability aside (a Parquet
    column's nullability is no part of the table's type)."""
    if pa.types.is_struct(a) and pa.types.is_struct(b):
        return [f.name for f in a] == [f.name for f in b] and all(
            same_type(x.type, y.type) for x, y in zip(a, b, strict=True)
        )
    if pa.types.is_list(a) and pa.types.is_list(b):
        return same_type(a.value_type, b.value_type)
    if pa.types.is_map(a) and pa.types.is_map(b):
        return same_type(a.key_type, b.key_type) and same_type(a.item_type, b.item_type)
    return bool(a == b)


_NAMES = {
    pa.int8(): "tinyint",
    pa.int16(): "smallint",
    pa.int32(): "int",
    pa.int64(): "bigint",
    pa.float32(): "float",
    pa.float64(): "double",
    pa.string(): "string",
    pa.binary(): "binary",
    pa.bool_(): "boolean",
    pa.date32(): "date",
}


def type_name(kind: pa.DataType) -> str:
    """A column type as Spark and the metastore's ``DESCRIBE`` write it (``bigint``,
    ``struct<a:bigint>``), for messages."""
    if pa.types.is_struct(kind):
        return "struct<" + ",".join(f"{f.name}:{type_name(f.type)}" for f in kind) + ">"
    if pa.types.is_list(kind):
        return f"array<{type_name(kind.value_type)}>"
    if pa.types.is_map(kind):
        return f"map<{type_name(kind.key_type)},{type_name(kind.item_type)}>"
    if pa.types.is_decimal(kind):
        return f"decimal({kind.precision},{kind.scale})"
    if pa.types.is_timestamp(kind):
        return "timestamp"
    return _NAMES.get(kind, str(kind))
