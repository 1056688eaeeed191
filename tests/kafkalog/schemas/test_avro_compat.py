"""Avro schema resolution compatibility: worded as Confluent's registry words it (the goldens are its
checker's output), and judged as the Apache ``avro`` package's port of Java's SchemaCompatibility
judges it, on generated schema pairs."""

from __future__ import annotations

import json
from typing import Any

import avro.compatibility
import avro.schema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog.schemas import avro as ours
from kafkalog.schemas.avro_compat import MAX_FINDINGS, check, incompatibilities
from tests.kafkalog.schemas.refusals import quick, refused

from .test_avro import named_by_path


def _record(*fields: dict[str, Any], name: str = "Ev", **extra: Any) -> ours.AvroSchema:
    return ours.parse(json.dumps({"type": "record", "name": name, "fields": list(fields), **extra}))


def _parse(value: Any) -> ours.AvroSchema:
    return ours.parse(json.dumps(value))


V1 = _record({"name": "id", "type": "string"}, {"name": "n", "type": "int"})


def test_confluents_wording_of_a_type_change_and_a_field_added_without_default() -> None:
    v2 = _record({"name": "id", "type": "string"}, {"name": "n", "type": "string"}, {"name": "req", "type": "string"})
    assert incompatibilities(v2, V1) == [
        "{errorType:'TYPE_MISMATCH', description:'The type (path '/fields/1/type') of a field in the new schema"
        " does not match with the old schema', additionalInfo:'reader type: STRING not compatible with writer"
        " type: INT'}",
        "{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'req' at path '/fields/2' in the"
        " new schema has no default value and is missing in the old schema', additionalInfo:'req'}",
    ]
    # FORWARD: the old schema reads the new one, so "old" and "new" swap
    assert incompatibilities(V1, v2, reader_is="old", writer_is="new") == [
        "{errorType:'TYPE_MISMATCH', description:'The type (path '/fields/1/type') of a field in the old schema"
        " does not match with the new schema', additionalInfo:'reader type: INT not compatible with writer"
        " type: STRING'}",
    ]


def test_promotions_are_compatible_one_way() -> None:
    promotions = [("int", "long"), ("int", "float"), ("int", "double"), ("long", "float"),
                  ("long", "double"), ("float", "double"), ("string", "bytes"), ("bytes", "string")]  # fmt: skip
    for writer, reader in promotions:
        assert check(_parse(reader), _parse(writer)) == [], (reader, writer)
    for writer, reader in [
        ("long", "int"),
        ("double", "float"),
        ("float", "long"),
        ("boolean", "int"),
        ("null", "string"),
    ]:
        assert [f.kind for f in check(_parse(reader), _parse(writer))] == ["TYPE_MISMATCH"], (reader, writer)


def test_fields_added_with_defaults_and_removed_are_compatible_and_aliases_match_renamed_fields() -> None:
    v2 = _record({"name": "id", "type": "string"}, {"name": "extra", "type": ["null", "string"], "default": None})
    assert check(v2, V1) == []
    renamed = _record({"name": "ident", "type": "string", "aliases": ["id"]}, {"name": "n", "type": "long"})
    assert check(renamed, V1) == []


def test_enum_symbols_missing_unless_the_reader_has_a_default() -> None:
    writer = _parse({"type": "enum", "name": "K", "symbols": ["A", "B", "C", "D"]})
    reader = _parse({"type": "enum", "name": "K", "symbols": ["A", "B"]})
    assert incompatibilities(reader, writer) == [
        "{errorType:'MISSING_ENUM_SYMBOLS', description:'The new schema is missing enum symbols '[C, D]' at path"
        " '/symbols' in the old schema', additionalInfo:'[C, D]'}"
    ]
    defaulted = _parse({"type": "enum", "name": "K", "symbols": ["A", "B"], "default": "A"})
    assert check(defaulted, writer) == []


def test_fixed_size_and_name_mismatches() -> None:
    writer = _parse({"type": "fixed", "name": "F", "size": 4})
    assert incompatibilities(_parse({"type": "fixed", "name": "F", "size": 8}), writer) == [
        "{errorType:'FIXED_SIZE_MISMATCH', description:'The size of FIXED type field at path '/size' in the new"
        " schema does not match with the old schema', additionalInfo:'expected: 4, found: 8'}"
    ]
    assert incompatibilities(_parse({"type": "fixed", "name": "G", "size": 4}), writer) == [
        "{errorType:'NAME_MISMATCH', description:'The name of the schema has changed (path '/name')',"
        " additionalInfo:'expected: F'}"
    ]
    # the unqualified name is what counts; a reader alias names the writer's full name
    assert check(_parse({"type": "fixed", "name": "x.F", "size": 4}), writer) == []
    aliased = _parse({"type": "fixed", "name": "G", "namespace": "y", "aliases": ["F"], "size": 4})
    assert [f.kind for f in check(aliased, writer)] == ["NAME_MISMATCH"]  # the alias is y.F
    assert check(_parse({"type": "fixed", "name": "G", "aliases": ["F"], "size": 4}), writer) == []


def test_unions() -> None:
    reader = _parse(["null", "string"])
    assert incompatibilities(reader, _parse(["null", "string", "int"])) == [
        "{errorType:'MISSING_UNION_BRANCH', description:'The new schema is missing a type inside a union field at"
        " path '/2' in the old schema', additionalInfo:'reader union lacking writer type: INT'}"
    ]
    assert check(reader, _parse("string")) == []
    assert [f.message for f in check(reader, _parse("int"))] == ["reader union lacking writer type: INT"]
    assert check(_parse("long"), _parse(["int", "long"])) == []
    found = check(_parse("long"), _parse(["int", "string"]))
    assert [(f.kind, f.location) for f in found] == [("TYPE_MISMATCH", "/1")]  # Avro 1.12's path: the branch
    record = _record({"name": "a", "type": "int"})
    found = check(record, _record({"name": "a", "type": ["int", "string", "null"]}))
    assert [(f.kind, f.location, f.message) for f in found] == [
        ("TYPE_MISMATCH", "/fields/0/type/1", "reader type: INT not compatible with writer type: STRING"),
        ("TYPE_MISMATCH", "/fields/0/type/2", "reader type: INT not compatible with writer type: NULL"),
    ]


def test_recursive_schemas_terminate() -> None:
    node = {"type": "record", "name": "Node", "fields": [{"name": "next", "type": ["null", "Node"], "default": None}]}
    grown = {"type": "record", "name": "Node", "fields": [*node["fields"], {"name": "v", "type": "int"}]}
    assert check(_parse(node), _parse(node)) == []
    assert [f.kind for f in check(_parse(grown), _parse(node))] == ["READER_FIELD_MISSING_DEFAULT_VALUE"]


_field_names = st.sampled_from(["a", "b", "c"])
_symbols = st.lists(st.sampled_from(["A", "B", "C"]), min_size=1, max_size=3, unique=True)


def _types(depth: int = 0) -> st.SearchStrategy[Any]:
    leaf = st.one_of(
        st.sampled_from(["null", "boolean", "int", "long", "float", "double", "bytes", "string"]),
        st.builds(lambda s, d: {"type": "enum", "name": "E", "symbols": s, **({"default": s[0]} if d else {})},
                  _symbols, st.booleans()),
        st.builds(lambda n: {"type": "fixed", "name": "F", "size": n}, st.sampled_from([2, 4])),
    )  # fmt: skip
    if depth >= 2:
        return leaf
    inner = _types(depth + 1)
    return st.one_of(
        leaf,
        st.builds(lambda t: {"type": "array", "items": t}, inner),
        st.builds(lambda t: {"type": "map", "values": t}, inner),
        st.lists(st.sampled_from(["null", "int", "long", "string", "bytes", "double"]), min_size=1, max_size=3,
                 unique=True),
        st.builds(
            lambda fields: {"type": "record", "name": "R", "fields": fields},
            st.lists(
                st.builds(
                    lambda n, t, d: {"name": n, "type": t, **({"default": None} if d else {})},
                    _field_names, inner, st.booleans(),
                ),
                max_size=3,
                unique_by=lambda f: f["name"],
            ),
        ),
    )  # fmt: skip


def _valid(value: Any) -> Any:
    """``value`` named by path, with a ``null`` default only where the field's type is nullable
    (first branch), enums and fixeds named apart."""
    value = named_by_path(value)

    def fix(node: Any, path: str) -> Any:
        if isinstance(node, list):
            return node
        if not isinstance(node, dict):
            return node
        if node["type"] in ("enum", "fixed"):
            return {**node, "name": f"{node['type'][0].upper()}{path}"}
        if node["type"] == "record":
            fields = []
            for given in node["fields"]:
                ftype = fix(given["type"], f"{path}_{given['name']}")
                field = {**given, "type": ftype}
                if "default" in field and not (ftype == "null" or (isinstance(ftype, list) and ftype[0] == "null")):
                    del field["default"]
                fields.append(field)
            return {**node, "fields": fields}
        if node["type"] == "array":
            return {**node, "items": fix(node["items"], f"{path}_i")}
        if node["type"] == "map":
            return {**node, "values": fix(node["values"], f"{path}_v")}
        return node

    return fix(value, "")


def _oracle_compatible(reader: Any, writer: Any) -> bool:
    result = avro.compatibility.ReaderWriterCompatibilityChecker().get_compatibility(
        avro.schema.parse(json.dumps(reader)), avro.schema.parse(json.dumps(writer))
    )
    return result.compatibility is avro.compatibility.SchemaCompatibilityType.compatible


@settings(max_examples=400, deadline=None)
@given(_types(), _types())
def test_compatible_exactly_when_the_apache_avro_checker_says_so(reader: Any, writer: Any) -> None:
    reader, writer = _valid(reader), _valid(writer)
    found = check(_parse(reader), _parse(writer))
    assert (found == []) == _oracle_compatible(reader, writer), found


@pytest.mark.parametrize(
    ("reader", "writer"),
    [
        ({"type": "array", "items": ["null", "int"]}, {"type": "array", "items": "int"}),
        ({"type": "map", "values": "double"}, {"type": "map", "values": ["int", "float"]}),
        ({"type": "record", "name": "R",
          "fields": [{"name": "a", "type": {"type": "enum", "name": "E", "symbols": ["A"], "default": "A"}}]},
         {"type": "record", "name": "R", "fields": []}),
    ],
)  # fmt: skip
def test_chosen_pairs_agree_with_the_apache_avro_checker(reader: Any, writer: Any) -> None:
    assert (check(_parse(reader), _parse(writer)) == []) == _oracle_compatible(reader, writer)


def _diamond(n: int, leaf: str) -> ours.AvroSchema:
    """L0 holds L1 twice, L1 holds L2 twice, ...: 2^n paths to the leaf."""
    inner: Any = {"type": "record", "name": f"L{n}", "fields": [{"name": "x", "type": leaf}]}
    for i in range(n - 1, -1, -1):
        inner = {
            "type": "record",
            "name": f"L{i}",
            "fields": [{"name": "a", "type": inner}, {"name": "b", "type": f"L{i + 1}"}],
        }
    return _parse(inner)


def test_records_shared_along_exponentially_many_paths_report_at_most_max_findings() -> None:
    reader, writer = _diamond(18, "string"), _diamond(18, "int")
    found = quick(lambda: check(reader, writer))
    assert len(found) == MAX_FINDINGS
    assert found[0].location == "/" + "/".join(["fields", "0", "type"] * 18) + "/fields/0/type"
    assert {f.kind for f in found} == {"TYPE_MISMATCH"}
    assert quick(lambda: check(reader, reader)) == []


def test_a_reader_field_finding_several_writer_fields_gives_javas_exception_as_the_one_finding() -> None:
    reader = _record({"name": "a", "type": "int", "aliases": ["b"]}, name="R")
    writer = _record({"name": "a", "type": "int"}, {"name": "b", "type": "int"}, name="R")
    # Avro 1.12.1's SchemaCompatibility throws this AvroRuntimeException; Confluent's registry reports its message
    assert incompatibilities(reader, writer) == [
        "Unexpected exception during compatibility check: Reader record field a type:INT pos:0 matches multiple"
        ' fields in writer record schema {"type":"record","name":"R","fields":[{"name":"a","type":"int"},'
        '{"name":"b","type":"int"}]}'
    ]


def test_unions_too_large_to_compare_are_refused_quickly() -> None:
    def union(kind: str) -> ours.AvroSchema:
        return _parse(
            [{"type": "record", "name": f"R{i}", "fields": [{"name": "a", "type": kind}]} for i in range(500)]
        )

    reader, writer = union("int"), union("string")
    refused(lambda: check(reader, writer), "too large to compare")
