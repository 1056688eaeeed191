"""A mirrored output in the pipeline file (``mode: mirror``): read into typed, frozen config, its
mistakes named by key path; and refused by a run (not built yet) before anything loads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pipelines.app import runner
from pipelines.app.runner import EXIT_FAILED
from pipelines.config.steps import DEFAULT_BUCKETS, MIRROR_NOT_BUILT, unbuilt
from pipelines.errors import FlowError
from pipelines.flow.run import FlowRun
from tests.pipelines.config.test_spec import base, error, load, write

pytestmark = pytest.mark.unit


def mirrored(**output: Any) -> dict[str, Any]:
    data = base()
    data["transforms"] = [{"name": "changes", "sql": "SELECT * FROM raw", "depends_on": ["raw"]}]
    data["outputs"] = [{"name": "orders", "source": "changes", "path": "/w/orders", "mode": "mirror", **output}]
    return data


def test_a_mirror_loads_with_its_key_buckets_and_history(tmp_path: Path) -> None:
    (output,) = load(tmp_path, mirrored(key=["shop", "id"], buckets=64, history="orders_history")).outputs
    assert (output.mode, output.key, output.bucket_count, output.history) == (
        "mirror",
        ("shop", "id"),
        64,
        "orders_history",
    )
    (default,) = load(tmp_path, mirrored(key=["id"])).outputs
    assert default.buckets is None and default.bucket_count == DEFAULT_BUCKETS == 16
    (plain,) = load(tmp_path, mirrored(mode="partitions")).outputs
    assert plain.mode == "partitions" and unbuilt((plain,)) is None


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ({}, "outputs[0].key: a mirror needs the source table's key columns"),
        ({"key": ["id", "id"]}, "outputs[0].key[1]: 'id' is already key[0]"),
        ({"key": ["1d"]}, "outputs[0].key[0]: '1d': letters, digits"),
        ({"key": ["id"], "buckets": 0}, "outputs[0].buckets: must be between 1 and 4096, not 0"),
        ({"key": ["id"], "partition_by": ["dt"]}, "outputs[0].partition_by: a mirror is split into buckets"),
        ({"key": ["id"], "on_failure": "quarantine"}, "outputs[0].on_failure: a mirror cannot set a change aside"),
        ({"key": ["id"], "history": "Orders"}, "outputs[0].history: 'Orders': lower-case letters"),
        ({"key": ["id"], "history": "orders"}, "outputs[0].history: 'orders' is the mirror's own table"),
        ({"key": ["id"], "mode": "merge"}, "outputs[0].mode: must be one of partitions, mirror"),
        ({"mode": "partitions", "key": ["id"]}, "outputs[0].key: only a mirror (mode: mirror) has key"),
        ({"mode": "partitions", "buckets": 4}, "outputs[0].buckets: only a mirror (mode: mirror) has buckets"),
        ({"mode": "partitions", "history": "h"}, "outputs[0].history: only a mirror (mode: mirror) has history"),
    ],
)
def test_mirror_mistakes_name_the_key_path(tmp_path: Path, output: dict[str, Any], expected: str) -> None:
    message = error(tmp_path, mirrored(**output))
    assert message.startswith(expected), message


def test_a_history_table_named_like_another_table_is_refused(tmp_path: Path) -> None:
    data = mirrored(key=["id"], history="events_raw_raw")
    data["tables"] = {"metastore": "embedded"}
    message = error(tmp_path, data)
    assert message.startswith("outputs[0].history: 'events_raw_raw' is already the table of tables.raw"), message


def test_a_run_refuses_a_mirror_before_anything_loads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, mirrored(key=["id"]))
    spec = load(tmp_path, mirrored(key=["id"]))

    def no_session() -> Any:
        raise AssertionError("a refused run starts no Spark")

    assert runner.submit(spec, str(path), "all", no_session) == EXIT_FAILED
    assert f"error: outputs[0] (orders): {MIRROR_NOT_BUILT}" in capsys.readouterr().err
    with pytest.raises(FlowError, match="mode: mirror is not built yet"):
        FlowRun(spec, None)
