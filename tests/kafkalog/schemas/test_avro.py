"""Avro schema text to our model: name resolution, validation with clear causes, and the three texts
(canonical as given, normalized, Parsing Canonical Form with its fingerprint, both checked against
fastavro's)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import fastavro.schema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog.schemas import avro
from kafkalog.schemas.errors import InvalidSchemaError, SchemaError
from kafkalog.schemas.model import MAX_SCHEMA_LENGTH, ParsedSchema, SchemaReference, SchemaType
from tests.kafkalog.schemas.refusals import quick, refused


def _text(value: Any) -> str:
    return json.dumps(value)


EVENT = {
    "type": "record",
    "name": "Event",
    "namespace": "demo",
    "doc": "an event",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "n", "type": ["null", "long"], "default": None},
        {"name": "next", "type": ["null", "Event"], "default": None},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"], "default": "A"}},
        {"name": "hash", "type": {"type": "fixed", "name": "other.Hash", "size": 16}},
        {"name": "tags", "type": {"type": "map", "values": {"type": "array", "items": "Kind"}}, "default": {}},
    ],
}


def test_a_record_parses_into_the_typed_model_with_names_resolved() -> None:
    schema = avro.parse(_text(EVENT))
    assert isinstance(schema, ParsedSchema)
    assert schema.schema_type is SchemaType.AVRO
    assert schema.name == "demo.Event"
    root = schema.root
    assert isinstance(root, avro.Record)
    assert root.doc == "an event"
    assert [f.name for f in root.fields] == ["id", "n", "next", "amount", "at", "kind", "hash", "tags"]
    nxt = root.fields[2].type
    assert isinstance(nxt, avro.Union)
    assert nxt.branches[1] is root  # a recursive reference is the same node
    amount = root.fields[3].type
    assert isinstance(amount, avro.Primitive)
    assert amount.logical == avro.LogicalType("decimal", 9, 2)
    at = root.fields[4].type
    assert isinstance(at, avro.Primitive)
    assert at.logical == avro.LogicalType("timestamp-micros")
    kind = root.fields[5].type
    assert isinstance(kind, avro.Enum)
    assert (kind.fullname, kind.default) == ("demo.Kind", "A")
    hashed = root.fields[6].type
    assert isinstance(hashed, avro.Fixed)
    assert (hashed.fullname, hashed.name, hashed.namespace) == ("other.Hash", "Hash", "other")
    tags = root.fields[7].type
    assert isinstance(tags, avro.Map)
    assert isinstance(tags.values, avro.Array)
    assert tags.values.items is kind
    assert root.fields[1].default is None
    assert root.fields[1].has_default
    assert not root.fields[0].has_default
    assert set(schema.named) == {"demo.Event", "demo.Kind", "other.Hash"}
    assert [n.fullname for n in avro.named_types(root)] == ["demo.Event", "demo.Kind", "other.Hash"]


def test_canonical_is_the_text_javas_avro_library_writes_and_normalized_qualifies_every_name() -> None:
    spaced = json.dumps(EVENT, indent=2)
    schema = avro.parse(spaced)
    expected = json.dumps(EVENT, separators=(",", ":"))  # in Java's order already, but for one name:
    expected = expected.replace('"name":"other.Hash"', '"name":"Hash","namespace":"other"')
    assert schema.canonical() == expected
    assert avro.parse(schema.canonical()) == schema
    # another key order of the same schema: the same text (so the registry gives it the same id)
    shuffled = {k: EVENT[k] for k in reversed(list(EVENT))}
    shuffled["fields"] = [{k: f[k] for k in reversed(list(f))} for f in EVENT["fields"]]
    assert avro.parse(_text(shuffled)).canonical() == schema.canonical()
    normal = schema.normalized()
    assert normal.canonical().startswith('{"type":"record","name":"demo.Event","doc":"an event","fields":[')
    assert '"type":["null","demo.Event"]' in normal.canonical()
    assert "namespace" not in normal.canonical()
    # the same schema written differently normalizes to the same text
    other = dict(EVENT, name="demo.Event")
    del other["namespace"]
    assert avro.parse(_text(other)).canonical() == schema.canonical()  # Java writes name and namespace apart
    assert avro.parse(_text(other)).normalized().canonical() == normal.canonical()


def test_parsing_canonical_form_and_fingerprint_match_fastavro() -> None:
    schema = avro.parse(_text(EVENT))
    expected = fastavro.schema.to_parsing_canonical_form(EVENT)
    assert schema.parsing_canonical_form() == expected
    little_endian = schema.fingerprint64().to_bytes(8, "little").hex()
    assert little_endian == fastavro.schema.fingerprint(expected, "CRC-64-AVRO")
    assert avro.fingerprint64(b"") == 0xC15D213AA4D7A795  # the empty fingerprint of the specification


def test_references_define_the_named_types_a_schema_uses() -> None:
    address = {"type": "record", "name": "Address", "namespace": "shop", "fields": [{"name": "city", "type": "string"}]}
    order = {"type": "record", "name": "Order", "namespace": "shop", "fields": [{"name": "to", "type": "Address"}]}
    declared = [SchemaReference("shop.Address", "address-value", 1)]
    schema = avro.parse(_text(order), {"shop.Address": _text(address)}, declared=declared)
    root = schema.root
    assert isinstance(root, avro.Record)
    assert isinstance(root.fields[0].type, avro.Record)
    assert root.fields[0].type.fullname == "shop.Address"
    assert schema.references == tuple(declared)
    with pytest.raises(InvalidSchemaError, match=r"unknown type name 'Address' at /fields/0/type"):
        avro.parse(_text(order))
    with pytest.raises(InvalidSchemaError, match=r"reference 'shop\.Address': not JSON"):
        avro.parse(_text(order), {"shop.Address": "{"})
    # a reference using another reference's type parses after it, in whatever order they are given
    customer = {
        "type": "record",
        "name": "Customer",
        "namespace": "shop",
        "fields": [{"name": "home", "type": "Address"}],
    }
    buyer = {"type": "record", "name": "Sale", "namespace": "shop", "fields": [{"name": "by", "type": "Customer"}]}
    given = {"shop.Customer": _text(customer), "shop.Address": _text(address)}
    sale = avro.parse(_text(buyer), given)
    assert set(sale.named) == {"shop.Address", "shop.Customer", "shop.Sale"}
    with pytest.raises(InvalidSchemaError, match=r"reference 'shop\.Customer': unknown type name 'Address'"):
        avro.parse(_text(buyer), {"shop.Customer": _text(customer)})


def test_a_name_is_resolved_in_the_enclosing_namespace_then_as_written() -> None:
    schema = {
        "type": "record",
        "name": "A",
        "namespace": "x",
        "fields": [
            {"name": "b", "type": {"type": "fixed", "name": "B", "size": 1}},
            {"name": "c", "type": {"type": "fixed", "name": "C", "namespace": "", "size": 1}},
            {"name": "b2", "type": "B"},
            {"name": "c2", "type": "C"},
            {"name": "b3", "type": "x.B"},
        ],
    }
    root = avro.parse(_text(schema)).root
    assert isinstance(root, avro.Record)
    names = [getattr(f.type, "fullname", None) for f in root.fields]
    assert names == ["x.B", "C", "x.B", "C", "x.B"]


@pytest.mark.parametrize(
    ("schema", "cause"),
    [
        ("{", "not JSON"),
        (
            {"type": "record", "name": "A", "fields": [{"name": "a", "type": "strin"}]},
            "unknown type name 'strin' at /fields/0/type",
        ),
        (
            {"type": "record", "name": "A", "fields": [{"name": "a", "type": "int"}, {"name": "a", "type": "long"}]},
            "duplicate field 'a' in 'A', at /fields/1",
        ),
        (
            {"type": "record", "name": "A", "fields": [{"name": "a", "type": "int", "default": "x"}]},
            "invalid default for field 'a' of 'A': \"x\" is not a int",
        ),
        (
            {"type": "record", "name": "A", "fields": [{"name": "a", "type": "int", "default": 2**31}]},
            "invalid default for field 'a'",
        ),
        (
            {"type": "record", "name": "A", "fields": [{"name": "a", "type": ["null", "int"], "default": "x"}]},
            "invalid default for field 'a'",
        ),
        ({"type": "record", "name": "1A", "fields": []}, "invalid name '1A'"),
        ({"type": "record", "name": "a.b-c.D", "fields": []}, "invalid name 'a.b-c.D' (at 'b-c')"),
        ({"type": "record", "name": "A", "fields": [{"name": "a b", "type": "int"}]}, "invalid field name 'a b'"),
        ({"type": "enum", "name": "E", "symbols": ["A", "A"]}, "duplicate symbol 'A' in enum 'E'"),
        (
            {"type": "enum", "name": "E", "symbols": ["A"], "default": "B"},
            "default 'B' of enum 'E' is not one of its symbols",
        ),
        ({"type": "fixed", "name": "F", "size": -1}, "invalid size -1"),
        (["int", "int"], "union holds int twice"),
        (["int", ["null"]], "a union may not contain a union, at /1"),
        ({"type": "record", "name": "int", "fields": []}, "redefines a primitive type"),
        (
            {
                "type": "record",
                "name": "A",
                "fields": [{"name": "a", "type": {"type": "record", "name": "A", "fields": []}}],
            },
            "type 'A' is defined twice",
        ),
        ({"type": "bytes", "logicalType": "decimal", "precision": 0}, "decimal precision must be a positive integer"),
        (
            {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 5},
            "decimal scale 5 is greater than its precision 4",
        ),
        (
            {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": -1},
            "decimal scale must be a non-negative",
        ),
        (
            {"type": "fixed", "name": "D", "size": 4, "logicalType": "decimal", "precision": 10},
            "fixed(4) cannot store 10 digits of precision (at most 9)",
        ),
        ({"type": "array"}, "array without items"),
        ({"type": "map"}, "map without values"),
        (42, "not a schema: 42"),
    ],
)
def test_invalid_schemas_are_refused_naming_the_cause(schema: Any, cause: str) -> None:
    text = schema if isinstance(schema, str) else _text(schema)
    with pytest.raises(InvalidSchemaError) as refused:
        avro.parse(text)
    assert cause in str(refused.value)
    assert isinstance(refused.value, SchemaError)


def test_a_logical_type_on_a_type_it_does_not_apply_to_is_ignored_but_kept_in_the_text() -> None:
    schema = avro.parse(_text({"type": "string", "logicalType": "date"}))
    assert isinstance(schema.root, avro.Primitive)
    assert schema.root.logical is None
    assert '"logicalType":"date"' in schema.canonical()
    fixed = avro.parse(_text({"type": "fixed", "name": "U", "size": 16, "logicalType": "uuid"})).root
    assert isinstance(fixed, avro.Fixed)
    assert fixed.logical == avro.LogicalType("uuid")


def test_defaults_of_every_type_are_checked() -> None:
    good = [
        ("boolean", True), ("float", 1), ("double", 1.5), ("bytes", "\u00ff"), ("string", "x"),
        ({"type": "array", "items": "int"}, [1, 2]), ({"type": "map", "values": "long"}, {"a": 1}),
        ({"type": "fixed", "name": "F", "size": 2}, "ab"), (["int", "null"], None), (["int", "null"], 3),
        # Avro's Java library (and so Confluent's registry) checks no more than that these are strings
        ({"type": "fixed", "name": "F", "size": 2}, "abc"), ({"type": "enum", "name": "E", "symbols": ["A"]}, "Z"),
        ({"type": "record", "name": "R", "fields": [{"name": "x", "type": "int"},
                                                    {"name": "y", "type": "int", "default": 1}]}, {"x": 1}),
    ]  # fmt: skip
    bad = [
        ("boolean", 1), ("double", "1"), ("null", 0), ("int", 1.0), ("long", True), ("string", 1),
        ({"type": "array", "items": "int"}, ["a"]), ({"type": "fixed", "name": "F", "size": 2}, 2),
        ({"type": "record", "name": "R", "fields": [{"name": "x", "type": "int"}]}, {}),
    ]  # fmt: skip
    for ftype, default in good:
        avro.parse(_text({"type": "record", "name": "T", "fields": [{"name": "f", "type": ftype, "default": default}]}))
    for ftype, default in bad:
        with pytest.raises(InvalidSchemaError, match="invalid default for field 'f'"):
            avro.parse(
                _text({"type": "record", "name": "T", "fields": [{"name": "f", "type": ftype, "default": default}]})
            )


def test_nesting_beyond_the_limit_is_refused_without_a_recursion_error() -> None:
    deep: Any = "int"
    for _ in range(avro.MAX_SCHEMA_DEPTH + 5):
        deep = {"type": "array", "items": deep}
    with pytest.raises(InvalidSchemaError, match="nested deeper than"):
        avro.parse(_text(deep))


_names = st.sampled_from(["a", "b", "c", "d"])


def named_by_path(schema: Any, path: str = "R") -> Any:
    """``schema`` with each record named after where it is (so no name is defined twice, and two
    schemas generated alike name their records alike)."""
    if isinstance(schema, list):
        return [named_by_path(s, f"{path}_{i}") for i, s in enumerate(schema)]
    if not isinstance(schema, dict):
        return schema
    if schema["type"] == "record":
        fields = [{**f, "type": named_by_path(f["type"], f"{path}_{f['name']}")} for f in schema["fields"]]
        return {**schema, "name": path, "fields": fields}
    if schema["type"] == "array":
        return {**schema, "items": named_by_path(schema["items"], f"{path}_items")}
    if schema["type"] == "map":
        return {**schema, "values": named_by_path(schema["values"], f"{path}_values")}
    return schema


def _schemas(depth: int = 0) -> st.SearchStrategy[Any]:
    leaf = st.sampled_from(sorted(avro.PRIMITIVES))
    if depth >= 2:
        return leaf
    inner = _schemas(depth + 1)
    return st.one_of(
        leaf,
        st.builds(lambda t: {"type": "array", "items": t}, inner),
        st.builds(lambda t: {"type": "map", "values": t}, inner),
        st.lists(leaf, min_size=1, max_size=3, unique=True),
        st.builds(
            lambda names, types: {
                "type": "record",
                "name": f"R{depth}",
                "fields": [{"name": n, "type": t} for n, t in zip(names, types, strict=False)],
            },
            st.lists(_names, min_size=0, max_size=3, unique=True),
            st.lists(inner, min_size=3, max_size=3),
        ),
    )


@settings(max_examples=150, deadline=None)
@given(_schemas())
def test_generated_schemas_agree_with_fastavro_on_the_canonical_form(schema: Any) -> None:
    schema = named_by_path(schema)
    ours = avro.parse(_text(schema))
    assert ours.parsing_canonical_form() == fastavro.schema.to_parsing_canonical_form(schema)
    assert avro.parse(ours.normalized().canonical()).parsing_canonical_form() == ours.parsing_canonical_form()


# --- hostile input: refused with InvalidSchemaError, quickly


@pytest.mark.parametrize(
    ("text", "cause"),
    [
        ('{"type":"record","name":"R","fields":[{"name":"a","type":"double","default":NaN}]}', "NaN is not a JSON"),
        ('{"type":"string","x":1e400}', "beyond the range of a double"),
        ('{"type":"record","name":"R","doc":"\\ud800","fields":[]}', "lone surrogate"),
        ('{"type":"fixed","name":"F","size":4294967296}', "invalid size"),
        ("/" * (MAX_SCHEMA_LENGTH + 1), "characters long: at most"),
    ],
)
def test_text_that_cannot_be_stored_as_json_or_is_beyond_the_bounds_is_refused(text: str, cause: str) -> None:
    refused(lambda: avro.parse(text), cause)


def test_a_default_is_judged_in_time_linear_in_its_size_not_exponential() -> None:
    nested: Any = 5
    for _ in range(40):
        nested = {"a": nested}
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "h", "type": {"type": "record", "name": "A", "fields": [{"name": "a", "type": ["null", "A", {
            "type": "record", "name": "B", "fields": [{"name": "a", "type": ["null", "A", "B"]}]}]}]}},
        {"name": "x", "type": "A", "default": nested},
    ]}  # fmt: skip
    refused(lambda: avro.parse(_text(schema)), "invalid default for field 'x'")


def test_many_enum_symbols_and_a_huge_fixed_decimal_parse_quickly() -> None:
    symbols = [f"S{i}" for i in range(50_000)]
    refused(
        lambda: avro.parse(_text({"type": "enum", "name": "E", "symbols": [*symbols, "S7"]})), "duplicate symbol 'S7'"
    )
    huge = {"type": "fixed", "name": "F", "size": 2**31 - 1, "logicalType": "decimal", "precision": 10**6}
    assert quick(lambda: avro.parse(_text(huge))).root.logical == avro.LogicalType("decimal", 10**6, 0)
    small = {"type": "fixed", "name": "F", "size": 4, "logicalType": "decimal", "precision": 10}
    refused(lambda: avro.parse(_text(small)), r"fixed\(4\) cannot store 10 digits of precision \(at most 9\)")


def _chain(n: int) -> list[Any]:
    """Records T0..T(n-1), each holding the one before by name: nested n deep though written flat."""
    defs: list[Any] = [{"type": "record", "name": "T0", "fields": [{"name": "x", "type": "string"}]}]
    defs += [{"type": "record", "name": f"T{i}", "fields": [{"name": "x", "type": f"T{i - 1}"}]} for i in range(1, n)]
    return defs


def test_a_chain_of_named_types_deeper_than_the_limit_is_refused() -> None:
    flat = {"type": "record", "name": "Root", "fields": [
        {"name": "defs", "type": ["null", *_chain(1000)], "default": None}, {"name": "main", "type": "T999"},
    ]}  # fmt: skip
    refused(lambda: avro.parse(_text(flat)), "nested deeper than 200, counting the named types it uses")
    main = _text({"type": "record", "name": "M", "fields": [{"name": "m", "type": "T999"}]})
    refused(lambda: avro.parse(main, {"defs": _text(_chain(1000))}), "nested deeper than 200")
    within = _text({"type": "record", "name": "M", "fields": [{"name": "m", "type": "T150"}]})
    schema = quick(lambda: avro.parse(within, {"defs": _text(_chain(151))}))
    assert schema.parsing_canonical_form().count('"name":"T') == 151


def test_normalized_writes_the_references_types_by_name_so_that_it_parses_again_with_them() -> None:
    ref = '{"type":"record","name":"com.x.Addr","fields":[{"name":"s","type":"string"}]}'
    schema = avro.parse('{"type":"record","name":"com.x.P","fields":[{"name":"a","type":"Addr"}]}', {"addr": ref})
    normal = schema.normalized().canonical()
    assert normal == '{"type":"record","name":"com.x.P","fields":[{"name":"a","type":"com.x.Addr"}]}'
    assert avro.parse(normal, {"addr": ref}).normalized().canonical() == normal


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(["record", "enum", "fixed", "array", "map", "int", "null", "R", "a.R", "decimal", "\ud800"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["type", "name", "namespace", "fields", "symbols", "items", "values", "size", "default",
                         "aliases", "logicalType", "precision", "scale", "order", "doc"]), inner, max_size=6),
    max_leaves=25,
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(_json)
def test_hostile_json_is_refused_with_invalid_schema_error_only(value: Any) -> None:
    with contextlib.suppress(InvalidSchemaError):  # anything else fails the test
        schema = avro.parse(json.dumps(value))
        schema.normalized()
        schema.parsing_canonical_form()


_JAVA = [json.loads(line) for line in (Path(__file__).parent / "avro_java_canonical.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("pair", _JAVA, ids=[str(i) for i in range(len(_JAVA))])
def test_canonical_is_what_javas_schema_to_string_writes(pair: dict[str, str]) -> None:
    """The goldens: generated schemas (named types in and out of namespaces, docs, aliases,
    properties, logical types, defaults of every sort and float notation) and what Avro 1.12.1's
    ``Schema.toString()`` wrote for each (Java 17, whose doubles here are the shortest digits)."""
    assert avro.parse(pair["schema"]).canonical() == pair["java"]
