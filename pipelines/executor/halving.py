"""Find the culprits of a failed whole-chunk operation by halving, so good items keep chunk speed.

Role: the one search every chunk-at-once step of the decoders shares (payload parsing, event-time
conversion). Invariant: every item of [lo, hi) ends up in exactly one good piece or as one bad
(index, reason) pair, and the good pieces are in index order; a chunk that succeeds whole costs one
attempt, and each bad item costs about log2(chunk) extra attempts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import pyarrow as pa


class Parsed(NamedTuple):
    """One good piece: the item indexes of the rows of ``table``, in order."""

    indexes: list[int]
    """Message indexes of the rows of ``table``, in order."""
    table: pa.Table


def halve_until_culprits(
    lo: int,
    hi: int,
    attempt: Callable[[int, int], pa.Table],
    pieces: list[Parsed],
    bad: list[tuple[int, str]],
) -> None:
    """Apply ``attempt`` to [lo, hi); on failure split in halves until single items fail alone."""
    if lo >= hi:
        return
    try:
        table = attempt(lo, hi)
    except ValueError as exc:
        if hi - lo == 1:
            bad.append((lo, str(exc)))
            return
    else:
        pieces.append(Parsed(list(range(lo, hi)), table))
        return
    middle = (lo + hi) // 2
    halve_until_culprits(lo, middle, attempt, pieces, bad)
    halve_until_culprits(middle, hi, attempt, pieces, bad)


def first_line(text: str) -> str:
    """The first line of a parser's error (Arrow's run on over several), as a bad record's reason."""
    return text.strip().splitlines()[0][:300] if text.strip() else "unparseable"
