"""The offsets of a split that hold no row (pipelines.executor.offsets): the gaps compaction left
in a fetch, and the ranges they are staged as."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipelines.errors import LoadError
from pipelines.executor.offsets import (
    MAX_RANGE_OFFSETS,
    OFFSET_RANGES_SCHEMA,
    OffsetRange,
    compacted_gaps,
    range_offsets,
    ranges_batch,
)

pytestmark = pytest.mark.unit


def gaps(offset: int, last: int, messages: list[int], skipped: list[tuple[int, int, str]]) -> list[tuple[int, int]]:
    return [(g.first, g.last) for g in compacted_gaps(offset, last, messages, skipped)]


def test_a_gap_at_the_start_between_messages_and_at_the_end() -> None:
    # asked for 10: the first record left is 13; 16 is gone; the batch read ends at 19 (its last
    # records removed, or the next record left lies past the split)
    assert gaps(10, 19, [13, 14, 15, 17], []) == [(10, 12), (16, 16), (18, 19)]


def test_no_gap_when_every_offset_is_a_message_or_skipped() -> None:
    assert gaps(10, 15, [10, 11, 14, 15], [(12, 13, "aborted")]) == []
    assert gaps(10, 12, [], [(10, 12, "control")]) == []


def test_gaps_beside_skipped_ranges_and_an_emptied_batch() -> None:
    assert gaps(0, 9, [0, 9], [(2, 3, "aborted"), (5, 5, "control")]) == [(1, 1), (4, 4), (6, 8)]
    assert gaps(20, 26, [], []) == [(20, 26)]  # a batch the cleaner emptied: nothing came back but its offsets


def test_gaps_are_counted_as_compacted() -> None:
    (gap,) = compacted_gaps(5, 9, [], [])
    assert gap == OffsetRange(5, 9, "compacted") and gap.offsets == 5


def test_overlapping_or_outside_offsets_are_refused_not_counted() -> None:
    with pytest.raises(LoadError, match=r"^t-0: offsets fetched at 10 overlap: 12\.\.12 and 12\.\.13$"):
        compacted_gaps(10, 20, [11, 12], [(12, 13, "aborted")], where="t-0")
    with pytest.raises(LoadError, match=r"offsets 9\.\.12 fetched at 10 lie outside 10\.\.20"):
        compacted_gaps(10, 20, [9, 12], [])
    with pytest.raises(LoadError, match=r"lie outside 10\.\.20"):
        compacted_gaps(10, 20, [12], [(18, 21, "control")])


@given(st.sets(st.integers(0, 60)), st.data())
def test_messages_skipped_and_gaps_hold_every_offset_once(present: set[int], data: st.DataObject) -> None:
    """Whatever survives of [0, 60], split into messages and skipped runs: the gaps are exactly the rest."""
    ordered = sorted(present)
    messages: list[int] = []
    skipped: list[tuple[int, int, str]] = []
    for offset in ordered:  # consecutive offsets may join the skipped run before them
        if skipped and skipped[-1][1] == offset - 1 and data.draw(st.booleans()):
            skipped[-1] = (skipped[-1][0], offset, "control")
        elif data.draw(st.booleans()):
            skipped.append((offset, offset, "aborted"))
        else:
            messages.append(offset)
    found = compacted_gaps(0, 60, messages, skipped)
    covered = [o for g in found for o in range(g.first, g.last + 1)]
    assert sorted(covered) == [o for o in range(61) if o not in present]
    assert all(a.last + 1 < b.first for a, b in itertools.pairwise(found))  # maximal, in order


def test_ranges_are_staged_in_rows_of_at_most_max_range_offsets() -> None:
    long = OffsetRange(5, 5 + 2 * MAX_RANGE_OFFSETS, "compacted")
    batch = ranges_batch("t", 3, [OffsetRange(0, 2, "compacted"), long])
    assert batch.schema == OFFSET_RANGES_SCHEMA
    assert batch.to_pylist() == [
        {"topic": "t", "partition": 3, "offset": 0, "last": 2},
        {"topic": "t", "partition": 3, "offset": 5, "last": 4 + MAX_RANGE_OFFSETS},
        {"topic": "t", "partition": 3, "offset": 5 + MAX_RANGE_OFFSETS, "last": 4 + 2 * MAX_RANGE_OFFSETS},
        {"topic": "t", "partition": 3, "offset": 5 + 2 * MAX_RANGE_OFFSETS, "last": 5 + 2 * MAX_RANGE_OFFSETS},
    ]
    assert ranges_batch("t", 3, []).num_rows == 0


def test_range_offsets_expands_ranges_in_bounded_pieces() -> None:
    firsts, lasts = np.array([1, 10, 100, 200]), np.array([3, 10, 102, 201])
    pieces = range_offsets(firsts, lasts, budget=3)
    assert [p.tolist() for p in pieces] == [[1, 2, 3], [10, 100, 101, 102], [200, 201]]
    assert np.concatenate(range_offsets(firsts, lasts)).tolist() == [1, 2, 3, 10, 100, 101, 102, 200, 201]
    assert range_offsets(np.array([], np.int64), np.array([], np.int64)) == []
