"""The tables scenarios, run by test_tables.py in a driver process of their own.

Hive's settings are fixed when a Spark session starts, and the tests' shared session has none; so
this module is a program: ``python -m tests.pipelines.tables_scenarios METASTORE WORKDIR BOOTSTRAP
POINTS REPLAY_POINT`` starts one session whose catalog is METASTORE (``embedded``, or a thrift://
address) and runs a pipeline through the runner in-process on it: its first run stage by stage,
as Airflow's tasks do; crashes simulated at each of POINTS (comma-separated), each followed by the
next run, while a reader thread queries the tables by name; then a replay fixing a transform, its
sync crashed at REPLAY_POINT and finished by the next run, with a reader again, and a Hive JDBC
client (peers/HiveJdbcReader.java, in a JVM of its own) reading through a Spark Thrift server that
this driver serves (HiveServer2's protocol, sessions of its own on the same metastore, as a BI tool
reads the warehouse). It prints what it saw as one JSON document on its last line. The test
judges it; this program only observes (it fails only if a step it expects to work fails).
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pyspark

from pipelines import faults
from pipelines.app import runner
from pipelines.app.session import pipeline_session
from pipelines.catalog.connection import attach
from pipelines.catalog.metastore import SparkMetastore
from pipelines.catalog.sync import compare
from pipelines.config.pipeline import PipelineSpec, load_spec
from pipelines.layout import generation_dir
from pipelines.ledger.state import PipelineState
from pipelines.replay.target import RewindTarget
from pipelines.storage import LocalStorage
from tests.pipelines.harness import REPO, oracle, produce, write_spec
from tests.support.ports import free_port

HOURLY_SQL = "SELECT dt, hour, COUNT(*) {extra} AS events, SUM(amount) AS amount FROM raw GROUP BY dt, hour"


NO_EVENT = {
    i: json.dumps({"user_id": i, "amount": 1.5, "ts": f"2026-11-21T08:00:{i:02d}+00:00"}).encode() for i in (3, 7)
}
"""Events without an ``event`` field: loaded at first, quarantined once the field is required."""


def spec_file(workdir: Path, bootstrap: str, metastore: str, *, buggy: bool) -> Path:
    """The pipeline: topic ``events`` → raw → one output, events per hour. ``buggy`` counts one
    event too many per hour and does not require the ``event`` field; the fixed one does."""
    schema = {"user_id": "long", "event": "string", "amount": "double", "ts": "string"}
    path = write_spec(
        workdir, bootstrap, workdir / "raw", name="clicks",
        decoder={"format": "json", "schema": schema, "required": ["user_id"] if buggy else ["user_id", "event"]},
        bad_records={"policy": "quarantine", "max_share": 0.5},
        tables={"metastore": metastore, "database": "web"},
        transforms=[{"name": "per_hour", "depends_on": ["raw"], "sql": HOURLY_SQL.format(extra="+ 1" * buggy)}],
        outputs=[{"name": "hourly", "source": "per_hour", "path": str(workdir / "warehouse" / "hourly")}],
    )  # fmt: skip
    return path.rename(workdir / ("clicks_buggy.yaml" if buggy else "clicks.yaml"))


class Observer:
    """Reads the tables by name and the truth from the files.

    Each reading is a new reader: a new session (sharing the metastore client, not the caches),
    as a new ``spark-sql -e`` or JDBC query would be. A long-lived session caches the files it
    listed for a table until ``REFRESH TABLE`` (docs/tables.md)."""

    def __init__(self, spark: Any, spec: PipelineSpec) -> None:
        self.main = spark
        self.spec = spec

    def by_name(self) -> dict[str, int]:
        reader = self.main.newSession()
        raw = reader.sql("SELECT COUNT(*) FROM web.clicks_raw").collect()[0][0]
        hourly = reader.sql("SELECT COALESCE(SUM(events), 0) FROM web.hourly").collect()[0][0]
        return {"raw": int(raw), "hourly": int(hourly)}

    def truth(self) -> dict[str, int]:
        """The current generation's committed raw rows (before any replay, checked exactly-once by
        the oracle) and the published output's."""
        state = PipelineState(LocalStorage(), self.spec.raw.path)
        if state.current_generation() == 0:
            oracle(self.spec.raw.path)
        committed = sum(f.rows for m in state.generation_manifests() for f in m.files if f.kind == "data")
        where = generation_dir(self.spec.outputs[0].path, state.current_generation())
        events = 0
        if Path(where).exists():
            dataset = ds.dataset(where, format="parquet", partitioning="hive", ignore_prefixes=["_", "."])
            events = sum(dataset.to_table(columns=["events"]).column("events").to_pylist()) if dataset.files else 0
        return {"raw": committed, "hourly": int(events)}

    def by_path(self) -> int:
        """Raw rows a reader of the directories sees now (Parquet files in place, committed or not)."""
        state = PipelineState(LocalStorage(), self.spec.raw.path)
        where = generation_dir(self.spec.raw.path, state.current_generation())
        dataset = ds.dataset(where, format="parquet", partitioning="hive", ignore_prefixes=["_", "."])
        return int(dataset.count_rows()) if dataset.files else 0

    def pending(self) -> list[str]:
        metastore = attach(self.spec, self.main)
        assert metastore is not None
        state = PipelineState(LocalStorage(), self.spec.raw.path)
        return [change.what for change in compare(self.spec, state, self.main, metastore).changes]


class Reader:
    """A thread that reads the tables by name, one new reader after the other, until stopped."""

    def __init__(self, observer: Observer) -> None:
        self.readings: list[dict[str, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(observer,), name="reader")
        self._thread.start()

    def _read(self, observer: Observer) -> None:
        while not self._stop.is_set():
            self.readings.append(observer.by_name())
            self._stop.wait(0.3)  # a pause, so the runs it watches are not slowed down much

    def stop(self) -> list[dict[str, int]]:
        self._stop.set()
        self._thread.join()
        return self.readings


class JdbcReader:
    """A Hive JDBC client in a JVM of its own, reading both tables by name through the Thrift
    server at ``port``: one new connection per reading, until stopped (its stdin closed)."""

    QUERIES = ("raw=SELECT COUNT(*) FROM web.clicks_raw", "hourly=SELECT COALESCE(SUM(events), 0) FROM web.hourly")

    def __init__(self, port: int) -> None:
        jars = Path(pyspark.__file__).resolve().parent / "jars"
        self._process = subprocess.Popen(
            ["java", "-cp", f"{jars}/*", str(REPO / "peers" / "HiveJdbcReader.java"),
             f"jdbc:hive2://127.0.0.1:{port}/web", *self.QUERIES],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._pump = threading.Thread(target=self._read_lines, name="jdbc-lines", daemon=True)
        self._pump.start()
        self.readings: list[dict[str, Any]] = []
        self._take(until="ready", timeout=120)

    def _read_lines(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            self._lines.put(line.strip())
        self._lines.put(None)

    def _take(self, *, until: str | None = None, count: int = 0, timeout: float = 60) -> None:
        """Collect readings until the line ``until`` or ``count`` more readings."""
        wanted = len(self.readings) + count
        while (until is not None) or len(self.readings) < wanted:
            line = self._lines.get(timeout=timeout)
            if line is None:
                raise RuntimeError(f"the JDBC reader stopped (exit {self._process.wait()})")
            if line == until:
                return
            if line.startswith("{"):
                self.readings.append(json.loads(line))

    def stop(self) -> list[dict[str, Any]]:
        """The readings made so far, two more (the second begun after the caller's last change),
        then stop."""
        while not self._lines.empty():
            line = self._lines.get()
            if line is None:
                raise RuntimeError(f"the JDBC reader stopped (exit {self._process.wait()})")
            if line.startswith("{"):
                self.readings.append(json.loads(line))
        self._take(count=2)
        assert self._process.stdin is not None
        self._process.stdin.close()
        self._process.wait(60)
        while (line := self._lines.get(timeout=60)) is not None:
            if line.startswith("{"):
                self.readings.append(json.loads(line))
        return self.readings


class ChangeWatcher:
    """Reads the tables by name after every change pipelines makes to the metastore (each
    statement, each move of partitions), in the thread that makes it: what a reader who comes
    between two changes sees. Whole runs mean each such reading is the state before a run or after
    it, never a mix (a run's new partitions beside the old rows of those it replaces)."""

    WATCHED = ("sql", "relocate_partitions")

    def __init__(self, observer: Observer) -> None:
        self.observer = observer
        self.readings: list[dict[str, Any]] = []
        self._originals = {name: getattr(SparkMetastore, name) for name in self.WATCHED}

    def __enter__(self) -> ChangeWatcher:
        for name, original in self._originals.items():

            def watched(metastore: SparkMetastore, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
                result = _original(metastore, *args, **kwargs)
                try:
                    self.readings.append(self.observer.by_name())
                except Exception as exc:  # a name missing between two changes: the test says so
                    self.readings.append({"error": str(exc).splitlines()[0][:300]})
                return result

            setattr(SparkMetastore, name, watched)
        return self

    def __exit__(self, *exc: object) -> None:
        for name, original in self._originals.items():
            setattr(SparkMetastore, name, original)


def tables(spark: Any) -> list[str]:
    """The tables and views of the database ``web``."""
    return sorted(r.tableName for r in spark.sql("SHOW TABLES IN web").collect() if not r.isTemporary)


def run(spec: PipelineSpec, spark: Any) -> int:
    return runner.run_stage(spec, spark, "all", run_id=None, quiet=True)


def main(metastore: str, workdir: Path, bootstrap: str, points: list[str], replay_point: str) -> dict[str, Any]:
    buggy = load_spec(spec_file(workdir, bootstrap, metastore, buggy=True))
    fixed = load_spec(spec_file(workdir, bootstrap, metastore, buggy=False))
    # databases created through a metastore service are placed under the session's warehouse
    # directory; the Thrift server for JDBC clients listens on loopback only
    thrift_port = free_port()
    spark = pipeline_session(
        buggy, "local[2]", "tables-scenarios", {
            "spark.sql.warehouse.dir": (workdir / "warehouse-dir").as_uri(),
            "spark.hadoop.hive.server2.thrift.port": str(thrift_port),
            "spark.hadoop.hive.server2.thrift.bind.host": "127.0.0.1",
        },
    )  # fmt: skip
    observer = Observer(spark, buggy)
    seen: dict[str, Any] = {}

    produce(bootstrap, "events", 120, partitions=2, bad=NO_EVENT)
    # the first run stage by stage, as the Airflow DAG's tasks run it: the load registers the raw
    # layer, publish the output
    stages: dict[str, list[str]] = {}
    for stage in ("load", "transforms", "validate", "publish"):
        assert runner.run_stage(buggy, spark, stage, run_id="first", quiet=True) == 0, f"the first run's {stage} failed"
        stages[stage] = tables(spark)
    seen["stages"] = stages
    first_run = PipelineState(LocalStorage(), buggy.raw.path).latest()
    assert first_run is not None
    seen["first"] = {"by_name": observer.by_name(), "truth": observer.truth(), "pending": observer.pending()}

    # a reader queries both names throughout the crashes and the runs after them: rows only come,
    # so no reading may be smaller than the one before (a partition missing for a moment would be)
    during_runs = Reader(observer)
    for i, point in enumerate(points, start=1):
        before = observer.by_name()
        produce(bootstrap, "events", 90, partitions=2, first=i * 3600 - 45)  # the end of an hour and a new one
        crashed = False
        with ChangeWatcher(observer) as watcher:
            try:
                with faults.simulated_crash(point):
                    run(buggy, spark)
            except faults.Crash:
                crashed = True
            at_crash = {"by_name": observer.by_name(), "by_path": observer.by_path(), "tables": tables(spark)}
            if point == "flow.outputs_shown":  # a load task syncs before the publish is run again
                assert runner.run_stage(buggy, spark, "load", run_id=None, quiet=True) == 0
                at_crash["after_a_load"] = {"by_name": observer.by_name(), "tables": tables(spark)}
            code = run(buggy, spark)  # the next run (the oracle wants the files in place)
        seen[point] = {
            "crashed": crashed, "before": before, "at_crash": at_crash, "next_run": code,
            "after": observer.by_name(), "truth": observer.truth(), "pending": observer.pending(),
            "between_changes": watcher.readings, "tables": tables(spark),
        }  # fmt: skip

    seen["readings_during_runs"] = during_runs.stop()

    # a replay fixes the transform (and drops the events without one), while a reader queries the
    # tables by name, and a JDBC client through the Thrift server; its sync dies at
    # ``replay_point``, and the next run finishes it
    thrift = spark._jvm.org.apache.spark.sql.hive.thriftserver.HiveThriftServer2.startWithContext(
        spark._jsparkSession.sqlContext()
    )
    jdbc = JdbcReader(thrift_port)
    before_replay = observer.by_name()
    during_replay = Reader(observer)
    crashed = False
    try:
        with faults.simulated_crash(replay_point):
            runner.replay(fixed, spark, RewindTarget(run_id=first_run.run_id), quiet=True)
    except faults.Crash:
        crashed = True
    at_crash = observer.by_name()
    try:
        code = run(fixed, spark)
    finally:
        readings = during_replay.stop()
        jdbc_readings = jdbc.stop()
        thrift.stop()
    seen["replay"] = {
        "crashed": crashed, "before": before_replay, "at_crash": at_crash, "next_run": code,
        "after": observer.by_name(), "truth": observer.truth(), "readings": readings, "pending": observer.pending(),
        "jdbc_readings": jdbc_readings,
        "tables": tables(spark),
    }  # fmt: skip
    spark.stop()
    return seen


if __name__ == "__main__":
    found = main(sys.argv[1], Path(sys.argv[2]), sys.argv[3], [p for p in sys.argv[4].split(",") if p], sys.argv[5])
    sys.stdout.write("\n" + json.dumps(found) + "\n")
