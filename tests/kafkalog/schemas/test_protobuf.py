"""Protobuf schemas: .proto text and base64 descriptors compiled by protoc in-process, printed back to
a canonical .proto text that compiles to the same descriptor, messages found by full name and by
the wire format's message indexes (as confluent-kafka's serializer computes them)."""

from __future__ import annotations

import base64
import contextlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from google.protobuf import descriptor_pool, timestamp_pb2
from google.protobuf.descriptor import Descriptor
from google.protobuf.descriptor_pb2 import DescriptorProto, FileDescriptorProto
from google.protobuf.descriptor_pb2 import FieldDescriptorProto as Field
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog.schemas import protobuf as pb
from kafkalog.schemas.errors import InvalidSchemaError
from kafkalog.schemas.model import MAX_REFERENCES, MAX_SCHEMA_LENGTH, ParsedSchema, SchemaReference, SchemaType
from tests.kafkalog.schemas.refusals import refused

EVENT = """
syntax = "proto3";
package demo.v1;
import "google/protobuf/timestamp.proto";
option java_package = "com.example.demo";
message Other { int32 x = 1; }
message Event {
  string id = 1;
  optional int64 n = 2;
  repeated double vals = 3 [packed = false];
  message First { int32 x = 1; }
  map<string, Other> others = 4;
  google.protobuf.Timestamp at = 5;
  oneof choice {
    string a = 6;
    Other b = 7;
  }
  enum Kind { KIND_UNSPECIFIED = 0; A = 1; B = 2 [deprecated = true]; }
  Kind kind = 8;
  message Inner { bytes raw = 1; map<int32, Inner> children = 2; }
  Inner inner = 9;
  reserved 20, 30 to 40, 100 to max;
  reserved "old";
}
enum Top { option allow_alias = true; T0 = 0; T1 = 1; T1B = 1; }
service Svc { rpc Get (Event) returns (stream Other); }
"""

LEGACY = r"""
syntax = "proto2";
package legacy;
message M {
  required string id = 1;
  optional int32 n = 2 [default = -5];
  optional string s = 3 [default = "a\"b\n"];
  optional bytes b = 4 [default = "\001\377"];
  optional double d = 5 [default = inf];
  optional E e = 6 [default = E2];
  repeated int32 packed_ints = 7 [packed = true];
  optional group G = 8 { optional int32 gx = 1; }
  extensions 100 to 199;
  enum E { E1 = 1; E2 = 2; }
}
extend M { optional string ext = 100; }
"""


def test_a_proto3_schema_compiles_with_its_well_known_imports() -> None:
    schema = pb.parse(EVENT)
    assert isinstance(schema, ParsedSchema)
    assert schema.schema_type is SchemaType.PROTOBUF
    assert schema.name == "demo.v1.Other"  # the first message
    assert (schema.package, schema.syntax) == ("demo.v1", "proto3")
    assert schema.file.name == pb.DEFAULT_FILE_NAME
    assert [d.name for d in schema.dependencies] == ["google/protobuf/timestamp.proto"]
    at = schema.message("demo.v1.Event").field[4]
    assert (at.name, at.type_name) == ("at", ".google.protobuf.Timestamp")
    assert schema.message(".google.protobuf.Timestamp").field[0].name == "seconds"


@pytest.mark.parametrize("source", [EVENT, LEGACY], ids=["proto3", "proto2"])
def test_the_canonical_text_compiles_to_the_same_descriptor_and_is_stable(source: str) -> None:
    schema = pb.parse(source)
    again = pb.parse(schema.canonical())
    assert again.file == schema.file
    assert again.canonical() == schema.canonical()
    assert schema.normalized() is schema


def test_the_canonical_text_spells_out_every_construct() -> None:
    text = pb.parse(EVENT).canonical()
    for line in [
        'syntax = "proto3";',
        "package demo.v1;",
        'import "google/protobuf/timestamp.proto";',
        'option java_package = "com.example.demo";',
        "  optional int64 n = 2;",
        "  repeated double vals = 3 [packed = false];",
        "  map<string, .demo.v1.Other> others = 4;",
        "  oneof choice {",
        "    .demo.v1.Other b = 7;",
        "    B = 2 [deprecated = true];",
        "  reserved 20, 30 to 40, 100 to max;",
        '  reserved "old";',
        "  option allow_alias = true;",
        "  rpc Get (.demo.v1.Event) returns (stream .demo.v1.Other);",
    ]:
        assert line in text.splitlines(), line
    legacy = pb.parse(LEGACY).canonical().splitlines()
    for line in [
        "  required string id = 1;",
        "  optional int32 n = 2 [default = -5];",
        '  optional string s = 3 [default = "a\\"b\\n"];',
        '  optional bytes b = 4 [default = "\\001\\377"];',
        "  optional double d = 5 [default = inf];",
        "  optional group G = 8 {",
        "  extensions 100 to 199;",
        "extend .legacy.M {",
    ]:
        assert line in legacy, line


def test_a_base64_descriptor_is_accepted_as_the_python_serializer_registers_it() -> None:
    # confluent-kafka's ProtobufSerializer registers base64 of the message's file's serialized_pb
    given = base64.b64encode(timestamp_pb2.DESCRIPTOR.serialized_pb).decode()
    schema = pb.parse(given)
    assert schema.file.name == "google/protobuf/timestamp.proto"
    assert schema.name == "google.protobuf.Timestamp"
    assert schema.message("google.protobuf.Timestamp").field[1].name == "nanos"
    # text and base64 of one schema give one canonical text, and serialized() is read back the same
    text = pb.parse(EVENT)
    assert pb.parse(text.serialized()).canonical() == text.canonical()


def test_references_are_imported_by_name_as_text_or_base64() -> None:
    other = 'syntax = "proto3";\npackage shop;\nmessage Address { string city = 1; }\n'
    order = 'syntax = "proto3";\npackage shop;\nimport "shop/address.proto";\nmessage Order { Address to = 1; }\n'
    declared = [SchemaReference("shop/address.proto", "address-value", 2)]
    schema = pb.parse(order, {"shop/address.proto": other}, declared=declared)
    assert schema.references == tuple(declared)
    assert [d.name for d in schema.dependencies] == ["shop/address.proto"]
    assert schema.message("shop.Order").field[0].type_name == ".shop.Address"
    as_base64 = pb.parse(other).serialized()
    assert pb.parse(order, {"shop/address.proto": as_base64}).canonical() == schema.canonical()


@pytest.mark.parametrize(
    ("text", "references", "cause"),
    [
        ('syntax = "proto3";\nmessage A { strin x = 1; }\n', {}, 'schema.proto:2:13: "strin" is not defined.'),
        (
            'syntax = "proto3";\nimport "other.proto";\nmessage A { Other x = 1; }\n',
            {},
            'schema.proto:2:1: Import "other.proto" was not found or had errors.',
        ),
        ('syntax = "proto3";\nmessage A { int32 a = 1; int32 a = 2; }\n', {}, '"a" is already defined in "A".'),
        ('syntax = "proto3";\nmessage A { int32 a = 0; }\n', {}, "Field numbers must be positive integers."),
        (  # installed elsewhere (googleapis-common-protos), but no serializer leaves it unregistered
            'syntax = "proto3";\nimport "google/rpc/status.proto";\n',
            {},
            "google/rpc/status.proto: File not found.",
        ),
        ("", {}, "empty schema"),
        ("aGVsbG8=", {}, "neither .proto text nor a base64 FileDescriptorProto"),
        ('syntax = "proto3";', {"../x.proto": 'syntax = "proto3";'}, "invalid reference name '../x.proto'"),
        ('syntax = "proto3";', {"/etc/x.proto": 'syntax = "proto3";'}, "invalid reference name '/etc/x.proto'"),
        ('syntax = "proto3";\nimport "x.proto";', {"x.proto": 'syntax = "proto3"; message {'}, "x.proto:1:"),
    ],
)
def test_invalid_schemas_are_refused_with_protocs_message(text: str, references: dict[str, str], cause: str) -> None:
    with pytest.raises(InvalidSchemaError) as refused:
        pb.parse(text, references)
    assert cause in str(refused.value)


def _index_array(message: Descriptor) -> tuple[int, ...]:
    """A message's indexes as confluent-kafka's ProtobufSerializer computes them
    (``_create_index_array``): its position among its parent's ``nested_types`` (the protobuf
    runtime's, map entries included), up to the file's ``message_types_by_name``."""
    path: list[int] = []
    current = message
    while current.containing_type is not None:
        path.insert(0, list(current.containing_type.nested_types).index(current))
        current = current.containing_type
    path.insert(0, list(current.file.message_types_by_name.values()).index(current))
    return tuple(path)


NESTED = """
syntax = "proto3";
package o;
message A {
  message First { int32 x = 1; }
  map<string, int32> m1 = 1;
  message Second { message Deep { int32 d = 1; } int32 y = 1; }
  map<string, int32> m2 = 2;
  int32 z = 3;
  message Fourth { int32 y = 1; }
}
message B { int32 b = 1; }
"""


def test_message_indexes_count_map_entries_where_protoc_places_them_as_the_python_serializer_does() -> None:
    schema = pb.parse(NESTED)
    paths = {name: path for name, path, _ in schema.messages()}
    assert paths == {
        "o.A": (0,), "o.A.First": (0, 0), "o.A.M1Entry": (0, 1), "o.A.Second": (0, 2),
        "o.A.Second.Deep": (0, 2, 0), "o.A.M2Entry": (0, 3), "o.A.Fourth": (0, 4), "o.B": (1,),
    }  # fmt: skip
    pool = descriptor_pool.DescriptorPool()
    for file in schema.file_descriptor_set().file:
        pool.Add(file)
    for name, path in paths.items():
        assert _index_array(pool.FindMessageTypeByName(name)) == path
        assert schema.message_at(list(path))[0] == name
        assert schema.indexes_of(name) == path
    assert schema.message_at([])[0] == "o.A"
    with pytest.raises(LookupError, match=r"no message at index path \[0, 9\]"):
        schema.message_at([0, 9])
    with pytest.raises(LookupError, match=r"no message 'o\.C'"):
        schema.indexes_of("o.C")
    # the canonical text keeps that order, so a reader of the stored text finds the same messages
    assert pb.parse(schema.canonical()).file == schema.file


_SCALARS = ["int32", "int64", "uint32", "sint64", "fixed32", "sfixed64", "bool", "string", "bytes", "double", "float"]


@st.composite
def _proto_files(draw: st.DrawFn) -> str:
    """A proto3 file: messages with scalar, message, map, enum and repeated fields, nested messages
    and oneofs, in random order."""
    lines = ['syntax = "proto3";', "package gen;", "enum Color { RED = 0; GREEN = 1; }"]
    count = draw(st.integers(1, 3))
    for m in range(count):
        body: list[str] = []
        number = 1
        for position in range(draw(st.integers(0, 6))):
            choice = draw(
                st.sampled_from(["scalar", "repeated", "optional", "map", "message", "enum", "nested", "oneof"])
            )
            if choice == "nested":
                body.append(f"message N{position} {{ {draw(st.sampled_from(_SCALARS))} v = 1; }}")
                continue
            if choice == "oneof":
                body.append(f"oneof o{number} {{ string s{number} = {number}; int32 i{number} = {number + 1}; }}")
                number += 2
                continue
            kind = {
                "scalar": draw(st.sampled_from(_SCALARS)),
                "repeated": "repeated " + draw(st.sampled_from(_SCALARS)),
                "optional": "optional " + draw(st.sampled_from(_SCALARS)),
                "map": f"map<string, {draw(st.sampled_from(_SCALARS))}>",
                "message": f"M{draw(st.integers(0, count - 1))}",
                "enum": "Color",
            }[choice]
            body.append(f"{kind} f{number} = {number};")
            number += 1
        lines.append(f"message M{m} {{ {' '.join(body)} }}")
    return "\n".join(lines)


@settings(max_examples=60, deadline=None)
@given(_proto_files())
def test_generated_schemas_print_to_text_that_compiles_back_to_the_same_descriptor(source: str) -> None:
    schema = pb.parse(source)
    assert pb.parse(schema.canonical()).file == schema.file
    assert pb.parse(schema.serialized()).file == schema.file


CONNECT = """
syntax = "proto3";
package demo;
import "confluent/meta.proto";
import "confluent/type/decimal.proto";
import "google/type/date.proto";
import "google/protobuf/descriptor.proto";
extend google.protobuf.FieldOptions { sint32 weight = 50001; double ratio = 50002; repeated string labels = 50003; }
message Ev {
  option (confluent.message_meta).doc = "an event";
  confluent.type.Decimal amount = 1 [(confluent.field_meta).params = {key: "connect.type", value: "int16"}];
  google.type.Date day = 2;
  int32 small = 3 [(confluent.field_meta) = {doc: "small", tags: ["a", "b"]}, (weight) = -7, (ratio) = 0.5,
                   (labels) = "x", (labels) = "y", deprecated = true];
}
"""


def test_imports_serializers_leave_unregistered_resolve_and_custom_options_survive_the_canonical_text() -> None:
    # Kafka Connect's Protobuf converter imports confluent/meta.proto, confluent/type/decimal.proto and
    # google/type/*.proto without registering them
    schema = pb.parse(CONNECT)
    assert {d.name for d in schema.dependencies} >= {
        "confluent/meta.proto", "confluent/type/decimal.proto", "google/type/date.proto",
    }  # fmt: skip
    lines = schema.canonical().splitlines()
    assert '  option (confluent.message_meta) = {doc: "an event"};' in lines
    assert any('(confluent.field_meta) = {doc: "small" tags: "a" tags: "b"}' in line for line in lines)
    assert any("(demo.weight) = -7, (demo.ratio) = 0.5, (demo.labels) = \"x\", (demo.labels) = \"y\"" in line
               for line in lines)  # fmt: skip
    assert pb.parse(schema.canonical()).file == schema.file
    # a descriptor given in base64 is kept as given, custom options and all
    again = pb.parse(schema.serialized())
    assert again.file == schema.file
    assert again.canonical() == schema.canonical()


def test_a_base64_descriptor_that_does_not_build_is_refused() -> None:
    schema = pb.parse(EVENT)
    broken = FileDescriptorProto()
    broken.CopyFrom(schema.file)
    broken.message_type[1].field[0].json_name = "other"  # harmless: still builds
    assert (
        pb.parse(base64.b64encode(broken.SerializeToString()).decode()).file.message_type[1].field[0].json_name
        == "other"
    )
    broken.message_type[1].field[0].type_name = ".demo.v1.Nope"
    broken.message_type[1].field[0].type = broken.message_type[1].field[0].TYPE_MESSAGE
    with pytest.raises(InvalidSchemaError, match=r'"\.demo\.v1\.Nope" is not defined|Nope'):
        pb.parse(base64.b64encode(broken.SerializeToString()).decode())


# --- hostile input: refused with InvalidSchemaError, quickly, nothing written outside the compiler's directory


def _b64(fdp: FileDescriptorProto) -> str:
    return base64.b64encode(fdp.SerializeToString()).decode()


def _one_message(name: str) -> FileDescriptorProto:
    fdp = FileDescriptorProto(name=name, package="p", syntax="proto3")
    message = fdp.message_type.add(name="M")
    message.field.add(name="a", number=1, type=Field.TYPE_STRING, label=Field.LABEL_OPTIONAL)
    return fdp


@pytest.mark.parametrize(
    "name", ["/tmp/abs.proto", "../../escape.proto", "a/../../b.proto", "a\x00b.proto", "dir/", "a", "x.txt"]
)
def test_a_descriptor_whose_file_name_leaves_the_compilers_directory_is_refused(tmp_path: Path, name: str) -> None:
    target = tmp_path / "escape.proto"
    fdp = _one_message(name.replace("/tmp/abs.proto", str(target)))
    refused(lambda: pb.parse(_b64(fdp)), "invalid file name of the descriptor")
    assert not target.exists()


def test_references_whose_paths_clash_are_refused() -> None:
    refs = {"a.proto": 'syntax = "proto3";', "a.proto/b.proto": 'syntax = "proto3";'}
    refused(lambda: pb.parse('syntax = "proto3"; import "a.proto/b.proto"; message M {}', refs), "clashes")


def test_descriptors_that_cannot_be_printed_are_refused() -> None:
    no_fields = FileDescriptorProto(name="x.proto", package="p", syntax="proto3")
    message = no_fields.message_type.add(name="M")
    message.nested_type.add(name="AEntry").options.map_entry = True
    message.field.add(name="a", number=1, type=Field.TYPE_MESSAGE, type_name=".p.M.AEntry", label=Field.LABEL_REPEATED)
    refused(lambda: pb.parse(_b64(no_fields)), "map entry AEntry of field a has 0 fields")

    group = FileDescriptorProto(name="y.proto", package="p")
    group.message_type.add(name="M").field.add(
        name="g", number=1, type=Field.TYPE_GROUP, type_name=".p.M.Nope", label=Field.LABEL_OPTIONAL
    )
    refused(lambda: pb.parse(_b64(group)), "group field g names .p.M.Nope")


def _varint(n: int) -> bytes:
    out = b""
    while True:
        low, n = n & 0x7F, n >> 7
        if not n:
            return out + bytes([low])
        out += bytes([low | 0x80])


def _with_field_options(option: bytes) -> str:
    """A base64 descriptor of one message with one field whose options are ``option``'s bytes, laid
    out by hand: parsing them into FieldOptions would fail in a process where confluent-kafka has put
    confluent.field_meta into the default descriptor pool."""
    fdp = FileDescriptorProto(name="z.proto", package="p", syntax="proto3", dependency=["confluent/meta.proto"])
    field = Field(name="a", number=1, type=Field.TYPE_STRING, label=Field.LABEL_OPTIONAL).SerializeToString()
    field += b"\x42" + _varint(len(option)) + option  # FieldDescriptorProto.options = 8, length-delimited
    message = DescriptorProto(name="M").SerializeToString() + b"\x12" + _varint(len(field)) + field  # field = 2
    data = fdp.SerializeToString() + b"\x22" + _varint(len(message)) + message  # message_type = 4
    return base64.b64encode(data).decode()


@pytest.mark.parametrize(
    ("option", "cause"),
    [
        # a corrupt confluent.Meta: refused as the option's bytes, or (where the default pool knows the
        # extension and decodes it with the descriptor) as the descriptor's
        (
            _varint((1088 << 3) | 2) + _varint(3) + b"\x0a\xff\xff",
            r"custom option \(confluent.field_meta\) does not decode|neither .proto text nor a base64",
        ),
        (_varint((1088 << 3) | 0) + _varint(7), r"custom option \(confluent.field_meta\) has wire type 0"),
    ],
)
def test_a_custom_option_whose_bytes_are_not_its_type_is_refused(option: bytes, cause: str) -> None:
    refused(lambda: pb.parse(_with_field_options(option)), cause)


def test_text_that_is_not_unicode_and_texts_beyond_the_bounds_are_refused() -> None:
    refused(lambda: pb.parse('syntax = "proto3"; message A { string s = 1 [json_name="\ud800"]; }'), "lone surrogate")
    refused(lambda: pb.parse("//" + "x" * MAX_SCHEMA_LENGTH), "characters long: at most")
    many = {f"r{i}.proto": 'syntax = "proto3";' for i in range(MAX_REFERENCES + 1)}
    refused(lambda: pb.parse('syntax = "proto3";', many), "references: at most")


_FIELD_TYPES = st.sampled_from(sorted(Field.Type.values()))


@st.composite
def _hostile_descriptors(draw: st.DrawFn) -> str:
    """A FileDescriptorProto of random names, types, labels and type names (most are not valid)."""
    names = st.text(st.sampled_from("ab._/\x00é.proto"), max_size=12)
    fdp = FileDescriptorProto(
        name=draw(names), package=draw(names), syntax=draw(st.sampled_from(["", "proto2", "proto3", "x"]))
    )
    for _ in range(draw(st.integers(0, 3))):
        message = fdp.message_type.add(name=draw(names))
        if draw(st.booleans()):
            message.options.map_entry = True
        for number in range(draw(st.integers(0, 3))):
            message.field.add(
                name=draw(names),
                number=draw(st.integers(-1, 3)) or number,
                type=draw(_FIELD_TYPES),
                label=draw(st.sampled_from([1, 2, 3])),
                type_name=draw(names),
                json_name=draw(names),
            )
        for _ in range(draw(st.integers(0, 1))):
            message.nested_type.add(name=draw(names)).options.map_entry = draw(st.booleans())
    return _b64(fdp)


@settings(max_examples=60, deadline=None)
@given(
    st.one_of(
        _hostile_descriptors(), st.binary(max_size=64).map(lambda b: base64.b64encode(b).decode()), st.text(max_size=64)
    )
)
def test_hostile_input_is_refused_with_invalid_schema_error_only(text: str) -> None:
    with contextlib.suppress(InvalidSchemaError):  # anything else fails the test
        pb.parse(text)


def test_words_that_are_no_base64_are_compiled_as_proto_text_and_protoc_names_the_error() -> None:
    refused(lambda: pb.parse("hello world"), r'schema.proto:1:1: Expected top-level statement \(e.g. "message"\)')
    refused(lambda: pb.parse("AAAA"), "neither .proto text nor a base64 FileDescriptorProto")


def test_schemas_compile_side_by_side_in_threads() -> None:
    texts = [f'syntax = "proto3"; package p{i}; message M{i} {{ string s = 1; int64 n = {i + 2}; }}' for i in range(16)]
    with ThreadPoolExecutor(8) as pool:
        parsed = list(pool.map(pb.parse, texts))
    assert [s.name for s in parsed] == [f"p{i}.M{i}" for i in range(16)]
    assert [s.file.message_type[0].field[1].number for s in parsed] == [i + 2 for i in range(16)]
    assert [pb.parse(t).canonical() for t in texts] == [s.canonical() for s in parsed]
