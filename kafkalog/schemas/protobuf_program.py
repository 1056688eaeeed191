"""A Protobuf reader message compiled into a flat program that the C kernel ``_protobuf_columns``
runs over a chunk of payloads, writing straight into column buffers.

Input: the reader message's field tree, as :class:`FieldShape` (the loader's mapping,
pipelines.schemas.protobuf_columns, makes it: which fields are columns, their kinds, labels and
presence). Output: :class:`Program`: the ``code`` (plain ints) and the ``columns`` (storage kind and
parent of each, in tree order: a column's children follow it, depth first), which the caller wraps
as Arrow arrays typed as its mapping says.

**Code**: one node per message (inlined at each use: columns differ per path), each
``[struct column or -1, field count, then 8 ints per field: number, op, label, column, element
column, node of the field's message or of a closed enum's numbers (or 0), packable, oneof (its
index in the message, or -1)]``; a closed enum's numbers are ``[count, numbers in order...]``: a
number not among them is skipped, as protobuf keeps it out of the field. A node with no struct
column (-1, or :data:`MAP_ENTRY`) writes its fields into columns of its parent: a map entry (key
and value), a wrapper (its ``value``).

Decoding is by field number, as protobuf's: a field the reader lacks, or one of a wire type its
type does not have, is skipped (a map entry holding one is left out of its map); the last
occurrence of a non-repeated scalar wins, and clears the other members of its oneof; repeated
fields take packed and unpacked chunks alike. Absent fields read as null where they track presence,
else as their zero value (an absent message without presence, a map's value, as its empty
message). A non-repeated message field given twice in one payload is refused (protobuf merges the
two; no serializer writes that).

**Storage**: :class:`Kind`; uint64 and fixed64 as 16-byte little-endian two's complement (Arrow's
decimal128(20, 0)), uint32 and fixed32 as int64, Timestamp and Duration as int64 microseconds
(floored), enums as their int32 number (names are the caller's), Struct, Value, ListValue and Any
as the bytes of their message (the caller makes them JSON).

:func:`compile_program` raises :class:`SchemaResolutionError` for what the kernel does not do
(proto2 groups, messages nested deeper than :data:`MAX_DEPTH`); the caller decodes those with
protobuf's own parser. The kernel is optional (built by setup.py where a compiler is); where it is
not, its pure-Python twin ``_protobuf_columns_py`` runs the program (the same result, byte for
byte: a value is judged the same on every executor). ``NATIVE`` says whether the C one imported
(KAFKALOG_PURE_PYTHON=1 turns it off, as the other kernels).
"""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Final, Protocol

from kafkalog.schemas.errors import SchemaResolutionError

MAX_DEPTH: Final = 64
"""Messages nested deeper than this are decoded by protobuf's parser (the kernel recurses)."""
MAX_FIELDS_PER_MESSAGE: Final = 4096
"""The kernel keeps a position per field of a message on its stack."""
FIELD_INTS: Final = 8
"""Ints of code per field of a message node."""
MAP_ENTRY: Final = -2
"""The struct column of a map entry's node: an entry holding a field the reader does not know is
left out of its map, as protobuf leaves it (it keeps it among the message's unknown fields)."""

# FieldDescriptor.TYPE_* (descriptor.proto's numbers)
_DOUBLE, _FLOAT, _INT64, _UINT64, _INT32, _FIXED64, _FIXED32, _BOOL, _STRING, _GROUP, _MESSAGE, _BYTES = range(1, 13)
_UINT32, _ENUM, _SFIXED32, _SFIXED64, _SINT32, _SINT64 = range(13, 19)


class Op(enum.IntEnum):
    """How one value is read (its wire type follows)."""

    INT32 = 1
    INT64 = 2
    UINT32 = 3  # into int64
    UINT64 = 4  # into 16 bytes
    SINT32 = 5
    SINT64 = 6
    FIXED32 = 7  # into int64
    SFIXED32 = 8
    FIXED64 = 9  # into 16 bytes
    SFIXED64 = 10
    FLOAT = 11
    DOUBLE = 12
    BOOL = 13
    STRING = 14  # checked to be UTF-8
    BYTES = 15
    ENUM = 16  # its number, int32
    MESSAGE = 17  # the node at the field's ``node``
    TIME = 18  # Timestamp or Duration: seconds (1) and nanos (2) into int64 microseconds, floored
    RAW = 19  # a message's bytes as they are


class Label(enum.IntEnum):
    ONE = 0  # absent: the zero value
    PRESENCE = 1  # absent: null
    REPEATED = 2
    MAP = 3


class Kind(enum.IntEnum):
    """A column's storage."""

    BOOLEAN = 1  # one byte a value
    INT32 = 2
    INT64 = 3
    FLOAT32 = 4
    FLOAT64 = 5
    BINARY = 6  # int32 offsets and the bytes
    DECIMAL128 = 7  # 16 bytes a value
    STRUCT = 8  # validity only
    LIST = 9  # int32 offsets; one child
    MAP = 10  # int32 offsets; a key and a value child


_SCALAR_OPS: Final = {
    _INT32: (Op.INT32, Kind.INT32), _SINT32: (Op.SINT32, Kind.INT32), _SFIXED32: (Op.SFIXED32, Kind.INT32),
    _INT64: (Op.INT64, Kind.INT64), _SINT64: (Op.SINT64, Kind.INT64), _SFIXED64: (Op.SFIXED64, Kind.INT64),
    _UINT32: (Op.UINT32, Kind.INT64), _FIXED32: (Op.FIXED32, Kind.INT64),
    _UINT64: (Op.UINT64, Kind.DECIMAL128), _FIXED64: (Op.FIXED64, Kind.DECIMAL128),
    _FLOAT: (Op.FLOAT, Kind.FLOAT32), _DOUBLE: (Op.DOUBLE, Kind.FLOAT64), _BOOL: (Op.BOOL, Kind.BOOLEAN),
    _STRING: (Op.STRING, Kind.BINARY), _BYTES: (Op.BYTES, Kind.BINARY), _ENUM: (Op.ENUM, Kind.INT32),
}  # fmt: skip
_PACKABLE: Final = frozenset(_SCALAR_OPS) - {_STRING, _BYTES}


class FieldShape(Protocol):
    """A field of the reader message as a column (pipelines.schemas.protobuf_columns.ProtoField)."""

    @property
    def name(self) -> str: ...
    @property
    def number(self) -> int: ...
    @property
    def type(self) -> int: ...
    @property
    def kind(self) -> str: ...  # scalar, enum, message, timestamp, duration, wrapper, json, any
    @property
    def label(self) -> str: ...  # one, repeated, map
    @property
    def presence(self) -> bool: ...
    @property
    def children(self) -> Sequence[FieldShape]: ...
    @property
    def oneof(self) -> int: ...  # the index of its oneof in its message, -1 for none
    @property
    def closed(self) -> bool: ...  # a proto2 enum: only the numbers it names are values
    @property
    def enum_names(self) -> Mapping[int, str]: ...  # an enum's number → name


@dataclass(frozen=True)
class Program:
    """A compiled reader message: ``code`` for the kernel, ``columns`` as (kind, parent) in tree order."""

    code: tuple[int, ...]
    columns: tuple[tuple[int, int], ...]


def compile_program(fields: Sequence[FieldShape]) -> Program:
    """The program that reads a message of ``fields`` into a root struct column and theirs."""
    return _Compiler().program(fields)


class _Compiler:
    def __init__(self) -> None:
        self.code: list[int] = []
        self.columns: list[tuple[int, int]] = []

    def program(self, fields: Sequence[FieldShape]) -> Program:
        root = self.column(Kind.STRUCT, -1)
        self.node(root, root, fields, 0)
        return Program(tuple(self.code), tuple(self.columns))

    def column(self, kind: Kind, parent: int) -> int:
        self.columns.append((int(kind), parent))
        return len(self.columns) - 1

    def node(self, struct: int, parent: int, fields: Sequence[FieldShape], depth: int) -> int:
        """A message node whose fields' columns are children of ``parent`` (``struct`` its own
        struct column, or -1); returns where it starts. Children nodes follow it."""
        if depth > MAX_DEPTH:
            raise SchemaResolutionError(f"messages nested more than {MAX_DEPTH} deep")
        if len(fields) > MAX_FIELDS_PER_MESSAGE:
            raise SchemaResolutionError(f"a message of more than {MAX_FIELDS_PER_MESSAGE} fields")
        at = len(self.code)
        self.code += [struct, len(fields)]
        slots = len(self.code)
        self.code += [0] * (FIELD_INTS * len(fields))
        for k, f in enumerate(fields):
            self.code[slots + FIELD_INTS * k : slots + FIELD_INTS * (k + 1)] = self.field(f, parent, depth)
        return at

    def field(self, f: FieldShape, parent: int, depth: int) -> list[int]:
        if f.type == _GROUP:
            raise SchemaResolutionError(f"field {f.name} is a proto2 group")
        if f.label == "map":
            column = self.column(Kind.MAP, parent)
            key, value = f.children
            key_col, _, _ = self.value(key, column, depth)
            value_col, value_op, value_node = self.value(value, column, depth)
            value_node = value_node or self.numbers(value)  # a closed enum's: an entry of another number is left out
            entry = self.node_of(
                [(key, key_col, self.op_of(key), 0), (value, value_col, value_op, value_node)], struct=MAP_ENTRY
            )
            return [f.number, int(Op.MESSAGE), int(Label.MAP), column, -1, entry, 0, -1]
        if f.label == "repeated":
            column = self.column(Kind.LIST, parent)
            element, op, node = self.value(f, column, depth)
            packable = int(f.type in _PACKABLE and f.kind in ("scalar", "enum"))
            return [f.number, int(op), int(Label.REPEATED), column, element, node or self.numbers(f), packable, -1]
        column, op, node = self.value(f, parent, depth)
        label = Label.PRESENCE if f.presence else Label.ONE
        return [f.number, int(op), int(label), column, column, node or self.numbers(f), 0, f.oneof]

    def numbers(self, f: FieldShape) -> int:
        """Where a closed enum's numbers are in the code (0 for any other field)."""
        if f.kind != "enum" or not f.closed:
            return 0
        at = len(self.code)
        self.code += [len(f.enum_names), *sorted(f.enum_names)]
        return at

    def op_of(self, f: FieldShape) -> Op:
        return _SCALAR_OPS[f.type][0]

    def value(self, f: FieldShape, parent: int, depth: int) -> tuple[int, Op, int]:
        """One value of ``f`` (an element of a repeated field): its column, op and node."""
        if f.kind in ("scalar", "enum"):
            op, kind = _SCALAR_OPS[f.type]
            return self.column(kind, parent), op, 0
        if f.kind in ("timestamp", "duration"):
            return self.column(Kind.INT64, parent), Op.TIME, 0
        if f.kind in ("json", "any"):
            return self.column(Kind.BINARY, parent), Op.RAW, 0
        if f.kind == "wrapper":
            (inner,) = f.children
            op, kind = _SCALAR_OPS[inner.type]
            column = self.column(kind, parent)
            return column, Op.MESSAGE, self.node_of([(inner, column, op, 0)])
        struct = self.column(Kind.STRUCT, parent)
        return struct, Op.MESSAGE, self.deferred(struct, f.children, depth + 1)

    def node_of(self, fields: list[tuple[FieldShape, int, Op, int]], struct: int = -1) -> int:
        """A node without a struct column, of fields whose columns are made already (map entries, wrappers)."""
        at = len(self.code)
        self.code += [struct, len(fields)]
        for f, column, op, node in fields:
            self.code += [f.number, int(op), int(Label.ONE), column, column, node, 0, -1]
        return at

    def deferred(self, struct: int, fields: Sequence[FieldShape], depth: int) -> int:
        return self.node(struct, struct, fields, depth)


def _load() -> tuple[ModuleType, bool, str]:
    from kafkalog.schemas import _protobuf_columns_py  # noqa: PLC0415 - it imports this module's names

    if os.environ.get("KAFKALOG_PURE_PYTHON") == "1":
        return _protobuf_columns_py, False, "KAFKALOG_PURE_PYTHON=1"
    try:
        from kafkalog.schemas import _protobuf_columns  # noqa: PLC0415 - optional: absent when not compiled
    except ImportError as exc:
        return _protobuf_columns_py, False, f"the C kernel did not import: {exc}"
    return _protobuf_columns, True, ""


implementation, NATIVE, WHY_NOT = _load()
"""The module that decodes (the C kernel, or its pure-Python twin); whether it is the C one; if not, why."""

ColumnBuffers = tuple[int, int, bytes | None, bytes | None, bytes | None]
"""(length, null count, validity bitmap or None, values or offsets, a binary column's bytes)."""


def decode(
    values: Sequence[bytes | None], header: bytes, program: Program
) -> tuple[list[ColumnBuffers], list[tuple[int, str]], list[int]]:
    """The columns of the ``values`` that start with ``header`` (each payload after it), the
    (index, reason) of each of those that is bad (it left nothing in the columns), and the indexes
    of the values that do not start with it (None among them)."""
    return implementation.decode(values, header, program.code, program.columns)  # type: ignore[no-any-return]
