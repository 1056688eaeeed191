"""The mirror's rule (pipelines.cdc.apply) against a model database: whatever the workload (concurrent
transactions, a snapshot taken while some are open, deletes, key changes, truncates, connector
restarts that send a suffix again) and wherever runs cut each partition, folding the runs through
apply() bucket by bucket gives the model's final table and the versions it went through; applying a
run a second time changes nothing."""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.cdc.apply import (
    DELETED,
    LSN,
    OP,
    VALID_FROM,
    VALID_TO,
    Applied,
    Truncate,
    apply,
    apply_tables,
    visible,
)
from pipelines.cdc.events import TRUNCATE, Change, changes_from_rows
from tests.pipelines.cdc.model import PARTITIONS, Workload, workload

pytestmark = pytest.mark.unit

KEY = ["id"]


def bucket_of(change: Change, buckets: int) -> int:
    assert change.key is not None
    return (change.key[0] * 7 + 3) % buckets


def runs_of(work: Workload, runs: int, rng: random.Random) -> list[list[dict[str, Any]]]:
    """Each partition cut at its own random points: run i holds, per partition, the records between
    its (i-1)-th and i-th cut (so a run may be ahead in one partition and behind in another)."""
    cuts = [sorted([0, *(rng.randint(0, len(records)) for _ in range(runs - 1)), len(records)])
            for records in work.partitions]  # fmt: skip
    return [
        [record for p, records in enumerate(work.partitions) for record in records[cuts[p][i] : cuts[p][i + 1]]]
        for i in range(runs)
    ]


class Mirror:
    """A mirrored table as the flow engine keeps it: buckets, each a state and a history, and the
    truncates applied so far; a run rewrites the buckets its changes touch (all of them if it
    holds a truncate)."""

    def __init__(self, buckets: int) -> None:
        self.buckets = [Applied(state=[], history=[]) for _ in range(buckets)]
        self.truncates: list[Truncate] = []

    def run(self, records: list[dict[str, Any]]) -> None:
        changes = changes_from_rows(records, KEY)
        truncates = [c for c in changes if c.op == TRUNCATE]
        touched: dict[int, list[Change]] = {}
        for change in changes:
            if change.key is not None:
                touched.setdefault(bucket_of(change, len(self.buckets)), []).append(change)
        if truncates:
            touched = {b: touched.get(b, []) for b in range(len(self.buckets))}
        for b, bucket_changes in touched.items():
            before = self.buckets[b]
            self.buckets[b] = apply(before.state, [*bucket_changes, *truncates], KEY, before.history, self.truncates)
        if touched:
            self.truncates = self.buckets[next(iter(touched))].truncates

    def table(self) -> dict[int, dict[str, Any]]:
        return {row["id"]: row for bucket in self.buckets for row in visible(bucket.state)}

    def history(self) -> dict[int, list[tuple[dict[str, Any], int, int | None]]]:
        versions: dict[int, list[tuple[dict[str, Any], int, int | None]]] = {}
        for bucket in self.buckets:
            for row in bucket.history:
                data = {n: v for n, v in row.items() if not n.startswith("_cdc_") and n not in (VALID_FROM, VALID_TO)}
                versions.setdefault(row["id"], []).append((data, row[VALID_FROM], row[VALID_TO]))
        return versions


def expected_history(work: Workload) -> dict[int, list[tuple[dict[str, Any], int, int | None]]]:
    return {
        key: [(v.row, v.valid_from, v.valid_to) for v in versions] for key, versions in work.history.items() if versions
    }


@settings(max_examples=300, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    steps=st.integers(0, 120),
    runs=st.integers(1, 6),
    buckets=st.integers(1, 4),
)
def test_the_runs_folded_give_the_source_table_and_its_versions(seed: int, steps: int, runs: int, buckets: int) -> None:
    work = workload(seed, steps)
    rng = random.Random(seed ^ 0x5EED)
    mirror = Mirror(buckets)
    for records in runs_of(work, runs, rng):
        mirror.run(records)
    assert mirror.table() == work.table
    assert mirror.history() == expected_history(work)


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), steps=st.integers(0, 120), runs=st.integers(1, 5))
def test_applying_a_run_again_changes_nothing(seed: int, steps: int, runs: int) -> None:
    work = workload(seed, steps)
    rng = random.Random(seed)
    state: Applied = Applied(state=[], history=[])
    for records in runs_of(work, runs, rng):
        changes = changes_from_rows(records, KEY)
        once = apply(state.state, changes, KEY, state.history, state.truncates)
        twice = apply(once.state, changes, KEY, once.history, once.truncates)
        assert twice == once
        state = once
    assert {row["id"]: row for row in visible(state.state)} == work.table


def envelope(op: str, key: int, lsn: int, offset: int, v: int = 0, snapshot: str = "false") -> dict[str, Any]:
    row = {"id": key, "v": v}
    return {
        "partition": 0,
        "offset": offset,
        "op": op,
        "before": row if op == "d" else None,
        "after": row if op != "d" else None,
        "source": {"lsn": lsn, "ts_ms": offset, "snapshot": snapshot, "txId": 1},
    }


def test_a_redelivered_update_after_a_delete_does_not_bring_the_key_back() -> None:
    first = apply([], changes_from_rows([envelope("c", 1, 10, 0), envelope("d", 1, 20, 1)], KEY), KEY)
    assert first.state[0][DELETED] and visible(first.state) == []
    again = apply(first.state, changes_from_rows([envelope("c", 1, 10, 2, v=9)], KEY), KEY, first.history)
    assert visible(again.state) == [] and again.history == first.history


def test_a_snapshot_read_is_not_compared_with_streaming_lsns() -> None:
    """A transaction that wrote before the snapshot's LSN and committed after it streams after the
    snapshot with a lower LSN: it is newer, and applied."""
    changes = [envelope("r", 1, 50, 0, v=1, snapshot="last"), envelope("u", 1, 40, 1, v=2)]
    applied = apply([], changes_from_rows(changes, KEY), KEY)
    assert visible(applied.state) == [{"id": 1, "v": 2}]
    assert applied.state[0][LSN] == 40 and applied.state[0][OP] == "u"


def test_a_truncate_deletes_only_the_keys_whose_last_change_is_before_it() -> None:
    rows = [envelope("c", 1, 10, 0), envelope("c", 2, 30, 1), {**envelope("t", 0, 20, 2), "after": None}]
    applied = apply([], changes_from_rows(rows, KEY), KEY)
    assert visible(applied.state) == [{"id": 2, "v": 0}]
    assert applied.truncates == [(20, 2)]


def test_a_truncate_a_later_run_brings_re_dates_the_version_a_later_truncate_ended() -> None:
    """Key 1 made at LSN 10, truncated at 20 (partition 0) and 30 (partition 2), made again at 40.
    The first run has partitions 1 and 2: the version of LSN 10 seems ended by the truncate at 30;
    the second brings the one at 20, which ended it."""

    def at(partition: int, record: dict[str, Any]) -> dict[str, Any]:
        lsn = record["source"]["lsn"]
        return {**record, "partition": partition, "source": {**record["source"], "ts_ms": lsn * 100}}

    def truncate(partition: int, lsn: int) -> dict[str, Any]:
        return {**at(partition, envelope("t", 0, lsn, 0)), "after": None}

    made = [at(1, envelope("c", 1, 10, 0, v=1)), truncate(2, 30), at(1, envelope("c", 1, 40, 1, v=2))]
    first = apply([], changes_from_rows(made, KEY), KEY)
    assert [(v[VALID_FROM], v[VALID_TO]) for v in first.history] == [(1000, 3000), (4000, None)]
    second = apply(first.state, changes_from_rows([truncate(0, 20)], KEY), KEY, first.history, first.truncates)
    assert [(v[VALID_FROM], v[VALID_TO]) for v in second.history] == [(1000, 2000), (4000, None)]
    assert second.truncates == [(20, 2000), (30, 3000)]
    assert visible(second.state) == [{"id": 1, "v": 2}]


def test_apply_tables_keeps_the_columns_and_adds_new_ones_at_the_end() -> None:
    after = pa.struct([pa.field("id", pa.int64()), pa.field("v", pa.int64())])
    source = pa.struct([pa.field("lsn", pa.int64()), pa.field("ts_ms", pa.int64()), pa.field("snapshot", pa.string())])
    schema = pa.schema(
        [
            ("partition", pa.int32()),
            ("offset", pa.int64()),
            ("op", pa.string()),
            ("before", after),
            ("after", after),
            ("source", source),
        ]
    )
    first = pa.Table.from_pylist([envelope("c", 1, 10, 0, v=5)], schema=schema)
    state, history, truncates = apply_tables(None, first, KEY)
    assert state.column_names[:2] == ["id", "v"] and state.column("v").to_pylist() == [5]
    wider = pa.struct([*after, pa.field("w", pa.string())])
    second_schema = schema.set(3, pa.field("before", wider)).set(4, pa.field("after", wider))
    second = pa.Table.from_pylist(
        [{**envelope("u", 1, 20, 1, v=6), "after": {"id": 1, "v": 6, "w": "x"}}], schema=second_schema
    )
    state, history, truncates = apply_tables(state, second, KEY, history, truncates)
    assert state.column_names[:3] == ["id", "v", "w"]
    assert state.select(["id", "v", "w"]).to_pylist() == [{"id": 1, "v": 6, "w": "x"}]
    assert history.column(VALID_TO).to_pylist() == [1, None]
    assert PARTITIONS > 1  # the model's keys do move between partitions' runs
