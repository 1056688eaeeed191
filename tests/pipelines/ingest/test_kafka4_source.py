"""Loading from Apache Kafka 4.x (the session's ``kafka4`` broker, KRaft): record batches with
headers, sent by our Producer, loaded into the raw layer exactly once while Spark's Python workers
and the driver die mid-run; bad records keep their headers in the quarantine; and a raw layer
whose older files predate the ``headers`` and ``timestamp_type`` columns still transforms and
replays.

Besides the oracle's exactly-once checks (tests.pipelines.harness), every committed row is compared
field by field with what the producer sent (key, value, headers) and with what the broker stores
(timestamp and its type). Each test has topics of its own on the shared broker, and small data.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

import confluent_kafka
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from kafkalog.client import Admin, Producer, SimpleConsumer
from kafkalog.record import iter_entries
from pipelines import faults
from pipelines.app.cli import main
from pipelines.config.pipeline import PipelineSpec, load_spec
from pipelines.flow.run import FlowRun
from pipelines.ingest.run import PipelineRun
from pipelines.ledger.state import PipelineState
from pipelines.replay.gc import current_locations
from pipelines.replay.run import Replay
from pipelines.replay.target import RewindTarget
from pipelines.reporting.report import build_report
from pipelines.storage import LocalStorage
from tests.pipelines.flow_harness import table_rows
from tests.pipelines.harness import oracle, write_spec
from tests.support.kafka4 import Kafka4Process

pytestmark = [pytest.mark.integration, pytest.mark.slow]

BASE = datetime(2025, 3, 1, 10, 0, tzinfo=UTC)
"""Create times of the records sent: in the past (Kafka refuses times too far ahead of its clock);
the test topics keep them anyway (retention.ms -1)."""
BASE_MS = int(BASE.timestamp() * 1000)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

Headers = tuple[tuple[str, bytes | None], ...]
Where = tuple[str, int, int]
"""(topic, partition, offset)"""


class Sent(NamedTuple):
    key: bytes | None
    value: bytes | None
    headers: Headers


def record(i: int) -> Sent:
    """The i-th test record: keys and values sometimes null; headers of every shape: none, one, a
    key repeated with a null value among its values, non-ASCII keys, empty and binary values."""
    shapes: list[Headers] = [
        (),
        (("trace", b"t-%d" % i),),
        (("dup", b"first"), ("dup", None), ("dup", b"third")),
        (("ünïcode 😀", b""), ("empty", b"")),
        (("bin", bytes(range(256))[: i % 50]),),
    ]
    key = None if i % 11 == 0 else b"key-%d" % i
    value = None if i % 13 == 5 else b"value-%d|" % i + bytes(range(i % 7))
    return Sent(key, value, shapes[i % len(shapes)])


def send(
    bootstrap: str,
    topic: str,
    records: Mapping[int, Sent],
    *,
    partitions: int = 1,
    configs: dict[str, str] | None = None,
) -> dict[Where, Sent]:
    """Create ``topic`` if needed and send ``records`` (i → record; partition i % partitions, create
    time BASE + i minutes) in small lz4 batches, so that a run's splits start and end inside
    batches. Returns what was sent, by where the broker put it."""
    with Admin(bootstrap) as admin:
        if topic not in admin.list_topics():
            admin.create_topic(topic, partitions, {"retention.ms": "-1", **(configs or {})})
    # batches close by size alone (the linger outlasts the sends): the same records, the same batches
    with Producer(bootstrap, compression="lz4", batch_bytes=1024, linger_ms=2_000) as producer:
        futures = [
            (
                item,
                producer.send(
                    topic,
                    item.value,
                    key=item.key,
                    partition=i % partitions,
                    timestamp=BASE_MS + 60_000 * i,
                    headers=item.headers,
                ),
            )
            for i, item in records.items()
        ]
        producer.flush()
        results = [(item, future.result(30)) for item, future in futures]
    return {(meta.topic, meta.partition, meta.offset): item for item, meta in results}


def batch_ends(kafka4: Kafka4Process, topic: str, partition: int) -> set[int]:
    """Where the record batches Kafka stores for a partition end (last offset + 1)."""
    segments = (kafka4.data / f"{topic}-{partition}").glob("*.log")
    return {entry.offset + 1 for path in segments for entry in iter_entries(path.read_bytes())}


def committed_rows(raw: Path, kind: str = "data") -> dict[Where, dict[str, Any]]:
    """Every committed row (or quarantined record) of the current generation, by where it was."""
    state = PipelineState(LocalStorage(), str(raw))
    rows = {}
    for manifest in state.generation_manifests():
        for item in manifest.files:
            if item.kind == kind:
                for row in pq.read_table(state.path(item.path)).to_pylist():
                    rows[(row["topic"], row["partition"], row["offset"])] = row
    return rows


def headers_of(row: dict[str, Any]) -> Headers | None:
    return None if row["headers"] is None else tuple((h["key"], h["value"]) for h in row["headers"])


def stored_times(bootstrap: str, where: set[Where]) -> dict[Where, tuple[int, int]]:
    """(timestamp, timestamp type) of each message as the broker gives it to a consumer."""
    found = {}
    with SimpleConsumer(bootstrap) as consumer:
        for topic, partition in {(t, p) for t, p, _ in where}:
            offsets = [o for t, p, o in where if (t, p) == (topic, partition)]
            for message in consumer.messages(topic, partition, min(offsets), max(offsets) + 1):
                found[(topic, partition, message.offset)] = (message.timestamp, int(message.timestamp_type))
    return found


def millis(moment: datetime) -> int:
    return (moment - EPOCH) // timedelta(milliseconds=1)


def assert_raw_holds_exactly(raw: Path, bootstrap: str, sent: dict[Where, Sent]) -> None:
    """Every message sent is in the committed raw layer exactly once (the oracle), with the key,
    value and headers it was sent with, and the timestamp and type the broker stores."""
    assert oracle(raw, bootstrap)["quarantined"] == 0
    rows = committed_rows(raw)
    assert sorted(rows) == sorted(sent)
    stored = stored_times(bootstrap, set(sent))
    for where, item in sent.items():
        row = rows[where]
        assert (row["key"], row["value"], headers_of(row)) == item, where
        assert (millis(row["timestamp"]), row["timestamp_type"]) == stored[where], where


# ------------------------------------------------------------------ a driver that dies


def killed_run(spec: PipelineSpec, spark: Any, point: str, task_faults: str) -> None:
    """A run whose driver dies at crash point ``point``, in this process so that the session's Spark
    serves it (pipelines.faults.simulated_crash). It leaves on disk what ``PIPELINES_CRASH_AT``
    (os._exit in a child driver, test_cli_pipelines.py) leaves: nothing cleans up after a crash."""
    with faults.simulated_crash(point), pytest.raises(faults.Crash, match=point):
        PipelineRun(spec, spark, task_faults=task_faults).run()


def topic_name(kind: str) -> str:
    return f"k4.{kind}.{uuid.uuid4().hex[:8]}"


# ------------------------------------------------------------------ the tests


def test_a_load_from_kafka4_killed_midway_holds_every_message_once_with_its_headers(
    tmp_path: Path, kafka4: Kafka4Process, spark: Any
) -> None:
    created, appended = topic_name("create"), topic_name("append")
    sent = send(kafka4.bootstrap, created, {i: record(i) for i in range(200)}, partitions=2)
    log_append = {"message.timestamp.type": "LogAppendTime"}
    sent |= send(kafka4.bootstrap, appended, {i: record(i) for i in range(60)}, configs=log_append)
    ends = batch_ends(kafka4, created, 0)
    assert len(ends) > 5 and 70 not in ends, "the limit ends a split inside a batch of several records"
    raw = tmp_path / "raw"
    spec = load_spec(
        write_spec(
            tmp_path,
            kafka4.bootstrap,
            raw,
            name="kafka4_events",
            topics=[created, appended],
            decoder={"format": "raw"},
            event_time={},  # the message timestamps: create times, and the broker's append times
            source={"bootstrap": kafka4.bootstrap, "fetch_max_bytes": 1024, "retry_ms": 20_000},
            limits={"max_messages_per_split": 70},  # ends inside a batch; the next run starts there
            raw_options={"writer": "tasks"},
        )
    )
    state = PipelineState(LocalStorage(), str(raw))

    # 1. each task's Python worker is killed after 20 rows (Spark retries the split from its start),
    #    then the driver dies with the splits staged: nothing committed, nothing visible
    killed_run(spec, spark, "load.after_staging", "exit_after_rows@20")
    planned = state.pending_plan()
    assert planned is not None and state.committed_seqs() == []
    assert sorted((s.topic, s.partition, s.start, s.end) for s in planned.splits) == sorted(
        [(created, 0, 0, 70), (created, 1, 0, 70), (appended, 0, 0, 60)]
    )
    assert oracle(raw)["rows"] == 0
    assert list((raw / "_pipeline" / "staging").iterdir()), "a killed driver leaves its staging behind"

    # 2. the retry executes the stored plan; its driver dies after the commit, one file published
    killed_run(spec, spark, "publish.after_file", "exit_after_rows@20")  # after the first file
    assert state.committed_seqs() == [1]
    first = state.manifest(1)
    assert (first.run_id, first.plan.splits) == (planned.run_id, planned.splits)
    assert len(first.files) > 1 and sum((raw / f.path).exists() for f in first.files) == 1

    # 3. more messages; a run with failing tasks finishes publishing #1 and loads from the middle
    #    of a batch; then runs until nothing is left
    sent |= send(kafka4.bootstrap, created, {i: record(i) for i in range(200, 320)}, partitions=2)
    sent |= send(kafka4.bootstrap, appended, {i: record(i) for i in range(60, 80)}, configs=log_append)
    result = PipelineRun(spec, spark, task_faults="fail_after_rows@15").run()
    assert result.status == "committed" and result.manifest is not None
    assert sorted((s.topic, s.partition, s.start, s.end) for s in result.manifest.splits) == sorted(
        [(created, 0, 70, 140), (created, 1, 70, 140), (appended, 0, 60, 80)]
    )
    statuses = [PipelineRun(spec, spark).run().status for _ in range(2)]
    assert statuses == ["committed", "up-to-date"]
    assert state.committed_seqs() == [1, 2, 3]

    assert_raw_holds_exactly(raw, kafka4.bootstrap, sent)
    types = {row["topic"]: row["timestamp_type"] for row in committed_rows(raw).values()}
    assert types == {created: 0, appended: 1}


def test_bad_records_from_kafka4_keep_their_headers_in_the_quarantine(
    tmp_path: Path, kafka4: Kafka4Process, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loaded over Kafka's SASL_SSL listener: TLS and a SCRAM login, the password from the environment."""
    topic = topic_name("quarantine")
    poison = {7: b"not json", 23: b'{"n": "not a number"}'}
    records = {
        i: Sent(b"k%d" % i, poison.get(i, b'{"n": %d}' % i), (("i", b"%d" % i), ("dup", None), ("dup", b"x")))
        for i in range(40)
    }
    sent = send(kafka4.bootstrap, topic, records)
    secured = kafka4.secured
    assert secured is not None
    monkeypatch.setenv("KAFKA4_PASSWORD", secured.password)
    security = {"protocol": "SASL_SSL", "mechanism": "SCRAM-SHA-512", "username": secured.user,
                "password": "${env:KAFKA4_PASSWORD}", "ca_file": str(secured.ca_file)}  # fmt: skip
    spec = load_spec(
        write_spec(
            tmp_path,
            kafka4.bootstrap,
            tmp_path / "raw",
            source={"bootstrap": secured.bootstrap, "retry_ms": 20_000, "security": security},
            name="kafka4_quarantine",
            topics=[topic],
            decoder={"format": "json", "schema": {"n": "long"}, "required": ["n"]},
            event_time={},
            bad_records={"policy": "quarantine", "max_share": 0.1},
            raw_options={"writer": "spark"},  # Spark's writer: the headers cross into the JVM and back
        )
    )
    assert PipelineRun(spec, spark).run().status == "committed"
    totals = oracle(tmp_path / "raw", kafka4.bootstrap)
    assert (totals["rows"], totals["quarantined"]) == (38, 2)
    rows = committed_rows(tmp_path / "raw")
    assert {w: (r["key"], r["n"], headers_of(r), r["timestamp_type"]) for w, r in rows.items()} == {
        w: (s.key, json.loads(s.value or b"")["n"], s.headers, 0) for w, s in sent.items() if w[2] not in poison
    }
    bad = committed_rows(tmp_path / "raw", "quarantine")
    assert {w: (r["key"], r["value"], headers_of(r), r["timestamp"], r["timestamp_type"]) for w, r in bad.items()} == {
        (topic, 0, i): (b"k%d" % i, poison[i], records[i].headers, BASE_MS + 60_000 * i, 0) for i in poison
    }


TAGGED_SQL = """
SELECT n, `partition`, `offset`, timestamp_type,
       CASE WHEN headers IS NULL THEN 'unknown'
            ELSE concat_ws(',', transform(headers, h -> concat(h.key, '=', coalesce(CAST(h.value AS STRING), 'null'))))
       END AS header_text,
       dt, hour
FROM raw
"""


def age(raw: Path, seq: int) -> None:
    """Rewrite the data files run #seq committed as the code before the headers and timestamp_type
    columns wrote them: every other column the same, those two absent."""
    state = PipelineState(LocalStorage(), str(raw))
    for item in state.manifest(seq).files:
        if item.kind == "data":
            path = Path(state.path(item.path))
            table = pq.read_table(path).drop_columns(["headers", "timestamp_type"])
            path.unlink()
            pq.write_table(table, path)


def test_a_raw_layer_with_files_from_before_the_headers_column_transforms_and_replays(
    tmp_path: Path, kafka4: Kafka4Process, spark: Any
) -> None:
    topic = topic_name("mixed")

    def batch(numbers: range, minute: int) -> dict[Where, int]:
        """Send events n (JSON, event time BASE + 3 minutes per n + ``minute``) with a header n=<n>;
        returns n by where each went."""
        events = {}
        for n in numbers:
            value = json.dumps({"n": n, "ts": (BASE + timedelta(minutes=3 * n + minute)).isoformat()})
            events[n] = Sent(None, value.encode(), (("n", b"%d" % n),))
        sent = send(kafka4.bootstrap, topic, events, partitions=2)
        return {where: json.loads(item.value or b"")["n"] for where, item in sent.items()}

    spec_path = write_spec(
        tmp_path,
        kafka4.bootstrap,
        tmp_path / "raw",
        name="kafka4_mixed",
        topics=[topic],
        decoder={"format": "json", "schema": {"n": "long", "ts": "string"}, "required": ["n"]},
        event_time={"field": "ts", "format": "iso8601"},
        transforms=[{"name": "tagged", "depends_on": ["raw"], "sql": TAGGED_SQL}],
        outputs=[
            {
                "name": "tagged",
                "source": "tagged",
                "path": str(tmp_path / "warehouse" / "tagged"),
                "expectations": [{"expect": "not_null", "column": "n"}],
            }
        ],
    )
    spec = load_spec(spec_path)
    old = batch(range(40), 0)  # 10:00 .. 11:57
    assert PipelineRun(spec, spark).run().status == "committed"
    age(tmp_path / "raw", 1)
    batch(range(40, 80), 1 - 120)  # the same hours, a minute after each old one
    assert PipelineRun(spec, spark).run().status == "committed"
    state = PipelineState(LocalStorage(), str(tmp_path / "raw"))
    hours = [{f.path.rsplit("/", 1)[0] for f in state.manifest(seq).files} for seq in (1, 2)]
    assert hours[0] == hours[1], "old and new files share every hour partition"

    def tagged() -> dict[int, tuple[int | None, str]]:
        """The output's current rows (after a replay: its new generation's)."""
        rows = table_rows(Path(current_locations(spec, state)["tagged"]))
        assert len(rows) == len({r["n"] for r in rows}) == 80, "every event once"
        return {r["n"]: (r["timestamp_type"], r["header_text"]) for r in rows}

    flow = FlowRun(spec, spark)
    seq = flow.seq_for(None)
    assert seq == 2
    flow.run_all(seq)
    # rows of the old files: unknown (null), not "no headers"; the new ones: their headers
    assert tagged() == {n: (None, "unknown") if n < 40 else (0, f"n={n}") for n in range(80)}

    # a replay from offset 5 of each partition: the old files are cut (kept rows stay as they were
    # written), the rest is loaded again, now with headers; the output is recomputed from both
    manifest = Replay(spec, spark).run(RewindTarget(offsets={(topic, 0): 5, (topic, 1): 5}))
    assert manifest.kind == "replay"
    kept = {n for (_, _, offset), n in old.items() if offset < 5}
    assert len(kept) == 10
    assert tagged() == {n: (None, "unknown") if n in kept else (0, f"n={n}") for n in range(80)}


# ------------------------------------------------------------------ transactions


def transactional_producer(bootstrap: str) -> Any:
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"loader-test-{uuid.uuid4().hex[:8]}", "linger.ms": 0}
    )
    producer.init_transactions(30)
    return producer


def in_transaction(producer: Any, topic: str, values: range, *, commit: bool | None) -> None:
    """Values ``{"n": i}`` for i in ``values`` into partition 0 in one transaction: committed,
    aborted, or (None) left open."""
    producer.begin_transaction()
    for i in values:
        producer.produce(topic, b'{"n": %d}' % i, key=b"k%d" % i, partition=0, timestamp=BASE_MS + 1000 * i)
    producer.flush(10)
    if commit is True:
        producer.commit_transaction(30)
    elif commit is False:
        producer.abort_transaction(30)


@pytest.mark.parametrize("writer", ["tasks", "spark"])
def test_a_topic_written_in_transactions_loads_the_committed_records_only(
    tmp_path: Path, kafka4: Kafka4Process, spark: Any, writer: str
) -> None:
    """librdkafka's transactional producer commits, aborts, and leaves one transaction open: the
    load stops at the last stable offset, aborted records and markers never become rows and are
    counted, the report and the status name the open transaction; once it commits, the next run
    loads it. Both ways of staging (tasks write, Spark writes)."""
    topic = topic_name("txn")
    with Admin(kafka4.bootstrap) as admin:
        admin.create_topic(topic, 1, configs={"retention.ms": "-1"})
    producer = transactional_producer(kafka4.bootstrap)
    in_transaction(producer, topic, range(10), commit=True)  # offsets 0-9, marker 10
    in_transaction(producer, topic, range(10, 20), commit=False)  # 11-20, marker 21
    in_transaction(producer, topic, range(20, 25), commit=True)  # 22-26, marker 27
    in_transaction(producer, topic, range(25, 28), commit=None)  # 28-30, open
    raw = tmp_path / "raw"
    spec = load_spec(
        write_spec(
            tmp_path,
            kafka4.bootstrap,
            raw,
            name="kafka4_transactions",
            topics=[topic],
            decoder={"format": "json", "schema": {"n": "long"}, "required": ["n"]},
            event_time={},
            raw_options={"writer": writer},
        )
    )
    state = PipelineState(LocalStorage(), str(raw))

    first = PipelineRun(spec, spark).run().manifest
    assert first is not None
    (split,) = first.splits
    assert (split.start, split.end, split.rows, split.quarantined, split.aborted, split.control) == (
        0,
        28,
        15,
        0,
        10,
        3,
    )
    assert sorted(r["n"] for r in committed_rows(raw).values()) == [*range(10), *range(20, 25)]
    totals = oracle(raw, kafka4.bootstrap)
    assert (totals["rows"], totals["quarantined"], totals["skipped"]) == (15, 0, 13)
    report = build_report(spec, state, first.seq)
    assert (report["totals"]["aborted"], report["totals"]["markers"]) == (10, 3)
    assert [(h["split"], h["last_stable_offset"], h["log_end"], h["offsets"]) for h in report["held_back"]] == [
        (f"{topic}-0", 28, 31, 3)
    ]

    spec_file = str(tmp_path / "kafka4_transactions.yaml")
    status = CliRunner().invoke(main, ["status", spec_file, "--json"], catch_exceptions=False)
    assert [h["split"] for h in json.loads(status.stdout)["held_back"]] == [f"{topic}-0"]
    said = CliRunner().invoke(main, ["status", spec_file], catch_exceptions=False).stdout
    assert "10 records of aborted ones and 3 markers skipped" in said
    assert f"held back: {topic}-0 loads up to its last stable offset 28, 3 offsets short of its log end 31" in said

    assert PipelineRun(spec, spark).run().status == "up-to-date"  # still held back: nothing to load
    producer.commit_transaction(30)  # marker 31, written by the coordinator after it answered
    with SimpleConsumer(kafka4.bootstrap, isolation="read_committed") as consumer:
        deadline = time.monotonic() + 30
        while consumer.latest_offsets([(topic, 0)]) != {(topic, 0): 32}:
            assert time.monotonic() < deadline, "the commit marker was never written"
            time.sleep(0.1)
    second = PipelineRun(spec, spark).run().manifest
    assert second is not None
    (split,) = second.splits
    assert (split.start, split.end, split.rows, split.aborted, split.control) == (28, 32, 3, 0, 1)
    assert sorted(r["n"] for r in committed_rows(raw).values()) == [*range(10), *range(20, 28)]
    assert oracle(raw, kafka4.bootstrap)["skipped"] == 14
    assert build_report(spec, state, second.seq)["held_back"] == []

    # a replay from offset 5 reloads through the aborted transaction: the same committed rows
    replayed = Replay(spec, spark).run(RewindTarget(offsets={(topic, 0): 5}))
    assert replayed.kind == "replay"
    assert [(s.start, s.end, s.rows, s.aborted, s.control) for s in replayed.splits] == [(5, 32, 13, 10, 4)]
    assert sorted(r["n"] for r in committed_rows(raw).values()) == [*range(10), *range(20, 28)]  # the generation
