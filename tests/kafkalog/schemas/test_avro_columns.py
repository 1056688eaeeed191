"""Avro values into columns (kafkalog.schemas.avro_program, avro_columns and its two kernels): on
generated writer schemas, readers derived from them by compatible evolution and records fastavro
wrote, the columns read back to what fastavro's own resolving reader reads, and the C kernel equals
its pure-Python twin byte for byte (columns and bad reasons), on good values and on corrupt ones."""

from __future__ import annotations

import concurrent.futures
import decimal
import io
import itertools
import json
import math
import pickle
import re
import struct
from collections.abc import Sequence
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog.schemas import _avro_columns_py, avro, avro_columns
from kafkalog.schemas.avro_program import (
    MAX_CODE_DEPTH,
    MAX_COLUMN_DEPTH,
    MAX_EMPTY_ITEMS,
    MAX_FIXED_SIZE,
    MAX_PIECE_OUTPUT,
    MAX_VALUE_OUTPUT,
    OUTPUT_SLACK,
    Kind,
    Op,
    Program,
    compile_program,
    value_output_limit,
)
from kafkalog.schemas.errors import SchemaResolutionError
from pipelines.executor.payloads.avro_arrow import arrow_schema, to_arrow

FRAME = b"\x00\x00\x00\x00\x07"  # the Confluent frame: magic byte, schema id 7

if avro_columns.NATIVE:
    from kafkalog.schemas import _avro_columns
else:  # pragma: no cover - a build without a compiler
    _avro_columns = None

needs_c = pytest.mark.skipif(_avro_columns is None, reason=f"the C kernel is not built: {avro_columns.WHY_PURE}")

# -- generated schemas ----------------------------------------------------------------------------------

PRIMITIVES = ["null", "boolean", "int", "long", "float", "double", "bytes", "string"]
PROMOTIONS = {
    "int": ["int", "long", "float", "double"],
    "long": ["long", "float", "double"],
    "float": ["float", "double"],
    "string": ["string", "bytes"],
    "bytes": ["bytes", "string"],
}


class Names:
    """Unique names for the named types of one generated schema."""

    def __init__(self) -> None:
        self.next = 0

    def __call__(self, prefix: str) -> str:
        self.next += 1
        return f"{prefix}{self.next}"


@st.composite
def avro_types(draw: st.DrawFn, names: Names, depth: int = 0, in_union: bool = False) -> Any:
    """A writer type (JSON); each named type defined once."""
    kinds = ["primitive", "fixed", "enum"]
    if depth < 3:
        kinds += ["record", "array", "map"] + ([] if in_union else ["union", "nullable"])
    kind = draw(st.sampled_from(kinds))
    if kind == "primitive":
        return draw(st.sampled_from(PRIMITIVES))
    if kind == "fixed":
        return {"type": "fixed", "name": names("F"), "size": draw(st.integers(0, 4))}
    if kind == "enum":
        symbols = draw(st.lists(st.sampled_from("ABCDE"), min_size=1, max_size=5, unique=True))
        return {"type": "enum", "name": names("E"), "symbols": symbols}
    if kind == "record":
        count = draw(st.integers(0, 4))
        fields = [{"name": f"f{i}", "type": draw(avro_types(names, depth + 1))} for i in range(count)]
        return {"type": "record", "name": names("R"), "fields": fields}
    if kind == "array":
        return {"type": "array", "items": draw(avro_types(names, depth + 1))}
    if kind == "map":
        return {"type": "map", "values": draw(avro_types(names, depth + 1))}
    if kind == "nullable":
        inner = draw(avro_types(names, depth + 1, in_union=True).filter(lambda t: t != "null"))
        return draw(st.sampled_from([["null", inner], [inner, "null"]]))
    # a union of several types: distinct primitives, at most one array and one map, named types
    branches = draw(st.lists(avro_types(names, depth + 1, in_union=True), min_size=2, max_size=4, unique_by=_union_key))
    return branches


def _union_key(branch: Any) -> str:
    if isinstance(branch, str):
        return branch
    return branch.get("name", branch["type"])


@st.composite
def values_of(draw: st.DrawFn, node: Any) -> Any:
    if isinstance(node, list):
        return draw(st.one_of([values_of(b) for b in node]))
    kind = node if isinstance(node, str) else node["type"]
    if kind == "null":
        return None
    if kind == "boolean":
        return draw(st.booleans())
    if kind == "int":
        return draw(st.integers(-(2**31), 2**31 - 1))
    if kind == "long":
        return draw(st.integers(-(2**63), 2**63 - 1))
    if kind == "float":
        return draw(st.floats(width=32, allow_nan=False))
    if kind == "double":
        return draw(st.floats(allow_nan=False))
    if kind == "bytes":
        return draw(st.binary(max_size=6))
    if kind == "string":
        return draw(st.text(max_size=6))
    if kind == "fixed":
        return draw(st.binary(min_size=node["size"], max_size=node["size"]))
    if kind == "enum":
        return draw(st.sampled_from(node["symbols"]))
    if kind == "array":
        return draw(st.lists(values_of(node["items"]), max_size=3))
    if kind == "map":
        return draw(st.dictionaries(st.text(max_size=3), values_of(node["values"]), max_size=3))
    return {f["name"]: draw(values_of(f["type"])) for f in node["fields"]}


ADDED: list[tuple[Any, Any]] = [
    ("int", 7),
    ("long", -3),
    ("double", 1.5),
    ("float", 0.25),
    ("boolean", True),
    ("string", "dé"),
    ("bytes", "\u00ff\u0001"),
    (["null", "string"], None),
    (["string", "null"], "s"),
    ({"type": "array", "items": "long"}, [1, 2]),
    ({"type": "map", "values": "int"}, {"a": 1}),
    ({"type": "enum", "name": "@", "symbols": ["P", "Q"]}, "Q"),
    ({"type": "fixed", "name": "@", "size": 2}, "ab"),
    ({"type": "record", "name": "@", "fields": [{"name": "x", "type": "int"}]}, {"x": 3}),
]


@st.composite
def evolved(draw: st.DrawFn, node: Any, names: Names) -> Any:
    """A reader type that can read ``node``'s data: fields dropped, added with a default, reordered;
    primitives promoted; a type made nullable; enum symbols added, or dropped with a default."""
    if isinstance(node, list):
        has_null = "null" in node
        others = [b for b in node if b != "null"]
        if len(others) == 1:
            inner = draw(evolved(others[0], names))
            if isinstance(inner, list):
                return inner
            return ["null", inner] if node[0] == "null" else [inner, "null"]
        numeric = [b for b in node if b in ("int", "long", "float")]
        if not has_null and len(numeric) == len(node) and draw(st.booleans()):
            return "double"  # a writer union read by one type: every branch promotes to it
        branches = draw(st.permutations(node))  # each writer branch finds its reader branch
        if not has_null and draw(st.booleans()):
            branches = [*branches, "null"]
        return branches
    kind = node if isinstance(node, str) else node["type"]
    if kind in PROMOTIONS:
        promoted = draw(st.sampled_from(PROMOTIONS[kind]))
        other = draw(st.sampled_from([t for t in ("boolean", "string", "long", "bytes", "double") if t != promoted]))
        # a writer type read by a reader union takes the first branch that reads it
        several = draw(st.permutations([promoted, other, "null"]))
        return draw(st.sampled_from([promoted, ["null", promoted], several]))
    if kind == "enum":
        symbols = list(node["symbols"])
        choice = draw(st.sampled_from(["same", "more", "fewer"]))
        if choice == "more":
            symbols = draw(st.permutations([*symbols, "Z"]))
            return {**node, "symbols": symbols}
        if choice == "fewer" and len(symbols) > 1:
            dropped = draw(st.sampled_from(symbols))
            kept = [s for s in symbols if s != dropped]
            return {**node, "symbols": kept, "default": draw(st.sampled_from(kept))}
        return node
    if kind == "array":
        items = draw(evolved(node["items"], names))
        return {"type": "array", "items": items}
    if kind == "map":
        return {"type": "map", "values": draw(evolved(node["values"], names))}
    if kind == "record":
        fields = []
        for f in node["fields"]:
            if draw(st.integers(0, 4)) == 0:
                continue  # dropped: the reader skips it
            fields.append({**f, "type": draw(evolved(f["type"], names))})
        for i in range(draw(st.integers(0, 2))):
            added_type, default = draw(st.sampled_from(ADDED))
            if isinstance(added_type, dict) and added_type.get("name") == "@":
                added_type = {**added_type, "name": names("N")}
            fields.append({"name": f"n{i}", "type": added_type, "default": default})
        return {**node, "fields": draw(st.permutations(fields))}
    return node


@st.composite
def cases(draw: st.DrawFn) -> tuple[Any, Any, list[Any]]:
    names = Names()
    fields = draw(st.lists(avro_types(names, 1), min_size=1, max_size=5))
    writer = {"type": "record", "name": "Root", "fields": [{"name": f"f{i}", "type": t} for i, t in enumerate(fields)]}
    reader = draw(evolved(writer, names))
    records = draw(st.lists(values_of(writer), min_size=1, max_size=6))
    return writer, reader, records


def encode(writer: Any, records: Sequence[Any]) -> list[bytes]:
    parsed = fastavro.parse_schema(writer)
    out = []
    for record in records:
        buffer = io.BytesIO()
        buffer.write(FRAME)
        fastavro.schemaless_writer(buffer, parsed, record)
        out.append(buffer.getvalue())
    return out


def program_of(writer: Any, reader: Any) -> Program:
    return compile_program(avro.parse(json.dumps(writer)), avro.parse(json.dumps(reader)))


# -- columns back to Python values ----------------------------------------------------------------------


def ours(node: Any, value: Any) -> Any:
    """A value of Arrow's ``to_pylist`` of our table as fastavro gives it: maps as dicts, a union's
    struct as its one member's value, fixed and bytes as bytes."""
    if value is None:
        return None
    if isinstance(node, list):
        others = [b for b in node if b != "null"]
        merged = all(b in ("int", "long") for b in others) or all(b in ("float", "double") for b in others)
        if len(others) == 1 or merged:
            return ours(others[0], value)  # [int, long] is one int64 column, [float, double] one float64
        chosen = [i for i in range(len(others)) if value[f"member{i}"] is not None]
        if not chosen:  # the member holds null itself: a member of type null cannot be (they are left out)
            return None
        return ours(others[chosen[0]], value[f"member{chosen[0]}"])
    kind = node if isinstance(node, str) else node["type"]
    if kind == "array":
        return [ours(node["items"], v) for v in value]
    if kind == "map":
        return {k: ours(node["values"], v) for k, v in value}
    if kind == "record":
        return {f["name"]: ours(f["type"], value[f["name"]]) for f in node["fields"]}
    return value


def theirs(node: Any, value: Any) -> Any:
    """fastavro's value, with bytes defaults as the bytes they stand for (fastavro gives the JSON
    string of code points)."""
    if value is None:
        return None
    if isinstance(node, list):
        others = [b for b in node if b != "null"]
        if len(others) == 1:
            return theirs(others[0], value)
        records = [
            b
            for b in others
            if isinstance(b, dict) and b["type"] == "record" and isinstance(value, dict)
            if {f["name"] for f in b["fields"]} == value.keys()
        ]
        # the record branch the value is, known by its fields (a bytes default is in an added field)
        return theirs(records[0], value) if len(records) == 1 else value
    kind = node if isinstance(node, str) else node["type"]
    if kind in ("bytes", "fixed") and isinstance(value, str):
        return value.encode("latin-1")
    if kind == "array":
        return [theirs(node["items"], v) for v in value]
    if kind == "map":
        return {k: theirs(node["values"], v) for k, v in value.items()}
    if kind == "record":
        return {f["name"]: theirs(f["type"], value[f["name"]]) for f in node["fields"]}
    return value


def _f32(x: float) -> float | None:
    try:
        return float(struct.unpack("<f", struct.pack("<f", x))[0])
    except OverflowError:
        return None


def same(a: Any, b: Any) -> bool:
    """Equal, a float read into a float column as fastavro's double rounded to 32 bits."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isinf(a) and a == b) or (_f32(a) is not None and _f32(a) == _f32(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def decode_all(values: list[bytes], program: Program) -> avro_columns.Decoded:
    """The values decoded by the twin and, when built, by the C kernel: they must agree."""
    py_columns, py_bad, py_stop = _avro_columns_py.decode(values, 5, program.code, program.layout)
    if _avro_columns is not None:
        c_columns, c_bad, c_stop = _avro_columns.decode(values, 5, program.code, program.layout)
        assert c_bad == py_bad
        assert c_columns == py_columns
        assert c_stop == py_stop
    assert py_stop == len(values)
    return avro_columns.Decoded(py_columns, py_bad, 0, py_stop)


# -- the tests ------------------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_evolved_readers_read_what_fastavro_reads(case: tuple[Any, Any, list[Any]]) -> None:
    writer, reader, records = case
    values = encode(writer, records)
    program = Program.from_json(program_of(writer, reader).to_json())  # as the driver ships it
    decoded = decode_all(values, program)
    w, r = fastavro.parse_schema(writer), fastavro.parse_schema(reader)
    expected, not_utf8 = [], []
    for i, value in enumerate(values):
        try:
            expected.append(theirs(reader, fastavro.schemaless_reader(io.BytesIO(value[5:]), w, r)))
        except UnicodeDecodeError:  # bytes read as a string: not UTF-8
            not_utf8.append(i)
    assert [i for i, _ in decoded.bad] == not_utf8
    assert all(reason.startswith("invalid UTF-8 in the string at byte") for _, reason in decoded.bad)
    table = to_arrow(decoded.columns, program.columns).table
    assert table.schema == arrow_schema(program.columns)
    got = [ours(reader, row) for row in table.to_pylist()]
    assert same(got, expected), (got, expected)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), st.data())
def test_corrupt_values_are_bad_alone_and_both_kernels_agree(
    case: tuple[Any, Any, list[Any]], data: st.DataObject
) -> None:
    writer, reader, records = case
    good = encode(writer, records)
    program = program_of(writer, reader)
    values = list(good)
    for value in good:
        mutated = bytearray(value)
        for _ in range(data.draw(st.integers(1, 3))):
            action = data.draw(st.sampled_from(["flip", "cut", "insert"]))
            at = data.draw(st.integers(5, len(mutated)))
            if action == "flip" and at < len(mutated):
                mutated[at] = data.draw(st.integers(0, 255))
            elif action == "cut":
                del mutated[at:]
            else:
                mutated[at:at] = data.draw(st.binary(min_size=1, max_size=3))
        values.append(bytes(mutated))
    values.append(FRAME + data.draw(st.binary(max_size=40)))
    decoded = decode_all(values, program)
    bad = dict(decoded.bad)
    assert decoded.rows + len(bad) == len(values)
    # the good values fail alone as they fail among the others (bytes read as a string: not UTF-8)
    assert set(range(len(good))) & set(bad) == {i for i, _ in decode_all(good, program).bad}
    table = to_arrow(decoded.columns, program.columns).table
    assert table.num_rows == decoded.rows
    # what is good decodes as the good values alone do: the bad ones left nothing behind
    alone = decode_all([v for i, v in enumerate(values) if i not in bad], program)
    assert alone.columns == decoded.columns
    # in pieces of a few rows, each value keeps its verdict (but one alone past a piece's bound)
    piece_bytes = data.draw(st.integers(1, 2000))
    pieces = _kernels_pieces(values, program, piece_bytes)
    assert pieces[0].first == 0 and pieces[-1].end == len(values)
    assert all(a.end == b.first for a, b in itertools.pairwise(pieces))
    too_big = f"the value would expand to more than {piece_bytes} bytes of columns"
    in_pieces = {i: reason for p in pieces for i, reason in p.bad}
    judged = {i for i in range(len(values)) if in_pieces.get(i) != too_big}
    assert {i: r for i, r in in_pieces.items() if i in judged} == {i: r for i, r in bad.items() if i in judged}
    kept = [v for i, v in enumerate(values) if i not in bad and i not in in_pieces]
    rows = [r for p in pieces for r in to_arrow(p.columns, program.columns).table.to_pylist()]
    assert rows == to_arrow(decode_all(kept, program).columns, program.columns).table.to_pylist()


EVENT = {
    "type": "record",
    "name": "Ev",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "tags", "type": {"type": "array", "items": "int"}},
        {"name": "kind", "type": {"type": "enum", "name": "K", "symbols": ["A", "B"]}},
        {"name": "u", "type": ["null", "int", "string"]},
    ],
}
ONE = {"id": 1, "name": "x", "tags": [5], "kind": "B", "u": "s"}


def _bad(values: list[bytes], writer: Any = EVENT, reader: Any = EVENT) -> list[tuple[int, str]]:
    return decode_all(values, program_of(writer, reader)).bad


def test_each_kind_of_corruption_is_named() -> None:
    (value,) = encode(EVENT, [ONE])
    body = value[5:]
    # id=1 (02), name len 1 (02) 'x', tags block 1 (02) 5 (0a) end (00), kind 1 (02), union 2 (04) len 1 (02) 's'
    assert body == b"\x02\x02x\x02\x0a\x00\x02\x04\x02s"
    cases = {
        FRAME[:3]: "value shorter than 5 bytes",
        FRAME: "truncated at byte 5",
        value[:-1]: "length 1 at byte 13 exceeds the 0 bytes left",
        value + b"\x00\x00": "2 bytes left after the record",
        FRAME + b"\xff" * 11: "varint too long at byte 5",
        FRAME + b"\x02\x03": "negative length -2 at byte 6",
        FRAME + b"\x02\x02\xff": "invalid UTF-8 in the string at byte 7",
        FRAME + body[:6] + b"\x04" + body[7:]: "enum index 2 out of range (2 symbols) at byte 11",
        FRAME + body[:7] + b"\x06": "union branch 3 out of range (3 branches) at byte 12",
        FRAME + body[:3] + b"\x7e": "block of 63 items at byte 8 exceeds the 0 bytes left",
        FRAME + body[:3] + b"\x03\x7f": "negative length -64 at byte 9",
        FRAME + body[:3] + b"\x02\x80\x80\x80\x80\x10": "int 2147483648 out of range at byte 9",
    }
    for bad_value, reason in cases.items():
        assert _bad([value, bad_value, value]) == [(1, reason)], bad_value


def test_a_block_with_a_negative_count_carries_its_size_and_both_are_read() -> None:
    (value,) = encode(EVENT, [ONE])
    body = value[5:]
    blocked = FRAME + body[:3] + b"\x01\x02\x0a\x00" + body[6:]  # a block of -1 items, 1 byte: [5]
    decoded = decode_all([blocked], program_of(EVENT, EVENT))
    assert decoded.bad == []
    assert to_arrow(decoded.columns, program_of(EVENT, EVENT).columns).table.to_pylist()[0]["tags"] == [5]
    # a reader without the field skips the block by its size
    skipping = {**EVENT, "fields": [f for f in EVENT["fields"] if f["name"] != "tags"]}
    program = program_of(EVENT, skipping)
    assert decode_all([blocked], program).bad == []
    oversized = FRAME + body[:3] + b"\x01\x40\x0a\x00" + body[6:]
    assert decode_all([oversized], program).bad == [(0, "length 32 at byte 9 exceeds the 6 bytes left")]


def test_items_of_no_bytes_are_bounded() -> None:
    writer = {
        "type": "record",
        "name": "R",
        "fields": [{"name": "pad", "type": "bytes"}, {"name": "a", "type": {"type": "array", "items": "null"}}],
    }
    pad = _zigzag(1 << 15) + bytes(1 << 15)  # a value this long may make the columns of a million nulls
    many = FRAME + pad + _zigzag(MAX_EMPTY_ITEMS) + b"\x00"
    too_many = FRAME + pad + _zigzag(MAX_EMPTY_ITEMS) + _zigzag(1) + b"\x00"
    decoded = decode_all([many, too_many], program_of(writer, writer))
    at = len(FRAME + pad + _zigzag(MAX_EMPTY_ITEMS))
    assert decoded.bad == [(1, f"block of 1 items at byte {at} exceeds {MAX_EMPTY_ITEMS} items of no bytes")]
    assert decoded.columns[2][3] == struct.pack("<ii", 0, MAX_EMPTY_ITEMS)


def test_a_value_that_would_expand_past_its_bound_is_bad_alone() -> None:
    # 9 bytes of a million nulls, read into a union of null and a fixed: 5 bytes of columns each
    writer = {"type": "record", "name": "R", "fields": [{"name": "a", "type": {"type": "array", "items": "null"}}]}
    wide = {"type": "fixed", "name": "F", "size": 4096}
    reader = {
        "type": "record",
        "name": "R",
        "fields": [{"name": "a", "type": {"type": "array", "items": ["null", wide]}}],
    }
    few, amplified = FRAME + _zigzag(3) + b"\x00", FRAME + _zigzag(10**6) + b"\x00"
    decoded = decode_all([few, amplified, few], program_of(writer, reader))
    assert decoded.bad == [
        (1, f"the value would expand to more than {value_output_limit(len(amplified))} bytes of columns")
    ]
    assert decoded.rows == 2 and decoded.columns[2][:2] == (6, 6) and decoded.columns[2][4] == b""
    # nulls into a column of nulls: Arrow makes it a string column (4 bytes a slot)
    decoded = decode_all([amplified] * 3 + [few], program_of(writer, writer))
    assert [i for i, _ in decoded.bad] == [0, 1, 2] and decoded.rows == 1
    # the bound grows with the value: 16 KiB and 256 bytes a byte, 64 MiB at most
    assert value_output_limit(10) == OUTPUT_SLACK + 2560 and value_output_limit(1 << 30) == MAX_VALUE_OUTPUT


def _kernels_pieces(values: list[bytes], program: Program, piece_bytes: int) -> list[Any]:
    """avro_columns.decode's pieces with each kernel: they must agree."""
    found = []
    for kernel in KERNELS:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(avro_columns, "implementation", kernel)
            found.append(avro_columns.decode(values, 5, program, piece_bytes))
    assert all(f == found[0] for f in found)
    return found[0]


def test_a_chunk_whose_columns_would_pass_a_piece_is_split_not_bad() -> None:
    program = program_of(EVENT, EVENT)
    values = encode(EVENT, [ONE] * 40)
    values[7] = values[7][:-1]  # truncated: bad wherever it is
    whole = _kernels_pieces(values, program, MAX_PIECE_OUTPUT)
    assert len(whole) == 1 and whole[0].end == 40 and [i for i, _ in whole[0].bad] == [7]
    few_rows = 200  # bytes of columns a few rows make (some 40 each)
    pieces = _kernels_pieces(values, program, few_rows)
    assert len(pieces) > 3 and pieces[0].first == 0 and pieces[-1].end == 40
    assert all(a.end == b.first for a, b in itertools.pairwise(pieces))
    assert [b for p in pieces for b in p.bad] == whole[0].bad
    tables = [to_arrow(p.columns, program.columns).table for p in pieces]
    assert pa.concat_tables(tables).to_pylist() == to_arrow(whole[0].columns, program.columns).table.to_pylist()
    # a value alone past a piece smaller than it makes is bad, naming the piece's bound
    [tiny] = _kernels_pieces(values[:1], program, 10)
    assert tiny.bad == [(0, "the value would expand to more than 10 bytes of columns")]


def _zigzag(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def test_a_decimal_wider_than_its_column_is_bad_unless_it_is_sign_extension() -> None:
    schema = {
        "type": "record",
        "name": "L",
        "fields": [{"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 0}}],
    }
    padded = FRAME + _zigzag(18) + b"\xff" * 17 + b"\x85"  # -123 in 18 bytes
    wide = FRAME + _zigzag(17) + b"\x01" + bytes(16)
    decoded = decode_all([padded, wide], program_of(schema, schema))
    assert decoded.bad == [(1, "decimal of 17 bytes at byte 6 does not fit 128 bits")]
    assert to_arrow(decoded.columns, program_of(schema, schema).columns).table.to_pylist() == [{"d": -123}]


def test_defaults_fill_the_fields_the_writer_lacks() -> None:
    reader = {
        **EVENT,
        "fields": [
            *EVENT["fields"],
            {
                "name": "n",
                "type": {"type": "record", "name": "N", "fields": [{"name": "x", "type": "int"}]},
                "default": {"x": 4},
            },
            {"name": "b", "type": "bytes", "default": "\u00ff"},
            {"name": "o", "type": ["null", "long"], "default": None},
        ],
    }
    values = encode(EVENT, [ONE, {**ONE, "u": None}])
    program = program_of(EVENT, reader)
    rows = to_arrow(decode_all(values, program).columns, program.columns).table.to_pylist()
    assert [(r["n"], r["b"], r["o"]) for r in rows] == [({"x": 4}, b"\xff", None)] * 2
    assert [r["u"] for r in rows] == [{"member0": None, "member1": "s"}, None]


BAD_DEFAULTS = [
    ("bytes", "\u0100", "code points 0-255 only"),
    ({"type": "fixed", "name": "FX", "size": 2}, "a", "a default of 1 bytes for fixed FX of 2"),
    ({"type": "fixed", "name": "FX", "size": 2}, "\u0100a", "code points 0-255 only"),
    ({"type": "enum", "name": "EN", "symbols": ["A"]}, "Z", "'Z' is not a symbol of enum EN"),
    (
        {"type": "bytes", "logicalType": "decimal", "precision": 2, "scale": 0},
        "\u00ff\u00ff\u00ff\u0001",
        "precision 2",
    ),
    (
        {"type": "fixed", "name": "FD", "size": 4, "logicalType": "decimal", "precision": 2, "scale": 0},
        "\u0000\u0000\u0001\u0000",
        "precision 2",
    ),
    ({"type": "long", "logicalType": "timestamp-millis"}, 2**62, "beyond the microseconds a timestamp holds"),
    (["null", {"type": "enum", "name": "EN", "symbols": ["A"]}], "Z", "no branch of the union takes"),
]


@pytest.mark.parametrize(("node", "default", "reason"), BAD_DEFAULTS)
def test_a_default_its_column_cannot_hold_is_refused_naming_the_field(node: Any, default: Any, reason: str) -> None:
    writer = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}
    reader = {
        "type": "record",
        "name": "R",
        "fields": [{"name": "a", "type": "int"}, {"name": "b", "type": node, "default": default}],
    }
    # a constant column (the writer lacks the field), and a default read inline (one branch of a writer
    # union has the field, the other not)
    with pytest.raises(SchemaResolutionError, match=f"of the reader's field b is invalid: .*{re.escape(reason)}"):
        program_of(writer, reader)
    has_it = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}, {"name": "b", "type": node}]}
    lacks_it = {"type": "record", "name": "R2", "fields": [{"name": "a", "type": "int"}]}
    inline_reader = {**reader, "aliases": ["R2"]}
    top = {"type": "record", "name": "T", "fields": [{"name": "x", "type": [has_it, lacks_it]}]}
    with pytest.raises(SchemaResolutionError, match=f"of the reader's field b is invalid: .*{re.escape(reason)}"):
        program_of(top, {"type": "record", "name": "T", "fields": [{"name": "x", "type": inline_reader}]})


def test_a_reader_fixed_wider_than_a_columns_value_is_refused() -> None:
    def of(size: int) -> Any:
        return {
            "type": "record",
            "name": "R",
            "fields": [{"name": "f", "type": ["null", {"type": "fixed", "name": "F", "size": size}]}],
        }

    assert program_of(of(MAX_FIXED_SIZE), of(MAX_FIXED_SIZE)).columns[1].logical == "fixed"
    with pytest.raises(SchemaResolutionError, match=f"fixed F at column f has {MAX_FIXED_SIZE + 1} bytes"):
        program_of(of(MAX_FIXED_SIZE + 1), of(MAX_FIXED_SIZE + 1))


def test_a_record_default_takes_its_fields_defaults_where_it_leaves_them_out() -> None:
    inner = {
        "type": "record",
        "name": "In",
        "fields": [
            {"name": "x", "type": "int", "default": 5},
            {"name": "y", "type": "string", "default": "s"},
        ],
    }
    writer = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}
    reader = {
        "type": "record",
        "name": "R",
        "fields": [{"name": "a", "type": "int"}, {"name": "b", "type": inner, "default": {"y": "t"}}],
    }
    values = encode(writer, [{"a": 1}])
    program = program_of(writer, reader)
    rows = to_arrow(decode_all(values, program).columns, program.columns).table.to_pylist()
    # as Java's Avro reads it (its resolver encodes a default field by field, a field left out by its
    # own default), and as a default read inline is; fastavro returns the default as written
    assert rows == [{"a": 1, "b": {"x": 5, "y": "t"}}]


def test_a_program_is_plain_data() -> None:
    program = program_of(EVENT, EVENT)
    assert Program.from_json(program.to_json()) == program
    assert pickle.loads(pickle.dumps(program)) == program
    assert all(isinstance(i, int) for i in program.code)


@pytest.mark.parametrize(
    ("writer", "reader", "reason"),
    [
        ("string", "int", "cannot read the writer's data: {errorType:'TYPE_MISMATCH'"),
        ("long", "int", "TYPE_MISMATCH"),
        (
            {"type": "enum", "name": "K", "symbols": ["A", "B"]},
            {"type": "enum", "name": "K", "symbols": ["A"]},
            "MISSING_ENUM_SYMBOLS",
        ),
        (["null", "string"], "string", "TYPE_MISMATCH"),
        ({"type": "fixed", "name": "F", "size": 2}, {"type": "fixed", "name": "F", "size": 3}, "FIXED_SIZE_MISMATCH"),
    ],
)
def test_incompatible_pairs_are_refused_when_compiled(writer: Any, reader: Any, reason: str) -> None:
    def wrap(t: Any) -> Any:
        return {"type": "record", "name": "R", "fields": [{"name": "a", "type": t}]}

    with pytest.raises(SchemaResolutionError, match=reason.replace("{", r"\{").replace("(", r"\(")):
        program_of(wrap(writer), wrap(reader))


def _decimal(precision: int, scale: int) -> Any:
    return {"type": "bytes", "logicalType": "decimal", "precision": precision, "scale": scale}


@pytest.mark.parametrize(
    ("writer", "reader", "reason"),
    [
        (_decimal(10, 2), _decimal(10, 4), "the writer's decimal(10,2) and the reader's decimal(10,4) differ in scale"),
        (
            {"type": "long", "logicalType": "timestamp-micros"},
            {"type": "long", "logicalType": "timestamp-millis"},
            "the writer's timestamp-micros and the reader's timestamp-millis are different logical types",
        ),
        (
            {"type": "int", "logicalType": "date"},
            ["null", {"type": "long", "logicalType": "timestamp-millis"}],
            "the writer's date and the reader's timestamp-millis are different logical types",
        ),
    ],
)
def test_a_logical_type_read_as_another_is_refused(writer: Any, reader: Any, reason: str) -> None:
    # Avro's resolution (and Java's, and Confluent's checker) looks at the underlying types only: the
    # columns would hold the writer's numbers in the reader's units
    def wrap(t: Any) -> Any:
        return {"type": "record", "name": "R", "fields": [{"name": "d", "type": t}]}

    with pytest.raises(SchemaResolutionError, match=re.escape(reason) + ".* at column d"):
        program_of(wrap(writer), wrap(reader))


def test_a_decimals_precision_may_change_and_a_logical_type_on_one_side_is_kept() -> None:
    def wrap(t: Any) -> Any:
        return {"type": "record", "name": "R", "fields": [{"name": "d", "type": t}]}

    for writer, reader in [
        (_decimal(10, 2), _decimal(4, 2)),
        ("long", {"type": "long", "logicalType": "timestamp-millis"}),
        (_decimal(10, 2), "bytes"),
    ]:
        program_of(wrap(writer), wrap(reader))
    value = encode(wrap(_decimal(10, 2)), [{"d": decimal.Decimal("123.45")}])
    program = program_of(wrap(_decimal(10, 2)), wrap(_decimal(4, 2)))
    rows = to_arrow(decode_all(value, program).columns, program.columns)
    assert rows.bad == [(0, "the record cannot be a row: decimal 123.45 has more than the 4 digits of its precision")]


def test_a_reader_field_without_default_missing_from_the_writer_is_refused() -> None:
    reader = {**EVENT, "fields": [*EVENT["fields"], {"name": "new", "type": "int"}]}
    with pytest.raises(SchemaResolutionError, match="READER_FIELD_MISSING_DEFAULT_VALUE"):
        program_of(EVENT, reader)


def test_recursive_types_are_refused() -> None:
    node = {
        "type": "record",
        "name": "Node",
        "fields": [{"name": "next", "type": ["null", "Node"]}, {"name": "v", "type": "int"}],
    }
    with pytest.raises(SchemaResolutionError, match="recursive type Node"):
        program_of(node, node)
    other = {"type": "record", "name": "Node", "fields": [{"name": "v", "type": "int"}]}
    with pytest.raises(SchemaResolutionError, match="recursive type Node"):
        program_of(node, other)  # a recursive writer field the reader skips


@needs_c
def test_the_c_kernel_refuses_a_malformed_program() -> None:
    assert _avro_columns is not None
    program = program_of(EVENT, EVENT)
    broken = list(program.code)
    broken[1] += 1
    for code, layout in [
        (broken, program.layout),
        (program.code[:-1], program.layout),
        (program.code, program.layout[:3]),
        ([22, 4, 1, 9], ((0, -1, 0),)),
        (program.code, ((99, -1, 0),)),
    ]:
        with pytest.raises(ValueError, match=r"malformed decoding program|invalid layout"):
            _avro_columns.decode([FRAME], 5, code, layout)


@needs_c
def test_the_c_kernel_takes_any_buffer() -> None:
    assert _avro_columns is not None
    values = encode(EVENT, [ONE])
    program = program_of(EVENT, EVENT)
    as_views = [memoryview(v) for v in values] + [bytearray(values[0])]
    assert _avro_columns.decode(as_views, 5, program.code, program.layout) == _avro_columns_py.decode(
        values * 2, 5, program.code, program.layout
    )


def test_records_shared_along_many_paths_are_refused_before_they_grow() -> None:
    # R0 holds R1 twice, R1 holds R2 twice, ...: 2^30 paths to R30, a column at each
    types: list[Any] = [{"type": "record", "name": "R30", "fields": [{"name": "v", "type": "int"}]}]
    for level in range(29, -1, -1):
        fields = [{"name": "a", "type": types[-1]}, {"name": "b", "type": f"R{level + 1}"}]
        types.append({"type": "record", "name": f"R{level}", "fields": fields})
    diamond = avro.parse(json.dumps(types[-1]))
    with pytest.raises(SchemaResolutionError, match="more than 100000 columns"):
        compile_program(diamond, diamond)


@needs_c
def test_the_c_kernel_decodes_chunks_in_threads_at_once() -> None:
    # it lets go of the GIL while it decodes: chunks in threads share nothing but their program
    assert _avro_columns is not None
    program = program_of(EVENT, EVENT)
    chunks = [encode(EVENT, [{**ONE, "id": i, "tags": list(range(i % 7))}] * 2000) for i in range(8)]
    alone = [_avro_columns.decode(chunk, 5, program.code, program.layout) for chunk in chunks]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        together = list(pool.map(lambda chunk: _avro_columns.decode(chunk, 5, program.code, program.layout), chunks))
    assert together == alone


# -- the program's checks and their bounds: both kernels refuse alike ------------------------------------

KERNELS = [_avro_columns_py] + ([_avro_columns] if _avro_columns is not None else [])


def _refused(code: Sequence[int], layout: Sequence[tuple[int, int, int]], match: str) -> None:
    for kernel in KERNELS:
        with pytest.raises(ValueError, match=match):
            kernel.decode([FRAME + b"\x02"], 5, code, layout)


INT_COLUMN = {"type": "record", "name": "I", "fields": [{"name": "n", "type": "int"}]}
LONG_COLUMN = {"type": "record", "name": "I", "fields": [{"name": "n", "type": "long"}]}


def test_an_op_must_write_its_columns_kind_and_width() -> None:
    ints = program_of(INT_COLUMN, INT_COLUMN)
    longs = program_of(LONG_COLUMN, LONG_COLUMN)
    assert ints.code[3] == Op.INT and longs.code[3] == Op.LONG
    # an 8-byte value into a 4-byte column, a string into a number, a 4-byte value into an 8-byte one
    for op in (Op.LONG, Op.INT_LONG, Op.DOUBLE, Op.STRING, Op.BOOLEAN, Op.NULL):
        _refused((*ints.code[:3], int(op), *ints.code[4:]), ints.layout, "malformed decoding program")
    _refused((*longs.code[:3], int(Op.INT), *longs.code[4:]), longs.layout, "malformed decoding program")
    # a fixed is read into a binary column, a decimal into one of its width
    fixed = {
        "type": "record",
        "name": "X",
        "fields": [{"name": "f", "type": {"type": "fixed", "name": "F", "size": 4}}],
    }
    program = program_of(fixed, fixed)
    assert program.code[3:6] == (Op.FIXED, 4, 1) and program.layout[1] == (Kind.BINARY, 0, 0)
    _refused((*program.code[:4], 0, 4), program.layout, "malformed decoding program")  # into the struct
    decimal_fixed = {
        "type": "record",
        "name": "X",
        "fields": [
            {"name": "f", "type": {"type": "fixed", "name": "F", "size": 4, "logicalType": "decimal", "precision": 5}}
        ],
    }
    program = program_of(decimal_fixed, decimal_fixed)
    assert program.code[3:8] == (Op.DECIMAL_FIXED, 5, 1, 4, 16)
    _refused((*program.code[:7], 32), program.layout, "malformed decoding program")
    wider = [(k, p, 32 if i == 1 else w) for i, (k, p, w) in enumerate(program.layout)]
    _refused(program.code, wider, "malformed decoding program")


def test_a_union_member_must_be_one_of_its_unions_columns() -> None:
    program = program_of(EVENT, EVENT)
    picks = [pc for pc in range(len(program.code) - 4) if program.code[pc] == Op.PICK and program.code[pc + 1] > 4]
    assert picks, program.code
    pc = picks[0]
    struct_col, member = program.code[pc + 2], program.code[pc + 3]
    assert program.columns[member].parent == struct_col
    for stranger in (0, 1, struct_col):  # the root, another field, the union itself
        code = list(program.code)
        code[pc + 3] = stranger
        _refused(code, program.layout, "malformed decoding program")


def test_columns_nested_too_deep_are_refused_by_the_compiler_and_both_kernels() -> None:
    deep: Any = "int"
    for _ in range(MAX_COLUMN_DEPTH):
        deep = {"type": "array", "items": deep}
    with pytest.raises(SchemaResolutionError, match=f"deeper than {MAX_COLUMN_DEPTH}"):
        program_of(deep, deep)
    chain = tuple((int(Kind.STRUCT), i - 1, 0) for i in range(MAX_COLUMN_DEPTH + 1))
    _refused((int(Op.SET_NULL), 3, 0), chain, f"layout nests columns deeper than {MAX_COLUMN_DEPTH}")
    # at the bound, a null reaches the deepest column (put_null recurses that deep, no deeper)
    at_bound = chain[:MAX_COLUMN_DEPTH]
    for kernel in KERNELS:
        columns, bad, _ = kernel.decode([FRAME], 5, (int(Op.SET_NULL), 3, 0), at_bound)
        assert bad == [] and columns[-1][:2] == (1, 1)


def test_a_union_cut_short_is_refused_before_its_branch_count_is_read() -> None:
    # the union node's two ints end the code: its branch count would be read past the end
    _refused((int(Op.RECORD), 5, 0, int(Op.UNION), 2), ((int(Kind.STRUCT), -1, 0),), "malformed decoding program")


def test_code_nested_too_deep_is_refused() -> None:
    code: list[int] = [int(Op.SKIP_NOTHING), 2]
    for _ in range(MAX_CODE_DEPTH + 1):
        code = [int(Op.SKIP_RECORD), 2 + len(code), *code]
    _refused(code, ((int(Kind.NULL), -1, 0),), "malformed decoding program")


def test_varints_longer_than_their_type_are_corrupt() -> None:
    five = FRAME + b"\x82\x80\x80\x80\x00"  # 1 in five bytes: an int may take that many
    six = FRAME + b"\x82\x80\x80\x80\x80\x00"  # 1 in six bytes
    ints = program_of(INT_COLUMN, INT_COLUMN)
    decoded = decode_all([five, six], ints)
    assert decoded.bad == [(1, "varint too long at byte 5")]
    assert decoded.columns[1][3] == struct.pack("<i", 1)
    # a long takes ten bytes, not eleven; an int read as a long (promoted) is still an int
    ten, eleven = FRAME + b"\x82" + b"\x80" * 8 + b"\x00", FRAME + b"\x82" + b"\x80" * 9 + b"\x00"
    assert decode_all([ten, eleven], program_of(LONG_COLUMN, LONG_COLUMN)).bad == [(1, "varint too long at byte 5")]
    assert decode_all([five, six], program_of(INT_COLUMN, LONG_COLUMN)).bad == [(1, "varint too long at byte 5")]
    # an enum's index and a union's branch are ints too
    (value,) = encode(EVENT, [ONE])
    body = value[5:]
    long_enum = FRAME + body[:6] + b"\x82\x80\x80\x80\x80\x00" + body[7:]
    long_branch = FRAME + body[:7] + b"\x84\x80\x80\x80\x80\x00" + body[8:]
    assert _bad([long_enum, long_branch]) == [(0, "varint too long at byte 11"), (1, "varint too long at byte 12")]


def test_a_default_on_one_branch_leaves_the_other_branchs_values() -> None:
    # two writer records (the second by the reader's alias) read into one reader record: the first
    # has y, the second lacks it and takes its default; neither may overwrite the other's rows
    reader = {
        "type": "record",
        "name": "Top",
        "fields": [
            {
                "name": "r",
                "type": {
                    "type": "record",
                    "name": "A",
                    "aliases": ["B"],
                    "fields": [
                        {"name": "x", "type": "int"},
                        {"name": "y", "type": {"type": "array", "items": "long"}, "default": [7, 8]},
                        {"name": "z", "type": ["null", "string"], "default": None},
                    ],
                },
            }
        ],
    }
    a = {
        "type": "record",
        "name": "A",
        "fields": [{"name": "x", "type": "int"}, {"name": "y", "type": {"type": "array", "items": "long"}}],
    }
    b = {"type": "record", "name": "B", "fields": [{"name": "x", "type": "int"}]}
    writer = {"type": "record", "name": "Top", "fields": [{"name": "r", "type": [a, b]}]}
    records = [{"r": ("A", {"x": 1, "y": [2]})}, {"r": ("B", {"x": 3})}, {"r": ("A", {"x": 4, "y": []})}]
    values = encode(writer, records)
    program = program_of(writer, reader)
    assert Op.INLINE in program.code
    assert [c.name for c in program.columns if c.constant] == ["z"]  # no path writes z: a constant still
    rows = to_arrow(decode_all(values, program).columns, program.columns).table.to_pylist()
    assert rows == [
        {"r": {"x": 1, "y": [2], "z": None}},
        {"r": {"x": 3, "y": [7, 8], "z": None}},
        {"r": {"x": 4, "y": [], "z": None}},
    ]
    w, r = fastavro.parse_schema(writer), fastavro.parse_schema(reader)
    expected = [fastavro.schemaless_reader(io.BytesIO(v[5:]), w, r) for v in values]
    assert [row["r"]["y"] for row in rows] == [e["r"]["y"] for e in expected]


def test_an_inline_default_holds_its_bytes_within_the_code() -> None:
    program = program_of(
        {"type": "record", "name": "T", "fields": [{"name": "x", "type": "int"}]},
        {"type": "record", "name": "T", "fields": [{"name": "x", "type": "int"}]},
    )
    # INLINE [n=1, byte 0x02, INT col 1]: the int 1, read from the code
    inline = (int(Op.RECORD), 0, 0, int(Op.INLINE), 7, 1, 0x02, int(Op.INT), 3, 1)
    inline = (inline[0], len(inline), *inline[2:])
    for kernel in KERNELS:
        columns, bad, _ = kernel.decode([FRAME], 5, inline, program.layout)
        assert bad == [] and columns[1][3] == struct.pack("<i", 1)
    for broken in ((*inline[:6], 256, *inline[7:]), (*inline[:5], 2, *inline[6:])):
        _refused(broken, program.layout, "malformed decoding program")
