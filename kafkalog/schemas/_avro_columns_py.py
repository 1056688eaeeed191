"""The pure-Python twin of the C kernel ``_avro_columns``: runs a compiled program
(:mod:`kafkalog.schemas.avro_program`) over a chunk of Avro values, into columns.

It is the reference the tests hold the C kernel to (same columns, same bad reasons, byte for byte)
and the fallback where the C module is not built. ``decode(values, start, code, layout,
piece_bytes=MAX_PIECE_OUTPUT)``: each value's datum begins at byte ``start``; ``layout`` is (kind,
parent, width) per column. Returns ``(columns, bad, stop)``: per column ``(length, null_count,
validity, buffer1, buffer2)`` (validity an Arrow bitmap, None when nothing is null; buffer1 the
values, or the int32 offsets of a binary, list or map column; buffer2 a binary column's bytes), the
(index, reason) of each value that failed, and the index of the first value not decoded
(``len(values)`` unless the columns would pass ``piece_bytes``: the caller decodes from there in a
further call). A value that fails leaves nothing in any column. Every value is untrusted: lengths
and counts are checked against the bytes left before anything is taken or made from them; a varint
takes at most 10 bytes (5 for an int: its values, an enum's and a union's index); every write is
charged, before it is made, against the bytes of columns the value may make
(:func:`~kafkalog.schemas.avro_program.value_output_limit`: past it the value is bad) and those the
piece may take (past them the piece ends before the value). The program is checked before the chunk
(:func:`verify`, as the C kernel checks it): each node's size and operands, each op against its
column's kind and width, a union member among its union's columns, the layout's nesting at most
:data:`~kafkalog.schemas.avro_program.MAX_COLUMN_DEPTH` deep; a malformed one is a ValueError.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Final

from kafkalog.schemas.avro_program import (
    MAX_CODE_DEPTH,
    MAX_COLUMN_DEPTH,
    MAX_EMPTY_ITEMS,
    MAX_FIXED_SIZE,
    MAX_PIECE_OUTPUT,
    Kind,
    Op,
    value_output_limit,
)

_I32: Final = struct.Struct("<i")
_I64: Final = struct.Struct("<q")
_F32: Final = struct.Struct("<f")
_F64: Final = struct.Struct("<d")
_MAX_OFFSET: Final = 2**31 - 1
_WIDTH: Final = {Kind.BOOLEAN: 1, Kind.INT32: 4, Kind.INT64: 8, Kind.FLOAT32: 4, Kind.FLOAT64: 8}
_MAX_CODE_DEPTH: Final = MAX_CODE_DEPTH  # nodes within nodes: two Python frames each here
_MAX_WIDTH: Final = MAX_FIXED_SIZE
_LONG_BYTES: Final = 10
_INT_BYTES: Final = 5
_KIND_OF: Final = {  # the column kind each op that writes a value writes to
    Op.NULL: Kind.NULL,
    Op.BOOLEAN: Kind.BOOLEAN,
    Op.INT: Kind.INT32,
    Op.INT_LONG: Kind.INT64,
    Op.LONG: Kind.INT64,
    Op.INT_FLOAT: Kind.FLOAT32,
    Op.LONG_FLOAT: Kind.FLOAT32,
    Op.FLOAT: Kind.FLOAT32,
    Op.INT_DOUBLE: Kind.FLOAT64,
    Op.LONG_DOUBLE: Kind.FLOAT64,
    Op.FLOAT_DOUBLE: Kind.FLOAT64,
    Op.DOUBLE: Kind.FLOAT64,
    Op.BYTES: Kind.BINARY,
    Op.STRING: Kind.BINARY,
    Op.ENUM: Kind.INT32,
}

ColumnBuffers = tuple[int, int, bytes | None, bytes | None, bytes | None]


class _Bad(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _Split(Exception):
    """The value does not fit beside the values already in the columns: the piece ends before it."""


class _Column:
    __slots__ = ("children", "data", "kind", "nulls", "offsets", "valid", "width")

    def __init__(self, kind: int, width: int) -> None:
        self.kind = kind
        self.width = width
        self.children: list[int] = []
        self.valid: list[bool] = []
        self.nulls = 0
        self.data = bytearray()
        self.offsets: list[int] = [0]

    def mark(self) -> tuple[int, int, int, int]:
        return len(self.valid), self.nulls, len(self.data), len(self.offsets)

    def rollback(self, mark: tuple[int, int, int, int]) -> None:
        del self.valid[mark[0] :]
        self.nulls = mark[1]
        del self.data[mark[2] :]
        del self.offsets[mark[3] :]


def decode(
    values: Sequence[bytes],
    start: int,
    code: Sequence[int],
    layout: Sequence[tuple[int, int, int]],
    piece_bytes: int = MAX_PIECE_OUTPUT,
) -> tuple[list[ColumnBuffers], list[tuple[int, str]], int]:
    if start < 0:
        raise ValueError("start must not be negative")
    if piece_bytes < 1:
        raise ValueError("piece_bytes must be positive")
    columns = _layout(layout)
    code = tuple(code)
    if not code or not _Check(code, columns).node(0, len(code), 0) or code[1] != len(code):
        raise ValueError("malformed decoding program")
    runner = _Runner(code, columns, piece_bytes)
    bad: list[tuple[int, str]] = []
    stop = len(values)
    for i, value in enumerate(values):
        marks = [c.mark() for c in columns]
        piece_room = runner.piece_room
        try:
            runner.row(bytes(value), start)
        except (_Bad, _Split) as e:
            for column, mark in zip(columns, marks, strict=True):
                column.rollback(mark)
            runner.piece_room = piece_room
            if isinstance(e, _Split):
                stop = i
                break
            bad.append((i, e.reason))
        else:
            runner.piece_rows += 1
    return [_buffers(c) for c in columns], bad, stop


def _layout(layout: Sequence[tuple[int, int, int]]) -> list[_Column]:
    """The columns of the layout, each checked: a known kind, a parent before it, a width in bounds,
    nested at most MAX_COLUMN_DEPTH deep."""
    if not 1 <= len(layout) <= 1_000_000:
        raise ValueError("layout must hold 1 to 1000000 columns")
    columns: list[_Column] = []
    depth: list[int] = []
    for index, (kind, parent, width) in enumerate(layout):
        if not Kind.NULL <= kind <= Kind.CONST or not -1 <= parent < index or not 0 <= width <= _MAX_WIDTH:
            raise ValueError(f"invalid layout entry {index}")
        depth.append(depth[parent] + 1 if parent >= 0 else 1)
        if depth[-1] > MAX_COLUMN_DEPTH:
            raise ValueError(f"layout nests columns deeper than {MAX_COLUMN_DEPTH}")
        columns.append(_Column(kind, width))
        if parent >= 0:
            columns[parent].children.append(index)
    return columns


class _Check:
    """Whether a program is well formed (the C kernel's verify(), case for case)."""

    def __init__(self, code: tuple[int, ...], columns: list[_Column]) -> None:
        self.code = code
        self.columns = columns

    def col(self, col: int, kind: int, width: int = -1) -> bool:
        """Column ``col`` exists, is of ``kind`` and (``width`` >= 0) that many bytes wide."""
        if not 0 <= col < len(self.columns):
            return False
        column = self.columns[col]
        return column.kind == kind and (width < 0 or column.width == width)

    def node(self, pc: int, stop: int, depth: int) -> bool:
        code = self.code
        if depth > _MAX_CODE_DEPTH or pc < 0 or pc + 2 > stop:
            return False
        op, size = code[pc], code[pc + 1]
        end = pc + size
        if size < 2 or end > stop:
            return False
        if op in _KIND_OF and op != Op.ENUM:
            return size == 3 and self.col(code[pc + 2], _KIND_OF[Op(op)])
        if op == Op.SET_NULL:
            return size == 3 and 0 <= code[pc + 2] < len(self.columns)
        if op == Op.FIXED:
            return size == 4 and code[pc + 3] >= 0 and self.col(code[pc + 2], Kind.BINARY)
        if op == Op.DECIMAL_BYTES:
            return size == 4 and 1 <= code[pc + 3] <= 64 and self.col(code[pc + 2], Kind.FIXED, code[pc + 3])
        if op == Op.DECIMAL_FIXED:
            return (
                size == 5
                and code[pc + 3] >= 0
                and 1 <= code[pc + 4] <= 64
                and self.col(code[pc + 2], Kind.FIXED, code[pc + 4])
            )
        if op == Op.ENUM:
            return size >= 4 and code[pc + 3] >= 0 and size == 4 + code[pc + 3] and self.col(code[pc + 2], Kind.INT32)
        if op in (Op.RECORD, Op.SKIP_RECORD):
            at = pc + (3 if op == Op.RECORD else 2)
            if at > end or (op == Op.RECORD and not self.col(code[pc + 2], Kind.STRUCT)):
                return False
            while at < end:
                if not self.node(at, end, depth + 1):
                    return False
                at += code[at + 1]
            return at == end
        if op in (Op.ARRAY, Op.MAP, Op.SKIP_ARRAY, Op.SKIP_MAP):
            writes = op in (Op.ARRAY, Op.MAP)
            head = pc + 2 + (1 if writes else 0) + (1 if op == Op.MAP else 0)
            if head + 1 >= end or code[head] < 0:
                return False
            if op == Op.ARRAY and not (
                self.col(code[pc + 2], Kind.LIST) and len(self.columns[code[pc + 2]].children) == 1
            ):
                return False
            if op == Op.MAP:
                if not self.col(code[pc + 2], Kind.MAP) or self.columns[code[pc + 2]].children[:1] != [code[pc + 3]]:
                    return False
                if len(self.columns[code[pc + 2]].children) != 2 or not self.col(code[pc + 3], Kind.BINARY):
                    return False
            return self.node(head + 1, end, depth + 1) and head + 1 + code[head + 2] == end
        if op == Op.UNION:
            if pc + 3 > end:  # the branch count is within the node before it is read
                return False
            branches = code[pc + 2]
            if branches < 0 or size < 3 + branches:
                return False
            return all(
                pc + code[pc + 3 + b] >= pc + 3 + branches and self.node(pc + code[pc + 3 + b], end, depth + 1)
                for b in range(branches)
            )
        if op == Op.PICK:
            if size <= 4 or not self.col(code[pc + 2], Kind.STRUCT):
                return False
            if code[pc + 3] not in self.columns[code[pc + 2]].children:  # a member of this union
                return False
            return self.node(pc + 4, end, depth + 1) and 4 + code[pc + 5] == size
        if op == Op.INLINE:
            n = code[pc + 2] if pc + 2 < end else -1
            if not 0 <= n <= end - pc - 5 or not all(0 <= b <= 0xFF for b in code[pc + 3 : pc + 3 + n]):
                return False
            return self.node(pc + 3 + n, end, depth + 1) and pc + 3 + n + code[pc + 4 + n] == end
        if op in (Op.SKIP_NOTHING, Op.SKIP_BOOLEAN, Op.SKIP_VARINT, Op.SKIP_4, Op.SKIP_8, Op.SKIP_BYTES):
            return size == 2
        if op == Op.SKIP_FIXED:
            return size == 3 and code[pc + 2] >= 0
        return False


def _buffers(column: _Column) -> ColumnBuffers:
    if column.kind == Kind.CONST:
        return (0, 0, None, None, None)
    length = len(column.valid)
    if column.kind == Kind.NULL:
        return (length, length, None, None, None)
    validity = None
    if column.nulls:
        bitmap = bytearray((length + 7) // 8)
        for i, ok in enumerate(column.valid):
            if ok:
                bitmap[i >> 3] |= 1 << (i & 7)
        validity = bytes(bitmap)
    offsets = b"".join(_I32.pack(o) for o in column.offsets)
    if column.kind == Kind.BINARY:
        return (length, column.nulls, validity, offsets, bytes(column.data))
    if column.kind in (Kind.LIST, Kind.MAP):
        return (length, column.nulls, validity, offsets, None)
    if column.kind == Kind.STRUCT:
        return (length, column.nulls, validity, None, None)
    return (length, column.nulls, validity, bytes(column.data), None)


class _Runner:
    def __init__(self, code: tuple[int, ...], columns: list[_Column], piece_bytes: int) -> None:
        self.code = code
        self.columns = columns
        self.buf = b""
        self.end = 0
        self.budget = 0
        self.room = self.limit = 0  # bytes of columns the value may still make, of its limit
        self.piece_room = self.piece_limit = piece_bytes  # bytes of columns the piece may still take, of its limit
        self.piece_rows = 0

    def row(self, value: bytes, start: int) -> None:
        if len(value) < start:
            raise _Bad(f"value shorter than {start} bytes")
        self.buf, self.end, self.budget = value, len(value), MAX_EMPTY_ITEMS
        self.room = self.limit = value_output_limit(len(value))
        pos = self.run(0, start)
        if pos != self.end:
            raise _Bad(f"{self.end - pos} bytes left after the record")

    # -- reading --------------------------------------------------------------------------------

    def read_long(self, pos: int, most: int = _LONG_BYTES) -> tuple[int, int]:
        begin, result, shift = pos, 0, 0
        for _ in range(most):
            if pos >= self.end:
                raise _Bad(f"truncated at byte {begin}")
            b = self.buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                result &= 0xFFFFFFFFFFFFFFFF
                return (result >> 1) ^ -(result & 1), pos
            shift += 7
        raise _Bad(f"varint too long at byte {begin}")

    def read_int(self, pos: int) -> tuple[int, int]:
        value, after = self.read_long(pos, _INT_BYTES)
        if not -(2**31) <= value < 2**31:
            raise _Bad(f"int {value} out of range at byte {pos}")
        return value, after

    def take(self, pos: int, n: int) -> int:
        if n > self.end - pos:
            raise _Bad(f"truncated at byte {pos}")
        return pos + n

    def length(self, pos: int) -> tuple[int, int]:
        n, after = self.read_long(pos)
        if n < 0:
            raise _Bad(f"negative length {n} at byte {pos}")
        if n > self.end - after:
            raise _Bad(f"length {n} at byte {pos} exceeds the {self.end - after} bytes left")
        return n, after

    def block(self, pos: int, min_bytes: int) -> tuple[int, int, int, int]:
        """A block's item count (0 at the end), its byte size (-1 unknown) and where that was, and
        where its items begin."""
        count, after = self.read_long(pos)
        size, size_at = -1, after
        if count < 0:
            count = -count
            size_at = after
            size, after = self.read_long(after)
            if size < 0:
                raise _Bad(f"negative length {size} at byte {size_at}")
        left = self.end - after
        if min_bytes > 0:
            if count > left // min_bytes:
                raise _Bad(f"block of {count} items at byte {pos} exceeds the {left} bytes left")
        else:
            if count > self.budget:
                raise _Bad(f"block of {count} items at byte {pos} exceeds {MAX_EMPTY_ITEMS} items of no bytes")
            self.budget -= count
        return count, size, size_at, after

    # -- writing --------------------------------------------------------------------------------

    def charge(self, n: int) -> None:
        """Counts the bytes of columns a write makes, before it is made (as the C kernel's charge())."""
        if n > self.room:
            raise _Bad(f"the value would expand to more than {self.limit} bytes of columns")
        if n > self.piece_room:
            if self.piece_rows:
                raise _Split
            raise _Bad(f"the value would expand to more than {self.piece_limit} bytes of columns")
        self.room -= n
        self.piece_room -= n

    def valid(self, column: _Column) -> None:
        self.charge(4 if column.kind == Kind.NULL else 1)
        column.valid.append(True)

    def add_offset(self, column: _Column, value: int) -> None:
        """An offset, its cost charged by the caller."""
        if value > _MAX_OFFSET:
            if self.piece_rows:
                raise _Split
            raise _Bad(f"the value alone makes a column exceed {_MAX_OFFSET} values or bytes")
        column.offsets.append(value)

    def put_bytes(self, col: int, data: bytes) -> None:
        column = self.columns[col]
        self.charge(len(data) + 5)  # the bytes, a slot and an offset
        column.data += data
        column.valid.append(True)
        self.add_offset(column, len(column.data))

    def put(self, col: int, data: bytes) -> None:
        column = self.columns[col]
        self.charge(len(data) + 1)  # the bytes and a slot
        column.data += data
        column.valid.append(True)

    def null(self, col: int) -> None:
        column = self.columns[col]
        if column.kind == Kind.CONST:
            return
        if column.kind == Kind.NULL:
            self.charge(4)
        elif column.kind == Kind.FIXED:
            self.charge(1 + column.width)
        elif column.kind in (Kind.LIST, Kind.MAP, Kind.BINARY):
            self.charge(5)
        else:
            self.charge(1 + _WIDTH.get(Kind(column.kind), 0))
        column.valid.append(False)
        column.nulls += 1
        if column.kind == Kind.STRUCT:
            for child in column.children:
                self.null(child)
        elif column.kind in (Kind.LIST, Kind.MAP, Kind.BINARY):
            column.offsets.append(column.offsets[-1])
        elif column.kind == Kind.FIXED:
            column.data += bytes(column.width)
        elif column.kind != Kind.NULL:
            column.data += bytes(_WIDTH[Kind(column.kind)])

    # -- the interpreter -------------------------------------------------------------------------

    def run(self, pc: int, pos: int) -> int:  # one case per instruction, as the C kernel's switch
        code = self.code
        op = code[pc]
        if op == Op.NULL:
            self.valid(self.columns[code[pc + 2]])
            return pos
        if op == Op.SET_NULL:
            self.null(code[pc + 2])
            return pos
        if op == Op.BOOLEAN:
            after = self.take(pos, 1)
            self.put(code[pc + 2], b"\x01" if self.buf[pos] else b"\x00")
            return after
        if op in (Op.INT, Op.INT_LONG, Op.INT_FLOAT, Op.INT_DOUBLE):
            value, after = self.read_int(pos)
            packer = {Op.INT: _I32, Op.INT_LONG: _I64, Op.INT_FLOAT: _F32, Op.INT_DOUBLE: _F64}[Op(op)]
            self.put(code[pc + 2], packer.pack(float(value) if op in (Op.INT_FLOAT, Op.INT_DOUBLE) else value))
            return after
        if op in (Op.LONG, Op.LONG_FLOAT, Op.LONG_DOUBLE):
            value, after = self.read_long(pos)
            if op == Op.LONG:
                self.put(code[pc + 2], _I64.pack(value))
            else:
                self.put(code[pc + 2], (_F32 if op == Op.LONG_FLOAT else _F64).pack(float(value)))
            return after
        if op in (Op.FLOAT, Op.FLOAT_DOUBLE):
            after = self.take(pos, 4)
            if op == Op.FLOAT:
                self.put(code[pc + 2], self.buf[pos:after])
            else:
                self.put(code[pc + 2], _F64.pack(_F32.unpack_from(self.buf, pos)[0]))
            return after
        if op == Op.DOUBLE:
            after = self.take(pos, 8)
            self.put(code[pc + 2], self.buf[pos:after])
            return after
        if op in (Op.BYTES, Op.STRING):
            n, begin = self.length(pos)
            data = self.buf[begin : begin + n]
            if op == Op.STRING:
                _check_utf8(data, begin)
            self.put_bytes(code[pc + 2], data)
            return begin + n
        if op == Op.FIXED:
            after = self.take(pos, code[pc + 3])
            self.put_bytes(code[pc + 2], self.buf[pos:after])
            return after
        if op in (Op.DECIMAL_BYTES, Op.DECIMAL_FIXED):
            if op == Op.DECIMAL_BYTES:
                n, begin = self.length(pos)
                width = code[pc + 3]
            else:
                n, begin, width = code[pc + 3], pos, code[pc + 4]
                self.take(pos, n)
            number = int.from_bytes(self.buf[begin : begin + n], "big", signed=True)
            if not -(1 << (8 * width - 1)) <= number < 1 << (8 * width - 1):
                raise _Bad(f"decimal of {n} bytes at byte {begin} does not fit {8 * width} bits")
            self.put(code[pc + 2], number.to_bytes(width, "little", signed=True))
            return begin + n
        if op == Op.ENUM:
            index, after = self.read_long(pos, _INT_BYTES)
            symbols = code[pc + 3]
            if not 0 <= index < symbols:
                raise _Bad(f"enum index {index} out of range ({symbols} symbols) at byte {pos}")
            self.put(code[pc + 2], _I32.pack(code[pc + 4 + index]))
            return after
        if op == Op.RECORD:
            self.valid(self.columns[code[pc + 2]])
            return self.run_children(pc + 3, pc + code[pc + 1], pos)
        if op == Op.SKIP_RECORD:
            return self.run_children(pc + 2, pc + code[pc + 1], pos)
        if op in (Op.ARRAY, Op.MAP, Op.SKIP_ARRAY, Op.SKIP_MAP):
            return self.collection(pc, pos)
        if op == Op.UNION:
            branches = code[pc + 2]
            index, after = self.read_long(pos, _INT_BYTES)
            if not 0 <= index < branches:
                raise _Bad(f"union branch {index} out of range ({branches} branches) at byte {pos}")
            return self.run(pc + code[pc + 3 + index], after)
        if op == Op.PICK:
            struct_column, member = self.columns[code[pc + 2]], code[pc + 3]
            self.valid(struct_column)
            for child in struct_column.children:
                if child != member:
                    self.null(child)
            return self.run(pc + 4, pos)
        if op == Op.INLINE:  # a default: its node reads the bytes in the code, then the value goes on
            n = code[pc + 2]
            saved = self.buf, self.end
            self.buf, self.end = bytes(code[pc + 3 : pc + 3 + n]), n
            try:
                at = self.run(pc + 3 + n, 0)
            finally:
                self.buf, self.end = saved
            if at != n:
                raise _Bad(f"{n - at} bytes of a default left unread")
            return pos
        if op == Op.SKIP_NOTHING:
            return pos
        if op == Op.SKIP_BOOLEAN:
            return self.take(pos, 1)
        if op == Op.SKIP_VARINT:
            return self.read_long(pos)[1]
        if op == Op.SKIP_4:
            return self.take(pos, 4)
        if op == Op.SKIP_8:
            return self.take(pos, 8)
        if op == Op.SKIP_BYTES:
            n, begin = self.length(pos)
            return begin + n
        if op == Op.SKIP_FIXED:
            return self.take(pos, code[pc + 2])
        raise AssertionError(f"unknown instruction {op} at {pc}")

    def run_children(self, pc: int, stop: int, pos: int) -> int:
        while pc < stop:
            pos = self.run(pc, pos)
            pc += self.code[pc + 1]
        return pos

    def collection(self, pc: int, pos: int) -> int:
        code, op = self.code, self.code[pc]
        writes = op in (Op.ARRAY, Op.MAP)
        is_map = op in (Op.MAP, Op.SKIP_MAP)
        # operands: ARRAY [col, min, item]; MAP [col, key, min, value]; SKIP_ARRAY [min, item]; SKIP_MAP [min, value]
        head = pc + 2 + (1 if writes else 0) + (1 if op == Op.MAP else 0)
        min_bytes, item = code[head], head + 1
        key = self.columns[code[pc + 3]] if op == Op.MAP else None
        while True:
            count, size, size_at, pos = self.block(pos, min_bytes)
            if count == 0:
                break
            if not writes and size >= 0:
                if size > self.end - pos:
                    raise _Bad(f"length {size} at byte {size_at} exceeds the {self.end - pos} bytes left")
                pos += size
                continue
            for _ in range(count):
                if is_map:
                    n, begin = self.length(pos)
                    if key is not None:
                        data = self.buf[begin : begin + n]
                        _check_utf8(data, begin)
                        self.put_bytes(code[pc + 3], data)
                    pos = begin + n
                pos = self.run(item, pos)
        if writes:
            column = self.columns[code[pc + 2]]
            child = self.columns[column.children[-1]]  # the item, or the map's value (its key comes first)
            self.charge(5)  # a slot and an offset
            column.valid.append(True)
            self.add_offset(column, len(child.valid))
        return pos


def _check_utf8(data: bytes, at: int) -> None:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        raise _Bad(f"invalid UTF-8 in the string at byte {at}") from None
