"""The errors of the schema formats: one root, :class:`SchemaError`, under kafkalog's.

- :class:`InvalidSchemaError`: a schema text that does not parse or breaks its format's rules (the
  registry answers it with 42201, its message as given);
- :class:`SchemaResolutionError`: a reader schema that cannot be compiled to read a writer's data
  into columns (incompatible, recursive, too large);
- :class:`WireFormatError`: a framed value (the Confluent wire format: magic byte, schema id,
  Protobuf message indexes) that cannot be unframed (a loader quarantines the record with it).
"""

from __future__ import annotations

from kafkalog.errors import KafkalogError


class SchemaError(KafkalogError):
    """Root of the errors of :mod:`kafkalog.schemas`."""


class InvalidSchemaError(SchemaError):
    """A schema that is not valid for its type; the message names the first cause (and where)."""


class SchemaResolutionError(SchemaError):
    """A (writer, reader) pair that cannot be compiled into a decoding program; the message names
    the first cause."""


class WireFormatError(SchemaError):
    """A value whose framing is not the Confluent wire format; ``reason`` is the first cause."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
