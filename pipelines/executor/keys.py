"""Message keys into the ``key_decoded`` column (``decoder.key_decoder``), beside the raw ``key`` bytes.

Role: the keys' side of decoding, reusing the value formats: ``string`` (UTF-8 text), ``json`` (an
object with the declared fields, as a struct: payloads.json_values), ``avro`` (framed with a
schema id of the subject ``<topic>-key``: payloads.avro_values; a record becomes a struct, any other
type its column). A null key is a null ``key_decoded``, never bad (most topics have some); a key
that does not decode makes its message a bad record, with the reason prefixed ``key: ``.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from pipelines.config.pipeline import Decoder, KeyDecoder
from pipelines.errors import PayloadSchemaError
from pipelines.executor.payloads.avro_values import AvroValues
from pipelines.executor.payloads.json_values import JsonValues
from pipelines.schemas.columns import avro_columns
from pipelines.schemas.resolved import SubjectSchemas

KEY_COLUMN = "key_decoded"


def key_type(decoder: Decoder, schemas: SubjectSchemas | None) -> pa.DataType | None:
    """The Arrow type of ``key_decoded`` (None: keys are not decoded)."""
    key = decoder.key_decoder
    if key.format == "raw":
        return None
    if key.format == "string":
        return pa.string()
    if key.format == "json":
        return pa.struct(JsonValues.schema_of(Decoder(format="json", schema=key.schema)))
    if schemas is None:
        raise PayloadSchemaError("the avro key decoder needs the run's key schemas (none were given)")
    columns = avro_columns(schemas.reader, where=f"the key schema ({schemas.describe()})")
    return pa.struct(columns.schema) if columns.top_record else columns.schema.field(0).type


class KeyColumn:
    """Decodes a chunk's keys into the ``key_decoded`` column (see the module doc)."""

    def __init__(self, decoder: Decoder, schemas: SubjectSchemas | None) -> None:
        self.key: KeyDecoder = decoder.key_decoder
        kind = key_type(decoder, schemas)
        assert kind is not None, "keys that are not decoded have no column"
        self.type: pa.DataType = kind
        self._values: JsonValues | AvroValues | None = None
        if self.key.format == "json":
            self._values = JsonValues(Decoder(format="json", schema=self.key.schema))
        elif self.key.format == "avro":
            assert schemas is not None
            self._values = AvroValues(Decoder(format="avro", registry=decoder.key_registry), schemas)

    def decode(self, keys: Sequence[bytes | None]) -> tuple[pa.Array, dict[int, str]]:
        """The column for ``keys`` (null where a key is null or bad) and the bad keys' reasons by index."""
        if self.key.format == "string":
            return _strings(keys)
        assert self._values is not None
        present = [i for i, k in enumerate(keys) if k is not None]
        pieces, bad = self._values.parse([keys[i] for i in present])
        out: list[object] = [None] * len(keys)
        single = isinstance(self._values, AvroValues) and not self._values.columns.top_record
        for piece in pieces:
            column = piece.table.column(0) if single else piece.table.to_struct_array()
            for j, value in zip(piece.indexes, column.to_pylist(), strict=True):
                out[present[j]] = value
        return pa.array(out, self.type), {present[j]: f"key: {reason}" for j, reason in bad}


def _strings(keys: Sequence[bytes | None]) -> tuple[pa.Array, dict[int, str]]:
    raw = pa.array(keys, pa.binary())
    try:
        return raw.cast(pa.string()), {}
    except pa.ArrowInvalid:  # some key is not UTF-8: find which, keep the others
        out: list[str | None] = []
        bad: dict[int, str] = {}
        for i, key in enumerate(keys):
            try:
                out.append(None if key is None else key.decode("utf-8"))
            except UnicodeDecodeError as exc:
                out.append(None)
                bad[i] = f"key: not UTF-8 text ({exc.reason} at byte {exc.start})"
        return pa.array(out, pa.string()), bad
