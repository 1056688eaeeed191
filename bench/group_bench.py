"""Consumer group benchmarks: the ZooKeeper-coordinated high-level consumer
(``kafkalog.client.group_consumer.GroupConsumer``) against a real ZooKeeper server (Debian's) and a
real ``kafkalog broker`` process registered in it.

1. Join-rebalance latency. A group of n-1 members owns every partition of one empty topic; the n-th
   member calls ``create_message_streams``. Measured from that call until every partition's
   ``/consumers/<group>/owners/<topic>/<partition>`` node names the thread the range assignor gives
   it (read by this process), and until every member's ``owned()`` (the partitions it fetches) is
   its range. n in {1, 2, 5, 10}, partitions in {10, 100, 1000}. A join not complete within
   ``--cap`` seconds is cut off (reported as ">cap"), and a cell whose n-1 members do not settle
   within ``--setup-cap`` is not measured; a cut-off cell of 1000 partitions is not run again.
2. Group throughput. A 4-partition topic of 100-byte messages read to the end by groups of 1, 2
   and 4 members with one stream each, timed from the moment the settled group starts iterating.

Each member is a process of its own (a pool of them, reused with a new GroupConsumer, ZooKeeper
session and group every run), as members of a group would be; the throughput is also measured
with the members as threads of one process, for comparison. Ends with ``RESULT`` lines."""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from bench.results import print_results, result
from kafkalog.client import Admin, Producer
from kafkalog.client.group_consumer import GroupConsumer, Stream
from kafkalog.registry.connect import connect

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.support.kafkalog import BrokerProcess
from tests.support.zookeeper import ZooKeeperProcess

CHROOT = "/bench"
TICKS = os.sysconf("SC_CLK_TCK")
VALUE_BYTES = 100
BROKER_LIMITS = {"max_connections_per_ip": 20_000}
"""A member opens one broker connection per partition it owns (plus one), and every member runs on
this host: the default limit of 1,000 per address refuses some of them with 1,000 partitions."""


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


# ---------------------------------------------------------------------- one member


class WarningCounter(logging.Handler):
    """Counts (and keeps the first few of) the warnings kafkalog logs: failed rebalances, retries."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0
        self.first: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1
        if len(self.first) < 3:
            self.first.append(f"{record.name}: {record.getMessage()[:200]}")

    def take(self) -> tuple[int, list[str]]:
        taken = (self.count, self.first)
        self.count, self.first = 0, []
        return taken


class Member:
    """One group member: a GroupConsumer with one stream, driven by the parent (in a process of
    its own via ``member_main``, or in a thread)."""

    def __init__(self) -> None:
        self.consumer: GroupConsumer | None = None
        self.stream: Stream | None = None

    def join(self, zk_connect: str, group: str, consumer_id: str, topic: str) -> float:
        """Connect (off the clock), then join; returns when ``create_message_streams`` was called."""
        self.consumer = GroupConsumer(
            zk_connect, group, consumer_id=consumer_id, auto_offset_reset="smallest", stream_timeout_s=60
        )
        called = time.monotonic()
        (self.stream,) = self.consumer.create_message_streams({topic: 1})[topic]
        return called

    def await_owned(self, topic: str, partitions: list[int], timeout: float) -> dict[str, Any]:
        """Wait until ``owned()`` is exactly ``partitions``: when it was (None: not within
        ``timeout``), how many of them it had then, and the rebalances it made so far. ``owned()``
        waits while a rebalance holds the consumer's lock, so a thread of its own polls it."""
        consumer = self.consumer
        assert consumer is not None
        want = [(topic, p) for p in sorted(partitions)]
        state: dict[str, Any] = {"at": None, "have": 0, "busy": False}
        done, stop = threading.Event(), threading.Event()

        def poll() -> None:
            while not stop.is_set():
                state["busy"] = True  # stays True while owned() waits for a rebalance to end
                owned = consumer.owned()
                state["busy"] = False
                state["have"] = len(set(owned) & set(want))
                if owned == want:
                    state["at"] = time.monotonic()
                    done.set()
                    return
                time.sleep(0.002)

        threading.Thread(target=poll, name="bench-poll", daemon=True).start()
        done.wait(timeout)
        stop.set()
        return {**state, "rebalances": consumer.rebalances}

    def consume(self, count: int) -> tuple[float, float, int, int]:
        """Iterate until ``count`` messages: (start, end, messages, value bytes)."""
        assert self.stream is not None
        got = size = 0
        start = time.monotonic()
        if count:
            for message in self.stream:
                got += 1
                size += len(message.value or b"")
                if got >= count:
                    break
        return start, time.monotonic(), got, size

    def close(self) -> None:
        if self.consumer is not None:
            self.consumer.close()
        self.consumer = self.stream = None


def member_main(conn: Connection) -> None:
    """A member process: runs the parent's commands (``(method, *args)``) until ``None``."""
    warnings = WarningCounter()
    logging.getLogger("kafkalog").addHandler(warnings)
    member = Member()
    while True:
        command = conn.recv()
        if command is None:
            member.close()
            return
        name, *args = command
        try:
            answer: Any = getattr(member, name)(*args)
        except Exception as exc:
            answer = exc
        conn.send((answer, warnings.take()))


class MemberProcess:
    """The parent's handle on a member process."""

    def __init__(self, context: Any) -> None:
        self.conn, theirs = context.Pipe()
        self.process = context.Process(target=member_main, args=(theirs,), daemon=True)
        self.process.start()
        theirs.close()
        self.warnings = 0
        self.first_warnings: list[str] = []

    def replace(self, context: Any) -> MemberProcess:
        """Kill this member (a crash: no clean leave, its session expires) and start a new process."""
        self.process.kill()
        self.process.join(30)
        self.conn.close()
        fresh = MemberProcess(context)
        fresh.warnings, fresh.first_warnings = self.warnings, self.first_warnings
        return fresh

    def send(self, name: str, *args: object) -> None:
        self.conn.send((name, *args))

    def recv(self, timeout: float = 900) -> Any:
        if not self.conn.poll(timeout):
            raise RuntimeError(f"member process {self.process.pid} did not answer within {timeout:g} s")
        answer, (warnings, first) = self.conn.recv()
        self.warnings += warnings
        self.first_warnings = (self.first_warnings + first)[:3]
        if isinstance(answer, Exception):
            raise RuntimeError(f"member process {self.process.pid} failed: {answer!r}") from answer  # noqa: TRY004
        return answer

    def call(self, name: str, *args: object, timeout: float = 900) -> Any:
        self.send(name, *args)
        return self.recv(timeout)

    def stop(self) -> None:
        try:
            self.conn.send(None)
            self.process.join(60)
        except (OSError, ValueError):
            pass
        if self.process.is_alive():
            self.process.kill()
            self.process.join(10)


# ---------------------------------------------------------------------- the expected assignment


def range_owners(members: list[str], partitions: int) -> dict[int, str]:
    """partition → owner thread (``<consumer id>-0``) by the range rule of docs/registry.md, written
    out here so the check does not rest on the code under test: partitions in order, cut into
    consecutive ranges over the members sorted by id, the first ``partitions % n`` one larger."""
    ordered = sorted(members)
    each, extra = divmod(partitions, len(ordered))
    out: dict[int, str] = {}
    for i, member in enumerate(ordered):
        start = each * i + min(i, extra)
        for p in range(start, start + each + (1 if i < extra else 0)):
            out[p] = f"{member}-0"
    return out


def share(owners: dict[int, str], member: str) -> list[int]:
    return sorted(p for p, owner in owners.items() if owner == f"{member}-0")


def read_owners(zk: Any, group: str, topic: str, partitions: list[int] | None = None) -> dict[int, str]:
    """partition → the value of its owner node (of ``partitions``, default all), pipelined reads."""
    from kazoo.exceptions import NoNodeError

    base = f"/consumers/{group}/owners/{topic}"
    if partitions is None:
        try:
            partitions = [int(child) for child in zk.get_children(base)]
        except NoNodeError:
            return {}
    pending = [(p, zk.get_async(f"{base}/{p}")) for p in partitions]
    out = {}
    for partition, answer in pending:
        try:
            raw, _ = answer.get(timeout=30)
        except NoNodeError:
            continue
        out[partition] = raw.decode()
    return out


def await_owners(zk: Any, group: str, topic: str, want: dict[int, str], timeout: float) -> float | None:
    """The time (monotonic) when every owner node was as ``want`` says, None if not within
    ``timeout``. Only nodes not yet seen right are re-read (a short last poll, so a fine
    resolution), then everything is read once more to confirm."""
    deadline = time.monotonic() + timeout
    pending = sorted(want)
    while time.monotonic() < deadline:
        found = read_owners(zk, group, topic, pending)
        pending = [p for p in pending if found.get(p) != want[p]]
        if not pending:
            at = time.monotonic()
            everything = read_owners(zk, group, topic)
            if everything == want:
                return at
            pending = sorted(p for p in want if everything.get(p) != want[p])  # given up again: go on
        time.sleep(0.002)
    return None


# ---------------------------------------------------------------------- 1. join-rebalance latency


def rebalance_run(
    pool: list[MemberProcess],
    context: Any,
    zk: Any,
    zk_connect: str,
    topic: str,
    partitions: int,
    consumers: int,
    group: str,
    cap_s: float,
    setup_cap_s: float,
) -> dict[str, Any]:
    """n-1 settled members, then the n-th joins. Returns the milliseconds until the owner nodes
    are right ("owners_ms") and until every member fetches its range ("fetching_ms"); None when
    not within ``cap_s``, and no figure at all ("setup_s" None) when the n-1 members did not
    settle within ``setup_cap_s``. Members still rebalancing at a cut-off are killed and replaced
    (``close()`` would wait for their rebalance to end)."""
    ids = [f"m{i:02d}" for i in range(consumers)]
    joined: list[int] = []
    cut_off = finished = False
    out: dict[str, Any] = {"owners_ms": None, "fetching_ms": None, "setup_s": None, "fetching_have": 0, "busy": 0}
    before = range_owners(ids[:-1], partitions) if consumers > 1 else {}
    after = range_owners(ids, partitions)
    out["moved"] = sum(1 for p in after if before.get(p) != after[p])
    try:
        for i, cid in enumerate(ids[:-1]):
            pool[i].call("join", zk_connect, group, cid, topic)
            joined.append(i)
        setup = time.monotonic()
        for i in joined:
            pool[i].send("await_owned", topic, share(before, ids[i]), setup_cap_s)
        settled = not joined or await_owners(zk, group, topic, before, setup_cap_s) is not None
        replies = [pool[i].recv(setup_cap_s + 60) for i in joined]  # every reply, even after a miss
        settled = settled and all(reply["at"] is not None for reply in replies)
        if not settled:
            cut_off = True
            out["setup_have"] = sum(reply["have"] for reply in replies)
            out["setup_busy"] = sum(reply["busy"] for reply in replies)
            return out
        out["setup_s"] = time.monotonic() - setup
        time.sleep(0.5)  # their coordinators go idle

        last = consumers - 1
        pool[last].send("join", zk_connect, group, ids[last], topic)
        joined.append(last)
        for i in joined:
            pool[i].send("await_owned", topic, share(after, ids[i]), cap_s)
        owners_at = await_owners(zk, group, topic, after, cap_s)
        called = pool[last].recv(cap_s + 60)
        fetching = [pool[i].recv(cap_s + 60) for i in joined]
        fetching_at = [f["at"] for f in fetching]
        cut_off = None in fetching_at
        out["owners_ms"] = None if owners_at is None else (owners_at - called) * 1000
        out["fetching_ms"] = None if cut_off else (max(fetching_at) - called) * 1000
        out["fetching_have"] = sum(f["have"] for f in fetching)
        out["busy"] = sum(f["busy"] for f in fetching)
        finished = True
        return out
    finally:
        if cut_off or not finished:  # a member still rebalancing, or anything unexpected
            for i in joined:
                pool[i] = pool[i].replace(context)
        else:
            for i in joined:
                pool[i].send("close")
            for i in joined:
                pool[i].recv()


# ---------------------------------------------------------------------- 2. group throughput


def fill(bootstrap: str, topic: str, partitions: int, count: int) -> float:
    """``count`` 100-byte messages spread evenly over the partitions; returns messages/s."""
    value = b"v" * VALUE_BYTES
    start = time.perf_counter()
    with Producer(bootstrap, linger_ms=20, batch_bytes=256 * 1024) as producer:
        for i in range(count):
            producer.send(topic, value, partition=i % partitions)
        producer.flush()
    return count / (time.perf_counter() - start)


def plain_rate(bootstrap: str, topic: str, partitions: int, per_partition: int) -> float:
    """The reference: messages/s of a SimpleConsumer reading the same partitions one after the
    other in one thread (fetch + decode, nothing handed between threads)."""
    from kafkalog.client.consumer import SimpleConsumer

    consumer = SimpleConsumer(bootstrap)
    try:
        consumer.fetch(topic, 0, 0)  # connected, metadata known
        got = 0
        start = time.perf_counter()
        for partition in range(partitions):
            offset = 0
            while offset < per_partition:
                fetched = consumer.fetch(topic, partition, offset)
                got += len(fetched.messages)
                offset = fetched.messages[-1].offset + 1
        return got / (time.perf_counter() - start)
    finally:
        consumer.close()


def committed(zk: Any, group: str, topic: str, partitions: int) -> list[int | None]:
    from kazoo.exceptions import NoNodeError

    out: list[int | None] = []
    for p in range(partitions):
        try:
            raw, _ = zk.get(f"/consumers/{group}/offsets/{topic}/{p}")
            out.append(int(raw))
        except NoNodeError:
            out.append(None)
    return out


def throughput_run(
    mode: str,
    pool: list[MemberProcess],
    broker_pid: int,
    zk: Any,
    zk_connect: str,
    topic: str,
    partitions: int,
    per_partition: int,
    consumers: int,
    group: str,
) -> dict[str, float]:
    """A group of ``consumers`` reads the whole topic: (messages/s, MB/s) from the moment the
    settled group is told to go until the last member has its share."""
    ids = [f"m{i:02d}" for i in range(consumers)]
    want = range_owners(ids, partitions)
    if mode == "processes":
        calls: list[Callable[..., Any]] = []
        for member in pool[:consumers]:
            calls.append(lambda name, *args, m=member: m.call(name, *args))
    else:
        locals_ = [Member() for _ in range(consumers)]
        calls = [lambda name, *args, m=m: getattr(m, name)(*args) for m in locals_]
    joined = []
    finished = False
    try:
        for call, cid in zip(calls, ids, strict=True):
            call("join", zk_connect, group, cid, topic)
            joined.append(call)
        for call, cid in zip(calls, ids, strict=True):
            if call("await_owned", topic, share(want, cid), 120)["at"] is None:
                raise RuntimeError(f"{cid} did not get its partitions")
        if await_owners(zk, group, topic, want, 120) is None:
            raise RuntimeError("the owner nodes did not settle")
        answers: list[Any] = [None] * consumers

        def run(i: int) -> None:
            answers[i] = calls[i]("consume", len(share(want, ids[i])) * per_partition)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(consumers)]
        pids = [m.process.pid for m in pool[:consumers]] if mode == "processes" else [os.getpid()]
        cpu_before = [cpu_seconds(pid) for pid in [*pids, broker_pid]]
        go = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        end = max(a[1] for a in answers)
        cpu = [cpu_seconds(pid) - before for pid, before in zip([*pids, broker_pid], cpu_before, strict=True)]
        messages = sum(a[2] for a in answers)
        size = sum(a[3] for a in answers)
        if messages != partitions * per_partition:
            raise RuntimeError(f"consumed {messages} messages, expected {partitions * per_partition}")
        finished = True
    finally:
        if finished or mode == "threads":  # after a failure, main() stops (or kills) the processes
            for call in joined:
                call("close")
    offsets = committed(zk, group, topic, partitions)
    if offsets != [per_partition] * partitions:
        raise RuntimeError(f"committed offsets after close: {offsets}")
    seconds = end - go
    return {
        "rate": messages / seconds,
        "mbs": size / seconds / 1e6,
        "seconds": seconds,
        "members_cpu": sum(cpu[:-1]) / seconds,
        "broker_cpu": cpu[-1] / seconds,
    }


# ---------------------------------------------------------------------- main


def fmt_ms(value: float | None, cap_s: float) -> str:
    return f">{cap_s * 1000:,.0f}" if value is None else f"{value:,.0f}"


def report_cell(consumers: int, partitions: int, runs: list[dict[str, Any]], args: Any, started: float) -> str:
    """Print one cell's runs, record its RESULT lines, return its text for the table."""
    label = f"{consumers:>2} members x {partitions:>4} partitions:"
    progress = f"[{time.perf_counter() - started:.0f} s]"
    name = f"{consumers}c_{partitions}p"
    if any(r["setup_s"] is None for r in runs):
        print(
            f"  {label} not measured: the {consumers - 1} existing member(s) did not all fetch their ranges "
            f"within {args.setup_cap:g} s ({runs[-1]['setup_busy']} still inside their rebalance)  {progress}",
            flush=True,
        )
        result(f"rebalance_ms_{name}", float("nan"), "ms")
        result(f"rebalance_ms_{name}_not_measured", 1, "flag")
        return "not measured"
    medians: dict[str, float | None] = {}
    listed: dict[str, str] = {}
    for key in ("owners_ms", "fetching_ms"):
        values = [r[key] for r in runs]
        medians[key] = None if None in values else statistics.median(v for v in values if v is not None)
        listed[key] = ", ".join(fmt_ms(v, args.cap) for v in values)
    owners, fetching = medians["owners_ms"], medians["fetching_ms"]
    print(
        f"  {label} owners {fmt_ms(owners, args.cap):>7} ms [{listed['owners_ms']}]  fetching "
        f"{fmt_ms(fetching, args.cap):>7} ms [{listed['fetching_ms']}]  partitions changing owner "
        f"{runs[0]['moved']}, at the end {runs[-1]['fetching_have']}/{partitions} fetched and "
        f"{runs[-1]['busy']} member(s) inside a rebalance, setup "
        f"{statistics.median(r['setup_s'] for r in runs):.1f} s, runs {len(runs)}  {progress}",
        flush=True,
    )
    for value, key in ((fetching, "rebalance_ms"), (owners, "rebalance_owners_ms")):
        result(f"{key}_{name}", args.cap * 1000 if value is None else value, "ms")
        if value is None:
            result(f"{key}_{name}_cut_off", 1, "flag")
    runs_note = "" if len(runs) == args.repeat else f" ({len(runs)} run{'s' if len(runs) > 1 else ''})"
    return f"{fmt_ms(owners, args.cap)} / {fmt_ms(fetching, args.cap)}{runs_note}"


def print_table(cells: dict[tuple[int, int], str], consumers: list[int], partitions: list[int]) -> None:
    print("\n  owners right / every member fetching, ms (median)")
    print("  | members | " + " | ".join(f"{p} partitions" for p in partitions) + " |")
    print("  |---|" + "---|" * len(partitions))
    for n in consumers:
        print(f"  | {n} | " + " | ".join(cells.get((n, p), "") for p in partitions) + " |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="small sizes, one run: a smoke test")
    parser.add_argument("--consumers", type=int, nargs="+", default=[1, 2, 5, 10])
    parser.add_argument("--partitions", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--big-repeat", type=int, default=3, help="runs of the cells with 1000+ partitions")
    parser.add_argument("--cap", type=float, default=30.0, help="seconds a join may take before it is cut off")
    parser.add_argument("--setup-cap", type=float, default=45.0, help="seconds n-1 members may take to settle")
    parser.add_argument("--messages", type=int, default=400_000)
    parser.add_argument("--throughput-consumers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--skip-rebalance", action="store_true")
    parser.add_argument("--skip-throughput", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.repeat, args.big_repeat, args.messages = 1, 1, 40_000
        args.partitions = [p for p in args.partitions if p < 1000]
    started = time.perf_counter()
    root = Path(tempfile.mkdtemp(prefix="kafkalog-group-bench-"))
    zookeeper = ZooKeeperProcess(root / "zookeeper")
    broker: BrokerProcess | None = None
    context = multiprocessing.get_context("spawn")
    pool: list[MemberProcess] = []
    zk: Any = None
    print(
        f"# consumer groups over ZooKeeper: {os.cpu_count()} CPUs, one kafkalog broker, members in processes",
        flush=True,
    )
    try:
        zookeeper.start()
        zk_connect = f"{zookeeper.connect}{CHROOT}"
        broker = BrokerProcess(
            root / "broker", broker_id=0, zookeeper=zk_connect, zookeeper_session_timeout_ms=6000, limits=BROKER_LIMITS
        ).start()
        zk = connect(zk_connect)
        size = max([*args.consumers, *args.throughput_consumers])
        pool = [MemberProcess(context) for _ in range(size)]

        if not args.skip_rebalance:
            print(
                "\njoin-rebalance latency, ms from create_message_streams of the n-th member until the owner "
                "nodes are right / until every member fetches its range (median of the runs; runs in brackets)",
                flush=True,
            )
            with Admin(broker.bootstrap) as admin:
                for partitions in args.partitions:
                    admin.create_topic(f"rebalance-{partitions}", partitions)
            run = 0
            cells: dict[tuple[int, int], str] = {}
            for partitions in args.partitions:
                repeat = args.big_repeat if partitions >= 1000 else args.repeat
                for consumers in args.consumers:
                    runs: list[dict[str, Any]] = []
                    for _ in range(repeat):
                        if runs and (runs[-1]["setup_s"] is None or runs[-1]["fetching_ms"] is None):
                            break  # a cut-off cell is not run again (it would only be cut off again)
                        run += 1
                        runs.append(
                            rebalance_run(
                                pool, context, zk, zk_connect, f"rebalance-{partitions}", partitions, consumers,
                                f"rebalance-{run}", args.cap, args.setup_cap,
                            )
                        )  # fmt: skip
                    cells[(consumers, partitions)] = report_cell(consumers, partitions, runs, args, started)
            print_table(cells, args.consumers, args.partitions)

        if not args.skip_throughput:
            partitions, per_partition = 4, args.messages // 4
            topic = "throughput"
            with Admin(broker.bootstrap) as admin:
                admin.create_topic(topic, partitions)
            rate = fill(broker.bootstrap, topic, partitions, per_partition * partitions)
            assert broker.process is not None
            broker_pid = broker.process.pid
            print(
                f"\ngroup throughput: {per_partition * partitions:,} messages of {VALUE_BYTES} bytes in "
                f"{partitions} partitions (filled at {rate:,.0f} msgs/s), read to the end, median of "
                f"{args.repeat} [{time.perf_counter() - started:.0f} s]",
                flush=True,
            )
            cases = [(mode, n) for mode in ("processes", "threads") for n in args.throughput_consumers]
            measured: dict[tuple[str, int], list[dict[str, float]]] = {case: [] for case in cases}
            plain: list[float] = []
            for rep in range(args.repeat):  # interleaved, so the machine's drift hits every case alike
                plain.append(plain_rate(broker.bootstrap, topic, partitions, per_partition))
                for mode, consumers in cases:
                    measured[(mode, consumers)].append(
                        throughput_run(
                            mode, pool, broker_pid, zk, zk_connect, topic, partitions, per_partition, consumers,
                            f"throughput-{rep}-{mode}-{consumers}",
                        )
                    )  # fmt: skip
                print(f"  round {rep + 1} of {args.repeat} done [{time.perf_counter() - started:.0f} s]", flush=True)
            reference = statistics.median(plain)
            print(
                f"  reference: SimpleConsumer, one thread, fetch + decode of the same messages: {reference:,.0f} "
                f"msgs/s [{', '.join(f'{r:,.0f}' for r in plain)}]"
            )
            result("simple_consumer_reference", reference, "msgs/s")
            for mode in ("processes", "threads"):
                baseline = 0.0
                for consumers in args.throughput_consumers:
                    these = measured[(mode, consumers)]
                    msgs = statistics.median(r["rate"] for r in these)
                    mbs = statistics.median(r["mbs"] for r in these)
                    members_cpu = statistics.median(r["members_cpu"] for r in these)
                    broker_cpu = statistics.median(r["broker_cpu"] for r in these)
                    baseline = baseline or msgs
                    listed = ", ".join(f"{r['rate']:,.0f}" for r in these)
                    print(
                        f"  {mode:<9} {consumers} member(s): {msgs:>9,.0f} msgs/s {mbs:6.1f} MB/s "
                        f"x{msgs / baseline:.2f}  [{listed}]  CPU: members {members_cpu:.0%}, broker {broker_cpu:.0%}",
                        flush=True,
                    )
                    suffix = "" if mode == "processes" else "_threads"
                    result(f"group_throughput_{consumers}c{suffix}", msgs, "msgs/s")
                    result(f"group_throughput_{consumers}c{suffix}_mb", mbs, "MB/s")
                    result(f"group_throughput_{consumers}c{suffix}_ratio", msgs / baseline, "x")
                    result(f"group_throughput_{consumers}c{suffix}_members_cpu", members_cpu, "cores")
                    result(f"group_throughput_{consumers}c{suffix}_broker_cpu", broker_cpu, "cores")
    finally:
        for member in pool:
            member.stop()
        if zk is not None:
            zk.stop()
            zk.close()
        if broker is not None and broker.process is not None and broker.process.poll() is None:
            try:
                broker.stop()
            except Exception:
                broker.kill()
        zookeeper.stop()
        shutil.rmtree(root, ignore_errors=True)
    warnings = sum(m.warnings for m in pool)
    print(f"\nwarnings logged by the members: {warnings}", *[w for m in pool for w in m.first_warnings][:5], sep="\n  ")
    print(f"wall time: {time.perf_counter() - started:.0f} s")
    print_results()
    return 0


if __name__ == "__main__":
    sys.exit(main())
