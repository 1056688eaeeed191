"""A newcomer's first minutes: clone the repository, `make demo` (and `make demo-zk`), read the report.

The e2e tier: the whole product from a fresh clone.

The clone is made with git from this checkout (what a new user gets: committed files only). The
virtualenv is this one (installing packages again would test pip and the network, not us); `make`
is told not to remake it (``-o``), and everything else is the real target: the Java check, the C
kernels built in the clone, the demo's script with its three brokers, mirror-maker, spark-submit
runs, replay and report. Afterwards no process may be left that runs from the clone or holds the
demo's ports (free ports by default; ``--port-base`` in the ZooKeeper run)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from demo.processes import port_is_free

REPO = Path(__file__).resolve().parents[1]
VENV = Path(sys.executable).parent.parent

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    if shutil.which("git") is None or shutil.which("make") is None:
        pytest.fail("git and make are needed to test the newcomer's path (apt-get install git make)")
    target = tmp_path_factory.mktemp("newcomer") / "repo"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(target)], check=True, timeout=120)
    yield target


def _make(clone: Path, target: str, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "COLUMNS")}
    return subprocess.run(
        ["make", "-o", str(VENV / ".installed"), f"VENV={VENV}", target, *args],
        cwd=clone,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )


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


def _check_demo(clone: Path, done: subprocess.CompletedProcess[str], mode: str) -> dict[str, Any]:
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
        assert Path(table["path"]).is_relative_to(clone / ".cache" / "demo" / "warehouse")
        assert "_generations" in table["path"]  # after the replay, readers are sent to generation 1
    return report


def test_make_demo_in_a_fresh_clone(clone: Path) -> None:
    plan = subprocess.run(["make", "-n", "demo"], cwd=clone, capture_output=True, text=True, check=False)
    assert "python -m demo" in plan.stdout, plan.stdout + plan.stderr
    done = _make(clone, "demo")
    report = _check_demo(clone, done, "embedded")
    assert report["seconds"] < 600  # "a few minutes", with room for a busy machine
    assert any((clone / "kafkalog" / "record").glob("_speedups*.so")), "make demo built the C kernels in the clone"


def test_make_demo_zk_in_a_fresh_clone(clone: Path) -> None:
    base = _free_port_run(4)
    done = _make(clone, "demo-zk", f"DEMO_ARGS=--events 8000 --port-base {base}")
    report = _check_demo(clone, done, "zookeeper")
    assert report["ports"] == {"aggregate": base, "us-east": base + 1, "eu-west": base + 2, "zookeeper": base + 3}
    assert f"ZooKeeper on 127.0.0.1:{base + 3}" in done.stdout


def _free_port_run(count: int) -> int:
    """The first of ``count`` consecutive free loopback ports."""
    for base in range(31000, 60000, 17):
        if all(port_is_free(port) for port in range(base, base + count)):
            return base
    raise AssertionError("no run of free ports on 127.0.0.1")
