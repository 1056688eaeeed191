"""Configuration of one partition log (LogConfig): typed, frozen, validated when built."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal

from kafkalog.errors import LogConfigError
from kafkalog.record.codec import DEFAULT_MAX_DECOMPRESSED_BYTES

_MAX_SEGMENT_BYTES = 2**31 - 1  # positions in the offset index are int32
_INDEX_ENTRY = 8

DAY_MS = 24 * 60 * 60 * 1000


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Settings of a partition log. Durations in milliseconds; ``None`` switches a limit off.

    What an acknowledged append survives (see docs/log.md): once ``Log.append`` returns, the
    bytes are in the operating system's page cache, so they survive the broker process being killed.
    They survive a power loss or kernel crash only once fsynced: after at most ``flush_messages``
    further messages or ``flush_ms`` milliseconds, whichever comes first. ``flush_messages=1`` makes
    every append fsync before it returns.
    """

    segment_bytes: int = 1024 * 1024 * 1024
    """Roll to a new segment before the active one would exceed this many bytes."""

    segment_ms: int | None = 7 * DAY_MS
    """Roll a non-empty active segment once this long has passed since its first append."""

    index_interval_bytes: int = 4096
    """Bytes of log between two entries of the sparse offset and time indexes."""

    index_max_bytes: int = 10 * 1024 * 1024
    """Size each index file is preallocated to; a segment rolls when its index is full."""

    flush_messages: int | None = None
    """Fsync after this many messages appended since the last fsync (None: no count limit)."""

    flush_ms: int | None = 1000
    """Fsync once the oldest unflushed append is this old (None: no time limit; checked on append
    and by the LogManager's background flusher)."""

    retention_ms: int | None = 7 * DAY_MS
    """Delete a segment once its newest message timestamp is older than this (None: keep forever)."""

    retention_bytes: int | None = None
    """Delete the oldest segments while the log is larger than this (None: no size limit)."""

    max_message_bytes: int = 1_000_012
    """Largest entry (a message, or a compressed wrapper) an append accepts."""

    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES
    """Largest decompressed payload of one compressed wrapper an append accepts."""

    message_format: Literal[1, 2] = 2
    """What the log stores: message format v2 (record batches: headers, zstd, producer ids) or v1
    (message sets, for clients of the 0.10 era). Whatever a producer sends is converted to it;
    a partition may hold both (written before and after a change), and readers take each entry as
    its magic says."""

    message_timestamp_type: Literal["create_time", "log_append_time"] = "create_time"
    """Keep producers' timestamps, or stamp every message with the broker's append time. Messages
    without a timestamp (magic 0, or -1) are stamped with the append time either way."""

    producer_id_expiration_ms: int = DAY_MS
    """An idempotent producer that appended nothing to the partition for this long is forgotten
    (Kafka's ``producer.id.expiration.ms``): a retry of its last batch after that is appended again."""

    cleanup_policy: Literal["delete", "compact", "compact,delete"] = "delete"
    """What keeps the log from growing without end (Kafka's ``cleanup.policy``): ``delete`` removes
    whole segments by retention (``retention_ms``, ``retention_bytes``); ``compact`` keeps the latest
    message of every key (the log cleaner, kafkalog.log.cleaner) and retention deletes nothing;
    ``compact,delete`` does both."""

    min_cleanable_dirty_ratio: float = 0.5
    """A compacted log is cleaned once the share of its cleanable bytes not yet cleaned (the dirty
    section) is at least this (Kafka's ``min.cleanable.dirty.ratio``)."""

    min_compaction_lag_ms: int = 0
    """A message stays uncompacted at least this long after its timestamp (Kafka's
    ``min.compaction.lag.ms``): consumers that far behind still see every value."""

    max_compaction_lag_ms: int | None = None
    """A message is compacted at most this long after its timestamp, whatever the dirty ratio (the
    active segment is rolled for it too): Kafka's ``max.compaction.lag.ms``; None: no bound."""

    delete_retention_ms: int = DAY_MS
    """How long the cleaner keeps a tombstone (a message with a null value) and a transaction
    marker whose data is gone, after the pass that first cleaned them (the broker's clock, never the
    records' timestamps): a consumer reading a compacted log again within this time sees every
    delete (Kafka's ``delete.retention.ms``)."""

    compression_type: Literal["producer"] = "producer"
    """How batches are compressed in the log (Kafka's topic ``compression.type``): as their producer
    compressed them, Kafka's default. Kafka's other values (``lz4``, ``zstd``, ``uncompressed``...)
    make its broker recompress every batch into that codec; this log does not recompress, and refuses
    them (a producer's own ``compression.type`` gives the log that codec)."""

    on_corruption: Literal["quarantine", "fail"] = "quarantine"
    """What opening a log does when flushed data fails validation (data that no torn write can
    explain): ``quarantine`` opens the partition read-only, serving everything before the bad
    message and refusing appends; ``fail`` refuses to open it. Either way nothing is truncated."""

    def __post_init__(self) -> None:
        def need(condition: bool, field: str, rule: str) -> None:
            if not condition:
                raise LogConfigError(f"{field}: {rule}, not {getattr(self, field)!r}")

        for f in fields(self):
            value = getattr(self, f.name)
            if (
                f.type in ("int", "int | None")
                and value is not None
                and (not isinstance(value, int) or isinstance(value, bool))
            ):
                raise LogConfigError(f"{f.name}: must be an integer, not {value!r}")
        need(64 <= self.segment_bytes <= _MAX_SEGMENT_BYTES, "segment_bytes", f"must be in [64, {_MAX_SEGMENT_BYTES}]")
        need(self.segment_ms is None or self.segment_ms > 0, "segment_ms", "must be positive or None")
        need(self.index_interval_bytes >= 0, "index_interval_bytes", "must be >= 0")
        need(self.index_max_bytes >= 4 * _INDEX_ENTRY, "index_max_bytes", "must be at least 32")
        need(self.flush_messages is None or self.flush_messages > 0, "flush_messages", "must be positive or None")
        need(self.flush_ms is None or self.flush_ms >= 0, "flush_ms", "must be >= 0 or None")
        need(self.retention_ms is None or self.retention_ms >= 0, "retention_ms", "must be >= 0 or None")
        need(self.retention_bytes is None or self.retention_bytes >= 0, "retention_bytes", "must be >= 0 or None")
        need(self.max_message_bytes > 0, "max_message_bytes", "must be positive")
        need(self.max_decompressed_bytes > 0, "max_decompressed_bytes", "must be positive")
        need(self.producer_id_expiration_ms > 0, "producer_id_expiration_ms", "must be positive")
        need(self.compression_type == "producer", "compression_type", "must be producer (batches are kept as sent)")
        need(
            self.message_timestamp_type in ("create_time", "log_append_time"),
            "message_timestamp_type",
            "must be create_time or log_append_time",
        )
        need(self.on_corruption in ("quarantine", "fail"), "on_corruption", "must be quarantine or fail")
        need(self.message_format in (1, 2), "message_format", "must be 1 or 2")
        need(
            self.cleanup_policy in ("delete", "compact", "compact,delete"),
            "cleanup_policy",
            "must be delete, compact or compact,delete",
        )
        ratio = self.min_cleanable_dirty_ratio
        need(
            isinstance(ratio, (int, float)) and not isinstance(ratio, bool) and 0 <= ratio <= 1,
            "min_cleanable_dirty_ratio",
            "must be a number in [0, 1]",
        )
        need(self.min_compaction_lag_ms >= 0, "min_compaction_lag_ms", "must be >= 0")
        need(
            self.max_compaction_lag_ms is None or self.max_compaction_lag_ms >= 1,
            "max_compaction_lag_ms",
            "must be >= 1 or None",
        )
        need(self.delete_retention_ms >= 0, "delete_retention_ms", "must be >= 0")
        need(
            not (self.compact and self.message_format != 2),
            "cleanup_policy",
            "compaction needs message format v2 (record batches): message_format is 1",
        )

    @property
    def compact(self) -> bool:
        """True when the log cleaner compacts this log."""
        return self.cleanup_policy != "delete"

    @property
    def delete(self) -> bool:
        """True when retention deletes old segments of this log."""
        return self.cleanup_policy != "compact"

    @property
    def log_append_time(self) -> bool:
        """True when every message is stamped with the append time."""
        return self.message_timestamp_type == "log_append_time"
