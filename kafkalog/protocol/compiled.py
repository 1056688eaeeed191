"""The generic codec of kafkalog.protocol.types run in C, over the same schemas compiled to data.

Role: every request and response is decoded and encoded here (kafkalog.protocol.frames). A schema
is compiled once to nested tuples (``program``) that the C walk (``_wire``) follows; it gives
exactly the reference's result, or declines (None), and then the reference runs: the reference
alone words errors, so a malformed frame's ProtocolError is the same either way. Without the C
module (not built, or KAFKALOG_PURE_PYTHON=1) the reference runs alone.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

from kafkalog.protocol import types as t
from kafkalog.protocol.types import (
    REQUIRED,
    Array,
    CompactArray,
    FlexibleSchema,
    Reader,
    Region,
    Schema,
    Struct,
    Type,
    Writer,
)

Chunk = bytes | memoryview | Region


def _load() -> ModuleType | None:
    if os.environ.get("KAFKALOG_PURE_PYTHON") == "1":
        return None
    try:
        from kafkalog.protocol import _wire  # noqa: PLC0415 - optional: absent when not compiled
    except ImportError:
        return None
    _wire.configure(REQUIRED)
    return _wire


native: ModuleType | None = _load()
"""The C walk, or None where the reference runs alone."""

_SCALARS: dict[int, int] = {
    id(kind): code
    for code, kind in enumerate(
        (
            t.INT8, t.INT16, t.INT32, t.INT64, t.BOOLEAN, t.STRING, t.NULLABLE_STRING, t.BYTES, t.RECORDS,
            t.UNSIGNED_VARINT, t.COMPACT_STRING, t.COMPACT_NULLABLE_STRING, t.COMPACT_BYTES,
            t.COMPACT_NULLABLE_BYTES, t.COMPACT_RECORDS, t.UUID,
        ),
        start=1,
    )
}  # fmt: skip
"""The C walk's code of each primitive type (the same numbers as _wire.c's enum)."""
_ARRAY, _COMPACT_ARRAY, _STRUCT = 20, 21, 22

_UNCOMPILED = object()


def program(kind: Type) -> tuple[Any, ...] | None:
    """``kind`` compiled for the C walk (once: kept on the type itself, so it lives and dies with
    it); None if it holds a type the walk does not know."""
    found = vars(kind).get("_wire_program", _UNCOMPILED)
    if found is _UNCOMPILED:
        found = _compile(kind)
        kind._wire_program = found  # type: ignore[attr-defined]
    return found  # type: ignore[no-any-return]


def _compile(kind: Type) -> tuple[Any, ...] | None:
    code = _SCALARS.get(id(kind))
    if code is not None:
        return (code,)
    if type(kind) in (Array, CompactArray):
        assert isinstance(kind, Array)
        element = program(kind.element)
        if element is None:
            return None
        code = _COMPACT_ARRAY if isinstance(kind, CompactArray) else _ARRAY
        return (code, kind.nullable, kind.element.min_size, element)
    if type(kind) in (Schema, FlexibleSchema):
        assert isinstance(kind, Schema)
        fields = [program(field) for _, field, _ in kind.plan]
        if any(field is None for field in fields):
            return None
        tagged: tuple[tuple[int, str, tuple[Any, ...]], ...] | None = None
        if isinstance(kind, FlexibleSchema):
            compiled = [(field.tag, field.name, program(field.type)) for field in kind.tagged]
            if any(inner is None for _, _, inner in compiled):
                return None
            tagged = tuple((tag, name, inner) for tag, name, inner in compiled if inner is not None)
        return (
            _STRUCT,
            tuple(name for name, _, _ in kind.plan),
            tuple(fields),
            tuple(default for _, _, default in kind.plan),
            tagged,
        )
    return None  # a type made elsewhere: the reference's alone


def decode(schema: Schema, reader: Reader) -> Struct:
    """``schema.decode(reader)``, in C where it can be."""
    compiled = program(schema) if native is not None else None
    if compiled is not None:
        assert native is not None
        found = native.decode(compiled, reader.buf, reader.pos, reader.end)
        if found is not None:
            value, reader.pos = found
            return value  # type: ignore[no-any-return]
    return schema.decode(reader)


def encode(schema: Schema, value: Struct) -> tuple[list[Chunk], int]:
    """``value`` encoded by ``schema`` (in C where it can be) as a Writer ends: runs of bytes, and
    regions apart; and their total size."""
    compiled = program(schema) if native is not None else None
    if compiled is not None:
        assert native is not None
        found = native.encode(compiled, value)
        if found is not None:
            return found  # type: ignore[no-any-return]
    out = Writer()
    schema.encode(value, out)
    return out.finish(), out.size
