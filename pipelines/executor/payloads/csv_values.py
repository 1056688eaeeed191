"""``decoder.format: csv``: each message value is one CSV line holding the schema's fields in
order (``decoder.csv``: delimiter and quote), by Arrow's CSV parser a chunk at a time
(payloads.lines)."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.csv as pa_csv

from pipelines.config.pipeline import Decoder
from pipelines.executor.arrow_types import ARROW_TYPES
from pipelines.executor.payloads.lines import LineValues


class CsvValues(LineValues):
    """CSV line values into the decoder schema's columns."""

    def __init__(self, decoder: Decoder) -> None:
        super().__init__(decoder)
        names = list(decoder.schema)
        self._csv_read = pa_csv.ReadOptions(column_names=names)
        self._csv_convert = pa_csv.ConvertOptions(
            column_types={n: ARROW_TYPES[k] for n, k in decoder.schema.items()}, strings_can_be_null=False
        )
        self._chunk_csv = pa_csv.ParseOptions(delimiter=decoder.csv.delimiter, quote_char=decoder.csv.quote)
        self._single_csv = pa_csv.ParseOptions(
            delimiter=decoder.csv.delimiter, quote_char=decoder.csv.quote, newlines_in_values=True
        )

    def _read(self, data: bytes, single: bool) -> pa.Table:
        return pa_csv.read_csv(
            io.BytesIO(data),
            read_options=self._csv_read,
            parse_options=self._single_csv if single else self._chunk_csv,
            convert_options=self._csv_convert,
        )
