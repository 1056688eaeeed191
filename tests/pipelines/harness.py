"""Helpers of the pipeline tests: events on a real broker, pipeline files, and the oracle.

The oracle is the judge of exactly-once: it reads the broker's log (what was there to load) and
the committed output (manifests and the files they list, read with pyarrow, not Spark, through a
``Storage``: local files, or HDFS over WebHDFS) and checks
that every offset of every committed split appears exactly once, in data or quarantine, with the
key the broker has at that offset, except the offsets the split's manifest counts as skipped
(records of aborted transactions and transaction markers, which a read-committed consumer of the
broker does not see either, and offsets the log cleaner of a compacted topic removed, which it does
not see any more); that committed ranges never overlap; and that no Parquet file is
visible in the raw layer unless a committed manifest lists it.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from kafkalog.client import Admin, Producer, SimpleConsumer
from pipelines.ledger.state import PipelineState
from pipelines.storage import LocalStorage, Storage

PIPELINES = Path(sys.executable).with_name("pipelines")
REPO = Path(__file__).resolve().parents[2]
BASE_TIME = datetime(2026, 11, 21, 8, 0, tzinfo=UTC)


def event(i: int) -> bytes:
    """The i-th test event: about 120 bytes of JSON, one second apart from 08:00 UTC."""
    return json.dumps(
        {"user_id": i, "event": "click", "amount": i * 0.5, "ts": (BASE_TIME + timedelta(seconds=i)).isoformat()}
    ).encode()


def produce(
    bootstrap: str, topic: str, count: int, *, partitions: int = 4, first: int = 0, bad: dict[int, bytes] | None = None
) -> None:
    """Create ``topic`` (if needed) and send events first..first+count-1, keyed by their number;
    ``bad`` replaces the values of some event numbers (poison messages)."""
    with Admin(bootstrap) as admin:
        if topic not in admin.list_topics():
            admin.create_topic(topic, partitions)
    with Producer(bootstrap) as producer:
        for i in range(first, first + count):
            value = (bad or {}).get(i, event(i))
            producer.send(topic, value, key=str(i).encode())
        producer.flush()


def write_spec(
    directory: Path,
    bootstrap: str,
    raw: Path,
    *,
    name: str = "events_raw",
    raw_options: dict[str, Any] | None = None,
    **overrides: Any,
) -> Path:
    """A pipeline YAML over topic ``events`` into ``raw`` (with ``raw_options`` added to its raw
    section); ``overrides`` replace top-level keys. It registers no tables unless ``tables`` says
    so: a run that registers starts a metastore (seconds), and few tests are about tables."""
    spec: dict[str, Any] = {
        "name": name,
        "source": {"bootstrap": bootstrap, "retry_ms": 20_000},
        "topics": ["events"],
        "decoder": {
            "format": "json",
            "schema": {"user_id": "long", "event": "string", "amount": "double", "ts": "string"},
            "required": ["user_id"],
        },
        "event_time": {"field": "ts", "format": "iso8601"},
        "raw": {"path": str(raw), **(raw_options or {})},
        "tables": {"metastore": "none"},
    }
    spec.update(overrides)
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def run_cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 300, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``pipelines <args>`` in a child process (its own driver: it may crash without harming us),
    in the directory ``cwd`` (default: this one)."""
    return subprocess.run(
        [str(PIPELINES), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        check=False,
        cwd=cwd,
    )


def start_run(path: Path, log: Path, *args: str) -> subprocess.Popen[bytes]:
    """``pipelines run <path> --master local[2] <args>`` in the background, in a session of its own
    (``os.killpg`` kills the driver, its JVM and workers at once), its output into ``log``."""
    with log.open("w") as output:
        return subprocess.Popen(
            [str(PIPELINES), "run", str(path), "--master", "local[2]", *args],
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def broker_keys(
    bootstrap: str, topic: str, partition: int, start: int, end: int
) -> tuple[int, dict[int, bytes | None]]:
    """The first offset of [start, end) still on the broker (retention may have deleted some) and
    the keys from there, as a read-committed consumer sees them (without transactions in the topic:
    every record)."""
    with SimpleConsumer(bootstrap, isolation="read_committed") as consumer:
        first = max(start, consumer.earliest_offset(topic, partition))
        return first, (
            {m.offset: m.key for m in consumer.messages(topic, partition, first, end)} if first < end else {}
        )


def oracle(raw: Path | str, bootstrap: str | None = None, *, storage: Storage | None = None) -> dict[str, Any]:
    """Check exactly-once over everything committed under ``raw`` (see the module doc), read
    through ``storage`` (local files by default); returns totals for further assertions."""
    storage = storage or LocalStorage()
    root = str(raw).rstrip("/")
    state = PipelineState(storage, root)
    seqs = state.committed_seqs()
    seen: Counter[tuple[str, int, int]] = Counter()
    keys: dict[tuple[str, int, int], bytes | None] = {}
    ranges: dict[tuple[str, int], list[tuple[int, int]]] = {}
    skipped: dict[tuple[str, int, int], int] = {}  # (topic, partition, start) -> offsets skipped
    listed: set[str] = set()
    rows = quarantined = 0
    for seq in seqs:
        manifest = state.manifest(seq)
        for split in manifest.splits:
            ranges.setdefault((split.topic, split.partition), []).append((split.start, split.end))
            skipped[(split.topic, split.partition, split.start)] = split.aborted + split.control + split.compacted
        for item in manifest.files:
            listed.add(item.path)
            content = pa.BufferReader(storage.read_bytes(f"{root}/{item.path}"))
            table = pq.read_table(content, columns=["topic", "partition", "offset", "key"])
            assert table.num_rows == item.rows, f"{item.path}: {table.num_rows} rows, manifest says {item.rows}"
            for topic, partition, offset, key in zip(
                *(table.column(c).to_pylist() for c in table.column_names), strict=True
            ):
                seen[(topic, partition, offset)] += 1
                keys[(topic, partition, offset)] = key
            if item.kind == "data":
                rows += item.rows
            else:
                quarantined += item.rows
    duplicates = [k for k, n in seen.items() if n > 1]
    assert not duplicates, f"offsets loaded more than once: {sorted(duplicates)[:10]}"
    expected = 0
    for (topic, partition), spans in ranges.items():
        spans.sort()
        for (a_start, a_end), (b_start, _) in itertools.pairwise(spans):
            assert a_end <= b_start, (
                f"{topic}-{partition}: committed ranges overlap: [{a_start},{a_end}) and [{b_start},..)"
            )
        for start, end in spans:
            skips = skipped.get((topic, partition, start), 0)
            expected += end - start - skips
            missing = [o for o in range(start, end) if (topic, partition, o) not in seen]
            assert len(missing) == skips, (
                f"{topic}-{partition}: offsets never loaded: {missing[:10]} (of {len(missing)}; "
                f"{skips} skipped as aborted, markers or compacted)"
            )
            if bootstrap is not None and end > start:
                first, on_broker = broker_keys(bootstrap, topic, partition, start, end)
                loaded = {o for o in range(first, end) if (topic, partition, o) in seen}
                if first < end:
                    assert set(on_broker) == loaded, (
                        f"{topic}-{partition} [{start}, {end}): a read-committed consumer of the broker sees "
                        f"{sorted(set(on_broker) - loaded)[:10]} not loaded, and not "
                        f"{sorted(loaded - set(on_broker))[:10]} loaded"
                    )
                for offset in on_broker:
                    assert keys[(topic, partition, offset)] == on_broker[offset], (
                        f"{topic}-{partition}@{offset}: key differs"
                    )
    assert len(seen) == expected, f"{len(seen)} offsets in the output, committed ranges hold {expected}"
    visible = {
        relative
        for f in storage.walk_files(root)
        if f.name.endswith(".parquet") and not (relative := f.path[len(root) + 1 :]).startswith("_pipeline/")
    }
    assert visible == listed, (
        f"files visible but not committed: {sorted(visible - listed)[:5]}; "
        f"listed but missing: {sorted(listed - visible)[:5]}"
    )
    return {"rows": rows, "quarantined": quarantined, "skipped": sum(skipped.values()), "seqs": seqs, "ranges": ranges}
