"""Avro column buffers to Arrow (pipelines.executor.payloads.avro_arrow): the kernel's output typed
as pipelines.schemas.columns maps the reader schema. The oracle is fastavro's reading of the same
values built into columns by pipelines.schemas.columns (tests/pipelines/executor/avro_oracle.py):
random writer and reader schemas, values written by fastavro, the same table from both."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kafkalog.schemas import avro
from kafkalog.schemas.avro_columns import decode
from kafkalog.schemas.avro_program import compile_program
from pipelines.config.pipeline import Decoder
from pipelines.errors import PayloadSchemaError
from pipelines.executor.payloads.avro_arrow import BAD_ROW, arrow_schema, to_arrow
from pipelines.schemas.columns import avro_columns
from pipelines.schemas.resolved import SubjectSchemas
from tests.kafkalog.schemas.test_avro_columns import FRAME, cases, encode
from tests.pipelines.executor.avro_oracle import FastavroValues

pytestmark = pytest.mark.unit


def kernel_rows(writer: Any, reader: Any, values: list[bytes], *, good: bool = True) -> Any:
    program = compile_program(avro.parse(json.dumps(writer)), avro.parse(json.dumps(reader)))
    [decoded] = decode(values, len(FRAME), program)
    if good:
        assert decoded.bad == []
    else:
        assume(not decoded.bad)  # bytes read as a string that are not UTF-8
    return to_arrow(decoded.columns, program.columns), program


def oracle(writer: Any, reader: Any) -> FastavroValues:
    schemas = SubjectSchemas("AVRO", json.dumps(reader), "t-value", 1, 1, {7: json.dumps(writer)})
    return FastavroValues(Decoder(format="avro", schema_file=Path("r.avsc")), schemas)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_the_kernels_table_is_the_mappings_table(case: tuple[Any, Any, list[Any]]) -> None:
    writer, reader, records = case
    assume(reader["fields"])  # the oracle's rows of no columns are no rows (Arrow's from_pylist)
    assume(not _ambiguous(writer) and not _ambiguous(reader))
    # the oracle reads a bytes default as UTF-8; Avro's are code points 0-255 (the kernel's reading)
    assume("\\u00ff" not in json.dumps(reader))
    try:
        expected = oracle(writer, reader)
    except PayloadSchemaError:
        assume(False)  # an array of items of no bytes: refused before any value is read
    values = encode(writer, records)
    rows, program = kernel_rows(writer, reader, values, good=False)
    assert arrow_schema(program.columns) == expected.schema
    assert rows.table.schema == expected.schema
    pieces, bad = expected.parse(values)
    assert bad == [] and rows.bad == []
    assert rows.table.to_pylist() == pa.concat_tables([p.table for p in pieces]).to_pylist()


_PYTHON_TYPE = {"long": "int", "double": "float", "fixed": "bytes", "map": "record", "enum": "string"}


def _ambiguous(node: Any) -> bool:
    """A union the oracle cannot tell the branch of (it guesses the branch from fastavro's Python
    value: an int of ``[int, long, string]``, a float of ``[float, int, double]``, an empty dict of a
    map or a record)."""
    if isinstance(node, list):
        kinds = [_PYTHON_TYPE.get(k, k) for k in (b if isinstance(b, str) else b["type"] for b in node)]
        # [int, long] and [float, double] are one column (no member to tell); a union mixing the
        # two families keeps its members, and a float value fits both of [float, int, double]
        numeric = len(set(kinds) - {"null"}) == 1 and {"int", "float"} >= set(kinds) - {"null"}
        return (len(set(kinds)) < len(kinds) and not numeric) or any(_ambiguous(b) for b in node)
    if isinstance(node, dict):
        inner = [f["type"] for f in node.get("fields", [])] + [node[k] for k in ("items", "values") if k in node]
        return any(_ambiguous(t) for t in inner)
    return False


LOGICAL = {
    "type": "record",
    "name": "L",
    "fields": [
        {"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "tu", "type": {"type": "long", "logicalType": "time-micros"}},
        {"name": "ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "ns", "type": {"type": "long", "logicalType": "timestamp-nanos"}},
        {"name": "lms", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
        {"name": "lus", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "lns", "type": {"type": "long", "logicalType": "local-timestamp-nanos"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {
            "name": "fd",
            "type": {"type": "fixed", "name": "FD", "size": 3, "logicalType": "decimal", "precision": 6, "scale": 1},
        },
        {"name": "big", "type": {"type": "bytes", "logicalType": "decimal", "precision": 50, "scale": 3}},
        {"name": "dur", "type": {"type": "fixed", "name": "Dur", "size": 12, "logicalType": "duration"}},
        {"name": "fx", "type": {"type": "fixed", "name": "Fx", "size": 2}},
        {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "nothing", "type": "null"},
        {"name": "il", "type": ["null", "int", "long"]},
        {"name": "fd2", "type": ["float", "double"]},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
    ],
}
ONE = {
    "tm": 3_723_004,  # 01:02:03.004
    "tu": 3_723_000_005,
    "ms": 1_700_000_000_123,
    "us": 1_700_000_000_123_456,
    "ns": 1_700_000_000_123_456_789,
    "lms": 1_700_000_000_123,
    "lus": 1_700_000_000_123_456,
    "lns": 7,
    "day": 19_000,
    "d": decimal.Decimal("-1234567.89"),
    "fd": decimal.Decimal("-12.5"),
    "big": decimal.Decimal(-(10**45)).scaleb(-3),
    "dur": b"\x01" * 12,
    "fx": b"ab",
    "u": "0b9f8a36-8e71-4f2e-9a0c-5d3c1f7e2a10",
    "nothing": None,
    "il": 5,
    "fd2": 0.5,
    "e": "B",
}


def test_logical_types_as_the_mapping_says() -> None:
    record = {**ONE, "d": ONE["d"], "fd": ONE["fd"], "big": ONE["big"]}
    (value,) = encode(LOGICAL, [record])
    rows, _ = kernel_rows(LOGICAL, LOGICAL, [value])
    assert rows.table.schema == avro_columns(json.dumps(LOGICAL)).schema
    assert rows.table.schema.types == [
        pa.int64(),
        pa.int64(),
        pa.timestamp("us", tz="UTC"),
        pa.timestamp("us", tz="UTC"),
        pa.int64(),
        pa.timestamp("us", tz="UTC"),
        pa.timestamp("us", tz="UTC"),
        pa.int64(),
        pa.date32(),
        pa.decimal128(9, 2),
        pa.decimal128(6, 1),
        pa.string(),
        pa.binary(),
        pa.binary(),
        pa.string(),
        pa.string(),
        pa.int64(),
        pa.float64(),
        pa.string(),
    ]
    utc = dt.UTC
    assert rows.table.to_pylist() == [
        {
            **ONE,
            "tm": 3_723_004_000,
            "ms": dt.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=utc),
            "us": dt.datetime(2023, 11, 14, 22, 13, 20, 123456, tzinfo=utc),
            "lms": dt.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=utc),
            "lus": dt.datetime(2023, 11, 14, 22, 13, 20, 123456, tzinfo=utc),
            "day": dt.date(2022, 1, 8),
            "big": "-1" + "0" * 42 + ".000",
        }
    ]
    pieces, bad = oracle(LOGICAL, LOGICAL).parse([value])
    assert bad == [] and pieces[0].table.equals(rows.table)


def test_a_value_its_column_cannot_hold_makes_its_row_bad_alone() -> None:
    schema = {
        "type": "record",
        "name": "M",
        "fields": [
            {"name": "m", "type": {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 1}},
            {"name": "xs", "type": {"type": "array", "items": {"type": "long", "logicalType": "timestamp-millis"}}},
        ],
    }
    raw = {
        **schema,
        "fields": [{"name": "m", "type": "bytes"}, {"name": "xs", "type": {"type": "array", "items": "long"}}],
    }
    values = encode(
        raw,
        [
            {"m": (999).to_bytes(2, "big"), "xs": [1]},
            {"m": (10**4).to_bytes(2, "big"), "xs": []},  # 5 digits in a decimal of 4
            {"m": (-(10**4)).to_bytes(2, "big", signed=True), "xs": []},
            {"m": b"\x01", "xs": [0, 2**62]},  # 2^62 ms: no timestamp in microseconds holds it
            {"m": b"\x02", "xs": [-5]},
        ],
    )
    rows, _ = kernel_rows(schema, schema, values)
    assert rows.kept == [0, 4]
    assert [i for i, _ in rows.bad] == [1, 2, 3]
    assert all(reason.startswith(BAD_ROW) for _, reason in rows.bad)
    assert "more than the 4 digits" in rows.bad[0][1]
    assert rows.table.column("m").to_pylist() == [decimal.Decimal("99.9"), decimal.Decimal("0.2")]
    stamp = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    assert rows.table.column("xs").to_pylist() == [
        [stamp + dt.timedelta(milliseconds=1)],
        [stamp - dt.timedelta(milliseconds=5)],
    ]
    _, bad = oracle(schema, schema).parse(values)
    assert [i for i, _ in bad] == [1, 2, 3]


def test_a_decimal_past_38_digits_is_checked_against_its_precision_too() -> None:
    schema = {
        "type": "record",
        "name": "W",
        "fields": [
            {"name": "d", "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 40, "scale": 2}]}
        ],
    }
    raw = {**schema, "fields": [{"name": "d", "type": ["null", "bytes"]}]}
    values = encode(
        raw,
        [
            {"d": (10**40 - 1).to_bytes(17, "big")},  # 40 digits: the most it holds
            {"d": (10**70).to_bytes(30, "big")},  # 71 digits
            {"d": None},
            {"d": (-(10**40)).to_bytes(17, "big", signed=True)},  # 41 digits
        ],
    )
    rows, _ = kernel_rows(schema, schema, values)
    assert rows.kept == [0, 2]
    assert [i for i, _ in rows.bad] == [1, 3]
    assert rows.bad[0][1] == BAD_ROW + f"decimal {10**68}.00 has more than the 40 digits of its precision"
    assert rows.table.column("d").to_pylist() == [f"{10**38 - 1}.99", None]


BIG_DECIMAL = {"type": "bytes", "logicalType": "decimal"}


def test_defaults_of_logical_types_are_in_the_columns_units() -> None:
    writer = {"type": "record", "name": "L", "fields": [{"name": "id", "type": "int"}]}
    reader = {
        **writer,
        "fields": [
            {"name": "id", "type": "int"},
            {"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}, "default": 2},
            {"name": "ms", "type": {"type": "long", "logicalType": "timestamp-millis"}, "default": 3},
            {
                "name": "big",
                "type": {"type": "bytes", "logicalType": "decimal", "precision": 40, "scale": 1},
                "default": "\u0001",
            },
            {"name": "il", "type": ["int", "long"], "default": 4},
            {"name": "nothing", "type": "null", "default": None},
        ],
    }
    values = encode(writer, [{"id": 1}])
    rows, _ = kernel_rows(writer, reader, values)
    pieces, bad = oracle(writer, reader).parse(values)
    assert bad == [] and pieces[0].table.equals(rows.table)
    assert rows.table.to_pylist()[0]["tm"] == 2000 and rows.table.to_pylist()[0]["big"] == "0.1"


def _strip(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _strip(v) for k, v in node.items() if k != "logicalType"}
    return [_strip(b) for b in node] if isinstance(node, list) else node


def _raw_values(node: Any) -> st.SearchStrategy[Any]:
    """Any value of the type under the logical type: out of range for it too (decimals of more
    digits than their precision, milliseconds past what microseconds hold)."""
    if isinstance(node, list):
        return st.one_of([_raw_values(b) for b in node])
    kind = node if isinstance(node, str) else node["type"]
    if kind == "int":
        return st.integers(-(2**31), 2**31 - 1)
    if kind == "long":
        return st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(-(10**13), 10**13))
    if kind == "bytes":
        return st.binary(max_size=18)
    if kind == "fixed":
        return st.binary(min_size=node["size"], max_size=node["size"])
    if kind == "string":
        return st.text(max_size=4)
    if kind == "null":
        return st.none()
    if kind == "float":
        return st.floats(width=32, allow_nan=False)
    if kind == "double":
        return st.floats(allow_nan=False)
    return st.sampled_from(node["symbols"])


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_logical_values_in_and_out_of_range_as_the_oracle_reads_them(data: st.DataObject) -> None:
    fields = data.draw(
        st.lists(st.sampled_from(LOGICAL["fields"]), min_size=1, max_size=6, unique_by=lambda f: f["name"])
    )
    reader = {**LOGICAL, "fields": fields}
    writer = _strip(reader)
    records = data.draw(
        st.lists(
            st.fixed_dictionaries({f["name"]: _raw_values(f["type"]) for f in writer["fields"]}), min_size=1, max_size=5
        )
    )
    values = encode(writer, records)
    program = compile_program(avro.parse(json.dumps(writer)), avro.parse(json.dumps(reader)))
    [decoded] = decode(values, len(FRAME), program)
    rows = to_arrow(decoded.columns, program.columns)
    decoded_rows = [i for i in range(len(values)) if i not in {j for j, _ in decoded.bad}]
    ours_bad = sorted([*(j for j, _ in decoded.bad), *(decoded_rows[r] for r, _ in rows.bad)])
    pieces, bad = oracle(writer, reader).parse(values)
    assert ours_bad == [i for i, _ in bad]
    kept = [decoded_rows[r] for r in rows.kept]
    assert kept == [i for p in pieces for i in p.indexes]
    if pieces:
        assert rows.table.equals(pa.concat_tables([p.table for p in pieces]))
