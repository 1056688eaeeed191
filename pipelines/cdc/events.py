"""Debezium's change events into typed changes: the envelope as the raw layer holds it (or a decoded
Arrow table), one :class:`Change` per message.

A row of the input has the raw layer's ``partition`` and ``offset``, the envelope's decoded fields
``op``, ``before``, ``after`` and ``source`` (a struct with ``lsn``, ``ts_ms``, ``snapshot`` and
``txId``), and, when the message had no value, ``tombstone`` true (its decoded fields null). The key
is read from the row image (``after`` for c/u/r, ``before`` for d), or from ``key_decoded`` when the
raw layer decoded the message keys (the only place a tombstone's key is). A truncate (op ``t``) has
no key and no image. Anything else is malformed: :class:`~pipelines.errors.ChangeEventError`
naming the record by partition and offset, never a change guessed at.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeGuard

import pyarrow as pa

from pipelines.errors import ChangeEventError

CREATE: Final = "c"
UPDATE: Final = "u"
DELETE: Final = "d"
READ: Final = "r"
"""A snapshot read: the row as the connector's initial snapshot found it."""
TRUNCATE: Final = "t"
TOMBSTONE: Final = "tombstone"
"""Not one of Debezium's ops: a message with a null value, which follows every delete so that
compaction may drop the key. It says nothing the delete before it did not, and is not applied."""

STREAMING_OPS: Final = frozenset({CREATE, UPDATE, DELETE, TRUNCATE})
"""The ops read from the log after the snapshot; only their LSNs order a key's changes."""
ENVELOPE_OPS: Final = frozenset({CREATE, UPDATE, DELETE, READ, TRUNCATE})

KEY_DECODED: Final = "key_decoded"
NOT_A_SNAPSHOT: Final = frozenset({"false", ""})
"""``source.snapshot`` values of streamed events (Debezium writes a string: true, first, last,
incremental, false; older versions a boolean)."""

Key = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Change:
    """One change event, typed. Immutable, so safe to share."""

    partition: int
    offset: int
    op: str
    """c, u, d, r, t, or ``tombstone``."""
    key: Key | None
    """The key columns' values in the mirror's key order; None for a truncate (and a tombstone
    whose key was not decoded)."""
    row: Mapping[str, Any] | None
    """The row after the change (c, u, r); None for d, t and tombstones."""
    lsn: int | None
    """``source.lsn``: the change's position in the source's write-ahead log. None for tombstones."""
    ts_ms: int | None
    """``source.ts_ms``: when the source committed the change (the history's valid_from)."""
    snapshot: bool = False
    tx_id: int | None = None

    @property
    def streaming(self) -> bool:
        """Read from the log (c, u, d, t), as opposed to a snapshot read or a tombstone."""
        return self.op in STREAMING_OPS

    @property
    def where(self) -> str:
        """The record, for messages: ``partition 3 offset 17``."""
        return f"partition {self.partition} offset {self.offset}"


def changes_from_table(table: pa.Table, key: Sequence[str]) -> list[Change]:
    """The changes of a raw-layer (or decoded) Arrow table, in its row order."""
    return changes_from_rows(table.to_pylist(), key)


def changes_from_rows(rows: Iterable[Mapping[str, Any]], key: Sequence[str]) -> list[Change]:
    """The changes of envelope rows (see the module doc), in their order."""
    if not key:
        raise ChangeEventError("a mirror needs at least one key column")
    return [change_of(row, key) for row in rows]


def change_of(row: Mapping[str, Any], key: Sequence[str]) -> Change:
    """One envelope row as a :class:`Change`; ChangeEventError naming the record if malformed."""
    partition, offset = row.get("partition"), row.get("offset")
    if not _is_int(partition) or not _is_int(offset):
        raise ChangeEventError(f"a change event without its partition and offset: {_short(row)}")
    where = f"partition {partition} offset {offset}"
    op, flagged = row.get("op"), row.get("tombstone")
    # a tombstone is said so (the raw layer's flag) or, where no flag is kept, is a message of no
    # envelope at all; a flag that contradicts the envelope is a misread topic, never guessed at
    if flagged is True or ("tombstone" not in row and op is None and row.get("source") is None):
        if op is not None or row.get("source") is not None:
            raise ChangeEventError(f"{where}: a tombstone (a null value) with an envelope (op {op!r})")
        return Change(partition, offset, TOMBSTONE, _decoded_key(row, key, where), None, None, None)
    if op not in ENVELOPE_OPS:
        raise ChangeEventError(f"{where}: op {op!r} is not one of c, u, d, r, t")
    source = row.get("source")
    if not isinstance(source, Mapping):
        raise ChangeEventError(f"{where}: op {op!r} without its source block")
    lsn, ts_ms = source.get("lsn"), source.get("ts_ms")
    if not _is_int(lsn):
        raise ChangeEventError(f"{where}: op {op!r} without source.lsn (got {lsn!r})")
    if not _is_int(ts_ms):
        raise ChangeEventError(f"{where}: op {op!r} without source.ts_ms (got {ts_ms!r})")
    snapshot = source.get("snapshot")
    is_snapshot = snapshot is True or (isinstance(snapshot, str) and snapshot not in NOT_A_SNAPSHOT)
    tx_id = source.get("txId")
    if op == TRUNCATE:
        return Change(partition, offset, op, None, None, lsn, ts_ms, is_snapshot, tx_id)
    image_name = "before" if op == DELETE else "after"
    image = row.get(image_name)
    if not isinstance(image, Mapping):
        raise ChangeEventError(f"{where}: op {op!r} without its {image_name!r} row")
    missing = [column for column in key if column not in image or image[column] is None]
    if missing:
        raise ChangeEventError(f"{where}: the {image_name!r} row has no key column {missing[0]!r}")
    after = dict(image) if op != DELETE else None
    return Change(partition, offset, op, tuple(image[column] for column in key), after, lsn, ts_ms, is_snapshot, tx_id)


def _is_int(value: object) -> TypeGuard[int]:
    """An integer, and not a bool (which Python counts as one)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _decoded_key(row: Mapping[str, Any], key: Sequence[str], where: str) -> Key | None:
    decoded = row.get(KEY_DECODED)
    if decoded is None:
        return None
    if not isinstance(decoded, Mapping) or any(column not in decoded for column in key):
        raise ChangeEventError(f"{where}: the tombstone's key_decoded does not hold the key columns {list(key)}")
    return tuple(decoded[column] for column in key)


def _short(row: Mapping[str, Any]) -> str:
    text = repr(dict(row))
    return text if len(text) <= 200 else text[:197] + "..."
