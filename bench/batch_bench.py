"""Message format v2 on one core: record batches encoded, validated for append, appended to a log and
decoded, beside message format v1 (message sets) measured the same way in the same run.

``python -m bench.batch_bench [--messages N] [--batch N] [--repeat N]``. Every figure is the median
of ``--repeat`` runs, in messages per second; the output ends with ``RESULT`` lines. The log append
goes through ``Log.append`` (validation, offsets, file write, indexes) with fsync left to the OS, as
the broker's default flush policy does between flushes.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.log_bench import payloads
from bench.results import print_results, result
from kafkalog.log import Log, LogConfig
from kafkalog.record import Codec, MessageSetBuilder, decode_all
from kafkalog.record.batch_format import RecordInput, encode_batch
from kafkalog.record.kernels import NATIVE
from kafkalog.record.validate import validate_for_append

TS = 1_700_000_000_000


def rate(messages: int, run: Callable[[], None], repeat: int) -> float:
    def once() -> float:
        began = time.perf_counter()
        run()
        return messages / (time.perf_counter() - began)

    once()  # warm-up
    return statistics.median(once() for _ in range(repeat))


def v1_sets(values: list[bytes], per: int, codec: Codec) -> list[bytes]:
    out = []
    for start in range(0, len(values), per):
        builder = MessageSetBuilder(codec=codec)
        for value in values[start : start + per]:
            builder.append(value, None, TS)
        out.append(builder.build())
    return out


def v2_batches(values: list[bytes], per: int, codec: Codec) -> list[bytes]:
    return [
        encode_batch([RecordInput(None, value, TS) for value in values[start : start + per]], codec=codec)
        for start in range(0, len(values), per)
    ]


def append_all(sets: list[bytes], message_format: int) -> None:
    directory = Path(tempfile.mkdtemp(prefix="batch-bench-"))
    try:
        log = Log(directory / "t-0", LogConfig(message_format=message_format, flush_ms=None, retention_ms=None))
        for data in sets:
            log.append(data)
        log.close()
    finally:
        shutil.rmtree(directory)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=1000, help="messages per batch (or message set)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 20,000 messages, 1 repeat")
    args = parser.parse_args(argv)
    if args.quick:
        args.messages, args.repeat = 20_000, 1
    n, per, repeat = args.messages, args.batch, args.repeat
    values = payloads(n)
    print(f"{n:,} messages of 200 bytes in batches of {per}, C kernels: {NATIVE}, median of {repeat}")
    for codec in (Codec.NONE, Codec.LZ4, Codec.ZSTD):
        measure(values, per, repeat, codec)
    print_results()


def measure(values: list[bytes], per: int, repeat: int, codec: Codec) -> None:
    n, name = len(values), codec.name.lower()
    v2 = v2_batches(values, per, codec)
    result(f"v2_encode_{name}", rate(n, lambda: v2_batches(values, per, codec), repeat), "msgs/s")
    result(
        f"v2_validate_{name}",
        rate(n, lambda: [validate_for_append(b, 0, now_ms=TS, message_format=2) for b in v2], repeat),
        "msgs/s",
    )
    result(f"v2_append_{name}", rate(n, lambda: append_all(v2, 2), repeat), "msgs/s")
    result(f"v2_decode_{name}", rate(n, lambda: [decode_all(b) for b in v2], repeat), "msgs/s")
    if codec == Codec.ZSTD:
        return  # message format v1 has no zstd
    v1 = v1_sets(values, per, codec)
    result(f"v1_append_{name}", rate(n, lambda: append_all(v1, 1), repeat), "msgs/s")
    result(f"v1_decode_{name}", rate(n, lambda: [decode_all(s) for s in v1], repeat), "msgs/s")


if __name__ == "__main__":
    main()
