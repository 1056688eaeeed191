"""Segment-log benchmarks: append, read (raw region and decode+CRC), recovery, and cost at 1 vs 10 GB,
each beside the machine's limits measured in the same run (data-dir write/read bandwidth, crc32).

Every figure is the median of ``--repeat`` runs. Output ends with ``RESULT <name> <value> <unit>``
lines. One core: everything runs in this one thread.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path

from bench.results import print_results, result
from kafkalog.log import Log, LogConfig
from kafkalog.record import Codec, MessageSetBuilder, decode_all
from kafkalog.record.kernels import NATIVE

MESSAGE_BYTES = 200
MiB = 1024 * 1024
GiB = 1024 * MiB


def median_of(repeat: int, run: Callable[[], float]) -> float:
    return statistics.median(run() for _ in range(repeat))


def payloads(count: int) -> list[bytes]:
    """200-byte JSON-ish page-view events: realistic enough for compression ratios."""
    rng = random.Random(42)
    pages = ["/home", "/search", "/item/%d", "/cart", "/checkout", "/profile/%d"]
    agents = ["Mozilla/5.0 (X11; Linux x86_64)", "Mozilla/5.0 (Macintosh)", "curl/8.5"]
    out = []
    for i in range(count):
        page = rng.choice(pages)
        text = (
            f'{{"user":{rng.randrange(10**6)},"page":"{page % rng.randrange(999) if "%" in page else page}",'
            f'"agent":"{rng.choice(agents)}","ts":{1_700_000_000_000 + i}}}'
        )
        out.append(text.encode().ljust(MESSAGE_BYTES, b" ")[:MESSAGE_BYTES])
    return out


def build_set(values: list[bytes], codec: Codec) -> bytes:
    builder = MessageSetBuilder(codec=codec)
    for value in values:
        builder.append(value, None, 1_700_000_000_000)
    return builder.build()


# ---------------------------------------------------------------------------- limits


def disk_limits(directory: Path, size: int, repeat: int) -> tuple[float, float]:
    """Sequential write (to the page cache, 1 MiB writes, fsync at the end) and read (warm) MB/s."""
    path = directory / "bandwidth.bin"
    block = os.urandom(MiB)

    def write() -> float:
        start = time.perf_counter()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        for _ in range(size // MiB):
            os.write(fd, block)
        os.fsync(fd)
        os.close(fd)
        return size / (time.perf_counter() - start) / 1e6

    def read() -> float:
        buffer = bytearray(MiB)
        start = time.perf_counter()
        with path.open("rb", buffering=0) as f:
            while f.readinto(buffer):
                pass
        return size / (time.perf_counter() - start) / 1e6

    write_mb = median_of(repeat, write)
    read_mb = median_of(repeat, read)
    path.unlink()
    return write_mb, read_mb


def crc_limits(message_set: bytes, count: int, repeat: int) -> tuple[float, float]:
    """zlib.crc32 over the same bytes: in one pass (MB/s) and once per message, as the format needs
    (messages/s, called from C so that only the CRC itself is counted)."""
    entry = len(message_set) // count

    def bulk() -> float:
        start = time.perf_counter()
        zlib.crc32(message_set)
        return len(message_set) / (time.perf_counter() - start) / 1e6

    def per_message() -> float:
        view = memoryview(message_set)
        crc = zlib.crc32
        start = time.perf_counter()
        for position in range(0, len(message_set), entry):
            crc(view[position + 16 : position + entry])
        return count / (time.perf_counter() - start)

    return median_of(repeat, bulk), median_of(repeat, per_message)


# ---------------------------------------------------------------------------- the log


def bare_write_rate(directory: Path, data: bytes, per_set: int, total: int, repeat: int) -> float:
    """Messages/s if appending were nothing but writing the same bytes in the same pieces."""

    def run() -> float:
        path = directory / "bare.bin"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        rounds = max(1, total // per_set)
        position = 0
        start = time.perf_counter()
        for _ in range(rounds):
            os.pwrite(fd, data, position)
            position += len(data)
        elapsed = time.perf_counter() - start
        os.close(fd)
        path.unlink()
        return rounds * per_set / elapsed

    return median_of(repeat, run)


def append_rate(directory: Path, data: bytes, per_set: int, total: int, repeat: int) -> tuple[float, float]:
    """(messages/s, MB/s of log written) appending ``data`` (one set) until ``total`` messages."""

    def run() -> float:
        path = Path(tempfile.mkdtemp(dir=directory))
        log = Log(path / "bench-0", LogConfig(retention_ms=None))
        rounds = max(1, total // per_set)
        start = time.perf_counter()
        for _ in range(rounds):
            log.append(data)
        elapsed = time.perf_counter() - start
        log.close()
        shutil.rmtree(path)
        return rounds * per_set / elapsed

    rate = median_of(repeat, run)
    return rate, rate / per_set * len(data) / 1e6


def make_log(path: Path, size: int, data: bytes) -> Log:
    log = Log(path, LogConfig(retention_ms=None, flush_ms=None))
    while log.size_in_bytes < size:
        log.append(data)
    log.flush()
    return log


def read_rates(log: Log, max_bytes: int, repeat: int, budget: int) -> tuple[float, float, float]:
    """Sequential reads from the start of the log: (raw MB/s, raw messages/s, decode+CRC messages/s),
    reading ``budget`` bytes per run. Raw = the region's bytes, as sendfile would ship them."""
    entry = 12 + 22 + MESSAGE_BYTES

    def raw() -> float:
        offset, done = log.log_start_offset, 0
        start = time.perf_counter()
        while done < budget and offset < log.log_end_offset:
            info = log.read(offset, max_bytes)
            assert info.region is not None
            with info.region as region:
                data = region.read()
            done += len(data)
            offset += len(data) // entry
        return done / (time.perf_counter() - start)

    def decoded() -> float:
        offset, count = log.log_start_offset, 0
        start = time.perf_counter()
        while count * entry < budget and offset < log.log_end_offset:
            info = log.read(offset, max_bytes)
            assert info.region is not None
            with info.region as region:
                messages = decode_all(region.read(), min_offset=offset)
            count += len(messages)
            offset = messages[-1].offset + 1
        return count / (time.perf_counter() - start)

    raw_bytes = median_of(repeat, raw)
    return raw_bytes / 1e6, raw_bytes / entry, median_of(repeat, decoded)


def random_read_rate(log: Log, reads: int, repeat: int) -> float:
    """Random 64 KiB reads across the whole log, decoded: messages/s."""
    rng = random.Random(1)

    def run() -> float:
        count = 0
        start = time.perf_counter()
        for _ in range(reads):
            offset = rng.randrange(log.log_start_offset, log.log_end_offset)
            count += len(log.read_messages(offset, 64 * 1024))
        return count / (time.perf_counter() - start)

    return median_of(repeat, run)


def recovery_seconds_per_gb(path: Path, repeat: int) -> float:
    size = sum(p.stat().st_size for p in path.glob("*.log"))

    def run() -> float:
        start = time.perf_counter()
        log = Log(path, LogConfig(retention_ms=None), recovery_point=0, clean_shutdown=False)
        elapsed = time.perf_counter() - start
        assert log.corruption is None
        log.close()
        return elapsed

    return median_of(repeat, run) / (size / GiB)


# ---------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", type=Path, default=None, help="data directory to use (default: a temp dir)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run, not for the record")
    parser.add_argument("--big-gb", type=float, default=10.0, help="size of the large log (GB)")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="kafkalog-bench-", dir=args.dir))
    quick = args.quick
    repeat = 1 if quick else args.repeat
    small_log_bytes = 64 * MiB if quick else GiB
    big_log_bytes = 128 * MiB if quick else int(args.big_gb * GiB)
    print(f"# kafkalog log benchmarks: {MESSAGE_BYTES}-byte messages, native kernels: {NATIVE}, dir: {root}")
    try:
        values = payloads(1000)
        write_mb, read_mb = disk_limits(root, 256 * MiB if quick else GiB, repeat)
        set1000 = build_set(values, Codec.NONE)
        crc_mb, crc_msgs = crc_limits(set1000 * 100, 100_000, repeat)
        print(f"limits: data dir write {write_mb:,.0f} MB/s, read {read_mb:,.0f} MB/s; "
              f"crc32 {crc_mb:,.0f} MB/s in one pass, {crc_msgs:,.0f} msgs/s one call per message")  # fmt: skip
        result("limit_disk_write", write_mb, "MB/s")
        result("limit_disk_read", read_mb, "MB/s")
        result("limit_crc32_bulk", crc_mb, "MB/s")
        result("limit_crc32_per_message", crc_msgs, "msgs/s")

        print("\nappend (messages per set x codec): msgs/s, MB/s of log written")
        for per_set in (1, 50, 1000):
            for codec in (Codec.NONE, Codec.GZIP, Codec.SNAPPY):
                data = build_set(values[:per_set], codec)
                total = {1: 100_000, 50: 1_000_000, 1000: 2_000_000}[per_set]
                if codec == Codec.GZIP:
                    total //= 4
                if quick:
                    total //= 20
                msgs, mb = append_rate(root, data, per_set, total, repeat)
                name = f"append_set{per_set}_{codec.name.lower()}"
                line = f"  {per_set:>4} x {codec.name.lower():<6} {msgs:>12,.0f} msgs/s {mb:>8,.0f} MB/s"
                result(name, msgs, "msgs/s")
                result(f"{name}_mb", mb, "MB/s")
                if codec == Codec.NONE:
                    bare = bare_write_rate(root, data, per_set, total, repeat)
                    line += f"   bare pwrite of the same pieces {bare:,.0f} msgs/s: ratio {msgs / bare:.2f}"
                    result(f"{name}_vs_bare_write", msgs / bare, "ratio")
                print(line)

        data = build_set(values, Codec.NONE)
        small = make_log(root / "small-0", small_log_bytes, data)
        budget = 64 * MiB if quick else 512 * MiB
        raw_mb, raw_msgs, decoded = read_rates(small, MiB, repeat, budget)
        print(f"\nread 1 MiB regions: raw {raw_mb:,.0f} MB/s ({raw_msgs:,.0f} msgs/s, "
              f"{raw_mb / read_mb:.2f} of disk read); "
              f"decode+CRC {decoded:,.0f} msgs/s ({decoded / crc_msgs:.2f} of per-message crc32)")  # fmt: skip
        result("read_raw", raw_mb, "MB/s")
        result("read_raw_msgs", raw_msgs, "msgs/s")
        result("read_decode_crc", decoded, "msgs/s")

        small.close()
        per_gb = recovery_seconds_per_gb(root / "small-0", repeat)
        print(f"\nrecovery (full scan, CRC of every message, index rebuild): {per_gb:.2f} s per GiB")
        result("recovery", per_gb, "s/GiB")
        small = Log(root / "small-0", LogConfig(retention_ms=None, flush_ms=None), clean_shutdown=True)

        print(
            f"\ncost at {small_log_bytes / GiB:.2f} GiB vs {big_log_bytes / GiB:.2f} GiB "
            "(sets of 50, random 64 KiB reads)"
        )
        set50 = build_set(values[:50], Codec.NONE)
        big = make_log(root / "big-0", big_log_bytes, data)
        for log in (small, big):  # both fully verified, so neither pays first-read checks here
            assert log.verify() is None
        os.sync()  # let writeback of the fresh 10 GiB finish before measuring either log
        rounds = 2_000 if quick else 20_000
        reads = 200 if quick else 2000
        for log in (small, big):  # first touches of index maps and pages are not the steady state
            random_read_rate(log, reads, 1)
        runs: dict[str, tuple[list[float], list[float]]] = {"small": ([], []), "big": ([], [])}
        for _ in range(repeat):  # interleaved, so both logs meet the same machine conditions
            for label, log in (("small", small), ("big", big)):
                start = time.perf_counter()
                for _ in range(rounds):
                    log.append(set50)
                runs[label][0].append(rounds * 50 / (time.perf_counter() - start))
                runs[label][1].append(random_read_rate(log, reads, 1))
        figures = {label: (statistics.median(a), statistics.median(r)) for label, (a, r) in runs.items()}
        for label, log in (("small", small), ("big", big)):
            print(f"  {label:<5} {log.size_in_bytes / GiB:6.2f} GiB: append {figures[label][0]:,.0f} msgs/s, "
                  f"random reads {figures[label][1]:,.0f} msgs/s")  # fmt: skip
        append_ratio = figures["big"][0] / figures["small"][0]
        read_ratio = figures["big"][1] / figures["small"][1]
        print(f"  big/small: append {append_ratio:.2f}, reads {read_ratio:.2f}")
        result("append_big_vs_small", append_ratio, "ratio")
        result("read_big_vs_small", read_ratio, "ratio")
        small.close()
        big.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print_results()


if __name__ == "__main__":
    main()
