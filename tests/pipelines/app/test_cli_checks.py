"""What the ``pipelines`` command checks before it starts Spark, and how it prints, in-process.

Every test here is in the unit tier, which refuses to start a process: a command that started
Spark's JVM (or anything else) would fail the test, so "before Spark" is proven, not assumed. The
broker is kafkalog's own, in this process. The output is captured, so it is not a terminal: the
tables and lines must come out whole at any length.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from kafkalog.server import Broker, BrokerConfig
from pipelines.app import runner
from pipelines.app.cli import main, spark_submit_main
from pipelines.config.pipeline import load_spec
from pipelines.errors import PipelineError
from pipelines.ingest.run import PipelineRun
from pipelines.storage import LocalStorage
from tests.pipelines.harness import write_spec
from tests.support.in_memory import InProcessStager, MemoryCluster, events
from tests.support.ports import free_port

pytestmark = pytest.mark.unit

BAD_SQL = [
    {"name": "clean", "depends_on": ["raw"], "sql": "SELECT user_id, dt, hour\nFORM raw\n"},
    {"name": "per_hour", "depends_on": ["raw"], "sql": "SELECT dt, hour, count(*) AS n FROM claen GROUP BY dt, hour"},
]
OUTPUTS = [{"name": "per_hour", "source": "per_hour", "path": "OUT"}]


def invoke(*args: str, command: Any = main) -> Result:
    name = "pipelines" if command is main else "load_warehouse.py"
    return CliRunner().invoke(command, list(args), prog_name=name, catch_exceptions=False)


def pipeline(tmp_path: Path, bootstrap: str = "127.0.0.1:1", **overrides: Any) -> Path:
    if "outputs" in overrides:
        overrides["outputs"] = [{**o, "path": str(tmp_path / o["path"])} for o in overrides["outputs"]]
    return write_spec(tmp_path, bootstrap, tmp_path / "raw", **overrides)


@pytest.fixture
def in_process_broker(tmp_path: Path) -> Iterator[Broker]:
    """A kafkalog broker in this process (threads, no process) that creates no topic by itself."""
    config = BrokerConfig(
        port=0, data_dirs=(tmp_path / "broker",), default_partitions=2, metrics_port=0, auto_create_topics=False
    )
    with Broker(config) as running:
        yield running


# ---------------------------------------------------------------------------------------- lint


def test_lint_names_file_key_line_column_and_token_and_exits_2(tmp_path: Path) -> None:
    path = pipeline(tmp_path, transforms=BAD_SQL, outputs=OUTPUTS)
    result = invoke("lint", str(path))
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines[0].startswith(f"{path}:transforms[0].sql: step clean: syntax error at ")
    assert lines[0].endswith("line 2, column 6 of the SQL: 'raw' is not expected here")
    assert lines[1].startswith(f"{path}:transforms[1].sql: step per_hour: reads claen (line ")
    assert lines[1].endswith(
        "which the flow does not provide: it can read raw; did you mean step clean (then add it to depends_on)?"
    )
    assert lines[2:] == ["1 of 1 pipeline file invalid"]


def test_lint_passes_a_file_with_warnings_and_counts_them(tmp_path: Path) -> None:
    per_hour = "SELECT dt, hour, count(*) AS n FROM raw GROUP BY dt, hour"
    joined = "SELECT r.*, d.name FROM raw r JOIN dims.users d USING (user_id)"
    steps = [
        {"name": "per_hour", "depends_on": ["raw"], "sql": per_hour},
        {"name": "joined", "depends_on": ["raw"], "sql": joined},
    ]
    path = pipeline(tmp_path, transforms=steps, outputs=OUTPUTS)
    result = invoke("lint", str(path))
    assert result.exit_code == 0, result.output
    assert result.stdout == f"{path}: ok (events_raw: 2 transforms, 1 output; 1 warning)\n"
    assert result.stderr.startswith(f"{path}:transforms[1].sql: warning: step joined: reads dims.users (")


def test_the_examples_lint_clean() -> None:
    repo = Path(__file__).resolve().parents[3]
    paths = sorted(str(p) for p in (repo / "conf" / "pipelines").glob("*.yaml"))
    result = invoke("lint", *paths)
    assert (result.exit_code, result.stderr) == (0, "")
    assert len(result.stdout.splitlines()) == len(paths)


# ---------------------------------------------------------------------------------------- before Spark


@pytest.mark.parametrize("entry", ["pipelines run", "spark-submit job"])
def test_a_run_with_bad_sql_exits_2_before_loading_anything(tmp_path: Path, entry: str) -> None:
    path = pipeline(tmp_path, transforms=BAD_SQL, outputs=OUTPUTS)
    started = time.monotonic()
    if entry == "pipelines run":
        result = invoke("run", str(path))
    else:
        result = invoke("--pipeline", str(path), command=spark_submit_main)
    assert result.exit_code == 2, result.output
    assert time.monotonic() - started < 5  # no JVM: the unit tier refuses to start one anyway
    errors = result.stderr.splitlines()
    assert [e.split(": step ")[0] for e in errors] == [
        f"error: {path}:transforms[0].sql",
        f"error: {path}:transforms[1].sql",
    ]
    assert not (tmp_path / "raw").exists()  # no plan, no state, no lease: nothing was loaded


def test_stages_that_run_no_sql_are_not_held_up_by_it(tmp_path: Path) -> None:
    """Validation and publish do not run the SQL: a bad step does not stop them (here they find no
    load to work on, from the state files alone)."""
    path = pipeline(tmp_path, transforms=BAD_SQL, outputs=OUTPUTS)
    result = invoke("run", str(path), "--stage", "publish")
    assert result.exit_code == 1
    assert result.stderr.startswith("error: pipeline events_raw: no load committed yet")


def never_started() -> tuple[Any, Path | None]:
    raise AssertionError("a Spark session was asked for before the checks that need none had passed")


def test_submit_asks_for_a_session_only_after_every_check_that_needs_none(tmp_path: Path) -> None:
    """runner.submit, the one pre-flight of every entry point: bad SQL is exit 2, a finished run id
    is exit 0, an unreachable source is its error, each without making the session."""
    bad_sql = pipeline(tmp_path, transforms=BAD_SQL, outputs=OUTPUTS)
    assert runner.submit(load_spec(bad_sql), str(bad_sql), "all", never_started) == runner.EXIT_BAD_SPEC
    unreachable = pipeline(tmp_path, f"127.0.0.1:{free_port()}")
    with pytest.raises(PipelineError, match="cannot be reached"):
        runner.submit(load_spec(unreachable), str(unreachable), "load", never_started, run_id="r1")
    assert not (tmp_path / "raw").exists()


def test_rewind_reads_conf_only_when_it_starts_spark(tmp_path: Path) -> None:
    """--abandon and --dry-run start no session, so a --conf they never use does not stop them."""
    path = pipeline(tmp_path)
    result = invoke("rewind", "--abandon", "--conf", "not-key-value", str(path))
    assert "--conf" not in result.stderr, result.stderr
    assert result.exit_code != 2, result.output


def test_a_source_that_does_not_answer_fails_in_a_second_naming_it(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there: a stopped broker refuses the connection
    path = pipeline(tmp_path, f"127.0.0.1:{port}")
    started = time.monotonic()
    result = invoke("run", str(path))
    assert time.monotonic() - started < 3
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: the source 127.0.0.1:{port} cannot be reached: no broker is reachable: cannot connect to "
        f"127.0.0.1:{port}: [Errno 111] Connection refused (checked before Spark started: nothing was loaded)\n"
    )
    assert not (tmp_path / "raw").exists()


def test_a_missing_topic_is_said_before_spark_and_a_stage_without_the_broker_is_not_held_up(
    tmp_path: Path, in_process_broker: Broker
) -> None:
    bootstrap = f"127.0.0.1:{in_process_broker.port}"
    path = pipeline(tmp_path, bootstrap)
    result = invoke("run", str(path), "--stage", "load")
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: topic 'events' does not exist on {bootstrap} (it has: none; checked before Spark started: "
        "nothing was loaded)\n"
    )
    # a run id committed before is a no-op from the state files: the broker (down here) is not asked
    down = pipeline(tmp_path, "127.0.0.1:1")
    committed_run(down, "first")
    again = invoke("run", str(down), "--run-id", "first")
    assert (again.exit_code, again.stderr) == (0, "nothing to do: run first finished before\n")


# ---------------------------------------------------------------------------------------- output


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("run",), "error: Missing argument 'PIPELINE'."),
        (("status", "no-such.yaml"), "error: Invalid value for 'PIPELINE': File 'no-such.yaml' does not exist."),
        (("offsets", "--frobnicate"), "error: No such option '--frobnicate'."),
    ],
)
def test_click_s_own_errors_end_in_one_error_line_after_the_usage(args: tuple[str, ...], said: str) -> None:
    result = invoke(*args)
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert lines[0].startswith("Usage: pipelines ")
    assert lines[-1] == said
    assert not any(line.startswith("Error") for line in lines)


def test_the_spark_submit_job_s_usage_errors_too(tmp_path: Path) -> None:
    path = pipeline(tmp_path)
    result = invoke("--pipeline", str(path), "--dry-run", command=spark_submit_main)
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == (
        "error: --dry-run goes with a rewind target (--to-time, --to-offsets or --to-run)"
    )


def committed_run(path: Path, run_id: str) -> None:
    """Commit one load of ``path``'s pipeline as ``run_id``, in this process (an in-memory cluster
    and the tasks' own code: tests.support.in_memory)."""
    spec = load_spec(path)
    cluster = MemoryCluster()
    cluster.create("events", 1)
    cluster.append("events", 0, events(5), timestamp_ms=1_795_000_000_000)
    job = PipelineRun(
        spec, None, storage=LocalStorage(), stager=InProcessStager(spec, cluster), consumer=cluster.consumer
    )
    assert job.run(run_id=run_id).status == "committed"


def test_piped_tables_and_lines_keep_long_run_ids_and_paths_whole(tmp_path: Path) -> None:
    deep = tmp_path.joinpath(*(["a-directory-with-a-long-name"] * 6))
    deep.mkdir(parents=True)
    path = write_spec(deep, "127.0.0.1:1", deep / "raw")
    status = invoke("status", str(path))
    assert status.exit_code == 0
    assert f"no run committed yet ({deep / 'raw'})\n" in status.stdout
    run_id = "airflow-scheduled__2026-11-26T18:00:00+00:00-retry-3-of-a-run-with-a-long-id"
    committed_run(path, run_id)
    for args in (("offsets", str(path), "--history"), ("status", str(path))):
        shown = invoke(*args)
        assert shown.exit_code == 0, shown.output
        assert run_id in shown.stdout, shown.stdout
        assert "…" not in shown.stdout
        assert max(len(line) for line in shown.stdout.splitlines()) > 120  # wider than rich's 80 off a terminal
