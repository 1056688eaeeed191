"""JSON Schema compatibility as Confluent's registry judges and words it (its strict policy), the open
and closed content models above all."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from hypothesis import given, settings

from kafkalog.schemas import json_schema as js
from kafkalog.schemas.errors import InvalidSchemaError
from kafkalog.schemas.json_schema_compat import MAX_FINDINGS, Difference, check, incompatibilities
from tests.kafkalog.schemas.refusals import quick, refused
from tests.kafkalog.schemas.test_json_schema import _json


def _p(value: Any, references: dict[str, Any] | None = None) -> js.JsonSchema:
    return js.parse(json.dumps(value), {k: json.dumps(v) for k, v in (references or {}).items()})


def _kinds(new: Any, old: Any) -> list[tuple[str, str]]:
    return [(d.kind, d.path) for d in check(_p(new), _p(old))]


V1 = {"type": "object", "properties": {"id": {"type": "string"}, "n": {"type": "integer"}}, "required": ["id"]}
V2 = {**V1, "properties": {**V1["properties"], "x": {"type": "string"}}}


def test_the_open_content_model_trap() -> None:
    # open (no additionalProperties): adding an optional property is incompatible, removing one is not
    assert incompatibilities(_p(V2), _p(V1)) == [
        '{errorType:"OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", description:"The new schema has an open'
        " content model and has a property or item at path '#/properties/x' which is missing in the old schema'}"
    ]
    assert check(_p(V1), _p(V2)) == []
    # closed: the other way round
    closed1, closed2 = {**V1, "additionalProperties": False}, {**V2, "additionalProperties": False}
    assert check(_p(closed2), _p(closed1)) == []
    assert incompatibilities(_p(closed1), _p(closed2)) == [
        '{errorType:"PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", description:"The new has a closed content model'
        " and is missing a property or item present at path '#/properties/x' in the old schema'}"
    ]
    # a required property added to a closed model needs a default
    required = {**closed2, "required": ["id", "x"]}
    assert _kinds(required, closed1) == [("REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", "#/properties/x")]
    with_default = {**required, "properties": {**closed2["properties"], "x": {"type": "string", "default": ""}}}
    assert _kinds(with_default, closed1) == []


def test_partially_open_content_models_cover_what_matches_their_schema() -> None:
    old = {**V1, "additionalProperties": {"type": "string"}}
    assert _kinds({**V2, "additionalProperties": {"type": "string"}}, old) == []
    number = {
        **V1,
        "properties": {**V1["properties"], "x": {"type": "number"}},
        "additionalProperties": {"type": "string"},
    }
    assert _kinds(number, old) == [
        ("TYPE_CHANGED", "#/properties/x"),
        ("PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", "#/properties/x"),
    ]


def test_types_and_constraints() -> None:
    assert incompatibilities(_p({"type": "integer"}), _p({"type": "string"})) == [
        '{errorType:"TYPE_CHANGED", description:"A type at path \'#/\' is different between the new schema and'
        " the old schema'}"
    ]
    assert _kinds({"type": "number"}, {"type": "integer"}) == []  # extended
    assert _kinds({"type": "integer"}, {"type": "number"}) == [("TYPE_NARROWED", "#/")]
    assert _kinds({"type": "string", "maxLength": 5}, {"type": "string", "maxLength": 10}) == [
        ("MAX_LENGTH_DECREASED", "#/maxLength")
    ]
    assert _kinds({"type": "string", "maxLength": 20}, {"type": "string", "maxLength": 10}) == []
    assert _kinds({"type": "string", "pattern": "^a"}, {"type": "string"}) == [("PATTERN_ADDED", "#/pattern")]
    assert _kinds({"type": "number", "minimum": 1}, {"type": "number", "minimum": 0}) == [
        ("MINIMUM_INCREASED", "#/minimum")
    ]
    assert _kinds({"type": "number", "multipleOf": 4}, {"type": "number", "multipleOf": 2}) == [
        ("MULTIPLE_OF_EXPANDED", "#/multipleOf")
    ]
    assert _kinds({"type": "number", "multipleOf": 1}, {"type": "number", "multipleOf": 2}) == []
    described = incompatibilities(_p({"type": "string", "minLength": 3}), _p({"type": "string"}))
    assert described == [
        '{errorType:"MIN_LENGTH_ADDED", description:"The keyword at path \'#/minLength\' in the new schema is not'
        " present in the old schema'}"
    ]
    assert _kinds({**V1, "required": ["id", "n"]}, V1) == [("REQUIRED_ATTRIBUTE_ADDED", "#/required/n")]


def test_unions_enums_and_combinations() -> None:
    nullable = {"type": ["string", "null"]}
    assert _kinds(nullable, {"type": "string"}) == []  # a sum type extended
    assert _kinds({"type": "string"}, nullable) == [("TYPE_CHANGED", "#/")]
    assert _kinds({"enum": ["a", "b"]}, {"enum": ["a"]}) == []
    assert incompatibilities(_p({"enum": ["a"]}), _p({"enum": ["a", "b"]})) == [
        '{errorType:"ENUM_ARRAY_NARROWED", description:"An array or combined type at path \'#/enum\' has fewer'
        " elements in the new schema than the old schema'}"
    ]
    one = {"oneOf": [{"type": "string"}, {"type": "integer"}]}
    assert _kinds({"oneOf": [{"type": "string"}, {"type": "integer"}, {"type": "boolean"}]}, one) == []
    assert _kinds({"oneOf": [{"type": "string"}]}, one) == [("SUM_TYPE_NARROWED", "#/")]
    assert _kinds({"oneOf": [{"type": "boolean"}, {"type": "integer"}]}, one) == [
        ("COMBINED_TYPE_SUBSCHEMAS_CHANGED", "#/")
    ]
    assert _kinds({"anyOf": one["oneOf"]}, one) == []  # oneOf to anyOf extends
    assert _kinds({"allOf": one["oneOf"]}, one) == [("COMBINED_TYPE_CHANGED", "#/")]


def test_arrays() -> None:
    assert _kinds({"type": "array", "items": {"type": "integer"}}, {"type": "array", "items": {"type": "string"}}) == [
        ("TYPE_CHANGED", "#/items")
    ]
    assert _kinds(
        {"type": "array", "items": {"type": "string"}, "maxItems": 3}, {"type": "array", "items": {"type": "string"}}
    ) == [("MAX_ITEMS_ADDED", "#/maxItems")]
    closed = {"type": "array", "items": [{"type": "string"}], "additionalItems": False}
    longer = {"type": "array", "items": [{"type": "string"}, {"type": "integer"}], "additionalItems": False}
    assert _kinds(longer, closed) == []  # an item added to a closed tuple
    assert _kinds(closed, longer) == [("ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL", "#/items/1")]


def test_references_and_recursion() -> None:
    city = {"type": "object", "properties": {"c": {"type": "string"}}}
    order = {"type": "object", "properties": {"a": {"$ref": "addr.json"}}}
    old = _p(order, {"addr.json": city})
    new = _p(order, {"addr.json": {"type": "object", "properties": {"c": {"type": "integer"}}}})
    assert [(d.kind, d.path) for d in check(new, old)] == [("TYPE_CHANGED", "#/properties/a/properties/c")]
    node = {"type": "object", "properties": {"next": {"$ref": "#"}, "v": {"type": "string"}}}
    assert _kinds(node, node) == []
    changed = {"type": "object", "properties": {"next": {"$ref": "#"}, "v": {"type": "integer"}}}
    assert _kinds(changed, node) == [("TYPE_CHANGED", "#/properties/v")]


@pytest.mark.parametrize("schema", [V1, {"type": "string"}, {"oneOf": [{"type": "string"}, {"type": "null"}]}, True])
def test_a_schema_is_compatible_with_itself(schema: Any) -> None:
    assert check(_p(schema), _p(schema)) == []


def test_additional_and_unevaluated_items() -> None:
    # additionalItems counts even where items is no tuple, as Confluent's library reads it
    assert _kinds({"additionalItems": False}, {"additionalItems": True}) == [
        ("ADDITIONAL_ITEMS_REMOVED", "#/additionalItems")
    ]
    assert _kinds({"additionalItems": {"type": "number"}}, {"additionalItems": {"type": "string"}}) == [
        ("TYPE_CHANGED", "#/additionalItems")
    ]
    # 2020-12: a boolean items says whether there may be items; unevaluatedItems can cover a tuple's tail
    draft = "https://json-schema.org/draft/2020-12/schema"
    assert _kinds({"$schema": draft, "items": False}, {"$schema": draft, "items": True}) == [
        ("ADDITIONAL_ITEMS_REMOVED", "#/additionalItems")
    ]
    old = {
        "$schema": draft,
        "type": "array",
        "prefixItems": [{"type": "string"}],
        "unevaluatedItems": {"type": "string"},
    }
    covered = {**old, "prefixItems": [{"type": "string"}, {"type": "string"}]}
    uncovered = {**old, "prefixItems": [{"type": "string"}, {"type": "number"}]}
    assert _kinds(covered, old) == []
    assert _kinds(uncovered, old) == [
        ("TYPE_CHANGED", "#/items/1"),
        ("ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", "#/items/1"),
    ]


def _chain(n: int, leaf: str) -> js.JsonSchema:
    defs: dict[str, Any] = {
        f"d{i}": {"type": "object", "properties": {"x": {"$ref": f"#/definitions/d{i + 1}"}}} for i in range(n)
    }
    defs[f"d{n}"] = {"type": leaf}
    return _p({"$ref": "#/definitions/d0", "definitions": defs})


def _diamond(n: int, leaf: str) -> js.JsonSchema:
    defs: dict[str, Any] = {
        f"d{i}": {
            "type": "object",
            "properties": {"a": {"$ref": f"#/definitions/d{i + 1}"}, "b": {"$ref": f"#/definitions/d{i + 1}"}},
        }
        for i in range(n)
    }
    defs[f"d{n}"] = {"type": leaf}
    return _p({"$ref": "#/definitions/d0", "definitions": defs})


def test_definitions_shared_along_exponentially_many_paths_are_compared_once_each() -> None:
    assert quick(lambda: check(_diamond(20, "string"), _diamond(20, "string"))) == []
    found = quick(lambda: check(_diamond(20, "integer"), _diamond(20, "string")))
    assert len(found) == MAX_FINDINGS
    assert found[0] == Difference("TYPE_CHANGED", "#/" + "/".join(["properties", "a"] * 20))
    assert found[1] == Difference("TYPE_CHANGED", "#/" + "/".join(["properties", "a"] * 19 + ["properties", "b"]))


def test_a_chain_of_refs_too_deep_to_compare_is_refused_not_a_recursion_error() -> None:
    assert [d.kind for d in quick(lambda: check(_chain(100, "integer"), _chain(100, "string")))] == ["TYPE_CHANGED"]
    refused(lambda: check(_chain(400, "integer"), _chain(400, "string")), "nested too deeply")


def test_a_backtracking_pattern_is_matched_in_linear_time() -> None:
    old = _p({"type": "object", "properties": {"a" * 40 + "!": {"type": "string"}}, "additionalProperties": False})
    new = _p({"type": "object", "patternProperties": {"^(a+)+$": {"type": "string"}}, "additionalProperties": False})
    assert [d.kind for d in quick(lambda: check(new, old))] == [
        "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL"  # the name does not match: no partially open model
    ]


@pytest.mark.parametrize(
    ("new", "old"),
    [
        ({"type": "object", "dependentRequired": 5}, {"type": "object"}),  # draft 7 does not know the keyword
        ({"type": "array", "maxContains": "x"}, {"type": "array", "maxContains": 3}),
        (
            {"type": "object", "dependentRequired": {"a": [{}], "b": 3}},
            {"type": "object", "dependentRequired": {"a": ["c"]}},
        ),
    ],
)
def test_keywords_the_draft_does_not_check_are_read_as_absent_when_not_of_their_type(new: Any, old: Any) -> None:
    assert isinstance(check(_p(new), _p(old)), list)


def test_combinations_too_large_to_compare_are_refused_quickly() -> None:
    subs = [{"type": "object", "properties": {f"p{i}": {"type": "string"}}} for i in range(300)]
    new, old = _p({"anyOf": subs}), _p({"anyOf": subs[::-1]})
    # about half a second on an idle core, growing with the sizes (not with their product's powers):
    # the bound leaves room for a busy machine, and an exponential search would not finish at all
    refused(lambda: check(new, old), "too large to compare", within=5.0)


@settings(max_examples=200, deadline=None)
@given(_json, _json)
def test_any_two_schemas_that_parse_compare_without_an_exception_but_invalid_schema_error(a: Any, b: Any) -> None:
    try:
        new, old = js.parse(json.dumps(a)), js.parse(json.dumps(b))
    except InvalidSchemaError:
        return
    with contextlib.suppress(InvalidSchemaError):  # anything else fails the test
        assert isinstance(check(new, old), list)
        assert isinstance(check(old, new), list)
