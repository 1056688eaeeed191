"""The pure-Python twin of the C kernel ``_protobuf_columns``: runs a compiled Protobuf reader
program (:mod:`kafkalog.schemas.protobuf_program`) over a chunk of payloads, into columns.

Same signature, same result, byte for byte (columns, bad reasons, the values left to the caller):
the tests hold the kernel to it, and it decodes where the C module is not built, so that a value is
judged the same on every executor, whatever was built there. ``decode(values, header, code,
columns)``: the values that start with ``header`` are decoded from the byte after it; the indexes
of the others (None among them) are returned for the caller. Returns ``(columns, bad, others)``:
per column ``(length, null_count, validity, buffer1, buffer2)`` (validity an Arrow bitmap, None when
nothing is null; buffer1 the values, or the int32 offsets of a binary, list or map column; buffer2
a binary column's bytes). A value that fails leaves nothing in any column. Every value is
untrusted: every read is checked against the end of the value or of its message first.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Final

from kafkalog.schemas.protobuf_program import FIELD_INTS, MAP_ENTRY, Kind, Label, Op

ColumnBuffers = tuple[int, int, bytes | None, bytes | None, bytes | None]

MAX_VALUES_PER_PAYLOAD: Final = 1 << 24  # as the C kernel's
_MAX_DEPTH: Final = 80
_MAX_GROUP_DEPTH: Final = 64
_MAX_OFFSET: Final = 2**31 - 1
_WIDTH: Final = {Kind.BOOLEAN: 1, Kind.INT32: 4, Kind.INT64: 8, Kind.FLOAT32: 4, Kind.FLOAT64: 8, Kind.DECIMAL128: 16}
_I32: Final = struct.Struct("<i")
_I64: Final = struct.Struct("<q")
_U32: Final = struct.Struct("<I")
_WIRE: Final = {
    Op.FIXED32: 5, Op.SFIXED32: 5, Op.FLOAT: 5, Op.FIXED64: 1, Op.SFIXED64: 1, Op.DOUBLE: 1,
    Op.STRING: 2, Op.BYTES: 2, Op.MESSAGE: 2, Op.TIME: 2, Op.RAW: 2,
}  # fmt: skip
_VARINT, _I64_WT, _LEN, _SGROUP, _EGROUP, _I32_WT = 0, 1, 2, 3, 4, 5


class _Bad(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _Col:
    __slots__ = ("children", "data", "kind", "nulls", "offsets", "valid")

    def __init__(self, kind: int) -> None:
        self.kind = kind
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
    values: Sequence[bytes | None], header: bytes, code: Sequence[int], columns: Sequence[tuple[int, int]]
) -> tuple[list[ColumnBuffers], list[tuple[int, str]], list[int]]:
    cols = [_Col(kind) for kind, _ in columns]
    for index, (_, parent) in enumerate(columns):
        if parent >= 0:
            cols[parent].children.append(index)
    runner = _Runner(tuple(code), cols)
    bad: list[tuple[int, str]] = []
    others: list[int] = []
    start = len(header)
    for i, value in enumerate(values):
        if value is None or len(value) < start or bytes(value[:start]) != header:
            others.append(i)
            continue
        marks = [c.mark() for c in cols]
        try:
            runner.payload(bytes(value), start)
        except _Bad as e:
            for col, mark in zip(cols, marks, strict=True):
                col.rollback(mark)
            bad.append((i, e.reason))
    return [_buffers(c) for c in cols], bad, others


def _buffers(col: _Col) -> ColumnBuffers:
    length = len(col.valid)
    validity = None
    if col.nulls:
        bitmap = bytearray((length + 7) // 8)
        for i, ok in enumerate(col.valid):
            if ok:
                bitmap[i >> 3] |= 1 << (i & 7)
        validity = bytes(bitmap)
    offsets = b"".join(_I32.pack(o) for o in col.offsets)
    if col.kind == Kind.BINARY:
        return (length, col.nulls, validity, offsets, bytes(col.data))
    if col.kind in (Kind.LIST, Kind.MAP):
        return (length, col.nulls, validity, offsets, None)
    if col.kind == Kind.STRUCT:
        return (length, col.nulls, validity, None, None)
    return (length, col.nulls, validity, bytes(col.data), None)


class _Runner:  # one method per function of the C kernel, in its order
    def __init__(self, code: tuple[int, ...], cols: list[_Col]) -> None:
        self.code = code
        self.cols = cols
        self.buf = b""
        self.budget = 0

    def payload(self, value: bytes, start: int) -> None:
        self.buf, self.budget = value, MAX_VALUES_PER_PAYLOAD
        self.read_message(0, start, len(value), 0)

    # -- columns --------------------------------------------------------------------------------------

    def add_offset(self, col: _Col, value: int) -> None:
        if value > _MAX_OFFSET:
            raise _Bad(f"a column of the chunk exceeds {_MAX_OFFSET} values or bytes")
        col.offsets.append(value)

    def put(self, index: int, data: bytes) -> None:
        col = self.cols[index]
        col.data += data
        col.valid.append(True)

    def put_bytes(self, index: int, data: bytes) -> None:
        col = self.cols[index]
        col.data += data
        col.valid.append(True)
        self.add_offset(col, len(col.data))

    def put_null(self, index: int) -> None:
        self.budget -= 1
        if self.budget < 0:
            raise _Bad(f"the payload makes more than {MAX_VALUES_PER_PAYLOAD} column values")
        col = self.cols[index]
        col.valid.append(False)
        col.nulls += 1
        if col.kind == Kind.STRUCT:
            for child in col.children:
                self.put_null(child)
        elif col.kind in (Kind.LIST, Kind.MAP, Kind.BINARY):
            col.offsets.append(col.offsets[-1])
        else:
            col.data += bytes(_WIDTH[Kind(col.kind)])

    def put_zero(self, index: int) -> None:
        col = self.cols[index]
        if col.kind == Kind.BINARY:
            col.valid.append(True)
            self.add_offset(col, len(col.data))
            return
        self.put(index, bytes(_WIDTH[Kind(col.kind)]))

    # -- reading --------------------------------------------------------------------------------------

    def varint(self, pos: int, end: int) -> tuple[int, int]:
        at, result = pos, 0
        for shift in range(0, 70, 7):
            if pos >= end:
                raise _Bad(f"truncated varint at byte {at}")
            b = self.buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result & 0xFFFFFFFFFFFFFFFF, pos
        raise _Bad(f"varint longer than 10 bytes at byte {at}")

    def tag(self, pos: int, end: int) -> tuple[int, int]:
        tag, after = self.varint(pos, end)
        if after - pos > 5 or tag >> 32 or tag >> 3 == 0:
            raise _Bad(f"invalid tag at byte {pos}")
        return tag, after

    def length(self, pos: int, end: int) -> tuple[int, int]:
        n, after = self.varint(pos, end)
        if n > end - after:
            raise _Bad(f"length {n} at byte {pos} exceeds the {end - after} bytes left")
        return n, after

    def skip_value(self, pos: int, end: int, wt: int, number: int, depth: int) -> int:
        if wt == _VARINT:
            return self.varint(pos, end)[1]
        if wt in (_I64_WT, _I32_WT):
            width = 8 if wt == _I64_WT else 4
            if width > end - pos:
                raise _Bad(f"truncated at byte {pos}")
            return pos + width
        if wt == _LEN:
            n, after = self.length(pos, end)
            return after + n
        if wt == _SGROUP:
            if depth >= _MAX_GROUP_DEPTH:
                raise _Bad(f"groups nested deeper than {_MAX_GROUP_DEPTH} at byte {pos}")
            while True:
                at = pos
                if pos >= end:
                    raise _Bad(f"group {number} not ended at byte {pos}")
                tag, pos = self.tag(pos, end)
                if tag & 7 == _EGROUP:
                    if tag >> 3 != number:
                        raise _Bad(f"mismatched end of group at byte {at}")
                    return pos
                pos = self.skip_value(pos, end, tag & 7, tag >> 3, depth + 1)
        raise _Bad(f"invalid wire type {wt} at byte {pos}")

    def enum_names(self, table: int, value: int) -> bool:
        if table <= 0:
            return True
        number = _I32.unpack(_U32.pack(value & 0xFFFFFFFF))[0]
        return number in self.code[table + 1 : table + 1 + self.code[table]]

    def read_time(self, index: int, pos: int, end: int) -> None:
        seconds = nanos = 0
        while pos < end:
            at = pos
            tag, pos = self.tag(pos, end)
            number, wt = tag >> 3, tag & 7
            if number in (1, 2) and wt == _VARINT:
                v, pos = self.varint(pos, end)
                if number == 1:
                    seconds = v - (1 << 64) if v >> 63 else v
                else:
                    nanos = _I32.unpack(_U32.pack(v & 0xFFFFFFFF))[0]
            elif wt == _EGROUP:
                raise _Bad(f"unexpected end of group at byte {at}")
            else:
                pos = self.skip_value(pos, end, wt, number, 0)
        micros = seconds * 1_000_000 + nanos // 1000
        if not -(2**63) <= micros < 2**63:
            raise _Bad(f"a time of {seconds} seconds is out of range")
        self.put(index, _I64.pack(micros))

    def read_value(self, f: Sequence[int], index: int, pos: int, end: int, depth: int) -> int:
        op = f[1]
        if op in (Op.INT32, Op.ENUM, Op.SINT32, Op.UINT32, Op.INT64, Op.SINT64, Op.UINT64, Op.BOOL):
            v, pos = self.varint(pos, end)
            if op == Op.ENUM and not self.enum_names(f[5], v):
                return pos  # not a value: as protobuf drops it
            if op in (Op.INT32, Op.ENUM):
                self.put(index, _U32.pack(v & 0xFFFFFFFF))
            elif op == Op.SINT32:
                u = v & 0xFFFFFFFF
                self.put(index, _I32.pack((u >> 1) ^ -(u & 1)))
            elif op == Op.UINT32:
                self.put(index, _I64.pack(v & 0xFFFFFFFF))
            elif op == Op.INT64:
                self.put(index, _I64.pack(v - (1 << 64) if v >> 63 else v))
            elif op == Op.SINT64:
                self.put(index, _I64.pack((v >> 1) ^ -(v & 1)))
            elif op == Op.BOOL:
                self.put(index, b"\x01" if v else b"\x00")
            else:
                self.put(index, v.to_bytes(16, "little"))
            return pos
        if op in (Op.FIXED32, Op.SFIXED32, Op.FLOAT, Op.FIXED64, Op.SFIXED64, Op.DOUBLE):
            width = 4 if op in (Op.FIXED32, Op.SFIXED32, Op.FLOAT) else 8
            if width > end - pos:
                raise _Bad(f"truncated at byte {pos}")
            raw = self.buf[pos : pos + width]
            if op == Op.FIXED32:
                self.put(index, _I64.pack(_U32.unpack(raw)[0]))
            elif op == Op.FIXED64:
                self.put(index, raw + bytes(8))
            else:
                self.put(index, raw)
            return pos + width
        n, at = self.length(pos, end)
        data = self.buf[at : at + n]
        if op == Op.STRING:
            try:
                data.decode("utf-8")
            except UnicodeDecodeError:
                raise _Bad(f"invalid UTF-8 in the string at byte {at}") from None
            self.put_bytes(index, data)
        elif op in (Op.BYTES, Op.RAW):
            self.put_bytes(index, data)
        elif op == Op.TIME:
            self.read_time(index, at, at + n)
        else:
            self.read_message(f[5], at, at + n, depth + 1)
        return at + n

    def read_items(self, f: Sequence[int], wt: int, pos: int, end: int, depth: int) -> int:
        if wt == _WIRE.get(Op(f[1]), _VARINT):
            return self.read_value(f, f[4], pos, end, depth)
        n, pos = self.length(pos, end)
        stop = pos + n
        while pos < stop:
            pos = self.read_value(f, f[4], pos, stop, depth)
        return pos

    def read_message(self, node: int, begin: int, end: int, depth: int) -> None:
        code = self.code
        struct_col, nfields = code[node], code[node + 1]
        fields = [code[node + 2 + k * FIELD_INTS : node + 2 + (k + 1) * FIELD_INTS] for k in range(nfields)]
        if depth > _MAX_DEPTH:
            raise _Bad(f"messages nested deeper than {_MAX_DEPTH}")
        self.budget -= 1 + nfields
        if self.budget < 0:
            raise _Bad(f"the payload makes more than {MAX_VALUES_PER_PAYLOAD} column values")
        places: list[int | None] = [None] * nfields
        pos, hint, unknown = begin, 0, False
        while pos < end:
            at = pos
            tag, pos = self.tag(pos, end)
            number, wt = tag >> 3, tag & 7
            if wt == _EGROUP:
                raise _Bad(f"unexpected end of group at byte {at}")
            k = -1
            if hint < nfields and fields[hint][0] == number:
                k = hint
            else:
                k = next((j for j in range(nfields) if fields[j][0] == number), -1)
            f = fields[k] if k >= 0 else None
            if f is not None:
                hint = k + 1
            expected = _WIRE.get(Op(f[1]), _VARINT) if f is not None else -1
            if f is not None and f[2] >= Label.REPEATED:
                if wt == expected or (wt == _LEN and f[6]):
                    if f[2] == Label.MAP:
                        pos = self.read_value(f, f[3], pos, end, depth)
                    else:
                        pos = self.read_items(f, wt, pos, end, depth)
                    continue
            elif f is not None and wt == expected:
                if f[1] in (Op.MESSAGE, Op.TIME, Op.RAW) and places[k] is not None:
                    raise _Bad(f"message field {number} occurs twice at byte {at} (merging is not supported)")
                if f[1] == Op.ENUM and f[5] > 0:
                    v, peek = self.varint(pos, end)
                    if not self.enum_names(f[5], v):
                        pos = peek
                        unknown = True
                        continue
                places[k] = pos
                if f[7] >= 0:
                    for j in range(nfields):
                        if j != k and fields[j][7] == f[7]:
                            places[j] = None
            else:
                unknown = True  # a field the reader lacks, or of another wire type than its own
            pos = self.skip_value(pos, end, wt, number, 0)
        if struct_col == MAP_ENTRY and unknown:
            return  # out of its map, as protobuf keeps it
        if struct_col >= 0:
            self.cols[struct_col].valid.append(True)
        for k, f in enumerate(fields):
            label, index = f[2], f[3]
            place = places[k]
            if label >= Label.REPEATED:
                col = self.cols[index]
                col.valid.append(True)
                self.add_offset(col, len(self.cols[col.children[-1]].valid))
            elif place is not None:
                self.read_value(f, index, place, end, depth)
            elif label == Label.PRESENCE:
                self.put_null(index)
            elif f[1] == Op.MESSAGE:
                self.read_message(f[5], end, end, depth + 1)
            elif f[1] == Op.TIME:
                self.put(index, bytes(8))
            else:
                self.put_zero(index)
