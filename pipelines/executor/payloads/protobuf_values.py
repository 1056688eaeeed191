"""``decoder.format: protobuf``: each value is a Protobuf message framed as Confluent's
ProtobufSerializer frames it (kafkalog.schemas.wire: magic byte, schema id, message indexes).

Each value is read as the run's reader message (pipelines.schemas.protobuf_columns: the subject's
reader version, the record strategy's message or the file's first) by field number, whatever
version of the subject wrote it: that is protobuf's own evolution (fields the reader lacks are
skipped, fields the writer lacks are absent). The message indexes are checked against the writer
schema: they must name a message of the reader's full name (each distinct frame once).

Two decoders, one result. The reader message is compiled into a program once per task and the
payloads of a chunk are decoded by it straight into column buffers (kafkalog.schemas.protobuf_program:
its C kernel, or where that is not built its pure-Python twin, which judges every value the same),
wrapped as Arrow arrays here (enum numbers named, the JSON of Struct, Value, ListValue and Any made
from their bytes). For what the program does not do (proto2 groups, messages nested more than 64
deep; a chunk where the bytes of a Struct, Value, ListValue or Any do not parse, which the program
keeps as they are), protobuf's own parser (upb) reads each payload into a message, which is made a row as the
mapping says, and Arrow a table of the rows: that path is the reference the kernel is tested
against. They differ only in what is refused: the kernel refuses a non-repeated message field that
occurs twice in one payload (``merging is not supported``: protobuf merges the two, serializers
never write that) and keeps a map key given twice as written (protobuf keeps the last value), and
words its reasons more precisely (``truncated varint at byte 12``).

A value is bad, with its reason, if its frame is (``wrong magic byte 0x7b``, ``value shorter than
5 bytes``, ``invalid message index ...``), its id is none of the subject's (``unknown schema id 7``),
its message indexes name no message of its schema or another message than the reader's
(``message indexes [1] name shop.Other, not the reader's shop.Order``), or its payload does not
parse (``corrupt Protobuf payload: ...``: truncated, a wrong wire type for a known field, invalid
UTF-8 in a proto3 string). Each value is parsed within its own bounds, so a corrupt one is bad
alone.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf import any_pb2, json_format, message_factory, struct_pb2
from google.protobuf.message import DecodeError, Message

from kafkalog.schemas import protobuf_program
from kafkalog.schemas.errors import SchemaResolutionError, WireFormatError
from kafkalog.schemas.wire import unframe
from pipelines.config.pipeline import Decoder
from pipelines.executor.halving import Parsed, first_line
from pipelines.executor.payloads.avro_values import _drop_missing
from pipelines.schemas.protobuf_columns import (
    Kind,
    Label,
    ProtobufColumns,
    ProtoField,
    compile_schema,
    protobuf_columns,
)
from pipelines.schemas.resolved import SubjectSchemas

Convert = Callable[[Any], Any]
_MAX_PATHS = 10_000
"""Frames judged bad that are remembered (the good ones always are)."""


class ProtobufValues:
    """Framed Protobuf values into the reader message's columns (see the module doc). Made per
    task from the run's schemas; a writer schema is compiled once, when a value first names it."""

    def __init__(self, decoder: Decoder, schemas: SubjectSchemas) -> None:
        self.decoder = decoder
        self.schemas = schemas
        self.columns: ProtobufColumns = protobuf_columns(
            schemas.reader, where=schemas.describe(), message=schemas.message
        )
        self.schema = self.columns.schema
        self.required = decoder.required
        self._class = message_factory.GetMessageClass(self.columns.descriptor)
        self._row = _message_converter(self.columns.fields)
        self._paths: dict[tuple[int, tuple[int, ...]], str] = {}
        """(schema id, message indexes) → "" (the reader's message) or the reason the value is bad."""
        self._program: protobuf_program.Program | None = None
        try:
            self._program = protobuf_program.compile_program(self.columns.fields)
        except SchemaResolutionError:
            self._program = None  # what the kernel does not do: protobuf's parser reads it
        self._header: bytes | None = None
        """The frame (magic byte, id, message indexes) of the last good value: most values share it."""

    def _check_path(self, schema_id: int, indexes: tuple[int, ...]) -> str:
        """ "" when ``indexes`` in the schema ``schema_id`` name the reader's message, else the reason."""
        key = (schema_id, indexes)
        found = self._paths.get(key)
        if found is not None:
            return found
        reader = self.columns
        if schema_id == self.schemas.reader_id:
            compiled = reader.compiled
        elif schema_id in self.schemas.writers:
            compiled = compile_schema(self.schemas.writers[schema_id], where=f"schema id {schema_id}")
        else:
            return f"unknown schema id {schema_id}"  # not kept: a flood of made-up ids must not grow the cache
        try:
            name, _ = compiled.message_at(indexes)
        except LookupError as exc:
            reason = f"invalid message indexes {list(indexes)}: {exc}"
        else:
            reason = "" if name == reader.message else (
                f"message indexes {list(indexes)} name {name}, not the reader's {reader.message}"
            )  # fmt: skip
        if not reason or len(self._paths) < _MAX_PATHS:  # made-up index paths must not grow it without end
            self._paths[key] = reason
        return reason

    def parse(self, values: Sequence[bytes | None]) -> tuple[list[Parsed], list[tuple[int, str]]]:
        """The decoded rows (one piece, in message order) and the bad (index, reason) pairs."""
        if self._program is not None:
            try:
                return self._parse_native(values, self._program)
            except _NotJson:
                pass  # a Struct or Any whose bytes do not parse: protobuf's parser finds which value
        return self._parse_upb(values)

    def _parse_native(
        self, values: Sequence[bytes | None], program: protobuf_program.Program
    ) -> tuple[list[Parsed], list[tuple[int, str]]]:
        """The kernel's decoding: the values framed as the last good one was in one call (the
        frame compared in C, byte for byte); the others unframed here, then each frame's in a call."""
        bad: list[tuple[int, str]] = []
        pieces: list[Parsed] = []
        rest: Sequence[int] = range(len(values))
        if self._header is not None:
            rest = self._decode_group(values, range(len(values)), self._header, program, pieces, bad)
        groups: dict[bytes, list[int]] = {}
        for i in rest:
            value = values[i]
            if value is None:
                bad.append((i, "the message has no value (null)"))
                continue
            try:
                framed = unframe(value, message_indexes=True)
            except WireFormatError as exc:
                bad.append((i, exc.reason))
                continue
            assert framed.message_indexes is not None
            reason = self._check_path(framed.schema_id, framed.message_indexes)
            if reason:
                bad.append((i, reason))
                continue
            groups.setdefault(bytes(value[: framed.payload_offset]), []).append(i)
        for header, indexes in groups.items():
            left = self._decode_group(values, indexes, header, program, pieces, bad)
            assert not left  # every one starts with its own frame
            self._header = header
        if len(pieces) > 1:  # several frames: one piece, in message order
            table = pa.concat_tables([p.table for p in pieces])
            order = [i for p in pieces for i in p.indexes]
            pieces = [Parsed(sorted(order), table.take(pc.sort_indices(pa.array(order))))]
        bad.sort()
        if self.required and pieces:
            kept, missing = _drop_missing(pieces[0].table, pieces[0].indexes, self.required)
            return kept, sorted([*bad, *missing])
        return pieces, bad

    def _decode_group(
        self,
        values: Sequence[bytes | None],
        indexes: Sequence[int],
        header: bytes,
        program: protobuf_program.Program,
        pieces: list[Parsed],
        bad: list[tuple[int, str]],
    ) -> list[int]:
        """Decodes the values at ``indexes`` framed with ``header`` into a piece (and their bad);
        returns the indexes of those framed otherwise."""
        whole = isinstance(indexes, range) and len(indexes) == len(values)
        group = values if whole else [values[i] for i in indexes]
        buffers, failed, others = protobuf_program.decode(group, header, program)
        gone = {k for k, _ in failed}
        gone.update(others)
        bad.extend((indexes[k], f"corrupt Protobuf payload: {reason}") for k, reason in failed)
        kept = [index for k, index in enumerate(indexes) if k not in gone] if gone else list(indexes)
        if kept:
            pieces.append(Parsed(kept, self._table(buffers)))
        return [indexes[k] for k in others]

    def _table(self, buffers: list[protobuf_program.ColumnBuffers]) -> pa.Table:
        arrays = _Arrays(buffers)
        columns = [arrays.field(f) for f in self.columns.fields]
        return pa.Table.from_arrays(columns, schema=self.schema)

    def _parse_upb(self, values: Sequence[bytes | None]) -> tuple[list[Parsed], list[tuple[int, str]]]:
        bad: list[tuple[int, str]] = []
        rows: list[dict[str, Any]] = []
        indexes: list[int] = []
        parse = self._class.FromString
        row = self._row
        for i, value in enumerate(values):
            if value is None:
                bad.append((i, "the message has no value (null)"))
                continue
            try:
                framed = unframe(value, message_indexes=True)
            except WireFormatError as exc:
                bad.append((i, exc.reason))
                continue
            assert framed.message_indexes is not None
            reason = self._check_path(framed.schema_id, framed.message_indexes)
            if reason:
                bad.append((i, reason))
                continue
            try:
                message = parse(value[framed.payload_offset :])
            except DecodeError as exc:
                bad.append((i, f"corrupt Protobuf payload: {first_line(str(exc)) or 'does not parse'}"))
                continue
            try:
                rows.append(row(message))
            except _NotJson as exc:
                bad.append((i, f"the message cannot be a row: {exc}"))
                continue
            indexes.append(i)
        if not rows:
            return [], bad
        try:
            table = pa.Table.from_pylist(rows, schema=self.schema)
        except (pa.ArrowException, ValueError, TypeError, OverflowError):
            # a value a column cannot hold (a proto2 string that is not UTF-8, which protobuf reads
            # as bytes): found row by row, so that it is bad alone
            tables, kept = [], []
            for one, i in zip(rows, indexes, strict=True):
                try:
                    tables.append(pa.Table.from_pylist([one], schema=self.schema))
                    kept.append(i)
                except (pa.ArrowException, ValueError, TypeError, OverflowError) as exc:
                    bad.append((i, f"the message cannot be a row: {first_line(str(exc))}"))
            bad.sort()
            if not tables:
                return [], bad
            table, indexes = pa.concat_tables(tables), kept
        if self.required:
            pieces, missing = _drop_missing(table, indexes, self.required)
            return pieces, sorted([*bad, *missing])
        return [Parsed(indexes, table)], bad


def _message_converter(fields: Sequence[ProtoField]) -> Callable[[Message], dict[str, Any]]:
    """A message into the dict of its columns' values."""
    getters = [(f.name, _getter(f)) for f in fields]

    def convert(message: Message) -> dict[str, Any]:
        return {name: get(message) for name, get in getters}

    return convert


def _getter(f: ProtoField) -> Callable[[Message], Any]:
    """The value of field ``f`` of a message, as its column holds it."""
    name = f.name
    if f.label == Label.MAP:
        key, value = (_value(c) for c in f.children)
        return lambda m: [(key(k), value(v)) for k, v in getattr(m, name).items()]
    one = _value(f)
    if f.label == Label.REPEATED:
        return lambda m: [one(v) for v in getattr(m, name)]
    if f.presence:
        return lambda m: one(getattr(m, name)) if m.HasField(name) else None
    if one is _same:
        return lambda m: getattr(m, name)
    return lambda m: one(getattr(m, name))


def _same(value: Any) -> Any:
    return value


def _value(f: ProtoField) -> Convert:
    """One value of field ``f`` (an item of a repeated field) as its column holds it."""
    if f.kind == Kind.SCALAR:
        return _same
    if f.kind == Kind.ENUM:
        names = f.enum_names
        return lambda n: names.get(n) or str(n)
    if f.kind == Kind.MESSAGE:
        return _message_converter(f.children)
    if f.kind in (Kind.TIMESTAMP, Kind.DURATION):
        return lambda t: (t.seconds * 1_000_000_000 + t.nanos) // 1000
    if f.kind == Kind.WRAPPER:
        return lambda w: w.value
    if f.kind == Kind.JSON:
        return _struct_json
    return _any_json


class _Arrays:
    """The kernel's column buffers as Arrow arrays, taken in the order the program made the
    columns (protobuf_program: a field's column, then its children's, depth first)."""

    def __init__(self, buffers: list[protobuf_program.ColumnBuffers]) -> None:
        self.buffers = buffers
        self.next = 1  # 0 is the root message's struct

    def take(self) -> tuple[int, int, pa.Buffer | None, pa.Buffer | None, pa.Buffer | None]:
        n, nulls, validity, one, two = self.buffers[self.next]
        self.next += 1
        return n, nulls, *(None if b is None else pa.py_buffer(b) for b in (validity, one, two))  # type: ignore[return-value]

    def field(self, f: ProtoField) -> pa.Array:
        if f.label == Label.MAP:
            n, nulls, valid, offsets, _ = self.take()
            key_field, value_field = f.children
            key, value = self.value(key_field), self.value(value_field)
            kind = f.arrow
            entries = pa.StructArray.from_arrays([key, value], fields=[kind.key_field, kind.item_field])
            return pa.Array.from_buffers(kind, n, [valid, offsets], nulls, children=[entries])
        if f.label == Label.REPEATED:
            n, nulls, valid, offsets, _ = self.take()
            items = self.value(f)
            return pa.Array.from_buffers(f.arrow, n, [valid, offsets], nulls, children=[items])
        return self.value(f)

    def value(self, f: ProtoField) -> pa.Array:
        """One value of ``f`` a row (an element of a repeated field): its column, and its children."""
        if f.kind == Kind.MESSAGE:
            n, nulls, valid, _, _ = self.take()
            children = [self.field(c) for c in f.children]
            return pa.Array.from_buffers(f.value_type, n, [valid], nulls, children=children)
        if f.kind == Kind.WRAPPER:
            return self.leaf(f.children[0].value_type, Kind.SCALAR, f.children[0])
        return self.leaf(f.value_type, f.kind, f)

    def leaf(self, kind: pa.DataType, how: Kind, f: ProtoField) -> pa.Array:
        n, nulls, valid, one, two = self.take()
        if how == Kind.ENUM:
            numbers = pa.Array.from_buffers(pa.int32(), n, [valid, one], nulls)
            return _enum_names(numbers, f.enum_names)
        if how in (Kind.JSON, Kind.ANY):
            raw = pa.Array.from_buffers(pa.binary(), n, [valid, one, two], nulls)
            return pa.array([None if b is None else _json_of(f.message, b) for b in raw.to_pylist()], pa.string())
        if kind == pa.bool_():
            return pa.Array.from_buffers(pa.uint8(), n, [valid, one], nulls).cast(pa.bool_())
        if pa.types.is_string(kind) or pa.types.is_binary(kind):
            return pa.Array.from_buffers(kind, n, [valid, one, two], nulls)
        return pa.Array.from_buffers(kind, n, [valid, one], nulls)


def _enum_names(numbers: pa.Array, names: Mapping[int, str]) -> pa.Array:
    """Each number's symbol; a number the enum does not name as its digits."""
    known = pa.array(list(names), pa.int32())
    symbols = pa.array(list(names.values()), pa.string())
    where = pc.index_in(numbers, value_set=known)
    named = pc.take(symbols, where)
    unnamed = pc.and_(pc.is_null(where), pc.is_valid(numbers))
    if not pc.any(unnamed).as_py():
        return named
    return pc.if_else(unnamed, pc.cast(numbers, pa.string()), named)


_JSON_TYPES: dict[str, Any] = {
    "google.protobuf.Struct": struct_pb2.Struct,
    "google.protobuf.Value": struct_pb2.Value,
    "google.protobuf.ListValue": struct_pb2.ListValue,
    "google.protobuf.Any": any_pb2.Any,
}


class _NotJson(Exception):
    """The bytes of a Struct, Value, ListValue or Any (the kernel keeps them as they are) do not parse."""


def _json_of(message: str, data: bytes) -> str:
    """The JSON text of a Struct, Value, ListValue or Any from its bytes (as the mapping says)."""
    try:
        value = _JSON_TYPES[message].FromString(data)
    except (DecodeError, UnicodeDecodeError) as exc:
        raise _NotJson(str(exc)) from None
    if message == "google.protobuf.Any":
        return _any_json(value)
    return _struct_json(value)


def _struct_json(value: Any) -> str:
    try:
        as_dict = json_format.MessageToDict(value)
    except ValueError as exc:  # a number that JSON has not: Infinity, NaN
        raise _NotJson(first_line(str(exc))) from None
    return json.dumps(as_dict, separators=(",", ":"), ensure_ascii=False)


def _any_json(value: Any) -> str:
    return json.dumps(
        {"@type": value.type_url, "value": base64.b64encode(value.value).decode("ascii")}, separators=(",", ":")
    )
