"""Shared helpers of the log tests: message sets, a settable clock, and log-wide oracles."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kafkalog.log import Log, LogConfig
from kafkalog.log.faults import CRASH_EXIT_CODE
from kafkalog.record import Codec, Message, MessageSetBuilder, decode_messages

SMALL = LogConfig(segment_bytes=4096, index_interval_bytes=256, retention_ms=None, flush_ms=None, message_format=1)
"""A v1 log (message sets): these suites pin down its byte-level behaviour; test_log_v2 covers v2."""


class FakeClock:
    """A clock the test moves by hand (milliseconds)."""

    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def message_set(
    values: list[bytes],
    *,
    timestamps: list[int] | None = None,
    magic: int = 1,
    codec: Codec = Codec.NONE,
    keys: list[bytes | None] | None = None,
) -> bytes:
    builder = MessageSetBuilder(magic=magic, codec=codec)
    for i, value in enumerate(values):
        builder.append(value, keys[i] if keys else None, timestamps[i] if timestamps else None)
    return builder.build()


def fill(log: Log, count: int, *, per_set: int = 5, start_ts: int = 1000, payload: int = 40) -> list[bytes]:
    """Append ``count`` messages whose value names their offset; return the values in order."""
    values = []
    while len(values) < count:
        n = min(per_set, count - len(values))
        batch = [f"m{log.log_end_offset + i:06d}".encode().ljust(payload, b".") for i in range(n)]
        stamps = [start_ts + log.log_end_offset + i for i in range(n)]
        log.append(message_set(batch, timestamps=stamps))
        values += batch
    return values


def read_all(log: Log) -> list[Message]:
    """Every message from the log start to the end, read through the public read path."""
    out: list[Message] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        batch = log.read_messages(offset, 64 * 1024)
        if not batch:
            break
        out += batch
        offset = batch[-1].offset + 1
    return out


def scan_files(directory: Path) -> list[Message]:
    """Every message in the .log files of ``directory``, decoded straight from disk (an oracle
    independent of the log's indexes)."""
    out: list[Message] = []
    for path in sorted(directory.glob("*.log")):
        out += list(decode_messages(path.read_bytes()))
    return out


def flip_bit(path: Path, position: int, bit: int = 0) -> None:
    with path.open("r+b") as f:
        f.seek(position)
        byte = f.read(1)[0]
        f.seek(position)
        f.write(bytes([byte ^ (1 << bit)]))


def truncate(path: Path, size: int) -> None:
    os.truncate(path, size)


def run_crash_child(child: Path, data_dir: Path, crash_at: str | None) -> subprocess.CompletedProcess[str]:
    """Run a crash-test child script on ``data_dir``, killed at ``crash_at`` (KAFKALOG_CRASH_AT) if
    given; fails the test unless it ended normally or at its crash point."""
    env = {**os.environ, "PYTHONPATH": str(Path.cwd())}
    env.pop("KAFKALOG_CRASH_AT", None)
    if crash_at:
        env["KAFKALOG_CRASH_AT"] = crash_at
    done = subprocess.run(
        [sys.executable, str(child), str(data_dir)], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    if done.returncode not in (0, CRASH_EXIT_CODE):
        pytest.fail(f"child failed ({done.returncode}): {done.stderr[-2000:]}")
    return done
