"""Messages declared as Kafka's JSON definitions declare them: once, each field with its versions.

A ``Field`` names the versions it exists in (``since``..``until``), from which version it may be
null, its default, and (for a flexible version) its tag if it is a tagged field. ``schema_for``
resolves a field list for one version into the codec's schemas (kafkalog.protocol.types): a flexible
version (KIP-482) gets the compact forms of strings, bytes, records and arrays, structures that end
in a tagged-field section, and its tagged fields; every other version the classic forms. So each
API is written once, in the order of Kafka's definition, instead of once per version, and a field a
later version adds is one line.

A declaration uses the plain types: ``STRING`` (its nullable and compact forms are chosen here),
``BYTES``, ``RECORDS``, the fixed-width ints, ``BOOLEAN``, ``UUID``; ``Array(t)`` for an array of a
plain type; a list of Fields for an array of structures.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kafkalog.protocol.types import (
    BYTES,
    COMPACT_BYTES,
    COMPACT_NULLABLE_BYTES,
    COMPACT_NULLABLE_STRING,
    COMPACT_RECORDS,
    COMPACT_STRING,
    NULLABLE_STRING,
    RECORDS,
    REQUIRED,
    STRING,
    Array,
    CompactArray,
    FlexibleSchema,
    Schema,
    TaggedField,
    Type,
)


@dataclass(frozen=True)
class Field:
    """One field of a request or response structure, over the versions it exists in."""

    name: str
    kind: Type | tuple[Field, ...]
    since: int = 0
    until: int | None = None
    nullable: int | None = None
    """The first version in which the field may be null (None: never)."""
    default: Any = REQUIRED
    """Written when the dict to encode leaves the field out (REQUIRED: it must be there)."""
    tag: int | None = None
    """A tagged field of flexible versions: sent only when present, skipped by readers that do not
    know it."""

    def present_in(self, version: int) -> bool:
        return self.since <= version and (self.until is None or version <= self.until)


def field(
    name: str,
    kind: Type | Sequence[Field],
    since: int = 0,
    until: int | None = None,
    *,
    nullable: int | None = None,
    default: Any = REQUIRED,
    tag: int | None = None,
) -> Field:
    """A Field; ``kind`` as a list of Fields declares an array of structures."""
    return Field(name, kind if isinstance(kind, Type) else tuple(kind), since, until, nullable, default, tag)


def schema_for(fields: Sequence[Field], version: int, *, flexible: bool) -> Schema:
    """The schema of ``fields`` at ``version``: a FlexibleSchema when ``flexible``."""
    plain: list[tuple[str, Type, Any]] = []
    tagged: list[TaggedField] = []
    for item in fields:
        if not item.present_in(version):
            continue
        nullable = item.nullable is not None and version >= item.nullable
        kind = _resolve(item.kind, version, flexible=flexible, nullable=nullable)
        if item.tag is None:
            plain.append((item.name, kind, item.default))
        elif flexible:
            tagged.append(TaggedField(item.tag, item.name, kind))
    if flexible:
        return FlexibleSchema(*plain, tagged=tagged)
    return Schema(*plain)


def _resolve(kind: Type | tuple[Field, ...], version: int, *, flexible: bool, nullable: bool) -> Type:
    if isinstance(kind, tuple):
        element: Type = schema_for(kind, version, flexible=flexible)
        return CompactArray(element, nullable=nullable) if flexible else Array(element, nullable=nullable)
    if isinstance(kind, Array):
        element = _resolve(kind.element, version, flexible=flexible, nullable=False)
        return CompactArray(element, nullable=nullable) if flexible else Array(element, nullable=nullable)
    if kind is STRING:
        if flexible:
            return COMPACT_NULLABLE_STRING if nullable else COMPACT_STRING
        return NULLABLE_STRING if nullable else STRING
    if kind is BYTES:
        if flexible:
            return COMPACT_NULLABLE_BYTES if nullable else COMPACT_BYTES
        return BYTES
    if kind is RECORDS:
        return COMPACT_RECORDS if flexible else RECORDS
    return kind
