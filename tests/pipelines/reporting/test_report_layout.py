"""The run report as a person sees it: rendered by a real browser (Debian's chromium, headless) at a
page's width (1400 px) and a phone's (390 px), measured, and photographed.

The report is built here without Spark: ``render_html`` of a document with what makes a page hard to
lay out (three days of hours with gaps, a dozen splits with long topic names and large offsets,
quarantines, a failing output, samples of untrusted values, a record older than the rows as
loaded). The browser is driven over its DevTools pipe (``--remote-debugging-pipe``: JSON messages
on file descriptors 3 and 4, nothing but the standard library): a viewport of exactly the width
asked (``--window-size`` alone stops at 500 px), a script evaluated in the page to measure it (the
report itself has none), and a full-page screenshot saved beside the test's files
(``report-1400.png``, ``report-390.png``) for a person to look at.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from pipelines.reporting.report import output_view, render_html
from tests.support.processes import stop_group

pytestmark = pytest.mark.integration

CHROMIUM = "chromium"
MISSING = "chromium is not installed: run make system-deps"
START = datetime(2026, 3, 9, 5, 0, tzinfo=UTC)

# What the page must not do, measured in the page (returns JSON-able findings).
MEASURE = """
(() => {
  const describe = (el) => {
    const name = el.tagName.toLowerCase() + (typeof el.className === 'string' && el.className.trim()
      ? '.' + el.className.trim().split(/\\s+/).join('.') : '');
    return name + ' "' + (el.textContent || '').trim().replace(/\\s+/g, ' ').slice(0, 50) + '"';
  };
  const doc = document.documentElement;
  const found = {viewport: window.innerWidth, scroll_width: doc.scrollWidth, scripts: document.scripts.length,
                 tables: 0, cells: 0, in_tables: [], labels: [], overlaps: [], outside: [],
                 text: document.body.innerText, height: doc.scrollHeight};
  // tables: none wider than its container, nothing in one scrolled, clipped or sticking out
  for (const table of document.querySelectorAll('table')) {
    found.tables += 1;
    const box = table.getBoundingClientRect();
    const container = table.parentElement.getBoundingClientRect();
    if (box.left < container.left - 0.5 || box.right > container.right + 0.5) {
      const widths = Math.round(box.width) + ' > ' + Math.round(container.width);
      found.in_tables.push('wider than its container (' + widths + ' px): ' + describe(table));
    }
    for (const el of [table, ...table.querySelectorAll('*')]) {
      const r = el.getBoundingClientRect();
      const style = getComputedStyle(el);
      const clips = style.overflowX !== 'visible' || style.overflowY !== 'visible';
      if (el.tagName === 'TD') found.cells += 1;
      if (el.clientWidth > 0 && el.scrollWidth > el.clientWidth + 1) {
        const what = clips ? 'scrolled or clipped' : 'content wider than its box';
        found.in_tables.push(what + ' (' + el.scrollWidth + ' > ' + el.clientWidth + ' px): ' + describe(el));
      }
      if (clips && el.clientHeight > 0 && el.scrollHeight > el.clientHeight + 1) {
        const heights = el.scrollHeight + ' > ' + el.clientHeight;
        found.in_tables.push('scrolled or clipped (' + heights + ' px high): ' + describe(el));
      }
      if (r.width > 0 && (r.left < box.left - 0.5 || r.right > box.right + 0.5)) {
        found.in_tables.push('sticks out of its table: ' + describe(el));
      }
    }
  }
  // the plot's labels: inside their plot, no two overlapping (the plot drawn for the other width
  // is not displayed: its labels have no box)
  const labels = [...document.querySelectorAll('svg text')]
    .map((t) => ({text: t.textContent, box: t.getBoundingClientRect(), svg: t.ownerSVGElement.getBoundingClientRect()}))
    .filter((l) => l.box.width > 0);
  const inside = (a, b) => a.left >= b.left - 0.5 && a.right <= b.right + 0.5 && a.top >= b.top - 0.5
    && a.bottom <= b.bottom + 0.5;
  const apart = (a, b) => a.right <= b.left + 0.5 || b.right <= a.left + 0.5 || a.bottom <= b.top + 0.5
    || b.bottom <= a.top + 0.5;
  for (const [i, l] of labels.entries()) {
    found.labels.push(l.text);
    if (!inside(l.box, l.svg)) found.outside.push(l.text);
    for (const other of labels.slice(i + 1)) {
      if (!apart(l.box, other.box)) found.overlaps.push(l.text + ' / ' + other.text);
    }
  }
  return found;
})()
"""


def chromium() -> str:
    """The browser, or the test fails saying how to install it (a layout nobody checked is not a pass)."""
    found = shutil.which(CHROMIUM) or ("/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None)
    if found is None:
        pytest.fail(MISSING, pytrace=False)
    return found


class Browser:
    """Headless chromium on its DevTools pipe: one page, sized, loaded, measured, photographed."""

    def __init__(self, binary: str, profile: Path, log: Path, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self.log = log
        to_browser, self._to_browser = os.pipe()
        self._from_browser, from_browser = os.pipe()
        to_browser, from_browser = _above_four(to_browser), _above_four(from_browser)
        # the pipe's ends must be descriptors 3 (commands) and 4 (replies) in the browser: bash puts them there
        command = f'exec "$0" "$@" 3<&{to_browser} 4>&{from_browser} {to_browser}<&- {from_browser}>&-'
        argv = ["bash", "-c", command, binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
        argv += ["--remote-debugging-pipe", f"--user-data-dir={profile}", "--hide-scrollbars", "about:blank"]
        with log.open("ab") as stream:
            self.process = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=stream, stderr=stream, pass_fds=(to_browser, from_browser),
                start_new_session=True,
            )  # fmt: skip
        os.close(to_browser)
        os.close(from_browser)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict[str, Any]] = []

    def close(self) -> None:
        with contextlib.suppress(OSError, RuntimeError, TimeoutError):
            self.send("Browser.close")
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)
        stop_group(self.process, grace=5)  # its helpers too (zygote, crash handler)
        os.close(self._to_browser)
        os.close(self._from_browser)

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self._to_browser, data) :]
        while True:
            reply = self._receive()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"chromium: {method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            self._events.append(reply)

    def wait_for(self, event: str, session: str) -> None:
        while True:
            for index, message in enumerate(self._events):
                if message.get("method") == event and message.get("sessionId") == session:
                    del self._events[index]
                    return
            self._events.append(self._receive())

    def _receive(self) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                raise TimeoutError(f"chromium did not answer in {self.timeout:.0f} s; its log: {self.log}")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise RuntimeError(
                    f"chromium closed its pipe (exit {self.process.poll()}): {self.log.read_text()[-2000:]}"
                )
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        parsed: dict[str, Any] = json.loads(message)
        return parsed

    def look(self, page: Path, width: int, screenshot: Path | None, height: int = 900) -> dict[str, Any]:
        """``page`` in a viewport ``width`` px wide (a phone's below 700: touch, its viewport meta
        honoured): what MEASURE finds, and a PNG of the whole page at ``screenshot`` (if given)."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.send("Page.enable", session=session)
        metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 700}
        self.send("Emulation.setDeviceMetricsOverride", metrics, session)
        self.send("Page.navigate", {"url": page.as_uri()}, session)
        self.wait_for("Page.loadEventFired", session)
        evaluated = self.send("Runtime.evaluate", {"expression": MEASURE, "returnByValue": True}, session)
        if "exceptionDetails" in evaluated:
            raise RuntimeError(f"the measuring script failed: {evaluated['exceptionDetails']}")
        found: dict[str, Any] = evaluated["result"]["value"]
        if screenshot is not None:
            clip = {"x": 0, "y": 0, "width": width, "height": found["height"], "scale": 1}
            params = {"format": "png", "captureBeyondViewport": True, "clip": clip}
            screenshot.write_bytes(base64.b64decode(self.send("Page.captureScreenshot", params, session)["data"]))
        self.send("Target.closeTarget", {"targetId": target})
        return found


def _above_four(fd: int) -> int:
    """``fd`` moved to a number above 4, so that putting the pipe at 3 and 4 overwrites neither end."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
    os.close(fd)
    return moved


class Browsers:
    """The module's one browser, started by the first test that looks at a page (inside the test, so
    that a missing chromium fails that test with how to install it) and closed after the module."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.browser: Browser | None = None
        self.pages = 0

    def look_at(
        self, html: str, where: Path, widths: tuple[int, ...], *, keep: bool = True
    ) -> dict[int, dict[str, Any]]:
        """``html`` as the browser lays it out at each width: MEASURE's findings. Screenshots
        ``where/report-<width>.png``: always if ``keep``, else only of a width where something is wrong."""
        binary = chromium()
        if self.browser is None:
            self.browser = Browser(binary, self.root / "profile", self.root / "chromium.log")
        self.pages += 1
        page = where / f"report-{self.pages}.html"
        page.write_text(html, encoding="utf-8")
        seen = {}
        for width in widths:
            shot = where / f"report-{width}.png"
            seen[width] = self.browser.look(page, width, shot if keep else None)
            if not keep and problems(seen[width], width):
                self.browser.look(page, width, shot)
        return seen

    def close(self) -> None:
        if self.browser is not None:
            self.browser.close()


@pytest.fixture(scope="module")
def browsers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browsers]:
    started = Browsers(tmp_path_factory.mktemp("chromium"))
    yield started
    started.close()


def problems(found: dict[str, Any], width: int) -> list[str]:
    """What a person would see wrong at ``width``; empty when the page reads well."""
    wrong = []
    if found["viewport"] != width:
        wrong.append(f"the viewport is {found['viewport']} px wide, not {width}")
    if found["scroll_width"] > width:
        wrong.append(f"the page is {found['scroll_width']} px wide in a {width} px window: it scrolls sideways")
    wrong += [f"in a table: {what}" for what in found["in_tables"]]
    wrong += [f"axis labels overlap: {pair}" for pair in found["overlaps"]]
    wrong += [f"axis label cut by the plot's edge: {label}" for label in found["outside"]]
    return wrong


# ------------------------------------------------------------------------------------- the document


def hours() -> list[dict[str, Any]]:
    """Three days of event hours, with an empty night and a few empty hours here and there."""
    found = []
    for index in range(72):
        if 26 <= index <= 33 or index in (5, 50, 51):
            continue
        moment = START + timedelta(hours=index)
        found.append({"hour": moment.strftime("%Y-%m-%dT%H:00"), "rows": 1_200 + (index * 7919) % 38_000})
    return found


def splits() -> list[dict[str, Any]]:
    topics = ["eu-west-1.web.page_views.enriched.v2", "us-east-1.mobile-app.screen_views.raw", "ops.metrics"]
    found = []
    for index in range(12):
        topic, partition = topics[index % 3], index
        start = 9_876_543_210 + index * 1_234_567
        rows = 250_000 + index * 10_007
        lost = {"from": start - 5_000, "to": start - 10, "messages": 4_990} if index == 7 else None
        found.append(
            {
                "split": f"{topic}-{partition}",
                "topic": topic,
                "partition": partition,
                "leader": index % 3,
                "start": start,
                "end": start + rows + 12,
                "messages": rows + 12,
                "rows": rows,
                "quarantined": 12 if index % 4 == 1 else 0,
                "filtered": 3_000 if index % 5 == 0 else 0,
                "log_end": start + rows + 12 + index * 1_000,
                "lag": index * 1_000,
                "seconds": 12.5 + index,
                "min_event_time": (START + timedelta(minutes=7, seconds=5.694)).isoformat(),
                "max_event_time": (START + timedelta(hours=71, minutes=46, seconds=46.083)).isoformat(),
                "lost": lost,
            }
        )
    return found


def sample(value: str, rows: int) -> dict[str, Any]:
    return {"value": value, "rows": rows}


HOSTILE = '"<script>alert(1)</script>"'
LONG = '"' + "/a-very-long-page-path-with-no-space-at-all/" * 2 + "…"


def outputs() -> list[dict[str, Any]]:
    """Four outputs: quarantined and published, failed under policy fail, a quarantine refused (too
    many failing rows), and a record written before the rows as loaded were kept."""
    quarantined = {
        "output": "hourly_page_views",
        "rows": 5_706,
        "success": True,
        "on_failure": "quarantine",
        "quarantined": 17,
        "checks": [
            {"expectation": "not_null(page)", "success": True, "unexpected": 0, "observed": "0 of 5,706 rows"},
            {"expectation": "regex(page ~ ^/)", "success": True, "unexpected": 0, "observed": "0 of 5,706 rows"},
            {"expectation": "between(views, 1..)", "success": True, "unexpected": 0, "observed": "0 of 5,706 rows"},
            {"expectation": "unique(dt, hour, page)", "success": True, "unexpected": 0, "observed": "0 of 5,706 rows"},
            {"expectation": "row_count(1..)", "success": True, "unexpected": 0, "observed": "row count 5,706"},
        ],
        "loaded": {
            "rows": 5_723,
            "failing": 17,
            "checks": [
                {"expectation": "not_null(page)", "unexpected": 2, "samples": [sample("null", 2)], "quarantined": 2},
                {
                    "expectation": "regex(page ~ ^/)",
                    "unexpected": 15,
                    "quarantined": 15,
                    "samples": [
                        sample('"javascript:void(0)"', 9),
                        sample(HOSTILE, 3),
                        sample(LONG, 1),
                        sample('""', 1),
                    ],
                },
                {"expectation": "between(views, 1..)", "unexpected": 0, "samples": [], "quarantined": 0},
                {
                    "expectation": "unique(dt, hour, page)",
                    "unexpected": 2,
                    "quarantined": 2,
                    "samples": [sample('("2026-03-09", "05", "/checkout/confirmation")', 2)],
                },
                {"expectation": "row_count(1..)", "unexpected": None, "samples": [], "quarantined": None},
            ],
        },
    }
    failed = {
        "output": "user_sessions",
        "rows": 27_247,
        "success": False,
        "on_failure": "fail",
        "quarantined": 0,
        "checks": [
            {"expectation": "not_null(user_id)", "success": True, "unexpected": 0, "observed": "0 of 27,247 rows"},
            {"expectation": "between(pages, 1..)", "success": False, "unexpected": 3, "observed": "3 of 27,247 rows"},
        ],
        "loaded": {
            "rows": 27_247,
            "failing": None,
            "checks": [
                {"expectation": "not_null(user_id)", "unexpected": 0, "samples": [], "quarantined": None},
                {
                    "expectation": "between(pages, 1..)",
                    "unexpected": 3,
                    "samples": [sample("0", 2), sample("-1", 1)],
                    "quarantined": None,
                },
            ],
        },
    }
    refused = {
        "output": "service_hourly",
        "success": False,
        "on_failure": "quarantine",
        "quarantined": 0,
        "error": "service_hourly: 412 of 2,000 rows (20.60%) fail row checks, more than max_quarantine_share "
        "5.00%; first failing checks: between(cpu_max, 0..100) (412 rows)",
        "loaded": {
            "rows": 2_000,
            "failing": 412,
            "checks": [
                {
                    "expectation": "between(cpu_max, 0..100)",
                    "unexpected": 412,
                    "samples": [sample("250.0", 400), sample("101.5", 12)],
                    "quarantined": 0,
                },
            ],
        },
    }
    old = {  # as written before the rows as loaded were recorded
        "output": "daily_users",
        "rows": 1_234,
        "success": True,
        "statistics": {},
        "checks": [
            {"expectation": "not_null(user_id)", "success": True, "unexpected": 0, "observed": "0 of 1234 rows"}
        ],
        "quarantined": 3,
    }
    views = []
    for record, published in ((quarantined, True), (failed, False), (refused, False), (old, True)):
        name = str(record["output"])
        views.append(
            output_view(
                name,
                path=f"/data/warehouse/generations/0003/{name}",
                on_failure="quarantine",
                flow_run=41,
                quarantine_path=f"/data/warehouse/{name}/_quarantine/seq=000041",
                marker={"target": 41, "partitions": [["2026-03-09", "05"]] * 24} if published else None,
                record=record,
            )
        )
    return views


def document() -> dict[str, Any]:
    rows_per_hour = hours()
    found = splits()
    return {
        "format": 1,
        "generated_at": "2026-03-12T06:01:02+00:00",
        "pipeline": "page_views_with_a_rather_long_pipeline_name",
        "description": "page views → sessions per user (daily) and page counts per hour",
        "run": {
            "seq": 41,
            "run_id": "20260312T055800Z-3f9c1a",
            "kind": "load",
            "target": None,
            "generation": 3,
            "planned_at": "2026-03-12T05:58:00.123456+00:00",
            "committed_at": "2026-03-12T06:00:59.654321+00:00",
            "seconds": 179.2,
        },
        "raw": {
            "path": "/data/raw/page_views/_generations/0003",
            "files": 288,
            "quarantine_files": [
                f"/data/raw/page_views/_generations/0003/_quarantine/seq=000041/part-000041-{s['split']}-{s['start']}.parquet"
                for s in found
                if s["quarantined"]
            ],
            "bytes": 1_234_567_890,
        },
        "totals": {
            "messages": 3_100_000,
            "rows": 3_090_000,
            "quarantined": 36,
            "filtered": 9_000,
            "lost": 4_990,
            "lag": 66_000,
        },
        "splits": found,
        "rows_per_hour": rows_per_hour,
        "rows_per_hour_scope": "run",
        "data_loss": [
            {
                "seq": 41,
                "run_id": "20260312T055800Z-3f9c1a",
                "split": found[7]["split"],
                "from": found[7]["lost"]["from"],
                "to": found[7]["lost"]["to"],
                "messages": 4_990,
                "committed_at": "2026-03-12T06:00:59.654321+00:00",
            }
        ],
        "outputs": outputs(),
    }


# ------------------------------------------------------------------------------------- the tests


def test_the_report_reads_well_on_a_page_and_on_a_phone(tmp_path: Path, browsers: Browsers) -> None:
    report = document()
    seen = browsers.look_at(render_html(report), tmp_path, (1400, 390))
    for width, found in seen.items():
        assert problems(found, width) == [], f"at {width} px (screenshot: {tmp_path / f'report-{width}.png'})"
        assert found["tables"] == 6 and found["cells"] > 150  # splits, ledger, four outputs: measured, not vacuous
        assert found["scripts"] == 0  # the report has none; an untrusted value did not become one
        assert "<script>alert(1)</script>" in found["text"]  # ... it is shown as text
    page, phone = seen[1400], seen[390]
    # the plot: y ticks at round values, every day named, hours between at 1400 px
    assert {"0", "10,000", "20,000", "30,000", "40,000"} <= set(page["labels"])
    assert {"Mar 09", "Mar 10", "Mar 11"} <= set(page["labels"]) and {"Mar 09", "Mar 10", "Mar 11"} <= set(
        phone["labels"]
    )
    assert sum(label.endswith(":00") for label in page["labels"]) >= 12
    for text in ("rows as loaded", "rows kept (great-expectations)", '"javascript:void(0)"', "not run"):
        assert text in page["text"], text


SPANS = {"an hour": 1, "three hours": 3, "a day and more": 30, "a week": 24 * 7, "six weeks": 24 * 45}


def test_axis_labels_never_overlap_whatever_the_span(tmp_path: Path, browsers: Browsers) -> None:
    for name, span in SPANS.items():
        report = document()
        report["rows_per_hour"] = [
            {"hour": (START + timedelta(hours=i)).strftime("%Y-%m-%dT%H:00"), "rows": 5 + (i * 37) % 101}
            for i in range(span)
            if i % 11 != 3 or span < 4
        ]
        where = tmp_path / name.replace(" ", "-")
        where.mkdir()
        for width, found in browsers.look_at(render_html(report), where, (1400, 390), keep=False).items():
            wrong = [p for p in problems(found, width) if p.startswith("axis")]
            assert wrong == [], f"{name} at {width} px (screenshot: {where / f'report-{width}.png'})"
            assert any(label.startswith("Mar ") for label in found["labels"]), (name, width, found["labels"])
            assert len(found["labels"]) >= 6, (name, width, found["labels"])  # a title, y ticks, a date, hours
