"""JSON Schemas checked against their draft's meta-schema (by jsonschema), references resolved by
name, the text kept as given."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog.schemas import json_schema as js
from kafkalog.schemas.errors import InvalidSchemaError
from kafkalog.schemas.model import MAX_SCHEMA_LENGTH, ParsedSchema, SchemaReference, SchemaType
from tests.kafkalog.schemas.refusals import refused

EVENT = {
    "title": "Event",
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "n": {"type": ["integer", "null"]},
        "at": {"$ref": "#/definitions/Instant"},
    },
    "required": ["id"],
    "additionalProperties": False,
    "definitions": {"Instant": {"type": "string", "format": "date-time"}},
}


def test_a_schema_parses_with_its_draft_and_title() -> None:
    schema = js.parse(json.dumps(EVENT, indent=2))
    assert isinstance(schema, ParsedSchema)
    assert schema.schema_type is SchemaType.JSON
    assert (schema.name, schema.draft) == ("Event", "draft-07")
    assert schema.canonical() == json.dumps(EVENT, separators=(",", ":"))
    assert js.parse(schema.canonical()) == schema
    assert schema.normalized().canonical() == json.dumps(EVENT, separators=(",", ":"), sort_keys=True)
    assert schema.resolve("#/definitions/Instant", schema.root)[0] == {"type": "string", "format": "date-time"}


@pytest.mark.parametrize(
    ("uri", "draft"),
    [
        ("http://json-schema.org/draft-04/schema#", "draft-04"),
        ("http://json-schema.org/draft-06/schema#", "draft-06"),
        ("http://json-schema.org/draft-07/schema#", "draft-07"),
        ("https://json-schema.org/draft/2019-09/schema", "2019-09"),
        ("https://json-schema.org/draft/2020-12/schema", "2020-12"),
    ],
)
def test_each_draft_is_checked_against_its_own_meta_schema(uri: str, draft: str) -> None:
    assert js.parse(json.dumps({"$schema": uri, "type": "string"})).draft == draft
    # exclusiveMaximum is a boolean in draft 4 and a number after it
    boolean = json.dumps({"$schema": uri, "type": "number", "maximum": 3, "exclusiveMaximum": True})
    if draft == "draft-04":
        js.parse(boolean)
    else:
        with pytest.raises(InvalidSchemaError, match=f"invalid {draft} JSON Schema"):
            js.parse(boolean)


def test_references_are_resolved_by_name_with_their_pointer() -> None:
    address = {"type": "object", "properties": {"city": {"type": "string"}}, "definitions": {"Zip": {"type": "string"}}}
    order = {
        "type": "object",
        "properties": {"to": {"$ref": "address.json"}, "zip": {"$ref": "address.json#/definitions/Zip"}},
    }
    declared = [SchemaReference("address.json", "address-value", 1)]
    schema = js.parse(json.dumps(order), {"address.json": json.dumps(address)}, declared=declared)
    assert schema.references == tuple(declared)
    target, document = schema.resolve("address.json#/definitions/Zip", schema.root)
    assert target == {"type": "string"}
    assert document == address
    with pytest.raises(
        InvalidSchemaError, match=r"'address\.json' names no reference of the schema, at #/properties/to"
    ):
        js.parse(json.dumps(order))


@pytest.mark.parametrize(
    ("schema", "cause"),
    [
        ("{", "not JSON"),
        ("[1]", "a JSON Schema is an object or a boolean, not list"),
        (
            {"type": "strin"},
            "invalid draft-07 JSON Schema: 'strin' is not valid under any of the given schemas (at type)",
        ),
        ({"minLength": -1}, "-1 is less than the minimum of 0 (at minLength)"),
        ({"required": "id"}, "(at required)"),
        ({"$schema": "http://example.com/mine"}, "unknown $schema 'http://example.com/mine'"),
        ({"$ref": "#/definitions/Nope"}, "$ref '#/definitions/Nope' does not resolve (no 'definitions'), at #"),
        ({"properties": {"a": {"$ref": "https://example.com/remote.json"}}}, "names no reference of the schema"),
        ({"$ref": "#anchor"}, "only JSON pointers are resolved"),
    ],
)
def test_invalid_schemas_are_refused_naming_the_cause(schema: Any, cause: str) -> None:
    with pytest.raises(InvalidSchemaError) as refused:
        js.parse(schema if isinstance(schema, str) else json.dumps(schema))
    assert cause in str(refused.value)


def test_boolean_schemas_and_deep_nesting() -> None:
    assert js.parse("true").name is None
    deep: Any = {"type": "string"}
    for _ in range(js.MAX_SCHEMA_DEPTH + 5):
        deep = {"items": deep}
    with pytest.raises(InvalidSchemaError, match="nested deeper than"):
        js.parse(json.dumps(deep))


# --- hostile input: refused with InvalidSchemaError, quickly


@pytest.mark.parametrize(
    ("text", "cause"),
    [
        ('{"default": NaN}', "NaN is not a JSON number"),
        ('{"maximum": 1e400}', "beyond the range of a double"),
        ('{"title": "\\ud800"}', "lone surrogate"),
        (
            '{"properties": {"enum": {"$ref": "#/nope"}}}',
            r"'#/nope' does not resolve \(no 'nope'\), at #/properties/enum",
        ),
        ('{"$ref": "#/x", "x": {"type": "string", "maxLength": "a"}}', "names an invalid draft-07 JSON Schema"),
        ('{"$ref": "#/x", "x": {"$ref": "#/y"}}', r"'#/y' does not resolve"),
        ('{"patternProperties": {"(a)\\\\1": {}}}', "not a regular expression RE2 accepts"),
        ('{"patternProperties": {"(?=a)": {}}}', "lookarounds are not supported"),
        ('{"$ref": "file:///etc/passwd"}', "names no reference of the schema"),
        (" " * (MAX_SCHEMA_LENGTH + 1), "characters long: at most"),
    ],
)
def test_hostile_schemas_are_refused_naming_the_cause(text: str, cause: str) -> None:
    refused(lambda: js.parse(text), cause)


def test_data_keywords_are_data_but_a_property_named_like_one_is_a_schema() -> None:
    assert js.parse('{"const": {"$ref": "#/nope"}, "default": {"$ref": "x"}}').root["const"] == {"$ref": "#/nope"}
    assert js.parse('{"properties": {"default": {"$ref": "#/definitions/d"}}, "definitions": {"d": {}}}')


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(["object", "array", "string", "integer", "#", "#/definitions/a", "#/x", "^(a+)+$", "(?=a)"])
    | st.just("\ud800"),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["type", "properties", "items", "$ref", "definitions", "a", "enum", "required", "not",
                         "anyOf", "patternProperties", "additionalProperties", "maxLength", "dependentRequired",
                         "$schema"]), inner, max_size=6),
    max_leaves=25,
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(_json)
def test_hostile_json_is_refused_with_invalid_schema_error_only(value: Any) -> None:
    with contextlib.suppress(InvalidSchemaError):  # anything else fails the test
        js.parse(json.dumps(value)).normalized()
