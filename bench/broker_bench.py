"""Broker benchmarks with a real client: confluent-kafka (librdkafka) against a `kafkalog broker`
process on loopback. Produce throughput at batch sizes 1, 50 and 1000, uncompressed and snappy;
fetch throughput and who is the bottleneck (CPU of the client vs the broker); produce latency at a
steady moderate rate; broker memory. Ends with ``RESULT <name> <value> <unit>`` lines."""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import confluent_kafka

from bench.results import print_results, result

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.support.kafkalog import BrokerProcess

MESSAGE = b"x" * 200
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def peak_rss(broker: BrokerProcess) -> int:
    assert broker.process is not None
    return peak_rss_of(broker.process.pid)


def peak_rss_of(pid: int) -> int:
    """A process's peak resident set (VmHWM), in bytes; 0 if /proc does not say."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def produce_rate(
    bootstrap: str,
    topic: str,
    batch: int,
    codec: str,
    count: int,
    broker_pid: int,
    extra: dict[str, object] | None = None,
) -> tuple[float, float, float]:
    """(messages/s, client CPU in cores, broker CPU in cores) producing ``count`` messages;
    ``extra``: librdkafka settings over these (e.g. ``enable.idempotence`` with ``acks: all``)."""
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "compression.codec": codec,
            "batch.num.messages": batch,
            "linger.ms": 0 if batch == 1 else 20,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 2_000_000,
            "acks": 1,
            **(extra or {}),
        }
    )
    producer.produce(topic, MESSAGE, partition=0)  # connect and learn metadata first
    producer.flush(30)
    failures = []
    client_cpu, broker_cpu = own_cpu_seconds(), cpu_seconds(broker_pid)
    start = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(
                    topic,
                    MESSAGE,
                    partition=0,
                    on_delivery=(lambda e, _: failures.append(e) if e else None) if i % 1000 == 0 else None,
                )
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(120) == 0, "messages left undelivered"
    elapsed = time.perf_counter() - start
    assert not failures, failures[:3]
    return count / elapsed, (own_cpu_seconds() - client_cpu) / elapsed, (cpu_seconds(broker_pid) - broker_cpu) / elapsed


def kcat_produce_rate(
    bootstrap: str, topic: str, batch: int, codec: str, count: int, broker_pid: int, scratch: Path
) -> tuple[float, float]:
    """(messages/s, broker CPU in cores) with kcat (librdkafka in C, no Python loop) producing
    ``count`` 200-byte lines from a file: what the broker sustains when the client is not the limit."""
    lines = scratch / f"lines-{count}.txt"
    if not lines.exists():
        lines.write_bytes((b"y" * 199 + b"\n") * count)
    command = [
        "kcat", "-b", bootstrap, "-P", "-t", topic, "-p", "0", "-z", codec,
        "-X", f"batch.num.messages={batch}", "-X", f"linger.ms={0 if batch == 1 else 20}",
        "-X", "queue.buffering.max.messages=2000000", "-X", "queue.buffering.max.kbytes=2000000",
        "-X", "acks=1",
    ]  # fmt: skip
    broker_cpu = cpu_seconds(broker_pid)
    start = time.perf_counter()
    with lines.open("rb") as stdin:
        subprocess.run(command, stdin=stdin, check=True, timeout=600)
    elapsed = time.perf_counter() - start
    return count / elapsed, (cpu_seconds(broker_pid) - broker_cpu) / elapsed


def generator_produce_rate(
    port: int, topic: str, batch: int, codec: str, count: int, broker_pid: int
) -> tuple[float, float]:
    """(messages/s, broker CPU in cores) with bench.load_generator in its own process."""
    broker_cpu = cpu_seconds(broker_pid)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "bench.load_generator", "--port", str(port), "--topic", topic,
         "--batch", str(batch), "--codec", codec, "--messages", str(count)],
        capture_output=True, text=True, check=True, timeout=600,
    )  # fmt: skip
    elapsed = time.perf_counter() - start
    rate = float(done.stdout.split()[1])
    return rate, (cpu_seconds(broker_pid) - broker_cpu) / elapsed


THROUGHPUT_CONSUMER: dict[str, object] = {
    "enable.auto.commit": False,
    "fetch.max.bytes": 50 * 1024 * 1024,
    "max.partition.fetch.bytes": 8 * 1024 * 1024,
    "queued.max.messages.kbytes": 256 * 1024,
    # librdkafka 2.x stops fetching a partition for fetch.queue.backoff.ms (default 1000) whenever its
    # local queue holds more than queued.min.messages (100,000): a reader that drains 1.5 M msgs/s
    # then waits most of each second with the broker idle (223k msgs/s from kafkalog with the
    # default, 1.46 M with 0 and 1.52 M with 10 ms, medians of 3 on one machine; the same on Kafka 4.x)
    "fetch.queue.backoff.ms": 10,
}
"""The librdkafka consumer settings of every fetch figure (and of bench/load_bench.py's hand-written
loader): large fetches, and a short queue back-off."""


def fetch_rate(
    bootstrap: str, topic: str, count: int, broker_pid: int, extra: dict[str, object] | None = None
) -> tuple[float, float, float]:
    """(messages/s, client CPU share of the time, broker CPU share) reading ``count`` messages."""
    consumer = confluent_kafka.Consumer(
        {**(extra or {}), **THROUGHPUT_CONSUMER, "bootstrap.servers": bootstrap, "group.id": "bench"}
    )
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
    got = 0
    while got == 0:  # connecting and the first fetch are not what is measured
        got = sum(1 for m in consumer.consume(10_000, timeout=1.0) if m.error() is None)
    first = got
    client_cpu, broker_cpu = own_cpu_seconds(), cpu_seconds(broker_pid)
    start = time.perf_counter()
    while got < count:
        for message in consumer.consume(10_000, timeout=1.0):
            if message.error() is None:
                got += 1
    elapsed = time.perf_counter() - start
    client = (own_cpu_seconds() - client_cpu) / elapsed
    server = (cpu_seconds(broker_pid) - broker_cpu) / elapsed
    consumer.close()
    return (got - first) / elapsed, client, server


def latency(bootstrap: str, topic: str, rate: int, seconds: float) -> tuple[float, float]:
    """p50 and p99 (ms) from produce() to the delivery report, at ``rate`` messages/s, acks=1."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": 1})
    producer.produce(topic, MESSAGE, partition=0)
    producer.flush(30)
    samples: list[float] = []

    def delivered(error: object, _: object, sent: float) -> None:
        if error is None:
            samples.append(time.perf_counter() - sent)

    interval = 1.0 / rate
    next_at = time.perf_counter()
    end = next_at + seconds
    while next_at < end:
        now = time.perf_counter()
        if now < next_at:
            producer.poll(min(next_at - now, 0.001))
            continue
        sent = time.perf_counter()
        producer.produce(topic, MESSAGE, partition=0, on_delivery=lambda e, m, s=sent: delivered(e, m, s))
        producer.poll(0)
        next_at += interval
    producer.flush(30)
    samples.sort()
    return samples[len(samples) // 2] * 1000, samples[int(len(samples) * 0.99)] * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    repeat = 1 if args.quick else args.repeat
    scale = 0.05 if args.quick else 1.0
    root = Path(tempfile.mkdtemp(prefix="kafkalog-broker-bench-"))
    print(f"# kafkalog broker benchmarks with confluent-kafka {confluent_kafka.version()[0]}, 200-byte messages")
    try:
        for processors in (1, 2):
            with BrokerProcess(
                root / f"data-{processors}", num_processors=processors, log={"flush_ms": 1000}
            ) as broker:
                print(f"\nbroker with {processors} network thread(s): produce (one partition, acks=1)")
                assert broker.process is not None
                pid = broker.process.pid
                configs = [(1, "none"), (50, "none"), (1000, "none"), (50, "snappy"), (1000, "snappy")]
                if processors == 2:
                    configs = [(50, "none"), (1000, "none")]
                for batch, codec in configs:
                    count = int({1: 30_000, 50: 600_000, 1000: 1_500_000}[batch] * scale)
                    runs = [
                        produce_rate(
                            broker.bootstrap, f"p-{batch}-{codec}-{i}", batch, codec, count, broker.process.pid
                        )  # type: ignore[union-attr]
                        for i in range(repeat)
                    ]
                    rate = statistics.median(r[0] for r in runs)
                    client = statistics.median(r[1] for r in runs)
                    server = statistics.median(r[2] for r in runs)
                    listed = " ".join(f"{r[0]:,.0f}" for r in runs)
                    print(
                        f"  batch {batch:>4} {codec:<6} {rate:>12,.0f} msgs/s  (runs: {listed}; "
                        f"CPU: client {client:.0%}, broker {server:.0%})"
                    )
                    result(f"produce_t{processors}_batch{batch}_{codec}", rate, "msgs/s")
                    result(f"produce_t{processors}_batch{batch}_{codec}_broker_cpu", server, "cores")
                    result(f"produce_t{processors}_batch{batch}_{codec}_client_cpu", client, "cores")
                if processors == 2:
                    continue
                lighter_clients = (
                    ("kcat", "kcat (C client, no Python loop)", {50: 1_000_000, 1000: 3_000_000},
                     lambda t, b, c, n, pid=pid: kcat_produce_rate(broker.bootstrap, t, b, c, n, pid, root)),
                    ("generator", "a pre-encoded pipelined load generator (the broker's own ceiling)",
                     {50: 2_000_000, 1000: 4_000_000},
                     lambda t, b, c, n, pid=pid: generator_produce_rate(broker.port, t, b, c, n, pid)),
                )  # fmt: skip
                for name, label, counts, run in lighter_clients:
                    print(f"  produce with {label}, acks=1:")
                    for batch, codec in ((50, "none"), (1000, "none"), (1000, "snappy")):
                        count = int(counts[batch] * scale)
                        runs = [run(f"{name}-{batch}-{codec}-{i}", batch, codec, count) for i in range(repeat)]
                        rate = statistics.median(r[0] for r in runs)
                        server = statistics.median(r[1] for r in runs)
                        listed = " ".join(f"{r[0]:,.0f}" for r in runs)
                        print(
                            f"    batch {batch:>4} {codec:<6} {rate:>12,.0f} msgs/s  "
                            f"(runs: {listed}; broker CPU {server:.0%})"
                        )
                        result(f"produce_{name}_batch{batch}_{codec}", rate, "msgs/s")
                        result(f"produce_{name}_batch{batch}_{codec}_broker_cpu", server, "cores")
                count = int(1_500_000 * scale)
                fetched = [fetch_rate(broker.bootstrap, "p-1000-none-0", count, pid) for _ in range(repeat)]
                rate = statistics.median(f[0] for f in fetched)
                client = statistics.median(f[1] for f in fetched)
                server = statistics.median(f[2] for f in fetched)
                print(f"  fetch: {rate:,.0f} msgs/s; CPU busy: client {client:.0%} of a core, broker {server:.0%}")
                result("fetch", rate, "msgs/s")
                result("fetch_client_cpu", client, "cores")
                result("fetch_broker_cpu", server, "cores")
                p50, p99 = latency(broker.bootstrap, "latency", 2000, 3 if args.quick else 10)
                print(f"  produce latency at 2,000 msgs/s (acks=1, no batching): p50 {p50:.2f} ms, p99 {p99:.2f} ms")
                result("produce_latency_p50", p50, "ms")
                result("produce_latency_p99", p99, "ms")
                rss, peak = broker.rss_bytes(), peak_rss(broker)
                size = sum(f.stat().st_size for f in (root / f"data-{processors}").rglob("*.log"))  # fmt: skip
                print(
                    f"  broker memory: RSS {rss / 2**20:,.0f} MiB now, {peak / 2**20:,.0f} MiB peak, "
                    f"with {size / 2**20:,.0f} MiB of log"
                )
                result("broker_rss", rss / 2**20, "MiB")
                result("broker_rss_peak", peak / 2**20, "MiB")
                result("log_size", size / 2**20, "MiB")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print_results()
    return 0


if __name__ == "__main__":
    sys.exit(main())
