"""Mirror-maker throughput: ``kafkalog mirror`` against Apache Kafka 0.9.0.1's own MirrorMaker,
between the same two kafkalog brokers, in one invocation.

Setup: one ZooKeeper server; a source ``kafkalog broker`` registered under the chroot ``/src`` and a
target one under ``/dst``. A source topic per codec (4 partitions) is filled, untimed, with N
messages of 100 bytes (kafkalog's Producer, message i to partition i % 4, each value carrying its
index and random text). Every run mirrors one topic into an empty target: the target broker is
stopped, its data directory and its ``/dst`` registry deleted, and it is started again on the same
port; every run uses a new consumer group. The contenders alternate (ours, Kafka, ours, ...).

Per run, from the moment the mirror process is started, the target's end offsets are polled about
10 times a second (ListOffsets, kafkalog's SimpleConsumer):
- end to end: start of the process until the target holds N messages (JVM or Python start-up,
  group join and topic creation included);
- steady state: from the first poll that saw a message until the one that saw all N (excludes
  start-up).
Then the target is read back: every index 0..N-1 exactly once (missing and duplicates reported).
CPU of the mirror process and of both brokers comes from ``/proc/<pid>/stat``.

Contenders (``--contenders``, default ``ours-zk,kafka,ours-bootstrap``): ``kafka``; ``ours-zk`` and
``ours-bootstrap`` (source and target given by ZooKeeper or by broker list); variants of ours:
``-x2`` (two mirror processes of one group) and ``-gc`` (Python's GC thresholds raised first).

``--profile`` adds one run of ours in each form under py-spy (``--py-spy PATH``; samples of the
thread holding the GIL) or, without py-spy, under a cProfile in every thread, and prints where the
time goes. Ends with ``RESULT <name> <value> <unit>`` lines.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import logging
import os
import pstats
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml
from kazoo.client import KazooClient

from bench.results import print_results, result
from kafkalog.client import Admin, Producer, SimpleConsumer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.support.installed import KAFKA09_HOME as KAFKA_HOME
from tests.support.kafkalog import KAFKALOG, BrokerProcess
from tests.support.ports import free_port
from tests.support.zookeeper import ZooKeeperProcess

PARTITIONS = 4
VALUE_BYTES = 100
TICKS = os.sysconf("SC_CLK_TCK")
POLL_S = 0.1

# Settings given to both tools (see the docs section "Mirror-maker").
STREAMS = 2
LINGER_MS = 20  # conf/mirror.yaml's producer linger_ms
BATCH_BYTES = 256 * 1024  # conf/mirror.yaml's producer batch_bytes
COMMIT_INTERVAL_MS = 5000  # conf/mirror.yaml's commit_interval_ms
GC_THRESHOLD = (50_000, 20, 100)
"""The "-gc" variants of ours: Python's default is (700, 10, 10)."""

MIRROR_MAKER_LOG4J = """\
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.org.apache.zookeeper=WARN
log4j.logger.org.I0Itec.zkclient=WARN
"""

WORDS = [
    "click", "view", "buy", "cart", "search", "login", "logout", "home", "product", "checkout", "share", "like",
    "comment", "follow", "mobile", "desktop", "tablet", "berlin", "paris", "tokyo", "lima", "oslo", "cairo",
    "delhi", "quito",
]  # fmt: skip


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS


def make_value(i: int, rng: random.Random) -> bytes:
    """100 bytes: the index (read back to find losses and duplicates), then random words and digits,
    so that snappy has something to do without the values being all alike (about 1.6:1)."""
    head = f"{i:010d} u{rng.randrange(1_000_000):06d} "
    parts = [head]
    size = len(head)
    while size < VALUE_BYTES:
        word = rng.choice(WORDS) if rng.random() < 0.6 else f"{rng.randrange(10**8):x}"
        parts.append(word + " ")
        size += len(word) + 1
    return "".join(parts).encode()[:VALUE_BYTES]


def fill(bootstrap: str, topic: str, count: int, codec: str) -> float:
    """``count`` messages into ``topic`` (created with 4 partitions), message i to partition i % 4;
    returns the seconds it took (not part of any measurement)."""
    with Admin(bootstrap) as admin:
        admin.create_topic(topic, PARTITIONS)
    rng = random.Random(f"{topic}-{count}")
    start = time.monotonic()
    with Producer(bootstrap, compression=codec, linger_ms=20, batch_bytes=BATCH_BYTES, acks=1) as producer:
        futures = []
        for i in range(count):
            future = producer.send(topic, make_value(i, rng), partition=i % PARTITIONS)
            if i % 10_000 == 0:
                futures.append(future)
        producer.flush(300)
        for future in futures:
            future.result(0)
    with SimpleConsumer(bootstrap) as consumer:
        held = sum(consumer.latest_offset(topic, p) for p in range(PARTITIONS))
    assert held == count, f"{topic}: the source holds {held} messages, not {count}"
    return time.monotonic() - start


class Cluster:
    """ZooKeeper, the source broker (``/src``) and the target broker (``/dst``, fixed port)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.zk_server = ZooKeeperProcess(root / "zookeeper")
        self.src: BrokerProcess | None = None
        self.dst: BrokerProcess | None = None
        self.zk: KazooClient | None = None
        self.dst_port = free_port()

    @property
    def connect(self) -> str:
        return self.zk_server.connect

    def start(self) -> Cluster:
        self.zk_server.start()
        self.zk = KazooClient(hosts=self.connect, timeout=10.0)
        self.zk.start(timeout=15)
        self.src = BrokerProcess(
            self.root / "src", broker_id=0, zookeeper=f"{self.connect}/src", zookeeper_session_timeout_ms=6000
        ).start()
        self.dst = self._target()
        return self

    def _target(self) -> BrokerProcess:
        # auto-created topics (Kafka's MirrorMaker relies on them) get the source's partition count
        return BrokerProcess(
            self.root / "dst", broker_id=0, zookeeper=f"{self.connect}/dst", zookeeper_session_timeout_ms=6000,
            port=self.dst_port, default_partitions=PARTITIONS,
        ).start()  # fmt: skip

    def reset_target(self) -> None:
        """An empty target: stop it, delete its data and its registry, start it on the same port."""
        assert self.dst is not None and self.zk is not None
        stop_broker(self.dst)
        shutil.rmtree(self.dst.data_dir, ignore_errors=True)
        self.zk.delete("/dst", recursive=True)
        self.dst = self._target()
        assert self.dst.port == self.dst_port

    def target_topic_exists(self, topic: str) -> bool:
        assert self.zk is not None
        return self.zk.exists(f"/dst/brokers/topics/{topic}") is not None

    def stop(self) -> None:
        for broker in (self.src, self.dst):
            if broker is not None:
                stop_broker(broker)
        if self.zk is not None:
            self.zk.stop()
            self.zk.close()
        self.zk_server.stop()


def stop_broker(broker: BrokerProcess) -> None:
    if broker.process is not None and broker.process.poll() is None:
        try:
            broker.stop()
        except subprocess.TimeoutExpired:
            broker.kill()


def stop_process(process: subprocess.Popen[bytes] | None, timeout: float) -> int | None:
    """SIGTERM (a graceful stop), SIGKILL after ``timeout``; the exit code."""
    if process is None:
        return None
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
    return process.returncode


# ---------------------------------------------------------------------- the contenders


def start_ours(
    cluster: Cluster,
    form: str,
    topic: str,
    group: str,
    workdir: Path,
    profile_to: Path | None = None,
    streams: int = STREAMS,
    gc_threshold: tuple[int, int, int] | None = None,
) -> subprocess.Popen[bytes]:
    """``kafkalog mirror --config <yaml>``: sources and target by ZooKeeper (form "zk") or by
    bootstrap list (form "bootstrap"); every other setting is conf/mirror.yaml's default.
    ``gc_threshold``: the same command with Python's cyclic GC thresholds raised first (an
    experiment: kafkalog itself does not do that)."""
    assert cluster.src is not None and cluster.dst is not None
    if form == "zk":
        source: dict[str, str] = {"name": "src", "zookeeper": f"{cluster.connect}/src"}
        target: dict[str, str] = {"name": "dst", "zookeeper": f"{cluster.connect}/dst"}
    else:
        source = {"name": "src", "bootstrap": cluster.src.bootstrap}
        target = {"name": "dst", "bootstrap": cluster.dst.bootstrap}
    config = {
        "sources": [source],
        "target": target,
        "whitelist": re.escape(topic),
        "group": group,
        "streams": streams,
        "start_from": "earliest",
        "compression": "preserve",
        "commit_interval_ms": COMMIT_INTERVAL_MS,
        "status_interval_ms": 5000,
        "acks": -1,
        "producer": {"linger_ms": LINGER_MS, "batch_bytes": BATCH_BYTES, "retries": 10},
    }
    path = workdir / f"{group}.yaml"
    path.write_text(yaml.safe_dump(config))
    command = [str(KAFKALOG), "mirror", "--config", str(path)]
    if gc_threshold is not None:
        code = f"import gc; gc.set_threshold{gc_threshold}; from kafkalog.cli import main; main(prog_name='kafkalog')"
        command = [sys.executable, "-c", code, *command[1:]]
    if profile_to is not None:
        command = [sys.executable, "-m", "bench.mirror_bench", "--profiled-child", str(profile_to), "--", *command[1:]]
    with (workdir / "ours.log").open("ab") as log:
        return subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"}
        )


def start_kafka(
    cluster: Cluster, codec: str, topic: str, group: str, workdir: Path, streams: int = STREAMS
) -> subprocess.Popen[bytes]:
    """Kafka 0.9.0.1's MirrorMaker: its old ZooKeeper consumer on ``/src``, its Java producer to the
    target's bootstrap address (it has no ZooKeeper form for the producer)."""
    assert cluster.dst is not None
    consumer = workdir / f"{group}-consumer.properties"
    consumer.write_text(
        f"zookeeper.connect={cluster.connect}/src\ngroup.id={group}\nauto.offset.reset=smallest\n"
        "zookeeper.session.timeout.ms=6000\n"
    )
    producer = workdir / f"{group}-producer.properties"
    producer.write_text(
        f"bootstrap.servers={cluster.dst.bootstrap}\nacks=all\nbatch.size={BATCH_BYTES}\nlinger.ms={LINGER_MS}\n"
        f"compression.type={codec}\n"
    )
    log4j = workdir / "mirrormaker-log4j.properties"
    log4j.write_text(MIRROR_MAKER_LOG4J)
    with (workdir / "mirrormaker.log").open("ab") as log:
        return subprocess.Popen(
            ["java", "-Xmx256m", f"-Dlog4j.configuration=file:{log4j}", "-cp", f"{KAFKA_HOME / 'libs'}/*",
             "kafka.tools.MirrorMaker", "--consumer.config", str(consumer), "--producer.config", str(producer),
             "--whitelist", topic, "--num.streams", str(streams),
             "--offset.commit.interval.ms", str(COMMIT_INTERVAL_MS)],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip


# ---------------------------------------------------------------------- one run


@dataclass
class Run:
    contender: str
    codec: str
    total_s: float
    """Process start until the target holds N messages."""
    first_s: float
    """Process start until the first poll that saw a message on the target."""
    steady_rate: float
    """Messages per second from the first poll that saw a message to the one that saw N."""
    cpu_cores: float
    """The mirror process's CPU over total_s, in cores."""
    cpu_us_per_msg: float
    src_cores: float
    dst_cores: float
    missing: int
    duplicates: int
    exit_code: int | None


def target_count(reader: SimpleConsumer, cluster: Cluster, topic: str) -> int:
    """Messages the target holds (the sum of its partitions' end offsets); 0 before the topic exists."""
    if not cluster.target_topic_exists(topic):
        return 0
    try:
        return sum(reader.latest_offset(topic, p) for p in range(PARTITIONS))
    except Exception:  # just created: a partition without a leader yet
        return 0


def read_back(bootstrap: str, topic: str, count: int) -> tuple[int, int]:
    """(missing, duplicates) among the indexes 0..count-1 the target's messages carry."""
    seen = bytearray(count)
    total = 0
    with SimpleConsumer(bootstrap, request_timeout_ms=30_000) as reader:
        for partition in range(PARTITIONS):
            end = reader.latest_offset(topic, partition)
            for message in reader.messages(topic, partition, 0, end):
                index = int((message.value or b"")[:10])
                if seen[index] < 255:
                    seen[index] += 1
                total += 1
    distinct = count - seen.count(0)
    return count - distinct, total - distinct


def measure(
    cluster: Cluster, contender: str, codec: str, topic: str, count: int, workdir: Path, timeout: float, streams: int
) -> Run:
    assert cluster.src is not None and cluster.src.process is not None
    cluster.reset_target()
    assert cluster.dst is not None and cluster.dst.process is not None
    group = f"bench-{contender}-{codec}-{uuid.uuid4().hex[:8]}"
    src_pid, dst_pid = cluster.src.process.pid, cluster.dst.process.pid
    processes: list[subprocess.Popen[bytes]] = []
    with SimpleConsumer(cluster.dst.bootstrap, request_timeout_ms=5000) as reader:
        try:
            src_cpu, dst_cpu = cpu_seconds(src_pid), cpu_seconds(dst_pid)
            start = time.monotonic()
            if contender == "kafka":
                processes.append(start_kafka(cluster, codec, topic, group, workdir, streams))
            else:  # ours-<form>[-x2][-gc]
                _, form, *variants = contender.split("-")
                gc_threshold = GC_THRESHOLD if "gc" in variants else None
                copies = 2 if "x2" in variants else 1  # two mirror processes of one group share the partitions
                processes += [
                    start_ours(cluster, form, topic, group, workdir, streams=streams, gc_threshold=gc_threshold)
                    for _ in range(copies)
                ]
            first: tuple[float, int] | None = None
            held = 0
            while True:
                time.sleep(POLL_S)
                held = target_count(reader, cluster, topic)
                now = time.monotonic()
                if held and first is None:
                    first = (now, held)
                if held >= count:
                    break
                for process in processes:
                    if process.poll() is not None:
                        raise RuntimeError(f"{contender} exited with {process.returncode} after {held} messages")
                if now - start > timeout:
                    raise RuntimeError(f"{contender}: {held} of {count} messages after {timeout:.0f} s")
            done = time.monotonic()
            cpu = sum(cpu_seconds(process.pid) for process in processes)
            src_cpu, dst_cpu = cpu_seconds(src_pid) - src_cpu, cpu_seconds(dst_pid) - dst_cpu
            assert first is not None
            time.sleep(1.0)  # anything mirrored twice would show by now
        finally:
            codes = [stop_process(process, 90) for process in processes]
    exit_code = max((code for code in codes if code is not None), default=None)
    missing, duplicates = read_back(cluster.dst.bootstrap, topic, count)
    total = done - start
    steady = (count - first[1]) / (done - first[0]) if done > first[0] else float("nan")
    return Run(
        contender, codec, total, first[0] - start, steady, cpu / total, cpu / count * 1e6,
        src_cpu / total, dst_cpu / total, missing, duplicates, exit_code,
    )  # fmt: skip


# ---------------------------------------------------------------------- profiling ours


def profiled_child(out: Path, argv: list[str]) -> None:
    """Run ``kafkalog <argv>`` with a cProfile in every thread; on exit write the merged profile to
    ``out`` and each thread's CPU seconds (from /proc/self/task) to ``out.threads``."""
    profiles: list[tuple[str, cProfile.Profile]] = []
    cpu_by_thread: dict[str, float] = {}
    lock = threading.Lock()
    original_run = threading.Thread.run

    def thread_cpu() -> float:
        fields = Path(f"/proc/self/task/{threading.get_native_id()}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS

    def run(self: threading.Thread) -> None:
        profile = cProfile.Profile()
        with lock:
            profiles.append((self.name, profile))
        profile.enable()
        try:
            original_run(self)
        finally:
            profile.disable()
            with lock:
                key = re.sub(r"\d+$", "N", self.name)
                cpu_by_thread[key] = cpu_by_thread.get(key, 0.0) + thread_cpu()

    threading.Thread.run = run  # type: ignore[method-assign]
    from kafkalog.cli import main  # after the patch

    profile = cProfile.Profile()
    profiles.append(("main", profile))
    profile.enable()
    try:
        main.main(argv, prog_name="kafkalog", standalone_mode=False)
    finally:
        profile.disable()
        with lock:
            cpu_by_thread["main"] = thread_cpu()
            for thread in threading.enumerate():  # still running (daemons): their CPU so far
                if thread.native_id is not None and thread is not threading.current_thread():
                    stat = Path(f"/proc/self/task/{thread.native_id}/stat")
                    if stat.exists():
                        fields = stat.read_text().rsplit(")", 1)[1].split()
                        key = re.sub(r"\d+$", "N", thread.name) + " (running)"
                        cpu_by_thread[key] = (int(fields[11]) + int(fields[12])) / TICKS
            stats = pstats.Stats(profiles[0][1])
            for _, other in profiles[1:]:
                if other.getstats():
                    stats.add(other)
            stats.dump_stats(str(out))
            Path(f"{out}.threads").write_text(yaml.safe_dump(cpu_by_thread))


def profile_ours(
    cluster: Cluster, codec: str, topic: str, count: int, workdir: Path, form: str, py_spy: str | None
) -> None:
    """One more run of ours, profiled: with py-spy (sampling, every thread, only samples of threads
    on a CPU) if it is available, else with a cProfile in every thread (about 3x slower: read the
    shares, not the speed)."""
    assert cluster.dst is not None
    cluster.reset_target()
    out = workdir / f"ours-{form}-{codec}.{'pyspy' if py_spy else 'prof'}"
    group = f"bench-profile-{uuid.uuid4().hex[:8]}"
    process: subprocess.Popen[bytes] | None = None
    spy: subprocess.Popen[bytes] | None = None
    with SimpleConsumer(cluster.dst.bootstrap, request_timeout_ms=5000) as reader:
        try:
            start = time.monotonic()
            process = start_ours(cluster, form, topic, group, workdir, profile_to=None if py_spy else out)
            if py_spy:
                time.sleep(0.3)  # the interpreter must be up before py-spy attaches
                spy = subprocess.Popen(
                    [py_spy, "record", "--pid", str(process.pid), "--rate", "250", "--format", "raw", "--threads",
                     "--gil", "--nolineno", "--output", str(out)],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                )  # fmt: skip
            while target_count(reader, cluster, topic) < count:
                if process.poll() is not None or time.monotonic() - start > 900:
                    raise RuntimeError("the profiled mirror did not finish")
                time.sleep(POLL_S)
            elapsed = time.monotonic() - start
            cpu = cpu_seconds(process.pid)
        finally:
            if spy is not None and spy.poll() is None:
                spy.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
                try:
                    spy.wait(30)
                except subprocess.TimeoutExpired:
                    spy.kill()
                    spy.wait(10)
            stop_process(process, 90)
    tool = "py-spy, 250 samples/s of the thread holding the GIL" if py_spy else "cProfile in every thread"
    print(f"\nprofile of ours ({form}, {codec}, {tool}): {count:,} messages in {elapsed:.1f} s, "
          f"CPU {cpu:.1f} s ({cpu / count * 1e6:.1f} us per message); profile in {out}")  # fmt: skip
    if py_spy:
        summarize_py_spy(out)
        return
    threads = yaml.safe_load(Path(f"{out}.threads").read_text())
    print("  CPU seconds per thread: " + ", ".join(f"{k} {v:.1f}" for k, v in sorted(threads.items())))
    text = io.StringIO()
    stats = pstats.Stats(str(out), stream=text)
    waits = ("acquire", "poll", "sleep", "wait", "select", "recv", "sendall")
    stats.sort_stats("tottime").print_stats(60)
    print("  top functions by own time (blocking calls left out):")
    rows = [line for line in text.getvalue().splitlines() if re.match(r"\s*\d", line)]
    busy = [row for row in rows if not (row.split(None, 5)[-1].startswith("{") and any(w in row for w in waits))]
    print("\n".join("    " + row for row in busy[:30]))


def summarize_py_spy(path: Path, top: int = 25) -> None:
    """Samples per thread, and the functions with the most samples of their own (leaf) and in total
    (anywhere on the stack), from py-spy's raw (collapsed stacks) output."""
    per_thread: dict[str, int] = {}
    own: dict[str, int] = {}
    inclusive: dict[str, int] = {}
    total = 0
    for line in path.read_text().splitlines():
        stack, _, samples = line.rpartition(" ")
        if not stack or not samples.isdigit():
            continue
        count = int(samples)
        frames = stack.split(";")
        thread, frames = frames[0], frames[1:]
        # the thread's role: its outermost kafkalog / library function
        role = next((f for f in frames if "kafkalog" in f or "kazoo" in f), frames[-1] if frames else thread)
        per_thread[role] = per_thread.get(role, 0) + count
        total += count
        if frames:
            own[frames[-1]] = own.get(frames[-1], 0) + count
        for frame in set(frames):
            inclusive[frame] = inclusive.get(frame, 0) + count
    if not total:
        print("  py-spy recorded nothing")
        return
    print(f"  {total:,} samples; by thread (its outermost kafkalog function):")
    for role, count in sorted(per_thread.items(), key=lambda kv: -kv[1])[:8]:
        print(f"    {count / total:6.1%}  {role}")
    print("  functions by own samples:")
    for frame, count in sorted(own.items(), key=lambda kv: -kv[1])[:top]:
        print(f"    {count / total:6.1%}  {frame}")
    print("  functions by samples anywhere on the stack:")
    for frame, count in sorted(inclusive.items(), key=lambda kv: -kv[1])[:top]:
        print(f"    {count / total:6.1%}  {frame}")


# ---------------------------------------------------------------------- main


def report(by_case: dict[tuple[str, str], list[Run]], codecs: list[str], contenders: list[str], count: int) -> None:
    """The medians table and the RESULT lines."""
    print(f"\n{'codec':<7}{'contender':<16}{'end-to-end msgs/s':>18}{'steady msgs/s':>15}{'steady MB/s':>12}"
          f"{'first msg s':>12}{'CPU':>6}{'us/msg':>8}{'src/dst CPU':>13}{'miss/dup':>10}")  # fmt: skip

    def median(case: list[Run], value: Callable[[Run], float]) -> float:
        return statistics.median(value(r) for r in case)

    for codec in codecs:
        for contender in contenders:
            case = by_case[(contender, codec)]
            e2e = median(case, lambda r: count / r.total_s)
            steady = median(case, lambda r: r.steady_rate)
            cpu = median(case, lambda r: r.cpu_cores)
            per_msg = median(case, lambda r: r.cpu_us_per_msg)
            brokers = f"{median(case, lambda r: r.src_cores):.0%}/{median(case, lambda r: r.dst_cores):.0%}"
            missing, duplicates = sum(r.missing for r in case), sum(r.duplicates for r in case)
            print(
                f"{codec:<7}{contender:<16}{e2e:>18,.0f}{steady:>15,.0f}{steady * VALUE_BYTES / 1e6:>12.1f}"
                f"{median(case, lambda r: r.first_s):>12.2f}{cpu:>6.0%}{per_msg:>8.1f}{brokers:>13}"
                f"{f'{missing}/{duplicates}':>10}"
            )
            name = f"mirror_{contender.replace('-', '_')}_{codec}"
            result(f"{name}_msgs_per_s", steady, "msgs/s")
            result(f"{name}_mb_per_s", steady * VALUE_BYTES / 1e6, "MB/s")
            result(f"{name}_end_to_end_msgs_per_s", e2e, "msgs/s")
            result(f"{name}_cpu_us_per_msg", per_msg, "us")
            result(f"{name}_missing", missing, "msgs")
            result(f"{name}_duplicates", duplicates, "msgs")
    if "kafka" not in contenders or len(contenders) < 2:
        return
    ours_names = [c for c in contenders if c != "kafka"]
    for codec in codecs:
        kafka = by_case[("kafka", codec)]
        for ours in ours_names:
            mine = by_case[(ours, codec)]
            steady = median(mine, lambda r: r.steady_rate) / median(kafka, lambda r: r.steady_rate)
            e2e = median(mine, lambda r: 1 / r.total_s) / median(kafka, lambda r: 1 / r.total_s)
            suffix = f"{ours.removeprefix('ours-').replace('-', '_')}_{codec}"
            result(f"mirror_ratio_vs_kafka09_{suffix}", steady, "x")
            result(f"mirror_end_to_end_ratio_vs_kafka09_{suffix}", e2e, "x")
            if (ours, codec) == (ours_names[0], codecs[0]):  # the headline: the first of ours, the first codec
                result("mirror_ratio_vs_kafka09", steady, "x")
                result("mirror_end_to_end_ratio_vs_kafka09", e2e, "x")


def pytest_running() -> bool:
    found = subprocess.run(["pgrep", "-f", "pytest"], capture_output=True, text=True, check=False).stdout.split()
    return any(int(pid) != os.getpid() for pid in found)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--codecs", default="none,snappy", help="source topics' codecs, comma-separated")
    parser.add_argument(
        "--contenders",
        default="ours-zk,kafka,ours-bootstrap",
        help="in the order they alternate, comma-separated: kafka, ours-zk, ours-bootstrap; variants of ours: "
        "-x2 (two processes of one group, e.g. ours-zk-x2), -gc (GC thresholds raised, e.g. ours-bootstrap-gc)",
    )
    parser.add_argument("--streams", type=int, default=STREAMS, help="--streams / --num.streams of both tools")
    parser.add_argument("--quick", action="store_true", help="smoke run: 300,000 messages, 1 run")
    parser.add_argument("--profile", action="store_true", help="then profile one run of ours in each form")
    parser.add_argument("--py-spy", default=shutil.which("py-spy"), help="py-spy for --profile (else cProfile)")
    parser.add_argument("--keep", action="store_true", help="keep the working directory (logs, profiles)")
    parser.add_argument("--profiled-child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("rest", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.profiled_child is not None:
        profiled_child(args.profiled_child, args.rest)
        return 0
    count = 300_000 if args.quick else args.messages
    runs = 1 if args.quick else args.runs
    codecs = args.codecs.split(",")
    contenders = args.contenders.split(",")
    if not KAFKA_HOME.joinpath("libs").exists():
        raise SystemExit(f"Apache Kafka 0.9.0.1 is missing ({KAFKA_HOME}): run make install")
    logging.getLogger("kazoo").setLevel(logging.ERROR)  # its reconnect notices are not results
    root = Path(tempfile.mkdtemp(prefix="kafkalog-mirror-bench-"))
    cluster = Cluster(root)
    started = time.monotonic()
    shared = pytest_running()
    print(f"# mirror-maker benchmark: {count:,} messages x {VALUE_BYTES} bytes, {PARTITIONS} partitions, "
          f"codecs {codecs}, {runs} run(s) each of {contenders}; {os.cpu_count()} CPUs"
          f"{'; a pytest process is running (machine shared)' if shared else ''}")  # fmt: skip
    by_case: dict[tuple[str, str], list[Run]] = {}
    try:
        cluster.start()
        assert cluster.src is not None
        for codec in codecs:
            seconds = fill(cluster.src.bootstrap, f"bench-{codec}", count, codec)
            print(f"filled bench-{codec} ({codec}) in {seconds:.1f} s (untimed)")
        timeout = max(120.0, count / 2_000)
        for round_ in range(runs):
            for codec in codecs:
                for contender in contenders:
                    run = measure(cluster, contender, codec, f"bench-{codec}", count, root, timeout, args.streams)
                    by_case.setdefault((contender, codec), []).append(run)
                    shared = shared or pytest_running()
                    print(
                        f"round {round_ + 1} {codec:<6} {contender:<14} end to end {run.total_s:6.2f} s "
                        f"({count / run.total_s:>9,.0f}/s), first message after {run.first_s:5.2f} s, steady "
                        f"{run.steady_rate:>9,.0f}/s; CPU {run.cpu_cores:.0%} ({run.cpu_us_per_msg:.1f} us/msg), "
                        f"brokers src {run.src_cores:.0%} dst {run.dst_cores:.0%}; missing {run.missing}, "
                        f"duplicates {run.duplicates}, exit {run.exit_code}",
                        flush=True,
                    )
        if runs:
            report(by_case, codecs, contenders, count)
        if args.profile:
            for form in ("zk", "bootstrap"):
                profile_ours(cluster, codecs[0], f"bench-{codecs[0]}", count, root, form, args.py_spy)
    finally:
        cluster.stop()
        if args.keep:
            print(f"working directory kept: {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    elapsed = time.monotonic() - started
    print(f"\nwhole invocation: {elapsed:.0f} s; machine shared with pytest: {'yes' if shared else 'no'}")
    print_results()
    return 0


if __name__ == "__main__":
    sys.exit(main())
