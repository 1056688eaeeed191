"""What every schema format shares: its type, its references, and the parsed-schema protocol.

A :class:`ParsedSchema` is a schema the registry can store and compare. ``canonical()`` is the text
the registry stores and returns: the same schema (as given) always gives the same text, so it is
also what identifies a schema within its type and references (two registrations of it get one id).
Normalisation, which makes differently written but equivalent schemas equal, is a separate,
explicit step (``normalized()``), as Confluent's registry does it only when asked (``normalize``).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


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
