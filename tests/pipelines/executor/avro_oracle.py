"""The tests' oracle of Avro decoding into columns: fastavro's reading of the values (the loader's
before its own kernel), built into columns by pipelines.schemas.columns.
Each value is Avro binary, framed with the schema
id it was written with (kafkalog.schemas.wire) or, with a ``schema_file``, plain (``framed: true``: framed, the id not
looked up). Each value is decoded with its writer schema and resolved into the run's reader schema
(Avro's resolution: fields added with defaults, removed fields skipped, int → long promotions,
enum defaults), by fastavro's C reader; the columns are built from the reader schema's plain
values by Arrow (pipelines.schemas.columns: logical types become Arrow types there, not Python
objects per value).

A value is bad, with its reason, if its frame is (``wrong magic byte 0x7b``, ``value shorter than
5 bytes``), its id is none of the subject's (``unknown schema id 7``), it ends before its record
does (``truncated Avro payload``), it does not decode (``corrupt Avro payload: ...``), or it has
bytes after its record (``2 bytes left after the record``). Trailing bytes are refused although
Confluent's deserializer ignores them: a value whose record does not use exactly its bytes was not
written by an Avro serializer with this schema, and reading it would load a guess.

Every value is decoded within its own bounds, so one corrupt value is bad alone and never shifts
its neighbours.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from typing import Any

import fastavro
import pyarrow as pa

from kafkalog.schemas.wire import HEADER_SIZE, schema_ids
from pipelines.config.pipeline import Decoder
from pipelines.executor.halving import Parsed, first_line
from pipelines.schemas.columns import _strip_logical, avro_columns, convert, numeric_union
from pipelines.schemas.resolved import SubjectSchemas

_NO_ID = -2
"""The id of a value of a schema file without framing: read with the reader schema."""


class FastavroValues:
    """Avro values into the reader schema's columns (see the module doc). Made per task from the
    run's schemas; each writer schema is parsed once, when a value first names it."""

    def __init__(self, decoder: Decoder, schemas: SubjectSchemas) -> None:
        self.decoder = decoder
        self.schemas = schemas
        self.columns = avro_columns(schemas.reader, where=schemas.describe())
        self.schema = self.columns.schema
        self.required = decoder.required
        self._reader = fastavro.parse_schema(self.columns.plain_reader)
        self._framed = not schemas.any_id or decoder.framed
        self._writers: dict[int, Any] = {}
        """id → parsed writer schema (logical types off), or None when it is the reader itself."""

    def _writer(self, schema_id: int) -> tuple[bool, Any]:
        """(known, the parsed writer schema or None when it equals the reader schema)."""
        if schema_id in self._writers:
            return True, self._writers[schema_id]
        if self.schemas.any_id or schema_id == self.schemas.reader_id:
            self._writers[schema_id] = None
            return True, None
        text = self.schemas.writers.get(schema_id)
        if text is None:
            return False, None
        self._writers[schema_id] = fastavro.parse_schema(_strip_logical(json.loads(text)))
        return True, self._writers[schema_id]

    def parse(self, values: Sequence[bytes | None]) -> tuple[list[Parsed], list[tuple[int, str]]]:
        """The decoded rows (one piece, in message order) and the bad (index, reason) pairs."""
        if self._framed:
            ids, bad = schema_ids(values)
            start = HEADER_SIZE
        else:
            ids = [_NO_ID if v is not None else -1 for v in values]
            bad = [(i, "the message has no value (null)") for i, v in enumerate(values) if v is None]
            start = 0
        reader = self._reader
        named = self.columns.tagged_unions
        records: list[Any] = []
        indexes: list[int] = []
        for i, (value, schema_id) in enumerate(zip(values, ids, strict=True)):
            if schema_id == -1:
                continue
            known, writer = self._writer(schema_id)
            if not known:
                bad.append((i, f"unknown schema id {schema_id}"))
                continue
            assert value is not None
            stream = io.BytesIO(value)
            stream.seek(start)
            try:
                if writer is None:
                    record = fastavro.schemaless_reader(
                        stream, reader, None, return_named_type=named, return_named_type_override=named
                    )
                else:
                    record = fastavro.schemaless_reader(
                        stream, writer, reader, return_named_type=named, return_named_type_override=named
                    )
            except EOFError:
                bad.append((i, "truncated Avro payload"))
                continue
            except Exception as exc:
                bad.append((i, f"corrupt Avro payload: {first_line(str(exc)) or type(exc).__name__}"))
                continue
            left = len(value) - stream.tell()
            if left:
                bad.append((i, f"{left} byte{'s' if left > 1 else ''} left after the record"))
                continue
            records.append(record)
            indexes.append(i)
        pieces, more_bad = self._rows(records, indexes)
        bad.extend(more_bad)
        bad.sort()
        return pieces, bad

    def _rows(self, records: list[Any], indexes: list[int]) -> tuple[list[Parsed], list[tuple[int, str]]]:
        """The decoded records as one table of the columns; records that cannot be columns (a
        decimal wider than its precision) or lack a required field are bad alone."""
        if not records:
            return [], []
        try:
            table = self._table(records)
        except (pa.ArrowException, ValueError, TypeError, OverflowError):
            return self._one_by_one(records, indexes)
        if not self.required:
            return [Parsed(indexes, table)], []
        return _drop_missing(table, indexes, self.required)

    def _one_by_one(self, records: list[Any], indexes: list[int]) -> tuple[list[Parsed], list[tuple[int, str]]]:
        tables, kept, bad = [], [], []
        for record, index in zip(records, indexes, strict=True):
            try:
                tables.append(self._table([record]))
                kept.append(index)
            except (pa.ArrowException, ValueError, TypeError, OverflowError) as exc:
                bad.append((index, f"the record cannot be a row: {first_line(str(exc))}"))
        if not tables:
            return [], bad
        table = pa.concat_tables(tables)
        if not self.required:
            return [Parsed(kept, table)], bad
        pieces, missing = _drop_missing(table, kept, self.required)
        return pieces, sorted([*bad, *missing])

    def _table(self, records: list[Any]) -> pa.Table:
        columns = self.columns
        if columns.tagged_unions:
            records = [_retag(r, columns.plain_reader, {}) for r in records]
        if columns.top_record:
            plain = pa.Table.from_pylist(records, schema=columns.plain)
        else:
            plain = pa.table({"value": pa.array(records, columns.plain.field(0).type)})
        arrays = [convert(plain.column(i).combine_chunks(), plan) for i, plan in enumerate(columns.plans)]
        return pa.Table.from_arrays(arrays, schema=self.schema)


def _drop_missing(
    table: pa.Table, indexes: list[int], required: Sequence[str]
) -> tuple[list[Parsed], list[tuple[int, str]]]:
    """Rows with every required field, and the others as bad."""
    import pyarrow.compute as pc

    keep = None
    bad: dict[int, str] = {}
    for name in required:
        column = table.column(name)
        if column.null_count:
            missing = column.is_null().to_pylist()
            for index, gone in zip(indexes, missing, strict=True):
                if gone:
                    bad.setdefault(index, f"required field {name!r} is missing or null")
            keep = pc.invert(column.is_null()) if keep is None else pc.and_(keep, pc.invert(column.is_null()))
    if keep is None:
        return [Parsed(indexes, table)], []
    flags = keep.to_pylist()
    kept = [i for i, ok in zip(indexes, flags, strict=True) if ok]
    return ([Parsed(kept, table.filter(keep))] if kept else []), sorted(bad.items())


_PY_TYPES: dict[str, tuple[type, ...]] = {
    "boolean": (bool,),
    "int": (int,),
    "long": (int,),
    "float": (float, int),
    "double": (float, int),
    "string": (str,),
    "bytes": (bytes,),
}


def _retag(value: Any, node: Any, names: dict[str, Any]) -> Any:
    """A decoded value reshaped for its plain Arrow type: each union of several types becomes a
    dict ``member<i>`` of its non-null branches (pipelines.schemas.columns), the branch found from
    the named type fastavro returns with it or from the value's Python type (the first branch that
    fits: an int of ``[int, long, string]`` is member0)."""
    if value is None:
        return None
    if isinstance(node, list):
        others = [b for b in node if b != "null"]
        if len(others) == 1:
            return _retag(value, others[0], names)
        if numeric_union(others, ("int", "long")) or numeric_union(others, ("float", "double")):
            return value
        branch, inner = _branch(value, others, names)
        return {f"member{branch}": _retag(inner, others[branch], names)}
    if isinstance(node, str):
        if node in _PY_TYPES or node == "null":
            return value
        target = names.get(node)
        return value if target is None else _retag(value, target, names)
    if not isinstance(node, dict):
        return value
    kind = node.get("type")
    if isinstance(kind, dict | list):
        return _retag(value, kind, names)
    if "name" in node:
        names[str(node["name"])] = node
        if node.get("namespace"):
            names[f"{node['namespace']}.{node['name']}"] = node
    if kind in ("record", "error"):
        return {f["name"]: _retag(value.get(f["name"]), f["type"], names) for f in node.get("fields", [])}
    if kind == "array":
        return [_retag(v, node["items"], names) for v in value]
    if kind == "map":
        return {k: _retag(v, node["values"], names) for k, v in value.items()}
    return value


def _branch(value: Any, branches: list[Any], names: dict[str, Any]) -> tuple[int, Any]:
    """(the union branch ``value`` was decoded from, the value itself)."""
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
        name = value[0]
        for i, branch in enumerate(branches):
            full = _name_of(branch)
            if full is not None and (full == name or full.rpartition(".")[2] == name.rpartition(".")[2]):
                return i, value[1]
    for i, branch in enumerate(branches):
        kind = branch.get("type") if isinstance(branch, dict) else branch
        if isinstance(kind, str) and kind in _PY_TYPES:
            if isinstance(value, _PY_TYPES[kind]) and not (isinstance(value, bool) and kind != "boolean"):
                return i, value
        elif (
            (kind in ("record", "error", "map") and isinstance(value, dict))
            or (kind == "array" and isinstance(value, list))
            or (kind == "enum" and isinstance(value, str) and value in branch.get("symbols", ()))
            or (kind == "fixed" and isinstance(value, bytes))
        ):
            return i, value
        elif isinstance(kind, str) and kind in names:
            target = names[kind]
            if _branch(value, [target], names)[0] == 0:
                return i, value
    raise ValueError(f"a union value of no branch of {branches!r:.80}")


def _name_of(branch: Any) -> str | None:
    if isinstance(branch, dict) and "name" in branch:
        space = branch.get("namespace")
        return f"{space}.{branch['name']}" if space and "." not in branch["name"] else str(branch["name"])
    if isinstance(branch, str) and branch not in _PY_TYPES:
        return branch
    return None
