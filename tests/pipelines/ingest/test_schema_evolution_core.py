"""Schema evolution across runs, the driver's commit protocol for real and the tasks in-process
(tests.support.in_memory), schemas from a registry over HTTP (tests.support.schema_registry_double,
a test double until kafkalog's registry lands; hence the integration tier, though no process starts).

v1 values load into v1's columns; once the subject has v2 (a field added with a default), the next
run reads old and new values into v2's columns, and earlier runs' files stay as they were; each
manifest records the reader version; a replay reads with the version the newest run recorded, not
a v3 registered since."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import fastavro
import pyarrow.parquet as pq
import pytest

from kafkalog.schemas.wire import frame
from pipelines.config.pipeline import load_spec
from pipelines.ingest.run import PipelineRun
from pipelines.storage import LocalStorage
from tests.pipelines.harness import oracle, write_spec
from tests.support.in_memory import InProcessStager, MemoryCluster
from tests.support.schema_registry_double import RegistryDouble

pytestmark = pytest.mark.integration

NOW_MS = 1_795_000_000_000
V1 = {"type": "record", "name": "Ev", "fields": [{"name": "id", "type": "long"}]}
V2 = {**V1, "fields": [*V1["fields"], {"name": "tag", "type": ["null", "string"], "default": None}]}
V3 = {**V1, "fields": [*V2["fields"], {"name": "n", "type": "long", "default": 0}]}


def avro(schema: Any, record: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def test_a_subject_that_gains_a_field_gains_a_column_and_a_replay_keeps_the_runs_version(tmp_path: Path) -> None:
    with RegistryDouble() as sr:
        v1 = sr.register("events-value", V1)
        spec = load_spec(
            write_spec(
                tmp_path, "127.0.0.1:1", tmp_path / "raw", decoder={"format": "avro", "registry": {"urls": sr.url}},
                event_time={},
            )
        )  # fmt: skip
        cluster = MemoryCluster()
        cluster.create("events", 1)
        cluster.append("events", 0, [frame(v1, avro(V1, {"id": i})) for i in range(5)], timestamp_ms=NOW_MS)

        def job() -> PipelineRun:
            return PipelineRun(
                spec, None, storage=LocalStorage(), stager=InProcessStager(spec, cluster), consumer=cluster.consumer
            )

        first = job().run().manifest
        assert first is not None
        assert first.schemas == {"values": {"events": {"subject": "events-value", "version": 1, "id": v1}}, "keys": {}}

        v2 = sr.register("events-value", V2)
        values = [frame(v1, avro(V1, {"id": 5})), frame(v2, avro(V2, {"id": 6, "tag": "new"}))]
        cluster.append("events", 0, values, timestamp_ms=NOW_MS)
        second = job().run().manifest
        assert second is not None and second.schemas["values"]["events"]["version"] == 2
        assert oracle(tmp_path / "raw")["rows"] == 7

        def rows_of(manifest: Any) -> list[dict[str, Any]]:
            files = [tmp_path / "raw" / f.path for f in manifest.files if f.kind == "data"]
            return [r for f in files for r in pq.read_table(f).select(["offset", *columns(f)]).to_pylist()]

        def columns(path: Path) -> list[str]:
            names = pq.read_schema(path).names
            return names[names.index("tombstone") + 1 : names.index("dt") if "dt" in names else None]

        assert rows_of(first) == [{"offset": i, "id": i} for i in range(5)]  # v1's columns, as written
        assert rows_of(second) == [{"offset": 5, "id": 5, "tag": None}, {"offset": 6, "id": 6, "tag": "new"}]

        sr.register("events-value", V3)
        replaying = job()
        replay_plan = replace(second.plan, kind="replay")
        schemas = replaying.run_schemas(replay_plan)
        assert schemas is not None and schemas.value_for("events").reader_version == 2
        fresh = replaying.run_schemas(second.plan)
        assert fresh is not None and fresh.value_for("events").reader_version == 3
        assert json.loads(fresh.value_for("events").reader) == V3
