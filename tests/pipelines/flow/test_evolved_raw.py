"""The transforms' view of a raw layer whose runs read values with three versions of their
subject: Spark reads every run's Parquet files side by side with the columns the raw table has
(the newest reader's and the ones it keeps), whatever columns each file was written with. The
loads run in-process (tests.support.in_memory), Spark reads; the registry is
kafkalog's own, served from the test process (tests.support.registry_in_process)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import fastavro
import pytest

from kafkalog.schemas.wire import frame
from pipelines.config.pipeline import load_spec
from pipelines.config.steps import RAW_VIEW
from pipelines.flow.transforms import Transforms
from pipelines.ingest.run import PipelineRun
from pipelines.layout import Scope, partition_of
from pipelines.ledger.state import PipelineState
from pipelines.progress import Reporter
from pipelines.storage import LocalStorage
from tests.pipelines.harness import write_spec
from tests.support.in_memory import InProcessStager, MemoryCluster
from tests.support.registry_in_process import LocalRegistry

pytestmark = pytest.mark.slow

NOW_MS = 1_795_000_000_000
V1 = {"type": "record", "name": "Ev", "fields": [{"name": "id", "type": "long"}, {"name": "note", "type": "string"}]}
V2 = {**V1, "fields": [*V1["fields"], {"name": "tag", "type": ["null", "string"], "default": None}]}
V3 = {**V1, "fields": [f for f in V2["fields"] if f["name"] != "note"]}


def avro(schema: Any, record: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def test_the_raw_view_reads_files_of_three_reader_versions_side_by_side(tmp_path: Path, spark: Any) -> None:
    with LocalRegistry() as sr:
        decoder = {"format": "avro", "registry": {"urls": sr.url}}
        spec = load_spec(write_spec(tmp_path, "127.0.0.1:1", tmp_path / "raw", decoder=decoder, event_time={}))
        cluster = MemoryCluster()
        cluster.create("events", 1)
        for schema, record in ((V1, {"id": 1, "note": "a"}), (V2, {"id": 2, "note": "b", "tag": "t"}), (V3, {"id": 3})):
            schema_id = sr.register("events-value", schema)
            cluster.append("events", 0, [frame(schema_id, avro(schema, record))], timestamp_ms=NOW_MS)
            job = PipelineRun(
                spec, None, storage=LocalStorage(), stager=InProcessStager(spec, cluster), consumer=cluster.consumer
            )
            assert job.run().status == "committed"
        state = PipelineState(LocalStorage(), str(tmp_path / "raw"))
        manifests = [state.manifest(seq) for seq in state.committed_seqs()]
        partitions = {partition_of(f.path) for m in manifests for f in m.files if f.kind == "data"}
        transforms = Transforms(spec, spark, state, Reporter(quiet=True))
        transforms._register_raw(Scope(manifests[-1].seq, False, tuple(sorted(p for p in partitions if p))))
        rows = spark.sql(f"SELECT id, note, tag FROM {RAW_VIEW} ORDER BY id").collect()
    assert [tuple(r) for r in rows] == [(1, "a", None), (2, "b", "t"), (3, None, None)]
