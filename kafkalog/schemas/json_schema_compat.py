"""JSON Schema compatibility: Confluent's registry's rules (its diff, the strict policy).

The writer's schema (the "original") is compared with the reader's (the "update"), node by node, and
every difference gets one of Confluent's types; the strict policy's compatible ones (a constraint
relaxed, a property removed from an open content model, an optional property added to a closed
one, an enum extended, a sum type extended...) are dropped, the rest reported. Each schema node is
read as Confluent's JSON Schema library reads it: ``true``/``{}`` accept anything, ``false``
nothing; ``type`` names the kind (``integer`` is a number that requires an integer, a list of types
is an ``anyOf`` of them); a node without ``type`` takes the kind its keywords imply; ``enum``,
``const``, ``not`` and each of ``allOf``/``anyOf``/``oneOf`` are nodes of their own, and a node with
several of these is their ``allOf``; a ``$ref`` is the node it names.

The content-model trap: an object schema without ``additionalProperties`` (or with ``true``) is
*open*. Adding an optional property to an open model is incompatible (old data may hold anything
under that name), removing one is compatible; with ``"additionalProperties": false`` (closed) it is
the other way round.

Each pair of schema nodes is compared once (a pair met again, along another path, gives the first
result again under its own path), and at most :data:`MAX_FINDINGS` incompatible findings are kept
for a pair: schemas that share definitions along many paths would otherwise cost exponential time
and answer with megabytes. After :data:`MAX_COMPARISONS` comparisons the check gives up with
:class:`~kafkalog.schemas.errors.InvalidSchemaError` (two ``anyOf`` of thousands of schemas each
would cost millions), as it does when ``$ref`` chains nest too deeply for it. A keyword whose
value is not of its type (one the schema's draft does not know, so its meta-schema did not check
it) is read as absent. ``patternProperties`` keys are matched with RE2 (linear time;
:func:`kafkalog.schemas.json_schema.parse` refused any it cannot compile).

Each finding is worded ``{errorType:"<TYPE>", description:"<text>'}`` (sic: Confluent closes the
description with a single quote), "new" and "old" filled in by the roles given.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, Final

from kafkalog.schemas.errors import InvalidSchemaError
from kafkalog.schemas.json_schema import JsonSchema, pattern_regex

MAX_FINDINGS: Final = 100
MAX_COMPARISONS: Final = 20_000  # comparisons of two schema nodes one check makes at most

COMPATIBLE_STRICT: Final = frozenset(
    [
        "ID_CHANGED",
        "DESCRIPTION_CHANGED",
        "TITLE_CHANGED",
        "DEFAULT_CHANGED",
        "SCHEMA_REMOVED",
        "TYPE_EXTENDED",
        "MAX_LENGTH_INCREASED",
        "MAX_LENGTH_REMOVED",
        "MIN_LENGTH_DECREASED",
        "MIN_LENGTH_REMOVED",
        "PATTERN_REMOVED",
        "MAXIMUM_INCREASED",
        "MAXIMUM_REMOVED",
        "MINIMUM_DECREASED",
        "MINIMUM_REMOVED",
        "EXCLUSIVE_MAXIMUM_INCREASED",
        "EXCLUSIVE_MAXIMUM_REMOVED",
        "EXCLUSIVE_MINIMUM_DECREASED",
        "EXCLUSIVE_MINIMUM_REMOVED",
        "MULTIPLE_OF_REDUCED",
        "MULTIPLE_OF_REMOVED",
        "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED",
        "REQUIRED_ATTRIBUTE_REMOVED",
        "DEPENDENCY_ARRAY_NARROWED",
        "DEPENDENCY_ARRAY_REMOVED",
        "DEPENDENCY_SCHEMA_REMOVED",
        "MAX_PROPERTIES_INCREASED",
        "MAX_PROPERTIES_REMOVED",
        "MIN_PROPERTIES_DECREASED",
        "MIN_PROPERTIES_REMOVED",
        "ADDITIONAL_PROPERTIES_ADDED",
        "ADDITIONAL_PROPERTIES_EXTENDED",
        "UNEVALUATED_PROPERTIES_ADDED",
        "UNEVALUATED_PROPERTIES_EXTENDED",
        "PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL",
        "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL",
        "OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL",
        "PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL",
        "PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL",
        "PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
        "PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
        "MAX_ITEMS_INCREASED",
        "MAX_ITEMS_REMOVED",
        "MIN_ITEMS_DECREASED",
        "MIN_ITEMS_REMOVED",
        "MAX_CONTAINS_INCREASED",
        "MAX_CONTAINS_REMOVED",
        "MIN_CONTAINS_DECREASED",
        "MIN_CONTAINS_REMOVED",
        "UNIQUE_ITEMS_REMOVED",
        "ADDITIONAL_ITEMS_ADDED",
        "ADDITIONAL_ITEMS_EXTENDED",
        "UNEVALUATED_ITEMS_ADDED",
        "UNEVALUATED_ITEMS_EXTENDED",
        "ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL",
        "ITEM_ADDED_TO_CLOSED_CONTENT_MODEL",
        "ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL",
        "ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL",
        "ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
        "ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
        "ENUM_ARRAY_EXTENDED",
        "COMBINED_TYPE_EXTENDED",
        "PRODUCT_TYPE_NARROWED",
        "SUM_TYPE_EXTENDED",
        "NOT_TYPE_NARROWED",
    ]
)

_KEYWORD_ADDED_OR_REMOVED: Final = frozenset(
    [
        "MAXIMUM_ADDED",
        "MINIMUM_ADDED",
        "EXCLUSIVE_MAXIMUM_ADDED",
        "EXCLUSIVE_MINIMUM_ADDED",
        "MULTIPLE_OF_ADDED",
        "MAX_LENGTH_ADDED",
        "MIN_LENGTH_ADDED",
        "PATTERN_ADDED",
        "REQUIRED_ATTRIBUTE_ADDED",
        "MAX_PROPERTIES_ADDED",
        "MIN_PROPERTIES_ADDED",
        "DEPENDENCY_ARRAY_ADDED",
        "DEPENDENCY_SCHEMA_ADDED",
        "MAX_ITEMS_ADDED",
        "MIN_ITEMS_ADDED",
        "MAX_CONTAINS_ADDED",
        "MIN_CONTAINS_ADDED",
        "UNIQUE_ITEMS_ADDED",
        "ADDITIONAL_ITEMS_REMOVED",
        "ADDITIONAL_PROPERTIES_REMOVED",
        "UNEVALUATED_PROPERTIES_REMOVED",
        "UNEVALUATED_ITEMS_REMOVED",
    ]
)
_VALUE_INCREASED: Final = frozenset(
    [
        "MIN_LENGTH_INCREASED",
        "MINIMUM_INCREASED",
        "EXCLUSIVE_MINIMUM_INCREASED",
        "MIN_PROPERTIES_INCREASED",
        "MULTIPLE_OF_EXPANDED",
        "MIN_ITEMS_INCREASED",
        "MIN_CONTAINS_INCREASED",
    ]
)
_VALUE_DECREASED: Final = frozenset(
    [
        "MAX_LENGTH_DECREASED",
        "MAXIMUM_DECREASED",
        "MAX_ITEMS_DECREASED",
        "MAX_CONTAINS_DECREASED",
        "EXCLUSIVE_MAXIMUM_DECREASED",
        "MAX_PROPERTIES_DECREASED",
    ]
)
_TYPE_NARROWED: Final = frozenset(
    [
        "ADDITIONAL_ITEMS_NARROWED",
        "ENUM_ARRAY_NARROWED",
        "SUM_TYPE_NARROWED",
        "ADDITIONAL_PROPERTIES_NARROWED",
        "UNEVALUATED_PROPERTIES_NARROWED",
        "UNEVALUATED_ITEMS_NARROWED",
    ]
)
_VALUE_CHANGED: Final = frozenset({"PATTERN_CHANGED", "MULTIPLE_OF_CHANGED", "DEPENDENCY_ARRAY_CHANGED"})
_TYPE_CHANGED: Final = frozenset(
    {"TYPE_CHANGED", "TYPE_NARROWED", "COMBINED_TYPE_CHANGED", "COMBINED_TYPE_SUBSCHEMAS_CHANGED", "ENUM_ARRAY_CHANGED"}
)
_TYPE_EXTENDED: Final = frozenset(
    {"DEPENDENCY_ARRAY_EXTENDED", "PRODUCT_TYPE_EXTENDED", "SUM_TYPE_EXTENDED", "NOT_TYPE_EXTENDED"}
)
_ADDED_TO_OPEN: Final = frozenset(
    {
        "REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL",
        "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL",
        "OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL",
        "ITEM_ADDED_TO_OPEN_CONTENT_MODEL",
    }
)


@dataclass(frozen=True)
class Difference:
    kind: str
    path: str

    @property
    def compatible(self) -> bool:
        return self.kind in COMPATIBLE_STRICT

    def describe(self, reader: str = "new", writer: str = "old") -> str:
        return f'{{errorType:"{self.kind}", description:"{_description(self.kind, self.path, reader, writer)}\'}}'


def _description(kind: str, path: str, a: str, b: str) -> str:
    if kind in _KEYWORD_ADDED_OR_REMOVED:
        return f"The keyword at path '{path}' in the {a} schema is not present in the {b} schema"
    if kind in _VALUE_INCREASED:
        return f"The value at path '{path}' in the {a} schema is more than its value in the {b} schema"
    if kind in _VALUE_DECREASED:
        return f"The value at path '{path}' in the {a} schema is less than its value in the {b} schema"
    if kind in _VALUE_CHANGED:
        return f"The value at path '{path}' is different between the {a} and {b} schema"
    if kind in _TYPE_NARROWED:
        return f"An array or combined type at path '{path}' has fewer elements in the {a} schema than the {b} schema"
    if kind in _TYPE_EXTENDED:
        return f"An array or combined type at path '{path}' has more elements in the {a} schema than the {b} schema"
    if kind in _TYPE_CHANGED:
        return f"A type at path '{path}' is different between the {a} schema and the {b} schema"
    if kind in _ADDED_TO_OPEN:
        return (
            f"The {a} schema has an open content model and has a property or item at path '{path}'"
            f" which is missing in the {b} schema"
        )
    if kind == "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL":
        return (
            f"The {a} schema has an unopen content model and has a required property at path '{path}'"
            f" which is missing in the {b} schema"
        )
    if kind in ("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", "ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL"):
        return (
            f"The {a} has a closed content model and is missing a property or item present at path '{path}'"
            f" in the {b} schema"
        )
    if kind in ("PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
                "ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"):  # fmt: skip
        return (
            f"A property or item is missing in the {a} schema but present at path '{path}' in the {b} schema"
            " and is not covered by its partially open content model"
        )
    if kind in ("PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
                "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"):  # fmt: skip
        return (
            f"The {a} schema has a property or item at path '{path}' which is missing in the {b} schema"
            " and is not covered by its partially open content model"
        )
    return ""


def check(reader: JsonSchema, writer: JsonSchema) -> list[Difference]:
    """The incompatible differences between ``writer`` (the original) and ``reader`` (the update)."""
    context = _Context(_Reader(writer), _Reader(reader), [], set(), _Memo())
    try:
        context.compare(_Ref(writer.root, writer.root), _Ref(reader.root, reader.root))
    except RecursionError:  # chains of $refs nest as deep as they are long: the last line, not the rule
        raise InvalidSchemaError("the schemas are nested too deeply (through their $refs) to be compared") from None
    return [d for d in context.found if not d.compatible][:MAX_FINDINGS]


def incompatibilities(
    reader: JsonSchema, writer: JsonSchema, *, reader_is: str = "new", writer_is: str = "old"
) -> list[str]:
    """:func:`check`, worded as Confluent's registry words it."""
    return [d.describe(reader_is, writer_is) for d in check(reader, writer)]


# --- schema nodes, as Confluent's library reads them -----------------------------------------------

_OBJECT_KEYWORDS: Final = ("properties", "required", "additionalProperties", "patternProperties",
                           "minProperties", "maxProperties", "dependencies", "dependentRequired",
                           "dependentSchemas", "unevaluatedProperties")  # fmt: skip
_ARRAY_KEYWORDS: Final = ("items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems",
                          "contains", "unevaluatedItems")  # fmt: skip
_STRING_KEYWORDS: Final = ("minLength", "maxLength", "pattern")
_NUMBER_KEYWORDS: Final = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_COMBINERS: Final = ("allOf", "anyOf", "oneOf")


@dataclass(frozen=True)
class _Ref:
    """A schema value and the document it sits in (where its ``$ref``s resolve)."""

    value: Any
    document: Any


@dataclass
class _Node:
    kind: str  # empty, false, string, number, boolean, null, object, array, enum, const, not, combined
    raw: dict[str, Any]
    document: Any
    criterion: str = ""
    subs: list[_Ref] = field(default_factory=list)
    identity: int = 0  # the JSON object it came from, for the recursion guard

    def get(self, key: str) -> Any:
        return self.raw.get(key)

    def ref(self, value: Any) -> _Ref:
        return _Ref(value, self.document)


class _Reader:
    """Turns schema values of one schema into nodes, following ``$ref``s."""

    def __init__(self, schema: JsonSchema) -> None:
        self.schema = schema

    def node(self, ref: _Ref, depth: int = 0) -> _Node:
        value, document = ref.value, ref.document
        while isinstance(value, dict) and isinstance(value.get("$ref"), str) and depth < 100:
            value, document = self.schema.resolve(value["$ref"], document)
            depth += 1
        identity = id(value)
        if isinstance(value, dict):
            value = _sane(value)
        if value is True or value == {}:
            return _Node("empty", {}, document, identity=identity)
        if value is False:
            return _Node("false", {}, document, identity=identity)
        if not isinstance(value, dict):
            return _Node("empty", {}, document, identity=identity)
        parts: list[_Node] = []
        base = _base(value, document)
        if base is not None:
            parts.append(base)
        if "enum" in value:
            parts.append(_Node("enum", {"enum": value["enum"]}, document))
        if "const" in value:
            parts.append(_Node("const", {"const": value["const"]}, document))
        if "not" in value:
            parts.append(_Node("not", {"not": value["not"]}, document, subs=[_Ref(value["not"], document)]))
        for combiner in _COMBINERS:
            if isinstance(value.get(combiner), list):
                subs = [_Ref(s, document) for s in value[combiner]]
                parts.append(_Node("combined", value, document, criterion=combiner, subs=subs))
        if not parts:
            node = _Node("empty", value, document)
        elif len(parts) == 1:
            node = parts[0]
        else:
            node = _Node("combined", value, document, criterion="allOf", subs=[_Part(p) for p in parts])
        node.identity = identity
        return node


#: what each keyword's value must be for the diff to read it
_NUMBER: Final = ("minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                  "multipleOf", "minProperties", "maxProperties", "minItems", "maxItems", "minContains",
                  "maxContains")  # fmt: skip
_OBJECT: Final = ("properties", "patternProperties", "dependencies", "dependentRequired", "dependentSchemas")
_SCHEMA: Final = ("additionalProperties", "unevaluatedProperties", "additionalItems", "unevaluatedItems",
                  "not", "contains")  # fmt: skip
_LIST: Final = ("prefixItems", "enum", "allOf", "anyOf", "oneOf")


def _sane(value: dict[str, Any]) -> dict[str, Any]:
    """``value`` without the keywords whose value is not of the keyword's type."""
    out = dict(value)
    for key, item in value.items():
        if key in _NUMBER:
            keep = isinstance(item, int | float)  # a boolean among them (draft 4's exclusive bounds) is read as one
        elif key in _OBJECT:
            keep = isinstance(item, dict)
        elif key in _SCHEMA:
            keep = isinstance(item, dict | bool)
        elif key in _LIST:
            keep = isinstance(item, list)
        elif key == "items":
            keep = isinstance(item, dict | bool | list)
        elif key == "required":
            keep = isinstance(item, list)
            if keep:
                out[key] = [name for name in item if isinstance(name, str)]
        elif key == "pattern":
            keep = isinstance(item, str)
        else:
            continue
        if not keep:
            del out[key]
    for key in ("dependencies", "dependentRequired"):
        if key in out:  # a list of property names (others are schemas, or nothing)
            out[key] = {
                name: [n for n in item if isinstance(n, str)] if isinstance(item, list) else item
                for name, item in out[key].items()
                if isinstance(item, list | dict | bool)
            }
    return out


class _Part(_Ref):
    """A node already read (one part of a schema object that holds several)."""

    def __init__(self, node: _Node) -> None:
        super().__init__(node, node.document)


def _base(value: dict[str, Any], document: Any) -> _Node | None:
    kind = value.get("type")
    if isinstance(kind, list):
        if len(kind) == 1:
            kind = kind[0]
        else:
            subs = [_Part(_typed(value, k, document)) for k in kind]
            return _Node("combined", value, document, criterion="anyOf", subs=list(subs))
    if isinstance(kind, str):
        return _typed(value, kind, document)
    for keywords, implied in ((_OBJECT_KEYWORDS, "object"), (_ARRAY_KEYWORDS, "array"),
                              (_STRING_KEYWORDS, "string"), (_NUMBER_KEYWORDS, "number")):  # fmt: skip
        if any(k in value for k in keywords):
            return _typed(value, implied, document)
    return None


def _typed(value: dict[str, Any], kind: str, document: Any) -> _Node:
    if kind == "integer":
        return _Node("number", {**value, "__integer": True}, document)
    return _Node(kind, value, document)


# --- the diff -----------------------------------------------------------------------------------


@dataclass
class _Memo:
    """What one check's comparisons share: each pair's findings, as (kind, path below the pair), by
    (direction, old node, new node); and how many comparisons it made."""

    found: dict[tuple[int, int, int], list[tuple[str, str]]] = field(default_factory=dict)
    comparisons: int = 0


class _Context:
    def __init__(
        self,
        original: _Reader,
        update: _Reader,
        path: list[str],
        in_progress: set[tuple[int, int]],
        memo: _Memo,
    ) -> None:
        self.original = original
        self.update = update
        self.path = path
        self.in_progress = in_progress
        self.memo = memo
        self.found: list[Difference] = []

    def sub(self) -> _Context:
        return _Context(self.original, self.update, list(self.path), self.in_progress, self.memo)

    @property
    def compatible(self) -> bool:
        return all(d.compatible for d in self.found)

    def add(self, kind: str, *attribute: str) -> None:
        self.found.append(Difference(kind, "#/" + "/".join([*self.path, *attribute])))

    def at(self, *parts: str) -> _Scope:
        return _Scope(self.path, parts)

    def compare(self, original: _Ref | None, update: _Ref | None) -> None:
        if original is None and update is None:
            return
        if original is None:
            self.add("SCHEMA_ADDED")
            return
        if update is None:
            self.add("SCHEMA_REMOVED")
            return
        old = original.value if isinstance(original, _Part) else self.original.node(original)
        new = update.value if isinstance(update, _Part) else self.update.node(update)
        key = (old.identity, new.identity)
        if key in self.in_progress and old.identity and new.identity:
            return  # a recursive schema: compatible unless shown otherwise elsewhere
        self.memo.comparisons += 1
        if self.memo.comparisons > MAX_COMPARISONS:
            raise InvalidSchemaError(f"the schemas are too large to compare (more than {MAX_COMPARISONS} comparisons)")
        memo_key = (id(self.original), *key) if old.identity and new.identity else None
        base = "/".join(self.path)
        if memo_key is not None and memo_key in self.memo.found:
            self.found += [Difference(kind, "#/" + (base + below if base else below.lstrip("/")))
                           for kind, below in self.memo.found[memo_key]]  # fmt: skip
            return
        start = len(self.found)
        self.in_progress.add(key)
        try:
            self.types(old, new)
        finally:
            self.in_progress.discard(key)
        added = self.found[start:]
        if len(added) > MAX_FINDINGS:  # keep the first of each sort: what is judged, and what is told
            bad = [d for d in added if not d.compatible][:MAX_FINDINGS]
            good = [d for d in added if d.compatible][:MAX_FINDINGS]
            kept = {id(d) for d in (*bad, *good)}
            self.found[start:] = added = [d for d in added if id(d) in kept]
        if memo_key is not None:
            prefix = len("#/" + base)
            self.memo.found[memo_key] = [(d.kind, ("" if base else "/") + d.path[prefix:]) for d in added]

    def types(self, old: _Node, new: _Node) -> None:
        if old.kind != "combined" and new.kind == "combined":
            if len(new.subs) == 1:
                sub = self.sub()
                sub.compare(_Part(old), new.subs[0])
                if sub.compatible:
                    self.found += sub.found
                    return
            elif new.criterion in ("anyOf", "oneOf"):
                for candidate in new.subs:
                    sub = self.sub()
                    sub.compare(_Part(old), candidate)
                    if sub.compatible:
                        self.found += sub.found
                        self.add("SUM_TYPE_EXTENDED")
                        return
        elif old.kind == "combined" and new.kind != "combined":
            if len(old.subs) == 1:
                sub = self.sub()
                sub.compare(old.subs[0], _Part(new))
                if sub.compatible:
                    self.found += sub.found
                    return
            elif old.criterion == "allOf":
                for candidate in old.subs:
                    sub = self.sub()
                    sub.compare(candidate, _Part(new))
                    if sub.compatible:
                        self.found += sub.found
                        self.add("PRODUCT_TYPE_NARROWED")
                        return
        if old.kind != new.kind:
            if old.kind == "false" or new.kind == "empty":
                return
            if old.get("connect.type") == "bytes" and new.get("connect.type") == "bytes":
                return  # Kafka Connect's decimals: either way of writing bytes is one type
            self.add("TYPE_CHANGED")
            return
        for attribute, kind in (("$id", "ID_CHANGED"), ("title", "TITLE_CHANGED"),
                                ("description", "DESCRIPTION_CHANGED"), ("default", "DEFAULT_CHANGED")):  # fmt: skip
            if old.get(attribute) != new.get(attribute):
                self.add(kind)
        compare = _BY_KIND.get(old.kind)
        if compare is not None:
            compare(self, old, new)


class _Scope:
    def __init__(self, path: list[str], parts: Sequence[str]) -> None:
        self.path, self.parts = path, parts

    def __enter__(self) -> None:
        self.path.extend(self.parts)

    def __exit__(self, *_: object) -> None:
        del self.path[len(self.path) - len(self.parts) :]


def _bounds(ctx: _Context, old: _Node, new: _Node, keyword: str, prefix: str, less_is: str = "DECREASED") -> None:
    """An optional numeric keyword: added, removed, increased or decreased."""
    a, b = old.get(keyword), new.get(keyword)
    if isinstance(a, bool) or isinstance(b, bool) or a == b:
        return
    if a is None:
        ctx.add(f"{prefix}_ADDED", keyword)
    elif b is None:
        ctx.add(f"{prefix}_REMOVED", keyword)
    elif a < b:
        ctx.add(f"{prefix}_INCREASED", keyword)
    elif a > b:
        ctx.add(f"{prefix}_{less_is}", keyword)


def _string(ctx: _Context, old: _Node, new: _Node) -> None:
    _bounds(ctx, old, new, "maxLength", "MAX_LENGTH")
    _bounds(ctx, old, new, "minLength", "MIN_LENGTH")
    a, b = old.get("pattern"), new.get("pattern")
    if a is None and b is not None:
        ctx.add("PATTERN_ADDED", "pattern")
    elif a is not None and b is None:
        ctx.add("PATTERN_REMOVED", "pattern")
    elif a is not None and a != b:
        ctx.add("PATTERN_CHANGED", "pattern")


def _number(ctx: _Context, old: _Node, new: _Node) -> None:
    _bounds(ctx, old, new, "maximum", "MAXIMUM")
    _bounds(ctx, old, new, "minimum", "MINIMUM")
    _bounds(ctx, old, new, "exclusiveMaximum", "EXCLUSIVE_MAXIMUM")
    _bounds(ctx, old, new, "exclusiveMinimum", "EXCLUSIVE_MINIMUM")
    a, b = _decimal(old.get("multipleOf")), _decimal(new.get("multipleOf"))
    if a != b:
        if a is None:
            ctx.add("MULTIPLE_OF_ADDED", "multipleOf")
        elif b is None:
            ctx.add("MULTIPLE_OF_REMOVED", "multipleOf")
        elif a != 0 and b % a == 0:
            ctx.add("MULTIPLE_OF_EXPANDED", "multipleOf")
        elif b != 0 and a % b == 0:
            ctx.add("MULTIPLE_OF_REDUCED", "multipleOf")
        else:
            ctx.add("MULTIPLE_OF_CHANGED", "multipleOf")
    if bool(old.get("__integer")) != bool(new.get("__integer")):
        ctx.add("TYPE_EXTENDED" if old.get("__integer") else "TYPE_NARROWED")


def _decimal(value: Any) -> Decimal | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return Decimal(str(value))
    except InvalidOperation:
        return None


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _enum(ctx: _Context, old: _Node, new: _Node) -> None:
    a = {_key(v) for v in old.get("enum") or []}
    b = {_key(v) for v in new.get("enum") or []}
    if a != b:
        ctx.add("ENUM_ARRAY_EXTENDED" if b >= a else "ENUM_ARRAY_NARROWED" if a >= b else "ENUM_ARRAY_CHANGED", "enum")


def _const(ctx: _Context, old: _Node, new: _Node) -> None:
    if _key(old.get("const")) != _key(new.get("const")):
        ctx.add("ENUM_ARRAY_CHANGED", "const")


def _not(ctx: _Context, old: _Node, new: _Node) -> None:
    with ctx.at("not"):
        sub = ctx.sub()
        # the negated schemas compare the other way round: the update's against the original's
        reversed_ctx = _Context(ctx.update, ctx.original, sub.path, ctx.in_progress, ctx.memo)
        reversed_ctx.compare(new.subs[0], old.subs[0])
        ctx.add("NOT_TYPE_NARROWED" if reversed_ctx.compatible else "NOT_TYPE_EXTENDED")


def _combined(ctx: _Context, old: _Node, new: _Node) -> None:
    if old.criterion != new.criterion:
        if (
            new.criterion == "anyOf"
            or (len(old.subs) == 1 and len(new.subs) == 1)
            or (len(old.subs) == 1 and new.criterion == "oneOf")
            or (len(new.subs) == 1 and old.criterion == "allOf")
        ):
            ctx.add("COMBINED_TYPE_EXTENDED")
        else:
            ctx.add("COMBINED_TYPE_CHANGED")
            return
    olds, news = _distinct(old.subs), _distinct(new.subs)
    if len(olds) < len(news):
        ctx.add("PRODUCT_TYPE_EXTENDED" if new.criterion == "allOf" else "SUM_TYPE_EXTENDED")
    elif len(olds) > len(news):
        ctx.add("SUM_TYPE_NARROWED" if old.criterion in ("anyOf", "oneOf") else "PRODUCT_TYPE_NARROWED")
    edges: dict[tuple[int, int], list[Difference]] = {}
    for i, a in enumerate(olds):
        with ctx.at(f"{old.criterion}/{i}"):
            for j, b in enumerate(news):
                sub = ctx.sub()
                sub.compare(a, b)
                if sub.compatible:
                    edges[(i, j)] = sub.found
    matching = _maximum_matching(len(olds), len(news), edges)
    for pair in sorted(matching):
        ctx.found += edges[pair]
    if len(matching) < min(len(olds), len(news)):
        ctx.add("COMBINED_TYPE_SUBSCHEMAS_CHANGED")


def _distinct(refs: Sequence[_Ref]) -> list[_Ref]:
    seen: set[str] = set()
    out = []
    for ref in refs:
        key = repr(id(ref.value)) if isinstance(ref, _Part) else _key(ref.value)
        if key not in seen:
            seen.add(key)
            out.append(ref)
    return out


def _maximum_matching(left: int, right: int, edges: dict[tuple[int, int], Any]) -> set[tuple[int, int]]:
    """A maximum matching of the bipartite graph (Kuhn's augmenting paths; the sides are small)."""
    match_of_right: dict[int, int] = {}

    def augment(i: int, seen: set[int]) -> bool:
        for j in range(right):
            if (i, j) in edges and j not in seen:
                seen.add(j)
                if j not in match_of_right or augment(match_of_right[j], seen):
                    match_of_right[j] = i
                    return True
        return False

    for i in range(left):
        augment(i, set())
    return {(i, j) for j, i in match_of_right.items()}


def _schema_or_none(node: _Node, keyword: str) -> Any:
    value = node.get(keyword)
    return value if isinstance(value, dict) else None


def _permits(node: _Node, keyword: str) -> bool:
    return node.get(keyword) is not False


def _uneval(node: _Node, keyword: str) -> _Node | None:
    if keyword not in node.raw:
        return None
    value = node.raw[keyword]
    if value is False:
        return _Node("false", {}, node.document)
    if value is True or value == {}:
        return _Node("empty", {}, node.document)
    return _Node("schema", {"schema": value}, node.document)


def _object_open(node: _Node) -> bool:
    if not _permits(node, "additionalProperties") or _schema_or_none(node, "additionalProperties") is not None:
        return False
    if node.get("patternProperties"):
        return False
    uneval = _uneval(node, "unevaluatedProperties")
    return uneval is None or uneval.kind == "empty"


def _partial_property(node: _Node, name: str) -> _Ref | None:
    for pattern, schema in (node.get("patternProperties") or {}).items():
        try:
            if pattern_regex(pattern).search(name):
                return node.ref(schema)
        except InvalidSchemaError:
            continue  # refused by parse; not met here
    additional = _schema_or_none(node, "additionalProperties")
    if additional is not None:
        return node.ref(additional)
    if _permits(node, "additionalProperties"):
        uneval = _uneval(node, "unevaluatedProperties")
        if uneval is not None and uneval.kind == "schema":
            return node.ref(uneval.raw["schema"])
    return None


def _has_default(schema: Any) -> bool:
    return isinstance(schema, dict) and "default" in schema


def _object(ctx: _Context, old: _Node, new: _Node) -> None:
    old_props: dict[str, Any] = old.get("properties") or {}
    new_props: dict[str, Any] = new.get("properties") or {}
    old_required = set(old.get("required") or [])
    new_required = set(new.get("required") or [])
    with ctx.at("required"):
        for name in old_props:
            if name in new_props:
                if name in old_required and name not in new_required:
                    ctx.add("REQUIRED_ATTRIBUTE_REMOVED", name)
                elif name not in old_required and name in new_required:
                    kind = (
                        "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED"
                        if _has_default(new_props[name])
                        else "REQUIRED_ATTRIBUTE_ADDED"
                    )
                    ctx.add(kind, name)
    with ctx.at("properties"):
        for name in [*old_props, *(n for n in new_props if n not in old_props)]:
            with ctx.at(name):
                _property(ctx, old, new, name, old_props.get(name), new_props.get(name), new_required)
    with ctx.at("dependencies"):
        _dependencies(ctx, old, new)
    with ctx.at("additionalProperties"):
        if _permits(old, "additionalProperties") != _permits(new, "additionalProperties"):
            ctx.add(
                "ADDITIONAL_PROPERTIES_ADDED"
                if _permits(new, "additionalProperties")
                else "ADDITIONAL_PROPERTIES_REMOVED"
            )
        else:
            a, b = _schema_or_none(old, "additionalProperties"), _schema_or_none(new, "additionalProperties")
            if a is None and b is not None:
                ctx.add("ADDITIONAL_PROPERTIES_NARROWED")
            elif b is None and a is not None:
                ctx.add("ADDITIONAL_PROPERTIES_EXTENDED")
            elif a is not None and b is not None:
                ctx.compare(old.ref(a), new.ref(b))
    _unevaluated(ctx, old, new, "unevaluatedProperties", "UNEVALUATED_PROPERTIES")
    _bounds(ctx, old, new, "maxProperties", "MAX_PROPERTIES")
    _bounds(ctx, old, new, "minProperties", "MIN_PROPERTIES")


def _property(
    ctx: _Context, old: _Node, new: _Node, name: str, before: Any, after: Any, new_required: set[str]
) -> None:
    if after is None:
        if _object_open(new):
            ctx.add("PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL")
            return
        partial = _partial_property(new, name)
        if partial is not None:
            sub = ctx.sub()
            sub.compare(old.ref(before), partial)
            ctx.found += sub.found
            ctx.add(
                "PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
                if sub.compatible
                else "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
            )
        elif before is False:
            ctx.add("PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL")
        else:
            ctx.add("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL")
    elif before is None:
        if _object_open(old):
            if after is True or after == {}:
                ctx.add("PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL")
            elif name in new_required:
                ctx.add(
                    "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL"
                    if _has_default(after)
                    else "REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"
                )
            else:
                ctx.add("OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL")
            return
        partial = _partial_property(old, name)
        if partial is not None:
            sub = ctx.sub()
            sub.compare(partial, new.ref(after))
            ctx.found += sub.found
            ctx.add(
                "PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
                if sub.compatible
                else "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
            )
        if name in new_required:
            ctx.add(
                "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL"
                if _has_default(after)
                else "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"
            )
        else:
            ctx.add("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL")
    else:
        ctx.compare(old.ref(before), new.ref(after))


def _dependencies(ctx: _Context, old: _Node, new: _Node) -> None:
    def split(node: _Node) -> tuple[dict[str, set[str]], dict[str, Any]]:
        arrays: dict[str, set[str]] = {}
        schemas: dict[str, Any] = {}
        for key, value in {**(node.get("dependencies") or {}), **(node.get("dependentRequired") or {})}.items():
            if isinstance(value, list):
                arrays[key] = set(value)
            else:
                schemas[key] = value
        schemas.update(node.get("dependentSchemas") or {})
        return arrays, schemas

    old_arrays, old_schemas = split(old)
    new_arrays, new_schemas = split(new)
    for key in [*old_arrays, *(k for k in new_arrays if k not in old_arrays)]:
        a, b = old_arrays.get(key), new_arrays.get(key)
        with ctx.at(key):
            if b is None:
                ctx.add("DEPENDENCY_ARRAY_REMOVED")
            elif a is None:
                ctx.add("DEPENDENCY_ARRAY_ADDED")
            elif a != b:
                ctx.add(
                    "DEPENDENCY_ARRAY_EXTENDED"
                    if b >= a
                    else "DEPENDENCY_ARRAY_NARROWED"
                    if a >= b
                    else "DEPENDENCY_ARRAY_CHANGED"
                )
    for key in [*old_schemas, *(k for k in new_schemas if k not in old_schemas)]:
        with ctx.at(key):
            if key not in new_schemas:
                ctx.add("DEPENDENCY_SCHEMA_REMOVED")
            elif key not in old_schemas:
                ctx.add("DEPENDENCY_SCHEMA_ADDED")
            else:
                ctx.compare(old.ref(old_schemas[key]), new.ref(new_schemas[key]))


def _unevaluated(ctx: _Context, old: _Node, new: _Node, keyword: str, prefix: str) -> None:
    a, b = _uneval(old, keyword), _uneval(new, keyword)
    if a is None and b is None:
        return
    with ctx.at(keyword):
        if a is None:
            ctx.add(f"{prefix}_REMOVED" if b is not None and b.kind == "false" else f"{prefix}_NARROWED")
        elif b is None:
            ctx.add(f"{prefix}_ADDED" if a.kind == "false" else f"{prefix}_EXTENDED")
        elif a.kind == "false" and b.kind != "false":
            ctx.add(f"{prefix}_ADDED")
        elif a.kind != "false" and b.kind == "false":
            ctx.add(f"{prefix}_REMOVED")
        elif a.kind == "empty" and b.kind != "empty":
            ctx.add(f"{prefix}_NARROWED")
        elif a.kind != "empty" and b.kind == "empty":
            ctx.add(f"{prefix}_EXTENDED")
        else:
            ctx.compare(old.ref(a.raw.get("schema")), new.ref(b.raw.get("schema")))


def _items(node: _Node, draft: str) -> tuple[Any, list[Any], Any, bool]:
    """An array node's schema of all items (or None), its tuple of item schemas, the schema of the
    items after the tuple (or None) and whether such items are permitted."""
    items, prefix = node.get("items"), node.get("prefixItems")
    if draft == "2020-12" and isinstance(items, bool) and not isinstance(prefix, list):
        return None, [], None, items  # 2020-12: a boolean items says whether there may be any
    if isinstance(prefix, list):  # 2020-12: prefixItems, then items for the rest
        rest = items if "items" in node.raw else node.get("additionalItems")
        return None, prefix, rest if isinstance(rest, dict) else None, rest is not False
    if isinstance(items, list):
        rest = node.get("additionalItems")
        return None, items, rest if isinstance(rest, dict) else None, rest is not False
    rest = node.get("additionalItems")  # read whether or not items is a tuple, as Confluent's library does
    return items, [], rest if isinstance(rest, dict) else None, rest is not False


def _array(ctx: _Context, old: _Node, new: _Node) -> None:
    old_all, old_tuple, old_rest, old_permits = _items(old, ctx.original.schema.draft)
    new_all, new_tuple, new_rest, new_permits = _items(new, ctx.update.schema.draft)
    with ctx.at("items"):
        ctx.compare(None if old_all is None else old.ref(old_all), None if new_all is None else new.ref(new_all))
    old_open = old_permits and old_rest is None and _open_items(old)
    new_open = new_permits and new_rest is None and _open_items(new)
    for index in range(max(len(old_tuple), len(new_tuple))):
        with ctx.at(f"items/{index}"):
            if index < len(old_tuple) and index < len(new_tuple):
                ctx.compare(old.ref(old_tuple[index]), new.ref(new_tuple[index]))
            elif index < len(old_tuple):
                _item_removed(ctx, old, new, old_tuple[index], new_open, _partial_items(new, new_rest))
            else:
                _item_added(ctx, old, new, new_tuple[index], old_open, _partial_items(old, old_rest))
    with ctx.at("additionalItems"):
        if old_permits != new_permits:
            ctx.add("ADDITIONAL_ITEMS_REMOVED" if old_permits else "ADDITIONAL_ITEMS_ADDED")
        elif old_rest is None and new_rest is not None:
            ctx.add("ADDITIONAL_ITEMS_NARROWED")
        elif new_rest is None and old_rest is not None:
            ctx.add("ADDITIONAL_ITEMS_EXTENDED")
        elif old_rest is not None and new_rest is not None:
            ctx.compare(old.ref(old_rest), new.ref(new_rest))
    _unevaluated(ctx, old, new, "unevaluatedItems", "UNEVALUATED_ITEMS")
    _bounds(ctx, old, new, "maxItems", "MAX_ITEMS")
    _bounds(ctx, old, new, "minItems", "MIN_ITEMS")
    if bool(old.get("uniqueItems")) != bool(new.get("uniqueItems")):
        ctx.add("UNIQUE_ITEMS_REMOVED" if old.get("uniqueItems") else "UNIQUE_ITEMS_ADDED", "uniqueItems")
    _bounds(ctx, old, new, "maxContains", "MAX_CONTAINS")
    _bounds(ctx, old, new, "minContains", "MIN_CONTAINS")


def _partial_items(node: _Node, rest: Any) -> Any:
    """The schema that items past the tuple must match (a partially open content model): the
    additional items' schema, else (additional items not said) the unevaluated items' schema."""
    if rest is not None:
        return rest
    if node.get("additionalItems") is None:
        uneval = _uneval(node, "unevaluatedItems")
        if uneval is not None and uneval.kind == "schema":
            return uneval.raw["schema"]
    return None


def _open_items(node: _Node) -> bool:
    uneval = _uneval(node, "unevaluatedItems")
    return uneval is None or uneval.kind == "empty"


def _item_removed(ctx: _Context, old: _Node, new: _Node, before: Any, new_open: bool, new_rest: Any) -> None:
    if new_open:
        ctx.add("ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL")
    elif new_rest is not None:
        sub = ctx.sub()
        sub.compare(old.ref(before), new.ref(new_rest))
        ctx.found += sub.found
        ctx.add(
            "ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
            if sub.compatible
            else "ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
        )
    elif before is False:
        ctx.add("ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL")
    else:
        ctx.add("ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL")


def _item_added(ctx: _Context, old: _Node, new: _Node, after: Any, old_open: bool, old_rest: Any) -> None:
    if old_open:
        empty = after is True or after == {}
        ctx.add("ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL" if empty else "ITEM_ADDED_TO_OPEN_CONTENT_MODEL")
    elif old_rest is not None:
        sub = ctx.sub()
        sub.compare(old.ref(old_rest), new.ref(after))
        ctx.found += sub.found
        ctx.add(
            "ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
            if sub.compatible
            else "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
        )
    else:
        ctx.add("ITEM_ADDED_TO_CLOSED_CONTENT_MODEL")


_BY_KIND: Final[dict[str, Callable[[_Context, _Node, _Node], None]]] = {
    "string": _string,
    "number": _number,
    "enum": _enum,
    "const": _const,
    "not": _not,
    "combined": _combined,
    "object": _object,
    "array": _array,
}
