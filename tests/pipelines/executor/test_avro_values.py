"""The task side of ``decoder.format: avro`` (pipelines.executor.payloads.avro_values): values of
several writer schemas in one chunk, each schema compiled once, rows in message order, the same
columns from the C kernel and its pure-Python twin, and no fastavro anywhere on the task path."""

from __future__ import annotations

import ast
import decimal
import functools
import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from kafkalog.schemas import _avro_columns_py, avro_columns, avro_program
from kafkalog.schemas.wire import frame
from pipelines.app.ship import package_dir, shipped_files
from pipelines.config.pipeline import Decoder
from pipelines.errors import PayloadSchemaError
from pipelines.executor.payloads import avro_values
from pipelines.executor.payloads.avro_values import AvroValues, bad_reason
from pipelines.schemas.resolved import RunSchemas, run_columns
from tests.pipelines.executor.test_schema_payloads import avro, subject

pytestmark = pytest.mark.unit

V1 = {"type": "record", "name": "E", "fields": [{"name": "id", "type": "string"}, {"name": "n", "type": "int"}]}
V2 = {
    "type": "record",
    "name": "E",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "n", "type": "long"},
        {
            "name": "amount",
            "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2}],
            "default": None,
        },
    ],
}
V3 = {"type": "record", "name": "E", "fields": [{"name": "id", "type": "string"}, {"name": "gone", "type": "boolean"}]}
REPO = Path(__file__).resolve().parents[3]


def decoder() -> AvroValues:
    return AvroValues(Decoder(format="avro", schema_file=Path("e.avsc")), subject(V2, {1: V1, 2: V2, 3: V3}, 2))


def table_rows(
    values: AvroValues, chunk: list[bytes | None]
) -> tuple[list[tuple[int, dict[str, Any]]], list[tuple[int, str]]]:
    pieces, bad = values.parse(chunk)
    assert all(p.table.schema == values.schema for p in pieces)
    return [(i, r) for p in pieces for i, r in zip(p.indexes, p.table.to_pylist(), strict=True)], bad


def test_values_of_several_writer_schemas_come_out_in_message_order(monkeypatch: pytest.MonkeyPatch) -> None:
    compiled: list[Any] = []
    real = avro_program.compile_program

    def counting(writer: Any, reader: Any) -> Any:
        compiled.append(writer)
        return real(writer, reader)

    monkeypatch.setattr("pipelines.executor.payloads.avro_values.compile_program", counting)
    values = decoder()
    chunk: list[bytes | None] = [
        frame(1, avro(V1, {"id": "a", "n": 1})),
        frame(2, avro(V2, {"id": "b", "n": 2**40, "amount": decimal.Decimal("1.25")})),
        frame(3, avro(V3, {"id": "c", "gone": True})),
        frame(1, avro(V1, {"id": "d", "n": -4})),
        frame(2, avro(V2, {"id": "e", "n": 5, "amount": decimal.Decimal("999.99")})),
    ]
    for _ in range(2):  # a second chunk compiles nothing more
        got, bad = table_rows(values, chunk)
        assert [i for i, _ in got] == [0, 1, 3, 4]
        assert [r["id"] for _, r in got] == ["a", "b", "d", "e"]
        assert [r["n"] for _, r in got] == [1, 2**40, -4, 5]
        assert [r["amount"] for _, r in got] == [None, decimal.Decimal("1.25"), None, decimal.Decimal("999.99")]
        assert len(bad) == 1 and bad[0][0] == 2
        assert bad[0][1].startswith("schema id 3 cannot be read into the reader schema: ")
    assert len(compiled) == 3


def test_bad_values_are_bad_alone_each_with_its_reason() -> None:
    good = avro(V2, {"id": "x", "n": 1, "amount": decimal.Decimal("1.00")})
    wide = avro(
        V2 | {"fields": [*V2["fields"][:2], {"name": "amount", "type": ["null", "bytes"]}]},
        {"id": "y", "n": 2, "amount": (10**5).to_bytes(3, "big")},
    )
    chunk: list[bytes | None] = [
        frame(2, good),
        frame(2, wide),  # 1000.00 in a decimal(5, 2)
        frame(2, good[:-1]),
        frame(9, good),
        frame(2, good + b"\x00"),
        frame(2, b"\x02x\x02\x06"),  # union branch 3 of 2
        frame(2, good),
    ]
    got, bad = table_rows(decoder(), chunk)
    assert [i for i, _ in got] == [0, 6]
    assert dict(bad) == {
        1: "the record cannot be a row: decimal 1000.00 has more than the 5 digits of its precision",
        2: "truncated Avro payload",
        3: "unknown schema id 9",
        4: "1 byte left after the record",
        5: "corrupt Avro payload: union branch 3 out of range (2 branches) at byte 8",
    }


def test_the_kernels_reasons_in_the_loaders_words() -> None:
    assert bad_reason("truncated at byte 9") == "truncated Avro payload"
    assert bad_reason("length 4 at byte 7 exceeds the 2 bytes left") == "truncated Avro payload"
    assert bad_reason("3 bytes left after the record") == "3 bytes left after the record"
    assert bad_reason("1 bytes left after the record") == "1 byte left after the record"
    assert bad_reason("decimal of 17 bytes at byte 6 does not fit 128 bits").startswith("the record cannot be a row: ")
    assert bad_reason("varint too long at byte 5") == "corrupt Avro payload: varint too long at byte 5"
    expands = "the value would expand to more than 18688 bytes of columns"
    assert bad_reason(expands) == expands


def test_the_pure_python_twin_gives_the_same_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    chunk: list[bytes | None] = [
        frame(1, avro(V1, {"id": "a", "n": 1})),
        frame(2, avro(V2, {"id": "b", "n": 2, "amount": decimal.Decimal("-3.10")})),
        frame(2, b"\x02x"),
        None,
    ]
    native = table_rows(decoder(), chunk)
    monkeypatch.setattr(avro_columns, "implementation", _avro_columns_py)
    assert table_rows(decoder(), chunk) == native


def test_no_task_module_imports_fastavro() -> None:
    # fastavro is the tests' oracle only (the test extra): the loader and kafkalog decode without it
    for package in ("pipelines", "kafkalog"):
        for path in (REPO / package).rglob("*.py"):
            tree = ast.parse(path.read_text(), str(path))
            for node in ast.walk(tree):
                names = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                    if isinstance(node, ast.ImportFrom)
                    else []
                )
                assert not any(n.split(".")[0] == "fastavro" for n in names), path


def test_the_archive_ships_the_avro_kernel_beside_the_record_kernels() -> None:
    if not avro_columns.NATIVE:
        pytest.skip(f"the C kernel is not built: {avro_columns.WHY_PURE}")
    names = [name for name, _ in shipped_files(package_dir("kafkalog"), compiled=True)]
    assert any(n.startswith("kafkalog/schemas/_avro_columns.") and not n.endswith((".c", ".pyi")) for n in names)
    assert "kafkalog/schemas/_avro_columns_py.py" in [name for name, _ in shipped_files(package_dir("kafkalog"))]


def test_a_reader_with_numeric_unions_and_a_null_field() -> None:
    reader = {
        "type": "record",
        "name": "U",
        "fields": [
            {"name": "il", "type": ["null", "int", "long"]},
            {"name": "fd", "type": ["float", "double"]},
            {"name": "nothing", "type": "null"},
        ],
    }
    values = AvroValues(Decoder(format="avro", schema_file=Path("u.avsc")), subject(reader, {4: reader}, 4))
    got, bad = table_rows(values, [frame(4, avro(reader, {"il": 2**40, "fd": 0.5, "nothing": None}))])
    assert bad == [] and got == [(0, {"il": 2**40, "fd": 0.5, "nothing": None})]
    assert values.schema.types == [pa.int64(), pa.float64(), pa.string()]
    assert json.loads(values.schemas.reader) == reader


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        (
            {"name": "b", "type": "bytes", "default": "\u0100"},
            'the default "\\u0100" of the reader\'s field b is invalid',
        ),
        (
            {"name": "t", "type": {"type": "long", "logicalType": "timestamp-millis"}, "default": 2**62},
            "of the reader's field t is invalid: timestamp-millis 4611686018427387904 is beyond",
        ),
        (
            {"name": "f", "type": ["null", {"type": "fixed", "name": "Big", "size": 2**21}], "default": None},
            "the reader's fixed Big at column f has 2097152 bytes",
        ),
    ],
)
def test_a_reader_schema_the_run_cannot_use_makes_bad_values_and_is_refused_on_the_driver(
    extra: dict[str, Any], reason: str
) -> None:
    reader = {"type": "record", "name": "E", "fields": [{"name": "id", "type": "string"}, extra]}
    values = AvroValues(Decoder(format="avro", schema_file=Path("e.avsc")), subject(reader, {1: V1, 2: reader}, 2))
    pieces, bad = values.parse([frame(1, avro(V1, {"id": "a", "n": 1}))])
    assert pieces == [] and len(bad) == 1 and bad[0][0] == 0
    assert bad[0][1].startswith("schema id 1 cannot be read into the reader schema: ") and reason in bad[0][1]
    with pytest.raises(PayloadSchemaError, match=re.escape(reason)):
        run_columns(RunSchemas({"t": subject(reader, {1: V1, 2: reader}, 2)}))


def test_a_chunk_decoded_in_several_pieces_gives_the_same_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    chunk: list[bytes | None] = [
        frame(1 + i % 2, avro(V1 if i % 2 == 0 else V2, {"id": f"r{i}", "n": i, "amount": None})) for i in range(30)
    ]
    chunk[5] = frame(1, b"\x02")  # truncated
    whole = table_rows(decoder(), chunk)
    monkeypatch.setattr(avro_values, "decode", functools.partial(avro_columns.decode, piece_bytes=100))
    assert table_rows(decoder(), chunk) == whole
    assert [i for i, _ in whole[1]] == [5] and len(whole[0]) == 29


def test_a_value_that_would_expand_past_its_bound_is_a_bad_value() -> None:
    # a writer's nulls read into a union of null and a fixed: 5 bytes of columns each
    nulls = {"type": "record", "name": "N", "fields": [{"name": "a", "type": {"type": "array", "items": "null"}}]}
    wide = {"type": "fixed", "name": "F", "size": 4096}
    reader = {
        "type": "record",
        "name": "N",
        "fields": [{"name": "a", "type": {"type": "array", "items": ["null", wide]}}],
    }
    values = AvroValues(Decoder(format="avro", schema_file=Path("n.avsc")), subject(reader, {4: nulls, 5: reader}, 5))
    amplified = frame(4, b"\x80\x89\x7a\x00")  # a million nulls in 9 bytes
    got, bad = table_rows(values, [amplified, frame(4, b"\x02\x00")])
    assert got == [(1, {"a": [None]})]
    assert bad == [(0, "the value would expand to more than 18688 bytes of columns")]
