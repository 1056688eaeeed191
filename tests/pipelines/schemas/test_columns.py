"""A payload schema into columns (pipelines.schemas.columns): the type mapping docs/pipelines.md
tables, as Arrow and as the Spark types of the tables over the raw layer; and the schemas refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from pipelines.config.pipeline import Decoder
from pipelines.errors import PayloadSchemaError
from pipelines.executor.rows import spark_columns
from pipelines.schemas.columns import avro_columns, connect_columns, declared_connect_schema, json_schema_columns
from pipelines.schemas.resolved import RunSchemas, SubjectSchemas

pytestmark = pytest.mark.unit

AVSC = Path("order.avsc")
"""A schema file's name: the decoders get its text, never read it."""

AVRO_TYPES: list[tuple[Any, pa.DataType, str]] = [
    ("boolean", pa.bool_(), "BOOLEAN"),
    ("int", pa.int32(), "INT"),
    ("long", pa.int64(), "BIGINT"),
    ("float", pa.float32(), "FLOAT"),
    ("double", pa.float64(), "DOUBLE"),
    ("bytes", pa.binary(), "BINARY"),
    ("string", pa.string(), "STRING"),
    ({"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}, pa.decimal128(12, 2), "DECIMAL(12,2)"),
    (
        {"type": "fixed", "name": "D", "size": 16, "logicalType": "decimal", "precision": 38, "scale": 0},
        pa.decimal128(38, 0),
        "DECIMAL(38,0)",
    ),
    ({"type": "bytes", "logicalType": "decimal", "precision": 39, "scale": 2}, pa.string(), "STRING"),
    ({"type": "int", "logicalType": "date"}, pa.date32(), "DATE"),
    ({"type": "int", "logicalType": "time-millis"}, pa.int64(), "BIGINT"),
    ({"type": "long", "logicalType": "time-micros"}, pa.int64(), "BIGINT"),
    ({"type": "long", "logicalType": "timestamp-millis"}, pa.timestamp("us", tz="UTC"), "TIMESTAMP"),
    ({"type": "long", "logicalType": "timestamp-micros"}, pa.timestamp("us", tz="UTC"), "TIMESTAMP"),
    ({"type": "long", "logicalType": "timestamp-nanos"}, pa.int64(), "BIGINT"),
    ({"type": "long", "logicalType": "local-timestamp-millis"}, pa.timestamp("us", tz="UTC"), "TIMESTAMP"),
    ({"type": "long", "logicalType": "local-timestamp-micros"}, pa.timestamp("us", tz="UTC"), "TIMESTAMP"),
    ({"type": "string", "logicalType": "uuid"}, pa.string(), "STRING"),
    ({"type": "enum", "name": "E", "symbols": ["A", "B"]}, pa.string(), "STRING"),
    ({"type": "fixed", "name": "F", "size": 4}, pa.binary(), "BINARY"),
    ({"type": "fixed", "name": "Dur", "size": 12, "logicalType": "duration"}, pa.binary(), "BINARY"),
    ({"type": "array", "items": "long"}, pa.list_(pa.field("element", pa.int64(), nullable=False)), "ARRAY<BIGINT>"),
    (
        {"type": "map", "values": ["null", "string"]},
        pa.map_(pa.string(), pa.field("value", pa.string())),
        "MAP<STRING, STRING>",
    ),
    (
        {"type": "record", "name": "In", "fields": [{"name": "x", "type": "int"}]},
        pa.struct([pa.field("x", pa.int32(), nullable=False)]),
        "STRUCT<`x`: INT>",
    ),
    (["null", "string"], pa.string(), "STRING"),
    (["string", "null"], pa.string(), "STRING"),
    (["int", "long"], pa.int64(), "BIGINT"),
    (["null", "float", "double"], pa.float64(), "DOUBLE"),
    (
        ["null", "int", "string"],
        pa.struct([pa.field("member0", pa.int32()), pa.field("member1", pa.string())]),
        "STRUCT<`member0`: INT, `member1`: STRING>",
    ),
]


def record(field_type: Any, name: str = "f") -> str:
    return json.dumps({"type": "record", "name": "R", "namespace": "t", "fields": [{"name": name, "type": field_type}]})


@pytest.mark.parametrize(("avro", "arrow", "spark"), AVRO_TYPES, ids=[str(a)[:60] for a, _, _ in AVRO_TYPES])
def test_avro_types(avro: Any, arrow: pa.DataType, spark: str) -> None:
    columns = avro_columns(record(avro))
    assert columns.schema == pa.schema([pa.field("f", arrow)])
    decoder = Decoder(format="avro", schema_file=AVSC)
    schemas = RunSchemas({"t": SubjectSchemas("AVRO", record(avro), any_id=True)})
    assert spark_columns(decoder, schemas)[-1] == ("f", spark)


def test_named_types_are_found_by_name_and_namespace() -> None:
    schema = {
        "type": "record",
        "name": "Ev",
        "namespace": "shop",
        "fields": [
            {"name": "a", "type": {"type": "record", "name": "Money", "fields": [{"name": "c", "type": "long"}]}},
            {"name": "b", "type": "Money"},
            {"name": "c", "type": "shop.Money"},
            {"name": "d", "type": ["null", "shop.Money"]},
        ],
    }
    columns = avro_columns(json.dumps(schema)).schema
    money = pa.struct([pa.field("c", pa.int64(), nullable=False)])
    assert [f.type for f in columns] == [money, money, money, money]


def test_arrays_of_items_that_take_bytes_are_read() -> None:
    # (the refusal above is for items of no bytes only: any other array ends with its value's bytes)
    nested = {
        "type": "array",
        "items": {
            "type": "record",
            "name": "P",
            "fields": [{"name": "x", "type": "null"}, {"name": "y", "type": "int"}],
        },
    }
    assert avro_columns(record(nested)).schema.field("f").type.value_type.num_fields == 2


def test_a_schema_that_is_not_a_record_is_one_value_column() -> None:
    assert avro_columns('"string"').schema == pa.schema([pa.field("value", pa.string())])


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        (
            {"type": "record", "name": "N", "fields": [{"name": "next", "type": ["null", "N"]}]},
            "record N contains itself",
        ),
        (json.loads(record("long", name="offset")), "field 'offset' clashes with a column every raw row has"),
        (
            json.loads(record({"type": "bytes", "logicalType": "decimal", "precision": 2, "scale": 3})),
            "decimal precision",
        ),
        (json.loads(record("Nope")), "unknown type 'Nope'"),
        (json.loads(record({"type": "array", "items": "null"})), "/f: an array of items that take no bytes"),
        (
            json.loads(record({"type": "array", "items": {"type": "record", "name": "E", "fields": []}})),
            "/f: an array of items that take no bytes",
        ),
        (
            json.loads(
                record({"type": "map", "values": {"type": "array", "items": {"type": "fixed", "name": "Z", "size": 0}}})
            ),
            "/f{}: an array of items that take no bytes",
        ),
    ],
)
def test_schemas_that_cannot_be_columns(schema: Any, message: str) -> None:
    with pytest.raises(PayloadSchemaError) as caught:
        avro_columns(json.dumps(schema), where="subject t-value version 1 (id 1)")
    assert str(caught.value).startswith("subject t-value version 1 (id 1)")
    assert message in str(caught.value)


def test_json_schema_columns() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Ev",
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "n": {"type": "integer"},
            "x": {"type": ["number", "null"]},
            "ok": {"type": "boolean"},
            "at": {"type": "string", "format": "date-time"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "inner": {"type": "object", "properties": {"a": {"type": "integer"}}},
            "ref": {"$ref": "#/definitions/Money"},
        },
        "definitions": {"Money": {"type": "object", "properties": {"cents": {"type": "integer"}}}},
        "additionalProperties": False,
    }
    assert json_schema_columns(json.dumps(schema)) == pa.schema([
        ("id", pa.string()),
        ("n", pa.int64()),
        ("x", pa.float64()),
        ("ok", pa.bool_()),
        ("at", pa.timestamp("us", tz="UTC")),
        ("tags", pa.list_(pa.string())),
        ("inner", pa.struct([("a", pa.int64())])),
        ("ref", pa.struct([("cents", pa.int64())])),
    ])  # fmt: skip


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"type": "array", "items": {"type": "string"}}, "the top level must be an object"),
        ({"type": "object", "properties": {"a": {"type": ["string", "integer"]}}}, "/a: type ['string', 'integer']"),
        ({"type": "object", "properties": {"a": {}}}, "/a: type None is not supported"),
        ({"type": "object", "properties": {"a": {"$ref": "http://x/y.json"}}}, "/a: $ref 'http://x/y.json'"),
        ({"type": "object", "properties": {"topic": {"type": "string"}}}, "property 'topic' clashes"),
    ],
)
def test_json_schemas_refused(schema: Any, message: str) -> None:
    with pytest.raises(PayloadSchemaError) as caught:
        json_schema_columns(json.dumps(schema))
    assert message in str(caught.value)


def test_connect_columns_of_what_jsonconverter_writes() -> None:
    schema = {
        "type": "struct",
        "name": "demo.Ev",
        "optional": False,
        "fields": [
            {"type": "string", "optional": False, "field": "id"},
            {"type": "int8", "optional": True, "field": "small"},
            {"type": "int64", "optional": True, "field": "n"},
            {
                "type": "bytes",
                "optional": False,
                "name": "org.apache.kafka.connect.data.Decimal",
                "version": 1,
                "parameters": {"scale": "2"},
                "field": "amount",
            },
            {"type": "int32", "name": "org.apache.kafka.connect.data.Date", "version": 1, "field": "d"},
            {"type": "int64", "name": "org.apache.kafka.connect.data.Timestamp", "version": 1, "field": "ts"},
            {"type": "int32", "name": "org.apache.kafka.connect.data.Time", "version": 1, "field": "t"},
            {"type": "array", "items": {"type": "double", "optional": False}, "optional": True, "field": "arr"},
            {"type": "bytes", "optional": True, "field": "blob"},
        ],
    }
    columns = connect_columns(schema)
    assert columns.schema == pa.schema([
        ("id", pa.string()),
        ("small", pa.int8()),
        ("n", pa.int64()),
        ("amount", pa.decimal128(38, 2)),
        ("d", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("t", pa.int64()),
        ("arr", pa.list_(pa.float64())),
        ("blob", pa.binary()),
    ])  # fmt: skip
    # what Arrow's JSON reader reads the payload as: base64 text, epoch numbers
    assert columns.payload.field("amount").type == pa.string()
    assert columns.payload.field("d").type == pa.int32()


def test_connect_maps_are_maps_read_as_lists_of_entries() -> None:
    schema = {
        "type": "struct",
        "fields": [{"type": "map", "keys": {"type": "string"}, "values": {"type": "int32"}, "field": "m"}],
    }
    columns = connect_columns(schema)
    assert columns.schema == pa.schema([("m", pa.map_(pa.string(), pa.int32()))])
    assert columns.payload.field("m").type == pa.list_(pa.struct([("key", pa.string()), ("value", pa.int32())]))
    assert columns.has_maps
    struct_keys = {**schema["fields"][0], "keys": {"type": "struct", "fields": []}}
    with pytest.raises(PayloadSchemaError, match="a map's keys must be of a primitive type"):
        connect_columns({**schema, "fields": [struct_keys]})


def test_a_declared_schema_is_read_as_connect_writes_it() -> None:
    columns = connect_columns(declared_connect_schema({"id": "string", "at": "timestamp", "b": "binary"}))
    assert columns.schema == pa.schema([("id", pa.string()), ("at", pa.timestamp("us", tz="UTC")), ("b", pa.binary())])


def test_a_small_schema_that_names_a_huge_tree_is_refused_quickly() -> None:
    """Each record uses the next twice: 40 records, 2**40 columns."""
    import time

    depth = 40
    records: list[dict[str, Any]] = [{"type": "record", "name": f"R{depth}", "fields": [{"name": "x", "type": "long"}]}]
    for i in range(depth - 1, -1, -1):
        fields = [{"name": "a", "type": records[-1]}, {"name": "b", "type": f"R{i + 1}"}]
        records.append({"type": "record", "name": f"R{i}", "fields": fields})
    started = time.monotonic()
    with pytest.raises(PayloadSchemaError, match="more than 100,000 columns and types"):
        avro_columns(json.dumps(records[-1]), where="t-value")
    assert time.monotonic() - started < 5
