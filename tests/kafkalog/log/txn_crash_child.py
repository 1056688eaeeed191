"""A child process for transaction crash tests: transactions (two producers interleaved, every
other one aborted) on a LogManager until a crash point kills it.

Usage: python txn_crash_child.py DATA_DIR. The parent works out from the segment files what the
reopened log must know (the aborted transactions and the last stable offset).
"""

from __future__ import annotations

import sys

from kafkalog.log import LogConfig, LogManager
from kafkalog.record.batch_format import encode_batch

CONFIG = LogConfig(segment_bytes=1500, index_interval_bytes=128, retention_ms=None, flush_messages=5)


def batch(producer: int, sequence: int) -> bytes:
    records = [(None, f"{producer}/{sequence + i}".encode().ljust(40, b"."), 1000, ()) for i in range(3)]
    return encode_batch(records, producer_id=producer, producer_epoch=0, base_sequence=sequence, transactional=True)


def main(data_dir: str) -> None:
    manager = LogManager([data_dir], CONFIG)
    log = manager.get_or_create_log("txn", 0)
    sequences = {1: 0, 2: 0}

    def write(producer: int) -> None:
        log.append(batch(producer, sequences[producer]))
        sequences[producer] += 3

    for round_number in range(60):
        # producer 1 opens, producer 2 opens, producer 1 ends, producer 2 writes again and ends
        write(1)
        write(2)
        log.append_marker(1, 0, commit=round_number % 2 == 0, coordinator_epoch=0)
        write(2)
        log.append_marker(2, 0, commit=round_number % 3 == 0, coordinator_epoch=0)
        if round_number % 7 == 6:
            manager.checkpoint()
    manager.close()


if __name__ == "__main__":
    main(sys.argv[1])
