"""Log compaction: kafkalog's cleaner against Apache Kafka 4.x's on the same data, then what the
cleaner costs the clients of a compacted topic while it runs.

``python -m bench.compaction_bench [--keys N] [--records N] [--brokers B,B] [--clients-records N] [--repeat N]``

1. **The cleaner** (both brokers, one after the other, on the same disk). A one-partition topic
   (``cleanup.policy=delete``, no retention, 100 MB segments) gets ``--records`` 100-byte values
   over ``--keys`` keys (uniformly random, the same sequence for both), produced by librdkafka.
   Then the topic is altered to ``cleanup.policy=compact`` (``min.cleanable.dirty.ratio=0.4``,
   ``segment.ms`` short so that the last segment rolls): the first pass reads a log that is all
   dirty. Then ``--keys`` more records (one per key) make the log half clean, half dirty (dirty
   ratio 0.5): the second pass. Each cleaner's own report of a pass is what is measured, the
   same quantity in both: MB of log processed (read while rewriting) over the pass's whole time
   (building the offset map included): Kafka's "MB of log processed in S seconds" line,
   kafkalog's "MB read in S s". ``--repeat`` runs per broker, each on a topic of its own; medians.
   Kafka's JVM is warmed first by a pass pair over a topic a tenth of the size. Also reported:
   kafkalog's offset map memory (its bound, allocated whole), its longest swap in these passes,
   and each broker's peak RSS.
2. **The clients while it cleans** (kafkalog, with ``cleaner.enabled`` true, then false; medians
   of ``--repeat`` runs, alternating). Two compacted topics (10 MB segments, dirty ratio 0.1, the
   cleaner's backoff 100 ms). ``read`` gets ``--clients-records`` records of distinct keys
   (untimed; the cleaner rewrites it, keeping them all). Produce: librdkafka writes
   ``--clients-records`` over 10,000 keys to ``written``, which the cleaner compacts again and
   again meanwhile. Fetch: a consumer reads ``read`` from its start to its end while a producer
   keeps writing to ``written`` (the cleaner's work, in both runs alike). The ratio (with /
   without) for each, and the longest swap (the cleaner holding a log's lock: the worst pause of
   an append), from the broker's log.

Ends with ``RESULT <name> <value> <unit>`` lines (docs/benchmarks.md, "Compaction").
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import confluent_kafka
import confluent_kafka.admin as confluent_admin

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.broker_bench import peak_rss_of
from bench.results import print_results, result
from tests.support.kafka4 import Kafka4Process
from tests.support.kafkalog import BrokerProcess

BROKERS = ("kafka4", "kafkalog")
VALUE = b"v" * 100
TIMEOUT = 1800.0
KAFKA_PASS = re.compile(r"([\d,.]+) MB of log processed in ([\d,.]+) seconds \(([\d,.]+) MB/sec\)")
OURS_PASS = re.compile(
    r"cleaned (\S+)-0 .*?: (\d+) of (\d+) records kept, ([\d.]+) MB read in ([\d.]+) s \(([\d.]+) MB/s\).*?"
    r"longest swap ([\d.]+) ms, offset map (\d+) keys in ([\d.]+) MB"
)


class Pass(NamedTuple):
    megabytes: float
    seconds: float

    @property
    def mb_per_s(self) -> float:
        return self.megabytes / self.seconds if self.seconds else 0.0


def _admin(bootstrap: str) -> confluent_admin.AdminClient:
    return confluent_admin.AdminClient({"bootstrap.servers": bootstrap})


def create(bootstrap: str, topic: str, configs: dict[str, str]) -> None:
    admin = _admin(bootstrap)  # kept until the answer: a collected client cancels its requests
    admin.create_topics([confluent_admin.NewTopic(topic, 1, config=configs)])[topic].result(60)


def alter(bootstrap: str, topic: str, configs: dict[str, str]) -> None:
    resource = confluent_admin.ConfigResource(confluent_admin.ResourceType.TOPIC, topic)
    for name, value in configs.items():
        resource.add_incremental_config(
            confluent_admin.ConfigEntry(name, value, incremental_operation=confluent_admin.AlterConfigOpType.SET)
        )
    admin = _admin(bootstrap)
    admin.incremental_alter_configs([resource])[resource].result(60)


def produce(bootstrap: str, topic: str, keys: list[bytes]) -> float:
    """Every key once, in order, with a 100-byte value; returns msgs/s."""
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
         "queue.buffering.max.messages": 1_000_000, "compression.type": "none", "enable.idempotence": False}
    )  # fmt: skip
    failures: list[object] = []

    def report(error: confluent_kafka.KafkaError | None, _: confluent_kafka.Message) -> None:
        if error is not None:
            failures.append(error)

    started = time.perf_counter()
    for key in keys:
        while True:
            try:
                producer.produce(topic, VALUE, key, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(TIMEOUT) or failures:
        raise SystemExit(f"producing to {topic} on {bootstrap} failed: {failures[:3]}")
    return len(keys) / (time.perf_counter() - started)


def consume_all(bootstrap: str, topic: str, expected: int) -> float:
    """Read the topic from its start to its end (``expected`` records: none compacted away);
    returns msgs/s."""
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"bench-{time.monotonic_ns()}", "enable.auto.commit": False,
         "enable.partition.eof": True, "fetch.max.bytes": 52_428_800}
    )  # fmt: skip
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    count = 0
    started = time.perf_counter()
    try:
        while True:
            for message in consumer.consume(1000, 0.5):
                if message.error() is None:
                    count += 1
                elif message.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    if count != expected:
                        raise SystemExit(f"read {count:,} records of {topic}, not {expected:,}")
                    return count / (time.perf_counter() - started)
    finally:
        consumer.close()


def key_sequence(keys: int, records: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    return [b"key-%08d" % rng.randrange(keys) for _ in range(records)]


def roll(bootstrap: str, topic: str) -> None:
    """The active segment rolls (segment.ms passed and one more record): the cleaner may take it."""
    time.sleep(1.2)
    produce(bootstrap, topic, [b"roll-%d" % time.monotonic_ns()])


def wait_pass(log: Path, since: int, parse: Callable[[str], Pass | None], what: str) -> Pass:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        found = parse(log.read_bytes()[since:].decode(errors="replace"))
        if found is not None:
            return found
        time.sleep(0.5)
    raise SystemExit(f"no cleaning pass of {what} in {log} after {TIMEOUT:.0f} s")


def kafka_pass(text: str) -> Pass | None:
    match = KAFKA_PASS.search(text)
    if match is None:
        return None
    return Pass(float(match[1].replace(",", "")), float(match[2].replace(",", "")))


def ours_pass(topic: str) -> Callable[[str], Pass | None]:
    def parse(text: str) -> Pass | None:
        for match in OURS_PASS.finditer(text):
            if match[1] == topic:
                return Pass(float(match[4]), float(match[5]))
        return None

    return parse


def cleaner_race(name: str, bootstrap: str, log: Path, parse: Callable[[str], Callable[[str], Pass | None]],
                 keys: int, records: int, topic: str) -> tuple[Pass, Pass, float]:  # fmt: skip
    """The two passes (all dirty, then dirty ratio 0.5) over ``topic``; and the produce rate."""
    create(bootstrap, topic, {"cleanup.policy": "delete", "retention.ms": "-1", "segment.bytes": str(100 << 20)})
    rate = produce(bootstrap, topic, key_sequence(keys, records, 7))
    print(f"# {name}: {records:,} records produced at {rate:,.0f} msgs/s", flush=True)
    since = log.stat().st_size
    alter(bootstrap, topic, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.4", "segment.ms": "1000"})
    roll(bootstrap, topic)
    first = wait_pass(log, since, parse(topic), f"{name}'s first pass")
    print(f"# {name}: first pass {first.megabytes:,.1f} MB in {first.seconds:.1f} s = {first.mb_per_s:,.1f} MB/s",
          flush=True)  # fmt: skip
    time.sleep(2)
    since = log.stat().st_size
    produce(bootstrap, topic, key_sequence(keys, keys, 8))
    roll(bootstrap, topic)
    second = wait_pass(log, since, parse(topic), f"{name}'s second pass")
    print(f"# {name}: second pass (dirty ratio 0.5) {second.megabytes:,.1f} MB in {second.seconds:.1f} s = "
          f"{second.mb_per_s:,.1f} MB/s", flush=True)  # fmt: skip
    return first, second, rate


def clients_run(root: Path, cleaner: bool, records: int, index: int) -> tuple[float, float, float]:
    """(produce msgs/s, fetch msgs/s, longest swap ms) with the cleaner on or off (see the module doc)."""
    broker = BrokerProcess(root / f"clients-{index}-{cleaner}", cleaner={"enabled": cleaner, "backoff_ms": 100},
                           log={"flush_ms": 1000})  # fmt: skip
    broker.start()
    try:
        compacted = {"cleanup.policy": "compact", "segment.bytes": str(10 << 20), "min.cleanable.dirty.ratio": "0.1"}
        create(broker.bootstrap, "written", compacted)
        create(broker.bootstrap, "read", compacted)
        produce(broker.bootstrap, "read", [b"unique-%09d" % i for i in range(records)])  # cleaned, all kept
        produced = produce(broker.bootstrap, "written", key_sequence(10_000, records, index))
        stop = threading.Event()

        def keep_writing() -> None:  # the cleaner's work while the topic is read
            while not stop.is_set():
                produce(broker.bootstrap, "written", key_sequence(10_000, 50_000, index + 100))

        writer = threading.Thread(target=keep_writing)
        writer.start()
        try:
            fetched = consume_all(broker.bootstrap, "read", records)
        finally:
            stop.set()
            writer.join()
        text = broker.log_path.read_text(errors="replace")
        swaps = [float(m[7]) for m in OURS_PASS.finditer(text)]
        if cleaner and not swaps:
            print("# warning: the cleaner made no pass during the clients' run", flush=True)
        return produced, fetched, max(swaps, default=0.0)
    finally:
        broker.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", default=",".join(BROKERS), help="comma-separated: kafka4, kafkalog")
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--clients-records", type=int, default=1_000_000, help="0: skip part 2")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    names = [name for name in args.brokers.split(",") if name]
    if not names or any(name not in BROKERS for name in names):
        parser.error(f"--brokers takes a comma-separated list of {', '.join(BROKERS)}")
    root = Path(tempfile.mkdtemp(prefix="compaction-bench-"))
    print(f"# librdkafka {confluent_kafka.libversion()[0]}; {args.records:,} records over {args.keys:,} keys, "
          "100-byte values, one partition", flush=True)  # fmt: skip
    passes: dict[str, list[tuple[Pass, Pass]]] = {}
    try:
        for name in names:
            if name == "kafka4":
                broker: Kafka4Process | BrokerProcess = Kafka4Process(
                    root / "kafka4", **{"log.cleaner.backoff.ms": 500}
                )
                log_path, parse = root / "kafka4" / "kafka.log", lambda _: kafka_pass
            else:
                broker = BrokerProcess(root / "kafkalog", cleaner={"backoff_ms": 500}, log={"flush_ms": 1000})
                log_path, parse = root / "kafkalog.log", ours_pass
            broker.start()
            try:
                assert broker.process is not None
                if name == "kafka4":  # the JVM's compilers warmed on a pass pair of a tenth of the size
                    cleaner_race("kafka4 (warm-up)", broker.bootstrap, log_path, parse,
                                 max(args.keys // 10, 1000), max(args.records // 10, 10_000), "warm")  # fmt: skip
                passes[name] = []
                for run in range(args.repeat):
                    first, second, _ = cleaner_race(f"{name} run {run + 1}", broker.bootstrap, log_path, parse,
                                                    args.keys, args.records, f"compacted-{run}")  # fmt: skip
                    passes[name].append((first, second))
                result(f"compaction_{name}_peak_rss", peak_rss_of(broker.process.pid) / 2**20, "MB")
                if name == "kafkalog":
                    text = log_path.read_text(errors="replace")
                    result("compaction_kafkalog_offset_map", max(float(m[9]) for m in OURS_PASS.finditer(text)), "MB")
                    swaps = [float(m[7]) for m in OURS_PASS.finditer(text)]
                    result("compaction_kafkalog_longest_swap_in_passes", max(swaps), "ms")
            finally:
                broker.stop()
            for index, label in enumerate(("first", "second")):
                rates = sorted(run[index].mb_per_s for run in passes[name])
                print(f"# {name} {label} passes: {', '.join(f'{r:,.1f}' for r in rates)} MB/s")
                result(f"compaction_{name}_{label}_pass", statistics.median(rates), "MB/s")
        if len(passes) == 2:
            for index, label in enumerate(("first", "second")):
                ours = statistics.median(run[index].mb_per_s for run in passes["kafkalog"])
                theirs = statistics.median(run[index].mb_per_s for run in passes["kafka4"])
                print(f"# {label} pass: kafkalog / Kafka 4.x {ours / theirs:.2f} (medians)")
                result(f"compaction_ratio_vs_kafka4_{label}_pass", ours / theirs, "ratio")
        if args.clients_records:
            runs: dict[bool, list[tuple[float, float, float]]] = {True: [], False: []}
            for index in range(args.repeat):
                for cleaner in (True, False):
                    runs[cleaner].append(clients_run(root, cleaner, args.clients_records, index))
                    print(f"# clients, cleaner {'on' if cleaner else 'off'}: {runs[cleaner][-1]}", flush=True)
            for what, position in (("produce", 0), ("fetch", 1)):
                on = statistics.median(run[position] for run in runs[True])
                off = statistics.median(run[position] for run in runs[False])
                print(f"# {what} on a compacted topic: {on:,.0f} msgs/s cleaning, {off:,.0f} not: {on / off:.2f}")
                result(f"compaction_{what}_while_cleaning", on, "msgs/s")
                result(f"compaction_{what}_ratio_cleaning_vs_not", on / off, "ratio")
            result("compaction_longest_swap", max(run[2] for run in runs[True]), "ms")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print_results()
    return 0


if __name__ == "__main__":
    sys.exit(main())
