"""``decoder.format: connect_json``: each value is Kafka Connect's JsonConverter envelope with
schemas, ``{"schema": {...}, "payload": {...}}`` (Debezium's default). The payload is read by
Arrow's JSON path nested under ``payload`` (payloads.lines: a chunk at once, bad values found by
halving); the envelope's own ``schema`` is not read.

The columns are the pipeline's, not the first envelope's: the declared ``decoder.schema`` (field:
type), or the Connect schema in ``decoder.schema_file`` for Connect's types (structs, arrays,
Decimal, Date, Time, Timestamp, maps). The raw layer's columns are then known before any value is read
and cannot change with what a producer sends. Connect's logical types are converted: Decimal
(base64 of the unscaled big-endian integer, ``scale`` from the schema) to decimal, Date (epoch
days) to date, Time (milliseconds of the day) to bigint microseconds of the day, Timestamp
(epoch milliseconds) to timestamp; bytes from base64. A declared ``timestamp`` field is Connect's
Timestamp, ``binary`` its base64 bytes.

Arrow's JSON reader has no map type: when the schema has maps, each value is parsed in Python
first and its maps rewritten as lists of ``{key, value}`` (columns.connect_map_entries), which Arrow
then reads as strictly as any other field; such a topic decodes slower than one without maps.

A value is bad if it is not such an envelope, its payload is null or missing, or a field does not
convert (not base64, a number where the schema says a string).
"""

from __future__ import annotations

import io
import json

import pyarrow as pa
import pyarrow.json as pa_json

from pipelines.config.pipeline import Decoder
from pipelines.executor.payloads.lines import LineValues
from pipelines.schemas.columns import connect_columns, connect_map_entries, convert
from pipelines.schemas.resolved import SubjectSchemas


class ConnectJsonValues(LineValues):
    """Connect JSON envelopes into the pipeline's columns."""

    json_object = True

    def __init__(self, decoder: Decoder, schemas: SubjectSchemas) -> None:
        self._connect_schema = json.loads(schemas.reader)
        self.connect = connect_columns(self._connect_schema, where=schemas.describe())
        super().__init__(decoder, self.connect.schema)
        envelope = pa.schema([pa.field("payload", self.connect.payload)])
        self._chunk_options = pa_json.ParseOptions(explicit_schema=envelope, unexpected_field_behavior="ignore")
        self._single_options = pa_json.ParseOptions(
            explicit_schema=envelope, unexpected_field_behavior="ignore", newlines_in_values=True
        )

    def _read(self, data: bytes, single: bool) -> pa.Table:
        if self.connect.has_maps:
            data, single = self._entries(data, single), False
        options = self._single_options if single else self._chunk_options
        block = max(len(data) + 1, 1 << 20)
        table = pa_json.read_json(
            io.BytesIO(data), read_options=pa_json.ReadOptions(block_size=block), parse_options=options
        )
        payload = table.column("payload").combine_chunks()
        if payload.null_count:
            raise ValueError("the envelope has no payload (null or missing)")
        arrays = [convert(child, plan) for child, plan in zip(payload.flatten(), self.connect.plans, strict=True)]
        return pa.Table.from_arrays(arrays, schema=self.schema)

    def _entries(self, data: bytes, single: bool) -> bytes:
        """The values (one, or one per line) with their payload's maps as entry lists, one per line."""
        out = []
        for text in [data] if single else data.split(b"\n"):
            try:
                envelope = json.loads(text)
            except RecursionError:
                raise ValueError("the value is nested too deeply") from None
            if not isinstance(envelope, dict):
                raise ValueError("the value is not a JSON object")  # noqa: TRY004 - a bad value, as the parser's
            payload = connect_map_entries(envelope.get("payload"), self._connect_schema)
            out.append(json.dumps({"payload": payload}, ensure_ascii=False).encode())
        return b"\n".join(out)
