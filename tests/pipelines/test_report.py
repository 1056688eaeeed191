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

from demo.examples import page_views
from pipelines.app.runner import run_stage
from pipelines.config.pipeline import load_spec
from pipelines.ingest.state import PipelineState
from pipelines.reporting.report import report_paths
from pipelines.storage import LocalStorage
from tests.pipelines.flow_harness import example_spec, send
from tests.pipelines.harness import run_cli
from tests.support.kafkalog import BrokerProcess

START = datetime(2026, 6, 1, 5, 0, tzinfo=UTC)


class _Tags(HTMLParser):
    """Counts start tags and collects text; fails on tags closed out of order."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[str] = Counter()
        self.open: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        self.counts[tag] += 1
        if tag not in ("meta", "br"):
            self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.open and self.open[-1] == tag, f"</{tag}> closes <{self.open[-1] if self.open else None}>"
        self.open.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _hour(event: dict[str, Any]) -> str:
    return datetime.fromisoformat(str(event["ts"])).strftime("%Y-%m-%dT%H:00")


def test_the_run_report_shows_what_the_run_did(tmp_path: Path, broker: BrokerProcess, spark: Any) -> None:
    events = list(page_views(START, 400, bad_page_every=149))
    send(broker.bootstrap, "web.page_views", events, partitions=1)
    path = example_spec(tmp_path, "page_views", broker.bootstrap, limits={"max_messages_per_split": 300})
    spec = load_spec(path)
    assert run_stage(spec, spark, "all", run_id=None, quiet=True) == 0

    state = PipelineState(LocalStorage(), str(tmp_path / "raw"))
    json_path, html_path = report_paths(state, 1)
    report = json.loads(Path(json_path).read_text())
    loaded = events[:300]
    (split,) = report["splits"]
    assert (split["split"], split["start"], split["end"], split["messages"]) == ("web.page_views-0", 0, 300, 300)
    assert (split["rows"], split["quarantined"], split["log_end"], split["lag"]) == (300, 0, 400, 100)
    assert split["seconds"] is not None and split["seconds"] > 0
    assert report["totals"] == {"messages": 300, "rows": 300, "quarantined": 0, "filtered": 0, "lost": 0, "lag": 100}
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
    # the checks are those of the rows published: the failing ones went to the quarantine
    assert all(c["success"] for c in hourly["checks"]) and len(hourly["checks"]) == 4
    assert hourly["rows"] == len({(_hour(e), e["page"]) for e in loaded}) - len(bad_groups)
    assert hourly["path"] == str(tmp_path / "warehouse" / "hourly_page_views")

    page = _Tags()
    page.feed(Path(html_path).read_text())
    page.close()
    assert page.open == []
    assert page.counts["rect"] == len(report["rows_per_hour"])  # one bar per event hour
    text = " ".join(page.text)
    assert "web.page_views-0" in text and "No message was ever lost" in text

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
    assert outputs["hourly_page_views"]["status"] == "failed"
    assert "max_quarantine_share" in outputs["hourly_page_views"]["error"]
    assert outputs["user_sessions"]["status"] in ("validated", "not run")
