"""``pipelines run|status|offsets|done`` as users run them, and the driver SIGKILLed mid-load (reliability
row S2): then the same load runs again and the oracle finds every offset exactly once. The driver
killed at each commit step is tests/hadoop/test_faults_on_hdfs.py's (a real process, on HDFS) and the
unit tier's (tests/pipelines/ingest/test_exactly_once_core.py, every point, on a local disk)."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from kafkalog.client import SimpleConsumer
from pipelines.config.pipeline import load_spec
from pipelines.ingest.run import PipelineRun
from pipelines.ledger.state import PipelineState
from pipelines.storage import LocalStorage
from tests.pipelines.harness import oracle, produce, run_cli, start_run, write_spec
from tests.support.kafkalog import BrokerProcess

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("writer", ["tasks", "spark"])
def test_a_driver_killed_by_sigkill_while_loading_leaves_nothing_visible(
    tmp_path: Path, broker: BrokerProcess, spark: Any, writer: str
) -> None:
    produce(broker.bootstrap, "events", 3000)
    path = write_spec(
        tmp_path,
        broker.bootstrap,
        tmp_path / "raw",
        source={"bootstrap": broker.bootstrap, "fetch_max_bytes": 1024},
        raw_options={"writer": writer},
    )
    log = tmp_path / "driver.log"
    child = start_run(path, log)
    staging = tmp_path / "raw" / "_pipeline" / "staging"
    deadline = time.monotonic() + 120
    writing = "*/tasks/*/dt=*" if writer == "tasks" else "*/data/_temporary"
    while not list(staging.glob(writing)) and time.monotonic() < deadline:
        assert child.poll() is None, log.read_text()[-3000:]
        time.sleep(0.1)
    os.killpg(child.pid, signal.SIGKILL)  # the driver and its JVM and workers, mid-write
    child.wait(30)
    assert not [p for p in (tmp_path / "raw").rglob("*.parquet") if "_pipeline" not in p.parts]
    result = PipelineRun(load_spec(path), spark).run()
    assert result.status == "committed"
    assert oracle(tmp_path / "raw", broker.bootstrap)["rows"] == 3000


def test_run_status_and_offsets_commands(tmp_path: Path, broker: BrokerProcess) -> None:
    produce(broker.bootstrap, "events", 400, partitions=2)
    path = write_spec(tmp_path, broker.bootstrap, tmp_path / "raw")
    before = run_cli("status", str(path))
    assert before.returncode == 0
    assert "no run committed yet" in before.stdout
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    done = run_cli("run", str(path), "--master", "local[2]", "--run-id", "first", env={"TMPDIR": str(temporary)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "committed as #1" in done.stderr
    # the JVM's output went to a file of its own, deleted after a run that succeeded
    assert (temporary / "pipelines-spark").is_dir() and list((temporary / "pipelines-spark").iterdir()) == []
    assert "Spark's own messages" not in done.stderr
    assert "events-0" in done.stderr  # the summary table names each split
    status = run_cli("status", str(path), "--json")
    assert status.returncode == 0
    last = json.loads(status.stdout)["last_run"]
    assert last["run_id"] == "first"
    assert sum(s["rows"] for s in last["splits"]) == 400
    produce(broker.bootstrap, "events", 50, partitions=2, first=400)
    offsets = run_cli("offsets", str(path), "--lag", "--json")
    assert offsets.returncode == 0, offsets.stderr
    items = json.loads(offsets.stdout)
    assert sum(i["offset"] for i in items) == 400
    assert sum(i["lag"] for i in items) == 50
    # a committed run id: said from the state files, before any Spark starts
    again = run_cli("run", str(path), "--master", "local[2]", "--run-id", "first")
    assert again.returncode == 0
    assert "nothing to do: run first finished before" in again.stderr
    finished = run_cli("done", str(path), "--run-id", "first", "--stage", "load")
    assert (finished.returncode, finished.stderr) == (0, "nothing to do: run first finished before\n")
    unknown = run_cli("done", str(path), "--run-id", "second")
    assert (unknown.returncode, unknown.stderr) == (1, "all of run second may have work to do\n")


@pytest.mark.integration
def test_an_invalid_pipeline_file_exits_2_naming_file_and_key(tmp_path: Path) -> None:
    path = write_spec(tmp_path, "127.0.0.1:1", tmp_path / "raw", limits={"max_messages_per_split": "many"})
    result = run_cli("run", str(path))
    assert result.returncode == 2
    assert f"{path}:limits.max_messages_per_split: expected an integer" in result.stderr


def test_a_jvm_that_cannot_start_is_one_error_quoting_its_output(tmp_path: Path, broker: BrokerProcess) -> None:
    produce(broker.bootstrap, "events", 1)  # the source answers: the run gets as far as starting Spark
    path = write_spec(tmp_path, broker.bootstrap, tmp_path / "raw")
    result = run_cli("run", str(path), env={"TMPDIR": str(tmp_path), "JAVA_HOME": str(tmp_path / "no-jdk")})
    assert result.returncode == 1, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    (jvm_log,) = (tmp_path / "pipelines-spark").glob("pipelines-events_raw-*.log")
    assert "error: Spark's JVM did not start (" in result.stderr and f"its output, in {jvm_log}:" in result.stderr
    assert str(tmp_path / "no-jdk") in result.stderr  # what spark-submit said about the missing Java


def test_a_stopped_broker_fails_the_run_in_a_second_before_spark_starts(tmp_path: Path, broker: BrokerProcess) -> None:
    produce(broker.bootstrap, "events", 10)
    path = write_spec(tmp_path, broker.bootstrap, tmp_path / "raw")
    broker.stop()
    started = time.monotonic()
    result = run_cli("run", str(path), "--master", "local[1]", env={"TMPDIR": str(tmp_path)})
    took = time.monotonic() - started
    assert result.returncode == 1
    assert result.stderr == (
        f"error: the source {broker.bootstrap} cannot be reached: no broker is reachable: cannot connect to "
        f"{broker.bootstrap}: [Errno 111] Connection refused (checked before Spark started: nothing was loaded)\n"
    )
    assert took < 5, took  # the command's own start and one refused connection; Spark's start alone is ~8 s
    assert not (tmp_path / "pipelines-spark").exists()  # no JVM was started: it would have had a log there
    assert not (tmp_path / "raw").exists()


def test_a_bad_record_under_policy_fail_is_one_line_naming_the_log_that_holds_the_stacks(
    tmp_path: Path, broker: BrokerProcess
) -> None:
    produce(broker.bootstrap, "events", 40, partitions=2, bad={7: b"{not json"})
    path = write_spec(tmp_path, broker.bootstrap, tmp_path / "raw", bad_records={"policy": "fail"})
    result = run_cli("run", str(path), "--master", "local[2]", "--quiet", env={"TMPDIR": str(tmp_path)})
    assert result.returncode == 1
    (line,) = result.stderr.splitlines()  # nothing else: no executor error, no traceback, no Java stack
    (jvm_log,) = (tmp_path / "pipelines-spark").glob("pipelines-events_raw-*.log")
    partition, offset = _where_event_is(broker.bootstrap, 7)
    assert line == (
        f"error: loading run #1: events-{partition} offset {offset} (key '7') cannot be decoded: JSON parse error: "
        "Missing a name for object member.; bad_records.policy is fail, so the run stops and commits nothing. To "
        "load the rest, set bad_records.policy: quarantine and run again: such messages are then kept aside with "
        f"their bytes and reason, in the raw layer's _quarantine/ (Spark's log, with the stack traces: {jvm_log})"
    )
    logged = jvm_log.read_text()
    assert "ERROR Executor: Exception in task" in logged  # the task's failure, Java stack and all
    assert "pipelines.errors.BadRecordError: events-" in logged  # the task's Python traceback
    assert "ERROR pipelines: the run failed: loading run #1" in logged  # the driver's own stack
    assert "Traceback (most recent call last)" in logged.split("ERROR pipelines: the run failed")[1]
    assert "Using Spark's default log4j profile" not in logged  # the JVM ran the pipelines' configuration
    assert " INFO SparkContext: " in logged  # ... which writes everything from INFO to the file
    assert PipelineState(LocalStorage(), str(tmp_path / "raw")).committed_seqs() == []


def _where_event_is(bootstrap: str, number: int) -> tuple[int, int]:
    """(partition, offset) of the event keyed ``number`` on the broker."""
    with SimpleConsumer(bootstrap) as consumer:
        for partition in range(2):
            for message in consumer.messages("events", partition, 0, consumer.latest_offset("events", partition)):
                if message.key == str(number).encode():
                    return partition, message.offset
    raise AssertionError(f"event {number} is not on the broker")
