"""The kafkalog command line: ``log dump``, ``log check`` and ``log truncate``, run as a user would
(the installed console script, in a subprocess)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kafkalog.log import Log, LogConfig, LogManager
from tests.kafkalog.log.helpers import fill, flip_bit, message_set

pytestmark = pytest.mark.integration  # every test runs the kafkalog command

KAFKALOG = Path(sys.executable).with_name("kafkalog")
CONFIG = LogConfig(segment_bytes=2048, retention_ms=None)


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    assert KAFKALOG.exists(), f"the kafkalog console script is not installed next to {sys.executable}"
    return subprocess.run([str(KAFKALOG), *args], capture_output=True, text=True, input=stdin, timeout=60, check=False)


def test_dump_lists_entries_and_deep_messages(tmp_path: Path) -> None:
    with LogManager([tmp_path], CONFIG) as manager:
        log = manager.get_or_create_log("t", 0)
        log.append(message_set([b"alpha", b"beta"], keys=[b"k1", None]))
        path = log.active_segment.log_path
    done = run("log", "dump", str(path), "--deep", "--values")
    assert done.returncode == 0, done.stderr
    # one record batch (the default format), listed by its last offset, its records one by one
    assert "offset 1 position 0" in done.stdout
    assert "| offset 0 timestamp" in done.stdout and "| offset 1 timestamp" in done.stdout
    assert "key b'k1' value b'alpha'" in done.stdout and "key None value b'beta'" in done.stdout


def test_check_passes_a_healthy_directory_and_names_corruption(tmp_path: Path) -> None:
    with LogManager([tmp_path], CONFIG) as manager:
        for partition in range(2):
            fill(manager.get_or_create_log("orders", partition), 80)
        victim = manager.get_log("orders", 1).segments[1].log_path  # type: ignore[union-attr]
    done = run("log", "check", str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 corrupt" in done.stdout
    flip_bit(victim, 100)
    done = run("log", "check", str(tmp_path))
    assert done.returncode == 1
    assert "CORRUPT" in done.stderr + done.stdout and victim.name in done.stderr + done.stdout


def test_check_refuses_a_directory_in_use(tmp_path: Path) -> None:
    with LogManager([tmp_path], CONFIG):
        done = run("log", "check", str(tmp_path))
    assert done.returncode != 0 and "in use" in done.stderr


def test_truncate_cuts_a_partition_and_appends_continue(tmp_path: Path) -> None:
    with LogManager([tmp_path], CONFIG) as manager:
        fill(manager.get_or_create_log("t", 0), 50)
    done = run("log", "truncate", str(tmp_path / "t-0"), "--to", "20", "--yes")
    assert done.returncode == 0, done.stderr
    assert "now ends at offset 20" in done.stdout
    log = Log(tmp_path / "t-0", CONFIG, clean_shutdown=True)
    assert log.log_end_offset == 20
    assert log.append(message_set([b"x"])).first_offset == 20
    log.close()


def test_truncate_refuses_a_directory_that_is_not_a_partition(tmp_path: Path) -> None:
    """Nothing is made there: opening a log would have created a segment in any directory."""
    with LogManager([tmp_path], CONFIG) as manager:
        fill(manager.get_or_create_log("t", 0), 5)
    for directory in (tmp_path, tmp_path / "t-0" / ".."):
        before = sorted(p.name for p in tmp_path.iterdir())
        done = run("log", "truncate", str(directory), "--to", "0", "--yes")
        assert done.returncode == 1 and "is not a partition directory" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
        assert sorted(p.name for p in tmp_path.iterdir()) == before
