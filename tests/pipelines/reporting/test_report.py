"""The run report (JSON + HTML) of the page_views example, on a real broker, real Spark and real
great-expectations: offsets, rows, lag left by a limit, task timings, rows per event hour, the
expectation results with the quarantined rows, and `pipelines report` rebuilding it from state."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from demo.examples import page_views
from pipelines.app.runner import run_stage
from pipelines.config.pipeline import load_spec
from pipelines.ledger.state import PipelineState
from pipelines.reporting.report import chart, report_paths, write_report
from pipelines.storage import LocalStorage
from tests.pipelines.flow_harness import example_spec, send
from tests.pipelines.harness import run_cli
from tests.support.kafkalog import BrokerProcess

START = datetime(2026, 6, 1, 5, 0, tzinfo=UTC)


VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
"""HTML's elements without an end tag."""


class _Tags(HTMLParser):
    """Counts start tags and collects text; fails on tags closed out of order."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[str] = Counter()
        self.open: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        self.counts[tag] += 1
        if tag not in VOID:
            self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.open and self.open[-1] == tag, f"</{tag}> closes <{self.open[-1] if self.open else None}>"
        self.open.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _hour(event: dict[str, Any]) -> str:
    return datetime.fromisoformat(str(event["ts"])).strftime("%Y-%m-%dT%H:00")


def test_the_run_report_shows_what_the_run_did(
    tmp_path: Path, broker: BrokerProcess, spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    events = list(page_views(START, 400, bad_page_every=149))
    send(broker.bootstrap, "web.page_views", events, partitions=1)
    path = example_spec(tmp_path, "page_views", broker.bootstrap, limits={"max_messages_per_split": 300})
    spec = load_spec(path)
    assert run_stage(spec, spark, "all", run_id=None) == 0

    state = PipelineState(LocalStorage(), str(tmp_path / "raw"))
    json_path, html_path = report_paths(state, 1)
    # the load writes the report and the flow rewrites it: where it is is said once, at the end
    said = capsys.readouterr().err
    assert said.count(f"run report #1: {html_path}") == 1, said
    assert said.rindex("run report #1: ") > said.rindex("published from run #1"), said
    assert "(s)" not in said, said  # counts agree with their noun ("1 partition published")
    report = json.loads(Path(json_path).read_text())
    loaded = events[:300]
    (split,) = report["splits"]
    assert (split["split"], split["start"], split["end"], split["messages"]) == ("web.page_views-0", 0, 300, 300)
    assert (split["rows"], split["quarantined"], split["log_end"], split["lag"]) == (300, 0, 400, 100)
    assert split["seconds"] is not None and split["seconds"] > 0
    assert report["totals"] == {
        "messages": 300, "rows": 300, "quarantined": 0, "aborted": 0, "markers": 0, "compacted": 0, "filtered": 0,
        "lost": 0, "lag": 100,
    }  # fmt: skip
    assert report["held_back"] == []  # no transaction in the topic: its last stable offset is the log end
    assert {h["hour"]: h["rows"] for h in report["rows_per_hour"]} == Counter(_hour(e) for e in loaded)
    assert report["rows_per_hour_scope"] == "run"
    assert report["data_loss"] == []
    assert report["run"]["seq"] == 1 and report["run"]["kind"] == "load"

    outputs = {o["name"]: o for o in report["outputs"]}
    assert set(outputs) == {"user_sessions", "hourly_page_views"}
    assert all(o["status"] == "published" for o in outputs.values())
    sessions, hourly = outputs["user_sessions"], outputs["hourly_page_views"]
    assert [c["expectation"] for c in sessions["checks"]] == [
        "not_null(user_id)",
        "between(pages, 1..)",
        "unique(user_id, session_no, dt)",
        "row_count(1..)",
    ]
    assert all(c["success"] for c in sessions["checks"])
    bad_groups = {(_hour(e), e["page"]) for e in loaded if not str(e["page"]).startswith("/")}
    assert len(bad_groups) >= 2
    assert hourly["quarantined"] == len(bad_groups)
    # great-expectations' results are of the rows kept, which are published: the failing ones went
    # to the quarantine, so every check passes there ...
    assert hourly["on_failure"] == "quarantine" and hourly["validated"] == "kept"
    assert all(c["success"] for c in hourly["checks"]) and len(hourly["checks"]) == 4
    assert hourly["rows"] == len({(_hour(e), e["page"]) for e in loaded}) - len(bad_groups)
    assert hourly["path"] == str(tmp_path / "warehouse" / "hourly_page_views")
    # ... and the checks on the rows as loaded say which failed, on what, and what was set aside
    assert (hourly["rows_loaded"], hourly["failing"]) == (hourly["rows"] + len(bad_groups), len(bad_groups))
    checks = {c["expectation"]: c for c in hourly["checks"]}
    assert checks["regex(page ~ ^/)"]["loaded"] == {
        "unexpected": len(bad_groups),
        "samples": [{"value": '"javascript:void(0)"', "rows": len(bad_groups)}],
        "quarantined": len(bad_groups),
    }
    assert checks["not_null(page)"]["loaded"] == {"unexpected": 0, "samples": [], "quarantined": 0}
    assert checks["regex(page ~ ^/)"]["observed"] == f"0 of {hourly['rows']:,} rows"
    # policy fail: great-expectations judged the rows as loaded, and they are what is published
    assert sessions["validated"] == "loaded" and sessions["rows_loaded"] == sessions["rows"]
    assert [c["loaded"]["unexpected"] for c in sessions["checks"]] == [0, 0, 0, None]  # row_count: not per row

    page = _Tags()
    page.feed(Path(html_path).read_text())
    page.close()
    assert page.open == []
    assert page.counts["rect"] == 2 * len(report["rows_per_hour"])  # a bar per event hour, in each plot
    assert page.counts["script"] == 0
    text = "".join(page.text)  # as shown: <wbr> cuts a name into several pieces of text
    assert "web.page_views-0" in text and "No message was ever lost" in text
    assert "rows as loaded" in text and "rows kept (great-expectations)" in text
    assert '"javascript:void(0)"' in text  # the sample, escaped (the parser gives the text back unescaped)

    # the next run loads the rest: no lag; the first run's report stays
    assert run_stage(spec, spark, "all", run_id=None, quiet=True) == 0
    second = json.loads(Path(report_paths(state, 2)[0]).read_text())
    assert (second["splits"][0]["start"], second["splits"][0]["end"], second["totals"]["lag"]) == (300, 400, 0)
    assert Path(json_path).exists()

    # rebuilt from the state alone, by number or run id; a run that does not exist is an error naming it
    rebuilt = run_cli("report", str(path), "--run", "1", "--json")
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert json.loads(rebuilt.stdout)["splits"] == report["splits"]
    by_id = run_cli("report", str(path), "--run", second["run"]["run_id"])
    assert by_id.returncode == 0 and by_id.stdout.split() == [report_paths(state, 2)[1], report_paths(state, 2)[0]]
    missing = run_cli("report", str(path), "--run", "7")
    assert missing.returncode == 1 and "no committed run #7" in missing.stderr

    # a validation record written before the rows as loaded were recorded still makes a report
    record_path = tmp_path / "raw" / "_pipeline" / "flow" / "000001" / "validation" / "hourly_page_views.json"
    record = json.loads(record_path.read_text())
    old = {key: record[key] for key in ("output", "rows", "success", "statistics", "checks", "quarantined")}
    record_path.write_text(json.dumps(old))
    json_path, html_path = write_report(spec, state, 1)
    rebuilt_hourly = {o["name"]: o for o in json.loads(Path(json_path).read_text())["outputs"]}["hourly_page_views"]
    assert rebuilt_hourly["rows_loaded"] is None and rebuilt_hourly["checks"][1]["success"] is True
    assert rebuilt_hourly["checks"][1]["loaded"] == {"unexpected": None, "samples": None, "quarantined": None}
    assert "record predates the checks on the rows as loaded" in " ".join(Path(html_path).read_text().split())


def test_a_run_whose_expectations_fail_has_a_report_saying_why(
    tmp_path: Path, broker: BrokerProcess, spark: Any
) -> None:
    send(broker.bootstrap, "web.page_views", list(page_views(START, 200, bad_page_every=20)), partitions=1)
    spec = load_spec(example_spec(tmp_path, "page_views", broker.bootstrap))
    assert run_stage(spec, spark, "all", run_id=None, quiet=True) == 1  # too many bad pages to quarantine
    state = PipelineState(LocalStorage(), str(tmp_path / "raw"))
    report = json.loads(Path(report_paths(state, 1)[0]).read_text())
    assert report["totals"]["rows"] == 200  # the load committed; the flow did not publish
    outputs = {o["name"]: o for o in report["outputs"]}
    hourly = outputs["hourly_page_views"]
    assert hourly["status"] == "failed"
    assert "max_quarantine_share" in hourly["error"]
    # what failed on the rows as loaded; nothing set aside, great-expectations never ran on kept rows
    (regex,) = [c for c in hourly["checks"] if c["expectation"] == "regex(page ~ ^/)"]
    assert regex["loaded"]["unexpected"] == hourly["failing"] > 0 and regex["loaded"]["quarantined"] == 0
    assert regex["loaded"]["samples"] == [{"value": '"javascript:void(0)"', "rows": hourly["failing"]}]
    assert regex["success"] is None and hourly["quarantined"] == 0
    assert outputs["user_sessions"]["status"] in ("validated", "not run")


def test_the_plot_has_a_slot_per_hour_round_y_ticks_and_skips_unreadable_hours() -> None:
    hours = [
        {"hour": "2026-06-01T22:00", "rows": 3_909},
        {"hour": "2026-06-02T03:00", "rows": 10},  # 23:00 to 02:00 have no rows: gaps
        {"hour": "2026-06-02T3:00", "rows": 5},  # the same hour, written otherwise: added to it
        {"hour": "2026-06-02Tnoon", "rows": 7},  # not an hour: left out, and said so
    ]
    plot = chart(hours)
    assert (plot["hours"], plot["empty"], plot["unreadable"], plot["top"]) == (6, 4, 1, 3_909)
    assert (plot["first"], plot["last"]) == ("2026-06-01 22:00", "2026-06-02 04:00")
    for name in ("wide", "narrow"):
        geometry = plot[name]
        assert [g["label"] for g in geometry["grid"]] == ["0", "1,000", "2,000", "3,000", "4,000"]
        assert len(geometry["bars"]) == 2 and geometry["bars"][1]["title"] == "2026-06-02 03:00 UTC: 15 rows"
        first, second = geometry["bars"]
        slot = (second["x"] - first["x"]) / 5  # five hours apart: the gaps keep their place
        assert first["width"] < slot <= 56
        assert [d["label"] for d in geometry["dates"]] == ["Jun 01", "Jun 02"]
        assert geometry["hour_ticks"][0]["label"] == "22:00"
    # a run of one hour is not stretched over the page; no readable hour at all is no plot
    one = chart([{"hour": "2026-06-01T05:00", "rows": 1}])["wide"]
    assert one["width"] < 200 and [t["label"] for t in one["hour_ticks"]] == ["05:00", "06:00"]
    assert chart([{"hour": "bad", "rows": 1}]) == {"hours": 0, "unreadable": 1}
