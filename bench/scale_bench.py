"""A broker with many partitions: creation, start-up, recovery after SIGKILL, memory, and the load's
planning of one split per partition, in one run.

A ``kafkalog broker`` (default settings) in a temporary directory gets ``--topics`` topics named
``scale-NNN`` holding ``--partitions`` partitions between them, and ``--messages`` small messages
(100 bytes) in every partition (one record batch each, sent by kafkalog's Producer). With
``--fill-gib`` a topic ``bulk`` (4 partitions) also gets that many GiB of 250-byte JSON events
(bench/load_bench.py's generator), so that the log's size can be set apart from its partition
count. Then, each timed from the command to the broker answering a Metadata request that lists
every partition:

- a restart after a clean stop (SIGTERM);
- a restart after SIGKILL (the recovery of every partition's active segment), followed by a check
  that every partition still ends at the offset it was given;
- the broker's RSS and open descriptors once it serves;
- ``make_plan`` of a pipeline whose ``topic_pattern`` matches every ``scale-`` topic (one split per
  partition: metadata, then the earliest and latest offsets of each), without Spark.

    .venv/bin/python -m bench.scale_bench [--partitions 10000] [--topics 100] [--fill-gib 0] [--quick]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from bench.results import print_results, result

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

MESSAGE = b"m" * 100


def drop_page_cache() -> None:
    """Write back and drop the kernel's page cache, so that the next start reads every file from
    the disk (as after a reboot, or after other data pushed the log's files out of memory)."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError as exc:
        raise SystemExit(f"--cold needs to drop the page cache, which needs root: {exc}") from None


def serving(broker: Any, topics: list[str], partitions: int, timeout: float = 3600) -> float:
    """Start ``broker`` and wait until a Metadata request lists all ``partitions``; seconds taken."""
    from kafkalog.client import Client

    started = time.perf_counter()
    broker.start(timeout=timeout)
    while True:
        try:
            with Client(broker.bootstrap) as client:
                known = client.refresh_metadata(topics)
                if sum(len(client.topic(t).leaders) for t in topics if t in known) == partitions:
                    return time.perf_counter() - started
        except Exception as exc:  # not up yet: any failure means "again"
            if time.perf_counter() - started > timeout:
                raise RuntimeError(f"the broker did not serve within {timeout:.0f} s: {exc}") from exc
        time.sleep(0.05)


def descriptors(pid: int) -> int:
    return sum(1 for _ in Path(f"/proc/{pid}/fd").iterdir())


def fill(broker: Any, topics: list[str], per_topic: int, messages: int) -> float:
    """``messages`` per partition, one record batch each; the seconds it took."""
    from kafkalog.client import Producer
    from kafkalog.record.batch_format import RecordInput, encode_batch

    now = int(time.time() * 1000)
    batch = encode_batch([RecordInput(None, MESSAGE, now + i) for i in range(messages)])
    started = time.perf_counter()
    with Producer(broker.bootstrap, linger_ms=50, batch_bytes=1 << 20) as producer:
        for topic in topics:
            for partition in range(per_topic):
                producer.send_set(topic, partition, batch, messages)
        producer.flush()
    return time.perf_counter() - started


def check_ends(bootstrap: str, topics: list[str], per_topic: int, messages: int) -> None:
    from kafkalog.client import SimpleConsumer

    with SimpleConsumer(bootstrap) as consumer:
        for topic in topics:
            for partition in range(per_topic):
                end = consumer.latest_offset(topic, partition)
                if end != messages:
                    raise RuntimeError(f"{topic}-{partition} ends at {end}, not {messages}, after the recovery")


def plan_seconds(root: Path, bootstrap: str) -> tuple[float, int]:
    """(seconds, splits) of planning a pipeline over every ``scale-`` topic."""
    from kafkalog.client import SimpleConsumer
    from pipelines.config.pipeline import load_spec
    from pipelines.ingest.plan import make_plan, new_run_id

    spec_path = root / "scale.yaml"
    spec_path.write_text(
        yaml.safe_dump(
            {
                "name": "scale",
                "source": {"bootstrap": bootstrap},
                "topic_pattern": "scale-.*",
                "decoder": {"format": "json", "schema": {"n": "long"}},
                "raw": {"path": str(root / "raw")},
            }
        )
    )
    spec = load_spec(spec_path)
    with SimpleConsumer(bootstrap) as consumer:
        started = time.perf_counter()
        plan = make_plan(spec, consumer, {}, 1, new_run_id())
        elapsed = time.perf_counter() - started
    return elapsed, len(plan.splits)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--messages", type=int, default=20, help="messages in every partition")
    parser.add_argument("--fill-gib", type=float, default=0.0, help="GiB of events in a 4-partition topic besides")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 500 partitions in 10 topics")
    parser.add_argument(
        "--cold", action="store_true", help="also a clean restart with the page cache dropped first (needs root)"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.partitions, args.topics = 500, 10
    if args.partitions % args.topics:
        parser.error("--partitions must be a multiple of --topics")
    per_topic = args.partitions // args.topics

    from kafkalog.client import Admin
    from tests.support.kafkalog import BrokerProcess

    root = Path(tempfile.mkdtemp(prefix="kafkalog-scale-bench-"))
    topics = [f"scale-{n:03d}" for n in range(args.topics)]
    broker = BrokerProcess(root / "broker")
    print(
        f"# {args.partitions:,} partitions in {args.topics} topics, {args.messages} messages each"
        f"{f', and {args.fill_gib} GiB in topic bulk' if args.fill_gib else ''}; {os.cpu_count()} CPUs; "
        f"descriptor limit {os.sysconf('SC_OPEN_MAX')}"
    )
    try:
        broker.start()
        started = time.perf_counter()
        with Admin(broker.bootstrap) as admin:
            for topic in topics:
                admin.create_topic(topic, per_topic)
        created = time.perf_counter() - started
        print(f"created {args.partitions:,} partitions in {created:.1f} s")
        result("scale_create_seconds", created, "s")
        print(f"filled them in {fill(broker, topics, per_topic, args.messages):.1f} s")
        if args.fill_gib:
            from bench.load_bench import produce

            count = int(args.fill_gib * 2**30 / 290)  # ~290 bytes an entry on disk
            print(f"bulk: {count:,} events in {produce(broker, 'bulk', count):.1f} s")
        size = sum(f.stat().st_size for f in (root / "broker").rglob("*") if f.is_file())
        print(f"the log: {size / 2**30:.2f} GiB")

        assert broker.process is not None
        broker.process.send_signal(signal.SIGTERM)
        broker.process.wait(600)
        clean = serving(broker, topics, args.partitions)
        assert broker.process is not None
        rss, fds = broker.rss_bytes(), descriptors(broker.process.pid)
        print(f"restart after a clean stop: serving all partitions in {clean:.1f} s; RSS {rss / 2**20:,.0f} MiB, "
              f"{fds:,} open descriptors")  # fmt: skip
        result("scale_start_after_clean_stop_seconds", clean, "s")
        result("scale_rss_mib", rss / 2**20, "MiB")
        result("scale_open_descriptors", fds, "count")

        if args.cold:
            broker.stop(600)
            drop_page_cache()
            cold = serving(broker, topics, args.partitions)
            print(f"restart after a clean stop, page cache dropped: serving all partitions in {cold:.1f} s")
            result("scale_start_cold_cache_seconds", cold, "s")

        seconds, splits = plan_seconds(root, broker.bootstrap)
        print(f"make_plan: {splits:,} splits in {seconds:.2f} s")
        result("scale_plan_seconds", seconds, "s")
        result("scale_plan_splits", splits, "count")

        broker.kill()
        recovered = serving(broker, topics, args.partitions)
        check_ends(broker.bootstrap, topics, per_topic, args.messages)
        print(f"restart after SIGKILL: serving all partitions in {recovered:.1f} s, every partition whole")
        result("scale_start_after_sigkill_seconds", recovered, "s")
    finally:
        broker.stop()
        shutil.rmtree(root, ignore_errors=True)
    print_results()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
