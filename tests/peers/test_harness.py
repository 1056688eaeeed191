"""The process harness keeps its promises: a peer that cannot start fails with its log and leaves
nothing running; stopping a peer ends everything it forked; servers listen on loopback only."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.kafka4 import Kafka4Process
from tests.support.processes import PeerError, descendants, spawn, stop_group
from tests.support.zookeeper import ZooKeeperProcess

pytestmark = pytest.mark.integration


def _running(pids: set[int]) -> set[int]:
    return pids & {pid for pid, _ in descendants()}


def test_stop_group_ends_children_and_grandchildren(tmp_path: Path) -> None:
    # a parent that ignores SIGTERM, with a child and a grandchild in the background
    script = "trap '' TERM; (sleep 300 & sleep 300) & sleep 300 & wait"
    process = spawn(["bash", "-c", script], log=tmp_path / "tree.log")
    deadline = time.monotonic() + 10
    while len(descendants(process.pid)) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    tree = {process.pid} | {pid for pid, _ in descendants(process.pid)}
    assert len(tree) >= 4
    stop_group(process, grace=1)
    assert process.returncode is not None
    assert _running(tree) == set()


def test_a_peer_that_cannot_start_says_why_and_leaves_nothing(tmp_path: Path) -> None:
    before = {pid for pid, _ in descendants()}
    broker = Kafka4Process(tmp_path / "broken", **{"log.retention.hours": "not-a-number"})
    with pytest.raises(PeerError, match=r"log\.retention\.hours"):
        broker.start(timeout=60)
    assert {pid for pid, _ in descendants()} - before == set()


def test_zookeeper_listens_on_loopback_and_stops_completely(tmp_path: Path) -> None:
    with ZooKeeperProcess(tmp_path / "zk") as server:
        assert server.process is not None
        pid = server.process.pid
        listening = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
        mine = [line.split()[3] for line in listening.splitlines() if f"pid={pid}," in line]
        assert f"127.0.0.1:{server.port}" in mine or f"[::ffff:127.0.0.1]:{server.port}" in mine
        assert all("127.0.0.1" in address for address in mine), mine
    assert _running({pid}) == set()


def test_spark_drivers_map_the_class_archive_the_run_made(tmp_path: Path) -> None:
    """The archive made when the run began fits the driver JVM's class path: with -Xshare:on a
    JVM that cannot map it refuses to start (silently ignored, it would cost every driver seconds)."""
    from tests.support import jvm_archive
    from tests.support.spark import spark_submit

    assert jvm_archive.archive_path().is_file(), "the run's configuration makes it before the workers start"
    assert os.environ["SPARK_SUBMIT_OPTS"].split()[-3:] == list(jvm_archive.driver_flags())
    script = tmp_path / "count.py"
    script.write_text(
        "from pyspark.sql import SparkSession\nprint(SparkSession.builder.getOrCreate().range(3).count())"
    )
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "SPARK_SUBMIT_OPTS": f"{os.environ['SPARK_SUBMIT_OPTS']} -Xshare:on",
    }
    done = subprocess.run(
        [str(spark_submit()), "--master", "local[1]", "--conf", "spark.ui.enabled=false", str(script)],
        env=env, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0 and done.stdout.strip().endswith("3"), (done.stdout + done.stderr)[-2000:]
