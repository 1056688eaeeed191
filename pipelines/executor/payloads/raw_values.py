"""``decoder.format: raw``: the value is kept as it is, in one binary column ``value``; nothing is
parsed, so no message is bad for its payload (one without a value has a null there)."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from pipelines.config.pipeline import Decoder
from pipelines.executor.halving import Parsed

RAW_SCHEMA = pa.schema([pa.field("value", pa.binary())])


class RawValues:
    """Message values as they are."""

    def __init__(self, decoder: Decoder) -> None:
        self.decoder = decoder
        self.schema = self.schema_of(decoder)

    @staticmethod
    def schema_of(decoder: Decoder) -> pa.Schema:
        """The one column ``value``, whatever the decoder says."""
        return RAW_SCHEMA

    def parse(self, values: Sequence[bytes | None]) -> tuple[list[Parsed], list[tuple[int, str]]]:
        """One piece holding every value, in order; never a bad one."""
        if not values:
            return [], []
        return [Parsed(list(range(len(values))), pa.table({"value": pa.array(values, pa.binary())}))], []
