"""``decoder.format: json_schema``: each value is a JSON object framed with the id of the JSON
Schema it was written with (kafkalog.schemas.wire; what Confluent's JSONSerializer writes). The
frame is checked and stripped, then the objects are read by today's Arrow JSON path
(payloads.json_values) into the columns of the run's reader schema (pipelines.schemas.columns).

The values are not validated against their schema (a JSON Schema validator reads some 40 times
slower than Arrow parses): a value is bad if its frame is, if its id is none of the subject's
(``unknown schema id 7``), or if it does not parse into the columns, as a json value would not.
"""

from __future__ import annotations

from collections.abc import Sequence

from kafkalog.schemas.wire import HEADER_SIZE, schema_ids
from pipelines.config.pipeline import Decoder
from pipelines.executor.halving import Parsed
from pipelines.executor.payloads.json_values import JsonValues
from pipelines.schemas.columns import json_schema_columns
from pipelines.schemas.resolved import SubjectSchemas


class JsonSchemaValues:
    """Framed JSON values into the reader schema's columns."""

    def __init__(self, decoder: Decoder, schemas: SubjectSchemas) -> None:
        self.decoder = decoder
        self.schema = json_schema_columns(schemas.reader, where=schemas.describe())
        self._json = JsonValues(decoder, self.schema)
        self._known = {*schemas.writers, schemas.reader_id}

    def parse(self, values: Sequence[bytes | None]) -> tuple[list[Parsed], list[tuple[int, str]]]:
        """The parsed rows (pieces in message order) and the bad (index, reason) pairs."""
        ids, bad = schema_ids(values)
        kept: list[int] = []
        for i, schema_id in enumerate(ids):
            if schema_id == -1:
                continue
            if schema_id not in self._known:
                bad.append((i, f"unknown schema id {schema_id}"))
            else:
                kept.append(i)
        payloads = [values[i][HEADER_SIZE:] for i in kept]  # type: ignore[index]
        pieces, more_bad = self._json.parse(payloads)
        bad.extend((kept[i], reason) for i, reason in more_bad)
        bad.sort()
        return [Parsed([kept[i] for i in piece.indexes], piece.table) for piece in pieces], bad
