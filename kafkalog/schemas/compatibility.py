"""Compatibility levels, and the check of a new schema against a subject's earlier ones.

The directions are Confluent's registry's:
- BACKWARD: the new schema reads data written with the previous one (new is the reader);
- FORWARD: the previous schema reads data written with the new one (previous is the reader);
- FULL: both; the FORWARD findings come first, then the BACKWARD ones;
- the plain levels check the latest previous schema only, the ``_TRANSITIVE`` ones every previous
  schema, newest first, stopping at the first that is incompatible; NONE checks nothing.

Findings are the registry's messages: the format's own (``{errorType:...}``), then
``{oldSchemaVersion: N}`` (when the version is known) and ``{oldSchema: '<its text>'}`` (cut at
10 KiB); FULL adds these two after its BACKWARD findings only, as the registry does. A previous schema of
another type gives ``Incompatible because of different schema type``.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Final

from kafkalog.schemas import avro_compat, json_schema_compat, protobuf_compat
from kafkalog.schemas.avro import AvroSchema
from kafkalog.schemas.json_schema import JsonSchema
from kafkalog.schemas.model import ParsedSchema
from kafkalog.schemas.protobuf import ProtobufSchema

MAX_SCHEMA_SIZE_IN_MESSAGE: Final = 10 * 1024
DIFFERENT_SCHEMA_TYPE: Final = "Incompatible because of different schema type"


class CompatibilityLevel(enum.Enum):
    NONE = "NONE"
    BACKWARD = "BACKWARD"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD = "FORWARD"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL = "FULL"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"

    @classmethod
    def of(cls, name: str) -> CompatibilityLevel:
        """The level a request names, in any case; ValueError with the registry's text if none."""
        try:
            return cls(name.upper())
        except ValueError:
            raise ValueError(
                "Invalid compatibility level. Valid values are none, backward, forward, full, "
                "backward_transitive, forward_transitive, and full_transitive"
            ) from None

    @property
    def transitive(self) -> bool:
        return self.name.endswith("_TRANSITIVE")

    @property
    def backward(self) -> bool:
        """Whether the new schema must read the previous ones' data."""
        return self.name.startswith(("BACKWARD", "FULL"))

    @property
    def forward(self) -> bool:
        """Whether the previous schemas must read the new one's data."""
        return self.name.startswith(("FORWARD", "FULL"))


def incompatibilities(
    reader: ParsedSchema, writer: ParsedSchema, reader_is: str = "new", writer_is: str = "old"
) -> list[str]:
    """The format's findings for ``reader`` reading ``writer``'s data (both of one type)."""
    if isinstance(reader, AvroSchema) and isinstance(writer, AvroSchema):
        return avro_compat.incompatibilities(reader, writer, reader_is=reader_is, writer_is=writer_is)
    if isinstance(reader, ProtobufSchema) and isinstance(writer, ProtobufSchema):
        return protobuf_compat.incompatibilities(reader, writer, reader_is=reader_is, writer_is=writer_is)
    if isinstance(reader, JsonSchema) and isinstance(writer, JsonSchema):
        return json_schema_compat.incompatibilities(reader, writer, reader_is=reader_is, writer_is=writer_is)
    raise TypeError(f"no compatibility check between {type(reader).__name__} and {type(writer).__name__}")


def check(
    level: CompatibilityLevel,
    new: ParsedSchema,
    previous: Sequence[ParsedSchema],
    *,
    versions: Sequence[int] | None = None,
) -> list[str]:
    """Why ``new`` may not follow ``previous`` (oldest first) at ``level``; empty: it may.

    ``versions``, when given, are the previous schemas' versions (same order), named in the messages.
    """
    if level is CompatibilityLevel.NONE or not previous:
        return []
    if versions is not None and len(versions) != len(previous):
        raise ValueError(f"{len(versions)} versions for {len(previous)} previous schemas")
    numbered = list(zip(previous, versions if versions is not None else [None] * len(previous), strict=True))
    newest_first = numbered[::-1] if level.transitive else numbered[-1:]
    for old, version in newest_first:
        found = _pair(level, new, old, version)
        if found:
            return found
    return []


def _pair(level: CompatibilityLevel, new: ParsedSchema, old: ParsedSchema, version: int | None) -> list[str]:
    if new.schema_type is not old.schema_type:
        return [DIFFERENT_SCHEMA_TYPE]
    if level is CompatibilityLevel.BACKWARD or level is CompatibilityLevel.BACKWARD_TRANSITIVE:
        return _with_about(incompatibilities(new, old, "new", "old"), old, version)
    if level is CompatibilityLevel.FORWARD or level is CompatibilityLevel.FORWARD_TRANSITIVE:
        return _with_about(incompatibilities(old, new, "old", "new"), old, version)
    # FULL: the forward findings as they are, then the backward ones with the old schema named
    forward = incompatibilities(old, new, "old", "new")
    return forward + _with_about(incompatibilities(new, old, "new", "old"), old, version)


def _with_about(found: list[str], old: ParsedSchema, version: int | None) -> list[str]:
    """``found``, and when not empty, what the registry adds after it: the old schema's version and text."""
    if not found:
        return found
    text = old.canonical()
    shown = f"{{oldSchema: '{text}'}}"
    if len(text) > MAX_SCHEMA_SIZE_IN_MESSAGE:
        shown = f"{{oldSchema: <truncated> '{text[:MAX_SCHEMA_SIZE_IN_MESSAGE]}...'}}"
    return [*found, *([f"{{oldSchemaVersion: {version}}}"] if version is not None else []), shown]
