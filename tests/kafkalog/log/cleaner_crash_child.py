"""A child process for the cleaner's crash tests: writes a keyed log, then cleans it until a crash
point kills it (or to the end). Usage: python cleaner_crash_child.py DATA_DIR."""

from __future__ import annotations

import sys

from kafkalog.log import LogConfig, LogManager
from kafkalog.log.cleaner.settings import CleanerSettings
from kafkalog.record.batch_format import RecordInput, encode_batch

NOW = 1_700_000_000_000
CONFIG = LogConfig(
    segment_bytes=1200, index_interval_bytes=100, retention_ms=None, flush_ms=None, cleanup_policy="compact",
    min_cleanable_dirty_ratio=0.01, delete_retention_ms=0,
)  # fmt: skip
"""Small segments (several groups per pass), tombstones removed at once (delete.retention.ms 0)."""


EXTRA = (b"first", b"last")
"""Keys of the two records that close the writing and start the second round: not in ``history``."""


def history() -> list[tuple[bytes, bytes | None]]:
    """What the child appends, in order: 240 records over 25 keys, every 11th a tombstone."""
    return [(b"key-%02d" % (i * 7 % 25), None if i % 11 == 10 else b"value-%04d" % i) for i in range(240)]


def main(data_dir: str) -> None:
    with LogManager([data_dir], CONFIG, cleaner=CleanerSettings(dedupe_buffer_bytes=24 * 1024)) as manager:
        log = manager.get_or_create_log("crash", 0)
        if log.log_end_offset == 0:
            for key, value in history():
                log.append(encode_batch([RecordInput(key, value, NOW)]))
            log.append(encode_batch([RecordInput(b"first", b"x", NOW)]))
            log.roll()
        while manager.cleaner.clean_once(NOW + 1) is not None:
            pass
        last = log.read_messages(log.log_end_offset - 1)
        if not last or last[-1].key != b"last":  # once: passes past the deletes' first ones
            for now in (NOW + 2, NOW + 3):
                log.append(encode_batch([RecordInput(b"last", b"x", NOW)]))
                log.roll()
                while manager.cleaner.clean_once(now) is not None:
                    pass


if __name__ == "__main__":
    main(sys.argv[1])
