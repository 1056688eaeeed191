"""A payload schema into the raw layer's columns: Avro, JSON Schema and Kafka Connect's schema to Arrow.

Role: the one mapping from the schema values are read with to the Arrow columns the Parquet files
hold (and through pipelines.executor.rows, the Spark types of the tables over them). It matches
spark-avro's ``SchemaConverters`` where Spark can read the result, with fallbacks where it cannot:

- Avro: primitives as themselves; ``decimal`` (bytes or fixed) as decimal(p, s), or as its text
  when p > 38 (Spark's limit); ``date`` as date; ``timestamp-millis``/``-micros`` as timestamp
  (UTC), ``local-timestamp-*`` as a timestamp at their wall-clock time in UTC (not Spark's
  timestamp_ntz: a Hive metastore has no such column); ``timestamp-nanos`` and ``local-timestamp-nanos``
  as bigint nanoseconds (Spark reads no nanosecond Parquet timestamp); ``time-millis``/``-micros``
  as bigint microseconds of the day (Spark reads Parquet TIME only behind a flag); ``uuid`` and
  enums as strings; fixed (and ``duration``) as binary; records as structs; arrays; maps
  (string keys); ``[null, X]`` as a nullable X; ``[int, long]`` as bigint, ``[float, double]`` as
  double; any other union as a struct ``member0, member1, ...`` of its non-null branches, one set.
  A recursive record is refused (Parquet has no recursive type).
- JSON Schema: an object's ``properties`` with a ``type`` each (``["null", X]`` nullable): string
  (``format: date-time`` as timestamp), integer as bigint, number as double, boolean, objects with
  properties as structs, arrays with ``items`` as arrays; ``$ref`` to ``#/definitions`` or ``#/$defs``.
- Connect (JsonConverter's ``schema``): int8..int64, float and double, boolean, string, bytes (base64),
  arrays, structs, maps (a JSON object, or for keys that are not strings an array of [key, value]
  pairs); Decimal as decimal(p, scale) (p: ``connect.decimal.precision``, else 38), Date,
  Time (as Avro's time: bigint microseconds of the day), Timestamp.

The loader's tasks decode Avro with kafkalog.schemas.avro_program's kernel, whose columns
pipelines.executor.payloads.avro_arrow types as ``avro_columns(reader).schema`` says (its tests hold
the two to one schema). Each Avro mapping also comes with a second way to the same columns, from
plain values: the reader schema with its logical types taken off (a generic reader such as fastavro
then returns plain numbers and bytes), the Arrow type those plain values are built into, and a plan
that turns that into the columns; the tests read values so, as the kernel's oracle.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pipelines.config.pipeline import RESERVED_COLUMNS
from pipelines.errors import PayloadSchemaError

MAX_DECIMAL_PRECISION = 38
"""Spark's (and decimal128's) largest precision; a wider decimal is loaded as its text."""
UTC_MICROS = pa.timestamp("us", tz="UTC")

_PRIMITIVES: dict[str, pa.DataType] = {
    "null": pa.string(),  # a field that is always null: a column of nulls (Parquet has no null type Spark reads)
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
}


@dataclass(frozen=True, slots=True)
class Plan:
    """How a plain-value Arrow array becomes its column: ``kind`` is same (nothing to do), cast (to
    ``final``), decimal (big-endian unscaled bytes to ``final``, a decimal128 or its text), struct,
    list or map (convert the ``children``)."""

    kind: str
    final: pa.DataType
    children: tuple[Plan, ...] = ()
    scale: int = 0


SAME = "same"


@dataclass(frozen=True, slots=True)
class AvroColumns:
    """An Avro reader schema as columns (see the module doc)."""

    schema: pa.Schema
    """The columns, in field order (every top-level column nullable: a tombstone's row has none)."""
    plain: pa.Schema
    """The Arrow types fastavro's plain values are built into (logical types as their units)."""
    plans: tuple[Plan, ...]
    """Per column: ``plain`` into ``schema``."""
    plain_reader: Any
    """The reader schema (JSON data) with every ``logicalType`` taken off."""
    tagged_unions: bool
    """Some union maps to a struct of members: the decoded values are reshaped before Arrow."""
    top_record: bool
    """The schema is a record (its fields are the columns); otherwise the one column ``value``."""


class _Names:
    """Named types seen so far (records, enums, fixed), by full name; and the records being walked
    (a record inside itself is recursive)."""

    def __init__(self) -> None:
        self.known: dict[str, Any] = {}
        self.walking: list[str] = []


def _full_name(node: Mapping[str, Any], namespace: str | None) -> tuple[str, str | None]:
    name = str(node["name"])
    if "." in name:
        return name, name.rpartition(".")[0]
    space = node.get("namespace", namespace)
    return (f"{space}.{name}" if space else name), space or None


def avro_columns(schema_text: str, *, where: str = "the Avro schema") -> AvroColumns:
    """The columns of an Avro reader schema (its text); PayloadSchemaError naming ``where`` and the
    field for a schema that cannot be columns."""
    try:
        reader = json.loads(schema_text)
    except ValueError as exc:
        raise PayloadSchemaError(f"{where} is not JSON: {exc}") from None
    names = _Names()
    mapped = _Avro(names, where)
    plain_type, final_type, plan = mapped.type(reader, None, "")
    endless = endless_array(reader)
    if endless is not None:
        raise PayloadSchemaError(f"{where}: {endless}: an array of items that take no bytes cannot be read safely")
    if isinstance(reader, dict) and reader.get("type") == "record":
        fields = list(zip(plain_type, final_type, plan.children, strict=True))
        for field, _, _ in fields:
            if field.name.lower() in RESERVED_COLUMNS:
                raise PayloadSchemaError(
                    f"{where}: field {field.name!r} clashes with a column every raw row has (rename it in the schema)"
                )
        return AvroColumns(
            pa.schema([pa.field(f.name, g.type) for f, g, _ in fields]),
            pa.schema([pa.field(f.name, f.type) for f, _, _ in fields]),
            tuple(p for _, _, p in fields),
            _strip_logical(reader),
            mapped.tagged,
            top_record=True,
        )
    return AvroColumns(
        pa.schema([pa.field("value", final_type)]),
        pa.schema([pa.field("value", plain_type)]),
        (plan,),
        _strip_logical(reader),
        mapped.tagged,
        top_record=False,
    )


MAX_COLUMN_TYPES = 100_000
"""The most types one schema's columns may hold, nested ones counted (as kafkalog.schemas.avro_program
bounds its columns): a small schema can name a large tree."""


class _Avro:
    """One walk of an Avro schema (see ``avro_columns``)."""

    def __init__(self, names: _Names, where: str) -> None:
        self.names = names
        self.where = where
        self.tagged = False
        self.visited = 0
        """Types walked: a named record is walked again wherever it is used, so a schema that uses
        one record twice in each of its records has columns exponential in its size."""

    def fail(self, path: str, message: str) -> PayloadSchemaError:
        return PayloadSchemaError(f"{self.where}: {path or 'the top level'}: {message}")

    def type(self, node: Any, namespace: str | None, path: str) -> tuple[Any, Any, Plan]:
        """(plain Arrow type, final Arrow type, plan) of an Avro type; for a record, the types are
        struct types whose fields are the record's."""
        self.visited += 1
        if self.visited > MAX_COLUMN_TYPES:
            raise self.fail(path, f"the schema makes more than {MAX_COLUMN_TYPES:,} columns and types: too many")
        if isinstance(node, str):
            if node in _PRIMITIVES:
                kind = _PRIMITIVES[node]
                return kind, kind, Plan(SAME, kind)
            full = node if "." in node or namespace is None else f"{namespace}.{node}"
            for candidate in (full, node):
                if candidate in self.names.walking:
                    raise self.fail(path, f"record {candidate} contains itself (a recursive schema cannot be columns)")
                if candidate in self.names.known:
                    named = self.names.known[candidate]
                    return self.type(named, named.get("__space__"), path)
            raise self.fail(path, f"unknown type {node!r}")
        if isinstance(node, list):
            return self.union(node, namespace, path)
        if not isinstance(node, dict) or "type" not in node:
            raise self.fail(path, f"not an Avro type: {node!r:.80}")
        kind = node["type"]
        logical = node.get("logicalType")
        if kind in ("record", "error"):
            full, space = _full_name(node, namespace)
            self.names.known[full] = {**node, "__space__": space}
            self.names.walking.append(full)
            plain, final, plans = [], [], []
            for field in node.get("fields", []):
                p, f, plan = self.type(field["type"], space, f"{path}/{field['name']}")
                plain.append(pa.field(field["name"], p))
                final.append(pa.field(field["name"], f, nullable=_nullable(field["type"])))
                plans.append(plan)
            self.names.walking.pop()
            plain_struct, final_struct = pa.struct(plain), pa.struct(final)
            same = all(p.kind == SAME for p in plans) and plain_struct == final_struct
            return plain_struct, final_struct, Plan(SAME if same else "struct", final_struct, tuple(plans))
        if kind in ("enum", "fixed"):
            full, space = _full_name(node, namespace)
            self.names.known[full] = {**node, "__space__": space}
            if kind == "enum":
                return pa.string(), pa.string(), Plan(SAME, pa.string())
            if logical == "decimal":
                return self.decimal(node, path)
            return pa.binary(), pa.binary(), Plan(SAME, pa.binary())  # duration too: 12 bytes
        if kind == "array":
            p, f, plan = self.type(node["items"], namespace, f"{path}[]")
            plain_list = pa.list_(p)
            final_list = pa.list_(pa.field("element", f, nullable=_nullable(node["items"])))
            return plain_list, final_list, Plan("list", final_list, (plan,))
        if kind == "map":
            p, f, plan = self.type(node["values"], namespace, f"{path}{{}}")
            plain_map = pa.map_(pa.string(), p)
            final_map = pa.map_(pa.string(), pa.field("value", f, nullable=_nullable(node["values"])))
            return plain_map, final_map, Plan("map", final_map, (plan,))
        if isinstance(kind, dict | list):  # {"type": {"type": "record", ...}}: a nested declaration
            return self.type(kind, namespace, path)
        if kind not in _PRIMITIVES:
            return self.type(kind, namespace, path)  # a named type referred to as {"type": "ns.Name"}
        return self.logical(kind, logical, node, path)

    def logical(self, kind: str, logical: Any, node: Mapping[str, Any], path: str) -> tuple[Any, Any, Plan]:
        if kind == "bytes" and logical == "decimal":
            return self.decimal(node, path)
        if kind == "int" and logical == "date":
            return pa.date32(), pa.date32(), Plan(SAME, pa.date32())
        if kind == "int" and logical == "time-millis":
            return pa.int32(), pa.int64(), Plan("millis", pa.int64())
        if kind == "long" and logical == "time-micros":
            return pa.int64(), pa.int64(), Plan(SAME, pa.int64())
        # the local-timestamp types too: a Hive metastore has no TIMESTAMP_NTZ column, so their
        # wall-clock time is held as a timestamp at that time in UTC
        if kind == "long" and logical in ("timestamp-millis", "local-timestamp-millis"):
            return pa.timestamp("ms", tz="UTC"), UTC_MICROS, Plan("cast", UTC_MICROS)
        if kind == "long" and logical in ("timestamp-micros", "local-timestamp-micros"):
            return UTC_MICROS, UTC_MICROS, Plan(SAME, UTC_MICROS)
        # uuid on string, the nanosecond timestamps on long, and logical types Avro does not know
        # (which its spec says to read as the underlying type): the primitive itself
        base = _PRIMITIVES[kind]
        return base, base, Plan(SAME, base)

    def decimal(self, node: Mapping[str, Any], path: str) -> tuple[Any, Any, Plan]:
        precision, scale = node.get("precision"), node.get("scale", 0)
        if not isinstance(precision, int) or not isinstance(scale, int) or not 0 <= scale <= precision:
            raise self.fail(path, f"decimal precision {precision!r} and scale {scale!r} are not valid")
        final = pa.decimal128(precision, scale) if precision <= MAX_DECIMAL_PRECISION else pa.string()
        return pa.binary(), final, Plan("decimal", final, scale=scale)

    def union(self, branches: list[Any], namespace: str | None, path: str) -> tuple[Any, Any, Plan]:
        others = [b for b in branches if b != "null"]
        if not others:
            return pa.string(), pa.string(), Plan(SAME, pa.string())
        if len(others) == 1:
            return self.type(others[0], namespace, path)
        if numeric_union(others, ("int", "long")):
            return pa.int64(), pa.int64(), Plan(SAME, pa.int64())
        if numeric_union(others, ("float", "double")):
            return pa.float64(), pa.float64(), Plan(SAME, pa.float64())
        self.tagged = True
        plain, final, plans = [], [], []
        for i, branch in enumerate(others):
            p, f, plan = self.type(branch, namespace, f"{path}/member{i}")
            plain.append(pa.field(f"member{i}", p))
            final.append(pa.field(f"member{i}", f))
            plans.append(plan)
        plain_struct, final_struct = pa.struct(plain), pa.struct(final)
        same = all(p.kind == SAME for p in plans) and plain_struct == final_struct
        return plain_struct, final_struct, Plan(SAME if same else "struct", final_struct, tuple(plans))


def numeric_union(branches: list[Any], kinds: tuple[str, str]) -> bool:
    """The non-null ``branches`` of a union are all of ``kinds`` (``[int, long]``: one bigint column),
    each written as its name or as ``{"type": name}`` alone."""
    return all(
        (b if isinstance(b, str) else b.get("type") if isinstance(b, dict) and len(b) == 1 else None) in kinds
        for b in branches
    )


def endless_array(schema: Any) -> str | None:
    """The path of an array whose items take no bytes (null, an empty record, fixed of size 0), or
    None. Such an array is refused: its count is all that says how long it is, so a corrupt count
    (a few bytes of a bad value) would have a decoder build billions of items, never reaching the
    end of the value that stops any other type."""
    known: dict[str, Any] = {}

    def empty(node: Any, seen: frozenset[str]) -> bool:
        if isinstance(node, str):
            if node == "null":
                return True
            target = known.get(node) or next((v for k, v in known.items() if k.rpartition(".")[2] == node), None)
            return target is not None and node not in seen and empty(target, seen | {node})
        if isinstance(node, list) or not isinstance(node, dict):
            return False  # a union takes its branch index: at least a byte
        kind = node.get("type")
        if isinstance(kind, dict | list):
            return empty(kind, seen)
        if kind in ("record", "error"):
            return all(empty(f.get("type"), seen) for f in node.get("fields", []))
        if kind == "fixed":
            return node.get("size") == 0
        return kind == "null"

    def walk(node: Any, path: str) -> str | None:
        if isinstance(node, list):
            return next((found for i, b in enumerate(node) if (found := walk(b, f"{path}/{i}")) is not None), None)
        if not isinstance(node, dict):
            return None
        if "name" in node and node.get("type") in ("record", "error", "enum", "fixed"):
            known[_full_name(node, None)[0]] = node
        kind = node.get("type")
        if kind == "array":
            if empty(node.get("items"), frozenset()):
                return path or "the top level"
            return walk(node.get("items"), f"{path}[]")
        if kind == "map":
            return walk(node.get("values"), f"{path}{{}}")
        if kind in ("record", "error"):
            for field in node.get("fields", []):
                found = walk(field.get("type"), f"{path}/{field.get('name')}")
                if found is not None:
                    return found
            return None
        return walk(kind, path) if isinstance(kind, dict | list) else None

    return walk(schema, "")


def _nullable(node: Any) -> bool:
    return node == "null" or (isinstance(node, list) and "null" in node)


def _strip_logical(node: Any) -> Any:
    """``node`` with every ``logicalType`` taken off (fastavro then reads the plain values)."""
    node = copy.deepcopy(node)
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            item.pop("logicalType", None)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return node


# ------------------------------------------------------------------ building the columns


def convert(array: pa.Array, plan: Plan) -> pa.Array:
    """The column of ``plan`` from an array of plain values (see ``Plan``)."""
    if plan.kind == SAME:
        return array
    if plan.kind == "cast":
        return array.cast(plan.final)
    if plan.kind == "decimal":
        return _decimals(array, plan)
    if plan.kind == "millis":  # Avro's time-millis, Connect's Time and Timestamp: milliseconds, to microseconds
        return pc.multiply_checked(array.cast(pa.int64()), 1000).cast(plan.final)
    if plan.kind in ("base64", "base64-decimal"):
        raw = _base64(array)
        return raw if plan.kind == "base64" else _decimals(raw, plan)
    mask = array.is_null() if array.null_count else None
    if plan.kind == "struct":
        children = [
            convert(child_array, child) for child_array, child in zip(array.flatten(), plan.children, strict=True)
        ]
        return pa.StructArray.from_arrays(children, fields=list(plan.final), mask=mask)
    if plan.kind == "list":
        values = convert(array.values, plan.children[0])
        offsets = array.offsets
        if array.offset or len(array.values) != offsets[-1].as_py() - offsets[0].as_py():
            array = array.take(pa.array(range(len(array))))  # compact a sliced list first
            values, offsets = convert(array.values, plan.children[0]), array.offsets
        return pa.ListArray.from_arrays(offsets, values, type=plan.final, mask=mask)
    if plan.kind == "entries":  # a list of {key, value} structs (a Connect map as read from JSON)
        if array.offset:
            array = array.take(pa.array(range(len(array))))
        entries = array.values
        keys = convert(entries.field("key"), plan.children[0])
        if keys.null_count:
            raise ValueError("a map key is null")
        items = convert(entries.field("value"), plan.children[1])
        converted = pa.MapArray.from_arrays(array.offsets, keys, items, type=plan.final)
        return converted if mask is None else pc.if_else(mask, pa.nulls(len(array), plan.final), converted)
    if plan.kind == "map":
        if array.offset:
            array = array.take(pa.array(range(len(array))))
        items = convert(array.items, plan.children[0])
        converted = pa.MapArray.from_arrays(array.offsets, array.keys, items, type=plan.final)
        return converted if mask is None else pc.if_else(mask, pa.nulls(len(array), plan.final), converted)
    raise ValueError(f"unknown plan {plan.kind}")


def _base64(array: pa.Array) -> pa.Array:
    """Base64 text (JsonConverter's bytes) as binary; ValueError for text that is not base64."""
    import binascii  # noqa: PLC0415

    try:
        return pa.array(
            [
                None if s is None else binascii.a2b_base64(s.encode("ascii"), strict_mode=True)
                for s in array.to_pylist()
            ],
            pa.binary(),
        )
    except (binascii.Error, UnicodeEncodeError) as exc:
        raise ValueError(f"not base64 bytes: {exc}") from None


def _decimals(array: pa.Array, plan: Plan) -> pa.Array:
    """Avro's decimals (two's-complement big-endian unscaled integers) as decimal128 or, wider than
    38 digits, as text."""
    unscaled = [None if b is None else int.from_bytes(b, "big", signed=True) for b in array.to_pylist()]
    if pa.types.is_decimal(plan.final):
        import decimal  # noqa: PLC0415 - only when a schema has decimals

        scale = plan.scale
        # exact: an unscaled integer with its exponent (scaleb would round to the context's 28 digits)
        values = [None if u is None else decimal.Decimal(u).scaleb(-scale, _EXACT) for u in unscaled]
        return pa.array(values, plan.final)
    return pa.array([None if u is None else decimal_text(u, plan.scale) for u in unscaled], pa.string())


def _exact_context() -> Any:
    import decimal  # noqa: PLC0415

    return decimal.Context(prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)


_EXACT = _exact_context()
"""A decimal context that never rounds: Avro's unscaled integers have as many digits as their bytes."""


def decimal_text(unscaled: int, scale: int) -> str:
    sign, digits = ("-" if unscaled < 0 else ""), str(abs(unscaled))
    if scale == 0:
        return sign + digits
    digits = digits.rjust(scale + 1, "0")
    return f"{sign}{digits[:-scale]}.{digits[-scale:]}"


# ------------------------------------------------------------------ JSON Schema


def json_schema_columns(schema_text: str, *, where: str = "the JSON schema") -> pa.Schema:
    """The columns of a JSON Schema whose top level is an object with properties."""
    try:
        root = json.loads(schema_text)
    except ValueError as exc:
        raise PayloadSchemaError(f"{where} is not JSON: {exc}") from None
    if not isinstance(root, dict):
        raise PayloadSchemaError(f"{where}: the top level is not a schema object")
    walk = _JsonSchema(root, where)
    top = walk.resolve(root, "")
    if top.get("type") != "object" and not ("properties" in top and "type" not in top):
        raise PayloadSchemaError(f"{where}: the top level must be an object with properties (type: object)")
    fields = walk.properties(top, "")
    for field in fields:
        if field.name.lower() in RESERVED_COLUMNS:
            raise PayloadSchemaError(f"{where}: property {field.name!r} clashes with a column every raw row has")
    return pa.schema([pa.field(f.name, f.type) for f in fields])


class _JsonSchema:
    def __init__(self, root: dict[str, Any], where: str) -> None:
        self.root = root
        self.where = where
        self.walking: list[str] = []

    def fail(self, path: str, message: str) -> PayloadSchemaError:
        return PayloadSchemaError(f"{self.where}: {path or 'the top level'}: {message}")

    def resolve(self, node: dict[str, Any], path: str) -> dict[str, Any]:
        ref = node.get("$ref")
        if ref is None:
            return node
        for prefix in ("#/definitions/", "#/$defs/"):
            if isinstance(ref, str) and ref.startswith(prefix):
                target = self.root.get(prefix[2:-1], {}).get(ref[len(prefix) :])
                if isinstance(target, dict):
                    if ref in self.walking:
                        raise self.fail(path, f"{ref} refers to itself (a recursive schema cannot be columns)")
                    return target
        raise self.fail(path, f"$ref {ref!r} is not supported (only #/definitions/... and #/$defs/... in the schema)")

    def properties(self, node: dict[str, Any], path: str) -> list[pa.Field]:
        props = node.get("properties", {})
        if not isinstance(props, dict):
            raise self.fail(path, "properties is not an object")
        return [pa.field(name, self.type(sub, f"{path}/{name}")) for name, sub in props.items()]

    def type(self, node: Any, path: str) -> pa.DataType:
        if not isinstance(node, dict):
            raise self.fail(path, "not a schema object")
        ref = node.get("$ref")
        resolved = self.resolve(node, path)
        if ref is not None:
            self.walking.append(ref)
        try:
            return self._type(resolved, path)
        finally:
            if ref is not None:
                self.walking.pop()

    def _type(self, node: dict[str, Any], path: str) -> pa.DataType:
        kind = node.get("type")
        if isinstance(kind, list):
            others = [k for k in kind if k != "null"]
            if len(others) != 1:
                raise self.fail(path, f"type {kind} is not one type (or one and null): not supported")
            kind = others[0]
        if kind is None and "properties" in node:
            kind = "object"
        if kind == "string":
            return UTC_MICROS if node.get("format") == "date-time" else pa.string()
        if kind == "integer":
            return pa.int64()
        if kind == "number":
            return pa.float64()
        if kind == "boolean":
            return pa.bool_()
        if kind == "object":
            fields = self.properties(node, path)
            if not fields:
                raise self.fail(path, "an object without properties has no columns (give its properties)")
            return pa.struct(fields)
        if kind == "array":
            items = node.get("items")
            if not isinstance(items, dict):
                raise self.fail(path, "an array needs one items schema")
            return pa.list_(self.type(items, f"{path}[]"))
        raise self.fail(path, f"type {kind!r} is not supported (give string, integer, number, boolean, object, array)")


# ------------------------------------------------------------------ Kafka Connect


CONNECT_DECIMAL = "org.apache.kafka.connect.data.Decimal"
CONNECT_DATE = "org.apache.kafka.connect.data.Date"
CONNECT_TIME = "org.apache.kafka.connect.data.Time"
CONNECT_TIMESTAMP = "org.apache.kafka.connect.data.Timestamp"

_CONNECT_PRIMITIVES: dict[str, pa.DataType] = {
    "int8": pa.int8(),
    "int16": pa.int16(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "float": pa.float32(),  # JsonConverter's names of Connect's FLOAT32 and FLOAT64
    "double": pa.float64(),
    "boolean": pa.bool_(),
    "string": pa.string(),
    "bytes": pa.binary(),
}


@dataclass(frozen=True, slots=True)
class ConnectColumns:
    """A Connect schema as columns: ``schema`` the columns, ``payload`` the Arrow type Arrow's JSON
    reader reads the envelope's payload as (bytes and decimals as their base64 text, dates and
    times as numbers), ``plans`` per column from one to the other."""

    schema: pa.Schema
    payload: pa.DataType
    plans: tuple[Plan, ...]
    has_maps: bool = False
    """Some field is a map: the payload is rewritten by :func:`connect_map_entries` before Arrow
    reads it (Arrow's JSON reader has no map type), each map as a list of ``{key, value}``."""


def connect_columns(schema: Any, *, where: str = "the Connect schema") -> ConnectColumns:
    """The columns of a Connect struct schema (an envelope's ``schema``, as JSON data)."""
    if not isinstance(schema, dict) or schema.get("type") != "struct":
        raise PayloadSchemaError(f"{where}: the top level must be a struct schema")
    plain, final, plan = _connect(schema, where, "")
    for field in final:
        if field.name.lower() in RESERVED_COLUMNS:
            raise PayloadSchemaError(f"{where}: field {field.name!r} clashes with a column every raw row has")
    plans = plan.children if plan.kind != SAME else tuple(Plan(SAME, f.type) for f in final)
    has_maps = _has_maps(plan)
    return ConnectColumns(pa.schema([pa.field(f.name, f.type) for f in final]), plain, plans, has_maps)


def _has_maps(plan: Plan) -> bool:
    return plan.kind == "entries" or any(_has_maps(child) for child in plan.children)


def connect_map_entries(value: Any, schema: Any) -> Any:
    """A payload (JSON data) of the Connect ``schema`` with each map as a list of ``{"key", "value"}``
    objects: JsonConverter writes a map as a JSON object, or (keys that are not strings) as an array
    of [key, value] pairs. A value of another shape than the schema's is left as it is, for Arrow's
    reader to refuse."""
    kind = schema.get("type") if isinstance(schema, dict) else None
    if kind == "struct" and isinstance(value, dict):
        fields = {f.get("field"): f for f in schema.get("fields", []) if isinstance(f, dict)}
        return {k: connect_map_entries(v, fields[k]) if k in fields else v for k, v in value.items()}
    if kind == "array" and isinstance(value, list):
        return [connect_map_entries(item, schema.get("items")) for item in value]
    if kind == "map":
        keys, values = schema.get("keys"), schema.get("values")
        if isinstance(value, dict):
            return [{"key": k, "value": connect_map_entries(v, values)} for k, v in value.items()]
        if isinstance(value, list) and all(isinstance(pair, list) and len(pair) == 2 for pair in value):
            return [{"key": connect_map_entries(k, keys), "value": connect_map_entries(v, values)} for k, v in value]
    return value


_DECLARED_CONNECT = {
    "string": {"type": "string"},
    "long": {"type": "int64"},
    "int": {"type": "int32"},
    "double": {"type": "double"},
    "float": {"type": "float"},
    "boolean": {"type": "boolean"},
    "timestamp": {"type": "int64", "name": CONNECT_TIMESTAMP},
    "binary": {"type": "bytes"},
}


def declared_connect_schema(schema: Mapping[str, str]) -> dict[str, Any]:
    """The Connect schema of a pipeline file's ``decoder.schema`` (field: kind): what JsonConverter
    writes for such fields (a timestamp as Connect's Timestamp, epoch milliseconds; binary as base64)."""
    fields = [{**_DECLARED_CONNECT[kind], "optional": True, "field": name} for name, kind in schema.items()]
    return {"type": "struct", "fields": fields, "optional": False}


def _connect(node: Any, where: str, path: str) -> tuple[Any, Any, Plan]:
    if not isinstance(node, dict) or not isinstance(node.get("type"), str):
        raise PayloadSchemaError(f"{where}: {path or 'the top level'}: not a Connect schema")
    kind, name = node["type"], node.get("name")
    if name == CONNECT_DECIMAL:
        scale = int((node.get("parameters") or {}).get("scale", 0))
        precision = int((node.get("parameters") or {}).get("connect.decimal.precision", MAX_DECIMAL_PRECISION))
        final = pa.decimal128(precision, scale) if precision <= MAX_DECIMAL_PRECISION else pa.string()
        return pa.string(), final, Plan("base64-decimal", final, scale=scale)
    if name == CONNECT_DATE:
        return pa.int32(), pa.date32(), Plan("cast", pa.date32())
    if name == CONNECT_TIME:
        return pa.int64(), pa.int64(), Plan("millis", pa.int64())
    if name == CONNECT_TIMESTAMP:
        return pa.int64(), UTC_MICROS, Plan("millis", UTC_MICROS)
    if kind == "bytes":
        return pa.string(), pa.binary(), Plan("base64", pa.binary())
    if kind in _CONNECT_PRIMITIVES:
        base = _CONNECT_PRIMITIVES[kind]
        return base, base, Plan(SAME, base)
    if kind == "struct":
        plain, final, plans = [], [], []
        for field in node.get("fields", []):
            p, f, plan = _connect(field, where, f"{path}/{field.get('field')}")
            plain.append(pa.field(field["field"], p))
            final.append(pa.field(field["field"], f))
            plans.append(plan)
        same = all(p.kind == SAME for p in plans)
        return pa.struct(plain), pa.struct(final), Plan(SAME if same else "struct", pa.struct(final), tuple(plans))
    if kind == "array":
        p, f, plan = _connect(node.get("items"), where, f"{path}[]")
        return pa.list_(p), pa.list_(f), Plan(SAME if plan.kind == SAME else "list", pa.list_(f), (plan,))
    if kind == "map":
        # Arrow's JSON reader has no map type: it reads the map's entries (see connect_map_entries)
        pk, fk, key_plan = _connect(node.get("keys"), where, f"{path}{{key}}")
        pv, fv, value_plan = _connect(node.get("values"), where, f"{path}{{value}}")
        if not isinstance(fk, pa.DataType) or pa.types.is_nested(fk):
            raise PayloadSchemaError(f"{where}: {path}: a map's keys must be of a primitive type")
        entries = pa.list_(pa.struct([pa.field("key", pk), pa.field("value", pv)]))
        return entries, pa.map_(fk, fv), Plan("entries", pa.map_(fk, fv), (key_plan, value_plan))
    raise PayloadSchemaError(f"{where}: {path or 'the top level'}: Connect type {kind!r} is not supported")
