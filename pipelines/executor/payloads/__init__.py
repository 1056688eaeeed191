"""Payload decoders: a message value into the decoded fields of a raw row, one module per format.

Every format implements ``PayloadDecoder``: its Arrow ``schema`` (the decoded columns, in order)
and ``parse(values)``, which returns good pieces (message indexes and their rows, in message order)
and bad (index, reason) pairs, every value in exactly one of the two; and a static ``schema_of``,
the same schema without making a parser (the driver asks it for the Spark DDL). ``payload_decoder``
picks the module for ``decoder.format``, ``payload_schema`` its schema; pipelines.executor.decode
adds the metadata columns, event time and partitions around what it parsed. A new format is a
module here and a line in ``_FORMATS``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import pyarrow as pa

from pipelines.config.pipeline import Decoder
from pipelines.executor.halving import Parsed
from pipelines.executor.payloads.csv_values import CsvValues
from pipelines.executor.payloads.json_values import JsonValues
from pipelines.executor.payloads.raw_values import RawValues


class PayloadDecoder(Protocol):
    """What every payload format provides (see the module doc)."""

    @property
    def schema(self) -> pa.Schema: ...

    def parse(self, values: Sequence[bytes | None]) -> tuple[list[Parsed], list[tuple[int, str]]]: ...


_FORMATS: dict[str, type[JsonValues] | type[CsvValues] | type[RawValues]] = {
    "json": JsonValues,
    "csv": CsvValues,
    "raw": RawValues,
}


def payload_decoder(decoder: Decoder) -> PayloadDecoder:
    """The decoder of ``decoder.format`` (checked when the pipeline file was read)."""
    return _FORMATS[decoder.format](decoder)


def payload_schema(decoder: Decoder) -> pa.Schema:
    """The decoded columns of ``decoder.format``, in order, without making its parser."""
    return _FORMATS[decoder.format].schema_of(decoder)
