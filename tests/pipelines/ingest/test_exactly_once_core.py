"""The exactly-once core in milliseconds: plan, state, reconcile, commit, publish and replay planning.

Everything runs for real (the driver's code, the tasks' code, Parquet on local disk) except the
broker and Spark, replaced by tests.support.in_memory. Each crash point of the commit protocol is
a simulated death (pipelines.faults.simulated_crash: nothing cleans up after it), followed by the
retry; harness.oracle then checks every offset once, none lost, none twice, nothing visible that no
manifest lists. Two overlapping runs of one pipeline are run both ways round.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from rich.console import Console

from pipelines import faults
from pipelines.app.runner import EXIT_CONCURRENT, fail
from pipelines.config.pipeline import PipelineSpec, load_spec
from pipelines.errors import CommitError, ConcurrentRunError, DataLossError, LoadError, PlanError, ReconciliationError
from pipelines.executor.source import SplitTask
from pipelines.executor.splits import Split
from pipelines.ingest.plan import make_plan
from pipelines.ingest.reconcile import FileFacts, OffsetCoverage, reconcile
from pipelines.ingest.run import PipelineRun, RunResult
from pipelines.ledger.lease import Lease, Leases, is_alive, own_lease
from pipelines.ledger.state import PipelineState
from pipelines.progress import Reporter
from pipelines.replay.plan import plan_replay
from pipelines.replay.target import RewindTarget
from pipelines.reporting.report import build_report
from pipelines.reporting.status import print_status
from pipelines.reporting.summary import print_summary
from pipelines.storage import LocalStorage
from tests.pipelines.harness import oracle, write_spec
from tests.support.in_memory import InProcessStager, MemoryCluster, events

pytestmark = pytest.mark.unit

TOPIC = "events"
NOW_MS = 1_795_000_000_000


def cluster_with(messages: int, partitions: int = 2) -> MemoryCluster:
    cluster = MemoryCluster()
    cluster.create(TOPIC, partitions)
    for partition in range(partitions):
        cluster.append(TOPIC, partition, events(messages, start=partition * 1000), timestamp_ms=NOW_MS)
    return cluster


def spec_for(tmp_path: Path, **overrides: Any) -> PipelineSpec:
    return load_spec(write_spec(tmp_path, "127.0.0.1:1", tmp_path / "raw", **overrides))


def run(spec: PipelineSpec, cluster: MemoryCluster, **kwargs: Any) -> RunResult:
    return job(spec, cluster).run(**kwargs)


def job(spec: PipelineSpec, cluster: MemoryCluster, **stager: Any) -> PipelineRun:
    return PipelineRun(
        spec,
        None,
        storage=LocalStorage(),
        stager=InProcessStager(spec, cluster, **stager),
        consumer=cluster.consumer,
    )


def leftovers(raw: Path) -> list[str]:
    """Staging directories and leases left under ``raw``."""
    meta = raw / "_pipeline"
    return sorted(
        str(p.relative_to(meta)) for d in ("staging", "leases") if (meta / d).exists() for p in (meta / d).iterdir()
    )


# ---------------------------------------------------------------------- a run, and the next


def test_a_run_commits_every_message_once_and_the_next_loads_only_new_ones(tmp_path: Path) -> None:
    spec, cluster = spec_for(tmp_path), cluster_with(30)
    first = run(spec, cluster)
    assert first.status == "committed" and first.manifest is not None and first.manifest.seq == 1
    assert oracle(tmp_path / "raw")["rows"] == 60
    assert run(spec, cluster).status == "up-to-date"
    cluster.append(TOPIC, 1, events(5, start=5000), timestamp_ms=NOW_MS)
    second = run(spec, cluster)
    assert second.manifest is not None and [(s.partition, s.start, s.end) for s in second.manifest.splits] == [
        (0, 30, 30),
        (1, 30, 35),
    ]
    totals = oracle(tmp_path / "raw")
    assert totals["rows"] == 65 and totals["seqs"] == [1, 2]
    assert leftovers(tmp_path / "raw") == []


def test_a_run_id_that_committed_is_a_no_op(tmp_path: Path) -> None:
    spec, cluster = spec_for(tmp_path), cluster_with(10)
    assert run(spec, cluster, run_id="2026-11-21").status == "committed"
    cluster.append(TOPIC, 0, events(3, start=100), timestamp_ms=NOW_MS)
    again = run(spec, cluster, run_id="2026-11-21")
    assert again.status == "already-committed" and "already committed as #1" in again.message
    assert oracle(tmp_path / "raw")["rows"] == 20


def test_bad_records_are_quarantined_and_reconciled(tmp_path: Path) -> None:
    spec = spec_for(tmp_path, bad_records={"policy": "quarantine", "max_share": 0.5})
    cluster = MemoryCluster()
    cluster.create(TOPIC, 1)
    cluster.append(TOPIC, 0, events(20, bad_every=4), timestamp_ms=NOW_MS)
    result = run(spec, cluster)
    assert result.manifest is not None and [(s.rows, s.quarantined) for s in result.manifest.splits] == [(15, 5)]
    totals = oracle(tmp_path / "raw")
    assert (totals["rows"], totals["quarantined"]) == (15, 5)


# ---------------------------------------------------------------------- every crash point, then the retry

CRASH_POINTS = [
    "plan.after_store",
    "load.after_staging",
    "commit.before_manifest",
    "commit.after_manifest",
    "publish.after_file",
    "publish.after_file@2",
    "publish.after_files",
]


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_a_crash_at_each_point_then_the_retry_commits_exactly_once(tmp_path: Path, point: str) -> None:
    spec, cluster = spec_for(tmp_path), cluster_with(25)
    raw = tmp_path / "raw"
    with faults.simulated_crash(point), pytest.raises(faults.Crash):
        run(spec, cluster)
    state = PipelineState(LocalStorage(), str(raw))
    committed = state.committed_seqs()
    assert committed == ([1] if point.startswith(("commit.after", "publish")) else [])
    if not committed:  # nothing is visible before the commit: at most a plan and a staged attempt
        assert not [p for p in raw.rglob("*.parquet") if "_pipeline" not in p.parts]
    cluster.append(TOPIC, 0, events(4, start=500), timestamp_ms=NOW_MS)  # new messages arrive meanwhile
    retry = run(spec, cluster)  # an uncommitted plan is completed as it was; a committed run is published
    assert retry.status == "committed" and retry.manifest is not None
    assert [m.seq for m in retry.completed] == ([2] if committed else [1])
    run(spec, cluster)  # and the next run loads what came meanwhile (if the retry did not)
    totals = oracle(raw)
    assert totals["rows"] == 54 and totals["seqs"] == [1, 2], f"after a crash at {point}: {totals}"
    assert leftovers(raw) == [], f"a crash at {point} left {leftovers(raw)}"


def test_a_crashed_attempts_lease_is_dead_at_once_on_this_host(tmp_path: Path) -> None:
    spec, cluster = spec_for(tmp_path), cluster_with(5)
    with faults.simulated_crash("load.after_staging"), pytest.raises(faults.Crash):
        run(spec, cluster)
    (name,) = [p.name for p in (tmp_path / "raw" / "_pipeline" / "staging").iterdir()]
    leases = Leases(LocalStorage(), str(tmp_path / "raw" / "_pipeline"))
    lease = leases.read(name)
    assert lease is not None and lease.host == socket.gethostname() and not leases.alive(name)


# ---------------------------------------------------------------------- two runs at once


@pytest.mark.parametrize("winner", ["completer", "planner"])
def test_overlapping_runs_one_commits_the_other_stops_with_exit_3_and_cleans_its_own(
    tmp_path: Path, winner: str
) -> None:
    """Run A plans #1 and stores the plan; run B starts meanwhile, finds the stored plan and
    executes it too. Whichever commits first wins (``completer``: B; ``planner``: A); the winner's
    cleanup must leave the loser's staging alone while the loser is still loading, and the loser
    stops with ConcurrentRunError (exit 3) at its commit, having removed its own staging."""
    spec, cluster = spec_for(tmp_path), cluster_with(20)
    raw = tmp_path / "raw"
    plan = make_plan(spec, cluster.consumer(), {}, 1, "run-a")
    stagings: dict[str, str] = {}

    def other_run_commits(loser: str) -> Any:
        def hook(staging: str) -> None:
            stagings[loser] = staging
            if loser == "a":
                assert job(spec, cluster).run().status == "committed"  # B completes A's plan, to the end
            else:
                assert job(spec, cluster).execute(plan).seq == 1  # A executes its own plan, to the end
            assert Path(staging).is_dir(), "the winner deleted the staging of a run still loading"

        return hook

    loser = "a" if winner == "completer" else "b"
    losing_job = job(spec, cluster, during=other_run_commits(loser))
    losing_job.state.store_plan(plan)  # A planned
    with pytest.raises(ConcurrentRunError, match="committed run #1") as lost:
        losing_job.execute(plan) if loser == "a" else losing_job.run()
    assert fail(lost.value) == EXIT_CONCURRENT
    assert not Path(stagings[loser]).exists(), "the loser left its staging behind"
    # both executed run-a's plan: the words tell the winner's attempt from the loser's
    winning = PipelineState(LocalStorage(), str(raw)).manifest(1).attempt
    losing = stagings[loser].rsplit("-", 1)[1]
    assert winning != losing
    assert f"attempt {winning} of run run-a committed run #1 first" in str(lost.value)
    assert f"this process's attempt {losing} of the same plan" in str(lost.value)
    totals = oracle(raw)
    assert totals["rows"] == 40 and totals["seqs"] == [1]
    assert leftovers(raw) == []


def test_leases_judge_liveness_by_process_here_and_by_renewal_elsewhere() -> None:
    here = socket.gethostname()
    mine = own_lease(NOW_MS)
    assert is_alive(mine, now_ms=NOW_MS + 10**9, host=here)  # this process: alive however old
    assert not is_alive(Lease(here, mine.pid, "boot:1", NOW_MS), now_ms=NOW_MS, host=here)  # a reused pid
    remote = Lease("elsewhere", 1, "boot:1", NOW_MS)
    assert is_alive(remote, now_ms=NOW_MS + 30_000, host=here)
    assert not is_alive(remote, now_ms=NOW_MS + 61_000, host=here)


# ---------------------------------------------------------------------- planning and reconciling


def test_a_plan_follows_the_committed_offsets_and_the_retention_policy(tmp_path: Path) -> None:
    cluster = cluster_with(10, partitions=1)
    spec = spec_for(tmp_path, on_offset_out_of_range="earliest")
    plan = make_plan(spec, cluster.consumer(), {(TOPIC, 0): 4}, 2, "r")
    assert [(s.start, s.end, s.lost_from) for s in plan.splits] == [(4, 10, None)]
    cluster.delete_before(TOPIC, 0, 7)
    lost = make_plan(spec, cluster.consumer(), {(TOPIC, 0): 4}, 2, "r")
    assert [(s.start, s.end, s.lost_from, s.lost_to) for s in lost.splits] == [(7, 10, 4, 7)]
    with pytest.raises(DataLossError, match="4"):
        make_plan(spec_for(tmp_path, on_offset_out_of_range="fail"), cluster.consumer(), {(TOPIC, 0): 4}, 2, "r")
    with pytest.raises(PlanError, match="beyond the log end"):
        make_plan(spec, cluster.consumer(), {(TOPIC, 0): 11}, 2, "r")
    capped = make_plan(spec_for(tmp_path, limits={"max_messages_per_split": 2}), cluster.consumer(), {}, 1, "r")
    assert [(s.start, s.end, s.log_end) for s in capped.splits] == [(7, 9, 10)]


def test_reconcile_refuses_duplicates_gaps_and_foreign_rows(tmp_path: Path) -> None:
    spec, cluster = spec_for(tmp_path), cluster_with(10, partitions=1)
    plan = make_plan(spec, cluster.consumer(), {}, 1, "r")
    whole = FileFacts("a.parquet", TOPIC, 0, 10, 0, 9)
    assert reconcile(plan, [whole], [], {(TOPIC, 0): OffsetCoverage(10, 0, 9)})[0].rows == 10
    with pytest.raises(ReconciliationError, match="more than once"):
        reconcile(plan, [whole, FileFacts("b", TOPIC, 0, 1, 3, 3)], [], {(TOPIC, 0): OffsetCoverage(10, 0, 9)})
    with pytest.raises(ReconciliationError, match=r"rows 9 \+ quarantined 0"):
        reconcile(plan, [FileFacts("a", TOPIC, 0, 9, 1, 9)], [], {(TOPIC, 0): OffsetCoverage(9, 1, 9)})
    with pytest.raises(ReconciliationError, match="does not load"):
        reconcile(plan, [whole, FileFacts("c", "other", 0, 1, 0, 0)], [], {(TOPIC, 0): OffsetCoverage(10, 0, 9)})


def test_publishing_is_idempotent_and_a_missing_file_is_named(tmp_path: Path) -> None:
    spec, cluster = spec_for(tmp_path), cluster_with(10)
    result = run(spec, cluster)
    assert result.manifest is not None
    state = PipelineState(LocalStorage(), str(tmp_path / "raw"))
    assert state.roll_forward(result.manifest) == 0  # everything is in place: nothing moves
    victim = tmp_path / "raw" / result.manifest.files[0].path
    victim.unlink()
    with pytest.raises(CommitError, match="changed outside the pipeline"):
        state.roll_forward(result.manifest)


def test_a_replay_plan_rewinds_each_split_to_its_offset_and_names_the_partitions(tmp_path: Path) -> None:
    spec, cluster = spec_for(tmp_path), cluster_with(12)
    run(spec, cluster)
    state = PipelineState(LocalStorage(), str(tmp_path / "raw"))
    plan = plan_replay(spec, state, cluster.consumer(), RewindTarget(offsets={(TOPIC, 0): 5, (TOPIC, 1): 12}))
    assert [(s.partition, s.start, s.end, s.messages) for s in plan.splits] == [(0, 5, 12, 7), (1, 12, 12, 0)]
    assert plan.seq == 2 and plan.generation == 1 and plan.raw_partitions


def test_offsets_a_read_committed_source_skips_are_staged_counted_and_never_rows(tmp_path: Path) -> None:
    """Aborted records and transaction markers (left out by the fetch) are accounted for: rows +
    aborted + markers = end - start, checked from the staged files; none is a row."""
    spec, cluster = spec_for(tmp_path), MemoryCluster()
    cluster.create(TOPIC, 1)
    cluster.append(TOPIC, 0, events(10), timestamp_ms=NOW_MS)  # 0-9
    cluster.append_skipped(TOPIC, 0, 5, "aborted")  # 10-14
    cluster.append_skipped(TOPIC, 0, 1, "control")  # 15
    cluster.append(TOPIC, 0, events(4, start=10), timestamp_ms=NOW_MS)  # 16-19
    cluster.append_skipped(TOPIC, 0, 9, "control")  # 20-28: a split may end on markers alone
    result = run(spec, cluster)
    assert result.manifest is not None
    assert [(s.start, s.end, s.rows, s.quarantined, s.aborted, s.control) for s in result.manifest.splits] == [
        (0, 29, 14, 0, 5, 10)
    ]
    totals = oracle(tmp_path / "raw")
    assert (totals["rows"], totals["skipped"]) == (14, 15)
    assert leftovers(tmp_path / "raw") == []
    assert run(spec, cluster).status == "up-to-date"


def test_offsets_compaction_removed_are_counted_and_a_split_may_begin_or_end_among_them(tmp_path: Path) -> None:
    """A compacted topic: offsets the cleaner removed are gaps the fetch steps over (a window
    thinned, one emptied whole, the split's first and last offsets among them). They are staged and
    counted as ``compacted``: rows + markers + compacted = end - start, checked from the files; the
    run report and ``pipelines status`` show the count."""
    spec, cluster = spec_for(tmp_path, limits={"max_messages_per_split": 25}), MemoryCluster()
    cluster.create(TOPIC, 1)
    cluster.append(TOPIC, 0, events(30), timestamp_ms=NOW_MS)  # 0-29
    cluster.append_skipped(TOPIC, 0, 2, "control")  # 30-31
    cluster.append(TOPIC, 0, events(10, start=30), timestamp_ms=NOW_MS)  # 32-41
    removed = {0, 1, 2, *range(8, 21), *range(22, 30)}  # a fetch window (7 offsets) is 14-20: emptied
    cluster.compact(TOPIC, 0, removed)
    first = run(spec, cluster)
    second = run(spec, cluster)
    assert first.manifest is not None and second.manifest is not None
    splits = [s for m in (first.manifest, second.manifest) for s in m.splits]
    assert [(s.start, s.end, s.rows, s.control, s.compacted) for s in splits] == [(0, 25, 6, 0, 19), (25, 42, 10, 2, 5)]
    totals = oracle(tmp_path / "raw")
    assert (totals["rows"], totals["skipped"]) == (16, 26)
    state = PipelineState(LocalStorage(), str(tmp_path / "raw"))
    loaded = sorted(o for m in state.generation_manifests() for o in _offsets(state, m))
    assert loaded == [o for o in range(42) if o not in removed and o not in (30, 31)]
    assert build_report(spec, state, 1)["totals"]["compacted"] == 19
    console = Console(record=True, width=200)
    print_status(console, spec.name, str(tmp_path / "raw"), state.manifest(2), None)
    assert "compacted: 5 offsets held no record any more" in console.export_text()
    print_summary(Reporter(console=console), state.manifest(2))
    lines = console.export_text().splitlines()
    header = next(line for line in lines if line.startswith("┃ split"))
    row = next(line for line in lines if line.startswith("│ events-0"))
    assert [c.strip() for c in header.split("┃")[-3:-1]] == ["skipped (aborted + markers)", "compacted"], header
    assert [c.strip() for c in row.split("│")[-3:-1]] == ["0 + 2", "5"], row
    assert leftovers(tmp_path / "raw") == []


def test_missing_offsets_of_a_topic_that_does_not_compact_are_loss_and_fail_the_split(tmp_path: Path) -> None:
    """The same gaps on a topic whose cleanup.policy is delete are not compaction: records were
    lost, the split fails naming the offsets and the policy, and nothing is committed."""
    spec, cluster = spec_for(tmp_path), MemoryCluster()
    cluster.create(TOPIC, 1)
    cluster.append(TOPIC, 0, events(20), timestamp_ms=NOW_MS)
    cluster.compact(TOPIC, 0, range(5, 9))
    cluster.policies[TOPIC] = "delete"
    with pytest.raises(LoadError, match=r"offsets 5-\d+ are missing .* cleanup.policy is 'delete', not compact"):
        run(spec, cluster)
    assert PipelineState(LocalStorage(), str(tmp_path / "raw")).committed_seqs() == [], "nothing committed"
    cluster.policies[TOPIC] = "not authorized"  # a principal that may read but not describe configs
    loaded = run(spec, cluster)
    assert loaded.manifest is not None and loaded.manifest.splits[0].compacted > 0, "cannot tell: compaction"


def _offsets(state: PipelineState, manifest: Any) -> list[int]:
    return [
        o
        for item in manifest.files
        if item.kind == "data"
        for o in pq.read_table(state.path(item.path), columns=["offset"]).column("offset").to_pylist()
    ]


def test_a_fetch_that_returns_nothing_before_the_planned_end_is_not_compaction(tmp_path: Path) -> None:
    """Records the plan counted on that no fetch returns (the broker does not serve them: here they
    lie past its last stable offset) are not a gap: the task waits ``retry_ms`` and fails."""
    spec = spec_for(tmp_path, source={"bootstrap": "127.0.0.1:1", "retry_ms": 300})
    cluster = cluster_with(20, partitions=1)
    cluster.last_stable[(TOPIC, 0)] = 12
    task = SplitTask(
        spec.source,
        spec.decoder,
        spec.event_time,
        spec.bad_records,
        Split(TOPIC, 0, 1, 0, 20),
        consumer=cluster.consumer,
    )
    with pytest.raises(LoadError, match="events-0: no message at offset 12 for 300 ms"):
        for _ in task.chunks():
            pass
    assert (task.loaded, task.compacted, task.done) == (12, 0, 12)


def test_an_open_transaction_holds_the_split_at_the_last_stable_offset_and_a_stored_plan_past_it_says_so(
    tmp_path: Path,
) -> None:
    spec, cluster = spec_for(tmp_path), cluster_with(20, partitions=1)
    cluster.last_stable[(TOPIC, 0)] = 12  # a transaction opened at 12 holds the rest back
    first = run(spec, cluster)
    assert first.manifest is not None
    ((start, end, log_end, last_stable),) = [
        (s.start, s.end, s.log_end, s.last_stable) for s in first.manifest.plan.splits
    ]
    assert (start, end, log_end, last_stable) == (0, 12, 20, 12)
    # a plan stored reading uncommitted (up to the log end), executed reading committed
    del cluster.last_stable[(TOPIC, 0)]
    with faults.simulated_crash("plan.after_store"), pytest.raises(faults.Crash):
        run(spec, cluster)
    cluster.last_stable[(TOPIC, 0)] = 12
    with pytest.raises(
        PlanError, match=r"planned end offset 20 is past the last stable offset 12 \(the log end is 20\)"
    ):
        run(spec, cluster)
    assert oracle(tmp_path / "raw")["rows"] == 12
