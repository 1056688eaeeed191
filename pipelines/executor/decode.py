"""Messages into Arrow: one fetched chunk of a split's messages into one table of raw rows.

Role: turn a chunk into one Arrow table of good rows plus a list of bad records (offset, raw bytes,
reason). Every message ends up in exactly one of the two. The payload decoder of the pipeline's
format parses the values (pipelines.executor.payloads: a chunk at once, message by message
semantics); this module adds the metadata columns (pipelines.executor.rows), the event time and
the dt/hour partition (pipelines.executor.event_time), and drops the rows any step found bad.

Correctness does not depend on how messages happen to be grouped into chunks: a message is good if
and only if it would be decoded alone into exactly one row with every required field present and
a valid event time.

A message without a value (a tombstone: on a compacted topic, the delete of its key) is a row too,
flagged in ``tombstone`` (pipelines.executor.rows.TOMBSTONE): its decoded fields are null, no field
is required of it, and its event time is its message's timestamp; it is bad only if it has none.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipelines.config.pipeline import Decoder, EventTime
from pipelines.executor.arrow_types import TIMESTAMP
from pipelines.executor.event_time import EventTimeResolver, message_times_only
from pipelines.executor.keys import KEY_COLUMN, KeyColumn
from pipelines.executor.payloads import payload_decoder
from pipelines.executor.rows import TOMBSTONE, BadRecord, Message, headers_column, row_schema, timestamp_types
from pipelines.schemas.resolved import RunSchemas
from pipelines.schemas.resolved import field_kind as resolved_field_kind


class ChunkDecoder:
    """Decodes the chunks of one split into Arrow tables of rows (see the module doc)."""

    def __init__(
        self,
        decoder: Decoder,
        event_time: EventTime,
        topic: str,
        partition: int,
        schemas: RunSchemas | None = None,
    ) -> None:
        self.decoder = decoder
        self.schema = row_schema(decoder, schemas)
        self.topic = topic
        self.partition = partition
        self.values = payload_decoder(decoder, None if schemas is None else schemas.values.get(topic))
        field_kind = None
        if event_time.field is not None:
            field_kind = (
                decoder.schema.get(event_time.field)
                if decoder.declares_columns
                else resolved_field_kind(self.values.schema, event_time.field)
            )
        self.event_time_field = event_time.field
        self.times = EventTimeResolver(event_time, field_kind)
        self.keys = (
            None
            if decoder.key_decoder.format == "raw"
            else KeyColumn(decoder, None if schemas is None else schemas.key_for(topic))
        )

    def decode(self, messages: Sequence[Message], broker: int) -> tuple[pa.Table, list[BadRecord]]:
        """Rows for the good messages and the tombstones (in offset order) and the bad ones with
        their reasons; with a key decoder, a message whose key does not decode is bad too."""
        if self.keys is None:
            return self._decode_values(messages, broker)
        column, key_bad = self.keys.decode(list(map(itemgetter(3), messages)))
        bad_keys = [
            _bad_record(messages[i], _header_framed(messages[i], reason)) for i, reason in sorted(key_bad.items())
        ]
        if key_bad:
            keep = [i for i in range(len(messages)) if i not in key_bad]
            messages = [messages[i] for i in keep]
            column = column.take(pa.array(keep, pa.int64()))
        table, bad = self._decode_values(messages, broker)
        offsets = pa.array(list(map(itemgetter(0), messages)), pa.int64())
        positions = pc.index_in(table.column("offset"), value_set=offsets)
        index = self.schema.get_field_index(KEY_COLUMN)
        table = table.set_column(index, self.schema.field(index), column.take(positions))
        return table, sorted([*bad, *bad_keys], key=lambda b: b.offset)

    def _decode_values(self, messages: Sequence[Message], broker: int) -> tuple[pa.Table, list[BadRecord]]:
        values = list(map(itemgetter(4), messages))
        if None not in values:  # the common case: no tombstone
            return self._decode(messages, values, broker)
        alive = [m for m in messages if m.value is not None]
        table, bad = self._decode(alive, list(map(itemgetter(4), alive)), broker)
        deleted, unplaced = self._tombstones([m for m in messages if m.value is None], broker)
        table = pa.concat_tables([table, deleted])
        table = table.take(pc.sort_indices(table.column("offset")))  # messages come in offset order
        return table, sorted([*bad, *unplaced], key=lambda b: b.offset)

    def _tombstones(self, messages: Sequence[Message], broker: int) -> tuple[pa.Table, list[BadRecord]]:
        """Rows of messages without a value: decoded fields null, event time the message's timestamp."""
        stamps = pa.array(list(map(itemgetter(1), messages)), pa.int64())
        placed = pc.greater_equal(stamps, 0)
        bad = [
            _bad_record(m, "a tombstone (the message has no value) has no timestamp to place it in time")
            for m, ok in zip(messages, placed.to_pylist(), strict=True)
            if not ok
        ]
        if bad:
            messages = [m for m in messages if m.timestamp >= 0]
            stamps = stamps.filter(placed)
        count = len(messages)
        event = pc.multiply(stamps, 1000).cast(TIMESTAMP)
        dt, hour = self.times.partitions(event)
        columns: dict[str, Any] = {
            **self._metadata(messages, stamps, broker),
            "event_time": event,
            TOMBSTONE: pa.repeat(pa.scalar(True), count),
        }
        if self.keys is not None:
            columns[KEY_COLUMN] = pa.nulls(count, self.keys.type)  # filled in by ``decode``
        for field in self.values.schema:
            columns[field.name] = pa.nulls(count, field.type)
        columns["dt"] = dt
        columns["hour"] = hour
        return pa.table(columns, schema=self.schema), bad

    def _metadata(self, messages: Sequence[Message], stamps: pa.Array, broker: int) -> dict[str, Any]:
        """The metadata columns of rows of ``messages`` (all of them), ``stamps`` their timestamps in ms."""
        count = len(messages)
        types = np.fromiter(map(itemgetter(2), messages), np.int32, count=count)
        return {
            "topic": pa.repeat(self.topic, count).cast(pa.string()),
            "partition": pa.repeat(pa.scalar(self.partition, pa.int32()), count),
            "offset": pa.array(list(map(itemgetter(0), messages)), pa.int64()),
            "broker": pa.repeat(pa.scalar(broker, pa.int32()), count),
            "timestamp": pc.if_else(pc.less(stamps, 0), None, pc.multiply(stamps, 1000)).cast(TIMESTAMP),
            "timestamp_type": timestamp_types(stamps, types),
            "key": pa.array(list(map(itemgetter(3), messages)), pa.binary()),
            "headers": headers_column(list(map(itemgetter(5), messages))),
        }

    def _decode(
        self, messages: Sequence[Message], values: list[bytes | None], broker: int
    ) -> tuple[pa.Table, list[BadRecord]]:
        """Rows for the good messages of a chunk of messages with values, and the bad ones."""
        n = len(messages)
        bad_at: dict[int, str] = {}
        # whole-chunk columns, built without a Python-level loop per message
        all_offsets = pa.array(list(map(itemgetter(0), messages)), pa.int64())
        all_stamps = pa.array(list(map(itemgetter(1), messages)), pa.int64())
        all_keys = pa.array(list(map(itemgetter(3), messages)), pa.binary())
        all_types = timestamp_types(all_stamps, np.fromiter(map(itemgetter(2), messages), np.int32, count=n))
        all_headers = headers_column(list(map(itemgetter(5), messages)))
        pieces, bad = self.values.parse(values)
        bad_at.update(bad)
        # rows: the message index of each row; None while that is every message, in order
        rows = None if not bad else [i for piece in pieces for i in piece.indexes]
        tables = [piece.table for piece in pieces]
        fields = pa.concat_tables(tables) if tables else self.values.schema.empty_table()
        stamps_ms = all_stamps if rows is None else all_stamps.take(pa.array(rows, pa.int64()))
        message_times = pc.if_else(pc.less(stamps_ms, 0), None, pc.multiply(stamps_ms, 1000)).cast(TIMESTAMP)

        if self.event_time_field is None:
            times, bad = message_times_only(message_times)
        else:
            times, bad = self.times.resolve(fields.column(self.event_time_field).combine_chunks())
        if bad:
            current = list(range(n)) if rows is None else rows
            for row, reason in bad:
                bad_at[current[row]] = reason
            keep = [i for indexes, _ in times for i in indexes]
            take = pa.array(keep, pa.int64())
            fields = fields.take(take)
            message_times = message_times.take(take)
            rows = [current[i] for i in keep]
        event = pa.concat_arrays([t for _, t in times]) if times else pa.array([], TIMESTAMP)
        dt, hour = self.times.partitions(event)
        count = n if rows is None else len(rows)
        row_indexes = None if rows is None else pa.array(rows, pa.int64())
        columns: dict[str, Any] = {
            "topic": pa.repeat(self.topic, count).cast(pa.string()),
            "partition": pa.repeat(pa.scalar(self.partition, pa.int32()), count),
            "offset": all_offsets if row_indexes is None else all_offsets.take(row_indexes),
            "broker": pa.repeat(pa.scalar(broker, pa.int32()), count),
            "timestamp": message_times,
            "timestamp_type": all_types if row_indexes is None else all_types.take(row_indexes),
            "event_time": event,
            "key": all_keys if row_indexes is None else all_keys.take(row_indexes),
            "headers": all_headers if row_indexes is None else all_headers.take(row_indexes),
            TOMBSTONE: pa.repeat(pa.scalar(False), count),
        }
        if self.keys is not None:
            columns[KEY_COLUMN] = pa.nulls(count, self.keys.type)  # filled in by ``decode``
        for name in fields.column_names:
            columns[name] = fields.column(name)
        columns["dt"] = dt
        columns["hour"] = hour
        table = pa.table(columns, schema=self.schema)
        bad_records = [
            _bad_record(messages[i], _header_framed(messages[i], reason)) for i, reason in sorted(bad_at.items())
        ]
        return table, bad_records


_ID_HEADERS = {"value": "__value_schema_id", "key: ": "__key_schema_id"}


def _header_framed(message: Message, reason: str) -> str:
    """``reason``, said plainly for a value (or key) without a frame whose schema id a serializer
    put in a header instead (Confluent 8.x's ``__value_schema_id`` / ``__key_schema_id``): not
    supported, so the value is bad, but not for the reason its first byte would suggest."""
    if "wrong magic byte" not in reason or not message.headers:
        return reason
    header = _ID_HEADERS["key: "] if reason.startswith("key: ") else _ID_HEADERS["value"]
    if any(key == header for key, _ in message.headers):
        prefix = "key: " if reason.startswith("key: ") else ""
        return f"{prefix}the schema id is in the {header} header, not before the value: not supported ({reason})"
    return reason


def _bad_record(message: Message, reason: str) -> BadRecord:
    return BadRecord(
        message.offset,
        message.timestamp,
        message.key,
        message.value,
        reason,
        timestamp_type=int(message.timestamp_type),
        headers=message.headers,
    )
