"""Helpers for the flow tests: the example pipelines pointed at a test broker and temp dirs, the
events they are fed, and the warehouse rows those events must give (computed here in Python)."""

from __future__ import annotations

import hashlib
import itertools
from collections import Counter, defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import yaml

from demo.examples import encode
from kafkalog.client import Admin, Producer

REPO = Path(__file__).resolve().parents[2]


def example_spec(tmp_path: Path, name: str, bootstrap: str, **changes: Any) -> Path:
    """conf/pipelines/<name>.yaml with the broker, the raw layer and every output under ``tmp_path``;
    no tables unless ``tables`` is given (registering starts a metastore, and few tests are about it)."""
    data = yaml.safe_load((REPO / "conf" / "pipelines" / f"{name}.yaml").read_text())
    data["source"]["bootstrap"] = bootstrap
    data["source"]["retry_ms"] = 20_000
    data["raw"]["path"] = str(tmp_path / "raw")
    for output in data.get("outputs", []):
        output["path"] = str(tmp_path / "warehouse" / output["name"])
    data["tables"] = {"metastore": "none"}
    data.update(changes)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def send(bootstrap: str, topic: str, events: list[dict[str, Any]], partitions: int = 2) -> None:
    with Admin(bootstrap) as admin:
        if topic not in admin.list_topics():
            admin.create_topic(topic, partitions)
    with Producer(bootstrap) as producer:
        for value in encode(iter(events)):
            producer.send(topic, value)
        producer.flush()


def table_rows(path: Path) -> list[dict[str, Any]]:
    """Every row of a published output (hive partitions as strings), ignoring _-prefixed dirs."""
    if not path.exists():
        return []
    dataset = ds.dataset(str(path), format="parquet", partitioning="hive", ignore_prefixes=["_", "."])
    rows = dataset.to_table().to_pylist() if dataset.files else []
    for row in rows:  # pyarrow infers "05" as 5 and may read dt as a date: back to the path's strings
        if isinstance(row.get("hour"), int):
            row["hour"] = f"{row['hour']:02d}"
        if row.get("dt") is not None and not isinstance(row["dt"], str):
            row["dt"] = row["dt"].isoformat()
    return rows


def snapshot(path: Path) -> dict[str, str]:
    """Relative path → content hash of every file under ``path``."""
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


def _hour(ts: str) -> tuple[str, str]:
    moment = datetime.fromisoformat(ts)
    return moment.strftime("%Y-%m-%d"), moment.strftime("%H")


def expected_hourly_pages(events: list[dict[str, Any]]) -> dict[tuple[str, str, str], tuple[int, int]]:
    """(dt, hour, page) → (views, distinct users) of the events whose page is a path."""
    views: Counter[tuple[str, str, str]] = Counter()
    users: dict[tuple[str, str, str], set[int]] = defaultdict(set)
    for e in events:
        if not e["page"].startswith("/"):
            continue
        key = (*_hour(e["ts"]), e["page"])
        views[key] += 1
        users[key].add(e["user_id"])
    return {k: (views[k], len(users[k])) for k in views}


def expected_sessions(events: list[dict[str, Any]]) -> dict[tuple[int, str], tuple[int, int]]:
    """(user, dt) → (sessions, views): a session ends after more than 30 minutes without a view,
    and at midnight."""
    times: dict[tuple[int, str], list[datetime]] = defaultdict(list)
    for e in events:
        moment = datetime.fromisoformat(e["ts"])
        times[(e["user_id"], moment.strftime("%Y-%m-%d"))].append(moment)
    out = {}
    for key, moments in times.items():
        moments.sort()
        breaks = sum(1 for a, b in itertools.pairwise(moments) if (b - a).total_seconds() > 1800)
        out[key] = (1 + breaks, len(moments))
    return out
