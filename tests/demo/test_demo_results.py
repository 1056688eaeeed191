"""The demo keeps the last demo's results until the new one's servers run (demo.results): a start
that fails (a port taken, a broker that does not come up, Ctrl-C) puts them back."""

from __future__ import annotations

from pathlib import Path

import pytest

from demo.results import PreviousResults


def _results(home: Path, text: str) -> None:
    (home / "logs").mkdir(parents=True)
    (home / "logs" / "broker.log").write_text(f"{text} log")
    (home / "demo-report.json").write_text(text)


def test_a_failed_start_puts_the_last_results_back_and_keeps_its_own_logs(tmp_path: Path) -> None:
    home = tmp_path / "demo"
    _results(home, "last good")
    previous = PreviousResults(home)
    with pytest.raises(RuntimeError, match="port taken"), previous:
        assert not home.exists()  # the new demo starts from nothing
        _results(home, "attempt")
        raise RuntimeError("port taken")
    assert (home / "demo-report.json").read_text() == "last good"
    assert previous.failed_attempt == tmp_path / "demo.failed"
    assert (tmp_path / "demo.failed" / "logs" / "broker.log").read_text() == "attempt log"
    assert not (tmp_path / "demo.previous").exists()


def test_once_the_new_demo_runs_the_last_results_go(tmp_path: Path) -> None:
    home = tmp_path / "demo"
    _results(home, "last good")
    with PreviousResults(home) as previous:
        _results(home, "new")
        previous.discard()
        assert not (tmp_path / "demo.previous").exists()
    assert (home / "demo-report.json").read_text() == "new"
    # a failure after the discard keeps the new demo's partial results (its logs say why)
    with pytest.raises(RuntimeError), PreviousResults(home) as previous:
        _results(home, "newer")
        previous.discard()
        raise RuntimeError("the replay failed")
    assert (home / "demo-report.json").read_text() == "newer"
    assert previous.failed_attempt is None


def test_a_demo_killed_while_starting_leaves_the_last_results_aside_and_the_next_keeps_them(tmp_path: Path) -> None:
    home = tmp_path / "demo"
    _results(tmp_path / "demo.previous", "last good")  # what a SIGKILL during a start leaves
    _results(home, "killed attempt")
    with pytest.raises(KeyboardInterrupt), PreviousResults(home):
        assert not home.exists()
        raise KeyboardInterrupt
    assert (home / "demo-report.json").read_text() == "last good"


def test_no_previous_results_nothing_to_keep(tmp_path: Path) -> None:
    home = tmp_path / "demo"
    with pytest.raises(RuntimeError), PreviousResults(home) as previous:
        _results(home, "attempt")
        raise RuntimeError("no java")
    assert (home / "demo-report.json").read_text() == "attempt"  # its logs stay where the error says
    assert previous.failed_attempt is None
