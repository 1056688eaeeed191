"""The errors of kafkalog.schemas: one root under kafkalog's, one kind per failure."""

from __future__ import annotations

from kafkalog.errors import KafkalogError


class SchemaError(KafkalogError):
    """Root of the errors of kafkalog.schemas."""


class InvalidSchemaError(SchemaError):
    """A schema text that does not parse or does not resolve (the message says where and why)."""


class WireFormatError(SchemaError):
    """Bytes that are not a value in the Confluent wire format (the message is the reason)."""
