"""Avro schema resolution compatibility: can a reader schema read what a writer schema wrote?

The rules are the specification's schema resolution, checked as Avro's Java ``SchemaCompatibility``
checks them (which Confluent's registry runs), and each incompatibility is worded as Confluent words
it. The check walks reader and writer together:
- the same primitive type, or a promotion: int to long, float or double; long to float or double;
  float to double; string to bytes and bytes to string;
- named types (record, enum, fixed) match by unqualified name, or by a reader alias naming the
  writer's full name (NAME_MISMATCH); a fixed's size must be equal (FIXED_SIZE_MISMATCH); a reader
  enum must hold every writer symbol unless it has a default (MISSING_ENUM_SYMBOLS);
- a record field of the reader is found in the writer by name or one of its aliases and its types
  resolve; a reader field the writer lacks needs a default (READER_FIELD_MISSING_DEFAULT_VALUE); a
  writer field the reader lacks is skipped;
- a writer union: each branch must be readable; a reader union: some branch must read the writer
  (MISSING_UNION_BRANCH); anything else is TYPE_MISMATCH.
Each pair of nodes is checked once (a pair met again gives the first result again, locations and
all, and a pair met again while it is being checked, in a recursive schema, counts as compatible);
a union's branches are tried from the root, as Java does, so what such a try finds first keeps root
locations. A writer union read by a reader of another type reports each branch at its index
(``/fields/0/type/1``), as Avro 1.12 does (Confluent's 8.x registries); Avro 1.11 (7.x) reported the
path of the root there (``/``). Apart from that path, the findings and their order were checked
equal to Confluent 7.5.3's checker on 608 generated pairs at BACKWARD, FORWARD and FULL.

A reader field whose name and aliases find several writer fields makes Java's checker throw, and
Confluent's registry answers with the exception's message as the one finding
(``Unexpected exception during compatibility check: ...``); so does this check. After
:data:`MAX_PAIRS` pairs of nodes it gives up with :class:`InvalidSchemaError` (two unions of
thousands of records each would otherwise cost millions of comparisons), as it does when the
schemas nest too deeply for it.

At most :data:`MAX_FINDINGS` findings are kept for a pair of nodes (and so reported): records
shared along many paths (a diamond of records, each holding the next twice) have exponentially many
paths to one incompatibility, and Java's checker, listing them all, answers with megabytes.

Messages carry ``%s`` placeholders where Confluent writes which schema is meant: :func:`incompatibilities`
fills them in (the reader is "new" and the writer "old" unless told otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from kafkalog.schemas.avro import (
    Array,
    AvroSchema,
    AvroType,
    Enum,
    Field,
    Fixed,
    Map,
    Primitive,
    Record,
    Union,
    java_text,
)
from kafkalog.schemas.errors import InvalidSchemaError

MAX_FINDINGS: Final = 100
MAX_PAIRS: Final = 50_000  # pairs of nodes one check compares at most
UNEXPECTED: Final = "Unexpected exception during compatibility check: "

_PROMOTIONS: Final = {
    "long": frozenset({"int"}),
    "float": frozenset({"int", "long"}),
    "double": frozenset({"int", "long", "float"}),
    "bytes": frozenset({"string"}),
    "string": frozenset({"bytes"}),
}


@dataclass(frozen=True)
class Incompatibility:
    """One finding: Java's incompatibility type, where (a JSON pointer into the reader), and its
    message (``additionalInfo``)."""

    kind: str
    location: str
    message: str

    def describe(self, reader: str = "new", writer: str = "old") -> str:
        """Confluent's wording, ``reader``/``writer`` naming the two schemas."""
        path, info = self.location, self.message
        if self.kind == "UNEXPECTED":  # the check gave up: the message is the whole finding
            return UNEXPECTED + info
        if self.kind == "FIXED_SIZE_MISMATCH":
            text = (
                f"The size of FIXED type field at path '{path}' in the {reader} schema"
                f" does not match with the {writer} schema"
            )
        elif self.kind == "TYPE_MISMATCH":
            text = f"The type (path '{path}') of a field in the {reader} schema does not match with the {writer} schema"
        elif self.kind == "NAME_MISMATCH":
            text = f"The name of the schema has changed (path '{path}')"
        elif self.kind == "MISSING_ENUM_SYMBOLS":
            text = f"The {reader} schema is missing enum symbols '{info}' at path '{path}' in the {writer} schema"
        elif self.kind == "MISSING_UNION_BRANCH":
            text = f"The {reader} schema is missing a type inside a union field at path '{path}' in the {writer} schema"
        else:  # READER_FIELD_MISSING_DEFAULT_VALUE
            text = (
                f"The field '{info}' at path '{path}' in the {reader} schema has no default value"
                f" and is missing in the {writer} schema"
            )
        return f"{{errorType:'{self.kind}', description:'{text}', additionalInfo:'{info}'}}"


def check(reader: AvroSchema, writer: AvroSchema) -> list[Incompatibility]:
    """Every reason ``reader`` cannot read data written with ``writer`` (empty: it can), the first
    :data:`MAX_FINDINGS` of them."""
    try:
        return _Checker().compatibility(reader.root, writer.root, [])
    except _Abandoned as e:
        return [Incompatibility("UNEXPECTED", "/", str(e))]
    except RecursionError:  # parse bounds the depth of each schema; this is the last line, not the rule
        raise InvalidSchemaError("the schemas are nested too deeply to be compared") from None


def incompatibilities(
    reader: AvroSchema, writer: AvroSchema, *, reader_is: str = "new", writer_is: str = "old"
) -> list[str]:
    """:func:`check`, worded as Confluent's registry words it."""
    return [found.describe(reader_is, writer_is) for found in check(reader, writer)]


_IN_PROGRESS: Final[list[Incompatibility]] = []


def _java_type(node: AvroType) -> str:
    return node.type.upper()


def _pointer(location: list[str]) -> str:
    return "/" + "/".join(p.replace("~", "~0").replace("/", "~1") for p in location)


class _Abandoned(Exception):
    """The check gives up; the message says why (as Java's exception would)."""


class _Checker:
    def __init__(self) -> None:
        self.memo: dict[tuple[int, int], list[Incompatibility]] = {}
        self.keep: list[AvroType] = []  # holds the memo's nodes alive, so their ids stay theirs

    def compatibility(self, reader: AvroType, writer: AvroType, location: list[str]) -> list[Incompatibility]:
        key = (id(reader), id(writer))
        found = self.memo.get(key)
        if found is _IN_PROGRESS:
            return []  # a recursive schema: compatible unless shown otherwise elsewhere
        if found is not None:
            return found
        if len(self.memo) >= MAX_PAIRS:
            raise InvalidSchemaError(f"the schemas are too large to compare (more than {MAX_PAIRS} pairs of types)")
        self.memo[key] = _IN_PROGRESS
        self.keep += (reader, writer)
        result = self.calculate(reader, writer, location)[:MAX_FINDINGS]
        self.memo[key] = result
        return result

    def calculate(self, reader: AvroType, writer: AvroType, location: list[str]) -> list[Incompatibility]:
        if reader.type == writer.type:
            if isinstance(reader, Array) and isinstance(writer, Array):
                return self.compatibility(reader.items, writer.items, [*location, "items"])
            if isinstance(reader, Map) and isinstance(writer, Map):
                return self.compatibility(reader.values, writer.values, [*location, "values"])
            if isinstance(reader, Fixed) and isinstance(writer, Fixed):
                found = _names(reader, writer, location)
                if reader.size != writer.size:
                    message = f"expected: {writer.size}, found: {reader.size}"
                    found.append(Incompatibility("FIXED_SIZE_MISMATCH", _pointer([*location, "size"]), message))
                return found
            if isinstance(reader, Enum) and isinstance(writer, Enum):
                return _names(reader, writer, location) + _symbols(reader, writer, location)
            if isinstance(reader, Record) and isinstance(writer, Record):
                return _names(reader, writer, location) + self.fields(reader, writer, location)
            if isinstance(reader, Union) and isinstance(writer, Union):
                found = []
                for i, branch in enumerate(writer.branches):
                    if self.compatibility(reader, branch, []):  # Java starts this one at the root
                        message = f"reader union lacking writer type: {_java_type(branch)}"
                        found.append(Incompatibility("MISSING_UNION_BRANCH", _pointer([*location, str(i)]), message))
                return found
            return []
        if isinstance(writer, Union):
            found = []
            for i, branch in enumerate(writer.branches):
                found += self.compatibility(reader, branch, [*location, str(i)])
            return found
        if isinstance(reader, Primitive) and writer.type in _PROMOTIONS.get(reader.type, ()):
            return []
        if isinstance(reader, Union):
            for branch in reader.branches:
                if not self.compatibility(branch, writer, []):  # as Java: from the root, result unused
                    return []
            message = f"reader union lacking writer type: {_java_type(writer)}"
            return [Incompatibility("MISSING_UNION_BRANCH", _pointer(location), message)]
        message = f"reader type: {_java_type(reader)} not compatible with writer type: {_java_type(writer)}"
        return [Incompatibility("TYPE_MISMATCH", _pointer(location), message)]

    def fields(self, reader: Record, writer: Record, location: list[str]) -> list[Incompatibility]:
        found: list[Incompatibility] = []
        for i, field in enumerate(reader.fields):
            at = [*location, "fields", str(i)]
            source = _writer_field(field, i, writer)
            if source is not None:
                found += self.compatibility(field.type, source.type, [*at, "type"])
            elif field.has_default:
                continue
            elif isinstance(field.type, Enum) and field.type.default is not None:
                # Java's quirk, kept: an enum field with an enum default is checked against the
                # writer record itself (and so mismatches its type)
                found += self.compatibility(field.type, writer, [*at, "type"])
            else:
                found.append(Incompatibility("READER_FIELD_MISSING_DEFAULT_VALUE", _pointer(at), field.name))
        return found


def _writer_field(field: Field, position: int, writer: Record) -> Field | None:
    """The writer's field the reader's ``field`` reads: the one its name or an alias names; several
    abandon the check, as Java's ``lookupWriterField`` throws."""
    found = [f for f in (writer.field_named(n) for n in (field.name, *field.aliases)) if f is not None]
    if len(found) > 1:
        raise _Abandoned(
            f"Reader record field {field.name} type:{field.type.type.upper()} pos:{position} matches multiple"
            f" fields in writer record schema {java_text(writer)}"
        )
    return found[0] if found else None


def _names(reader: Record | Enum | Fixed, writer: Record | Enum | Fixed, location: list[str]) -> list[Incompatibility]:
    if reader.name == writer.name or writer.fullname in reader.aliases:
        return []
    return [Incompatibility("NAME_MISMATCH", _pointer([*location, "name"]), f"expected: {writer.fullname}")]


def _symbols(reader: Enum, writer: Enum, location: list[str]) -> list[Incompatibility]:
    missing = sorted(set(writer.symbols) - set(reader.symbols))
    if not missing or (reader.default is not None and reader.default in reader.symbols):
        return []
    return [Incompatibility("MISSING_ENUM_SYMBOLS", _pointer([*location, "symbols"]), "[" + ", ".join(missing) + "]")]
