"""Protobuf compatibility as Confluent's registry judges and words it (goldens from its rules: the
compatible changes pass, each incompatible one is named with its path)."""

from __future__ import annotations

import pytest

from kafkalog.schemas import protobuf as pb
from kafkalog.schemas.model import SchemaReference
from kafkalog.schemas.protobuf_compat import MAX_FINDINGS, Difference, check, incompatibilities
from tests.kafkalog.schemas.refusals import quick, refused


def _schema(body: str, syntax: str = "proto3", package: str = "demo") -> pb.ProtobufSchema:
    return pb.parse(f'syntax = "{syntax}";\npackage {package};\n{body}\n')


def _kinds(new: str, old: str, syntax: str = "proto3") -> list[tuple[str, str]]:
    return [(d.kind, d.path) for d in check(_schema(new, syntax), _schema(old, syntax))]


BASE = "message Ev { string id = 1; int32 n = 2; }"


@pytest.mark.parametrize(
    "new",
    [
        "message Ev { string id = 1; int32 n = 2; double added = 3; }",  # field added
        "message Ev { string id = 1; }",  # field removed
        "message Ev { string ident = 1; int32 n = 2; }",  # field renamed
        "message Ev { bytes id = 1; int64 n = 2; }",  # within their groups
        "message Ev { string id = 1; uint64 n = 2; }",
        "message Ev { string id = 1; bool n = 2; }",
        "message Ev { string id = 1; int32 n = 2; }\nmessage Added { int32 x = 1; }",  # message added
        "message Added { int32 x = 1; }\nmessage Ev { string id = 1; int32 n = 2; }",  # message moved
        "message Ev { string id = 1; int32 n = 2; enum K { A = 0; } }",  # enum added
        "message Ev { string id = 1; oneof o { int32 n = 2; } }",  # one field into a new oneof
        "message Ev { repeated string id = 1; int32 n = 2; }",  # a string's label changed
    ],
)
def test_compatible_changes(new: str) -> None:
    assert check(_schema(new), _schema(BASE)) == []


def test_confluents_wording_and_paths_of_type_changes() -> None:
    new = "message Ev { int32 id = 1; Other n = 2; }\nmessage Other { int32 x = 1; }"
    assert incompatibilities(_schema(new), _schema(BASE)) == [
        '{errorType:"FIELD_SCALAR_KIND_CHANGED", description:"The kind of a SCALAR field at path \'#/Ev/1\' in the'
        ' new schema does not match its kind in the old schema"}',
        '{errorType:"FIELD_KIND_CHANGED", description:"The type of a field at path \'#/Ev/2\' in the new schema'
        ' does not match the old schema"}',
    ]
    # FORWARD swaps the roles in the words
    assert incompatibilities(_schema(BASE), _schema(new), reader_is="old", writer_is="new")[0] == (
        '{errorType:"FIELD_SCALAR_KIND_CHANGED", description:"The kind of a SCALAR field at path \'#/Ev/1\' in the'
        ' old schema does not match its kind in the new schema"}'
    )


def test_scalar_groups() -> None:
    for old, new in [("sint32", "int32"), ("fixed32", "int32"), ("float", "double"), ("string", "int32"),
                     ("fixed64", "fixed32"), ("sint64", "uint64")]:  # fmt: skip
        found = _kinds(f"message M {{ {new} v = 1; }}", f"message M {{ {old} v = 1; }}")
        assert found == [("FIELD_SCALAR_KIND_CHANGED", "#/M/1")], (old, new)
    for old, new in [("sint32", "sint64"), ("fixed32", "sfixed32"), ("fixed64", "sfixed64"), ("int32", "bool")]:
        assert _kinds(f"message M {{ {new} v = 1; }}", f"message M {{ {old} v = 1; }}") == [], (old, new)
    # an enum is a number of the general group
    enum = "enum K { A = 0; }\nmessage M { K v = 1; }"
    assert _kinds(enum, "message M { int64 v = 1; }") == []
    assert _kinds(enum, "message M { sint32 v = 1; }") == [("FIELD_SCALAR_KIND_CHANGED", "#/M/1")]


def test_package_and_message_removed() -> None:
    old = _schema("message A { int32 x = 1; }\nmessage B { int32 y = 1; }")
    new = _schema("message A { int32 x = 1; }", package="other")
    assert incompatibilities(new, old) == [
        '{errorType:"PACKAGE_CHANGED", description:"The package at \'#/\' in the new schema does not match the'
        ' package in the old schema"}',
        '{errorType:"MESSAGE_REMOVED", description:"The new schema is missing a MESSAGE type at path \'#/B\' in the'
        ' old schema"}',
    ]
    nested_gone = _kinds("message A { int32 x = 1; }", "message A { int32 x = 1; message In { int32 i = 1; } }")
    assert nested_gone == [("MESSAGE_REMOVED", "#/A/In")]


def test_proto2_required_fields_and_numeric_labels() -> None:
    old = "message M { required int32 a = 1; optional int32 b = 2; }"
    assert _kinds("message M { optional int32 b = 2; }", old, "proto2") == [("REQUIRED_FIELD_REMOVED", "#/M/1")]
    assert _kinds(f"{old[:-1]} required string c = 3; }}", old, "proto2") == [("REQUIRED_FIELD_ADDED", "#/M/3")]
    assert _kinds("message M { required int32 a = 1; repeated int32 b = 2; }", old, "proto2") == [
        ("FIELD_NUMERIC_LABEL_CHANGED", "#/M/2")
    ]
    assert incompatibilities(_schema("message M { optional int32 b = 2; }", "proto2"), _schema(old, "proto2")) == [
        '{errorType:"REQUIRED_FIELD_REMOVED", description:"The new schema is missing a required field at path:'
        " '#/M/1' in the old schema\"}"
    ]
    # proto3: a field written without a label has none, so making it repeated changes no label
    assert _kinds("message M { repeated int32 v = 1; }", "message M { int32 v = 1; }") == []
    assert _kinds("message M { repeated int32 v = 1; }", "message M { optional int32 v = 1; }") == [
        ("FIELD_NUMERIC_LABEL_CHANGED", "#/M/1")
    ]


def test_oneof_rules() -> None:
    old = "message M { oneof o { int32 a = 1; string b = 2; } int32 c = 3; int32 d = 4; }"
    assert _kinds("message M { oneof o { int32 a = 1; } int32 c = 3; int32 d = 4; }", old) == [
        ("ONEOF_FIELD_REMOVED", "#/M/o/2")
    ]
    assert _kinds("message M { int32 c = 3; int32 d = 4; }", old) == []  # the whole oneof went
    assert _kinds("message M { int32 a = 1; string b = 2; int32 c = 3; int32 d = 4; }", old) == []  # to top level
    assert _kinds("message M { oneof o { int32 a = 1; string b = 2; int32 c = 3; } int32 d = 4; }", old) == [
        ("FIELD_MOVED_TO_EXISTING_ONEOF", "#/M/o")
    ]
    assert _kinds(
        "message M { oneof o { int32 a = 1; string b = 2; } oneof p { int32 c = 3; int32 d = 4; } }", old
    ) == [("MULTIPLE_FIELDS_MOVED_TO_ONEOF", "#/M/p")]
    assert incompatibilities(
        _schema("message M { oneof o { int32 a = 1; string b = 2; int32 c = 3; } int32 d = 4; }"), _schema(old)
    ) == [
        '{errorType:"FIELD_MOVED_TO_EXISTING_ONEOF", description:"A field in the oneof at path \'#/M/o\' in the new'
        ' schema is outside an existing oneof in the old schema"}'
    ]


def test_message_typed_fields_and_maps() -> None:
    old = "message A { int32 x = 1; }\nmessage B { int32 y = 1; }\nmessage M { A a = 1; map<string, A> m = 2; }"
    assert _kinds(old.replace("A a = 1", "B a = 1"), old) == [("FIELD_NAMED_TYPE_CHANGED", "#/M/1")]
    assert _kinds(old.replace("map<string, A>", "map<string, B>"), old) == [("FIELD_NAMED_TYPE_CHANGED", "#/M/2")]
    assert _kinds(old.replace("map<string, A>", "map<int32, A>"), old) == [("FIELD_SCALAR_KIND_CHANGED", "#/M/2")]
    assert _kinds(old.replace("map<string, A> m = 2", "repeated A m = 2"), old) == [("FIELD_KIND_CHANGED", "#/M/2")]
    # a local message's own changes are reported where it is declared, once
    assert _kinds(old.replace("int32 x = 1", "string x = 1"), old) == [("FIELD_SCALAR_KIND_CHANGED", "#/A/1")]
    recursive = "message Node { Node next = 1; int32 v = 2; }"
    assert _kinds(recursive, recursive) == []


def test_a_referenced_message_of_another_version_is_compared_through_the_field() -> None:
    order = 'import "addr.proto";\nmessage Order { Address to = 1; }'
    v1 = 'syntax = "proto3";\npackage demo;\nmessage Address { string city = 1; }\n'
    v2 = 'syntax = "proto3";\npackage demo;\nmessage Address { int32 city = 1; }\n'
    old = pb.parse(f'syntax = "proto3";\npackage demo;\n{order}', {"addr.proto": v1},
                   declared=[SchemaReference("addr.proto", "addr", 1)])  # fmt: skip
    same = pb.parse(f'syntax = "proto3";\npackage demo;\n{order}', {"addr.proto": v2},
                    declared=[SchemaReference("addr.proto", "addr", 1)])  # fmt: skip
    newer = pb.parse(f'syntax = "proto3";\npackage demo;\n{order}', {"addr.proto": v2},
                     declared=[SchemaReference("addr.proto", "addr", 2)])  # fmt: skip
    assert check(same, old) == []  # one referenced version: nothing to compare
    assert [(d.kind, d.path) for d in check(newer, old)] == [
        ("FIELD_SCALAR_KIND_CHANGED", "#/Address/1"),
        ("FIELD_NAMED_TYPE_CHANGED", "#/Order/1"),
    ]


_MAIN = 'syntax = "proto3"; package m; import "dep.proto"; message Top { d.M0 t = 1; }'


def _diamond(n: int, leaf: str) -> str:
    messages = [f"message M{i} {{ M{i + 1} a = 1; M{i + 1} b = 2; }}" for i in range(n)]
    return "\n".join(['syntax = "proto3";', "package d;", *messages, f"message M{n} {{ {leaf} x = 1; }}"])


def _chain(n: int) -> str:
    messages = [f"message M{i} {{ M{i + 1} a = 1; }}" for i in range(n)]
    return "\n".join(['syntax = "proto3";', "package d;", *messages, f"message M{n} {{ string x = 1; }}"])


def test_referenced_messages_shared_along_exponentially_many_paths_are_compared_once_each() -> None:
    old = pb.parse(_MAIN, {"dep.proto": _diamond(16, "string")}, declared=[SchemaReference("dep.proto", "dep", 1)])
    new = pb.parse(_MAIN, {"dep.proto": _diamond(16, "int32")}, declared=[SchemaReference("dep.proto", "dep", 2)])
    found = quick(lambda: check(new, old))
    assert len(found) == MAX_FINDINGS
    assert found[0] == Difference("FIELD_SCALAR_KIND_CHANGED", "#/M16/1")
    undeclared = pb.parse(_MAIN, {"dep.proto": _diamond(16, "string")})
    assert quick(lambda: check(undeclared, pb.parse(_MAIN, {"dep.proto": _diamond(16, "string")}))) == []


def test_a_chain_of_referenced_messages_too_deep_to_compare_is_refused_not_a_recursion_error() -> None:
    old = pb.parse(_MAIN, {"dep.proto": _chain(300)}, declared=[SchemaReference("dep.proto", "dep", 1)])
    new = pb.parse(_MAIN, {"dep.proto": _chain(300)}, declared=[SchemaReference("dep.proto", "dep", 2)])
    refused(lambda: check(new, old), "nested too deeply to be compared")
