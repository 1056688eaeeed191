"""Each row's event time (UTC) and its dt/hour partition in the pipeline's time zone.

Role: ``event_time`` of pipelines.config.pipeline applied to a chunk's rows: a field's values
converted (timestamps, epoch numbers, ISO 8601 or strptime text) or, without a field, the
messages' own timestamps. A row without a valid event time is a bad record (it cannot be placed in
a partition); the rest keep their order.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pipelines.config.pipeline import EventTime
from pipelines.executor.arrow_types import TIMESTAMP
from pipelines.executor.halving import first_line, halve_until_culprits


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
            raise ValueError(f"event time {self.event_time.field!r}: {first_line(str(exc))}") from exc
        if result.null_count:
            raise ValueError(f"event time {self.event_time.field!r} is missing or null")
        return result

    def resolve(self, column: pa.Array) -> tuple[list[tuple[list[int], pa.Array]], list[tuple[int, str]]]:
        """Event times of the rows that have a valid one, and (row, reason) for those that do not."""
        pieces: list[Any] = []
        bad: list[tuple[int, str]] = []
        halve_until_culprits(0, len(column), lambda a, b: self._convert(column.slice(a, b - a)), pieces, bad)
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


def message_times_only(times: pa.Array) -> tuple[list[tuple[list[int], pa.Array]], list[tuple[int, str]]]:
    """Message timestamps as event times: a message without one (Kafka 0.9 writes none) cannot be
    placed in time, so it is a bad record unless an event_time.field is configured."""
    if times.null_count == 0:
        return ([(list(range(len(times))), times)] if len(times) else []), []
    valid = times.is_valid().to_pylist()
    good = [i for i, ok in enumerate(valid) if ok]
    bad = [(i, "the message has no timestamp and event_time.field is not set") for i, ok in enumerate(valid) if not ok]
    return ([(good, times.take(pa.array(good, pa.int64())))] if good else []), bad
