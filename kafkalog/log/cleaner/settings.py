"""The log cleaner's broker-wide settings (Kafka's ``log.cleaner.*``): typed, frozen, validated once."""

from __future__ import annotations

from dataclasses import dataclass

from kafkalog.errors import LogConfigError
from kafkalog.log.cleaner.offset_map import MIN_MAP_BYTES


@dataclass(frozen=True, slots=True)
class CleanerSettings:
    """How the broker's cleaner thread compacts the logs whose cleanup.policy includes compact."""

    enabled: bool = True
    """Run the cleaner (Kafka's ``log.cleaner.enable``). Off, compacted topics grow without end."""

    dedupe_buffer_bytes: int = 128 * 1024 * 1024
    """The offset map's memory (Kafka's ``log.cleaner.dedupe.buffer.size``): 24 bytes per key at a
    load factor of 0.9, so the default holds about 5 million keys per pass; a log with more keys in
    its dirty section is cleaned in several passes. Taken when the first compacted log is cleaned."""

    io_buffer_bytes: int = 1024 * 1024
    """How much of a segment the cleaner reads, and writes, at a time: also the longest stretch its
    kernels hold the interpreter (a few milliseconds a MiB) from the threads serving clients."""

    backoff_ms: int = 15_000
    """How long the cleaner sleeps when no log is dirty enough (Kafka's ``log.cleaner.backoff.ms``)."""

    load_factor: float = 0.9
    """How full the offset map gets before a pass stops reading (Kafka's
    ``log.cleaner.io.buffer.load.factor``, here the map's)."""

    def __post_init__(self) -> None:
        def need(condition: bool, key: str, rule: str) -> None:
            if not condition:
                raise LogConfigError(f"{key}: {rule}, not {getattr(self, key)!r}")

        need(self.dedupe_buffer_bytes >= MIN_MAP_BYTES, "dedupe_buffer_bytes", f"must be at least {MIN_MAP_BYTES}")
        need(self.io_buffer_bytes >= 64 * 1024, "io_buffer_bytes", "must be at least 65536")
        need(self.backoff_ms >= 1, "backoff_ms", "must be >= 1")
        need(0.1 <= self.load_factor < 1, "load_factor", "must be in [0.1, 1)")
