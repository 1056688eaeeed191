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
binary column (its nulls take no bytes); a decimal (bytes or fixed) a 16-byte (precision up to 38) or 32-byte
little-endian two's complement, what Arrow's decimal128/decimal256 hold. Logical types are column
annotations (:attr:`Column.logical`) for the Arrow side to cast. A reader field the writer lacks is
a constant column (:attr:`Column.constant`): the kernel writes nothing to it (or below it), and the
Arrow side fills it with the field's default, one value for every row; unless some other path of
the program writes that column (two branches of a writer union read into one reader record, one
with the field and one without): there the path without it reads the default itself, Avro-encoded
in the code (:attr:`Op.INLINE`), so neither path overwrites the other's rows. Columns nest at most
:data:`MAX_COLUMN_DEPTH` deep and nodes :data:`MAX_CODE_DEPTH` (the kernels walk both recursively):
a deeper reader schema is refused when compiled.

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
import struct
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from kafkalog.schemas.avro import (
    Array,
    AvroSchema,
    AvroType,
    Enum,
    Field,
    Fixed,
    LogicalType,
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
MAX_COLUMN_DEPTH: Final = 128  # columns below columns; the kernels refuse a deeper layout too
MAX_CODE_DEPTH: Final = 300  # nodes within nodes (a union's take two); the kernels refuse deeper code too
MAX_INLINE_BYTES: Final = 1 << 16  # an Avro-encoded default in the code (Op.INLINE)
MAX_FIXED_SIZE: Final = 1 << 20  # bytes of a reader's fixed column; the kernels refuse a wider layout too
# The bytes of columns a value may make, counted as the kernels write them (a slot 1 byte, a slot of
# a null column 4: Arrow makes it a string column of nulls, an offset 4, and the value's bytes): at
# most OUTPUT_SLACK + OUTPUT_PER_BYTE times its own size, and never more than MAX_VALUE_OUTPUT. A
# value past its bound is bad alone ("the value would expand to more than ... bytes of columns"):
# a long run of nulls, or of items of a union whose other members each get a null, makes many bytes
# of a few (a slot in every column below them, 33 bytes for a wide decimal's). A kernel call ends a
# piece of the chunk at MAX_PIECE_OUTPUT bytes (far below the int32 offsets' 2**31): the value that
# would pass it begins the next piece, so no value's verdict depends on its neighbours. So a chunk of
# n values of B bytes in all makes at most OUTPUT_PER_BYTE * B + OUTPUT_SLACK * n bytes of columns,
# and each piece at most MAX_PIECE_OUTPUT.
MAX_VALUE_OUTPUT: Final = 64 << 20
OUTPUT_PER_BYTE: Final = 256
OUTPUT_SLACK: Final = 16 << 10
MAX_PIECE_OUTPUT: Final = 256 << 20
PROGRAM_VERSION: Final = 3


def value_output_limit(size: int) -> int:
    """The bytes of columns a value of ``size`` bytes (its frame included) may make."""
    if size >= (MAX_VALUE_OUTPUT - OUTPUT_SLACK) // OUTPUT_PER_BYTE:
        return MAX_VALUE_OUTPUT
    return OUTPUT_SLACK + OUTPUT_PER_BYTE * size


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
    FIXED = 15  # [col, size] binary column, ``size`` bytes read
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
    INLINE = 34  # [n, n ints of bytes 0-255, node]: the node reads those bytes (a default), not the value's


class Kind(enum.IntEnum):
    """A column's storage: what the kernel writes to it."""

    NULL = 0  # a length only
    BOOLEAN = 1  # one byte a value (0 or 1)
    INT32 = 2
    INT64 = 3
    FLOAT32 = 4
    FLOAT64 = 5
    BINARY = 6  # int32 offsets (length + 1) and the bytes
    FIXED = 7  # ``width`` bytes a value (a decimal's)
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
    inline: set[int] = set()
    while True:
        compiler = _Compiler(frozenset(inline))
        root = compiler.columns(reader.root, "value", -1, False, ())
        code = compiler.read(writer.root, reader.root, root, ())
        clashes = compiler.clashes()
        if clashes <= inline:
            if _code_depth(code) > MAX_CODE_DEPTH:
                raise SchemaResolutionError(f"the decoding program would nest deeper than {MAX_CODE_DEPTH}")
            return Program(tuple(code), tuple(compiler.out))
        inline |= clashes  # a default on one path, values on another: that path reads the default


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
    def __init__(self, inline: frozenset[int] = frozenset()) -> None:
        self.out: list[Column] = []
        self.children: dict[int, list[int]] = {}
        self.depth: dict[int, int] = {-1: 0}
        self.sizes: dict[int, int] = {}  # id of a writer record -> its fewest bytes (shared records: once)
        self.inline = inline
        """Columns a path reads its default into (Op.INLINE) rather than being constant."""
        self.written: set[int] = set()
        self.defaulted: set[int] = set()

    def clashes(self) -> set[int]:
        """Columns made constant on one path that another path writes (they or a column below)."""
        return {c for c in self.defaulted if any(d in self.written for d in self.below(c))}

    def below(self, col: int) -> list[int]:
        found, stack = [], [col]
        while stack:
            c = stack.pop()
            found.append(c)
            stack.extend(self.children[c])
        return found

    def add(self, column: Column) -> int:
        if len(self.out) >= MAX_COLUMNS:
            raise SchemaResolutionError(f"the reader schema would make more than {MAX_COLUMNS} columns")
        depth = self.depth[column.parent] + 1
        if depth > MAX_COLUMN_DEPTH:
            raise SchemaResolutionError(f"the reader schema nests columns deeper than {MAX_COLUMN_DEPTH}")
        self.out.append(column)
        index = len(self.out) - 1
        self.depth[index] = depth
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
            if node.size > MAX_FIXED_SIZE:
                raise SchemaResolutionError(
                    f"the reader's fixed {node.fullname} at column {name} has {node.size} bytes, more than the "
                    f"{MAX_FIXED_SIZE} a column's value may"
                )
            # binary, not fixed-width: a null takes no bytes (a fixed-width null is a placeholder as wide)
            return self.add(Column(name, Kind.BINARY, parent, logical="fixed", nullable=nullable))
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
        self.written.add(col)
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
        self.written.add(member)
        return self.emit(_node(Op.PICK, col, member, children=self.read(writer, chosen, member, path)))

    def read_plain(self, writer: AvroType, reader: AvroType, col: int, path: tuple[str, ...]) -> list[int]:
        column = self.out[col]
        clash = _logical_clash(writer, reader)
        if clash is not None:
            raise SchemaResolutionError(f"{clash} at column {column.name}")
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
                    body += self.make_const(self.children[col][i], rf, inner)
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

    def make_const(self, col: int, rf: Field, path: tuple[str, ...]) -> list[int]:
        """Reader field ``rf`` the writer lacks: its column made constant (no code), or, where another
        path writes the column, a node reading the field's default into it."""
        data = _field_default(rf)  # judged on both paths: a constant column is filled with it too
        if col not in self.inline:
            self.defaulted.add(col)
            self.out[col] = replace(self.out[col], constant=True, default=_complete(rf.type, rf.default))
            return []
        if len(data) > MAX_INLINE_BYTES:
            raise SchemaResolutionError(f"the default of field {rf.name} takes more than {MAX_INLINE_BYTES} bytes")
        return self.emit(_node(Op.INLINE, len(data), *data, children=self.read(rf.type, rf.type, col, path)))

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


def _code_depth(code: Sequence[int]) -> int:
    """How deep the nodes of ``code`` nest (1: one node), without recursion."""
    deepest, open_until = 0, list[int]()  # the end of each node enclosing the one at pc
    for pc, end in _nodes(code):
        while open_until and open_until[-1] <= pc:
            open_until.pop()
        open_until.append(end)
        deepest = max(deepest, len(open_until))
    return deepest


def _nodes(code: Sequence[int]) -> list[tuple[int, int]]:
    """(start, end) of every node, in pre-order."""
    found: list[tuple[int, int]] = []
    stack = [0]
    while stack:
        pc = stack.pop()
        op, size = Op(code[pc]), code[pc + 1]
        found.append((pc, pc + size))
        inner: list[int] = []
        if op in (Op.RECORD, Op.SKIP_RECORD):
            at = pc + (3 if op == Op.RECORD else 2)
            while at < pc + size:
                inner.append(at)
                at += code[at + 1]
        elif op in (Op.ARRAY, Op.SKIP_ARRAY, Op.SKIP_MAP):
            inner.append(pc + (4 if op == Op.ARRAY else 3))
        elif op == Op.MAP:
            inner.append(pc + 5)
        elif op == Op.UNION:
            inner.extend(pc + code[pc + 3 + b] for b in range(code[pc + 2]))
        elif op == Op.PICK:
            inner.append(pc + 4)
        elif op == Op.INLINE:
            inner.append(pc + 3 + code[pc + 2])
        stack.extend(reversed(inner))
    found.sort()
    return found


def _union(branches: list[list[int]]) -> list[int]:
    head = 3 + len(branches)
    offsets = []
    at = head
    for branch in branches:
        offsets.append(at)
        at += len(branch)
    return [int(Op.UNION), at, len(branches), *offsets, *(i for b in branches for i in b)]


def _logical_name(logical: LogicalType) -> str:
    if logical.name == "decimal":
        return f"decimal({logical.precision},{logical.scale})"
    return logical.name


def _logical_clash(writer: AvroType, reader: AvroType) -> str | None:
    """Why the writer's logical type cannot be read as the reader's, or None. Avro's resolution looks
    at the underlying types only (Java's and Confluent's checkers accept a ``timestamp-micros`` read
    as ``timestamp-millis``); the columns would hold the writer's numbers in the reader's units, so
    two logical types that differ are refused, as are decimals of another scale (a decimal's
    precision may change: a value with more digits is a bad row). A logical type on one side only
    is kept: the number is the same, the reader's annotation says what it means."""
    ours = writer.logical if isinstance(writer, Primitive | Fixed) else None
    theirs = reader.logical if isinstance(reader, Primitive | Fixed) else None
    if ours is None or theirs is None:
        return None
    if ours.name != theirs.name:
        return (
            f"the writer's {_logical_name(ours)} and the reader's {_logical_name(theirs)} are different logical "
            "types: the values would be read as another kind or in other units"
        )
    if ours.name == "decimal" and (ours.scale or 0) != (theirs.scale or 0):
        return (
            f"the writer's {_logical_name(ours)} and the reader's {_logical_name(theirs)} differ in scale: "
            "the values would be read as other numbers"
        )
    return None


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


def _field_default(field: Field) -> bytes:
    """Field ``field``'s default, encoded; SchemaResolutionError naming the field for a default its
    type cannot hold (the parser judges a default's JSON kind, not what a column makes of it)."""
    try:
        return encode_default(field.type, field.default)
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError, struct.error) as exc:
        shown = json.dumps(field.default, default=repr)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise SchemaResolutionError(
            f"the default {shown} of the reader's field {field.name} is invalid: {exc}"
        ) from None


def _complete(node: AvroType, value: Any) -> Any:
    """A default (JSON) with the defaults of the record fields it leaves out filled in, as a reader
    reads it: what a constant column holds. The default encodes (so each union's branch is found)."""
    if isinstance(node, Union):
        for branch in node.branches:  # the branch encode_default takes
            try:
                _encode(branch, value, bytearray())
            except (TypeError, ValueError, KeyError, AttributeError, OverflowError, struct.error):
                continue
            return _complete(branch, value)
        return value
    if isinstance(node, Record) and isinstance(value, dict):
        return {f.name: _complete(f.type, value.get(f.name, f.default)) for f in node.fields}
    if isinstance(node, Array) and isinstance(value, list):
        return [_complete(node.items, item) for item in value]
    if isinstance(node, Map) and isinstance(value, dict):
        return {key: _complete(node.values, item) for key, item in value.items()}
    return value


def encode_default(node: AvroType, value: Any) -> bytes:
    """A field default (JSON, as the schema gives it) in Avro's binary encoding of ``node``: what the
    kernel reads for an :attr:`Op.INLINE` default. A union's default is of its first branch that
    takes it (Avro 1.12 allows any branch's). Raises ValueError or TypeError for a default ``node``
    cannot hold: of the wrong JSON kind, out of its type's range, bytes or fixed code points past
    255, a fixed of another size, an enum symbol the enum lacks, a decimal of more digits than its
    precision, a ``timestamp-millis`` past the microseconds an int64 holds."""
    out = bytearray()
    _encode(node, value, out)
    return bytes(out)


_INT32: Final = (-(2**31), 2**31 - 1)
_INT64: Final = (-(2**63), 2**63 - 1)
_MILLIS_BOUND: Final = (2**63 - 1) // 1000  # a millisecond time the columns hold as microseconds
_MILLIS_LOGICAL: Final = frozenset({"timestamp-millis", "local-timestamp-millis"})


def _code_points(value: Any, what: str) -> bytes:
    """A bytes or fixed default: a string of code points 0-255, one a byte (as Avro writes them)."""
    if not isinstance(value, str):
        raise TypeError(f"{what} default is a string")
    if any(ord(c) > 0xFF for c in value):
        raise ValueError(f"{what} default holds code points 0-255 only (one a byte)")
    return value.encode("latin-1")


def _check_logical(node: Primitive | Fixed, value: Any, data: bytes | None) -> None:
    logical = node.logical
    if logical is None:
        return
    if logical.name == "decimal" and data is not None:
        unscaled = int.from_bytes(data, "big", signed=True)
        if abs(unscaled) >= 10 ** (logical.precision or 0):
            raise ValueError(f"a decimal of more digits than its precision {logical.precision}")
    elif logical.name in _MILLIS_LOGICAL and isinstance(value, int) and abs(value) > _MILLIS_BOUND:
        raise ValueError(f"{logical.name} {value} is beyond the microseconds a timestamp holds")


def _zigzag(n: int, out: bytearray) -> None:
    n = (n << 1) ^ (n >> 63)
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)


def _encode(node: AvroType, value: Any, out: bytearray) -> None:
    if isinstance(node, Union):
        for i, branch in enumerate(node.branches):
            attempt = bytearray()
            try:
                _encode(branch, value, attempt)
            except (TypeError, ValueError, KeyError, AttributeError, OverflowError, struct.error):
                continue
            _zigzag(i, out)
            out += attempt
            return
        raise ValueError(f"no branch of the union takes the default {value!r:.40}")
    if isinstance(node, Record):
        if not isinstance(value, dict):
            raise TypeError("a record default is an object")
        for f in node.fields:
            _encode(f.type, value.get(f.name, f.default), out)
        return
    if isinstance(node, Array):
        if not isinstance(value, list):
            raise TypeError("an array default is a list")
        if value:
            _zigzag(len(value), out)
            for item in value:
                _encode(node.items, item, out)
        out.append(0)
        return
    if isinstance(node, Map):
        if not isinstance(value, dict):
            raise TypeError("a map default is an object")
        if value:
            _zigzag(len(value), out)
            for key, item in value.items():
                _encode(Primitive("string"), key, out)
                _encode(node.values, item, out)
        out.append(0)
        return
    if isinstance(node, Enum):
        if value not in node.symbols:
            raise ValueError(f"{value!r:.40} is not a symbol of enum {node.fullname}")
        _zigzag(node.symbols.index(value), out)
        return
    if isinstance(node, Fixed):
        data = _code_points(value, "a fixed")
        if len(data) != node.size:
            raise ValueError(f"a default of {len(data)} bytes for fixed {node.fullname} of {node.size}")
        _check_logical(node, value, data)
        out += data
        return
    assert isinstance(node, Primitive)
    _encode_primitive(node.type, value, out)
    _check_logical(node, value, _code_points(value, "a bytes") if node.type == "bytes" else None)


def _encode_primitive(kind: str, value: Any, out: bytearray) -> None:
    if kind == "null":
        if value is not None:
            raise TypeError("null's default is null")
    elif kind == "boolean":
        if not isinstance(value, bool):
            raise TypeError("not a boolean")
        out.append(1 if value else 0)
    elif kind in ("int", "long"):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError("not an integer")
        low, high = _INT32 if kind == "int" else _INT64
        if not low <= value <= high:
            raise ValueError(f"{value} is out of an {kind}'s range")
        _zigzag(value, out)
    elif kind in ("float", "double"):
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise TypeError("not a number")
        out += struct.pack("<f" if kind == "float" else "<d", value)
    else:  # bytes (code points 0-255, as Avro writes bytes defaults) or string
        if not isinstance(value, str):
            raise TypeError("not a string")
        data = _code_points(value, "a bytes") if kind == "bytes" else value.encode("utf-8")
        _zigzag(len(data), out)
        out += data
