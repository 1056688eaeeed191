"""A Protobuf reader schema into the raw layer's columns: the one Protobuf → Arrow (→ Spark) mapping.

Role: from the subject's reader schema (``.proto`` text or a base64 descriptor, compiled by
kafkalog.schemas.protobuf) and the message values are read as (the record strategy's full name, or
the file's first message), the Arrow columns the Parquet files hold, and a tree of
:class:`ProtoField` that the tasks' decoder (pipelines.executor.payloads.protobuf_values) follows.
It matches spark-protobuf's ``SchemaConverters`` where Spark and Hive read the result, with these
choices (docs/pipelines.md, "Schema'd payloads", has the table):

- int32, sint32, sfixed32 → int; int64, sint64, sfixed64 → bigint; uint32 and fixed32 → bigint
  (Spark's ``upcast.unsigned.ints``: no value wraps to a negative number); uint64 and fixed64 →
  decimal(20,0) (the same option: every value exact; a bigint would turn 2**63 and up negative);
  float, double, bool, string; bytes → binary.
- An enum → string, its symbol's name; a number a proto3 (open) enum does not name → that number
  as text (a proto2 enum is closed: protobuf keeps such a number out of the field).
- A message → struct (null when absent); repeated → array (empty when absent); a map → map; a
  oneof → each member its own nullable field (null unless it is the member set), as spark-protobuf.
- Presence, as protobuf reads it: a field that tracks presence (a message, a oneof member, proto3
  ``optional``, a proto2 ``optional``) is null when absent; a proto3 scalar without ``optional`` is
  never null (absent reads as its default: 0, "", false, the enum's first symbol).
- Well-known types: Timestamp → timestamp (UTC, microseconds: nanoseconds floored); Duration →
  bigint microseconds (floored; Spark reads no Parquet interval, and one number sorts and sums);
  the wrappers (Int32Value, StringValue, ...) → their primitive, nullable (Spark's
  ``unwrap.primitive.wrapper.types``); Struct, Value, ListValue → their JSON text (proto3's JSON
  mapping); Any → JSON text ``{"@type": <type url>, "value": <base64 of the message>}`` (its type
  is not resolved: the registry's schema need not hold it).
- A message with no fields is left out where it is a field (spark-protobuf's default: Parquet has no
  empty group); a top-level one is refused. A recursive message is refused, naming it (Parquet has no
  recursive type; spark-protobuf refuses it too unless told a depth).

Every field is nullable in the Arrow schema, nested ones too (the top level's must be: a tombstone's
row has none; and the Spark source declares its columns by DDL, which keeps no nested NOT NULL):
values are null only where presence says, an array's elements and a map's values never.

A value written with another version of the subject's schema is decoded by field number into these
columns (protobuf's own evolution: fields the reader lacks are skipped, fields the writer lacks read
as absent).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Final

import pyarrow as pa
from google.protobuf import descriptor_pool
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from kafkalog.schemas import protobuf
from kafkalog.schemas.errors import InvalidSchemaError
from pipelines.config.pipeline import RESERVED_COLUMNS
from pipelines.errors import PayloadSchemaError

MAX_FIELDS: Final = 100_000
"""Columns (struct fields at every depth) one reader message may map to: messages used along many
paths are columns at each, so a small schema could otherwise make millions."""
UINT64: Final = pa.decimal128(20, 0)
"""uint64 and fixed64: 20 digits hold 2**64 - 1."""
UTC_MICROS: Final = pa.timestamp("us", tz="UTC")


class Kind(enum.StrEnum):
    """How one value of a field is read (before its repetition); its value is the name
    kafkalog.schemas.protobuf_program's ``FieldShape.kind`` takes."""

    SCALAR = "scalar"
    ENUM = "enum"
    MESSAGE = "message"
    TIMESTAMP = "timestamp"
    DURATION = "duration"
    WRAPPER = "wrapper"
    JSON = "json"  # Struct, Value, ListValue
    ANY = "any"


class Label(enum.StrEnum):
    ONE = "one"
    REPEATED = "repeated"
    MAP = "map"


_SCALARS: Final[Mapping[int, pa.DataType]] = {
    FieldDescriptor.TYPE_INT32: pa.int32(),
    FieldDescriptor.TYPE_SINT32: pa.int32(),
    FieldDescriptor.TYPE_SFIXED32: pa.int32(),
    FieldDescriptor.TYPE_INT64: pa.int64(),
    FieldDescriptor.TYPE_SINT64: pa.int64(),
    FieldDescriptor.TYPE_SFIXED64: pa.int64(),
    FieldDescriptor.TYPE_UINT32: pa.int64(),
    FieldDescriptor.TYPE_FIXED32: pa.int64(),
    FieldDescriptor.TYPE_UINT64: UINT64,
    FieldDescriptor.TYPE_FIXED64: UINT64,
    FieldDescriptor.TYPE_FLOAT: pa.float32(),
    FieldDescriptor.TYPE_DOUBLE: pa.float64(),
    FieldDescriptor.TYPE_BOOL: pa.bool_(),
    FieldDescriptor.TYPE_STRING: pa.string(),
    FieldDescriptor.TYPE_BYTES: pa.binary(),
}
_WELL_KNOWN: Final[Mapping[str, tuple[Kind, pa.DataType | None]]] = {
    "google.protobuf.Timestamp": (Kind.TIMESTAMP, UTC_MICROS),
    "google.protobuf.Duration": (Kind.DURATION, pa.int64()),
    "google.protobuf.Struct": (Kind.JSON, pa.string()),
    "google.protobuf.Value": (Kind.JSON, pa.string()),
    "google.protobuf.ListValue": (Kind.JSON, pa.string()),
    "google.protobuf.Any": (Kind.ANY, pa.string()),
    # the wrappers: their one field ``value``, typed as that scalar is
    **{f"google.protobuf.{name}": (Kind.WRAPPER, None) for name in (
        "DoubleValue", "FloatValue", "Int64Value", "UInt64Value", "Int32Value", "UInt32Value",
        "BoolValue", "StringValue", "BytesValue",
    )},
}  # fmt: skip


@dataclass(frozen=True, eq=False)
class ProtoField:
    """One field of the reader message as a column: ``value_type`` is the Arrow type of one value
    (of an item of a repeated field; a map's value), ``arrow`` the column's (a list or map of it
    where ``label`` says). ``children``: a message's fields (for a map: its key and value, each a
    ProtoField of label ONE); ``enum_names``: an enum's number → symbol; ``presence``: absent reads
    as null (otherwise as the default)."""

    name: str
    number: int
    type: int
    """FieldDescriptor.TYPE_* (the wire form)."""
    kind: Kind
    label: Label
    presence: bool
    value_type: pa.DataType
    arrow: pa.DataType
    children: tuple[ProtoField, ...] = ()
    enum_names: Mapping[int, str] = field(default_factory=dict)
    message: str = ""
    """A message field's message full name ("" for the others)."""
    oneof: int = -1
    """The index of the oneof it is a member of in its message (-1: none): setting one member
    clears the others, as protobuf reads them."""
    closed: bool = False
    """An enum of proto2 (closed): a number it does not name is not its value (protobuf keeps it
    as an unknown field: the field reads as absent, a repeated field without it)."""


@dataclass(frozen=True, eq=False)
class ProtobufColumns:
    """A reader message as columns (see the module doc)."""

    schema: pa.Schema
    fields: tuple[ProtoField, ...]
    """The top-level fields, in the schema's column order."""
    message: str
    """The reader message's full name."""
    indexes: tuple[int, ...]
    """Its message-index path in the reader schema's file (what a framed value of it carries)."""
    compiled: protobuf.ProtobufSchema
    descriptor: Descriptor
    """The message's descriptor (in a pool of its own: the schema and its imports)."""


def compile_schema(text: str, *, where: str) -> protobuf.ProtobufSchema:
    """The schema text compiled (PayloadSchemaError naming ``where`` if it does not)."""
    try:
        return protobuf.parse(text)
    except InvalidSchemaError as exc:
        raise PayloadSchemaError(f"{where} is not a Protobuf schema protoc compiles: {exc}") from None


def descriptor_of(compiled: protobuf.ProtobufSchema, message: str, *, where: str) -> Descriptor:
    """The descriptor of ``message`` (a full name) in a pool holding ``compiled`` and its imports."""
    pool = descriptor_pool.DescriptorPool()
    for file in compiled.file_descriptor_set().file:
        pool.Add(file)
    try:
        return pool.FindMessageTypeByName(message)
    except KeyError:
        raise PayloadSchemaError(f"{where}: no message {message!r} in the schema") from None


def protobuf_columns(text: str, *, where: str = "the Protobuf schema", message: str | None = None) -> ProtobufColumns:
    """The columns of the reader schema ``text``, read as ``message`` (a full name; None: the
    file's first message); PayloadSchemaError naming ``where`` for a schema that cannot be columns."""
    compiled = compile_schema(text, where=where)
    if message is None:
        if compiled.name is None:
            raise PayloadSchemaError(f"{where}: the schema defines no message")
        message = compiled.name
    try:
        indexes = compiled.indexes_of(message)
    except LookupError:
        raise PayloadSchemaError(f"{where}: no message {message!r} in the schema's file") from None
    descriptor = descriptor_of(compiled, message, where=where)
    walk = _Walk(where)
    fields = walk.message_fields(descriptor, "")
    if not fields:
        raise PayloadSchemaError(f"{where}: message {message} has no field to be a column")
    for f in fields:
        if f.name.lower() in RESERVED_COLUMNS:
            raise PayloadSchemaError(f"{where}: field {f.name!r} clashes with a column every raw row has")
    schema = pa.schema([pa.field(f.name, f.arrow) for f in fields])
    return ProtobufColumns(schema, fields, message, indexes, compiled, descriptor)


class _Walk:
    def __init__(self, where: str) -> None:
        self.where = where
        self.walking: list[str] = []
        self.count = 0

    def fail(self, path: str, message: str) -> PayloadSchemaError:
        return PayloadSchemaError(f"{self.where}: {path}: {message}")

    def message_fields(self, descriptor: Descriptor, path: str) -> tuple[ProtoField, ...]:
        """The columns of a message's fields (fields of an empty message type left out)."""
        name = descriptor.full_name
        if name in self.walking:
            chain = " → ".join([*self.walking[self.walking.index(name) :], name])
            raise PayloadSchemaError(
                f"{self.where}: message {name} contains itself ({chain}): a recursive message cannot be columns"
            )
        self.walking.append(name)
        out: list[ProtoField] = []
        lowered: set[str] = set()
        for fd in descriptor.fields:
            where = f"{path}.{fd.name}" if path else fd.name
            if fd.name.lower() in lowered:
                raise self.fail(where, "differs from another field only in case (Spark treats them as one)")
            lowered.add(fd.name.lower())
            made = self.field(fd, where)
            if made is not None:
                out.append(made)
        self.walking.pop()
        return tuple(out)

    def field(self, fd: FieldDescriptor, path: str) -> ProtoField | None:
        self.count += 1
        if self.count > MAX_FIELDS:
            raise self.fail(path, f"the message maps to more than {MAX_FIELDS} columns")
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            entry = fd.message_type
            key = self.one(entry.fields_by_name["key"], f"{path}.key", Label.ONE, presence=False)
            value = self.one(entry.fields_by_name["value"], f"{path}.value", Label.ONE, presence=False)
            if key is None or value is None:
                return None  # a map of empty messages: left out, as an empty message is
            arrow = pa.map_(key.value_type, pa.field("value", value.value_type))
            return ProtoField(fd.name, fd.number, fd.type, Kind.MESSAGE, Label.MAP, False, value.value_type,
                              arrow, (key, value))  # fmt: skip
        label = Label.REPEATED if fd.is_repeated else Label.ONE
        made = self.one(fd, path, label, presence=fd.has_presence)
        if made is not None and fd.containing_oneof is not None:
            made = replace(made, oneof=fd.containing_oneof.index)
        return made

    def one(self, fd: FieldDescriptor, path: str, label: Label, *, presence: bool) -> ProtoField | None:
        children: tuple[ProtoField, ...] = ()
        names: dict[int, str] = {}
        message = ""
        closed = False
        if fd.type in (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_GROUP):
            assert fd.message_type is not None  # a message field has its type
            message = fd.message_type.full_name
            known = _WELL_KNOWN.get(message)
            if known is not None:
                kind, value_type = known
                if kind == Kind.WRAPPER:
                    inner = fd.message_type.fields_by_name["value"]
                    value_type = _SCALARS[inner.type]
                    children = (ProtoField("value", 1, inner.type, Kind.SCALAR, Label.ONE, False, value_type,
                                           value_type),)  # fmt: skip
                assert value_type is not None
            else:
                kind = Kind.MESSAGE
                children = self.message_fields(fd.message_type, path)
                if not children:
                    return None
                value_type = pa.struct([pa.field(c.name, c.arrow) for c in children])
        elif fd.type == FieldDescriptor.TYPE_ENUM:
            assert fd.enum_type is not None
            kind, value_type = Kind.ENUM, pa.string()
            names = {v.number: v.name for v in reversed(fd.enum_type.values)}  # an alias: its first name
            closed = fd.enum_type.is_closed
        else:
            kind, value_type = Kind.SCALAR, _SCALARS[fd.type]
        arrow = pa.list_(pa.field("element", value_type)) if label == Label.REPEATED else value_type
        return ProtoField(fd.name, fd.number, fd.type, kind, label, presence and label == Label.ONE, value_type,
                          arrow, children, names, message, closed=closed)  # fmt: skip
