"""``decoder.format: protobuf``: each value is a Protobuf message framed as Confluent's
ProtobufSerializer frames it (kafkalog.schemas.wire: magic byte, schema id, message indexes).

Each value is read as the run's reader message (pipelines.schemas.protobuf_columns: the subject's
reader version, the record strategy's message or the file's first) by field number, whatever
version of the subject wrote it: that is protobuf's own evolution (fields the reader lacks are
skipped, fields the writer lacks are absent). The message indexes are checked against the writer
schema: they must name a message of the reader's full name. Decoding is protobuf's (upb, its C
parser), then each message is made a row as the mapping says and the rows a table by Arrow.

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
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
from google.protobuf import json_format, message_factory
from google.protobuf.message import DecodeError, Message

from kafkalog.schemas.errors import WireFormatError
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
        self._paths[key] = reason
        return reason

    def parse(self, values: Sequence[bytes | None]) -> tuple[list[Parsed], list[tuple[int, str]]]:
        """The decoded rows (one piece, in message order) and the bad (index, reason) pairs."""
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
            rows.append(row(message))
            indexes.append(i)
        if not rows:
            return [], bad
        try:
            table = pa.Table.from_pylist(rows, schema=self.schema)
        except (pa.ArrowException, ValueError, TypeError, OverflowError) as exc:  # not expected: the mapping is total
            bad.extend((i, f"the message cannot be a row: {first_line(str(exc))}") for i in indexes)
            return [], sorted(bad)
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
        return lambda j: json.dumps(json_format.MessageToDict(j), separators=(",", ":"), ensure_ascii=False)
    return lambda a: json.dumps(
        {"@type": a.type_url, "value": base64.b64encode(a.value).decode("ascii")}, separators=(",", ":")
    )
