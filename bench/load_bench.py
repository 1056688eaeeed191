"""Broker to committed raw layer: ``pipelines`` on Spark local[2] beside a hand-written loader, in one run.

A ``kafkalog broker`` in a temporary directory gets topic ``events`` (4 partitions) and ``--messages``
JSON events of 244-254 bytes (user_id, session, event, amount, country, ts, payload; 40 ms of event
time apart). Two contenders read exactly those messages, alternately, ``--runs`` times each:

- ours: ``PipelineRun(load_spec(yaml), spark).run()`` end to end (plan against the broker, load with
  Spark, reconcile, commit, publish) into a fresh raw directory per repetition, on one local[2]
  SparkSession started before any timing (session start is excluded; the CLI figure below has it).
  One untimed run of ours comes first (``--no-warmup`` skips it): a fresh JVM's first run is much
  slower (JIT, Python workers starting); its rate is reported as ``load_rows_per_s_ours_first_run``;
- baseline: what a user would write by hand, in its own Python process: confluent-kafka with
  ``assign()`` to every partition from offset 0, ``consume(num_messages=10000)`` until each partition
  reached its end offset, values joined with ``b"\\n"`` per ~100k messages, ``pyarrow.json.read_json``
  with an explicit schema, topic/partition/offset columns added, one Parquet file per chunk
  (snappy, the same codec as ours). Its timer starts before the Consumer is created and stops after
  the last file is written (interpreter start and imports excluded, like ours' session start).

Rows/s is committed rows (ours) or written rows (baseline) over those seconds; the ratio is of the
medians. Then: the fixed cost of a run with no new data (three in-process runs after a committed
one, and a whole ``pipelines run --master local[2]`` process, JVM start included), and peak
executor-side memory: the Spark JVM plus its Python workers, RSS (and PSS) sampled every 0.2 s, in
a fresh process loading N messages and in one loading ``--memory-scale`` x N (topic ``events_big``:
the same events, each block of 5,000 sent that many times over, so the same dt/hour partitions).
``--profile`` adds where ours spends its time. Ends with ``RESULT <name> <value> <unit>`` lines.

    .venv/bin/python -m bench.load_bench [--messages N] [--runs R] [--memory-scale 10] [--profile]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime, timedelta
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import yaml

from bench.results import print_results, result

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TOPIC = "events"
BIG_TOPIC = "events_big"
PARTITIONS = 4
CHUNK = 100_000
SAMPLE_SECONDS = 0.2
PIPELINES = Path(sys.executable).with_name("pipelines")
SCHEMA = {
    "user_id": "long",
    "session": "string",
    "event": "string",
    "amount": "double",
    "country": "string",
    "ts": "string",
    "payload": "string",
}

# ---------------------------------------------------------------------------------------------- events

BASE_TIME = datetime(2026, 11, 21, 8, 0, tzinfo=UTC)
PADDING = "abcdefghijklmnopqrstuvwxyz0123456789" * 8
EVENTS = ("click", "view", "purchase", "scroll", "login")
COUNTRIES = ("DE", "FR", "US", "JP", "BR", "IN", "GB")
TEMPLATE = (
    '{"user_id":%d,"session":"s%08x","event":"%s","amount":%d.%02d,"country":"%s","ts":"%s.%03d+00:00","payload":"%s"}'
)
PAD_LENGTH = 114  # makes the events 244-254 bytes (250 on average)


def events(start: int, stop: int, step: int = 1) -> list[bytes]:
    """Events start, start+step, ... < stop: deterministic, 40 ms of event time apart (so 2M events
    span 22 hours of dt/hour partitions), about 250 bytes each."""
    out: list[bytes] = []
    append = out.append
    seconds: dict[int, str] = {}
    for i in range(start, stop, step):
        millis = 40 * i
        second = millis // 1000
        stamp = seconds.get(second)
        if stamp is None:
            if len(seconds) > 1000:
                seconds.clear()
            stamp = seconds[second] = (BASE_TIME + timedelta(seconds=second)).strftime("%Y-%m-%dT%H:%M:%S")
        pad = i % 36
        fields = (
            i * 7919 % 1_000_003,
            i // 20,
            EVENTS[i % 5],
            i % 10_000 // 100,
            i % 100,
            COUNTRIES[i % 7],
            stamp,
            millis % 1000,
            PADDING[pad : pad + PAD_LENGTH],
        )
        append((TEMPLATE % fields).encode())
    return out


def produce_partition(port: int, topic: str, partition: int, count: int, partitions: int, repeat: int) -> int:
    """Send the events i < count with i % partitions == partition to that partition, each block of
    them ``repeat`` times over (one process per partition). The client is bench/load_generator.py's:
    message sets encoded once (kafkalog's MessageSetBuilder, magic 1) and sent as Produce v2 requests
    on one connection, 8 in flight, every response checked. Measured here from one process with the
    values already built: kafkalog's Producer (1 MiB batches) 77k msgs/s, confluent-kafka 209k msgs/s;
    this way four processes fill 2M events, generation included, in 6-12 s, and a repeated block
    costs the client nothing, so the 10x topic is cheap to fill. Producing is not what is measured."""
    from kafkalog.protocol import ApiKey, decode_response, encode_request, lookup
    from kafkalog.record import MessageSetBuilder

    api = lookup(ApiKey.PRODUCE, 2)
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    inbox = bytearray()

    def settle_one() -> None:
        while len(inbox) < 4 or len(inbox) < 4 + struct.unpack_from(">i", inbox)[0]:
            chunk = sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            inbox.extend(chunk)
        size = struct.unpack_from(">i", inbox)[0]
        _, answer = decode_response(api, bytes(inbox[4 : 4 + size]))
        del inbox[: 4 + size]
        for part in answer["responses"][0]["partition_responses"]:
            if part["error_code"]:
                raise RuntimeError(f"{topic}-{partition}: produce failed with error code {part['error_code']}")

    numbers = range(partition, count, partitions)
    now = int(time.time() * 1000)
    sent = in_flight = 0
    try:
        for lo in range(0, len(numbers), 3000):  # 3,000 events: a set under message.max.bytes (1 MB)
            block = numbers[lo : lo + 3000]
            builder = MessageSetBuilder()
            for value in events(block.start, block.stop, partitions):
                builder.append(value, None, now)
            body = {
                "acks": 1,
                "timeout_ms": 30_000,
                "topic_data": [{"topic": topic, "data": [{"partition": partition, "record_set": builder.build()}]}],
            }
            frame = encode_request(api, lo, "load-bench", body)
            for _ in range(repeat):
                if in_flight >= 8:
                    settle_one()
                    in_flight -= 1
                sock.sendall(frame)
                in_flight += 1
                sent += len(block)
        while in_flight:
            settle_one()
            in_flight -= 1
    finally:
        sock.close()
    return sent


def produce(broker: Any, topic: str, count: int, repeat: int = 1, partitions: int = PARTITIONS) -> float:
    """Create ``topic`` and fill it with events 0..count-1 (``repeat`` times over, block by block);
    returns the seconds it took."""
    from kafkalog.client import Admin, SimpleConsumer

    with Admin(broker.bootstrap) as admin:
        admin.create_topic(topic, partitions)
    started = time.perf_counter()
    with ProcessPoolExecutor(partitions, mp_context=get_context("spawn")) as pool:
        jobs = [
            pool.submit(produce_partition, broker.port, topic, p, count, partitions, repeat) for p in range(partitions)
        ]
        sent = sum(job.result() for job in jobs)
    elapsed = time.perf_counter() - started
    with SimpleConsumer(broker.bootstrap) as consumer:
        on_broker = sum(consumer.latest_offset(topic, p) for p in range(partitions))
    if sent != count * repeat or on_broker != count * repeat:
        raise RuntimeError(f"{topic}: sent {sent}, broker holds {on_broker}, wanted {count * repeat}")
    return elapsed


# ---------------------------------------------------------------------------------------------- ours


def write_spec(directory: Path, bootstrap: str, raw: Path | str, topic: str, name: str, writer: str = "auto") -> Path:
    """The bench's pipeline file: ``topic`` into the raw layer at ``raw`` (a path or a URL), written by
    ``writer`` (raw.writer)."""
    spec = {
        "name": name,
        "source": {"bootstrap": bootstrap},
        "topics": [topic],
        "decoder": {"format": "json", "schema": SCHEMA, "required": ["user_id"]},
        "event_time": {"field": "ts", "format": "iso8601"},
        "raw": {"path": str(raw), "writer": writer},
    }
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def run_ours(spark: Any, spec_path: Path) -> tuple[float, int, Any]:
    """(seconds, committed rows, RunResult) of one whole run."""
    from pipelines.config.pipeline import load_spec
    from pipelines.ingest.run import PipelineRun

    started = time.perf_counter()
    result = PipelineRun(load_spec(spec_path), spark).run()
    elapsed = time.perf_counter() - started
    rows = sum(s.rows for s in result.manifest.splits) if result.status == "committed" else 0
    return elapsed, rows, result


def profile_ours(spark: Any, root: Path, bootstrap: str, count: int) -> None:
    """Where ours spends its time (``--profile``): one whole run with its steps timed (by wrapping
    PipelineRun's methods in this process; the pipelines code is not changed), the Spark job alone
    three ways, and one split's ``SplitTask.chunks()`` alone, without Spark, plain and under cProfile."""
    import cProfile
    import functools
    import pstats

    from pipelines.config.pipeline import load_spec
    from pipelines.executor.source import SplitTask
    from pipelines.executor.splits import Split
    from pipelines.ingest import run as load_module
    from pipelines.ingest import stage as stage_module
    from pipelines.ingest.plan import make_plan
    from pipelines.ledger.state import PipelineState

    timings: dict[str, float] = {}
    patched: list[tuple[Any, str, Any]] = []

    def timed(owner: Any, name: str, label: str) -> None:
        original = getattr(owner, name, None)
        if original is None:
            return

        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                timings[label] = timings.get(label, 0.0) + time.perf_counter() - began

        setattr(owner, name, wrapper)
        patched.append((owner, name, original))

    timed(load_module, "make_plan", "plan (metadata and offsets from the broker)")
    timed(PipelineState, "store_plan", "store the plan")
    timed(stage_module.SparkStager, "_read_splits", "load: the Spark job (tasks read, decode, write Parquet)")
    timed(stage_module, "inspect_local", "reconcile: the staged files read back with Arrow")
    timed(stage_module, "spark_file_facts", "reconcile: per-file stats, a Spark scan (spark writer)")
    timed(stage_module, "spark_coverage", "reconcile: distinct offsets, a Spark scan (spark writer)")
    timed(PipelineState, "commit", "commit the manifest")
    timed(PipelineState, "roll_forward", "publish (renames)")
    spec_path = write_spec(root, bootstrap, root / "raw-profile", TOPIC, "profile")
    try:
        seconds, _, _ = run_ours(spark, spec_path)
    finally:
        for owner, name, original in patched:
            setattr(owner, name, original)
    print(f"profile: one run of ours, {seconds:.2f} s ({count / seconds:,.0f} rows/s):")
    for label, spent in timings.items():
        print(f"  {label:<58} {spent:7.2f} s {spent / seconds:6.1%}")
    rest = seconds - sum(timings.values())
    print(f"  {'the rest (recover, output listing, manifest building)':<58} {rest:7.2f} s {rest / seconds:6.1%}")

    spec = load_spec(spec_path)
    run = load_module.PipelineRun(spec, spark)
    with run.consumer() as consumer:
        splits = [s for s in make_plan(spec, consumer, {}, 1, "profile").splits if s.size]
    options = run.stager._options(splits, "data", None)  # type: ignore[attr-defined]
    jobs = {
        "Spark job, rows discarded (noop sink): source + Arrow to JVM": lambda frame: (
            frame.write.format("noop").mode("overwrite").save()
        ),
        "Spark job, Parquet without partitionBy (no sort)": lambda frame: frame.write.option(
            "compression", "snappy"
        ).parquet(str(root / "profile-flat")),
        "Spark job, Parquet with partitionBy dt, hour (raw.writer: spark)": lambda frame: (
            frame.write.partitionBy("dt", "hour").option("compression", "snappy").parquet(str(root / "profile-dt"))
        ),
    }
    for label, job in jobs.items():
        began = time.perf_counter()
        job(spark.read.format("kafkalog").options(**options).load())
        spent = time.perf_counter() - began
        print(f"  {label:<58} {spent:7.2f} s ({count / spent:,.0f} rows/s)")
    for leftover in ("raw-profile", "profile-flat", "profile-dt"):
        shutil.rmtree(root / leftover, ignore_errors=True)

    split = Split(TOPIC, 0, splits[0].leader, 0, splits[0].end)

    def one_split() -> int:
        task = SplitTask(spec.source, spec.decoder, spec.event_time, spec.bad_records, split)
        return sum(table.num_rows for table, _, _ in task.chunks())

    began = time.perf_counter()
    rows = one_split()
    plain = time.perf_counter() - began
    profiler = cProfile.Profile()
    profiler.enable()
    one_split()
    profiler.disable()
    print(
        f"  SplitTask.chunks() alone on {split.name} ({rows:,} messages), one core, no Spark: {plain:.2f} s "
        f"({rows / plain:,.0f} rows/s); under cProfile, by own time:"
    )
    stats = pstats.Stats(profiler)
    total = stats.total_tt  # type: ignore[attr-defined]
    entries = sorted(stats.stats.items(), key=lambda item: item[1][2], reverse=True)  # type: ignore[attr-defined]
    for (path, line, function), (_, calls, own, cumulative, _) in entries[:18]:
        where = f"{Path(path).name}:{line}({function})" if line else function
        print(f"    {own:6.2f} s {own / total:6.1%}  cum {cumulative:6.2f} s  {calls:>8} calls  {where[:80]}")


# ---------------------------------------------------------------------------------------------- baseline


def baseline_child(bootstrap: str, topic: str, count: int, out: Path) -> int:
    """The hand-written loader (run in its own process): prints one JSON line of figures."""
    import confluent_kafka
    import pyarrow as pa
    import pyarrow.json as pa_json
    import pyarrow.parquet as pq

    types = {"long": pa.int64(), "string": pa.string(), "double": pa.float64()}
    schema = pa.schema([(name, types[kind]) for name, kind in SCHEMA.items()])
    parse = pa_json.ParseOptions(explicit_schema=schema)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    from bench.broker_bench import THROUGHPUT_CONSUMER

    # kafkalog answers ApiVersions: librdkafka's defaults but for the fetch settings of broker_bench
    consumer = confluent_kafka.Consumer({**THROUGHPUT_CONSUMER, "bootstrap.servers": bootstrap, "group.id": "baseline"})
    ends = {}
    for p in range(PARTITIONS):
        _, high = consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p), timeout=10)
        ends[p] = high
    consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(PARTITIONS) if ends[p] > 0])
    remaining = {p for p, end in ends.items() if end > 0}
    values: list[bytes] = []
    partitions: list[int] = []
    offsets: list[int] = []
    rows = files = 0

    spent = {"parse": 0.0, "write": 0.0}  # the rest of the time is consuming

    def write_chunk() -> None:
        nonlocal rows, files
        began = time.perf_counter()
        table = pa_json.read_json(io.BytesIO(b"\n".join(values)), parse_options=parse)
        n = table.num_rows
        assert n == len(values), f"{n} rows from {len(values)} values"
        table = table.append_column("topic", pa.array([topic] * n, pa.string()))
        table = table.append_column("partition", pa.array(partitions, pa.int32()))
        table = table.append_column("offset", pa.array(offsets, pa.int64()))
        parsed = time.perf_counter()
        pq.write_table(table, out / f"part-{files:05d}.parquet", compression="snappy")
        spent["parse"] += parsed - began
        spent["write"] += time.perf_counter() - parsed
        rows += n
        files += 1
        values.clear()
        partitions.clear()
        offsets.clear()

    while remaining:
        for message in consumer.consume(num_messages=10_000, timeout=1.0):
            if message.error() is not None:
                raise RuntimeError(str(message.error()))
            partition, offset = message.partition(), message.offset()
            values.append(message.value())
            partitions.append(partition)
            offsets.append(offset)
            if offset + 1 >= ends[partition]:
                remaining.discard(partition)
        if len(values) >= CHUNK:
            write_chunk()
    if values:
        write_chunk()
    elapsed = time.perf_counter() - started
    consumer.close()
    assert rows == count, f"the baseline read {rows} messages, the topic holds {count}"
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"seconds": elapsed, "rows": rows, "files": files, "peak_rss": peak_kib * 1024, **spent}))
    return 0


def run_baseline(bootstrap: str, topic: str, count: int, out: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "bench.load_bench", "--baseline-child", bootstrap, topic, str(count), str(out)],
        capture_output=True,
        text=True,
        check=False,
        timeout=3600,
        cwd=Path(__file__).resolve().parent.parent,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the baseline failed:\n{done.stderr[-3000:]}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


# ---------------------------------------------------------------------------------------------- memory


def _pss(pid: int) -> int:
    """Proportional set size (shared pages split between the processes sharing them), 0 if unknown."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _descendants() -> list[tuple[str, str, int, int]]:
    """(name, command line, RSS, PSS) of every process under this one (psutil, else /proc)."""
    try:
        import psutil
    except ImportError:
        psutil = None
    out = []
    if psutil is not None:
        for child in psutil.Process().children(recursive=True):
            try:
                out.append((child.name(), " ".join(child.cmdline()), child.memory_info().rss, _pss(child.pid)))
            except psutil.Error:
                continue
        return out
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    wanted, found = {os.getpid()}, True
    while found:
        found = False
        for pid, parent in parents.items():
            if parent in wanted and pid not in wanted:
                wanted.add(pid)
                found = True
    wanted.discard(os.getpid())
    page = os.sysconf("SC_PAGE_SIZE")
    for pid in wanted:
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
            name = Path(f"/proc/{pid}/comm").read_text().strip()
            rss = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * page
        except OSError:
            continue
        out.append((name, command, rss, _pss(pid)))
    return out


class MemorySampler:
    """Peaks of the Spark JVM's RSS, of its Python workers' RSS (summed; forked workers share pages,
    so the sum over-counts), of both together, and of both together as PSS (shared pages counted once)."""

    def __init__(self) -> None:
        self.jvm = self.workers = self.total = self.total_pss = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            jvm = workers = pss = 0
            for name, command, rss, proportional in _descendants():
                if name == "java" or command.startswith("java ") or "/java " in command:
                    jvm += rss
                elif "pyspark.daemon" in command or "pyspark.worker" in command:
                    workers += rss
                else:
                    continue
                pss += proportional
            self.jvm, self.workers = max(self.jvm, jvm), max(self.workers, workers)
            self.total = max(self.total, jvm + workers)
            self.total_pss = max(self.total_pss, pss)
            self.samples += 1
            self._stop.wait(SAMPLE_SECONDS)

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def memory_child(spec_path: Path) -> int:
    """One run in a fresh process with its own local[2] session, memory sampled throughout."""
    from pipelines.app.session import local_session

    with MemorySampler() as sampler:
        spark = local_session("local[2]")
        elapsed, rows, _ = run_ours(spark, spec_path)
        spark.stop()
    driver = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    figures = {"seconds": elapsed, "rows": rows, "jvm": sampler.jvm, "workers": sampler.workers}
    figures |= {"total": sampler.total, "total_pss": sampler.total_pss, "samples": sampler.samples}
    print(json.dumps({**figures, "driver_python": driver}))
    return 0


def run_memory(spec_path: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "bench.load_bench", "--memory-child", str(spec_path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=7200,
        cwd=Path(__file__).resolve().parent.parent,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the memory run failed:\n{done.stderr[-3000:]}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


# ---------------------------------------------------------------------------------------------- main


def mib(value: float) -> str:
    return f"{value / 2**20:,.0f} MiB"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=2_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--memory-scale", type=int, default=10, help="0 skips the memory comparison")
    parser.add_argument(
        "--memory-messages", type=int, default=None, help="the 1x size of the memory comparison (default --messages)"
    )
    parser.add_argument("--profile", action="store_true", help="also show where ours spends its time")
    parser.add_argument("--no-warmup", action="store_true", help="no untimed run of ours before the timed ones")
    parser.add_argument(
        "--baseline-child", nargs=4, metavar=("BOOTSTRAP", "TOPIC", "COUNT", "OUT"), help=argparse.SUPPRESS
    )
    parser.add_argument("--memory-child", metavar="SPEC", help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 100,000 messages, 1 run, memory at 2x")
    args = parser.parse_args(argv)
    if args.quick:
        args.messages, args.runs, args.memory_scale = 100_000, 1, 2
    if args.baseline_child:
        bootstrap, topic, count, out = args.baseline_child
        return baseline_child(bootstrap, topic, int(count), Path(out))
    if args.memory_child:
        return memory_child(Path(args.memory_child))

    from pipelines.app.session import local_session
    from tests.support.kafkalog import BrokerProcess

    count = args.messages
    root = Path(tempfile.mkdtemp(prefix="pipelines-load-bench-"))
    broker = BrokerProcess(root / "broker", default_partitions=PARTITIONS)
    print(
        f"# broker -> committed raw layer: {count:,} JSON events of ~250 bytes, {PARTITIONS} partitions; "
        f"pipelines on local[2] vs confluent-kafka + pyarrow in one process; {os.cpu_count()} CPUs; "
        f"load average {os.getloadavg()[0]:.1f} at the start"
    )
    bench_started = time.perf_counter()
    try:
        broker.start()
        bootstrap = broker.bootstrap
        print(f"produced {count:,} events in {produce(broker, TOPIC, count):.1f} s")
        spark = local_session("local[2]")  # started once, before any timing
        if not args.no_warmup:  # the first run of a JVM is slower (JIT, Python workers): shown, not counted
            seconds, rows, _ = run_ours(spark, write_spec(root, bootstrap, root / "raw-warmup", TOPIC, "warmup"))
            shutil.rmtree(root / "raw-warmup")
            print(
                f"warm-up (untimed for the ratio): ours on a fresh session {seconds:.2f} s, "
                f"{rows / seconds:,.0f} rows/s"
            )
            result("load_rows_per_s_ours_first_run", rows / seconds, "rows/s")
        ours_times: list[float] = []
        base_times: list[float] = []
        base_rss: list[int] = []
        last_spec = None
        for rep in range(args.runs):
            raw = root / f"raw-{rep}"
            spec_path = write_spec(root, bootstrap, raw, TOPIC, f"bench_{rep}")
            seconds, rows, outcome = run_ours(spark, spec_path)
            if outcome.status != "committed" or rows != count:
                raise RuntimeError(f"ours: {outcome.status}, {rows} rows committed, wanted {count}")
            ours_times.append(seconds)
            last_spec = spec_path
            if rep < args.runs - 1:
                shutil.rmtree(raw)
            base = run_baseline(bootstrap, TOPIC, count, root / f"baseline-{rep}")
            shutil.rmtree(root / f"baseline-{rep}")
            base_times.append(base["seconds"])
            base_rss.append(base["peak_rss"])
            print(
                f"run {rep + 1}: ours {seconds:.2f} s ({count / seconds:,.0f} rows/s; load+reconcile "
                f"{outcome.manifest.stats['seconds']:.2f} s), baseline {base['seconds']:.2f} s "
                f"({count / base['seconds']:,.0f} rows/s: parse {base['parse']:.2f} s, write {base['write']:.2f} s, "
                f"the rest consuming; {base['files']} files, peak RSS {mib(base['peak_rss'])})"
            )
        ours_rate = count / statistics.median(ours_times)
        base_rate = count / statistics.median(base_times)
        ratio = ours_rate / base_rate
        print(
            f"median of {args.runs}: ours {ours_rate:,.0f} rows/s, baseline {base_rate:,.0f} rows/s, ratio {ratio:.2f}"
        )
        result("load_rows_per_s_ours", ours_rate, "rows/s")
        result("load_rows_per_s_baseline", base_rate, "rows/s")
        result("baseline_peak_rss", statistics.median(base_rss) / 2**20, "MiB")

        if args.profile:
            profile_ours(spark, root, bootstrap, count)
        assert last_spec is not None
        idle = []
        for _ in range(3):
            seconds, _, outcome = run_ours(spark, last_spec)
            if outcome.status != "up-to-date":
                raise RuntimeError(f"a run with no new data ended {outcome.status}")
            idle.append(seconds)
        spark.stop()
        started = time.perf_counter()
        cli = subprocess.run(
            [str(PIPELINES), "run", str(last_spec), "--master", "local[2]", "--quiet"],
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )
        cli_seconds = time.perf_counter() - started
        if cli.returncode != 0:
            raise RuntimeError(f"pipelines run failed: {cli.stderr[-2000:]}")
        print(
            f"no new data: in-process runs {', '.join(f'{s:.3f}' for s in idle)} s (median "
            f"{statistics.median(idle):.3f}); a whole `pipelines run` process {cli_seconds:.2f} s"
        )
        result("no_new_data_run_seconds", statistics.median(idle), "s")
        result("no_new_data_cli_seconds", cli_seconds, "s")

        if args.memory_scale > 0:
            small_count = args.memory_messages or count
            big = small_count * args.memory_scale
            free = shutil.disk_usage(root).free
            needed = big * 300 * 2  # the log (~290 bytes per entry) and the raw layer, with room to spare
            if needed > free:
                raise RuntimeError(f"{big:,} messages need about {mib(needed)}; {mib(free)} free under {root}")
            small_topic = TOPIC
            if small_count != count:
                small_topic = f"{TOPIC}_mem"
                seconds = produce(broker, small_topic, small_count)
                print(f"produced {small_count:,} events ({small_topic}) in {seconds:.1f} s")
            seconds = produce(broker, BIG_TOPIC, small_count, repeat=args.memory_scale)
            print(
                f"produced {big:,} events ({BIG_TOPIC}: the same events, each block {args.memory_scale}x) "
                f"in {seconds:.1f} s"
            )
            small = run_memory(write_spec(root, bootstrap, root / "raw-mem-1x", small_topic, "mem_1x"))
            shutil.rmtree(root / "raw-mem-1x")
            large = run_memory(write_spec(root, bootstrap, root / "raw-mem-big", BIG_TOPIC, "mem_big"))
            shutil.rmtree(root / "raw-mem-big")
            if small["rows"] != small_count or large["rows"] != big:
                raise RuntimeError(f"memory runs committed {small['rows']} and {large['rows']} rows")
            for label, figures in ((f"{small_count:,}", small), (f"{big:,}", large)):
                print(
                    f"memory, {label} messages (fresh process, {figures['seconds']:.1f} s, "
                    f"{figures['rows'] / figures['seconds']:,.0f} rows/s): peak RSS JVM {mib(figures['jvm'])}, "
                    f"Python workers {mib(figures['workers'])}, together {mib(figures['total'])}; together as PSS "
                    f"{mib(figures['total_pss'])} (driver Python {mib(figures['driver_python'])}, "
                    f"{figures['samples']} samples)"
                )
            memory_ratio = large["total"] / small["total"]
            pss_ratio = large["total_pss"] / small["total_pss"] if small["total_pss"] else float("nan")
            print(
                f"peak executor-side memory, {args.memory_scale}x the data: ratio {memory_ratio:.2f} "
                f"(PSS {pss_ratio:.2f})"
            )
            result("peak_memory_1x", small["total"] / 2**20, "MiB")
            result(f"peak_memory_{args.memory_scale}x", large["total"] / 2**20, "MiB")
            result(f"peak_memory_pss_ratio_{args.memory_scale}x", pss_ratio, "ratio")
            result(f"peak_memory_ratio_{args.memory_scale}x", memory_ratio, "ratio")
        result("load_ratio_vs_baseline", ratio, "ratio")
    finally:
        if broker.process is not None and broker.process.poll() is None:
            broker.stop()
        shutil.rmtree(root, ignore_errors=True)
    print(
        f"# whole benchmark {time.perf_counter() - bench_started:.0f} s; "
        f"load average {os.getloadavg()[0]:.1f} at the end"
    )
    print_results()
    return 0


if __name__ == "__main__":
    sys.exit(main())
