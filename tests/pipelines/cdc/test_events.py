"""Debezium's envelope into typed changes (pipelines.cdc.events): every op, tombstones, truncates,
and malformed envelopes refused with the record named."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from pipelines.cdc.events import TOMBSTONE, Change, change_of, changes_from_table
from pipelines.errors import ChangeEventError

pytestmark = pytest.mark.unit

KEY = ["id"]
SOURCE = {"lsn": 42, "ts_ms": 1700, "snapshot": "false", "txId": 7}


def envelope(**fields: Any) -> dict[str, Any]:
    return {"partition": 2, "offset": 9, "before": None, "after": None, "source": SOURCE, **fields}


def test_create_update_and_snapshot_read_carry_the_row_after() -> None:
    change = change_of(envelope(op="u", after={"id": 3, "v": "x"}), KEY)
    assert change == Change(2, 9, "u", (3,), {"id": 3, "v": "x"}, 42, 1700, False, 7)
    assert change.streaming
    read = change_of(envelope(op="r", after={"id": 3}, source={**SOURCE, "snapshot": "last"}), KEY)
    assert read.snapshot and not read.streaming


def test_a_delete_takes_its_key_from_the_row_before() -> None:
    change = change_of(envelope(op="d", before={"id": 3, "v": None}), KEY)
    assert change.key == (3,) and change.row is None


def test_a_truncate_has_no_key() -> None:
    change = change_of(envelope(op="t"), KEY)
    assert change.key is None and change.lsn == 42 and change.streaming


def test_a_tombstone_is_recognised_and_keyed_by_the_decoded_key() -> None:
    change = change_of({"partition": 0, "offset": 1, "tombstone": True, "key_decoded": {"id": 5}}, KEY)
    assert change.op == TOMBSTONE and change.key == (5,) and change.lsn is None
    bare = change_of({"partition": 0, "offset": 2, "op": None, "source": None}, KEY)
    assert bare.op == TOMBSTONE and bare.key is None


@pytest.mark.parametrize(
    ("row", "says"),
    [
        (envelope(op="x"), "partition 2 offset 9: op 'x' is not one of c, u, d, r, t"),
        (envelope(op="c"), "partition 2 offset 9: op 'c' without its 'after' row"),
        (envelope(op="d", after={"id": 1}), "partition 2 offset 9: op 'd' without its 'before' row"),
        (envelope(op="c", after={"v": 1}), "partition 2 offset 9: the 'after' row has no key column 'id'"),
        (envelope(op="u", after={"id": 1}, source={"ts_ms": 1}), "partition 2 offset 9: op 'u' without source.lsn"),
        (envelope(op="u", after={"id": 1}, source=None), "partition 2 offset 9: op 'u' without its source block"),
        ({"op": "c"}, "a change event without its partition and offset"),
        ({"partition": True, "offset": 1, "op": "c"}, "a change event without its partition and offset"),
        (
            envelope(op="u", after={"id": 1}, source={**SOURCE, "lsn": True}),
            "partition 2 offset 9: op 'u' without source.lsn",
        ),
        (envelope(op="u", after={"id": 1}, source={"lsn": 5}), "partition 2 offset 9: op 'u' without source.ts_ms"),
        # a flag that contradicts the envelope: a topic misread, not a tombstone guessed at
        (
            envelope(op="u", after={"id": 1}, tombstone=True),
            "partition 2 offset 9: a tombstone",
        ),
        (envelope(op=None, source=None, tombstone=False), "partition 2 offset 9: op None is not one of c, u, d, r, t"),
    ],
)
def test_a_malformed_envelope_is_refused_naming_the_record(row: dict[str, Any], says: str) -> None:
    with pytest.raises(ChangeEventError, match="^" + says.replace("(", r"\(")):
        change_of(row, KEY)


def test_an_arrow_table_of_envelopes() -> None:
    image = pa.struct([("id", pa.int64()), ("v", pa.string())])
    table = pa.table(
        {
            "partition": pa.array([0, 0], pa.int32()),
            "offset": pa.array([4, 5], pa.int64()),
            "op": ["c", None],
            "before": pa.array([None, None], image),
            "after": pa.array([{"id": 1, "v": "a"}, None], image),
            "source": pa.array([SOURCE, None]),
            "tombstone": [False, True],
            "key_decoded": pa.array([{"id": 1}, {"id": 1}]),
        }
    )
    assert [(c.op, c.key, c.offset) for c in changes_from_table(table, KEY)] == [("c", (1,), 4), (TOMBSTONE, (1,), 5)]
