"""The offsets of a split that hold no row: what a read-committed source skips, and what compaction removed.

Role: account for every offset of a split. A fetch returns messages (they become rows or bad
records), the ranges a read-committed source leaves out (records of aborted transactions,
transaction markers: kafkalog.client.committed), and says up to which offset it read (its last
complete batch: ``FetchResult.last_offset``). Every other offset from the one asked up to there
holds no record any more: the log cleaner of a compacted topic removed it (a fetch from a removed
offset returns the next record that is left, and a batch the cleaner thinned or emptied keeps its
last offset). ``compacted_gaps`` finds those gaps; they are counted as ``compacted``.

The three kinds are staged as ranges (OFFSET_RANGES_SCHEMA: first offset, last offset) in files of
their own, one kind per file, so that reconciliation (pipelines.ingest.reconcile) accounts for
every offset of ``[start, end)`` from the staged files alone: rows + quarantined + aborted +
markers + compacted = end - start, each offset once. Ranges, not one row per offset: a compacted
topic may have removed millions of offsets between two records that are left.

Invariant: in one fetch, the messages and the skipped ranges never overlap (the client keeps them
apart); ``compacted_gaps`` refuses them if they do, since a gap found among overlapping offsets
would be a wrong count, not compaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from pipelines.errors import LoadError
from pipelines.executor.rows import ddl_of

SKIPPED_REASONS = ("aborted", "control", "compacted")
"""Why an offset holds no row: a record of an aborted transaction (skipped reading committed), a
transaction marker (never a row), or an offset the log cleaner of a compacted topic removed."""

OFFSET_RANGES_SCHEMA = pa.schema(
    [("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()), ("last", pa.int64())]
)
"""A staged file of skipped offsets: each row the range [offset, last] of one split. Staged, not
published: the manifest keeps the counts."""
SKIPPED_DDL = ddl_of(OFFSET_RANGES_SCHEMA) + ", `reason` STRING"
"""The Spark source's ``emit=skipped``: OFFSET_RANGES_SCHEMA and the reason, one of SKIPPED_REASONS."""

MAX_RANGE_OFFSETS = 1 << 20
"""The most offsets one staged row covers (a longer range is several rows): readers that expand a
row into its offsets (Spark's ``sequence``, the driver's batches) hold at most this many at once."""


class OffsetRange(NamedTuple):
    """Offsets [first, last] of a split that hold no row, and why (one of SKIPPED_REASONS)."""

    first: int
    last: int
    reason: str

    @property
    def offsets(self) -> int:
        return self.last - self.first + 1


def compacted_gaps(
    offset: int,
    last: int,
    messages: np.ndarray | Sequence[int],
    skipped: Sequence[tuple[int, int, str]],
    *,
    where: str = "",
) -> list[OffsetRange]:
    """The ranges of [offset, last] that neither a message (its offsets, rising) nor a skipped range
    ((first, last, reason), rising) covers: what compaction removed. LoadError if two of them
    overlap (the fetch would then count an offset twice); ``where`` (a split's name) begins its message."""
    said = f"{where}: " if where else ""
    offsets = np.asarray(messages, dtype=np.int64)
    firsts = np.concatenate([offsets, np.fromiter((s[0] for s in skipped), np.int64, len(skipped))])
    lasts = np.concatenate([offsets, np.fromiter((s[1] for s in skipped), np.int64, len(skipped))])
    if skipped and len(offsets):  # both rise on their own; merged, they must rise too
        order = np.argsort(firsts, kind="stable")
        firsts, lasts = firsts[order], lasts[order]
    if len(firsts) and (firsts[0] < offset or lasts[-1] > last):
        raise LoadError(
            f"{said}offsets {int(firsts[0])}..{int(lasts[-1])} fetched at {offset} lie outside {offset}..{last}"
        )
    if len(firsts) > 1 and bool(np.any(firsts[1:] <= lasts[:-1])):
        at = int(np.argmax(firsts[1:] <= lasts[:-1]))
        raise LoadError(
            f"{said}offsets fetched at {offset} overlap: {int(firsts[at])}..{int(lasts[at])} and "
            f"{int(firsts[at + 1])}..{int(lasts[at + 1])}"
        )
    # the gap before each covered range, then the one after the last
    befores = np.concatenate([[offset], lasts + 1])
    afters = np.concatenate([firsts - 1, [last]])
    found = np.nonzero(befores <= afters)[0]
    return [OffsetRange(int(befores[i]), int(afters[i]), "compacted") for i in found]


def ranges_batch(topic: str, partition: int, ranges: Sequence[OffsetRange]) -> pa.RecordBatch:
    """OFFSET_RANGES_SCHEMA rows of ``ranges`` (in offset order), none longer than MAX_RANGE_OFFSETS."""
    firsts: list[int] = []
    lasts: list[int] = []
    for item in ranges:
        for first in range(item.first, item.last + 1, MAX_RANGE_OFFSETS):
            firsts.append(first)
            lasts.append(min(first + MAX_RANGE_OFFSETS - 1, item.last))
    count = len(firsts)
    return pa.RecordBatch.from_arrays(
        [
            pa.repeat(topic, count).cast(pa.string()),
            pa.repeat(pa.scalar(partition, pa.int32()), count),
            pa.array(firsts, pa.int64()),
            pa.array(lasts, pa.int64()),
        ],
        schema=OFFSET_RANGES_SCHEMA,
    )


def range_offsets(firsts: np.ndarray, lasts: np.ndarray, budget: int = 1 << 22) -> list[np.ndarray]:
    """The offsets the ranges [firsts[i], lasts[i]] hold, in arrays of about ``budget`` offsets at
    most (one range of up to MAX_RANGE_OFFSETS more): what a reader checks offset by offset."""
    lengths = lasts - firsts + 1
    # a run of ranges ends where the offsets before a range cross a multiple of the budget
    before = np.cumsum(lengths) - lengths
    bounds = np.flatnonzero(np.diff(before // budget)) + 1
    out: list[np.ndarray] = []
    for run in np.split(np.arange(len(firsts)), bounds):
        if not len(run):
            continue
        sizes = lengths[run]
        # each range's own offsets: its first, plus 0..length-1 counted from where it starts in the run
        begins = np.repeat(np.cumsum(sizes) - sizes, sizes)
        out.append(np.repeat(firsts[run], sizes) + (np.arange(int(sizes.sum()), dtype=np.int64) - begins))
    return out
