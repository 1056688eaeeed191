"""The raw row: its columns and their types, what a message and a bad record carry, and the
metadata columns built from messages.

Role: the one description of a raw row (metadata columns, the payload's decoded fields, dt and
hour), as Arrow (the Parquet files) and as Spark DDL (what the Spark source declares and the tables
over the raw layer read). The decoded fields come from the payload decoder of ``decoder.format``
(pipelines.executor.payloads).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipelines.config.pipeline import Decoder
from pipelines.executor.arrow_types import ARROW_TYPES, SPARK_TYPES, TIMESTAMP
from pipelines.executor.keys import KEY_COLUMN, key_type
from pipelines.executor.payloads import payload_schema
from pipelines.schemas.resolved import RunSchemas, SubjectSchemas

HEADER = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
HEADERS = pa.list_(HEADER)
"""The ``headers`` column: a list of (key, value) structs, Spark's array<struct<key:string,value:binary>>.

A list and not a map, because Kafka allows a key more than once and gives headers an order (a
consumer may read the last ``trace`` as the one that counts); a map would drop duplicates and order.
It is Spark's own Kafka source's type, so SQL over both reads alike. An empty list: the message has
no headers (always so before message format v2). Null: not recorded (rows loaded before the column
existed), never for a row loaded since."""

TOMBSTONE = "tombstone"
"""The raw column that says a row is a tombstone: its message had a null value. On a compacted topic
that is how a producer deletes a key; the log cleaner keeps the tombstone for the topic's
``delete.retention.ms`` after it cleaned past it, then removes it too. A tombstone is a row, never a
bad record: its decoded fields are null (``value`` null for the raw decoder), ``required`` does not
apply to it, and its event time is its message's timestamp (there is no payload to read one from)."""

Header = tuple[str, bytes | None]
"""A record header: a UTF-8 key and a value that may be null (kafkalog.record.message.Header)."""


class Message(NamedTuple):
    """What the decoder needs of a message (kafkalog's Message has the same fields, in this order).

    ``timestamp_type`` is Kafka's: 0 CreateTime, 1 LogAppendTime; ``headers`` are empty before
    message format v2."""

    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


@dataclass(frozen=True, slots=True)
class BadRecord:
    """A message that could not become a row: where it is, all it carried (nothing is lost by
    quarantining it), and why."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    reason: str
    timestamp_type: int = 0
    headers: tuple[Header, ...] = ()


def row_schema(decoder: Decoder, schemas: RunSchemas | None = None) -> pa.Schema:
    """The Arrow schema of raw rows: metadata columns (spec.METADATA_COLUMNS), the decoded key
    (``key_decoded``, with a key decoder), decoded fields, then dt and hour. ``timestamp_type`` is
    null where ``timestamp`` is (the message has none). ``tombstone`` is true for a message
    without a value (a delete, on a compacted topic), whose decoded fields are then all null;
    false for every other row; null only in rows loaded before the column existed (TOMBSTONE).
    ``schemas``: the run's, for a decoder whose columns come from them (pipelines.schemas.resolved)."""
    fields = [
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("broker", pa.int32()),
        pa.field("timestamp", TIMESTAMP),
        pa.field("timestamp_type", pa.int32()),
        pa.field("event_time", TIMESTAMP),
        pa.field("key", pa.binary()),
        pa.field("headers", HEADERS),
        pa.field("tombstone", pa.bool_()),
    ]
    keys = key_type(decoder, None if schemas is None else _first_key_schema(schemas))
    if keys is not None:  # decoder.key_decoder: the key decoded, beside its bytes
        fields.append(pa.field(KEY_COLUMN, keys))
    fields.extend(payload_schema(decoder, schemas))
    fields += [pa.field("dt", pa.string()), pa.field("hour", pa.string())]
    return pa.schema(fields)


def _first_key_schema(schemas: RunSchemas) -> SubjectSchemas | None:
    """A topic's key schema: every topic's gives the same column (pipelines.schemas.resolved checks)."""
    return schemas.keys[min(schemas.keys)] if schemas.keys else None


def spark_ddl(decoder: Decoder, schemas: RunSchemas | None = None) -> str:
    """The same schema as Spark DDL: what the Spark source declares, and what readers of a raw
    layer read it with (a layer with files from before a column existed then has nulls there)."""
    return ddl_of(row_schema(decoder, schemas))


def spark_columns(decoder: Decoder, schemas: RunSchemas | None = None) -> list[tuple[str, str]]:
    """(name, Spark type) of every raw column but the dt/hour partition columns, in order: the raw
    layer's table in a metastore (pipelines.catalog), with the columns it keeps (``table_schema``)."""
    return [(f.name, _spark_type(f.type)) for f in table_schema(decoder, schemas) if f.name not in ("dt", "hour")]


def table_schema(decoder: Decoder, schemas: RunSchemas | None = None) -> pa.Schema:
    """The raw rows as their readers declare them: ``row_schema`` and, before dt and hour, the
    columns the table keeps from earlier reader schemas (``RunSchemas.kept``), which the rows of
    later runs do not have (null there). The tasks write ``row_schema``."""
    rows = row_schema(decoder, schemas)
    kept = [] if schemas is None else [f for f in schemas.kept_columns() if f.name not in rows.names]
    if not kept:
        return rows
    fields = list(rows)
    return pa.schema([*fields[:-2], *kept, *fields[-2:]])


def ddl_of(schema: pa.Schema) -> str:
    """Spark DDL of an Arrow schema of the types raw rows use (every name quoted)."""
    return ", ".join(f"`{f.name}` {_spark_type(f.type)}" for f in schema)


_SPARK_OF_ARROW = {ARROW_TYPES[kind]: spark for kind, spark in SPARK_TYPES.items()}


_SPARK_OF_MORE_ARROW = {
    pa.int8(): "TINYINT",
    pa.int16(): "SMALLINT",
    pa.date32(): "DATE",
}
"""Types of the columns schema'd payloads bring (pipelines.schemas.columns) besides the field kinds."""


def _spark_type(kind: pa.DataType) -> str:
    """The Spark type of an Arrow type: a field type's, or a list/struct/map of them (headers, and
    the columns of schema'd payloads)."""
    if pa.types.is_list(kind):
        return f"ARRAY<{_spark_type(kind.value_type)}>"
    if pa.types.is_struct(kind):
        return "STRUCT<" + ", ".join(f"`{f.name}`: {_spark_type(f.type)}" for f in kind) + ">"
    if pa.types.is_map(kind):
        return f"MAP<{_spark_type(kind.key_type)}, {_spark_type(kind.item_type)}>"
    if pa.types.is_decimal(kind):
        return f"DECIMAL({kind.precision},{kind.scale})"
    if kind in _SPARK_OF_MORE_ARROW:
        return _SPARK_OF_MORE_ARROW[kind]
    if kind not in _SPARK_OF_ARROW:
        raise TypeError(f"no Spark type for the Arrow type {kind}")
    return _SPARK_OF_ARROW[kind]


def timestamp_types(stamps: pa.Array, types: Sequence[int] | np.ndarray[Any, Any]) -> pa.Array:
    """The ``timestamp_type`` column (int32): each message's type (0 CreateTime, 1 LogAppendTime),
    null where its timestamp is negative, that is where it has none (magic 0 messages): a type of
    no timestamp would be a claim the message never made."""
    return pc.if_else(pc.less(stamps, 0), None, pa.array(types, pa.int32()))


def headers_column(headers: Sequence[tuple[Header, ...]]) -> pa.Array:
    """The ``headers`` column (HEADERS) of messages' header tuples: each message's pairs in their
    order, duplicate keys and null values kept; an empty list for a message without headers."""
    if not any(headers):  # the common case, and every chunk before message format v2
        offsets = pa.array(np.zeros(len(headers) + 1, np.int32))
        return pa.ListArray.from_arrays(offsets, pa.array([], HEADER), type=HEADERS)
    return pa.array(headers, HEADERS)
