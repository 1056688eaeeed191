"""The load job end to end: a real kafkalog broker, Spark local[2,4], the committed raw layer, and
the oracle after every scenario (reliability rows S1, S3-S9, S11-S13)."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path, PurePosixPath
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml

from kafkalog.client import SimpleConsumer
from kafkalog.server.security.credentials import UsersFile
from pipelines.config.pipeline import PipelineSpec, load_spec
from pipelines.errors import (
    BadRecordError,
    CommitError,
    ConcurrentRunError,
    DataLossError,
    PlanError,
    ReconciliationError,
    StorageError,
)
from pipelines.ingest import run as load_module
from pipelines.ingest.plan import make_plan
from pipelines.ingest.run import PipelineRun, RunResult
from pipelines.ingest.stage import SparkStager
from pipelines.ledger.state import PipelineState
from pipelines.reporting.report import build_report
from pipelines.storage import LocalStorage
from tests.pipelines.harness import event, oracle, produce, write_spec
from tests.support.certificates import authority, person
from tests.support.kafkalog import BrokerProcess

pytestmark = pytest.mark.slow


def listing(raw: Path) -> dict[str, int]:
    return {str(p.relative_to(raw)): p.stat().st_size for p in raw.rglob("*") if p.is_file()}


def spec_for(tmp_path: Path, broker: BrokerProcess, **overrides: Any) -> PipelineSpec:
    return load_spec(write_spec(tmp_path, broker.bootstrap, tmp_path / "raw", **overrides))


def run(spec: PipelineSpec, spark: Any, **kwargs: Any) -> RunResult:
    return PipelineRun(spec, spark, **kwargs).run()


@pytest.mark.parametrize("writer", ["tasks", "spark"])
def test_a_load_commits_every_offset_once_and_a_rerun_changes_nothing(
    tmp_path: Path, broker: BrokerProcess, spark: Any, writer: str
) -> None:
    produce(broker.bootstrap, "events", 2000)
    spec = spec_for(tmp_path, broker, raw_options={"writer": writer})
    result = run(spec, spark)
    assert result.status == "committed"
    totals = oracle(tmp_path / "raw", broker.bootstrap)
    assert totals["rows"] == 2000
    assert totals["quarantined"] == 0
    manifest = result.manifest
    assert manifest is not None
    assert sum(s.end - s.start for s in manifest.splits) == 2000
    assert all(s.min_event_time and s.max_event_time for s in manifest.splits if s.rows)
    # rows carry the metadata columns and land in the hour of their event time
    table = pq.read_table(tmp_path / "raw" / manifest.files[0].path)
    assert {"topic", "partition", "offset", "broker", "timestamp", "event_time", "key", "user_id"} <= set(
        table.column_names
    )
    hour = manifest.files[0].path.split("/")[1]
    assert all(t.strftime("hour=%H") == hour for t in table.column("event_time").to_pylist())

    before = listing(tmp_path / "raw")
    again = run(spec, spark)
    assert again.status == "up-to-date"
    assert listing(tmp_path / "raw") == before


def test_new_messages_are_loaded_by_the_next_run_and_run_ids_are_idempotent(
    tmp_path: Path, broker: BrokerProcess, spark: Any
) -> None:
    produce(broker.bootstrap, "events", 500)
    spec = spec_for(tmp_path, broker)
    first = PipelineRun(spec, spark).run(run_id="2026-11-21T00")
    assert first.status == "committed"
    produce(broker.bootstrap, "events", 700, first=500)
    # the same run id again (an Airflow retry): a no-op even though new messages exist
    repeat = PipelineRun(spec, spark).run(run_id="2026-11-21T00")
    assert repeat.status == "already-committed"
    assert oracle(tmp_path / "raw")["rows"] == 500
    second = PipelineRun(spec, spark).run(run_id="2026-11-21T01")
    assert second.status == "committed"
    totals = oracle(tmp_path / "raw", broker.bootstrap)
    assert totals["rows"] == 1200
    assert totals["seqs"] == [1, 2]


@pytest.mark.parametrize("fault", ["fail_after_rows@50", "exit_after_rows@50"])
@pytest.mark.parametrize("writer", ["tasks", "spark"])
def test_a_task_that_fails_midway_is_retried_and_its_partial_output_never_appears(
    tmp_path: Path, broker: BrokerProcess, spark: Any, fault: str, writer: str
) -> None:
    produce(broker.bootstrap, "events", 2000)
    spec = spec_for(
        tmp_path,
        broker,
        source={"bootstrap": broker.bootstrap, "fetch_max_bytes": 4096},
        raw_options={"writer": writer},
    )
    result = PipelineRun(spec, spark, task_faults=fault).run()
    assert result.status == "committed"
    assert oracle(tmp_path / "raw", broker.bootstrap)["rows"] == 2000


def test_a_poison_message_fails_the_run_by_default_and_nothing_becomes_visible(
    tmp_path: Path, broker: BrokerProcess, spark: Any
) -> None:
    produce(broker.bootstrap, "events", 400, partitions=1, bad={123: b"\x00not json"})
    spec = spec_for(tmp_path, broker)
    with pytest.raises(BadRecordError, match=r"events-0 offset 123 \(key '123'\) cannot be decoded: .*JSON"):
        run(spec, spark)
    assert not list((tmp_path / "raw").rglob("*.parquet"))
    state = PipelineState(LocalStorage(), str(tmp_path / "raw"))
    assert state.committed_seqs() == []
    assert not list((tmp_path / "raw" / "_pipeline" / "staging").glob("*"))


@pytest.mark.parametrize("writer", ["tasks", "spark"])
def test_quarantine_keeps_bad_messages_with_their_bytes_and_reason(
    tmp_path: Path, broker: BrokerProcess, spark: Any, writer: str
) -> None:
    bad = {7: b"garbage", 300: b'{"user_id": "seven"}', 301: b'{"event": "no user"}'}
    produce(broker.bootstrap, "events", 400, partitions=1, bad=bad)
    quarantine = {"policy": "quarantine", "max_share": 0.05}
    spec = spec_for(tmp_path, broker, bad_records=quarantine, raw_options={"writer": writer})
    result = run(spec, spark)
    totals = oracle(tmp_path / "raw", broker.bootstrap)
    assert (totals["rows"], totals["quarantined"]) == (397, 3)
    assert result.manifest is not None
    (quarantine,) = [f for f in result.manifest.files if f.kind == "quarantine"]
    table = pq.read_table(tmp_path / "raw" / quarantine.path).to_pylist()
    assert [(r["offset"], r["value"]) for r in table] == [(7, b"garbage"), (300, bad[300]), (301, bad[301])]
    assert "required field 'user_id'" in table[2]["reason"]


def test_more_bad_messages_than_the_allowed_share_fail_the_run(
    tmp_path: Path, broker: BrokerProcess, spark: Any
) -> None:
    produce(broker.bootstrap, "events", 100, partitions=1, bad=dict.fromkeys(range(0, 100, 10), b"x"))
    spec = spec_for(tmp_path, broker, bad_records={"policy": "quarantine", "max_share": 0.05})
    with pytest.raises(BadRecordError, match="max_share"):
        run(spec, spark)
    assert PipelineState(LocalStorage(), str(tmp_path / "raw")).committed_seqs() == []


class FlakyStorage(LocalStorage):
    """Local storage whose n-th rename returns False (HDFS does that without an exception)."""

    def __init__(self, fail_at: int) -> None:
        self.fail_at = fail_at
        self.renames = 0

    def rename(self, src: str, dst: str) -> bool:
        if "/_pipeline/leases/" in dst:  # a lease's renewal (published whole), not a step of the commit
            return super().rename(src, dst)
        self.renames += 1
        if self.renames == self.fail_at:
            return False
        return super().rename(src, dst)


@pytest.mark.parametrize(("fail_at", "committed"), [(1, False), (2, False), (3, True), (5, True)])
def test_a_rename_returning_false_is_an_error_and_the_next_run_completes_exactly_once(
    tmp_path: Path, broker: BrokerProcess, spark: Any, fail_at: int, committed: bool
) -> None:
    # renames in a run: 1 the plan, 2 the manifest, 3.. the data files, then the run index
    produce(broker.bootstrap, "events", 800)
    spec = spec_for(tmp_path, broker)
    with pytest.raises((StorageError, CommitError), match="returned false"):
        PipelineRun(spec, spark, storage=FlakyStorage(fail_at)).run()
    state = PipelineState(LocalStorage(), str(tmp_path / "raw"))
    assert state.committed_seqs() == ([1] if committed else [])
    result = run(spec, spark)
    assert result.status == ("up-to-date" if committed else "committed")
    assert oracle(tmp_path / "raw", broker.bootstrap)["rows"] == 800


def test_a_stored_plan_is_executed_as_stored_even_if_limits_changed(
    tmp_path: Path, broker: BrokerProcess, spark: Any
) -> None:
    produce(broker.bootstrap, "events", 1000, partitions=2)
    capped = spec_for(tmp_path, broker, limits={"max_messages_per_split": 100})
    state = PipelineState(LocalStorage(), str(tmp_path / "raw"))
    with SimpleConsumer(broker.bootstrap) as consumer:
        plan = make_plan(capped, consumer, {}, 1, "crashed-run")
    state.store_plan(plan)  # as if the driver died right after storing it
    changed = spec_for(tmp_path, broker, limits={"max_messages_per_split": 30})
    result = run(changed, spark)
    assert result.manifest is not None
    assert result.manifest.run_id == "crashed-run"
    assert [(s.start, s.end) for s in result.manifest.splits] == [(0, 100), (0, 100)]
    following = run(changed, spark)
    assert following.manifest is not None
    assert [(s.start, s.end) for s in following.manifest.splits] == [(100, 130), (100, 130)]
    oracle(tmp_path / "raw", broker.bootstrap)


def test_a_stored_plan_beyond_the_log_end_is_an_error_not_a_short_file(
    tmp_path: Path, broker: BrokerProcess, spark: Any
) -> None:
    # two sends: the truncation at 250 falls between record batches (a batch is kept or dropped whole)
    produce(broker.bootstrap, "events", 250, partitions=1)
    produce(broker.bootstrap, "events", 50, partitions=1, first=250)
    spec = spec_for(tmp_path, broker)
    state = PipelineState(LocalStorage(), str(tmp_path / "raw"))
    with SimpleConsumer(broker.bootstrap) as consumer:
        plan = make_plan(spec, consumer, {}, 1, "planned")
    state.store_plan(plan)
    broker.stop()
    partition_dir = next(p for p in (tmp_path / "broker").iterdir() if p.name == "events-0")
    truncate = shutil.which("kafkalog", path=str(Path(__import__("sys").executable).parent))
    assert truncate is not None
    import subprocess

    subprocess.run([truncate, "log", "truncate", str(partition_dir), "--to", "250", "--yes"], check=True)
    _restart(broker)
    with pytest.raises(PlanError, match=r"planned end offset 300 > log end 250"):
        run(spec, spark)
    assert state.committed_seqs() == []
    result = PipelineRun(spec, spark).run(replan=True)
    assert result.manifest is not None
    assert [(s.start, s.end) for s in result.manifest.splits] == [(0, 250)]
    oracle(tmp_path / "raw", broker.bootstrap)


def _restart(broker: BrokerProcess) -> None:
    """Start ``broker`` again on the same port (clients keep their bootstrap address)."""
    settings = yaml.safe_load(broker.config_path.read_text())
    settings["port"] = broker.port
    broker.config_path.write_text(yaml.safe_dump(settings))
    broker.start()


def _delete_oldest_segments(partition_dir: Path, keep_from: int) -> int:
    """Retention done by hand while the broker is stopped: remove every segment whose successor
    starts at or below ``keep_from``. Returns the new log start offset."""
    bases = sorted(int(p.stem) for p in partition_dir.glob("*.log"))
    kept = [b for b in bases if b >= keep_from] or bases[-1:]
    for base in bases:
        if base < kept[0]:
            for suffix in (".log", ".index", ".timeindex"):
                (partition_dir / f"{base:020d}{suffix}").unlink(missing_ok=True)
    return kept[0]


@pytest.mark.parametrize("policy", ["fail", "earliest", "latest"])
def test_offsets_deleted_by_retention_follow_the_policy_and_the_loss_is_recorded(
    tmp_path: Path, spark: Any, policy: str
) -> None:
    with BrokerProcess(tmp_path / "broker", log={"segment_bytes": 4096}) as broker:
        produce(broker.bootstrap, "events", 100, partitions=1)
        spec = spec_for(tmp_path, broker, on_offset_out_of_range=policy)
        assert run(spec, spark).status == "committed"
        for first in range(100, 500, 25):  # small batches: the log rolls 4 KiB segments between them
            produce(broker.bootstrap, "events", 25, partitions=1, first=first)
        broker.stop()
        earliest = _delete_oldest_segments(tmp_path / "broker" / "events-0", 300)
        assert 100 < earliest <= 300
        _restart(broker)
        if policy == "fail":
            with pytest.raises(
                DataLossError, match=rf"events-0: offset 100 is no longer on the broker \(earliest {earliest}"
            ):
                run(spec, spark)
            assert PipelineState(LocalStorage(), str(tmp_path / "raw")).committed_seqs() == [1]
            return
        result = run(spec, spark)
        assert result.manifest is not None
        (split,) = result.manifest.splits
        assert (split.lost_from, split.lost_to) == (100, earliest if policy == "earliest" else 500)
        assert (split.start, split.end) == ((earliest, 500) if policy == "earliest" else (500, 500))
        totals = oracle(tmp_path / "raw", broker.bootstrap)
        assert totals["rows"] == 100 + (500 - earliest if policy == "earliest" else 0)
        # the run report's data-loss ledger names the run, the split and the range
        state = PipelineState(LocalStorage(), str(tmp_path / "raw"))
        report = build_report(spec, state, result.manifest.seq)
        lost_to = earliest if policy == "earliest" else 500
        assert [(e["seq"], e["split"], e["from"], e["to"], e["messages"]) for e in report["data_loss"]] == [
            (2, "events-0", 100, lost_to, lost_to - 100)
        ]
        assert report["totals"]["lost"] == lost_to - 100
        assert build_report(spec, state, 1)["data_loss"] == []  # the ledger up to run #1 was clean


def test_the_broker_restarting_during_a_load_costs_retries_not_rows(tmp_path: Path, spark: Any) -> None:
    with BrokerProcess(tmp_path / "broker") as broker:
        produce(broker.bootstrap, "events", 3000)
        spec = spec_for(tmp_path, broker, source={"bootstrap": broker.bootstrap, "fetch_max_bytes": 2048})

        class KillDuringLoad(PipelineRun):
            def execute(self, plan: Any) -> Any:
                broker.kill()
                threading.Timer(3.0, _restart, args=(broker,)).start()
                return super().execute(plan)

        started = time.monotonic()
        result = KillDuringLoad(spec, spark).run()
        assert result.status == "committed"
        assert time.monotonic() - started > 3.0
        assert oracle(tmp_path / "raw", broker.bootstrap)["rows"] == 3000


def test_two_concurrent_runs_one_commits_the_other_fails_clearly(
    tmp_path: Path, broker: BrokerProcess, spark: Any
) -> None:
    produce(broker.bootstrap, "events", 1500)
    spec = spec_for(tmp_path, broker)
    both_loaded = threading.Barrier(2, timeout=120)
    outcomes: list[object] = []

    class Racing(PipelineRun):
        def load_and_reconcile(self, plan: Any, attempt: str, staging: str) -> Any:
            manifest = super().load_and_reconcile(plan, attempt, staging)
            both_loaded.wait()  # both hold a loaded, reconciled run: only one may commit it
            return manifest

    def go() -> None:
        try:
            outcomes.append(Racing(spec, spark).run())
        except Exception as exc:
            outcomes.append(exc)
            both_loaded.abort()

    # the second run starts after the first stored its plan: it finds the plan and executes it too
    first = threading.Thread(target=go)
    first.start()
    state = PipelineState(LocalStorage(), str(tmp_path / "raw"))
    deadline = time.monotonic() + 60
    while state.pending_plan() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    second = threading.Thread(target=go)
    second.start()
    first.join(180)
    second.join(180)
    committed = [o for o in outcomes if isinstance(o, RunResult)]
    failed = [o for o in outcomes if isinstance(o, ConcurrentRunError)]
    assert len(committed) == 1 and len(failed) == 1, outcomes
    assert "committed run #1 first" in str(failed[0])
    assert oracle(tmp_path / "raw", broker.bootstrap)["rows"] == 1500
    assert not list((tmp_path / "raw" / "_pipeline" / "staging").glob("*"))


def test_a_second_attempt_of_a_split_in_the_output_is_caught_before_commit(
    tmp_path: Path, broker: BrokerProcess, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SPARK-39195: an attempt committed, its executor died, a retry committed again: two files hold
    # the same offsets. Reconciliation must refuse to commit that (Spark's writer).
    produce(broker.bootstrap, "events", 600)
    spec = spec_for(tmp_path, broker, raw_options={"writer": "spark"})

    def duplicate_a_file(point: str, number: int | None = None) -> None:
        if point == "load.after_staging":
            files = sorted((tmp_path / "raw" / "_pipeline" / "staging").rglob("*.parquet"))
            shutil.copy(files[0], files[0].with_name("part-99999-duplicate-attempt.snappy.parquet"))

    with monkeypatch.context() as patched:
        patched.setattr(load_module.faults, "crash_point", duplicate_a_file)
        with pytest.raises(ReconciliationError, match="appear more than once"):
            run(spec, spark)
    assert not list((tmp_path / "raw").rglob("dt=*"))
    assert run(spec, spark).status == "committed"
    assert oracle(tmp_path / "raw", broker.bootstrap)["rows"] == 600


@pytest.mark.parametrize("lie", ["a second attempt's file", "a wrong row count"])
def test_task_reports_are_checked_against_the_files_before_commit(
    tmp_path: Path, broker: BrokerProcess, spark: Any, lie: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # tasks writing their own files: only files reported by successful attempts count, and what a
    # report says must be what the file holds
    produce(broker.bootstrap, "events", 600)
    spec = spec_for(tmp_path, broker, raw_options={"writer": "tasks"})
    honest = SparkStager._read_splits

    def lying(self: SparkStager, *args: Any) -> Any:
        reported = [row.asDict() for row in honest(self, *args)]
        first = reported[0]
        if lie == "a wrong row count":
            return [{**first, "rows": first["rows"] + 1}, *reported[1:]]
        (source,) = (tmp_path / "raw" / "_pipeline" / "staging").glob(f"*/{first['path']}")
        copy = PurePosixPath(first["path"]).with_name("part-duplicate-attempt.parquet")
        shutil.copy(source, source.with_name(copy.name))
        return [*reported, {**first, "path": str(copy)}]

    expected = "appear more than once" if lie != "a wrong row count" else "its task reported"
    with monkeypatch.context() as patched, pytest.raises(ReconciliationError, match=expected):
        patched.setattr(SparkStager, "_read_splits", lying)
        PipelineRun(spec, spark).run()
    assert not list((tmp_path / "raw").rglob("dt=*"))
    assert run(spec, spark).status == "committed"
    assert oracle(tmp_path / "raw", broker.bootstrap)["rows"] == 600


def test_the_raw_decoder_keeps_values_as_bytes(tmp_path: Path, broker: BrokerProcess, spark: Any) -> None:
    produce(broker.bootstrap, "events", 50, partitions=1)
    raw_spec = spec_for(tmp_path, broker, name="rawbytes", decoder={"format": "raw"}, event_time={})
    result = run(raw_spec, spark)
    assert result.manifest is not None
    table = pq.read_table(tmp_path / "raw" / result.manifest.files[0].path)
    assert table.column("value").to_pylist()[0] == event(table.column("offset").to_pylist()[0])


def test_a_load_from_a_secured_cluster_logs_in_and_keeps_the_password_out_of_every_file(
    tmp_path: Path, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TLS and a SCRAM login for the planner and every task, the password from the environment;
    nothing written (raw layer, state, manifest) holds it."""
    password = "loader-Pw-3k9q"
    ca = authority(tmp_path / "certs")
    server = ca.issue("broker", person("broker"), server=True)
    users = UsersFile(tmp_path / "users.json")
    users.set_password("loader", password, ["SCRAM-SHA-512"])
    secured = {
        "listeners": ["PLAINTEXT://127.0.0.1:0", "SASL_SSL://127.0.0.1:0"],
        "sasl": {"users_file": str(users.path), "mechanisms": ["SCRAM-SHA-512"]},
        "tls": {"certificate": str(server.certificate), "key": str(server.key)},
    }
    with BrokerProcess(tmp_path / "secured", **secured) as broker:
        produce(broker.bootstrap, "events", 300)  # through the loopback PLAINTEXT listener
        monkeypatch.setenv("LOADER_PASSWORD", password)
        security = {"protocol": "SASL_SSL", "mechanism": "SCRAM-SHA-512", "username": "loader",
                    "password": "${env:LOADER_PASSWORD}", "ca_file": str(ca.certificate)}  # fmt: skip
        source = {"bootstrap": f"127.0.0.1:{broker.ports['SASL_SSL']}", "retry_ms": 20_000, "security": security}
        spec = load_spec(write_spec(tmp_path, "unused", tmp_path / "raw", source=source))
        assert run(spec, spark).status == "committed"
        assert oracle(tmp_path / "raw")["rows"] == 300
    written = [path for path in (tmp_path / "raw").rglob("*") if path.is_file()]
    assert written and not [path for path in written if password.encode() in path.read_bytes()]
