"""The pure-Python twin of the C kernel ``_avro_columns``: runs a compiled program
(:mod:`kafkalog.schemas.avro_program`) over a chunk of Avro values, into columns.

It is the reference the tests hold the C kernel to (same columns, same bad reasons, byte for byte)
and the fallback where the C module is not built. ``decode(values, start, code, layout)``: each
value's datum begins at byte ``start``; ``layout`` is (kind, parent, width) per column. Returns
``(columns, bad)``: per column ``(length, null_count, validity, buffer1, buffer2)`` (validity an
Arrow bitmap, None when nothing is null; buffer1 the values, or the int32 offsets of a binary, list
or map column; buffer2 a binary column's bytes), and the (index, reason) of each value that failed.
A value that fails leaves nothing in any column. Every value is untrusted: lengths and counts are
checked against the bytes left before anything is taken or made from them.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Final

from kafkalog.schemas.avro_program import MAX_EMPTY_ITEMS, Kind, Op

_I32: Final = struct.Struct("<i")
_I64: Final = struct.Struct("<q")
_F32: Final = struct.Struct("<f")
_F64: Final = struct.Struct("<d")
_MAX_OFFSET: Final = 2**31 - 1
_WIDTH: Final = {Kind.BOOLEAN: 1, Kind.INT32: 4, Kind.INT64: 8, Kind.FLOAT32: 4, Kind.FLOAT64: 8}

ColumnBuffers = tuple[int, int, bytes | None, bytes | None, bytes | None]


class _Bad(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


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
    values: Sequence[bytes], start: int, code: Sequence[int], layout: Sequence[tuple[int, int, int]]
) -> tuple[list[ColumnBuffers], list[tuple[int, str]]]:
    columns = [_Column(kind, width) for kind, _, width in layout]
    for index, (_, parent, _) in enumerate(layout):
        if parent >= 0:
            columns[parent].children.append(index)
    runner = _Runner(tuple(code), columns)
    bad: list[tuple[int, str]] = []
    for i, value in enumerate(values):
        marks = [c.mark() for c in columns]
        try:
            runner.row(bytes(value), start)
        except _Bad as e:
            for column, mark in zip(columns, marks, strict=True):
                column.rollback(mark)
            bad.append((i, e.reason))
    return [_buffers(c) for c in columns], bad


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
    def __init__(self, code: tuple[int, ...], columns: list[_Column]) -> None:
        self.code = code
        self.columns = columns
        self.buf = b""
        self.end = 0
        self.budget = 0

    def row(self, value: bytes, start: int) -> None:
        if len(value) < start:
            raise _Bad(f"value shorter than {start} bytes")
        self.buf, self.end, self.budget = value, len(value), MAX_EMPTY_ITEMS
        pos = self.run(0, start)
        if pos != self.end:
            raise _Bad(f"{self.end - pos} bytes left after the record")

    # -- reading --------------------------------------------------------------------------------

    def read_long(self, pos: int) -> tuple[int, int]:
        begin, result, shift = pos, 0, 0
        for _ in range(10):
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
        value, after = self.read_long(pos)
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

    def valid(self, column: _Column) -> None:
        column.valid.append(True)

    def add_offset(self, column: _Column, value: int) -> None:
        if value > _MAX_OFFSET:
            raise _Bad(f"a column of the chunk exceeds {_MAX_OFFSET} values or bytes")
        column.offsets.append(value)

    def put_bytes(self, col: int, data: bytes) -> None:
        column = self.columns[col]
        column.valid.append(True)
        column.data += data
        self.add_offset(column, len(column.data))

    def put(self, col: int, data: bytes) -> None:
        column = self.columns[col]
        column.valid.append(True)
        column.data += data

    def null(self, col: int) -> None:
        column = self.columns[col]
        if column.kind == Kind.CONST:
            return
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
            column = self.columns[code[pc + 2]]
            column.valid.append(True)
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
            self.put(code[pc + 2], self.buf[pos:after])
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
            index, after = self.read_long(pos)
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
            index, after = self.read_long(pos)
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
                        key.valid.append(True)
                        key.data += data
                        self.add_offset(key, len(key.data))
                    pos = begin + n
                pos = self.run(item, pos)
        if writes:
            column = self.columns[code[pc + 2]]
            child = self.columns[column.children[-1]]  # the item, or the map's value (its key comes first)
            column.valid.append(True)
            self.add_offset(column, len(child.valid))
        return pos


def _check_utf8(data: bytes, at: int) -> None:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        raise _Bad(f"invalid UTF-8 in the string at byte {at}") from None
