"""Avro columns to Arrow: the buffers :func:`kafkalog.schemas.avro_columns.decode` filled, wrapped as
Arrow arrays (``pa.Array.from_buffers``, no copy of the values where the column's type is its
storage), typed as pipelines.schemas.columns maps the reader's schema: :func:`arrow_schema` of a
program's columns is ``avro_columns(reader).schema``, field for field, nullability included.

The mapping (pipelines.schemas.columns is its authority; this module reproduces it from the buffers):
a record is a struct; an array a list (items ``element``); a map a map of string keys (values
``value``); ``[null, X]`` a nullable X; ``[int, long]`` an int64, ``[float, double]`` a float64 (the
program reads every branch into one column); any other union a struct of ``member0``,
``member1``, ...; an enum a string (the reader's symbol); a fixed (``duration`` too) and bytes
binary; the type ``null`` a string column of nulls; ``decimal`` a decimal128(p, s) up to 38 digits,
else its text; ``date`` a date32; ``time-millis`` / ``time-micros`` int64 microseconds of the day;
``timestamp-millis`` / ``-micros`` and their ``local-`` forms timestamp[us, UTC] (the local forms
at their wall-clock time); ``timestamp-nanos`` and ``local-timestamp-nanos`` int64 nanoseconds;
``uuid`` a string. The root record's fields are the table's columns, each nullable (a tombstone's
row has none); a root of another type is one column ``value``. A reader field the writer lacks (a
:attr:`~kafkalog.schemas.avro_program.Column.constant` column) is its default repeated.

A row whose value its column cannot hold is bad, with its reason, and left out of the table (the
others keep their order): a decimal with more digits than its precision (its text too, past 38
digits), a millisecond timestamp
beyond the microseconds an int64 holds. :func:`to_arrow` says which rows those were.
"""

from __future__ import annotations

import bisect
import decimal
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc

from kafkalog.schemas._avro_columns_py import ColumnBuffers
from kafkalog.schemas.avro_program import Column, Kind
from pipelines.schemas.columns import MAX_DECIMAL_PRECISION, UTC_MICROS, decimal_text

_INT64_LOGICAL: Final = {
    "timestamp-micros": UTC_MICROS,
    "local-timestamp-micros": UTC_MICROS,
}
_MILLIS_TIMESTAMPS: Final = frozenset({"timestamp-millis", "local-timestamp-millis"})
_INT64_MAX: Final = 2**63 - 1

BAD_ROW = "the record cannot be a row: "
"""The prefix of the reason of a row a column cannot hold (pipelines.executor.payloads.avro_values's)."""


def _children(columns: Sequence[Column]) -> list[list[int]]:
    children: list[list[int]] = [[] for _ in columns]
    for index, column in enumerate(columns):
        if column.parent >= 0:
            children[column.parent].append(index)
    return children


def _is_text_decimal(column: Column) -> bool:
    return column.logical == "decimal" and column.precision > MAX_DECIMAL_PRECISION


def arrow_type(columns: Sequence[Column], index: int, children: list[list[int]] | None = None) -> pa.DataType:
    """The Arrow type of column ``index`` (and its children)."""
    children = _children(columns) if children is None else children
    column = columns[index]
    kind, logical = column.kind, column.logical
    if kind == Kind.NULL:
        return pa.string()
    if kind == Kind.BOOLEAN:
        return pa.bool_()
    if kind == Kind.INT32:
        if logical == "enum":
            return pa.string()
        if logical == "date":
            return pa.date32()
        return pa.int64() if logical == "time-millis" else pa.int32()
    if kind == Kind.INT64:
        if logical in _MILLIS_TIMESTAMPS:
            return UTC_MICROS
        return _INT64_LOGICAL.get(logical, pa.int64())
    if kind == Kind.FLOAT32:
        return pa.float32()
    if kind == Kind.FLOAT64:
        return pa.float64()
    if kind == Kind.BINARY:
        return pa.string() if logical in ("string", "uuid") else pa.binary()
    if kind == Kind.FIXED:  # a decimal's: a fixed (Avro's) is a binary column
        return pa.string() if _is_text_decimal(column) else pa.decimal128(column.precision, column.scale)
    if kind == Kind.STRUCT:
        return pa.struct([_field(columns, c, children) for c in children[index]])
    if kind == Kind.LIST:
        return pa.list_(_field(columns, children[index][0], children, "element"))
    value = children[index][1]  # the key (children[index][0]) is a string
    return pa.map_(pa.string(), _field(columns, value, children, "value"))


def _field(columns: Sequence[Column], index: int, children: list[list[int]], name: str | None = None) -> pa.Field:
    column = columns[index]
    nullable = column.nullable or column.kind == Kind.NULL
    return pa.field(column.name if name is None else name, arrow_type(columns, index, children), nullable=nullable)


def _top_record(columns: Sequence[Column]) -> bool:
    return columns[0].kind == Kind.STRUCT and columns[0].logical != "union"


def arrow_schema(columns: Sequence[Column]) -> pa.Schema:
    """The table :func:`to_arrow` makes: the root record's fields (or one ``value`` column), each
    nullable."""
    children = _children(columns)
    if _top_record(columns):
        return pa.schema([pa.field(columns[c].name, arrow_type(columns, c, children)) for c in children[0]])
    return pa.schema([pa.field("value", arrow_type(columns, 0, children))])


@dataclass(frozen=True)
class Rows:
    """A chunk's rows as a table: ``table`` the good rows, in order; ``kept`` the decoded row each
    of them is (its index among the rows the buffers hold); ``bad`` the (row, reason) of the rows
    left out."""

    table: pa.Table
    kept: list[int]
    bad: list[tuple[int, str]]


def to_arrow(buffers: Sequence[ColumnBuffers], columns: Sequence[Column]) -> Rows:
    """The decoded ``buffers`` (one per column of ``columns``, as decode returns them) as a table of
    :func:`arrow_schema`'s columns, without the rows a column cannot hold."""
    builder = _Builder(buffers, columns)
    rows = buffers[0][0]
    root = builder.array(0, rows)
    if builder.bad:
        keep = pa.array([i not in builder.bad for i in range(rows)], pa.bool_())
        root = root.filter(keep)
    # from_struct_array keeps the row count when the record has no fields
    top = _top_record(columns)
    table = pa.Table.from_struct_array(root) if top else pa.Table.from_arrays([root], schema=arrow_schema(columns))
    kept = [i for i in range(rows) if i not in builder.bad] if builder.bad else list(range(rows))
    return Rows(table, kept, sorted(builder.bad.items()))


class _Builder:
    """One chunk's arrays; ``bad`` gathers the rows (of the root) a column cannot hold."""

    def __init__(self, buffers: Sequence[ColumnBuffers], columns: Sequence[Column]) -> None:
        self.buffers = buffers
        self.columns = columns
        self.children = _children(columns)
        self.bad: dict[int, str] = {}

    def row_of(self, index: int, slot: int) -> int:
        """The root row slot ``slot`` of column ``index`` belongs to (through lists' and maps' offsets)."""
        while self.columns[index].parent >= 0:
            parent = self.columns[index].parent
            if self.columns[parent].kind in (Kind.LIST, Kind.MAP):
                offsets = self.buffers[parent][3]
                assert offsets is not None
                slot = bisect.bisect_right(memoryview(offsets).cast("i"), slot) - 1  # native order, as written
            index = parent
        return slot

    def flag(self, index: int, mask: pa.Array, reason: Any) -> pa.Array:
        """Marks the rows whose slot ``mask`` holds true bad (``reason(slot)`` says why); the mask with
        nulls as false, for the caller to null those slots."""
        mask = pc.fill_null(mask, False)
        if pc.any(mask).as_py():
            for slot in pc.indices_nonzero(mask).to_pylist():
                self.bad.setdefault(self.row_of(index, slot), BAD_ROW + reason(slot))
        return mask

    def array(self, index: int, length: int) -> pa.Array:
        columns, children = self.columns, self.children
        column = columns[index]
        kind = column.kind
        arrow = arrow_type(columns, index, children)
        if column.constant:
            return _constant(columns, children, index, arrow, length)
        n, nulls, validity, one, two = self.buffers[index]
        valid = pa.py_buffer(validity) if validity is not None else None
        if kind == Kind.NULL:
            return pa.nulls(n, pa.string())
        if kind == Kind.BOOLEAN:
            return pa.Array.from_buffers(pa.uint8(), n, [valid, pa.py_buffer(one)], nulls).cast(pa.bool_())
        if kind == Kind.INT32:
            if column.logical == "date":
                return pa.Array.from_buffers(pa.date32(), n, [valid, pa.py_buffer(one)], nulls)
            raw = pa.Array.from_buffers(pa.int32(), n, [valid, pa.py_buffer(one)], nulls)
            if column.logical == "enum":
                return pc.take(pa.array(column.symbols, pa.string()), raw)
            if column.logical == "time-millis":  # to microseconds: an int32 times 1000 fits an int64
                return pc.multiply(raw.cast(pa.int64()), 1000)
            return raw
        if kind == Kind.INT64:
            if column.logical in _MILLIS_TIMESTAMPS:
                return self.millis(index, pa.Array.from_buffers(pa.int64(), n, [valid, pa.py_buffer(one)], nulls))
            return pa.Array.from_buffers(arrow, n, [valid, pa.py_buffer(one)], nulls)
        if kind in (Kind.FLOAT32, Kind.FLOAT64):
            return pa.Array.from_buffers(arrow, n, [valid, pa.py_buffer(one)], nulls)
        if kind == Kind.FIXED:  # a decimal's: a fixed (Avro's) is a binary column
            return self.decimals(index, n, nulls, valid, one)
        if kind == Kind.BINARY:
            return pa.Array.from_buffers(arrow, n, [valid, pa.py_buffer(one), pa.py_buffer(two)], nulls)
        below = children[index]
        if kind == Kind.STRUCT:
            if index == 0 and _top_record(columns):  # the table's columns: each nullable
                arrow = pa.struct(list(arrow_schema(columns)))
            parts = [self.array(c, n) for c in below]
            return pa.Array.from_buffers(arrow, n, [valid], nulls, children=parts)
        offsets = pa.py_buffer(one)
        items = self.buffers[below[-1]][0]
        if kind == Kind.LIST:
            return pa.Array.from_buffers(arrow, n, [valid, offsets], nulls, children=[self.array(below[0], items)])
        key = self.array(below[0], items)
        value = self.array(below[1], items)
        entries = pa.StructArray.from_arrays([key, value], fields=[arrow.key_field, arrow.item_field])
        return pa.Array.from_buffers(arrow, n, [valid, offsets], nulls, children=[entries])

    def millis(self, index: int, raw: pa.Array) -> pa.Array:
        """Milliseconds to a timestamp in microseconds; a value whose microseconds overflow is bad."""
        bound = _INT64_MAX // 1000
        mask = self.flag(
            index,
            pc.or_(pc.greater(raw, bound), pc.less(raw, -bound)),
            lambda slot: f"timestamp of {raw[slot].as_py()} milliseconds is beyond the microseconds a timestamp holds",
        )
        if pc.any(mask).as_py():
            raw = pc.if_else(mask, pa.scalar(None, pa.int64()), raw)
        return pc.multiply(raw, 1000).cast(UTC_MICROS)

    def decimals(self, index: int, n: int, nulls: int, valid: pa.Buffer | None, one: bytes | None) -> pa.Array:
        """A decimal column: its little-endian unscaled integers as decimal128(p, s), a value of more
        digits than p bad; wider than 38 digits, each value's text."""
        column = self.columns[index]
        assert one is not None
        if _is_text_decimal(column):  # 32-byte integers; rare, so one Python int each
            width, data, limit = column.width, one, 10**column.precision
            bitmap = valid.to_pybytes() if valid is not None else None
            numbers = [
                None
                if bitmap is not None and not bitmap[i >> 3] >> (i & 7) & 1
                else int.from_bytes(data[i * width : (i + 1) * width], "little", signed=True)
                for i in range(n)
            ]
            wide = [x is not None and abs(x) >= limit for x in numbers]
            if any(wide):
                self.flag(
                    index,
                    pa.array(wide, pa.bool_()),
                    lambda slot: (
                        f"decimal {decimal_text(numbers[slot] or 0, column.scale)} has more than the "
                        f"{column.precision} digits of its precision"
                    ),
                )
            texts = [
                None if x is None or too_wide else decimal_text(x, column.scale)
                for x, too_wide in zip(numbers, wide, strict=True)
            ]
            return pa.array(texts, pa.string())
        precision, scale = column.precision, column.scale
        wide = pa.Array.from_buffers(pa.decimal128(MAX_DECIMAL_PRECISION, scale), n, [valid, pa.py_buffer(one)], nulls)
        # 128 bits hold 38 digits and some: the precision is checked in 256 bits, exactly
        exact = wide.cast(pa.decimal256(76, scale))
        limit = pa.scalar(decimal.Decimal(10**precision).scaleb(-scale), pa.decimal256(76, scale))
        mask = self.flag(
            index,
            pc.greater_equal(pc.abs(exact), limit),
            lambda slot: f"decimal {exact[slot].as_py()} has more than the {precision} digits of its precision",
        )
        if pc.any(mask).as_py():
            exact = pc.if_else(mask, pa.scalar(None, exact.type), exact)
        return exact.cast(pa.decimal128(precision, scale))


def _constant(
    columns: Sequence[Column], children: list[list[int]], index: int, arrow: pa.DataType, length: int
) -> pa.Array:
    if length == 0:
        return pa.array([], arrow)
    value = _default(columns, children, index, columns[index].default)
    return pa.repeat(pa.scalar(value, arrow), length)


def _default(columns: Sequence[Column], children: list[list[int]], index: int, value: Any) -> Any:
    """An Avro default (JSON) as the Python value Arrow takes for column ``index``."""
    column = columns[index]
    if value is None or column.kind == Kind.NULL:
        return None
    below = children[index]
    if column.logical == "union":
        for member in below:  # the first member the value is one of (Avro 1.12 takes any branch's)
            try:
                converted = _default(columns, children, member, value)
                pa.scalar(converted, arrow_type(columns, member, children))
            except (pa.ArrowException, ValueError, TypeError, KeyError):
                continue
            return {columns[member].name: converted}
        return None
    if column.logical == "decimal":
        unscaled = int.from_bytes(value.encode("latin-1"), "big", signed=True)
        if _is_text_decimal(column):
            return decimal_text(unscaled, column.scale)
        return decimal.Decimal(unscaled).scaleb(-column.scale)
    if column.logical in ("time-millis", *_MILLIS_TIMESTAMPS):
        return value * 1000  # to microseconds, as the values are
    if column.logical in ("fixed", "") and isinstance(value, str) and not below:
        return value.encode("latin-1")  # Avro writes bytes defaults as code points 0-255
    if below and isinstance(value, dict) and columns[below[0]].name == "key" and column.kind == Kind.MAP:
        return [(k, _default(columns, children, below[1], v)) for k, v in value.items()]
    if below and isinstance(value, dict):
        return {columns[c].name: _default(columns, children, c, value.get(columns[c].name)) for c in below}
    if below and isinstance(value, list):
        return [_default(columns, children, below[0], v) for v in value]
    return value
