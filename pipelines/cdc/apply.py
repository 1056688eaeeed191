"""The mirror's rule: a bucket's state and a run's changes into the bucket's new state and history.

The state holds one row per key ever seen: the source's columns as the last applied change left
them, and the bookkeeping columns below. A deleted key stays as a row with ``_cdc_deleted`` true
(readers never see it) so that a re-delivered older change cannot bring it back.

Per key, changes are applied in Kafka offset order (a key's changes are all in one partition, in
the order the connector emitted them), with two exceptions:

* **already seen**: a change at or before the offset the key's row last saw in that partition was
  applied (or skipped) by an earlier run, and is passed over;
* **re-delivered**: a streaming change (c, u, d) whose ``source.lsn`` is at or below the LSN of the
  last *streaming* change applied to the key is a re-delivery after a connector restart (the same
  change at a new offset), and is skipped. Snapshot reads (r) are never compared with streaming
  LSNs (a transaction committed after the snapshot may have written at a lower LSN) and never move
  the key's streaming LSN.

A truncate (t, at LSN T) deletes every key whose last applied change (streaming or snapshot read) is
at an LSN below T. PostgreSQL's TRUNCATE takes an exclusive lock, so every other change of the table
is wholly before or after T: a key's truncates are applied in LSN order between its own changes,
whatever partition they came in. A truncate comes in one partition and the key's earlier changes
in another, possibly in a later run; so the table keeps every truncate it has applied
(``Applied.truncates``, handed to the next run) and applies them again to every key of the bucket
(a no-op for a key whose last change is after T): a change from before a truncate that a later run
brings is applied, then deleted again by the truncate it preceded, and the history gets its version
(ended at that truncate, which re-dates a version a later truncate seemed to end).

**Invariant (idempotence):** applying the same changes twice gives the same state and history:
``a = apply(s, c, k, h, t)``, then ``apply(a.state, c, k, a.history, a.truncates) == a``. A run
retried on a bucket it already swapped gives the same bucket.

Every applied c, u or r is a version in the history: its row, ``valid_from`` the commit time
(``source.ts_ms``), ``valid_to`` the commit time of the change that replaced or deleted it (null
while current). Pure Python over rows; :func:`apply_tables` is the same over Arrow tables.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import pyarrow as pa

from pipelines.cdc.events import DELETE, READ, TOMBSTONE, TRUNCATE, Change, Key, changes_from_table

DELETED: Final = "_cdc_deleted"
"""True: the key is deleted in the source (the row is a tombstone, hidden from readers)."""
LSN: Final = "_cdc_lsn"
"""The LSN of the last streaming change applied to the key (null after only snapshot reads): a
streaming change at or below it is a re-delivery."""
LAST_LSN: Final = "_cdc_last_lsn"
"""The LSN of the last change applied to the key (c, u, d, r; not a truncate): a truncate above it
deletes the key."""
OP: Final = "_cdc_op"
"""The op of the last change applied (c, u, d, r, t)."""
TS: Final = "_cdc_ts"
"""The commit time (ms) of the last change applied."""
PARTITION: Final = "_cdc_partition"
OFFSET: Final = "_cdc_offset"
"""The partition and offset of the last change of the key seen (applied or skipped as a re-delivery)."""
STATE_COLUMNS: Final = (DELETED, LSN, LAST_LSN, OP, TS, PARTITION, OFFSET)
STATE_TYPES: Final = (pa.bool_(), pa.int64(), pa.int64(), pa.string(), pa.int64(), pa.int32(), pa.int64())

VALID_FROM: Final = "valid_from"
VALID_TO: Final = "valid_to"
END_LSN: Final = "_cdc_end_lsn"
"""The LSN of the change or truncate that ended a version (null while current)."""
HISTORY_COLUMNS: Final = (LSN, OP, PARTITION, OFFSET, VALID_FROM, VALID_TO, END_LSN)
HISTORY_TYPES: Final = (pa.int64(), pa.string(), pa.int32(), pa.int64(), pa.int64(), pa.int64(), pa.int64())
"""A history row: the version's source columns, the LSN, op, partition and offset of the change that
made it, and when it was valid (commit times in ms; ``valid_to`` null: the current version)."""

Row = dict[str, Any]
Truncate = tuple[int, int | None]
"""A truncate the table has applied: its LSN and its commit time (ms)."""


@dataclass(frozen=True)
class Applied:
    """A bucket after a run: its state rows and its history rows, each ordered by key (a key's
    history in the order its versions were made)."""

    state: list[Row]
    history: list[Row] = field(default_factory=list)
    truncates: list[Truncate] = field(default_factory=list)
    """Every truncate applied so far, in LSN order (the next run's ``truncates``)."""


def apply(
    state: Iterable[Mapping[str, Any]],
    changes: Sequence[Change],
    key: Sequence[str],
    history: Iterable[Mapping[str, Any]] = (),
    truncates: Iterable[Truncate] = (),
) -> Applied:
    """The bucket's new state and history (see the module doc for the rule and its invariant).

    ``changes`` are a run's changes of the bucket's keys, plus every truncate of the run; in offset
    order within each partition (their order across partitions does not matter). ``truncates``:
    those the table applied before (the previous run's ``Applied.truncates``)."""
    rows: dict[Key, Row] = {tuple(row[c] for c in key): dict(row) for row in state}
    versions: dict[Key, list[Row]] = {}
    for row in history:
        versions.setdefault(tuple(row[c] for c in key), []).append(dict(row))
    by_key: dict[Key, list[Change]] = {}
    known: dict[int, int | None] = dict(truncates)
    for change in changes:
        if change.op == TRUNCATE:
            assert change.lsn is not None  # events.change_of requires it
            known.setdefault(change.lsn, change.ts_ms)
        elif change.op != TOMBSTONE:
            assert change.key is not None
            by_key.setdefault(change.key, []).append(change)
    ordered_truncates = [(lsn, known[lsn]) for lsn in sorted(known)]
    for k in set(rows) | set(by_key):
        _apply_key(k, rows, versions.setdefault(k, []), by_key.get(k, []), ordered_truncates, key)
    ordered = sorted(rows, key=_sortable)
    return Applied(
        state=[rows[k] for k in ordered],
        history=[version for k in sorted(versions, key=_sortable) for version in versions[k]],
        truncates=ordered_truncates,
    )


def _apply_key(
    k: Key,
    rows: dict[Key, Row],
    versions: list[Row],
    changes: list[Change],
    truncates: list[Truncate],
    key: Sequence[str],
) -> None:
    pending = iter(truncates)
    due = next(pending, None)
    truncated = False  # a truncate after the key's last change was met in this walk
    for change in sorted(changes, key=lambda c: (c.partition, c.offset)):
        row = rows.get(k)
        if row is not None and row[PARTITION] == change.partition and change.offset <= row[OFFSET]:
            continue  # already seen by the run that made this row
        if row is not None and change.op != READ and row[LSN] is not None and change.lsn <= row[LSN]:
            row[PARTITION], row[OFFSET] = change.partition, change.offset  # a re-delivery, skipped
            continue
        assert change.lsn is not None
        while due is not None and due[0] < change.lsn:
            truncated = _truncate(k, rows, versions, due, truncated)
            due = next(pending, None)
        _change(k, rows, versions, change, key)
        truncated = False
    while due is not None:
        truncated = _truncate(k, rows, versions, due, truncated)
        due = next(pending, None)
    for version in versions:
        # a truncate a run met after the change that (then) ended this version: it ended here
        for lsn, ts_ms in truncates:
            if version[END_LSN] is not None and version[LSN] < lsn < version[END_LSN]:
                version[VALID_TO], version[END_LSN] = ts_ms, lsn
                break


def _change(k: Key, rows: dict[Key, Row], versions: list[Row], change: Change, key: Sequence[str]) -> None:
    before = rows.get(k)
    if change.op == DELETE:
        data = _data(before) if before is not None else dict(zip(key, k, strict=True))
    else:
        assert change.row is not None
        data = dict(change.row)
    streaming_lsn = change.lsn if change.op != READ else (before[LSN] if before is not None else None)
    rows[k] = {
        **data,
        DELETED: change.op == DELETE,
        LSN: streaming_lsn,
        LAST_LSN: change.lsn,
        OP: change.op,
        TS: change.ts_ms,
        PARTITION: change.partition,
        OFFSET: change.offset,
    }
    assert change.lsn is not None
    _close(versions, change.ts_ms, change.lsn)
    if change.op != DELETE:
        versions.append(
            {
                **data,
                LSN: change.lsn,
                OP: change.op,
                PARTITION: change.partition,
                OFFSET: change.offset,
                VALID_FROM: change.ts_ms,
                VALID_TO: None,
                END_LSN: None,
            }
        )


def _truncate(k: Key, rows: dict[Key, Row], versions: list[Row], truncate: Truncate, truncated: bool) -> bool:
    """The truncate applied to the key; whether a truncate after its last change has now been met.

    Only the first truncate after the key's last change deletes it. A run may meet it after a later
    one (its partition was behind): the key, deleted by the later one, is then re-dated to it."""
    row = rows.get(k)
    lsn, ts_ms = truncate
    if row is None or row[LAST_LSN] >= lsn or truncated:
        return truncated  # the key's last change came after it, or an earlier truncate deleted it
    if not row[DELETED]:
        row[DELETED], row[OP] = True, TRUNCATE
    if row[OP] == TRUNCATE:
        row[TS] = ts_ms
    _close(versions, ts_ms, lsn)
    return True


def _close(versions: list[Row], ts_ms: int | None, lsn: int) -> None:
    """The key's last version ended by the change (or truncate) at ``lsn``, unless one before it
    ended it (a change from before a truncate, brought late, ends the version instead of it)."""
    if versions and (versions[-1][END_LSN] is None or versions[-1][END_LSN] > lsn):
        versions[-1][VALID_TO], versions[-1][END_LSN] = ts_ms, lsn


def _data(row: Mapping[str, Any]) -> Row:
    return {name: value for name, value in row.items() if not name.startswith("_cdc_")}


def _sortable(k: Key) -> tuple[tuple[bool, Any], ...]:
    return tuple((value is None, value) for value in k)


def visible(state: Iterable[Mapping[str, Any]]) -> list[Row]:
    """What readers see of a state: the rows not deleted, without the bookkeeping columns."""
    return [_data(row) for row in state if not row[DELETED]]


def apply_tables(
    state: pa.Table | None,
    changes: pa.Table,
    key: Sequence[str],
    history: pa.Table | None = None,
    truncates: Iterable[Truncate] = (),
) -> tuple[pa.Table, pa.Table, list[Truncate]]:
    """:func:`apply` over Arrow: the state and history tables of a bucket and the run's envelope
    rows (see pipelines.cdc.events) into the new state and history tables, and the truncates.

    The source's columns are the state's, then those the changes' ``after`` (or ``before``) images
    add (a column added in the source is added at the end, null in older rows)."""
    source = _source_schema(state, changes)
    applied = apply(
        state.to_pylist() if state is not None else (),
        changes_from_table(changes, key),
        key,
        history.to_pylist() if history is not None else (),
        truncates,
    )
    state_schema = pa.schema([*source, *(pa.field(n, t) for n, t in zip(STATE_COLUMNS, STATE_TYPES, strict=True))])
    history_schema = pa.schema(
        [*source, *(pa.field(n, t) for n, t in zip(HISTORY_COLUMNS, HISTORY_TYPES, strict=True))]
    )
    return (
        pa.Table.from_pylist(applied.state, schema=state_schema),
        pa.Table.from_pylist(applied.history, schema=history_schema),
        applied.truncates,
    )


def _source_schema(state: pa.Table | None, changes: pa.Table) -> list[pa.Field]:
    fields: dict[str, pa.Field] = {}
    if state is not None:
        fields.update((f.name, f) for f in state.schema if not f.name.startswith("_cdc_"))
    for image in ("after", "before"):
        if image in changes.column_names and pa.types.is_struct(changes.schema.field(image).type):
            for f in changes.schema.field(image).type:
                fields.setdefault(f.name, f)
    return list(fields.values())
