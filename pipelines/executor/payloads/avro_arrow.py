"""Avro columns to Arrow: the buffers :func:`kafkalog.schemas.avro_columns.decode` filled, wrapped as
Arrow arrays without copying their values (``pa.Array.from_buffers``), typed as the reader's schema
says.

The mapping follows spark-avro's: a record is a struct; an array a list; a map a map of string keys;
``[null, X]`` a nullable X; a union of several types a struct of ``member0``, ``member1``, ...; an
enum a string (the reader's symbol); a fixed a fixed-size binary; ``decimal`` a decimal128 (up to 38
digits, else decimal256); ``date`` a date32; ``time-millis`` / ``time-micros`` time32[ms] /
time64[us]; ``timestamp-millis`` / ``-micros`` / ``-nanos`` a timestamp in UTC, their ``local-``
forms a timestamp without a time zone; ``uuid`` a string. A reader field the writer lacks (a
:attr:`~kafkalog.schemas.avro_program.Column.constant` column) is its default repeated, one value a row.
"""

from __future__ import annotations

import decimal
from collections.abc import Sequence
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc

from kafkalog.schemas._avro_columns_py import ColumnBuffers
from kafkalog.schemas.avro_program import Column, Kind

_INT64_LOGICAL: Final = {
    "timestamp-millis": pa.timestamp("ms", tz="UTC"),
    "timestamp-micros": pa.timestamp("us", tz="UTC"),
    "timestamp-nanos": pa.timestamp("ns", tz="UTC"),
    "local-timestamp-millis": pa.timestamp("ms"),
    "local-timestamp-micros": pa.timestamp("us"),
    "local-timestamp-nanos": pa.timestamp("ns"),
    "time-micros": pa.time64("us"),
}
_INT32_LOGICAL: Final = {"date": pa.date32(), "time-millis": pa.time32("ms")}


def _children(columns: Sequence[Column]) -> list[list[int]]:
    children: list[list[int]] = [[] for _ in columns]
    for index, column in enumerate(columns):
        if column.parent >= 0:
            children[column.parent].append(index)
    return children


def arrow_type(columns: Sequence[Column], index: int, children: list[list[int]] | None = None) -> pa.DataType:
    """The Arrow type of column ``index`` (and its children)."""
    children = _children(columns) if children is None else children
    column = columns[index]
    kind = column.kind
    if kind == Kind.NULL:
        return pa.null()
    if kind == Kind.BOOLEAN:
        return pa.bool_()
    if kind == Kind.INT32:
        if column.logical == "enum":
            return pa.string()
        return _INT32_LOGICAL.get(column.logical, pa.int32())
    if kind == Kind.INT64:
        return _INT64_LOGICAL.get(column.logical, pa.int64())
    if kind == Kind.FLOAT32:
        return pa.float32()
    if kind == Kind.FLOAT64:
        return pa.float64()
    if kind == Kind.BINARY:
        return pa.string() if column.logical in ("string", "uuid") else pa.binary()
    if kind == Kind.FIXED:
        if column.logical == "decimal":
            factory = pa.decimal128 if column.width == 16 else pa.decimal256
            return factory(column.precision, column.scale)
        return pa.binary(column.width)
    if kind == Kind.STRUCT:
        return pa.struct([_field(columns, c, children) for c in children[index]])
    if kind == Kind.LIST:
        return pa.list_(_field(columns, children[index][0], children))
    key, value = children[index]
    return pa.map_(arrow_type(columns, key, children), _field(columns, value, children))


def _field(columns: Sequence[Column], index: int, children: list[list[int]]) -> pa.Field:
    column = columns[index]
    nullable = column.nullable or column.kind == Kind.NULL
    return pa.field(column.name, arrow_type(columns, index, children), nullable=nullable)


def arrow_schema(columns: Sequence[Column]) -> pa.Schema:
    """The table :func:`to_arrow` makes: the root record's fields (or one ``value`` column)."""
    children = _children(columns)
    if columns[0].kind == Kind.STRUCT and columns[0].logical != "union":
        return pa.schema([_field(columns, c, children) for c in children[0]])
    return pa.schema([_field(columns, 0, children)])


def to_arrow(buffers: Sequence[ColumnBuffers], columns: Sequence[Column]) -> pa.Table:
    """The decoded ``buffers`` (one per column of ``columns``, as decode returns them) as a table:
    the root record's fields as its columns (a root of another type: one column, ``value``)."""
    children = _children(columns)
    root = _array(buffers, columns, children, 0, buffers[0][0])
    if columns[0].kind == Kind.STRUCT and columns[0].logical != "union":
        return pa.Table.from_struct_array(root)  # keeps the row count when the record has no fields
    return pa.Table.from_arrays([root], schema=arrow_schema(columns))


def _array(
    buffers: Sequence[ColumnBuffers], columns: Sequence[Column], children: list[list[int]], index: int, length: int
) -> pa.Array:
    column = columns[index]
    kind = column.kind
    arrow = arrow_type(columns, index, children)
    if column.constant:
        return _constant(columns, children, index, arrow, length)
    n, nulls, validity, one, two = buffers[index]
    valid = pa.py_buffer(validity) if validity is not None else None
    if kind == Kind.NULL:
        return pa.nulls(n)
    if kind == Kind.BOOLEAN:
        return pa.Array.from_buffers(pa.uint8(), n, [valid, pa.py_buffer(one)], nulls).cast(pa.bool_())
    if kind == Kind.INT32 and column.logical == "enum":
        indices = pa.Array.from_buffers(pa.int32(), n, [valid, pa.py_buffer(one)], nulls)
        return pc.take(pa.array(column.symbols, pa.string()), indices)
    if kind in (Kind.INT32, Kind.INT64, Kind.FLOAT32, Kind.FLOAT64, Kind.FIXED):
        return pa.Array.from_buffers(arrow, n, [valid, pa.py_buffer(one)], nulls)
    if kind == Kind.BINARY:
        return pa.Array.from_buffers(arrow, n, [valid, pa.py_buffer(one), pa.py_buffer(two)], nulls)
    below = children[index]
    if kind == Kind.STRUCT:
        parts = [_array(buffers, columns, children, c, n) for c in below]
        return pa.Array.from_buffers(arrow, n, [valid], nulls, children=parts)
    offsets = pa.py_buffer(one)
    items = buffers[below[-1]][0]
    if kind == Kind.LIST:
        return pa.Array.from_buffers(
            arrow, n, [valid, offsets], nulls, children=[_array(buffers, columns, children, below[0], items)]
        )
    key = _array(buffers, columns, children, below[0], items)
    value = _array(buffers, columns, children, below[1], items)
    entries = pa.StructArray.from_arrays([key, value], fields=[arrow.key_field, arrow.item_field])
    return pa.Array.from_buffers(arrow, n, [valid, offsets], nulls, children=[entries])


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
    if value is None:
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
        return decimal.Decimal(unscaled).scaleb(-column.scale)
    if column.logical in ("fixed", "") and isinstance(value, str) and not below:
        return value.encode("latin-1")  # Avro writes bytes defaults as code points 0-255
    if below and isinstance(value, dict) and columns[below[0]].name == "key":
        return [(k, _default(columns, children, below[1], v)) for k, v in value.items()]
    if below and isinstance(value, dict):
        return {columns[c].name: _default(columns, children, c, value.get(columns[c].name)) for c in below}
    if below and isinstance(value, list):
        return [_default(columns, children, below[0], v) for v in value]
    return value
