"""A child process for crash tests: appends to a LogManager until a crash point kills it.

Usage: python crash_child.py DATA_DIR. Prints "ACK <first> <last>" (flushed) after every append
returns, so the parent knows exactly which messages were acknowledged before the crash.
"""

from __future__ import annotations

import sys

from kafkalog.log import LogConfig, LogManager
from kafkalog.record import MessageSetBuilder

CONFIG = LogConfig(
    segment_bytes=2048, index_interval_bytes=128, retention_bytes=6000, retention_ms=None, flush_messages=7
)


def value(offset: int) -> bytes:
    return f"v{offset:06d}".encode().ljust(60, b"-")


def main(data_dir: str) -> None:
    manager = LogManager([data_dir], CONFIG)
    log = manager.get_or_create_log("crash", 0)
    for round_number in range(200):
        builder = MessageSetBuilder()
        for i in range(3):
            builder.append(value(log.log_end_offset + i), timestamp=1000 + log.log_end_offset + i)
        info = log.append(builder.build())
        print(f"ACK {info.first_offset} {info.last_offset}", flush=True)
        if round_number % 5 == 4:
            manager.enforce_retention()
            manager.checkpoint()
    manager.close()
    print("CLOSED", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
