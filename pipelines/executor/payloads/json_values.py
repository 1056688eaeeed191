"""``decoder.format: json``: each message value is one JSON object; the schema's fields are read
from it (others ignored), by Arrow's JSON parser a chunk at a time (payloads.lines)."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.json as pa_json

from pipelines.config.pipeline import Decoder
from pipelines.executor.payloads.lines import LineValues


class JsonValues(LineValues):
    """JSON object values into the decoder schema's columns."""

    json_object = True

    def __init__(self, decoder: Decoder, schema: pa.Schema | None = None) -> None:
        super().__init__(decoder, schema)
        self._chunk_options = pa_json.ParseOptions(explicit_schema=self.schema, unexpected_field_behavior="ignore")
        self._single_options = pa_json.ParseOptions(
            explicit_schema=self.schema, unexpected_field_behavior="ignore", newlines_in_values=True
        )

    def _read(self, data: bytes, single: bool) -> pa.Table:
        options = self._single_options if single else self._chunk_options
        block = max(len(data) + 1, 1 << 20)
        table = pa_json.read_json(
            io.BytesIO(data), read_options=pa_json.ReadOptions(block_size=block), parse_options=options
        )
        return table.select(self.schema.names)
