"""JSON Schemas checked against their draft's meta-schema (by jsonschema), references resolved by
name, the text kept as given."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kafkalog.schemas import json_schema as js
from kafkalog.schemas.errors import InvalidSchemaError
from kafkalog.schemas.model import ParsedSchema, SchemaReference, SchemaType

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
