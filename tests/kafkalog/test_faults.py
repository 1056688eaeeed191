"""Fault points (kafkalog.faults): one grammar for every family, a target fires once at the n-th
time its point is reached, a misspelt target is refused, and every point the code reaches is one its
family knows (a point a target cannot name is a point no test can reach)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kafkalog.faults import FaultPoints, FaultTarget, FaultTargetError, parse_target
from kafkalog.log import faults as log_faults
from kafkalog.mirror import faults as mirror_faults
from pipelines import faults as pipeline_faults
from pipelines.executor.source import TASK_FAULTS

REPO = Path(__file__).resolve().parents[2]


class Fired(Exception):
    pass


def fire(target: FaultTarget) -> None:
    raise Fired(str(target))


def test_the_grammar() -> None:
    assert parse_target("a.b", ["a.b"], "X") == FaultTarget("a.b", 1)
    assert parse_target("a.b@3", ["a.b"], "X") == FaultTarget("a.b", 3)
    assert str(FaultTarget("a.b", 3)) == "a.b@3" and str(FaultTarget("a.b")) == "a.b"
    with pytest.raises(FaultTargetError, match=r"^X='a.c': no such point \(did you mean 'a.b'\? known: a.b\)$"):
        parse_target("a.c", ["a.b"], "X")
    for bad in ("a.b@0", "a.b@x", "a.b@"):
        with pytest.raises(FaultTargetError, match=r"the count after @ must be a whole number from 1"):
            parse_target(bad, ["a.b"], "X")


def test_a_target_fires_once_at_the_nth_time() -> None:
    points = FaultPoints("TEST_FAULT_AT", ["p", "q"], fire, target="p@3")
    points.reach("q")
    points.reach("p")
    points.reach("p")
    with pytest.raises(Fired, match=r"^p@3$"):
        points.reach("p")
    points.reach("p")  # spent: it fires once


def test_a_weighted_reach_counts_at_once() -> None:
    points = FaultPoints("TEST_FAULT_AT", ["rows"], fire, target="rows@50")
    points.reach("rows", 30)
    with pytest.raises(Fired):
        points.reach("rows", 30)


def test_the_environment_arms_a_family_when_it_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_FAULT_AT", "p@2")
    points = FaultPoints("TEST_FAULT_AT", ["p"], fire)
    assert points
    monkeypatch.setenv("TEST_FAULT_AT", "pp")
    with pytest.raises(FaultTargetError, match=r"^TEST_FAULT_AT='pp': no such point"):
        FaultPoints("TEST_FAULT_AT", ["p"], fire)
    monkeypatch.delenv("TEST_FAULT_AT")
    assert not FaultPoints("TEST_FAULT_AT", ["p"], fire)


def test_an_armed_block_disarms_on_leaving_and_has_its_own_action() -> None:
    def own(target: FaultTarget) -> None:
        raise KeyError(str(target))

    points = FaultPoints("TEST_FAULT_AT", ["p"], fire, target="")
    with points.armed("p@2", own):
        points.reach("p")
        with pytest.raises(KeyError, match=r"p@2"):
            points.reach("p")
    assert not points
    points.reach("p")


def _reached_names(root: Path, function: str) -> set[str]:
    """The literal names passed to ``function(...)`` (or ``x.function(...)``) under ``root``."""
    names = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if called == function and isinstance(node.args[0], ast.Constant):
                names.add(node.args[0].value)
    return names


def _keyword_values(root: Path, keyword: str) -> set[str]:
    values = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                values |= {
                    k.value.value for k in node.keywords if k.arg == keyword and isinstance(k.value, ast.Constant)
                }
    return values


def test_every_point_the_code_reaches_is_known_to_its_family() -> None:
    kafkalog = REPO / "kafkalog"
    log_points = _reached_names(kafkalog, "crash_point")
    assert log_points and log_points <= set(log_faults.POINTS), log_points - set(log_faults.POINTS)
    assert _keyword_values(kafkalog, "crash_prefix") == set(log_faults.ATOMIC_WRITES)
    mirror_points = _reached_names(kafkalog / "mirror", "fail_point")
    assert mirror_points == set(mirror_faults.POINTS)
    pipeline_points = _reached_names(REPO / "pipelines", "crash_point")
    assert pipeline_points == set(pipeline_faults.POINTS), "a point no code reaches, or one no target can name"
    assert set(TASK_FAULTS) == {"fail_after_rows", "exit_after_rows"}


def test_a_simulated_crash_raises_crash_and_only_inside_its_block() -> None:
    with pipeline_faults.simulated_crash("publish.after_file@2"):
        pipeline_faults.crash_point("publish.after_file")
        with pytest.raises(pipeline_faults.Crash, match=r"publish\.after_file@2"):
            pipeline_faults.crash_point("publish.after_file")
    pipeline_faults.crash_point("publish.after_file")
    with pytest.raises(FaultTargetError, match=r"did you mean 'publish\.after_file'"):
        pipeline_faults.simulated_crash("publish.after_filez").__enter__()
