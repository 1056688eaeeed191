"""A raw layer of Avro values through three versions of its subject, found by name in the embedded
metastore, through the CLI as a user runs it: a real kafkalog broker, Spark local, schemas from a
registry over HTTP (kafkalog's own, served from the test process: tests.support.registry_in_process).

v1 (id, qty, note) loads at 09:00; v2 adds ``channel`` (a nullable column: the table gets it,
ALTER TABLE ADD COLUMNS, and the view shows it); v3 removes ``note`` (the column stays, null in
v3's rows). One query reads the three runs' partitions side by side, each file written with its
own run's columns. Then v4 changes ``qty``'s type: the run is refused before Spark starts, naming
the subject, both versions and the field, and nothing is loaded. Before that, a replay from v2's
record reads with the recorded v3 into a new generation, whose table is made with the removed
column too (the kept v1 file has it)."""

from __future__ import annotations

import datetime as dt
import io
import json
import uuid
from pathlib import Path
from typing import Any

import fastavro
import pytest

from kafkalog.client import Admin, Producer
from kafkalog.schemas.wire import frame
from pipelines.ledger.state import PipelineState
from pipelines.storage import LocalStorage
from tests.pipelines.harness import oracle, run_cli, write_spec
from tests.support.kafkalog import BrokerProcess
from tests.support.registry_in_process import LocalRegistry

pytestmark = [pytest.mark.integration, pytest.mark.slow]

AT = {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}}
V1 = {
    "type": "record",
    "name": "Order",
    "fields": [{"name": "id", "type": "long"}, {"name": "qty", "type": "int"}, {"name": "note", "type": "string"}, AT],
}
V2 = {**V1, "fields": [*V1["fields"], {"name": "channel", "type": ["null", "string"], "default": None}]}
V3 = {**V1, "fields": [f for f in V2["fields"] if f["name"] != "note"]}
V4 = {**V1, "fields": [{**f, "type": "long"} if f["name"] == "qty" else f for f in V3["fields"]]}


def avro(schema: Any, record: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def test_columns_added_and_removed_across_runs_in_one_table(tmp_path: Path, kafkalog_shared: BrokerProcess) -> None:
    topic = f"evolving-{uuid.uuid4().hex[:8]}"
    bootstrap = kafkalog_shared.bootstrap
    with Admin(bootstrap) as admin:
        admin.create_topic(topic, 1)
    with LocalRegistry() as sr:
        spec = write_spec(
            tmp_path, bootstrap, tmp_path / "raw", name="evolving", topics=[topic],
            decoder={"format": "avro", "registry": {"urls": sr.url}}, event_time={"field": "at"},
            tables={"metastore": "auto"},
        )  # fmt: skip

        def load(schema: Any, hour: int, *records: dict[str, Any]) -> None:
            schema_id = sr.register(f"{topic}-value", schema)
            at = dt.datetime(2026, 11, 28, hour, tzinfo=dt.UTC)
            with Producer(bootstrap) as producer:
                for record in records:
                    producer.send(topic, frame(schema_id, avro(schema, {**record, "at": at})))
                producer.flush()
            ran = run_cli("run", str(spec), "--master", "local[2]", "--quiet")
            assert ran.returncode == 0, ran.stderr[-3000:]

        load(V1, 9, {"id": 1, "qty": 1, "note": "v1"})
        load(V2, 10, {"id": 2, "qty": 2, "note": "v2", "channel": "APP"})
        load(V3, 11, {"id": 3, "qty": 3, "channel": "WEB"})
        # one query (a Spark start each): the rows, and the columns' types as the table declares them
        query = (
            "SELECT id, qty, note, channel, hour, typeof(qty) AS qty_t, typeof(note) AS note_t, "
            "typeof(channel) AS channel_t FROM evolving_raw ORDER BY id"
        )
        asked = run_cli("sql", str(spec), query, "--json")
        assert asked.returncode == 0, asked.stderr[-3000:]
        rows = [json.loads(line) for line in asked.stdout.strip().splitlines()]
        types = {"qty_t": "int", "note_t": "string", "channel_t": "string"}
        assert rows == [
            {"id": 1, "qty": 1, "note": "v1", "channel": None, "hour": "09", **types},  # a file without channel
            {"id": 2, "qty": 2, "note": "v2", "channel": "APP", "hour": "10", **types},
            {"id": 3, "qty": 3, "note": None, "channel": "WEB", "hour": "11", **types},  # a file without note
        ]
        assert oracle(tmp_path / "raw", bootstrap)["rows"] == 3

        # a replay from v2's record: with the recorded v3 (the newest run's), into a new generation
        # whose table is made afresh, with the column v3 removed (v1's file, kept, still has it)
        offsets = tmp_path / "offsets.json"
        offsets.write_text(json.dumps({f"{topic}:0": 1}))
        replayed = run_cli("rewind", str(spec), "--to-offsets", str(offsets), "--master", "local[2]", "--quiet")
        assert replayed.returncode == 0, replayed.stderr[-3000:]
        asked = run_cli("sql", str(spec), "SELECT id, note, channel FROM evolving_raw ORDER BY id", "--json")
        assert asked.returncode == 0, asked.stderr[-3000:]
        assert [json.loads(line) for line in asked.stdout.strip().splitlines()] == [
            {"id": 1, "note": "v1", "channel": None},
            {"id": 2, "note": None, "channel": "APP"},  # reloaded, read into v3
            {"id": 3, "note": None, "channel": "WEB"},
        ]

        v4 = sr.register(f"{topic}-value", V4)
        with Producer(bootstrap) as producer:
            producer.send(topic, frame(v4, avro(V4, {"id": 4, "qty": 2**40, "at": dt.datetime.now(dt.UTC)})))
            producer.flush()
        refused = run_cli("run", str(spec), "--master", "local[2]")
    assert refused.returncode == 1
    line = refused.stderr.strip().splitlines()[-1]
    assert (
        f"subject {topic}-value: field qty is int in version 3 (id 3), the raw table's column, and bigint in "
        f"version 4 (id {v4}), this run's reader schema"
    ) in line
    assert line.endswith("(checked before Spark started: nothing was loaded)")
    state = PipelineState(LocalStorage(), str(tmp_path / "raw"))
    assert len(state.committed_seqs()) == 4 and state.pending_plan() is None  # three loads and the replay
