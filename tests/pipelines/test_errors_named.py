"""Errors name their first cause: Spark's and Hadoop's texts through py4j reduced to the line
that says what went wrong (no empty field where py4j put ``": "``), and a failure met while
cleaning up after an error is a second line, never the error itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.app.runner import EXIT_FAILED, fail
from pipelines.errors import LoadError, PipelineError, StorageError
from pipelines.ingest.stage import cause_of
from pipelines.ledger.lease import Leases
from pipelines.storage import LocalStorage
from pipelines.storage.hadoop import _error

SAFE_MODE = "SafeModeException"
NAMENODE_EXCEPTION = f"org.apache.hadoop.hdfs.server.namenode.{SAFE_MODE}"
REFUSED = "Cannot create file/r/_pipeline/staging/1-a/data/part-2.parquet. Name node is in safe mode."
SPARK_TASK_FAILURE = "\n".join(
    [
        "An error occurred while calling o82.parquet.",
        ": org.apache.spark.SparkException: [TASK_WRITE_FAILED] Task failed while writing rows to "
        "hdfs://localhost:35729/r/_pipeline/staging/1-a/data. SQLSTATE: 58030",
        "\tat org.apache.spark.sql.errors.QueryExecutionErrors$.taskFailedWhileWritingRows(Errors.scala)",
        "Caused by: org.apache.spark.SparkException: Job aborted: Task 2 in stage 3.0 failed 1 times",
        "\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:2898)",
        f"Caused by: {NAMENODE_EXCEPTION}: {REFUSED}",
        "\tat org.apache.hadoop.hdfs.server.namenode.FSNamesystem.checkNameNodeSafeMode(FSNamesystem.java:1625)",
        f"Caused by: org.apache.hadoop.ipc.RemoteException({NAMENODE_EXCEPTION}): {REFUSED}",
    ]
)
MANIFEST_REFUSED = "Cannot create file/r/_pipeline/manifests/.x.tmp. Name node is in safe mode."
HADOOP_CALL_FAILURE = "\n".join(
    [
        "An error occurred while calling o120.create.",
        f": org.apache.hadoop.ipc.RemoteException({NAMENODE_EXCEPTION}): {MANIFEST_REFUSED}",
        "\tat org.apache.hadoop.ipc.Client.getRpcResponse(Client.java:1584)",
    ]
)


def test_a_spark_failure_names_spark_s_line_and_the_first_cause_without_an_empty_field() -> None:
    error = cause_of(Exception(SPARK_TASK_FAILURE), "loading run #1")
    assert isinstance(error, LoadError)
    text = str(error)
    assert text.startswith("loading run #1 failed in Spark: org.apache.spark.SparkException: [TASK_WRITE_FAILED]"), text
    assert "hdfs://localhost:35729/r/_pipeline/staging/1-a/data" in text  # the path, not only host:port
    assert text.endswith(f"(first cause: {NAMENODE_EXCEPTION}: {REFUSED})"), text
    assert ": :" not in text


def test_a_hadoop_call_failure_names_the_operation_the_path_and_the_java_line() -> None:
    error = _error("creating", "hdfs://nn:8020/r/_pipeline/manifests/.x.tmp", Exception(HADOOP_CALL_FAILURE))
    assert str(error) == (
        "creating hdfs://nn:8020/r/_pipeline/manifests/.x.tmp failed: "
        f"org.apache.hadoop.ipc.RemoteException({NAMENODE_EXCEPTION}): {MANIFEST_REFUSED}"
    )


class RefusingDeletes(LocalStorage):
    """A local disk whose deletes fail, as HDFS's do while its NameNode is in safe mode."""

    def delete(self, path: str, *, recursive: bool = False) -> bool:
        raise StorageError(f"deleting {path} failed: SafeModeException: Name node is in safe mode.")


def test_a_lease_that_cannot_be_released_after_an_error_is_a_note_not_the_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    leases = Leases(RefusingDeletes(), str(tmp_path / "_pipeline"))
    with pytest.raises(LoadError) as raised, leases.held("0000000001-abc"):
        raise LoadError("loading run #1 failed in Spark: the first cause")
    assert str(raised.value) == "loading run #1 failed in Spark: the first cause"
    assert fail(raised.value) == EXIT_FAILED
    printed = capsys.readouterr().err.splitlines()
    assert printed[0] == "error: loading run #1 failed in Spark: the first cause"
    assert printed[1].startswith("also: the lease of attempt 0000000001-abc was not released (deleting "), printed
    assert "SafeModeException" in printed[1]


def test_a_lease_that_cannot_be_released_after_success_does_not_fail_the_work(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    leases = Leases(RefusingDeletes(), str(tmp_path / "_pipeline"))
    with leases.held("0000000001-abc"):
        pass
    assert any("was not released" in record.getMessage() for record in caplog.records)
    assert leases.read("0000000001-abc") is not None  # left behind, for the next run to remove


def test_an_error_without_notes_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    fail(PipelineError("the cause"))
    assert capsys.readouterr().err == "error: the cause\n"
