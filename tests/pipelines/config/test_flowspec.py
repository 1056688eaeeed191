"""The flow part of a pipeline file: transforms, outputs, expectations, schedule; and `pipelines lint`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pipelines.config.pipeline import load_spec
from pipelines.config.steps import Expectation, Transform, topological_order
from tests.pipelines.config.test_spec import base, error, load, put

REPO = Path(__file__).resolve().parents[3]
PIPELINES = str(Path(sys.executable).with_name("pipelines"))


def flow(**overrides: Any) -> dict[str, Any]:
    """``base()`` with two steps and one output."""
    data = base()
    data["transforms"] = [
        {"name": "clean", "sql": "SELECT * FROM raw WHERE user_id > 0", "depends_on": ["raw"]},
        {
            "name": "hourly",
            "sql": "SELECT dt, hour, count(*) AS n FROM clean GROUP BY dt, hour",
            "depends_on": ["clean"],
        },
    ]
    data["outputs"] = [
        {
            "name": "hourly_counts",
            "source": "hourly",
            "path": "/data/warehouse/hourly_counts",
            "expectations": [{"expect": "between", "column": "n", "min": 1}],
        }
    ]
    data.update(overrides)
    return data


def test_a_full_flow_loads_into_typed_frozen_config(tmp_path: Path) -> None:
    spec = load(tmp_path, flow())
    assert [t.name for t in spec.transforms] == ["clean", "hourly"]
    (output,) = spec.outputs
    assert output.partition_by == ("dt", "hour")
    assert output.expectations == (Expectation("between", column="n", min=1.0),)
    assert output.on_failure == "fail"
    assert spec.schedule.cron == "@hourly" and spec.schedule.retries == 2
    with pytest.raises(AttributeError):
        output.name = "x"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (
            "transforms",
            [{"name": "a", "sql": "SELECT 1", "depends_on": ["nope"]}],
            "transforms[0].depends_on[0]: unknown step 'nope'",
        ),
        ("transforms", [{"name": "a", "sql": " "}], "transforms[0].sql: must not be empty"),
        ("transforms", [{"name": "raw", "sql": "SELECT 1"}], "transforms[0].name: 'raw'"),
        (
            "transforms",
            [{"name": "a", "sql": "SELECT 1"}, {"name": "a", "sql": "SELECT 2"}],
            "transforms[1].name: 'a' is already step 0",
        ),
        (
            "transforms",
            [{"name": "a", "sql": "SELECT 1", "depnds_on": []}],
            "transforms[0].depnds_on: unknown key (did you mean 'depends_on'?",
        ),
        ("outputs", [{"name": "o", "source": "missing", "path": "/w"}], "outputs[0].source: unknown step 'missing'"),
        (
            "outputs",
            [{"name": "o", "source": "hourly", "path": "/w", "partition_by": ["hour"]}],
            "outputs[0].partition_by",
        ),
        (
            "outputs",
            [{"name": "o", "source": "hourly", "path": "/w", "from": "hourly"}],
            "outputs[0].from: unknown key",
        ),
        (
            "outputs",
            [{"name": "o", "source": "hourly", "path": "/w", "on_failure": "ignore"}],
            "outputs[0].on_failure: must be one of fail, quarantine",
        ),
        (
            "outputs",
            [{"name": "o", "source": "hourly", "path": "/w", "max_quarantine_share": 2}],
            "outputs[0].max_quarantine_share: must be between 0 and 1",
        ),
        (
            "outputs",
            [{"name": "o", "source": "hourly", "path": "/w"}, {"name": "o", "source": "clean", "path": "/v"}],
            "outputs[1].name: 'o' is already an output",
        ),
        ("schedule", {"start_date": "yesterday"}, "schedule.start_date: 'yesterday' is not a date"),
        ("schedule", {"cron": "every hour"}, "schedule.cron: 'every hour' is neither a preset"),
        ("schedule", {"retries": -1}, "schedule.retries: must not be negative"),
        ("schedule", {"retries": "3"}, "schedule.retries: expected an integer, got '3'"),
    ],
)
def test_flow_errors_name_the_key_path(tmp_path: Path, path: str, value: Any, expected: str) -> None:
    message = error(tmp_path, put(flow(), path, value))
    assert message.startswith(expected), message


@pytest.mark.parametrize(
    ("expectation", "expected"),
    [
        ({"expect": "not_null"}, "column: not_null needs a column"),
        ({"expect": "between", "column": "n"}, "min: between needs min, max or both"),
        ({"expect": "between", "column": "n", "min": 5, "max": 1}, "min: min 5.0 is greater than max 1.0"),
        ({"expect": "in_set", "column": "n"}, "values: in_set needs values"),
        ({"expect": "unique", "column": "n"}, "column: unique takes no column (use columns)"),
        ({"expect": "regex", "column": "n", "pattern": "("}, "pattern: not a valid regular expression"),
        ({"expect": "row_count", "values": [1]}, "min: row_count needs min, max or both"),
        ({"expect": "not_null", "column": "n", "min": 1}, "min: not_null takes no min or max"),
        ({"expect": "sometimes", "column": "n"}, "expect: must be one of not_null, between"),
    ],
)
def test_expectation_errors(tmp_path: Path, expectation: dict[str, Any], expected: str) -> None:
    data = flow()
    data["outputs"][0]["expectations"] = [expectation]
    message = error(tmp_path, data)
    assert message.startswith(f"outputs[0].expectations[0].{expected}"), message


def test_in_set_values_keep_their_types(tmp_path: Path) -> None:
    data = flow()
    data["outputs"][0]["expectations"] = [{"expect": "in_set", "column": "n", "values": [1, "a", 2.5, True]}]
    (expectation,) = load(tmp_path, data).outputs[0].expectations
    assert expectation.values == (1, "a", 2.5, True)
    assert [type(v) for v in expectation.values] == [int, str, float, bool]


def test_cycles_are_named_in_order(tmp_path: Path) -> None:
    steps = [
        {"name": "a", "sql": "SELECT * FROM c", "depends_on": ["c"]},
        {"name": "b", "sql": "SELECT * FROM a", "depends_on": ["a"]},
        {"name": "c", "sql": "SELECT * FROM b", "depends_on": ["b", "raw"]},
    ]
    message = error(tmp_path, put(flow(outputs=[]), "transforms", steps))
    assert message.startswith("transforms[0].depends_on: cycle: a -> c -> b -> a"), message
    self_loop = [{"name": "a", "sql": "SELECT 1", "depends_on": ["a"]}]
    assert "cycle: a -> a" in error(tmp_path, put(flow(outputs=[]), "transforms", self_loop))


def test_topological_order_puts_dependencies_first_and_keeps_file_order_otherwise() -> None:
    steps = (
        Transform("report", "SELECT 1", ("daily", "hourly")),
        Transform("hourly", "SELECT 1", ("clean",)),
        Transform("clean", "SELECT 1", ("raw",)),
        Transform("daily", "SELECT 1", ("clean",)),
        Transform("other", "SELECT 1"),
    )
    assert [t.name for t in topological_order(steps)] == ["clean", "daily", "hourly", "report", "other"]


def test_expectation_descriptions() -> None:
    assert Expectation("between", column="views", min=1.0).describe() == "between(views, 1..)"
    assert Expectation("row_count", min=1.0, max=1000.0).describe() == "row_count(1..1000)"
    assert Expectation("unique", columns=("dt", "page")).describe() == "unique(dt, page)"
    assert Expectation("regex", column="page", pattern="^/").describe() == "regex(page ~ ^/)"


def test_a_literal_secret_never_appears_in_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WAREHOUSE_TOKEN", "s3cr3t-value")
    data = flow()
    data["outputs"][0]["path"] = "/w/${env:WAREHOUSE_TOKEN}"
    data["outputs"][0]["on_failure"] = "s3cr3t-value"
    message = error(tmp_path, data)
    assert "s3cr3t-value" not in message
    assert "${env:WAREHOUSE_TOKEN}" in message


# ---------------------------------------------------------------------------------------------
# pipelines lint


@pytest.mark.integration
def test_lint_passes_the_examples_and_names_every_broken_file(tmp_path: Path) -> None:
    examples = sorted(str(p) for p in (REPO / "conf" / "pipelines").glob("*.yaml"))
    assert len(examples) >= 3
    ok = subprocess.run([PIPELINES, "lint", *examples], capture_output=True, text=True, check=False)
    assert ok.returncode == 0, ok.stderr
    assert all(f"{e}: ok" in ok.stdout for e in examples)
    for example in examples:  # the examples are what the tests and the demo use: they must load
        load_spec(example)

    broken = tmp_path / "broken.yaml"
    broken.write_text(
        (REPO / "conf" / "pipelines" / "page_views.yaml")
        .read_text()
        .replace("depends_on: [raw]", "depends_on: [rwa]", 1)
    )
    dup = tmp_path / "dup.yaml"
    dup.write_text("name: a\nname: b\n")
    result = subprocess.run(
        [PIPELINES, "lint", examples[0], str(broken), str(dup)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 2
    assert f"{broken}:transforms[0].depends_on[0]: unknown step 'rwa'" in result.stderr
    assert f"{dup}:line 2: duplicate key 'name'" in result.stderr
    assert "2 of 3 pipeline files invalid" in result.stderr
    assert f"{examples[0]}: ok" in result.stdout


# ---------------------------------------------------------------------------------------------
# the generated reference


def test_the_spec_reference_is_generated_from_the_classes_and_up_to_date() -> None:
    from pipelines.config.reference import reference

    text = reference()
    committed = (REPO / "docs" / "spec-reference.md").read_text()
    assert committed == text, (
        "docs/spec-reference.md is stale: python -m pipelines.config.reference > docs/spec-reference.md"
    )
    undocumented = [line for line in text.splitlines() if line.startswith("| `") and line.endswith("|  |")]
    assert undocumented == [], "every key needs a docstring under its field"
    for section in ("`source`", "`outputs[]`", "`outputs[].expectations[]`", "`transforms[]`", "`schedule`", "`raw`"):
        assert f"## {section}" in text


def test_a_password_written_in_a_url_is_refused_and_not_echoed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = put(base(), "raw.webhdfs_url", "http://etl:hunter2@namenode:9870")
    message = error(tmp_path, data)
    assert message.startswith("raw.webhdfs_url: a password in a URL must be an ${env:NAME} reference"), message
    assert "hunter2" not in message
    monkeypatch.setenv("NN_PASSWORD", "hunter2")
    spec = load(tmp_path, put(base(), "raw.webhdfs_url", "http://etl:${env:NN_PASSWORD}@namenode:9870"))
    assert spec.raw.webhdfs_url == "http://etl:hunter2@namenode:9870"
    assert load(tmp_path, put(base(), "raw.webhdfs_url", "http://namenode:9870")).raw.webhdfs_url


@pytest.mark.parametrize(
    ("webhdfs_url", "named"),
    [
        ("namenode:9870", "'namenode:9870'"),
        ("http://nn1:9870;nn2:9870", "'nn2:9870'"),
        ("hdfs://namenode:8020", "'hdfs://namenode:8020'"),
        ("http://namenode:98070", "'http://namenode:98070'"),
        ("etl:${env:NN_PASSWORD}@namenode:9870", "'namenode:9870'"),
    ],
)
def test_a_webhdfs_address_that_is_not_http_is_refused_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, webhdfs_url: str, named: str
) -> None:
    monkeypatch.setenv("NN_PASSWORD", "hunter2")
    message = error(tmp_path, put(base(), "raw.webhdfs_url", webhdfs_url))
    assert message.startswith(f"raw.webhdfs_url: {named} is not an http:// or https:// address"), message
    assert "hunter2" not in message
    spec = load(tmp_path, put(base(), "raw.webhdfs_url", "http://nn1:9870;https://nn2:9871"))
    assert spec.raw.webhdfs_url == "http://nn1:9870;https://nn2:9871"


@pytest.mark.parametrize(
    ("paths", "expected"),
    [
        (["/data/raw/events/warehouse/t"], "outputs[0].path: /data/raw/events/warehouse/t overlaps the raw layer"),
        (["file:///data/raw/events"], "outputs[0].path: file:///data/raw/events overlaps the raw layer"),
        (["/data/w/a", "/data/w/a/b"], "outputs[1].path: /data/w/a/b overlaps outputs[0].path"),
        (["/data/w/a/", "/data/w/a"], "outputs[1].path: /data/w/a overlaps outputs[0].path"),
    ],
)
def test_outputs_may_not_overlap_the_raw_layer_or_each_other(tmp_path: Path, paths: list[str], expected: str) -> None:
    data = flow()
    data["outputs"] = [{"name": f"o{i}", "source": "hourly", "path": p} for i, p in enumerate(paths)]
    message = error(tmp_path, data)
    assert message.startswith(expected), message
    data["outputs"] = [
        {"name": "o0", "source": "hourly", "path": "/data/w/a"},
        {"name": "o1", "source": "hourly", "path": "/data/w/ab"},
    ]
    assert len(load(tmp_path, data).outputs) == 2  # a shared prefix of names is not an overlap


def test_only_publish_runs_without_spark_and_only_where_the_tools_reach_every_path(tmp_path: Path) -> None:
    from pipelines.app.airflow import stage_command
    from pipelines.app.runner import STAGES, needs_spark

    # registering tables reaches the metastore through Spark: only a pipeline without them can
    assert needs_spark(load(tmp_path, flow()), "publish")
    local = load(tmp_path, put(flow(), "tables", {"metastore": "none"}))
    assert [stage for stage in STAGES if not needs_spark(local, stage)] == ["publish"]
    # so the Airflow task of such a pipeline's publish runs `pipelines run --stage publish`, no spark-submit
    publish = stage_command(local, tmp_path / "pipeline.yaml", "publish")
    assert "pipelines.app.cli run" in publish and "--stage publish" in publish and "spark-submit" not in publish
    assert "spark-submit" in stage_command(load(tmp_path, flow()), tmp_path / "pipeline.yaml", "publish")
    on_hdfs = put(put(put(flow(), "tables", {"metastore": "none"}), "raw.path", "hdfs://nn:8020/raw"), "outputs", [
        {**flow()["outputs"][0], "path": "hdfs://nn:8020/warehouse/hourly_counts"}
    ])  # fmt: skip
    assert needs_spark(load(tmp_path, on_hdfs), "publish")  # Spark's Hadoop client is the only way there
    with_webhdfs = put(on_hdfs, "raw.webhdfs_url", "http://nn:9870")
    assert not needs_spark(load(tmp_path, with_webhdfs), "publish")
    # an output on another cluster than the raw layer's: its WebHDFS address is unknown
    elsewhere = put(with_webhdfs, "outputs", [{**flow()["outputs"][0], "path": "hdfs://other:8020/w/hourly_counts"}])
    assert needs_spark(load(tmp_path, elsewhere), "publish")
