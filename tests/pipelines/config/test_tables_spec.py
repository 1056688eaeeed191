"""Tables by name, the parts that need no metastore: the ``tables`` section of a pipeline file
(defaults and refusals naming their key), which metastore a session is started for, and what the
metastore should hold, computed from committed manifests (the partitions of a generation, and the
raw view's condition that shows whole runs only)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from pipelines.catalog.connection import Metastore, embedded_directory, metastore_for, session_settings
from pipelines.catalog.desired import TableSpec, absolute_location, physical_name, raw_table, visible_rows
from pipelines.catalog.metastore import _read_listing, _split_values
from pipelines.config.pipeline import PipelineSpec, load_spec
from pipelines.errors import SpecError
from pipelines.ledger.records import Manifest, OutputFile, Plan

pytestmark = pytest.mark.unit


def spec_data(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "web.Clicks-eu",
        "source": {"bootstrap": "localhost:9092"},
        "topics": ["clicks"],
        "decoder": {"format": "json", "schema": {"user_id": "long", "ts": "string"}},
        "raw": {"path": "/data/raw/clicks"},
        "transforms": [{"name": "counts", "depends_on": ["raw"], "sql": "SELECT dt, hour, count(*) AS n FROM raw"}],
        "outputs": [{"name": "Hourly", "source": "counts", "path": "/data/warehouse/hourly"}],
    }
    data.update(changes)
    return data


def load(tmp_path: Path, data: dict[str, Any]) -> PipelineSpec:
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_spec(path)


def refusal(tmp_path: Path, data: dict[str, Any]) -> str:
    with pytest.raises(SpecError) as info:
        load(tmp_path, data)
    return str(info.value).split(":", 1)[1].strip()


def test_defaults_name_every_table_after_the_pipeline_and_its_outputs(tmp_path: Path) -> None:
    spec = load(tmp_path, spec_data())
    assert (spec.tables.metastore, spec.tables.database) == ("auto", "warehouse")
    assert spec.raw_table == "web_clicks_eu_raw"  # lower case, '.' and '-' as '_'
    assert spec.outputs[0].table_name == "hourly"


def test_names_and_a_metastore_service_can_be_given(tmp_path: Path) -> None:
    data = spec_data(
        tables={"metastore": "thrift://hms-1:9083, thrift://hms-2:9083", "database": "web", "raw": "clicks"}
    )
    data["outputs"][0]["table"] = "clicks_hourly"
    spec = load(tmp_path, data)
    assert spec.tables.thrift_uris == "thrift://hms-1:9083,thrift://hms-2:9083"
    assert (spec.raw_table, spec.outputs[0].table_name) == ("clicks", "clicks_hourly")


@pytest.mark.parametrize(
    ("tables", "key", "words"),
    [
        ({"metastore": "hive://x:9083"}, "tables.metastore", "neither auto, embedded, none nor a thrift://host:port"),
        ({"metastore": "thrift://a:1,http://b:2"}, "tables.metastore[1]", "'http://b:2'"),
        ({"metastore": "thrift://nohost"}, "tables.metastore", "thrift://host:port"),
        ({"database": "Web"}, "tables.database", "lower-case letters"),
        ({"raw": "1clicks"}, "tables.raw", "not starting with a digit"),
        ({"raw": "clicks__gen2"}, "tables.raw", "ends like the tables behind each name"),
        ({"raw": "hourly"}, "outputs[0].table", "'hourly' is already the table of tables.raw"),
    ],
)
def test_bad_tables_are_refused_naming_their_key(tmp_path: Path, tables: dict[str, str], key: str, words: str) -> None:
    message = refusal(tmp_path, spec_data(tables=tables))
    assert message.startswith(f"{key}:"), message
    assert words in message


def test_the_embedded_metastore_needs_a_local_raw_layer(tmp_path: Path) -> None:
    data = spec_data(tables={"metastore": "embedded"}, raw={"path": "hdfs://nn:8020/raw/clicks"})
    data["outputs"][0]["path"] = "hdfs://nn:8020/warehouse/hourly"
    message = refusal(tmp_path, data)
    assert message.startswith("tables.metastore:") and "local raw layer" in message
    data["tables"] = {"metastore": "none"}
    assert load(tmp_path, data).tables.metastore == "none"  # and without tables, any name goes


def test_which_metastore_a_session_is_started_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SPARK_CONF_DIR", "HIVE_CONF_DIR", "HADOOP_CONF_DIR", "SPARK_HOME"):
        monkeypatch.delenv(name, raising=False)
    local = load(tmp_path, spec_data())
    embedded = metastore_for(local, {})
    assert embedded == Metastore("embedded", str(Path("/data/raw/clicks/_pipeline/metastore")))
    assert embedded_directory(local) == embedded.address
    settings = session_settings(embedded)
    assert settings["spark.sql.catalogImplementation"] == "hive"
    assert settings["spark.hadoop.javax.jdo.option.ConnectionURL"] == (
        "jdbc:derby:;databaseName=/data/raw/clicks/_pipeline/metastore/db"
    )
    # Spark configured with a metastore of its own: auto uses it
    assert metastore_for(local, {"spark.hadoop.hive.metastore.uris": "thrift://hms:9083"}) == Metastore("spark")
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "hive-site.xml").write_text("<configuration/>")
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "conf"))
    assert metastore_for(local, {}) == Metastore("spark")
    monkeypatch.delenv("SPARK_CONF_DIR")
    # a remote raw layer and nothing configured: no tables (each run says so)
    data = spec_data(raw={"path": "hdfs://nn:8020/raw/clicks"})
    data["outputs"][0]["path"] = "hdfs://nn:8020/warehouse/hourly"
    assert metastore_for(load(tmp_path, data), {}) is None
    named = load(tmp_path, {**data, "tables": {"metastore": "thrift://hms:9083"}})
    assert session_settings(metastore_for(named, {}))["spark.hadoop.hive.metastore.uris"] == "thrift://hms:9083"
    assert metastore_for(load(tmp_path, spec_data(tables={"metastore": "none"})), {}) is None


def test_locations_are_absolute_whatever_directory_a_reader_runs_in(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir("/tmp")
    assert absolute_location(".cache/demo/raw") == "file:/tmp/.cache/demo/raw"
    assert absolute_location("file:///data/raw") == "file:///data/raw"
    assert absolute_location("hdfs://nn:8020/raw") == "hdfs://nn:8020/raw"


def test_the_raw_view_shows_rows_below_each_splits_committed_end() -> None:
    condition = visible_rows({("clicks", 1): 70, ("clicks", 0): 120, ("it's", 0): 5})
    assert condition == (
        "`offset` < CASE `topic` WHEN 'clicks' THEN CASE `partition` WHEN 0 THEN 120 WHEN 1 THEN 70 END "
        "WHEN 'it\\'s' THEN CASE `partition` WHEN 0 THEN 5 END END"
    )
    assert visible_rows({}) == "false"


def _file(path: str, kind: str = "data") -> OutputFile:
    return OutputFile(path, path, kind, "clicks", 0, 10, 100, 0, 9)


def _manifest(seq: int, generation: int, files: list[OutputFile], ends: dict[str, int]) -> Manifest:
    plan = Plan("web", seq, f"run-{seq}", "2026-11-26T00:00:00+00:00", "f", kind="load", generation=generation)
    return Manifest("web", seq, f"run-{seq}", "2026-11-26T00:00:00+00:00", plan, (), tuple(files), "a",
                    offsets=ends, generation=generation)  # fmt: skip


def test_the_raw_table_of_a_generation_has_a_partition_per_directory_its_manifests_list(tmp_path: Path) -> None:
    spec = load(tmp_path, spec_data(tables={"database": "web"}))
    gen = "_generations/000001"
    first = _manifest(4, 1, [_file(f"{gen}/dt=2026-11-01/hour=05/a.parquet"),
                             _file("_quarantine/seq=4/q.parquet", "quarantine")], {"clicks:0": 10})  # fmt: skip
    second = _manifest(5, 1, [_file(f"{gen}/dt=2026-11-01/hour=05/b.parquet"),
                              _file(f"{gen}/dt=2026-11-01/hour=06/c.parquet")], {"clicks:0": 30})  # fmt: skip
    table = raw_table(spec, second, [first, second])
    assert isinstance(table, TableSpec)
    assert (table.name, table.table, table.generation, table.shown_run) == (
        "web_clicks_eu_raw", physical_name("web_clicks_eu_raw", 1), 1, 5,
    )  # fmt: skip
    assert table.location == "file:/data/raw/clicks/_generations/000001"
    assert table.partitions == {
        ("2026-11-01", "05"): "file:/data/raw/clicks/_generations/000001/dt=2026-11-01/hour=05",
        ("2026-11-01", "06"): "file:/data/raw/clicks/_generations/000001/dt=2026-11-01/hour=06",
    }
    assert table.view_sql() == (
        "SELECT * FROM `web`.`web_clicks_eu_raw__gen1` WHERE `offset` < CASE `topic` WHEN 'clicks' THEN "
        "CASE `partition` WHEN 0 THEN 30 END END"
    )
    columns = [name for name, _ in table.columns]
    assert columns[:3] == ["topic", "partition", "offset"] and "user_id" in columns
    assert "dt" not in columns and "hour" not in columns


class Listing:
    """What Spark's partition listing answers: its size and its partitions' text (``toString``)."""

    def __init__(self, partitions: list[tuple[dict[str, str], str]]) -> None:
        self.texts = [
            "CatalogPartition(\n\tPartition Values: ["
            + ", ".join(f"{k}={v}" for k, v in spec.items())
            + f"]\n\tLocation: {location}\n\tSerde Library: x\n\tPartition Statistics: 1786 bytes)"
            for spec, location in partitions
        ]

    def size(self) -> int:
        return len(self.texts)

    def mkString(self, separator: str) -> str:
        return separator.join(self.texts)


def test_a_partition_listing_is_read_from_its_text_in_one_call() -> None:
    listed = Listing([
        ({"dt": "2026-11-25", "hour": "15"}, "file:/w/_generations/000001/dt=2026-11-25/hour=15"),
        ({"dt": "2026-11-26", "hour": "03"}, "file:/w/_staging/run-7/dt=2026-11-26/hour=03"),
    ])  # fmt: skip
    assert _read_listing(listed, ("dt", "hour")) == [
        (("2026-11-25", "15"), "file:/w/_generations/000001/dt=2026-11-25/hour=15"),
        (("2026-11-26", "03"), "file:/w/_staging/run-7/dt=2026-11-26/hour=03"),
    ]
    assert _read_listing(Listing([]), ("dt",)) == []
    # values with commas and equals signs read exactly, as long as they cannot be confused
    odd = Listing([({"page": "/a, b=c", "dt": "x"}, "file:/o")])
    assert _read_listing(odd, ("page", "dt")) == [(("/a, b=c", "x"), "file:/o")]


def test_a_listing_that_does_not_read_as_expected_is_refused_so_it_is_read_one_by_one() -> None:
    # a value holding the next column's marker could split two ways
    assert _read_listing(Listing([({"page": "a, dt=b", "dt": "c"}, "file:/o")]), ("page", "dt")) is None
    assert _read_listing(Listing([({"hour": "1", "dt": "x"}, "file:/o")]), ("dt", "hour")) is None  # other order
    assert _split_values("dt=1", ("dt", "hour")) is None
    other_format = Listing([])
    other_format.texts = ["CatalogPartition(spec=dt=1, location=file:/o)"]
    assert _read_listing(other_format, ("dt",)) is None
