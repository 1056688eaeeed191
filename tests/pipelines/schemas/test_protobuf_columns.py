"""A Protobuf reader schema into columns (pipelines.schemas.protobuf_columns): every type of the
docs/pipelines.md table, as Arrow and as the Spark types of the tables over the raw layer; the
message chosen; and the schemas refused."""

from __future__ import annotations

import base64

import pyarrow as pa
import pytest
from google.protobuf import descriptor_pb2

from pipelines.config.pipeline import Decoder, Registry
from pipelines.errors import PayloadSchemaError
from pipelines.executor.rows import spark_columns
from pipelines.schemas.protobuf_columns import UINT64, UTC_MICROS, protobuf_columns
from pipelines.schemas.resolved import RunSchemas, SubjectSchemas

pytestmark = pytest.mark.unit

HEAD = """syntax = "proto3";
package t;
import "google/protobuf/timestamp.proto";
import "google/protobuf/duration.proto";
import "google/protobuf/wrappers.proto";
import "google/protobuf/struct.proto";
import "google/protobuf/any.proto";
message In { int32 x = 1; optional string y = 2; }
enum Color { RED = 0; GREEN = 1; }
"""

LINE = pa.struct([pa.field("x", pa.int32()), pa.field("y", pa.string())])

PROTO_TYPES: list[tuple[str, pa.DataType, str]] = [
    ("int32", pa.int32(), "INT"),
    ("sint32", pa.int32(), "INT"),
    ("sfixed32", pa.int32(), "INT"),
    ("int64", pa.int64(), "BIGINT"),
    ("sint64", pa.int64(), "BIGINT"),
    ("sfixed64", pa.int64(), "BIGINT"),
    ("uint32", pa.int64(), "BIGINT"),
    ("fixed32", pa.int64(), "BIGINT"),
    ("uint64", UINT64, "DECIMAL(20,0)"),
    ("fixed64", UINT64, "DECIMAL(20,0)"),
    ("float", pa.float32(), "FLOAT"),
    ("double", pa.float64(), "DOUBLE"),
    ("bool", pa.bool_(), "BOOLEAN"),
    ("string", pa.string(), "STRING"),
    ("bytes", pa.binary(), "BINARY"),
    ("Color", pa.string(), "STRING"),
    ("In", LINE, "STRUCT<`x`: INT, `y`: STRING>"),
    ("repeated int64", pa.list_(pa.field("element", pa.int64())), "ARRAY<BIGINT>"),
    ("repeated In", pa.list_(pa.field("element", LINE)), "ARRAY<STRUCT<`x`: INT, `y`: STRING>>"),
    ("repeated Color", pa.list_(pa.field("element", pa.string())), "ARRAY<STRING>"),
    ("map<string, int32>", pa.map_(pa.string(), pa.field("value", pa.int32())), "MAP<STRING, INT>"),
    ("map<int64, In>", pa.map_(pa.int64(), pa.field("value", LINE)),
     "MAP<BIGINT, STRUCT<`x`: INT, `y`: STRING>>"),
    ("optional int32", pa.int32(), "INT"),
    ("google.protobuf.Timestamp", UTC_MICROS, "TIMESTAMP"),
    ("google.protobuf.Duration", pa.int64(), "BIGINT"),
    ("google.protobuf.DoubleValue", pa.float64(), "DOUBLE"),
    ("google.protobuf.FloatValue", pa.float32(), "FLOAT"),
    ("google.protobuf.Int64Value", pa.int64(), "BIGINT"),
    ("google.protobuf.UInt64Value", UINT64, "DECIMAL(20,0)"),
    ("google.protobuf.Int32Value", pa.int32(), "INT"),
    ("google.protobuf.UInt32Value", pa.int64(), "BIGINT"),
    ("google.protobuf.BoolValue", pa.bool_(), "BOOLEAN"),
    ("google.protobuf.StringValue", pa.string(), "STRING"),
    ("google.protobuf.BytesValue", pa.binary(), "BINARY"),
    ("google.protobuf.Struct", pa.string(), "STRING"),
    ("google.protobuf.Value", pa.string(), "STRING"),
    ("google.protobuf.ListValue", pa.string(), "STRING"),
    ("google.protobuf.Any", pa.string(), "STRING"),
    ("repeated google.protobuf.Timestamp", pa.list_(pa.field("element", UTC_MICROS)),
     "ARRAY<TIMESTAMP>"),
]  # fmt: skip


def one_field(kind: str) -> str:
    return HEAD + f"message R {{ {kind} f = 1; }}\n"


@pytest.mark.parametrize(("proto", "arrow", "spark"), PROTO_TYPES, ids=[p for p, _, _ in PROTO_TYPES])
def test_protobuf_types(proto: str, arrow: pa.DataType, spark: str) -> None:
    text = one_field(proto)
    columns = protobuf_columns(text, message="t.R")
    assert columns.schema == pa.schema([pa.field("f", arrow)])
    decoder = Decoder(format="protobuf", registry=Registry(urls=("http://sr:8081",)))
    schemas = RunSchemas({"t": SubjectSchemas("PROTOBUF", text, "t-value", 1, 1, {1: text}, message="t.R")})
    assert spark_columns(decoder, schemas)[-1] == ("f", spark)


def test_oneof_members_are_fields_of_their_own_and_an_empty_message_is_left_out() -> None:
    text = HEAD + "message E {}\nmessage R { oneof pick { string a = 1; In b = 2; } E nothing = 3; int32 n = 4; }\n"
    columns = protobuf_columns(text, message="t.R")
    assert columns.schema == pa.schema([("a", pa.string()), ("b", LINE), ("n", pa.int32())])
    assert [(f.name, f.presence) for f in columns.fields] == [("a", True), ("b", True), ("n", False)]


def test_the_reader_message_is_the_named_one_or_the_files_first() -> None:
    text = (
        'syntax = "proto3"; package shop; message A { int32 a = 1; message N { string n = 1; } } '
        "message B { string b = 1; }"
    )
    first = protobuf_columns(text)
    assert (first.message, first.indexes, first.schema.names) == ("shop.A", (0,), ["a"])
    second = protobuf_columns(text, message="shop.B")
    assert (second.message, second.indexes, second.schema.names) == ("shop.B", (1,), ["b"])
    nested = protobuf_columns(text, message="shop.A.N")
    assert (nested.message, nested.indexes) == ("shop.A.N", (0, 0))
    with pytest.raises(PayloadSchemaError, match=r"the schema: no message 'shop\.C' in the schema's file"):
        protobuf_columns(text, where="the schema", message="shop.C")


def test_a_base64_descriptor_as_pythons_serializer_registers_it_is_read() -> None:
    file = descriptor_pb2.FileDescriptorProto(name="ev.proto", package="ev", syntax="proto3")
    message = file.message_type.add(name="Ev")
    message.field.add(name="id", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                      label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)  # fmt: skip
    text = base64.b64encode(file.SerializeToString()).decode()
    assert protobuf_columns(text).schema == pa.schema([("id", pa.string())])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('syntax = "proto3"; message R { R next = 1; }', "message R contains itself (R → R)"),
        (
            'syntax = "proto3"; message R { A a = 1; } message A { repeated R back = 1; }',
            "message R contains itself (R → A → R)",
        ),
        ('syntax = "proto3"; message R { }', "message R has no field to be a column"),
        (
            'syntax = "proto3"; message R { int64 offset = 1; }',
            "field 'offset' clashes with a column every raw row has",
        ),
        ('syntax = "proto3"; message R { int32 ab = 1; int32 aB = 2; }', "aB: differs from another field only in case"),
        (
            'syntax = "proto3"; message R { strin x = 1; }',
            'is not a Protobuf schema protoc compiles: schema.proto:1:32: "strin" is not defined.',
        ),
        ('syntax = "proto3"; enum E { A = 0; }', "the schema defines no message"),
    ],
)
def test_schemas_that_cannot_be_columns_are_refused_naming_why(text: str, message: str) -> None:
    with pytest.raises(PayloadSchemaError) as caught:
        protobuf_columns(text)
    assert message in str(caught.value)
