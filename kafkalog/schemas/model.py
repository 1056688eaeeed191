"""What every schema format shares: its type, its references, and the parsed-schema protocol.

A :class:`ParsedSchema` is a schema the registry can store and compare. ``canonical()`` is the text
the registry stores and returns: the same schema (as given) always gives the same text, so it is
also what identifies a schema within its type and references (two registrations of it get one id).
Normalisation, which makes differently written but equivalent schemas equal, is a separate,
explicit step (``normalized()``), as Confluent's registry does it only when asked (``normalize``).

A schema's text is untrusted input: :func:`check_input` bounds what a parser accepts (one text's
length, the number of references, their total length) and refuses text that is not valid Unicode
(a lone surrogate cannot be stored or sent as UTF-8), before any parsing starts.
"""

from __future__ import annotations

import enum
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol, runtime_checkable

from kafkalog.schemas.errors import InvalidSchemaError

MAX_SCHEMA_LENGTH: Final = 1 << 20  # characters of one schema text, the schema's or a reference's
MAX_REFERENCES: Final = 1000  # references of one schema, direct and indirect
MAX_TOTAL_LENGTH: Final = 8 << 20  # characters of a schema and all its references together


class SchemaType(enum.Enum):
    """A schema's type, by the name the registry's API gives it (``schemaType``)."""

    AVRO = "AVRO"
    PROTOBUF = "PROTOBUF"
    JSON = "JSON"

    @classmethod
    def of(cls, name: str | None) -> SchemaType:
        """The type an API request names; none (as Java clients send for Avro) is AVRO."""
        if name is None:
            return cls.AVRO
        try:
            return cls(name.upper())
        except ValueError:
            raise ValueError(f"unknown schema type {name!r}: expected one of AVRO, PROTOBUF, JSON") from None


@dataclass(frozen=True, order=True)
class SchemaReference:
    """A reference from one schema to another registered one: ``name`` is how the referring schema
    names it (an Avro full name, a ``.proto`` import path, a JSON ``$ref`` URL), ``subject`` and
    ``version`` where the registry keeps it."""

    name: str
    subject: str
    version: int


@runtime_checkable
class ParsedSchema(Protocol):
    """A parsed, valid schema of one type."""

    @property
    def schema_type(self) -> SchemaType: ...

    @property
    def references(self) -> Sequence[SchemaReference]: ...

    @property
    def name(self) -> str | None:
        """The record's full name (Avro), the first message's full name (Protobuf), the
        ``title`` (JSON Schema), or None where it has none."""
        ...

    def canonical(self) -> str:
        """The text the registry stores and returns for this schema (stable: same schema, same text)."""
        ...

    def normalized(self) -> ParsedSchema:
        """The same schema in its normal form (equivalent schemas written differently become equal)."""
        ...


def check_input(text: str, references: Mapping[str, str] | None) -> None:
    """Refuse, with :class:`InvalidSchemaError`, a schema text or references beyond the bounds
    (:data:`MAX_SCHEMA_LENGTH`, :data:`MAX_REFERENCES`, :data:`MAX_TOTAL_LENGTH`) or not valid Unicode."""
    given = dict(references or {})
    if len(given) > MAX_REFERENCES:
        raise InvalidSchemaError(f"{len(given)} references: at most {MAX_REFERENCES} are accepted")
    total = 0
    for what, value in [("schema", text), *((f"reference {name!r}", v) for name, v in given.items())]:
        if not isinstance(value, str):
            raise InvalidSchemaError(f"{what} is not a string but {type(value).__name__}")
        if len(value) > MAX_SCHEMA_LENGTH:
            raise InvalidSchemaError(
                f"{what} is {len(value)} characters long: at most {MAX_SCHEMA_LENGTH} are accepted"
            )
        total += len(value)
        check_unicode(value, what)
    if total > MAX_TOTAL_LENGTH:
        raise InvalidSchemaError(
            f"the schema and its references are {total} characters long: at most {MAX_TOTAL_LENGTH} are accepted"
        )


def check_unicode(text: str, what: str) -> None:
    """Refuse ``text`` that UTF-8 cannot encode (a lone surrogate, as a JSON escape may give one)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidSchemaError(
            f"{what} is not valid Unicode: {text[e.start : e.end].encode('unicode_escape').decode()}"
            f" at character {e.start} (a lone surrogate)"
        ) from None


def load_json(text: str) -> Any:
    """A schema text's JSON, strictly: ``NaN``, ``Infinity`` and numbers beyond a double's range are
    refused (no registry could store them as JSON again), as is nesting too deep for the parser."""
    try:
        return json.loads(text, parse_constant=_not_a_number, parse_float=_finite)
    except (ValueError, RecursionError) as e:
        raise InvalidSchemaError(f"not JSON: {e}") from None


def _not_a_number(constant: str) -> float:
    raise ValueError(f"{constant} is not a JSON number")


def _finite(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise ValueError(f"{literal[:40]} is beyond the range of a double")
    return value
