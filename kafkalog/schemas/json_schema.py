"""JSON Schemas: JSON text checked against its draft's meta-schema, references resolved by name.

:func:`parse` reads the text (a JSON object or boolean), picks the draft its ``$schema`` names (draft
4, 6, 7, 2019-09 or 2020-12; draft 7 when it names none, as Confluent's registry does), and checks
the schema against that draft's meta-schema with :mod:`jsonschema`; a failure is an
:class:`InvalidSchemaError` naming the keyword and where. Every ``$ref`` must resolve: within the
schema (``#/definitions/...``, ``#/$defs/...``), or to one of the references, each another JSON
Schema named as the ``$ref`` names it (``address.json``, ``address.json#/definitions/City``); a
``$ref`` to anything else (a remote URL) is refused, as nothing is fetched. What a ``$ref`` names
is checked against the meta-schema too (it may sit where the meta-schema looks at nothing, under an
unknown keyword), and its own ``$ref``s must resolve. The keys of ``patternProperties`` are
compiled with RE2, whose matching time is linear (a backtracking engine, given ``^(a+)+$``, takes
exponential time on the property names a compatibility check matches against it): a pattern RE2
cannot compile (a backreference, a lookaround) is refused. NaN, infinities and lone surrogates,
which cannot be stored as JSON again, are refused, as is input past the bounds of
:func:`kafkalog.schemas.model.check_input`.

:meth:`JsonSchema.canonical` is the compact JSON of the schema as given (key order kept), what the
registry stores and returns; :meth:`JsonSchema.normalized` sorts the keys.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import unquote

import jsonschema
import jsonschema.exceptions
import jsonschema.validators
import re2

from kafkalog.schemas.errors import InvalidSchemaError
from kafkalog.schemas.model import SchemaReference, SchemaType, check_input, check_unicode, load_json

MAX_SCHEMA_DEPTH: Final = 200

_DRAFTS: Final[Mapping[str, str]] = {
    "http://json-schema.org/draft-04/schema": "draft-04",
    "http://json-schema.org/draft-06/schema": "draft-06",
    "http://json-schema.org/draft-07/schema": "draft-07",
    "https://json-schema.org/draft/2019-09/schema": "2019-09",
    "https://json-schema.org/draft/2020-12/schema": "2020-12",
}
_VALIDATORS: Final[Mapping[str, Any]] = {
    "draft-04": jsonschema.Draft4Validator,
    "draft-06": jsonschema.Draft6Validator,
    "draft-07": jsonschema.Draft7Validator,
    "2019-09": jsonschema.Draft201909Validator,
    "2020-12": jsonschema.Draft202012Validator,
}


@dataclass(frozen=True, eq=False)
class JsonSchema:
    """A parsed JSON Schema: ``root`` (the JSON, an object or a boolean), its ``draft``, and the
    documents of its references by name. Implements :class:`kafkalog.schemas.model.ParsedSchema`."""

    root: Any
    draft: str
    documents: Mapping[str, Any] = field(repr=False)
    text: str = field(repr=False)
    references: Sequence[SchemaReference] = ()
    schema_type: SchemaType = SchemaType.JSON

    @property
    def name(self) -> str | None:
        title = self.root.get("title") if isinstance(self.root, dict) else None
        return title if isinstance(title, str) else None

    def canonical(self) -> str:
        return self.text

    def normalized(self) -> JsonSchema:
        text = json.dumps(self.root, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
        return JsonSchema(self.root, self.draft, self.documents, text, self.references)

    def resolve(self, ref: str, document: Any) -> tuple[Any, Any]:
        """The schema a ``$ref`` met in ``document`` names, and the document holding it (for the
        ``$ref``s inside it); ``LookupError`` naming it when it does not resolve."""
        name, _, fragment = ref.partition("#")
        if name:
            target = self.documents.get(name)
            if target is None:
                target = self.documents.get(name.rsplit("/", 1)[-1])
            if target is None and isinstance(self.root, dict) and self.root.get("$id") == name:
                target = self.root
            if target is None:
                raise LookupError(f"$ref {ref!r} names no reference of the schema")
            document = target
        return _pointer(document, fragment, ref), document

    def __eq__(self, other: object) -> bool:
        return isinstance(other, JsonSchema) and (self.text, tuple(self.references)) == (
            other.text,
            tuple(other.references),
        )

    def __hash__(self) -> int:
        return hash((self.text, tuple(self.references)))


def _pointer(document: Any, fragment: str, ref: str) -> Any:
    if fragment in ("", "/"):
        return document
    if not fragment.startswith("/"):
        raise LookupError(f"$ref {ref!r}: only JSON pointers are resolved, not anchors")
    node = document
    for part in fragment[1:].split("/"):
        key = unquote(part).replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            raise LookupError(f"$ref {ref!r} does not resolve (no {key!r})")
    return node


def parse(
    text: str,
    references: Mapping[str, str] | None = None,
    *,
    declared: Sequence[SchemaReference] = (),
) -> JsonSchema:
    """The JSON Schema ``text``, its ``$ref``s to other schemas found in ``references`` (name ->
    schema text). Raises :class:`InvalidSchemaError` naming the first cause."""
    check_input(text, references)
    documents: dict[str, Any] = {}
    for name, ref_text in (references or {}).items():
        try:
            documents[name] = _check(_load(ref_text))[0]
        except InvalidSchemaError as e:
            raise InvalidSchemaError(f"reference {name!r}: {e}") from None
    root, draft = _check(_load(text))
    schema = JsonSchema(
        root, draft, documents, json.dumps(root, separators=(",", ":"), ensure_ascii=False), tuple(declared)
    )
    checked: set[int] = set()  # the schemas the meta-schema checked where they stand
    for document in (root, *documents.values()):
        checked |= _checked_in_place(document)
    for document in (root, *documents.values()):
        _check_refs(schema, document, draft, checked)
    return schema


#: keywords whose schemas every draft's meta-schema checks (a map of names to schemas, one schema,
#: or a list of them)
_CHECKED_MAPS: Final = ("properties", "patternProperties", "definitions")
_CHECKED_ONE: Final = ("additionalProperties", "additionalItems", "items", "not")
_CHECKED_LISTS: Final = ("allOf", "anyOf", "oneOf", "items")


def _checked_in_place(document: Any) -> set[int]:
    """The ids of the schema objects in ``document`` that its meta-schema checked where they stand
    (a ``$ref`` to one of them needs no check of its own)."""
    out: set[int] = set()
    stack = [document]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict) or id(node) in out:
            continue
        out.add(id(node))
        for key in _CHECKED_MAPS:
            if isinstance(node.get(key), dict):
                stack.extend(node[key].values())
        stack.extend(node.get(key) for key in _CHECKED_ONE)
        for key in _CHECKED_LISTS:
            if isinstance(node.get(key), list):
                stack.extend(node[key])
    return out


def _check_refs(schema: JsonSchema, document: Any, draft: str, checked: set[int]) -> None:
    """Every ``$ref`` in ``document`` resolves, and so do those of what it names, each target passing
    the meta-schema (unless it did where it stands, in ``checked``); every ``patternProperties``
    key compiles with RE2."""
    pending = [(document, document, "#")]
    seen: set[int] = set()
    while pending:
        value, holder, at = pending.pop()  # holder: the document where value's $refs resolve
        if id(value) in seen:
            continue
        seen.add(id(value))
        for ref, where in _refs(value, at):
            try:
                target, target_holder = schema.resolve(ref, holder)
            except LookupError as e:
                raise InvalidSchemaError(f"{e}, at {where}") from None
            if id(target) not in seen and id(target) not in checked:
                try:
                    _VALIDATORS[draft].check_schema(target)
                except jsonschema.exceptions.SchemaError as e:
                    raise InvalidSchemaError(
                        f"$ref {ref!r} at {where} names an invalid {draft} JSON Schema: {e.message}"
                    ) from None
                pending.append((target, target_holder, f"{where} -> {ref}"))
        for pattern, where in _patterns(value, at):
            pattern_regex(pattern, where)


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a refusal is an answer, not a line on the process's stderr


def pattern_regex(pattern: str, where: str = "#") -> Any:
    """``pattern`` compiled with RE2 (linear-time matching); :class:`InvalidSchemaError` if RE2 cannot."""
    try:
        return re2.compile(pattern, _RE2_OPTIONS)
    except re2.error as e:
        reason = e.args[0].decode(errors="replace") if e.args and isinstance(e.args[0], bytes) else str(e)
        raise InvalidSchemaError(
            f"patternProperties key {pattern[:100]!r} at {where} is not a regular expression RE2 accepts"
            f" ({reason}): backreferences and lookarounds are not supported"
        ) from None


def _load(text: str) -> Any:
    value = load_json(text)
    check_unicode(json.dumps(value, ensure_ascii=False), "schema")  # a JSON escape may give a lone surrogate
    if not isinstance(value, dict | bool):
        raise InvalidSchemaError(f"a JSON Schema is an object or a boolean, not {type(value).__name__}")
    return value


def _check(schema: Any) -> tuple[Any, str]:
    """``schema`` and its draft, once it passes that draft's meta-schema."""
    declared = schema.get("$schema") if isinstance(schema, dict) else None
    if declared is None:
        draft = "draft-07"
    elif isinstance(declared, str) and declared.rstrip("#") in _DRAFTS:
        draft = _DRAFTS[declared.rstrip("#")]
    else:
        raise InvalidSchemaError(f"unknown $schema {declared!r}: expected draft 4, 6, 7, 2019-09 or 2020-12")
    _depth(schema, 0)
    try:
        _VALIDATORS[draft].check_schema(schema)
    except jsonschema.exceptions.SchemaError as e:
        where = "/".join(str(p) for p in e.path) or "/"
        raise InvalidSchemaError(f"invalid {draft} JSON Schema: {e.message} (at {where})") from None
    return schema, draft


def _depth(value: Any, depth: int) -> None:
    if depth > MAX_SCHEMA_DEPTH:
        raise InvalidSchemaError(f"schema nested deeper than {MAX_SCHEMA_DEPTH}")
    if isinstance(value, dict):
        for item in value.values():
            _depth(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _depth(item, depth + 1)


#: keywords whose value maps names (of properties, of definitions) to schemas: a key there is a
#: name, never a keyword, so ``{"properties": {"enum": {...}}}`` holds a schema under "enum"
_NAMED_SCHEMAS: Final = frozenset(
    {"properties", "patternProperties", "definitions", "$defs", "dependentSchemas", "dependencies"}
)
#: keywords whose value is data, not a schema (a ``$ref`` there is a value like any other)
_DATA: Final = frozenset({"enum", "const", "default", "examples"})


def _refs(value: Any, where: str) -> Iterator[tuple[str, str]]:
    """Every ``$ref`` (a string) in the schema ``value`` and where it is."""
    for node, at in _schemas(value, where):
        ref = node.get("$ref")
        if isinstance(ref, str):
            yield ref, at


def _patterns(value: Any, where: str) -> Iterator[tuple[str, str]]:
    """Every ``patternProperties`` key in the schema ``value`` and where it is."""
    for node, at in _schemas(value, where):
        patterns = node.get("patternProperties")
        if isinstance(patterns, dict):
            yield from ((pattern, f"{at}/patternProperties") for pattern in patterns)


def _schemas(value: Any, where: str) -> Iterator[tuple[dict[str, Any], str]]:
    """Every schema object in ``value`` (itself included) and where it is, data left out (a stack
    of its own: nesting is bounded by :data:`MAX_SCHEMA_DEPTH`, but no recursion is needed), in
    the document's order (the first cause is the first met)."""
    stack: list[tuple[Any, str, bool]] = [(value, where, False)]
    while stack:
        node, at, names = stack.pop()
        if names:  # a map of names to schemas
            if isinstance(node, dict):
                stack.extend(reversed([(item, f"{at}/{key}", False) for key, item in node.items()]))
            continue
        if isinstance(node, list):
            stack.extend(reversed([(item, f"{at}/{i}", False) for i, item in enumerate(node)]))
        elif isinstance(node, dict):
            yield node, at
            stack.extend(
                reversed(
                    [(item, f"{at}/{key}", key in _NAMED_SCHEMAS) for key, item in node.items() if key not in _DATA]
                )
            )
