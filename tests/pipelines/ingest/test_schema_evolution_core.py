"""Schema evolution across runs, the driver's commit protocol for real and the tasks in-process
(tests.support.in_memory), schemas from kafkalog's registry over HTTP, served from the test process
(tests.support.registry_in_process; hence the integration tier, though no process starts).

v1 values load into v1's columns; once the subject has v2 (a field added with a default), the next
run reads old and new values into v2's columns, and earlier runs' files stay as they were; each
manifest records the reader version; a replay reads with the version the newest run recorded, not
a v3 registered since. Between runs (pipelines.schemas.evolution): a removed field stays a column
of the table; a column whose type changes (an Avro promotion, a nested record's fields, a key's
fields) is refused before anything loads, naming the subject, both versions and the field, also
when the recorded version was hard-deleted; a replay pins the recorded schema by id unless told
``latest``, and the pre-Spark check follows the same choice."""

from __future__ import annotations

import io
import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import fastavro
import pyarrow.parquet as pq
import pytest

from kafkalog.schemas.wire import frame
from pipelines.app.runner import check_schemas, rewind_target
from pipelines.config.pipeline import Decoder, KeyDecoder, Registry, load_spec
from pipelines.errors import PayloadSchemaError, ReplayError, SchemaRegistryError
from pipelines.executor.rows import row_schema, spark_columns
from pipelines.ingest.run import PipelineRun
from pipelines.ledger.records import Manifest
from pipelines.ledger.state import PipelineState
from pipelines.schemas.resolved import resolve_schemas, spec_schemas
from pipelines.storage import LocalStorage
from tests.pipelines.harness import oracle, write_spec
from tests.support.in_memory import InProcessStager, MemoryCluster
from tests.support.registry_in_process import LocalRegistry

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
    with LocalRegistry() as sr:
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


class Pipeline:
    """A pipeline over topic ``events`` (one partition) of avro values framed with ``sr``'s ids."""

    def __init__(self, tmp_path: Path, sr: LocalRegistry) -> None:
        decoder = {"format": "avro", "registry": {"urls": sr.url}}
        path = write_spec(tmp_path, "127.0.0.1:1", tmp_path / "raw", decoder=decoder, event_time={})
        self.spec = load_spec(path)
        self.cluster = MemoryCluster()
        self.cluster.create("events", 1)

    def send(self, schema_id: int, schema: Any, *records: dict[str, Any]) -> None:
        self.cluster.append("events", 0, [frame(schema_id, avro(schema, r)) for r in records], timestamp_ms=NOW_MS)

    def job(self) -> PipelineRun:
        return PipelineRun(
            self.spec, None, storage=LocalStorage(), stager=InProcessStager(self.spec, self.cluster),
            consumer=self.cluster.consumer,
        )  # fmt: skip

    def run(self) -> Manifest:
        manifest = self.job().run().manifest
        assert manifest is not None
        return manifest


WIDE = {"type": "record", "name": "Ev", "fields": [{"name": "id", "type": "long"}, {"name": "note", "type": "string"}]}
NARROW = {"type": "record", "name": "Ev", "fields": [{"name": "id", "type": "long"}]}


def test_a_removed_field_stays_a_column_of_the_table_null_in_later_rows(tmp_path: Path) -> None:
    with LocalRegistry() as sr:
        pipeline = Pipeline(tmp_path, sr)
        wide = sr.register("events-value", WIDE)
        pipeline.send(wide, WIDE, {"id": 0, "note": "a"})
        pipeline.run()
        narrow = sr.register("events-value", NARROW)
        pipeline.send(narrow, NARROW, {"id": 1})
        pipeline.send(wide, WIDE, {"id": 2, "note": "read into v2: dropped"})
        second = pipeline.run()
        kept = {"note": {"subject": "events-value", "version": 1, "id": wide}}
        assert second.schemas["kept"] == kept
        pipeline.send(narrow, NARROW, {"id": 3})
        third = pipeline.run()
        assert third.schemas["kept"] == kept  # carried on while the table has it
        schemas = spec_schemas(pipeline.spec, ["events"], third.schemas)
        assert schemas is not None
        assert [f.name for f in schemas.kept_columns()] == ["note"]
        columns = dict(spark_columns(pipeline.spec.decoder, schemas))
        assert columns["note"] == "STRING" and columns["id"] == "BIGINT"  # the table keeps it
        assert "note" not in row_schema(pipeline.spec.decoder, schemas).names  # the tasks write none
        files = [tmp_path / "raw" / f.path for m in (second, third) for f in m.files if f.kind == "data"]
        assert all("note" not in pq.read_schema(f).names for f in files)
        assert oracle(tmp_path / "raw")["rows"] == 4


PROMOTED = {**NARROW, "fields": [*NARROW["fields"], {"name": "n", "type": "long", "default": 0}]}
SMALL = {**NARROW, "fields": [*NARROW["fields"], {"name": "n", "type": "int", "default": 0}]}
RETYPED = {**NARROW, "fields": [*NARROW["fields"], {"name": "n", "type": "string", "default": ""}]}


def test_a_column_whose_type_changes_between_runs_is_refused_before_anything_is_loaded(tmp_path: Path) -> None:
    with LocalRegistry() as sr:
        pipeline = Pipeline(tmp_path, sr)
        small = sr.register("events-value", SMALL)
        pipeline.send(small, SMALL, {"id": 0, "n": 1})
        first = pipeline.run()
        promoted = sr.register("events-value", PROMOTED)  # Avro reads int as long: the column cannot follow
        pipeline.send(promoted, PROMOTED, {"id": 1, "n": 2**40})
        with pytest.raises(PayloadSchemaError) as refused:
            check_schemas(pipeline.spec, ["events"])
        assert str(refused.value).startswith(
            f"subject events-value: field n is int in version 1 (id {small}), the raw table's column, and bigint in "
            f"version 2 (id {promoted}), this run's reader schema: a column of the raw table keeps its type"
        )
        assert str(refused.value).endswith("(checked before Spark started: nothing was loaded)")
        with pytest.raises(PayloadSchemaError, match="field n is int in version 1"):
            pipeline.run()  # the run itself checks again
        state = PipelineState.for_spec(pipeline.spec)
        assert state.committed_seqs() == [first.seq] and oracle(tmp_path / "raw")["rows"] == 1


def test_a_type_change_avro_cannot_read_is_refused_though_the_recorded_version_was_deleted(
    tmp_path: Path,
) -> None:
    with LocalRegistry() as sr:
        pipeline = Pipeline(tmp_path, sr)
        small = sr.register("events-value", SMALL)
        pipeline.send(small, SMALL, {"id": 0, "n": 1})
        pipeline.run()
        retyped = sr.register("events-value", RETYPED, compatibility="NONE")
        sr.soft_delete("events-value", 1)  # the run's reader is gone from the subject's versions
        with pytest.raises(PayloadSchemaError) as refused:
            check_schemas(pipeline.spec, ["events"])
        assert str(refused.value).startswith(
            f"subject events-value: records written with version 1 (id {small}) cannot be read into version 2 "
            f"(id {retyped}), the run's reader schema: "
        )
        assert "path '/fields/1/type'" in str(refused.value)  # Confluent's wording: the field n


def test_a_recorded_reader_deleted_for_good_stops_the_run_naming_its_id(tmp_path: Path) -> None:
    """A hard delete takes the schema itself (an id no version holds any longer answers 40403, as in
    Confluent's registry): the run cannot compare with what it read before, and says so."""
    with LocalRegistry() as sr:
        pipeline = Pipeline(tmp_path, sr)
        small = sr.register("events-value", SMALL)
        pipeline.send(small, SMALL, {"id": 0, "n": 1})
        pipeline.run()
        sr.register("events-value", PROMOTED)
        sr.hard_delete("events-value", 1)
        with pytest.raises(SchemaRegistryError) as refused:
            check_schemas(pipeline.spec, ["events"])
        assert f"GET /schemas/ids/{small} answered HTTP 404 (error 40403: Schema {small} not found)" in str(
            refused.value
        )


R1 = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "long"}]}
NESTED = {**NARROW, "fields": [*NARROW["fields"], {"name": "r", "type": R1}]}
R2 = {**R1, "fields": [*R1["fields"], {"name": "b", "type": "long", "default": 0}]}
NESTED_GROWN = {**NARROW, "fields": [*NARROW["fields"], {"name": "r", "type": R2}]}


def test_a_replay_reads_with_the_recorded_schema_by_id_unless_told_latest(tmp_path: Path) -> None:
    with LocalRegistry() as sr:
        pipeline = Pipeline(tmp_path, sr)
        nested = sr.register("events-value", NESTED)
        pipeline.send(nested, NESTED, *({"id": i, "r": {"a": i}} for i in range(3)))
        first = pipeline.run()
        grown = sr.register("events-value", NESTED_GROWN)  # Avro reads it into v1; the struct column changes
        sr.soft_delete("events-value", 1)  # a replay pins by id: a version number deleted since still reads
        replaying = pipeline.job()
        schemas = replaying.run_schemas(replace(first.plan, kind="replay"))
        assert schemas is not None
        reader = schemas.value_for("events")
        assert (reader.reader_version, reader.reader_id, json.loads(reader.reader)) == (1, nested, NESTED)
        assert nested in reader.writers and grown in reader.writers
        check_schemas(pipeline.spec, ["events"], replay_schemas="recorded")  # the pinned schema: no refusal
        refusal = (
            f"field r is struct<a:bigint> in version 1 (id {nested}), the raw table's column, and "
            f"struct<a:bigint,b:bigint> in version 2 (id {grown}), this run's reader schema"
        )
        with pytest.raises(PayloadSchemaError, match=re.escape(refusal)):
            check_schemas(pipeline.spec, ["events"], replay_schemas="latest")
        with pytest.raises(PayloadSchemaError, match=re.escape(refusal)):
            replaying.run_schemas(replace(first.plan, kind="replay", schemas="latest"))
        with pytest.raises(PayloadSchemaError, match=re.escape(refusal)):
            check_schemas(pipeline.spec, ["events"])  # a load reads the latest too


def test_a_replay_with_the_cli_switch_plans_the_latest_schemas() -> None:
    target = rewind_target(None, None, "run-1", "latest")
    assert target.schemas == "latest"
    assert rewind_target("2026-11-28T09:00:00Z", None, None).schemas == "recorded"
    with pytest.raises(ReplayError, match="--schema 'newest'"):
        rewind_target(None, None, "run-1", "newest")


def test_a_key_schema_whose_decoded_column_changes_type_is_refused() -> None:
    key_v1 = {"type": "record", "name": "K", "fields": [{"name": "k", "type": "int"}]}
    key_v2 = {"type": "record", "name": "K", "fields": [{"name": "k", "type": "long"}]}
    with LocalRegistry() as sr:
        registry = Registry(urls=(sr.url,))
        decoder = Decoder(format="avro", registry=registry, key_decoder=KeyDecoder(format="avro"))
        sr.register("events-value", NARROW)
        key = sr.register("events-key", key_v1)
        first = resolve_schemas(decoder, ["events"])
        assert first is not None
        recorded = first.readers()
        assert recorded["keys"] == {"events": {"subject": "events-key", "version": 1, "id": key}}
        assert resolve_schemas(decoder, ["events"], recorded=recorded) is not None  # the same schemas
        widened = sr.register("events-key", key_v2)
        with pytest.raises(PayloadSchemaError) as refused:
            resolve_schemas(decoder, ["events"], recorded=recorded)
        assert str(refused.value).startswith(
            f"subject events-key: the key field k differs between subject events-key version 1 (id {key}), the raw "
            f"table's key_decoded column, and subject events-key version 2 (id {widened}), this run's key reader schema"
        )
