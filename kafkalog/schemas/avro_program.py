"""Avro schema resolution compiled ahead of time: a (writer, reader) pair of schemas to a flat program
that decodes the writer's binary data straight into the columns of the reader's schema.

The driver compiles a program once per writer schema and ships it to the tasks (it is plain data:
tuples of ints and strings, picklable, and :meth:`Program.to_json` / :meth:`Program.from_json`);
a task runs it over a chunk of values with :mod:`kafkalog.schemas.avro_columns` (a C kernel, or its
pure-Python twin). Compiling refuses, with :class:`SchemaResolutionError` naming the first cause, a
pair the reader cannot read (the checks of :mod:`kafkalog.schemas.avro_compat`), a recursive type
(columns are a finite tree, as Spark's are) and a program that would grow past
:data:`MAX_PROGRAM_LENGTH` (records shared along many paths are inlined at each).

**Columns** follow the reader's schema, in tree order (a column's children follow it, depth first):
a record is a struct column with a child per field; an array a list column (int32 offsets) with one
child ``item``; a map a map column (offsets) with a ``key`` (string) and a ``value`` child; a union
``[null, X]`` (either order) is X's column, nullable; a union of several non-null types a struct of
one nullable child per non-null branch (``member0``, ``member1``, ..., as spark-avro names them),
null where the null branch is, except a union of ``int`` and ``long`` only (an int64 column) or of
``float`` and ``double`` only (a float64 column), whatever the writer's branch; an enum an int32
column of the reader's symbol index; a fixed a
fixed-width binary; a decimal (bytes or fixed) a 16-byte (precision up to 38) or 32-byte
little-endian two's complement, what Arrow's decimal128/decimal256 hold. Logical types are column
annotations (:attr:`Column.logical`) for the Arrow side to cast. A reader field the writer lacks is
a constant column (:attr:`Column.constant`): the kernel writes nothing to it (or below it), and the
Arrow side fills it with the field's default, one value for every row.

**Code** is a tuple of ints: nodes in pre-order, each ``(op, size, operands..., children...)`` where
``size`` counts the node's ints with its children's, so a node not taken (a union's other branches)
is stepped over. Writer fields the reader lacks are skip nodes, in the writer's field order among
the others. Resolution is the specification's, taken as fastavro takes it where the specification
leaves a choice: promotions int to long, float or double, long to float or double, float to double,
string to bytes and back; a writer union read by a non-union reader resolves each branch against
it; a writer type read by a reader union takes the first branch that matches it (same type or a
promotion, a named type by its unqualified name or an alias); an enum symbol the reader lacks reads
as the reader enum's default.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from kafkalog.schemas.avro import (
    Array,
    AvroSchema,
    AvroType,
    Enum,
    Fixed,
    Map,
    Primitive,
    Record,
    Union,
)
from kafkalog.schemas.avro_compat import check
from kafkalog.schemas.errors import SchemaResolutionError

MAX_PROGRAM_LENGTH: Final = 1 << 20  # ints of code; records shared along many paths are inlined at each
MAX_COLUMNS: Final = 100_000  # columns of one reader schema (its records are columns at each use)
MAX_EMPTY_ITEMS: Final = 1 << 20  # items of zero bytes (null, an empty record) one value may hold in all
PROGRAM_VERSION: Final = 1


class Op(enum.IntEnum):
    """The instructions; the operands after ``op, size`` are in brackets."""

    NULL = 0  # [col]: a null read into a null column (a slot)
    SET_NULL = 1  # [col]: the column (and its children) gets a null; nothing read
    BOOLEAN = 2  # [col]
    INT = 3  # [col] int32 column
    INT_LONG = 4  # [col] int read into an int64 column
    LONG = 5  # [col]
    INT_FLOAT = 6  # [col] float32 column
    LONG_FLOAT = 7  # [col]
    FLOAT = 8  # [col]
    INT_DOUBLE = 9  # [col] float64 column
    LONG_DOUBLE = 10  # [col]
    FLOAT_DOUBLE = 11  # [col]
    DOUBLE = 12  # [col]
    BYTES = 13  # [col] binary column, read as it is
    STRING = 14  # [col] binary column, checked to be UTF-8
    FIXED = 15  # [col, size]
    DECIMAL_BYTES = 16  # [col, width]: big-endian two's complement to ``width`` bytes, little-endian
    DECIMAL_FIXED = 17  # [col, size, width]
    ENUM = 18  # [col, writer symbols, reader index of each writer symbol...]
    RECORD = 19  # [col, children...]: the struct gets a valid slot, then the writer's fields in order
    ARRAY = 20  # [col, item min bytes, item]
    MAP = 21  # [col, key col, entry min bytes, value]
    UNION = 22  # [branches, offset of each branch's node from this node..., branches...]
    PICK = 23  # [struct col, member col, member]: a reader union's member; the others get nulls
    SKIP_NOTHING = 24  # []
    SKIP_BOOLEAN = 25  # []
    SKIP_VARINT = 26  # [] int, long, enum
    SKIP_4 = 27  # [] float
    SKIP_8 = 28  # [] double
    SKIP_BYTES = 29  # [] bytes, string
    SKIP_FIXED = 30  # [size]
    SKIP_RECORD = 31  # [children...]
    SKIP_ARRAY = 32  # [item min bytes, item]
    SKIP_MAP = 33  # [entry min bytes, value]


class Kind(enum.IntEnum):
    """A column's storage: what the kernel writes to it."""

    NULL = 0  # a length only
    BOOLEAN = 1  # one byte a value (0 or 1)
    INT32 = 2
    INT64 = 3
    FLOAT32 = 4
    FLOAT64 = 5
    BINARY = 6  # int32 offsets (length + 1) and the bytes
    FIXED = 7  # ``width`` bytes a value
    STRUCT = 8  # validity only; children hold the values
    LIST = 9  # int32 offsets; one child
    MAP = 10  # int32 offsets; a key and a value child
    CONST = 11  # (in the kernel's layout only) a constant column: nothing written, filled with its default after


@dataclass(frozen=True)
class Column:
    """One output column. ``logical`` says what its storage stands for: ``""`` (the storage as it
    is: long, bytes, ...), ``string``, ``enum`` (the index of one of ``symbols``), ``union`` (the
    struct of a union's members), ``decimal`` (``precision``, ``scale``), ``fixed``, ``uuid``,
    ``date``, ``time-millis``, ``time-micros``, ``timestamp-millis`` / ``-micros`` / ``-nanos`` and
    their ``local-`` forms. ``nullable``: the reader's type can be null here. A ``constant`` column
    is a reader field the writer lacks: it carries its ``default`` (JSON, as the reader's field gives
    it), and the kernel writes nothing to it or its children."""

    name: str
    kind: Kind
    parent: int  # -1 for the root
    width: int = 0  # bytes a value of a FIXED column
    logical: str = ""
    nullable: bool = False
    precision: int = 0
    scale: int = 0
    symbols: tuple[str, ...] = ()
    constant: bool = False
    default: Any = None

    def to_json(self) -> list[Any]:
        return [
            self.name,
            int(self.kind),
            self.parent,
            self.width,
            self.logical,
            self.nullable,
            self.precision,
            self.scale,
            list(self.symbols),
            self.constant,
            self.default,
        ]

    @classmethod
    def from_json(cls, value: Sequence[Any]) -> Column:
        name, kind, parent, width, logical, nullable, precision, scale, symbols, constant, default = value
        return cls(
            name, Kind(kind), parent, width, logical, nullable, precision, scale, tuple(symbols), constant, default
        )


@dataclass(frozen=True)
class Program:
    """A compiled resolution: ``code`` over ``columns`` (see the module doc)."""

    code: tuple[int, ...]
    columns: tuple[Column, ...]

    @property
    def layout(self) -> tuple[tuple[int, int, int], ...]:
        """What the kernel needs of each column: (kind, parent, width); a constant column is
        :attr:`Kind.CONST` there (the kernel writes nothing to it or below it)."""
        return tuple((int(Kind.CONST if c.constant else c.kind), c.parent, c.width) for c in self.columns)

    def to_json(self) -> str:
        return json.dumps(
            {"version": PROGRAM_VERSION, "code": list(self.code), "columns": [c.to_json() for c in self.columns]},
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> Program:
        value = json.loads(text)
        if value.get("version") != PROGRAM_VERSION:
            raise SchemaResolutionError(f"program version {value.get('version')!r} is not {PROGRAM_VERSION}")
        return cls(tuple(value["code"]), tuple(Column.from_json(c) for c in value["columns"]))


def compile_program(writer: AvroSchema, reader: AvroSchema) -> Program:
    """The program that decodes data written with ``writer`` into ``reader``'s columns. Raises
    :class:`SchemaResolutionError` when the reader cannot read the writer's data (naming the first
    incompatibility), for a recursive type, or for a program too large."""
    found = check(reader, writer)
    if found:
        raise SchemaResolutionError(
            f"the reader schema cannot read the writer's data: {found[0].describe('reader', 'writer')}"
        )
    compiler = _Compiler()
    root = compiler.columns(reader.root, "value", -1, False, ())
    code = compiler.read(writer.root, reader.root, root, ())
    return Program(tuple(code), tuple(compiler.out))


_DECIMAL128_DIGITS: Final = 38

_PROMOTION_OPS: Final = {
    ("int", "int"): Op.INT,
    ("int", "long"): Op.INT_LONG,
    ("long", "long"): Op.LONG,
    ("int", "float"): Op.INT_FLOAT,
    ("long", "float"): Op.LONG_FLOAT,
    ("float", "float"): Op.FLOAT,
    ("int", "double"): Op.INT_DOUBLE,
    ("long", "double"): Op.LONG_DOUBLE,
    ("float", "double"): Op.FLOAT_DOUBLE,
    ("double", "double"): Op.DOUBLE,
    ("boolean", "boolean"): Op.BOOLEAN,
    ("null", "null"): Op.NULL,
    ("bytes", "bytes"): Op.BYTES,
    ("string", "bytes"): Op.BYTES,
    ("string", "string"): Op.STRING,
    ("bytes", "string"): Op.STRING,
}

_SKIP_OPS: Final = {
    "null": Op.SKIP_NOTHING,
    "boolean": Op.SKIP_BOOLEAN,
    "int": Op.SKIP_VARINT,
    "long": Op.SKIP_VARINT,
    "float": Op.SKIP_4,
    "double": Op.SKIP_8,
    "bytes": Op.SKIP_BYTES,
    "string": Op.SKIP_BYTES,
}

_STORAGE: Final = {
    "null": Kind.NULL,
    "boolean": Kind.BOOLEAN,
    "int": Kind.INT32,
    "long": Kind.INT64,
    "float": Kind.FLOAT32,
    "double": Kind.FLOAT64,
    "bytes": Kind.BINARY,
    "string": Kind.BINARY,
}


def _node(op: Op, *operands: int, children: Sequence[int] = ()) -> list[int]:
    return [int(op), 2 + len(operands) + len(children), *operands, *children]


def _split_union(union: Union) -> tuple[bool, list[AvroType]]:
    """Whether a union holds null, and its other branches in order."""
    others = [b for b in union.branches if not (isinstance(b, Primitive) and b.type == "null")]
    return len(others) < len(union.branches), others


def _numeric_union(branches: Sequence[AvroType]) -> str | None:
    """``long`` for a union of ``int`` and ``long`` only (null aside), ``double`` for one of ``float``
    and ``double`` only: one column of the wider type (pipelines.schemas.columns maps them so)."""
    kinds = {b.type for b in branches if isinstance(b, Primitive) and b.logical is None and not b.props}
    if len(branches) > 1 and len(kinds) == len(branches):
        if kinds <= {"int", "long"}:
            return "long"
        if kinds <= {"float", "double"}:
            return "double"
    return None


def _decimal_width(precision: int) -> int:
    return 16 if precision <= _DECIMAL128_DIGITS else 32


class _Compiler:
    def __init__(self) -> None:
        self.out: list[Column] = []
        self.children: dict[int, list[int]] = {}
        self.sizes: dict[int, int] = {}  # id of a writer record -> its fewest bytes (shared records: once)

    def add(self, column: Column) -> int:
        if len(self.out) >= MAX_COLUMNS:
            raise SchemaResolutionError(f"the reader schema would make more than {MAX_COLUMNS} columns")
        self.out.append(column)
        index = len(self.out) - 1
        self.children[index] = []
        if column.parent >= 0:
            self.children[column.parent].append(index)
        return index

    def columns(self, node: AvroType, name: str, parent: int, nullable: bool, path: tuple[str, ...]) -> int:
        """The column tree of the reader's ``node``; the index of its root."""
        if isinstance(node, Record):
            if node.fullname in path:
                raise SchemaResolutionError(f"recursive type {node.fullname} cannot be decoded into columns")
            index = self.add(Column(name, Kind.STRUCT, parent, nullable=nullable))
            for f in node.fields:
                self.columns(f.type, f.name, index, False, (*path, node.fullname))
            return index
        if isinstance(node, Union):
            has_null, others = _split_union(node)
            if not others:
                return self.add(Column(name, Kind.NULL, parent, nullable=True))
            if len(others) == 1:
                return self.columns(others[0], name, parent, nullable or has_null, path)
            merged = _numeric_union(others)
            if merged is not None:
                return self.add(Column(name, _STORAGE[merged], parent, nullable=nullable or has_null))
            index = self.add(Column(name, Kind.STRUCT, parent, logical="union", nullable=nullable or has_null))
            for i, branch in enumerate(others):
                self.columns(branch, f"member{i}", index, True, path)
            return index
        if isinstance(node, Array):
            index = self.add(Column(name, Kind.LIST, parent, nullable=nullable))
            self.columns(node.items, "item", index, False, path)
            return index
        if isinstance(node, Map):
            index = self.add(Column(name, Kind.MAP, parent, nullable=nullable))
            self.add(Column("key", Kind.BINARY, index, logical="string"))
            self.columns(node.values, "value", index, False, path)
            return index
        if isinstance(node, Enum):
            return self.add(Column(name, Kind.INT32, parent, logical="enum", nullable=nullable, symbols=node.symbols))
        logical = node.logical
        if logical is not None and logical.name == "decimal":
            precision, scale = logical.precision or 0, logical.scale or 0
            width = _decimal_width(precision)
            return self.add(
                Column(name, Kind.FIXED, parent, width, "decimal", nullable, precision=precision, scale=scale)
            )
        if isinstance(node, Fixed):
            return self.add(Column(name, Kind.FIXED, parent, node.size, "fixed", nullable))
        kind = _STORAGE[node.type]
        annotation = logical.name if logical is not None else ("string" if node.type == "string" else "")
        return self.add(Column(name, kind, parent, logical=annotation, nullable=nullable))

    def min_bytes(self, node: AvroType) -> int:
        """The fewest bytes a value of the writer's ``node`` takes (0 for null or an empty record):
        bounds a block's item count by the bytes left."""
        if isinstance(node, Primitive):
            return {"null": 0, "float": 4, "double": 8}.get(node.type, 1)
        if isinstance(node, Fixed):
            return node.size
        if isinstance(node, Record):
            known = self.sizes.get(id(node))
            if known is None:
                known = self.sizes[id(node)] = min(sum(self.min_bytes(f.type) for f in node.fields), 1 << 30)
            return known
        return 1  # array, map (a block count), enum, union (an index)

    def emit(self, code: list[int]) -> list[int]:
        if len(code) > MAX_PROGRAM_LENGTH:
            raise SchemaResolutionError(f"the decoding program would exceed {MAX_PROGRAM_LENGTH} instructions")
        return code

    def read(self, writer: AvroType, reader: AvroType, col: int, path: tuple[str, ...]) -> list[int]:
        """The node reading a value of ``writer`` into ``reader``'s column ``col``."""
        if isinstance(writer, Union):
            branches = [self.read(b, reader, col, path) for b in writer.branches]
            return self.emit(_union(branches))
        if isinstance(reader, Union):
            return self.read_into_union(writer, reader, col, path)
        return self.emit(self.read_plain(writer, reader, col, path))

    def read_into_union(self, writer: AvroType, reader: Union, col: int, path: tuple[str, ...]) -> list[int]:
        has_null, others = _split_union(reader)
        if isinstance(writer, Primitive) and writer.type == "null":
            if not has_null:
                raise SchemaResolutionError(
                    f"no branch of the reader's union at column {self.out[col].name} reads null"
                )
            return _node(Op.SET_NULL, col) if others else _node(Op.NULL, col)
        merged = _numeric_union(others)
        if merged is not None and isinstance(writer, Primitive):
            op = _PROMOTION_OPS.get((writer.type, merged))
            if op is not None:
                return _node(op, col)
        chosen = next((b for b in others if _matches(writer, b)), None)
        if chosen is None:
            raise SchemaResolutionError(
                f"no branch of the reader's union at column {self.out[col].name} reads the writer's {writer.type}"
            )
        if len(others) == 1:
            return self.read(writer, chosen, col, path)
        member = self.children[col][others.index(chosen)]
        return self.emit(_node(Op.PICK, col, member, children=self.read(writer, chosen, member, path)))

    def read_plain(self, writer: AvroType, reader: AvroType, col: int, path: tuple[str, ...]) -> list[int]:
        column = self.out[col]
        if isinstance(writer, Record) and isinstance(reader, Record):
            if writer.fullname in path:
                raise SchemaResolutionError(f"recursive type {writer.fullname} cannot be decoded into columns")
            inner = (*path, writer.fullname)
            body: list[int] = []
            read_fields: set[int] = set()
            for wf in writer.fields:
                position = next(
                    (i for i, rf in enumerate(reader.fields) if wf.name == rf.name or wf.name in rf.aliases), None
                )
                if position is None:
                    body += self.skip(wf.type, inner)
                else:
                    read_fields.add(position)
                    rf = reader.fields[position]
                    body += self.read(wf.type, rf.type, self.children[col][position], inner)
            for i, rf in enumerate(reader.fields):
                if i not in read_fields:
                    self.make_const(self.children[col][i], rf.default)
            return _node(Op.RECORD, col, children=body)
        if isinstance(writer, Array) and isinstance(reader, Array):
            item = self.read(writer.items, reader.items, self.children[col][0], path)
            return _node(Op.ARRAY, col, self.min_bytes(writer.items), children=item)
        if isinstance(writer, Map) and isinstance(reader, Map):
            key, value_col = self.children[col]
            value = self.read(writer.values, reader.values, value_col, path)
            return _node(Op.MAP, col, key, 1 + self.min_bytes(writer.values), children=value)
        if isinstance(writer, Enum) and isinstance(reader, Enum):
            default = reader.symbols.index(reader.default) if reader.default in reader.symbols else -1
            mapping = [reader.symbols.index(s) if s in reader.symbols else default for s in writer.symbols]
            if -1 in mapping:
                missing = writer.symbols[mapping.index(-1)]
                raise SchemaResolutionError(f"the reader's enum {reader.fullname} lacks the symbol {missing}")
            return _node(Op.ENUM, col, len(writer.symbols), *mapping)
        if column.logical == "decimal":
            if isinstance(writer, Fixed):
                return _node(Op.DECIMAL_FIXED, col, writer.size, column.width)
            if isinstance(writer, Primitive) and writer.type in ("bytes", "string"):
                return _node(Op.DECIMAL_BYTES, col, column.width)
        if isinstance(writer, Fixed) and isinstance(reader, Fixed):
            if writer.size != reader.size:
                raise SchemaResolutionError(
                    f"fixed {writer.fullname} has {writer.size} bytes, the reader's {reader.size}"
                )
            return _node(Op.FIXED, col, writer.size)
        if isinstance(writer, Primitive) and isinstance(reader, Primitive):
            op = _PROMOTION_OPS.get((writer.type, reader.type))
            if op is not None:
                return _node(op, col)
        raise SchemaResolutionError(
            f"the reader's {reader.type} at column {column.name} cannot read the writer's {writer.type}"
        )

    def make_const(self, col: int, default: Any) -> None:
        self.out[col] = replace(self.out[col], constant=True, default=default)

    def skip(self, writer: AvroType, path: tuple[str, ...]) -> list[int]:
        """The node stepping over a value of ``writer`` (a field the reader lacks)."""
        if isinstance(writer, Union):
            return self.emit(_union([self.skip(b, path) for b in writer.branches]))
        if isinstance(writer, Record):
            if writer.fullname in path:
                raise SchemaResolutionError(f"recursive type {writer.fullname} cannot be decoded into columns")
            body = [i for f in writer.fields for i in self.skip(f.type, (*path, writer.fullname))]
            return self.emit(_node(Op.SKIP_RECORD, children=body))
        if isinstance(writer, Array):
            return self.emit(_node(Op.SKIP_ARRAY, self.min_bytes(writer.items), children=self.skip(writer.items, path)))
        if isinstance(writer, Map):
            return self.emit(
                _node(Op.SKIP_MAP, 1 + self.min_bytes(writer.values), children=self.skip(writer.values, path))
            )
        if isinstance(writer, Enum):
            return _node(Op.SKIP_VARINT)
        if isinstance(writer, Fixed):
            return _node(Op.SKIP_FIXED, writer.size)
        return _node(_SKIP_OPS[writer.type])


def _union(branches: list[list[int]]) -> list[int]:
    head = 3 + len(branches)
    offsets = []
    at = head
    for branch in branches:
        offsets.append(at)
        at += len(branch)
    return [int(Op.UNION), at, len(branches), *offsets, *(i for b in branches for i in b)]


def _matches(writer: AvroType, reader: AvroType) -> bool:
    """Whether a reader union's branch ``reader`` is the one that reads ``writer`` (fastavro's
    ``match_types``: the same type or a promotion; named types by unqualified name or alias)."""
    if isinstance(writer, Union) or isinstance(reader, Union):
        return True  # as fastavro: a union inside is resolved when it is read
    if isinstance(writer, Primitive) and isinstance(reader, Primitive):
        return (writer.type, reader.type) in _PROMOTION_OPS
    if isinstance(writer, Record | Enum | Fixed) and isinstance(reader, Record | Enum | Fixed):
        if writer.type != reader.type:
            return False
        if isinstance(writer, Fixed) and isinstance(reader, Fixed) and writer.size != reader.size:
            return False
        return writer.name == reader.name or writer.fullname in reader.aliases or writer.name in reader.aliases
    if isinstance(writer, Array) and isinstance(reader, Array):
        return _matches(writer.items, reader.items)
    if isinstance(writer, Map) and isinstance(reader, Map):
        return _matches(writer.values, reader.values)
    return False
