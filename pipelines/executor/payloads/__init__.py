"""Payload decoders: a message value into the decoded fields of a raw row, one module per format.

Every format implements ``PayloadDecoder``: its Arrow ``schema`` (the decoded columns, in order)
and ``parse(values)``, which returns good pieces (message indexes and their rows, in message order)
and bad (index, reason) pairs, every value in exactly one of the two. ``payload_decoder`` picks
the module for ``decoder.format``, ``payload_schema`` its columns; pipelines.executor.decode adds
the metadata columns, event time and partitions around what it parsed. A new format is a module
here and a line in ``_FORMATS``.

The formats of ``decoder.schema`` (json, csv, raw) know their columns from the pipeline file; the
others (avro, protobuf, json_schema, connect_json) from the run's schemas
(pipelines.schemas.resolved), which the driver reads once and the tasks receive: their decoder is
made from the topic's ``SubjectSchemas``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import pyarrow as pa

from pipelines.config.pipeline import Decoder
from pipelines.errors import PayloadSchemaError
from pipelines.executor.halving import Parsed
from pipelines.executor.payloads.avro_values import AvroValues
from pipelines.executor.payloads.connect_json_values import ConnectJsonValues
from pipelines.executor.payloads.csv_values import CsvValues
from pipelines.executor.payloads.json_schema_values import JsonSchemaValues
from pipelines.executor.payloads.json_values import JsonValues
from pipelines.executor.payloads.protobuf_values import ProtobufValues
from pipelines.executor.payloads.raw_values import RawValues
from pipelines.schemas.resolved import RunSchemas, SubjectSchemas, run_columns


class PayloadDecoder(Protocol):
    """What every payload format provides (see the module doc)."""

    @property
    def schema(self) -> pa.Schema: ...

    def parse(self, values: Sequence[bytes | None]) -> tuple[list[Parsed], list[tuple[int, str]]]: ...


_DECLARED: dict[str, type[JsonValues] | type[CsvValues] | type[RawValues]] = {
    "json": JsonValues,
    "csv": CsvValues,
    "raw": RawValues,
}
"""The formats whose columns the pipeline file declares."""

_FORMATS: dict[str, Callable[[Decoder, SubjectSchemas], PayloadDecoder]] = {
    "avro": AvroValues,
    "protobuf": ProtobufValues,
    "json_schema": JsonSchemaValues,
    "connect_json": ConnectJsonValues,
}
"""The formats whose columns come from the run's schemas."""


def payload_decoder(decoder: Decoder, schemas: SubjectSchemas | None = None) -> PayloadDecoder:
    """The decoder of ``decoder.format`` (checked when the pipeline file was read); ``schemas``:
    the topic's, for a format whose columns come from them."""
    if decoder.format in _DECLARED:
        return _DECLARED[decoder.format](decoder)
    if schemas is None:
        raise PayloadSchemaError(f"the {decoder.format} decoder needs the run's schemas (none were given)")
    return _FORMATS[decoder.format](decoder, schemas)


def payload_schema(decoder: Decoder, schemas: RunSchemas | None = None) -> pa.Schema:
    """The decoded columns of ``decoder.format``, in order, without making its parser."""
    if decoder.format in _DECLARED:
        return _DECLARED[decoder.format].schema_of(decoder)
    if schemas is None:
        raise PayloadSchemaError(f"the columns of the {decoder.format} decoder come from the run's schemas")
    return run_columns(schemas)
