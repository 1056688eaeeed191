"""Messages into Arrow: the decoders (json, csv, raw), event time, and the dt/hour partitions.

Role: turn one fetched chunk of a split's messages into one Arrow table of good rows plus a list of
bad records (offset, raw bytes, reason). Every message ends up in exactly one of the two.

Speed comes from Arrow's C++ parsers over a whole chunk at once. Correctness does not depend on how
messages happen to be grouped into chunks: a message is good if and only if Arrow parses it *alone*
into exactly one row with every required field present. When a whole chunk does not parse cleanly,
it is split in halves until the culprits are single messages (so bad records cost a few extra
parses, not a slow path for everything), and values that could confuse line-based parsing (empty,
blank, or containing a newline) are always parsed alone.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.json as pa_json

from pipelines.config.pipeline import Decoder, EventTime

ARROW_TYPES: dict[str, pa.DataType] = {
    "string": pa.string(),
    "long": pa.int64(),
    "int": pa.int32(),
    "double": pa.float64(),
    "float": pa.float32(),
    "boolean": pa.bool_(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "binary": pa.binary(),
}

SPARK_TYPES = {
    "string": "STRING",
    "long": "BIGINT",
    "int": "INT",
    "double": "DOUBLE",
    "float": "FLOAT",
    "boolean": "BOOLEAN",
    "timestamp": "TIMESTAMP",
    "binary": "BINARY",
}

TIMESTAMP = pa.timestamp("us", tz="UTC")


HEADER = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
HEADERS = pa.list_(HEADER)
"""The ``headers`` column: a list of (key, value) structs, Spark's array<struct<key:string,value:binary>>.

A list and not a map, because Kafka allows a key more than once and gives headers an order (a
consumer may read the last ``trace`` as the one that counts); a map would drop duplicates and order.
It is Spark's own Kafka source's type, so SQL over both reads alike. An empty list: the message has
no headers (always so before message format v2). Null: not recorded (rows loaded before the column
existed), never for a row loaded since."""

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


def row_schema(decoder: Decoder) -> pa.Schema:
    """The Arrow schema of raw rows: metadata columns (spec.METADATA_COLUMNS), decoded fields, then
    dt and hour. ``timestamp_type`` is null where ``timestamp`` is (the message has none)."""
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
    ]
    if decoder.format == "raw":
        fields.append(pa.field("value", pa.binary()))
    else:
        fields.extend(pa.field(name, ARROW_TYPES[kind]) for name, kind in decoder.schema.items())
    fields += [pa.field("dt", pa.string()), pa.field("hour", pa.string())]
    return pa.schema(fields)


def spark_ddl(decoder: Decoder) -> str:
    """The same schema as Spark DDL: what the Spark source declares, and what readers of a raw
    layer read it with (a layer with files from before a column existed then has nulls there)."""
    return ddl_of(row_schema(decoder))


def spark_columns(decoder: Decoder) -> list[tuple[str, str]]:
    """(name, Spark type) of every raw column but the dt/hour partition columns, in order: the raw
    layer's table in a metastore (pipelines.catalog)."""
    return [(f.name, _spark_type(f.type)) for f in row_schema(decoder) if f.name not in ("dt", "hour")]


def ddl_of(schema: pa.Schema) -> str:
    """Spark DDL of an Arrow schema of the types raw rows use (every name quoted)."""
    return ", ".join(f"`{f.name}` {_spark_type(f.type)}" for f in schema)


_SPARK_OF_ARROW = {ARROW_TYPES[kind]: spark for kind, spark in SPARK_TYPES.items()}


def _spark_type(kind: pa.DataType) -> str:
    """The Spark type of an Arrow type: a field type's, or a list/struct of them (headers)."""
    if pa.types.is_list(kind):
        return f"ARRAY<{_spark_type(kind.value_type)}>"
    if pa.types.is_struct(kind):
        return "STRUCT<" + ", ".join(f"`{f.name}`: {_spark_type(f.type)}" for f in kind) + ">"
    if kind not in _SPARK_OF_ARROW:
        raise TypeError(f"no Spark type for the Arrow type {kind}")
    return _SPARK_OF_ARROW[kind]


_BOM = b"\xef\xbb\xbf"


def _suspicious(value: bytes | None, json_object: bool) -> bool:
    """Values a line-based chunk parse could misattribute or glue to a neighbour: parse them alone.
    For JSON, a value that is one line starting with '{' and ending with '}' yields exactly one row
    or an error (it cannot yield none, and cannot merge with the next line, which starts with '{'
    where the parser wants ',' or '}'), so a chunk of such values with as many rows as values maps
    row i to value i."""
    if value is None or b"\n" in value or b"\r" in value:
        return True
    stripped = value.removeprefix(_BOM).strip() if json_object else value.strip()
    if not stripped:
        return True
    return json_object and (stripped[:1] != b"{" or stripped[-1:] != b"}")


_BLANK_FIRST_BYTES = np.frombuffer(b" \t\n\r\x0b\x0c\xef", np.uint8)
"""First bytes that make a value need the careful path: whitespace, and the first byte of a BOM."""


def _all_plain(values: Sequence[bytes | None], json_object: bool) -> bool:
    """True if no value of the chunk is ``_suspicious``, checked for the whole chunk at C speed
    (the common case); False means "look at each value" (not that one is suspicious). A JSON value
    is plain if it is one line starting with '{' and ending with '}' exactly; a CSV value if it is
    one non-empty line not starting with whitespace."""
    return _plain_chunk(values, json_object) is not None


def _plain_chunk(values: Sequence[bytes | None], json_object: bool) -> bytes | None:
    """The values joined by newlines, what the parser reads, if ``_all_plain``; else None."""
    if not values or None in values:
        return None if values else b""
    lengths = np.fromiter(map(len, values), dtype=np.int64, count=len(values))  # type: ignore[arg-type]
    if not lengths.all():
        return None
    joined = b"\n".join(values)  # type: ignore[arg-type]
    if joined.count(b"\n") != len(values) - 1 or b"\r" in joined:
        return None
    data = np.frombuffer(joined, np.uint8)
    starts = np.zeros(len(values), np.int64)
    np.cumsum(lengths[:-1] + 1, out=starts[1:])
    first = data[starts]
    if json_object:
        plain = bool((first == ord("{")).all() and (data[starts + lengths - 1] == ord("}")).all())
    else:
        plain = not np.isin(first, _BLANK_FIRST_BYTES).any()
    return joined if plain else None


class _Parsed(NamedTuple):
    indexes: list[int]
    """Message indexes of the rows of ``table``, in order."""
    table: pa.Table


class ValueParser:
    """Parses message values into a table of the decoded fields (json or csv), message by message
    semantics at chunk speed. ``parse`` returns the parsed rows and the bad (index, reason) pairs."""

    def __init__(self, decoder: Decoder) -> None:
        self.decoder = decoder
        self.schema = pa.schema([pa.field(n, ARROW_TYPES[k]) for n, k in decoder.schema.items()])
        self.required = decoder.required
        if decoder.format == "json":
            self._chunk_options = pa_json.ParseOptions(explicit_schema=self.schema, unexpected_field_behavior="ignore")
            self._single_options = pa_json.ParseOptions(
                explicit_schema=self.schema, unexpected_field_behavior="ignore", newlines_in_values=True
            )
        else:
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
        if self.decoder.format == "json":
            options = self._single_options if single else self._chunk_options
            block = max(len(data) + 1, 1 << 20)
            table = pa_json.read_json(
                io.BytesIO(data), read_options=pa_json.ReadOptions(block_size=block), parse_options=options
            )
            return table.select(self.schema.names)
        return pa_csv.read_csv(
            io.BytesIO(data),
            read_options=self._csv_read,
            parse_options=self._single_csv if single else self._chunk_csv,
            convert_options=self._csv_convert,
        )

    def _parse_range(self, values: Sequence[bytes], lo: int, hi: int, joined: bytes | None = None) -> pa.Table:
        """Parse values[lo:hi] as one chunk (``joined``: those values joined by newlines already);
        raises ValueError if it is not exactly hi-lo good rows."""
        single = hi - lo == 1
        try:
            table = self._read(b"\n".join(values[lo:hi]) if joined is None else joined, single)
            table.validate(full=True)  # Arrow does not check UTF-8 while parsing JSON strings
        except (pa.ArrowException, ValueError) as exc:
            raise ValueError(_first_line(str(exc))) from exc
        if table.num_rows != hi - lo:
            raise ValueError(f"the value holds {table.num_rows} records, not one")
        for name in self.required:
            if table.column(name).null_count:
                raise ValueError(f"required field {name!r} is missing or null")
        return table

    def parse(self, values: Sequence[bytes | None]) -> tuple[list[_Parsed], list[tuple[int, str]]]:
        pieces: list[_Parsed] = []
        bad: list[tuple[int, str]] = []
        start = 0

        def run(lo: int, hi: int) -> None:
            if lo < hi:
                _bisect(lo, hi, lambda a, b: self._parse_range(values, a, b), pieces, bad)  # type: ignore[arg-type]

        json_object = self.decoder.format == "json"
        joined = _plain_chunk(values, json_object)
        if joined is not None:  # the common case: the chunk as joined for the check is parsed as it is
            whole = len(values)

            def attempt(lo: int, hi: int) -> pa.Table:
                return self._parse_range(values, lo, hi, joined if (lo, hi) == (0, whole) else None)  # type: ignore[arg-type]

            if whole:
                _bisect(0, whole, attempt, pieces, bad)
            return pieces, bad
        for i, value in enumerate(values):
            if _suspicious(value, json_object):
                run(start, i)
                if value is None:
                    bad.append((i, "the message has no value (null)"))
                elif json_object and not value.removeprefix(_BOM).strip().startswith(b"{"):
                    # also keeps a bare `null` away from Arrow's JSON reader, which crashes on it
                    bad.append((i, "the value is not a JSON object"))
                else:
                    run(i, i + 1)
                start = i + 1
        run(start, len(values))
        return pieces, bad


def _bisect(
    lo: int,
    hi: int,
    attempt: Callable[[int, int], pa.Table],
    pieces: list[_Parsed],
    bad: list[tuple[int, str]],
) -> None:
    """Apply ``attempt`` to [lo, hi); on failure split in halves until single items fail alone."""
    if lo >= hi:
        return
    try:
        table = attempt(lo, hi)
    except ValueError as exc:
        if hi - lo == 1:
            bad.append((lo, str(exc)))
            return
    else:
        pieces.append(_Parsed(list(range(lo, hi)), table))
        return
    middle = (lo + hi) // 2
    _bisect(lo, middle, attempt, pieces, bad)
    _bisect(middle, hi, attempt, pieces, bad)


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0][:300] if text.strip() else "unparseable"


class EventTimeResolver:
    """Computes each row's event time (UTC) and its dt/hour in the pipeline's time zone."""

    def __init__(self, event_time: EventTime, field_kind: str | None) -> None:
        self.event_time = event_time
        self.field_kind = field_kind
        self.zone_type = pa.timestamp("us", tz=event_time.timezone)

    def _convert(self, column: pa.Array) -> pa.Array:
        """The event times of ``column`` as timestamp[us, UTC]; ValueError if any is null or unparseable."""
        fmt = self.event_time.format
        try:
            if self.field_kind == "timestamp":
                result = column
            elif self.field_kind in ("long", "int", "double"):
                scale = {"epoch_millis": 1_000, "epoch_seconds": 1_000_000}.get(fmt)
                if scale is None:
                    raise ValueError(f"a numeric event time needs format epoch_millis or epoch_seconds, not {fmt}")
                # floor: sub-microsecond digits (time.time() values) are dropped, not an error
                micros = pc.floor(pc.multiply(column.cast(pa.float64()), float(scale))).cast(pa.int64())
                result = micros.cast(TIMESTAMP)
            elif fmt == "iso8601":
                # parsed at nanosecond precision (Java and Go write 9 digits), then truncated to µs
                try:
                    result = column.cast(pa.timestamp("ns", tz="UTC")).cast(TIMESTAMP, safe=False)
                except pa.ArrowInvalid:
                    naive = column.cast(pa.timestamp("ns"))
                    result = pc.assume_timezone(naive, self.event_time.timezone).cast(TIMESTAMP, safe=False)
            else:
                parsed = pc.strptime(column, format=fmt, unit="us", error_is_null=False)
                if parsed.type.tz is None:
                    parsed = pc.assume_timezone(parsed, self.event_time.timezone)
                result = parsed.cast(TIMESTAMP)
        except (pa.ArrowException, ValueError) as exc:
            raise ValueError(f"event time {self.event_time.field!r}: {_first_line(str(exc))}") from exc
        if result.null_count:
            raise ValueError(f"event time {self.event_time.field!r} is missing or null")
        return result

    def resolve(self, column: pa.Array) -> tuple[list[tuple[list[int], pa.Array]], list[tuple[int, str]]]:
        """Event times of the rows that have a valid one, and (row, reason) for those that do not."""
        pieces: list[Any] = []
        bad: list[tuple[int, str]] = []
        _bisect(0, len(column), lambda a, b: self._convert(column.slice(a, b - a)), pieces, bad)
        return [(p.indexes, p.table) for p in pieces], bad

    def partitions(self, times: pa.Array) -> tuple[pa.Array, pa.Array]:
        """dt (YYYY-MM-DD) and hour (HH) of UTC timestamps, in the pipeline's zone."""
        # strftime per row costs ten times more than flooring to the local hour and formatting
        # each distinct hour once (a chunk rarely spans more than two). The floor is taken on the
        # naive wall-clock time: flooring a zoned time fails on DST-ambiguous or skipped hours.
        wall_clock = pc.local_timestamp(times.cast(self.zone_type))
        hours = pc.dictionary_encode(pc.floor_temporal(wall_clock, 1, "hour"))
        distinct, indexes = hours.dictionary, hours.indices
        return (
            pc.strftime(distinct, format="%Y-%m-%d").take(indexes),
            pc.strftime(distinct, format="%H").take(indexes),
        )


class ChunkDecoder:
    """Decodes the chunks of one split into Arrow tables of rows (see the module doc)."""

    def __init__(self, decoder: Decoder, event_time: EventTime, topic: str, partition: int) -> None:
        self.decoder = decoder
        self.schema = row_schema(decoder)
        self.topic = topic
        self.partition = partition
        self.values = None if decoder.format == "raw" else ValueParser(decoder)
        field_kind = decoder.schema.get(event_time.field) if event_time.field else None
        self.event_time_field = event_time.field
        self.times = EventTimeResolver(event_time, field_kind)

    def decode(self, messages: Sequence[Message], broker: int) -> tuple[pa.Table, list[BadRecord]]:
        """Rows for the good messages (in offset order) and the bad ones with their reasons."""
        n = len(messages)
        bad_at: dict[int, str] = {}
        # whole-chunk columns, built without a Python-level loop per message
        values = list(map(itemgetter(4), messages))
        all_offsets = pa.array(list(map(itemgetter(0), messages)), pa.int64())
        all_stamps = pa.array(list(map(itemgetter(1), messages)), pa.int64())
        all_keys = pa.array(list(map(itemgetter(3), messages)), pa.binary())
        all_types = timestamp_types(all_stamps, np.fromiter(map(itemgetter(2), messages), np.int32, count=n))
        all_headers = headers_column(list(map(itemgetter(5), messages)))
        if self.values is None:
            fields = pa.table({"value": pa.array(values, pa.binary())})
            rows: list[int] | None = None  # None: every message, in order
        else:
            pieces, bad = self.values.parse(values)
            bad_at.update(bad)
            rows = None if not bad else [i for piece in pieces for i in piece.indexes]
            tables = [piece.table for piece in pieces]
            fields = pa.concat_tables(tables) if tables else self.values.schema.empty_table()
        stamps_ms = all_stamps if rows is None else all_stamps.take(pa.array(rows, pa.int64()))
        message_times = pc.if_else(pc.less(stamps_ms, 0), None, pc.multiply(stamps_ms, 1000)).cast(TIMESTAMP)

        if self.event_time_field is None:
            times, bad = _split_missing(message_times)
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
        }
        for name in fields.column_names:
            columns[name] = fields.column(name)
        columns["dt"] = dt
        columns["hour"] = hour
        table = pa.table(columns, schema=self.schema)
        bad_records = [_bad_record(messages[i], reason) for i, reason in sorted(bad_at.items())]
        return table, bad_records


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


def _split_missing(times: pa.Array) -> tuple[list[tuple[list[int], pa.Array]], list[tuple[int, str]]]:
    """Message timestamps as event times: a message without one (Kafka 0.9 writes none) cannot be
    placed in time, so it is a bad record unless an event_time.field is configured."""
    if times.null_count == 0:
        return ([(list(range(len(times))), times)] if len(times) else []), []
    valid = times.is_valid().to_pylist()
    good = [i for i, ok in enumerate(valid) if ok]
    bad = [(i, "the message has no timestamp and event_time.field is not set") for i, ok in enumerate(valid) if not ok]
    return ([(good, times.take(pa.array(good, pa.int64())))] if good else []), bad
