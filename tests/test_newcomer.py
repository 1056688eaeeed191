"""A newcomer's first minutes: clone the repository, `make demo` (and `make demo-hadoop` with ZooKeeper),
read the report.

The e2e tier: the whole product from a fresh clone.

The clone is made with git from this checkout (what a new user gets: committed files only). The
virtualenv is this one (installing packages again would test pip and the network, not us); `make`
is told not to remake it (``-o``), and everything else is the real target: the Java check, the C
kernels built in the clone, the demo's script with its three brokers, mirror-maker, spark-submit
runs, replay and report. Afterwards no process may be left that runs from the clone or holds the
demo's ports (free ports by default; ``--port-base`` in the ZooKeeper run).

The second run is ``make demo-hadoop`` with ``--zookeeper``: the flags are independent, so one run
covers both the ZooKeeper registry (``make demo-zk`` is ``python -m demo --zookeeper``, checked with
``make -n``) and the raw layer and warehouse on HDFS with the jobs on YARN. Hadoop's mini clusters
come from Maven Central through ``make peers``: the clone shares this checkout's ``.cache/peers``
(fetching them again would test Maven and the network, not us). The two demos run at the same
time, each in a clone of its own (they share nothing but the machine, and one after the other
they were most of the e2e tier's time)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from demo.processes import port_is_free

REPO = Path(__file__).resolve().parents[1]
VENV = Path(sys.executable).parent.parent

pytestmark = pytest.mark.e2e


def _fresh_clone(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    if shutil.which("git") is None or shutil.which("make") is None:
        pytest.fail("git and make are needed to test the newcomer's path (apt-get install git make)")
    target = tmp_path_factory.mktemp(name) / "repo"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(target)], check=True, timeout=120)
    return target


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _fresh_clone(tmp_path_factory, "newcomer")


@dataclass
class Background:
    """``make`` running in a clone of its own while the module's other test runs (the two demos
    share nothing but the machine: run one after the other, they were most of the e2e tier)."""

    clone: Path
    process: subprocess.Popen[str]
    output: Path
    port_base: int

    def wait(self, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(30)
        text = self.output.read_text(errors="replace")
        return subprocess.CompletedProcess(self.process.args, self.process.returncode, text, "")


@pytest.fixture(scope="module", autouse=True)
def hadoop_demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Background]:
    """``make demo-hadoop`` with ZooKeeper in a second fresh clone, started with the module."""
    target = _fresh_clone(tmp_path_factory, "newcomer-hadoop")
    (target / ".cache").mkdir(exist_ok=True)
    (target / ".cache" / "peers").symlink_to(REPO / ".cache" / "peers")
    base = _free_port_run(5)
    output = target.parent / "make-demo-hadoop.log"
    command = _make_command(
        "demo-hadoop", f"DEMO_ARGS=--zookeeper --events 8000 --port-base {base}", done=(".cache/peers/maven.done",)
    )
    with output.open("w") as sink:
        process = subprocess.Popen(
            command, cwd=target, stdout=sink, stderr=subprocess.STDOUT, text=True, env=_make_env(),
            start_new_session=True,
        )  # fmt: skip
    background = Background(target, process, output, base)
    try:
        yield background
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(30)


def _make_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "COLUMNS")}


def _make_command(target: str, *args: str, done: tuple[str, ...] = ()) -> list[str]:
    """``make target args``, the venv taken as made; ``done``: more files make must take as up to date."""
    up_to_date = [arg for path in (str(VENV / ".installed"), *done) for arg in ("-o", path)]
    return ["make", *up_to_date, f"VENV={VENV}", target, *args]


def _make(clone: Path, target: str, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _make_command(target, *args), cwd=clone, capture_output=True, text=True, timeout=timeout, env=_make_env(),
        check=False,
    )  # fmt: skip


def _left_behind(clone: Path) -> list[str]:
    """Processes whose working directory or command line is inside the clone."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = str((entry / "cwd").readlink())
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if cwd.startswith(str(clone)) or str(clone) in command:
            found.append(f"{entry.name}: {command[:200]} (cwd {cwd})")
    return found


def _check_demo(clone: Path, done: subprocess.CompletedProcess[str], mode: str, hdfs: bool = False) -> dict[str, Any]:
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-5000:]
    assert _left_behind(clone) == [], "the demo left processes running"
    for title in ("1. three clusters", "2. a day of web activity", "3. the page_views pipeline", "5. rewind"):
        assert title in output
    report = json.loads((clone / ".cache" / "demo" / "demo-report.json").read_text())
    assert report["mode"] == mode
    assert all(port_is_free(p) for p in report["ports"].values()), "a demo port is still held after the demo"
    produced = sum(report["produced"].values())
    assert produced > 0 and report["aggregate_messages"] == produced  # mirrored: none missing, none twice
    runs = report["runs"]
    assert [r["kind"] for r in runs] == ["load", "load", "replay"]
    assert [r["seq"] for r in runs] == [1, 2, 3]
    loads = runs[:2]
    assert sum(r["messages"] for r in loads) == produced  # every message loaded, once, by the two runs
    assert sum(r["rows"] + r["quarantined"] for r in loads) == produced
    assert sum(r["quarantined"] for r in loads) > 0  # the truncated messages were set aside
    assert report["raw_rows"] == sum(r["rows"] for r in loads)
    for run in runs:
        assert set(run["outputs"].values()) == {"published"}, run
        if hdfs:  # the reports were on the demo's HDFS, which went with it
            assert run["report"].startswith("hdfs://") and "/demo/page_views/raw/_pipeline/reports/" in run["report"]
            continue
        page = Path(run["report"])
        assert page.is_file() and page.is_relative_to(clone)
        document = json.loads(page.with_suffix(".json").read_text())
        assert document["run"]["seq"] == run["seq"] and document["totals"]["rows"] == run["rows"]
        # a load plots its own rows; a replay the whole generation it made
        plotted = run["rows"] if run["kind"] == "load" else report["raw_rows"]
        assert sum(h["rows"] for h in document["rows_per_hour"]) == plotted
    assert report["replay"]["tables_identical"] is True
    for name, table in report["tables"].items():
        assert table["rows"] > 0, name
        if hdfs:
            assert table["path"].startswith("hdfs://") and f"/demo/warehouse/{name}/" in table["path"]
        else:
            assert Path(table["path"]).is_relative_to(clone / ".cache" / "demo" / "warehouse")
        assert "_generations" in table["path"]  # after the replay, readers are sent to generation 1
    # queried by name, each table holds what its files do (the demo checked; the counts are here): in
    # the embedded metastore, or with HDFS in the Hive metastore service the demo starts beside it
    assert report["by_name"] == {
        "warehouse.page_views_raw": report["raw_rows"],
        **{f"warehouse.{name}": table["rows"] for name, table in report["tables"].items()},
    }
    assert "6. the tables by name" in output
    assert ("the Hive metastore service at thrift://127.0.0.1:" in output) == hdfs
    return report


def test_make_demo_in_a_fresh_clone(clone: Path) -> None:
    plan = subprocess.run(["make", "-n", "demo"], cwd=clone, capture_output=True, text=True, check=False)
    assert "python -m demo" in plan.stdout, plan.stdout + plan.stderr
    done = _make(clone, "demo")
    report = _check_demo(clone, done, "embedded")
    assert report["seconds"] < 600  # "a few minutes", with room for a busy machine
    assert any((clone / "kafkalog" / "record").glob("_speedups*.so")), "make demo built the C kernels in the clone"
    output = done.stdout + done.stderr
    # what it prints says what happened: the mirror's count, one report line per run
    # the default day (30,000 per data center), then the next twenty minutes and the late events
    assert "mirrored into the aggregate: 60,000 messages" in output
    assert "mirrored into the aggregate: 5,600 messages" in output
    for run in report["runs"]:
        assert output.count(f"run report #{run['seq']}: ") == 1, output[-5000:]
    # Spark's start-up lines are in the spark-submits' log files, not repeated on the console
    assert "Using Spark's default log4j profile" not in output and " INFO SparkContext: " not in output
    assert len(list((clone / ".cache" / "demo" / "logs").glob("spark-submit-*.log"))) == 3
    assert [title.split(".")[0] for title in report["step_seconds"]] == ["1", "2", "3", "4", "5", "6", "7"]
    assert re.search(r"time per step: 1: \d+ s, 2: \d+ s, 3: \d+ s, ", output), output[-3000:]

    # a second demo whose port is taken stops at once and leaves these results as they are
    results = clone / ".cache" / "demo"
    before = sorted(str(p.relative_to(results)) for p in results.rglob("*"))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        again = subprocess.run(
            [str(VENV / "bin" / "python"), "-m", "demo", "--port-base", str(port)], cwd=clone, env=_make_env(),
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    assert again.returncode != 0
    assert f"port {port} on 127.0.0.1 is in use" in again.stderr, again.stderr
    assert "nothing was started or cleared" in again.stderr
    assert sorted(str(p.relative_to(results)) for p in results.rglob("*")) == before
    assert json.loads((results / "demo-report.json").read_text()) == report


def test_make_demo_hadoop_with_zookeeper_in_a_fresh_clone(hadoop_demo: Background) -> None:
    clone, base = hadoop_demo.clone, hadoop_demo.port_base
    plan = subprocess.run(["make", "-n", "demo-zk"], cwd=clone, capture_output=True, text=True, check=False)
    assert "python -m demo --zookeeper" in plan.stdout, plan.stdout + plan.stderr
    done = hadoop_demo.wait()
    report = _check_demo(clone, done, "zookeeper+hadoop", hdfs=True)
    assert report["ports"] == {
        "aggregate": base, "us-east": base + 1, "eu-west": base + 2, "zookeeper": base + 3, "metastore": base + 4,
    }  # fmt: skip
    assert f"ZooKeeper on 127.0.0.1:{base + 3}" in done.stdout
    assert f"Hive metastore service on thrift://127.0.0.1:{base + 4}" in done.stdout
    assert "spark-submit --master yarn" in done.stdout
    assert report["raw"].startswith("hdfs://") and report["raw"].endswith("/demo/page_views/raw/_generations/000001")
    # the listing of what was written, as hdfs dfs -ls shows it: the raw layer's generations and hours
    listing = done.stdout[done.stdout.index("what the demo wrote on HDFS") :]
    assert re.search(r"^drwxr-xr-x +\d+ files +[\d,]+ B +hdfs://\S+/demo/page_views/raw/_generations$", listing, re.M)
    assert re.search(r"^drwxr-xr-x .*/demo/warehouse/hourly_page_views/dt=\d{4}-\d\d-\d\d$", listing, re.M)


def _free_port_run(count: int) -> int:
    """The first of ``count`` consecutive free loopback ports."""
    for base in range(31000, 60000, 17):
        if all(port_is_free(port) for port in range(base, base + count)):
            return base
    raise AssertionError("no run of free ports on 127.0.0.1")
