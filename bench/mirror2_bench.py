"""Mirror-maker throughput: ``kafkalog mirror`` against Apache Kafka 4.x's MirrorMaker 2 (dedicated
mode, on Kafka Connect), between the same two Apache Kafka 4.x brokers, in one invocation.

Setup: two KRaft brokers (``tests/support/kafka4.py``), source and target. A source topic per codec
(4 partitions) is filled, untimed, with N messages of 100 bytes by ``bench.mirror_bench.fill``
(kafkalog's Producer, message i to partition i % 4, each value carrying its index). Every run
mirrors one topic into a target broker started fresh for it (a new KRaft cluster: no topic, no
group, no MirrorMaker 2 state) with ``auto.create.topics.enable=false``: each contender creates its
topic itself. The contenders alternate (ours, MirrorMaker 2, ours, ...).

Per run, from the moment the mirror process is started, the target's end offsets are polled about
10 times a second (``bench.mirror_bench.target_count``):
- end to end: start of the process until the target holds N messages (JVM or Python start-up,
  Connect's herder and task start, topic creation included);
- steady state: from the first poll that saw a message until the one that saw all N.
Then the target is read back (``bench.mirror_bench.read_back``): every index 0..N-1 exactly once.
MirrorMaker 2 is at-least-once: its duplicates are reported, not failed on; ours must have none.
CPU of the mirror process and of both brokers comes from ``/proc/<pid>/stat``.

``--brokers kafkalog`` runs the same pair between two ``kafkalog broker`` processes (no ZooKeeper).
A contender whose process exits, or stalls, before the target holds N is reported with the cause its
log gives and left out of the later rounds; the invocation then exits 1 (after the figures of the
others). Ends with ``RESULT <name> <value> <unit>`` lines, ``mirror_ratio_vs_mm2_<codec>`` among them (ours
steady msgs/s over MirrorMaker 2's).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from bench.results import print_results, result

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.mirror_bench import (
    BATCH_BYTES,
    LINGER_MS,
    PARTITIONS,
    POLL_S,
    VALUE_BYTES,
    cpu_seconds,
    fill,
    pytest_running,
    read_back,
    start_ours,
    stop_broker,
    stop_process,
    target_count,
)
from kafkalog.client import Admin, SimpleConsumer
from tests.support.installed import MissingPeer
from tests.support.kafka4 import Kafka4Process
from tests.support.kafkalog import BrokerProcess
from tests.support.mirror2 import MM2_LOG4J, command, one_flow, write_properties
from tests.support.mirror2 import require_mm2 as require_connect_mirror

CONTENDERS = ("ours", "mm2")
MM2_JVM = (
    # what bin/connect-mirror-maker.sh gives it (KAFKA_HEAP_OPTS, kafka-run-class.sh's
    # KAFKA_JVM_PERFORMANCE_OPTS)
    "-Xms256M", "-Xmx2G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true",
)  # fmt: skip


class Broker(Protocol):
    """A Kafka4Process or a BrokerProcess."""

    @property
    def bootstrap(self) -> str: ...


@dataclass
class Endpoints:
    """The source and the target of one run: what ``mirror_bench.start_ours`` (bootstrap form) and
    ``mirror_bench.target_count`` read of their ``Cluster``."""

    src: Broker
    dst: Broker
    _created: bool = False

    def target_topic_exists(self, topic: str) -> bool:
        """Asked with a Metadata request for every topic (which creates none)."""
        if not self._created:
            with Admin(self.dst.bootstrap) as admin:
                self._created = topic in admin.list_topics()
        return self._created


def broker_pid(broker: Kafka4Process | BrokerProcess) -> int:
    assert broker.process is not None
    return broker.process.pid


def start_broker(kind: str, root: Path) -> Kafka4Process | BrokerProcess:
    """A fresh broker in ``root``: Apache Kafka 4.x (KRaft) or ``kafkalog broker``; neither creates a
    topic because a client asked for its metadata."""
    if kind == "kafka4":
        return Kafka4Process(root, **{"auto.create.topics.enable": "false", "num.partitions": PARTITIONS}).start()
    root.mkdir(parents=True, exist_ok=True)
    return BrokerProcess(root / "data", auto_create_topics=False, default_partitions=PARTITIONS).start()


def end_broker(broker: Kafka4Process | BrokerProcess) -> None:
    if isinstance(broker, Kafka4Process):
        broker.stop()
    else:
        stop_broker(broker)


def require_mm2() -> None:
    """Kafka 4.x's jars with MirrorMaker 2 in them, or SystemExit saying how to get them."""
    try:
        require_connect_mirror()
    except MissingPeer as exc:
        raise SystemExit(str(exc)) from exc


def mm2_properties(ends: Endpoints, topic: str, codec: str, tasks: int) -> dict[str, object]:
    """mm2.properties of the one flow src->dst (see the docs section for each setting's reason)."""
    return {
        # a regex; bench-<codec> matches only itself
        **one_flow("src", "dst", ends.src.bootstrap, ends.dst.bootstrap, topic),
        "replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
        "tasks.max": tasks,
        # every piece of its state on the target, which each run starts empty
        "offset-syncs.topic.location": "target",
        # no consumer group of the source to translate (the only ones are our mirror's own)
        "emit.checkpoints.enabled": "false",
        # the producer: ours' settings (conf/mirror.yaml) and the source's codec
        "dst.producer.linger.ms": LINGER_MS,
        "dst.producer.batch.size": BATCH_BYTES,
        "dst.producer.compression.type": codec,
        "dst.producer.acks": "all",
    }


def start_mm2(ends: Endpoints, topic: str, codec: str, tasks: int, workdir: Path, tag: str) -> subprocess.Popen[bytes]:
    """MirrorMaker 2 in dedicated mode, only the herder of flows into dst (``--clusters dst``, as
    run beside the target cluster); java from PATH, Kafka 4.x's jars on the class path."""
    properties = write_properties(workdir / f"{tag}-mm2.properties", mm2_properties(ends, topic, codec, tasks))
    log4j = workdir / f"{tag}-mm2-log4j2.properties"
    log4j.write_text(MM2_LOG4J.format(path=workdir / f"{tag}-mm2.log"))
    with (workdir / f"{tag}-mm2.out").open("ab") as out:
        return subprocess.Popen(command(properties, log4j, MM2_JVM, "dst"), stdout=out, stderr=subprocess.STDOUT)


@dataclass
class Run:
    contender: str
    codec: str
    total_s: float
    first_s: float
    steady_rate: float
    cpu_cores: float
    cpu_us_per_msg: float
    steady_us_per_msg: float
    """The mirror's CPU from the first poll that saw a message to the last, per message mirrored then."""
    src_cores: float
    dst_cores: float
    missing: int
    duplicates: int
    exit_code: int | None
    load: str


class ContenderFailed(RuntimeError):
    """The mirror process exited, or stalled, before the target held every message."""


def causes(contender: str, log: Path, since: int) -> str:
    """What the contender's log says went wrong (from byte ``since`` on): our mirror's ``error:``
    lines; MirrorMaker 2's ERROR lines with the exception message under each (its known refusal to
    start the checkpoint connector, which this benchmark disables, left out)."""
    if not log.exists():
        return f"({log} is missing)"
    with log.open("rb") as stream:
        stream.seek(since)
        lines = stream.read().decode(errors="replace").splitlines()
    if contender == "ours":
        found = [line for line in lines if line.startswith(("error:", "Traceback")) or "ERROR" in line]
    else:
        found = []
        for i, line in enumerate(lines):
            if "] ERROR " in line and "MirrorCheckpointConnector" not in line:
                found.append(line)
                if i + 1 < len(lines) and not lines[i + 1].startswith("["):
                    found.append("  " + lines[i + 1])
    return "\n".join(found[:6]) or "\n".join(lines[-15:])


def measure(
    kind: str, src: Kafka4Process | BrokerProcess, contender: str, codec: str, count: int, workdir: Path,
    timeout: float, tasks: int, number: int, keep: bool,
) -> Run:  # fmt: skip
    """One run into a target broker started for it (and stopped after the read-back)."""
    topic = f"bench-{codec}"
    tag = f"{number:02d}-{contender}-{codec}"
    load = Path("/proc/loadavg").read_text().split()[:3]
    dst = start_broker(kind, workdir / f"dst-{tag}")
    ends = Endpoints(src, dst)
    process: subprocess.Popen[bytes] | None = None
    log = workdir / (f"{tag}-mm2.log" if contender == "mm2" else "ours.log")
    since = log.stat().st_size if log.exists() else 0  # ours.log collects every run of ours
    try:
        with SimpleConsumer(dst.bootstrap, request_timeout_ms=5000) as reader:
            try:
                src_cpu, dst_cpu = cpu_seconds(broker_pid(src)), cpu_seconds(broker_pid(dst))
                start = time.monotonic()
                if contender == "mm2":
                    process = start_mm2(ends, topic, codec, tasks, workdir, tag)
                else:
                    group = f"bench-ours-{codec}-{uuid.uuid4().hex[:8]}"
                    process = start_ours(ends, "bootstrap", topic, group, workdir)  # type: ignore[arg-type]
                first: tuple[float, int] | None = None
                while True:
                    time.sleep(POLL_S)
                    held = target_count(reader, ends, topic)  # type: ignore[arg-type]
                    now = time.monotonic()
                    if held and first is None:
                        first = (now, held)
                        first_cpu = cpu_seconds(process.pid)
                    if held >= count:
                        break
                    if process.poll() is not None:
                        raise ContenderFailed(
                            f"exited with {process.returncode} after {held:,} of {count:,} messages ({log}):\n"
                            + causes(contender, log, since)
                        )
                    if now - start > timeout:
                        raise ContenderFailed(
                            f"{held:,} of {count:,} messages after {timeout:.0f} s ({log}):\n"
                            + causes(contender, log, since)
                        )
                done = time.monotonic()
                cpu = cpu_seconds(process.pid)
                src_cpu, dst_cpu = cpu_seconds(broker_pid(src)) - src_cpu, cpu_seconds(broker_pid(dst)) - dst_cpu
                assert first is not None
                time.sleep(1.0)  # anything mirrored twice would show by now
            finally:
                exit_code = stop_process(process, 90)
        missing, duplicates = read_back(dst.bootstrap, topic, count)
    finally:
        end_broker(dst)
        if not keep:
            shutil.rmtree(workdir / f"dst-{tag}", ignore_errors=True)
    total = done - start
    # undefined when the first poll that saw a message saw them all (a smoke run's few messages)
    steady = (count - first[1]) / (done - first[0]) if count > first[1] else float("nan")
    steady_cpu = (cpu - first_cpu) / (count - first[1]) * 1e6 if count > first[1] else float("nan")
    return Run(
        contender, codec, total, first[0] - start, steady, cpu / total, cpu / count * 1e6, steady_cpu, src_cpu / total,
        dst_cpu / total, missing, duplicates, exit_code, " ".join(load),
    )  # fmt: skip


NAMES = {"ours": "kafkalog mirror", "mm2": "MirrorMaker 2"}


def report(
    by_case: dict[tuple[str, str], list[Run]], codecs: list[str], contenders: list[str], count: int, kind: str
) -> None:
    """The medians table and the RESULT lines (names end in ``_kafkalog`` between kafkalog brokers)."""
    suffix = "" if kind == "kafka4" else "_kafkalog"
    print(f"\nbrokers: {kind}")
    print(f"{'codec':<7}{'contender':<17}{'end-to-end msgs/s':>18}{'steady msgs/s':>15}{'steady MB/s':>12}"
          f"{'first msg s':>12}{'CPU':>6}{'us/msg':>8}{'steady us/msg':>14}{'src/dst CPU':>13}"
          f"{'miss/dup':>10}")  # fmt: skip

    def median(case: list[Run], value: Callable[[Run], float]) -> float:
        return statistics.median(value(r) for r in case)

    for codec in codecs:
        for contender in contenders:
            case = by_case[(contender, codec)]
            e2e = median(case, lambda r: count / r.total_s)
            steady = median(case, lambda r: r.steady_rate)
            per_msg = median(case, lambda r: r.cpu_us_per_msg)
            steady_per_msg = median(case, lambda r: r.steady_us_per_msg)
            brokers = f"{median(case, lambda r: r.src_cores):.0%}/{median(case, lambda r: r.dst_cores):.0%}"
            missing, duplicates = sum(r.missing for r in case), sum(r.duplicates for r in case)
            print(
                f"{codec:<7}{NAMES[contender]:<17}{e2e:>18,.0f}{steady:>15,.0f}{steady * VALUE_BYTES / 1e6:>12.1f}"
                f"{median(case, lambda r: r.first_s):>12.2f}{median(case, lambda r: r.cpu_cores):>6.0%}"
                f"{per_msg:>8.2f}{steady_per_msg:>14.2f}{brokers:>13}{f'{missing}/{duplicates}':>10}"
            )
            name = f"mirror2_{contender}_{codec}{suffix}"
            result(f"{name}_msgs_per_s", steady, "msgs/s")
            result(f"{name}_end_to_end_msgs_per_s", e2e, "msgs/s")
            result(f"{name}_first_message_s", median(case, lambda r: r.first_s), "s")
            result(f"{name}_cpu_us_per_msg", per_msg, "us")
            result(f"{name}_steady_cpu_us_per_msg", steady_per_msg, "us")
            result(f"{name}_src_broker_cores", median(case, lambda r: r.src_cores), "cores")
            result(f"{name}_dst_broker_cores", median(case, lambda r: r.dst_cores), "cores")
            result(f"{name}_missing", missing, "msgs")
            result(f"{name}_duplicates", duplicates, "msgs")
    if contenders != list(CONTENDERS) and contenders != list(reversed(CONTENDERS)):
        return
    for codec in codecs:
        ours, mm2 = by_case[("ours", codec)], by_case[("mm2", codec)]
        steady = median(ours, lambda r: r.steady_rate) / median(mm2, lambda r: r.steady_rate)
        e2e = median(ours, lambda r: 1 / r.total_s) / median(mm2, lambda r: 1 / r.total_s)
        result(f"mirror_ratio_vs_mm2_{codec}{suffix}", steady, "x")
        result(f"mirror_end_to_end_ratio_vs_mm2_{codec}{suffix}", e2e, "x")


def bench_brokers(
    kind: str, args: argparse.Namespace, count: int, runs: int, codecs: list[str], root: Path, failures: list[str]
) -> bool:
    """Fill the sources and run every round between brokers of ``kind``; True if a pytest ran. A
    contender that fails is reported in ``failures`` and left out of the later rounds."""
    shared = False
    contenders = args.contenders.split(",")
    failed: set[str] = set()
    src = start_broker(kind, root / f"src-{kind}")
    by_case: dict[tuple[str, str], list[Run]] = {}
    workdir = root / kind
    workdir.mkdir(exist_ok=True)
    try:
        for codec in codecs:
            seconds = fill(src.bootstrap, f"bench-{codec}", count, codec)
            print(f"{kind}: filled bench-{codec} ({codec}) in {seconds:.1f} s (untimed)", flush=True)
        timeout = max(180.0, count / 2_000)
        number = 0
        for round_ in range(runs):
            for codec in codecs:
                for contender in contenders:
                    if contender in failed:
                        continue
                    number += 1
                    where = f"{kind} round {round_ + 1} {codec:<5} {NAMES[contender]:<16}"
                    try:
                        run = measure(
                            kind, src, contender, codec, count, workdir, timeout, args.tasks, number, args.keep
                        )
                    except ContenderFailed as exc:
                        failed.add(contender)
                        failures.append(f"{kind} brokers, {NAMES[contender]}, {codec}: {exc}")
                        print(f"{where} FAILED: {exc}", flush=True)
                        continue
                    by_case.setdefault((contender, codec), []).append(run)
                    shared = shared or pytest_running()
                    print(
                        f"{where} end to end {run.total_s:6.2f} s "
                        f"({count / run.total_s:>9,.0f}/s), first message after {run.first_s:5.2f} s, steady "
                        f"{run.steady_rate:>9,.0f}/s; CPU {run.cpu_cores:.0%} ({run.cpu_us_per_msg:.2f} us/msg, "
                        f"steady {run.steady_us_per_msg:.2f}), "
                        f"brokers src {run.src_cores:.0%} dst {run.dst_cores:.0%}; missing {run.missing}, "
                        f"duplicates {run.duplicates}, exit {run.exit_code}; load before {run.load}",
                        flush=True,
                    )
                    if contender == "ours" and (run.missing or run.duplicates):
                        failures.append(f"{kind} brokers, ours, {codec}: {run.missing} missing, {run.duplicates} "
                                        "duplicates")  # fmt: skip
        measured = [c for c in contenders if c not in failed]
        if measured:
            report(by_case, codecs, measured, count, kind)
    finally:
        end_broker(src)
    return shared


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=2_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--codecs", default="none,lz4", help="source topics' codecs, comma-separated")
    parser.add_argument("--brokers", default="kafka4", help="kafka4, kafkalog or both (comma-separated)")
    parser.add_argument("--contenders", default="ours,mm2", help="in the order they alternate: ours, mm2")
    parser.add_argument("--tasks", type=int, default=1, help="MirrorMaker 2's tasks.max (ours: one fetch loop)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 100,000 messages, 1 run")
    parser.add_argument("--keep", action="store_true", help="keep the working directory (logs, configs)")
    args = parser.parse_args(argv)
    count = 100_000 if args.quick else args.messages
    runs = 1 if args.quick else args.runs
    codecs = args.codecs.split(",")
    kinds = args.brokers.split(",")
    if unknown := set(kinds) - {"kafka4", "kafkalog"}:
        raise SystemExit(f"--brokers: unknown {sorted(unknown)} (kafka4, kafkalog)")
    if unknown := set(args.contenders.split(",")) - set(CONTENDERS):
        raise SystemExit(f"--contenders: unknown {sorted(unknown)} (ours, mm2)")
    require_mm2()
    root = Path(tempfile.mkdtemp(prefix="kafkalog-mirror2-bench-"))
    started = time.monotonic()
    shared = pytest_running()
    print(f"# mirror vs MirrorMaker 2: {count:,} messages x {VALUE_BYTES} bytes, {PARTITIONS} partitions, "
          f"codecs {codecs}, brokers {kinds}, {runs} run(s) each, MirrorMaker 2 tasks.max={args.tasks}; "
          f"{os.cpu_count()} CPUs; load average {Path('/proc/loadavg').read_text().strip()}"
          f"{'; a pytest process is running (machine shared)' if shared else ''}", flush=True)  # fmt: skip
    failures: list[str] = []
    try:
        for kind in kinds:
            shared = bench_brokers(kind, args, count, runs, codecs, root, failures) or shared
    finally:
        if args.keep:
            print(f"working directory kept: {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    elapsed = time.monotonic() - started
    print(f"\nwhole invocation: {elapsed:.0f} s; machine shared with pytest: {'yes' if shared else 'no'}; "
          f"load average at the end {Path('/proc/loadavg').read_text().strip()}")  # fmt: skip
    print_results()
    for failure in failures:
        print(f"FAILED {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
