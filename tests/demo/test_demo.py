"""The demo's parts on their own: the Java check a newcomer without Java meets first, the supervisor
that must leave no process behind whatever happens, and the activity generator's realism.
(The whole demo runs from a fresh clone in tests/test_newcomer.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from demo.activity import DATA_CENTERS, activity
from demo.hadoop import launcher_argv, yarn_submit_conf
from demo.processes import QUICK_JVM_FLAGS, DemoError, Supervisor, java_version, quick_jvm_env

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.integration
def test_java_missing_is_said_plainly(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    with pytest.raises(DemoError, match=r"Java is not installed .*openjdk-17-jre-headless.*JAVA_HOME"):
        java_version()
    monkeypatch.delenv("JAVA_HOME")
    assert java_version() >= 17  # the Java this machine has (the tests need it anyway)
    # `make demo` checks before installing anything: with no java on PATH it stops with the advice
    done = subprocess.run(
        ["/usr/bin/make", "-s", "java"],
        cwd=REPO,
        env={"PATH": str(tmp_path), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0
    assert "make demo needs Java 17" in done.stdout + done.stderr


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.split(") ", 1)[1][0] != "Z"  # a zombie is dead, only not reaped yet


@pytest.mark.integration
def test_the_supervisor_stops_everything_even_on_error(tmp_path: Path) -> None:
    # a child that ignores SIGTERM and has a child of its own (in its process group)
    stubborn = (
        "import signal, subprocess, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)']); "
        "open(sys.argv[1], 'w').write(str(child.pid)); time.sleep(300)"
    )
    pid_file = tmp_path / "grandchild.pid"
    pids = []
    with pytest.raises(RuntimeError, match="the story failed"), Supervisor(tmp_path / "logs") as supervisor:
        gentle = supervisor.start("gentle", [sys.executable, "-c", "import time; time.sleep(300)"], lambda: True)
        hard = supervisor.start("stubborn", [sys.executable, "-c", stubborn, str(pid_file)], pid_file.exists, grace=1.0)
        pids = [gentle.process.pid, hard.process.pid]
        time.sleep(0.2)
        pids.append(int(pid_file.read_text()))
        raise RuntimeError("the story failed")
    assert len(pids) == 3
    # SIGKILL is delivered asynchronously: on a busy machine the grandchild (not ours to wait for)
    # may take a moment to die after killpg returns, so give it a bounded moment, no more
    deadline = time.monotonic() + 5
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in pids if _alive(pid)], "a process survived the supervisor"


@pytest.mark.integration
def test_a_child_that_dies_while_starting_names_its_log(tmp_path: Path) -> None:
    with Supervisor(tmp_path / "logs") as supervisor, pytest.raises(DemoError) as failure:
        supervisor.start("broker", [sys.executable, "-c", "print('port taken'); raise SystemExit(3)"], lambda: False)
    message = str(failure.value)
    assert "broker exited with 3 while starting" in message
    assert str(tmp_path / "logs" / "broker.log") in message and "port taken" in message


def test_activity_is_realistic_and_reproducible() -> None:
    end = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
    start = end - timedelta(hours=24)
    east = DATA_CENTERS[0]
    messages = activity(east, start, end, 8000, seed=3)
    assert messages == activity(east, start, end, 8000, seed=3)  # same seed, same events
    assert len(messages) == 8000
    times = [m.timestamp_ms for m in messages]
    assert times == sorted(times)  # a data center's log receives them in time order
    assert start.timestamp() * 1000 <= times[0] and times[-1] < end.timestamp() * 1000
    parsed, broken = [], 0
    for message in messages:
        try:
            parsed.append(json.loads(message.value))
        except ValueError:
            broken += 1
    assert 1 <= broken <= 3  # a truncated message now and then
    assert {e["dc"] for e in parsed} == {"us-east"}
    assert all(east.first_user <= e["user_id"] < east.first_user + east.users for e in parsed)
    assert all(m.key == str(json.loads(m.value)["user_id"]).encode() for m in messages if m.value.endswith(b"}"))
    not_paths = [e for e in parsed if not e["page"].startswith("/")]
    assert 1 <= len(not_paths) <= 4
    # evenings are busier than nights, in the region's own time (UTC-5: 8 pm is 01:00 UTC)
    by_hour = Counter(datetime.fromisoformat(e["ts"]).hour for e in parsed)
    assert by_hour[1] > 2 * by_hour[9]
    # visits: some users view several pages in a row, walking the funnel
    assert any(e["page"].startswith("/product/") for e in parsed) and any(e["page"] == "/cart" for e in parsed)


def test_quick_jvm_flags_join_what_spark_submit_opts_already_holds() -> None:
    assert quick_jvm_env({})["SPARK_SUBMIT_OPTS"] == " ".join(QUICK_JVM_FLAGS)
    given = {"SPARK_SUBMIT_OPTS": "-Dx=1 -XX:+UseSerialGC", "PATH": "/bin"}
    env = quick_jvm_env(given)
    # each flag once, the caller's own kept
    assert env["SPARK_SUBMIT_OPTS"] == "-Dx=1 -XX:+UseSerialGC -XX:TieredStopAtLevel=1"
    assert env["PATH"] == "/bin" and given["SPARK_SUBMIT_OPTS"] == "-Dx=1 -XX:+UseSerialGC"  # a copy
    assert quick_jvm_env(env) == env


def test_the_mini_clusters_and_yarn_containers_start_quick_unless_a_benchmark_asks(tmp_path: Path) -> None:
    quick = launcher_argv(tmp_path / "a", yarn=True)
    assert quick[0] == "java" and set(QUICK_JVM_FLAGS) <= set(quick)
    assert not set(QUICK_JVM_FLAGS) & set(launcher_argv(tmp_path / "b", yarn=True, quick_jvm=False))
    conf = yarn_submit_conf()
    flags = " ".join(QUICK_JVM_FLAGS)
    assert conf["spark.executor.extraJavaOptions"] == conf["spark.yarn.am.extraJavaOptions"] == flags
