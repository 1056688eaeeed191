"""OffsetIndex and TimeIndex: lookups, ordering rules, sealing, and the checks that make a damaged
index file get rebuilt instead of trusted."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalog.errors import LogError
from kafkalog.log.index import CorruptIndexError, OffsetIndex, TimeIndex


def test_offset_index_lookup_finds_the_greatest_entry_at_or_below(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "0.index", 100, max_bytes=1024, writable=True)
    for offset, position in [(100, 0), (110, 500), (130, 1200), (170, 4000)]:
        index.append(offset, position)
    assert index.lookup(99) == (100, 0)
    assert index.lookup(100) == (100, 0)
    assert index.lookup(129) == (110, 500)
    assert index.lookup(130) == (130, 1200)
    assert index.lookup(10**9) == (170, 4000)
    assert index.last() == (170, 4000)
    assert index.problem(log_size=5000) is None
    assert "beyond the log" in (index.problem(log_size=4000) or "")


def test_offset_index_refuses_entries_that_do_not_rise(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "0.index", 0, max_bytes=1024, writable=True)
    index.append(5, 100)
    with pytest.raises(LogError):
        index.append(5, 200)
    with pytest.raises(LogError):
        index.append(6, 100)


def test_index_is_preallocated_while_active_and_trimmed_when_sealed(tmp_path: Path) -> None:
    path = tmp_path / "0.index"
    index = OffsetIndex(path, 0, max_bytes=800, writable=True)
    assert path.stat().st_size == 800
    for i in range(100):
        index.append(i, i * 10)
    assert index.is_full
    with pytest.raises(LogError, match="full"):
        index.append(100, 1000)
    index.seal()
    assert path.stat().st_size == 800
    index.close()
    index = OffsetIndex(path, 0, max_bytes=800, writable=True)
    index.reset()
    index.append(0, 0)
    index.close()
    assert path.stat().st_size == 8, "close trims the preallocated tail"


def test_a_torn_index_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "0.index"
    path.write_bytes(bytes(13))
    with pytest.raises(CorruptIndexError):
        OffsetIndex(path, 0, max_bytes=1024, writable=False)


def test_zeros_left_by_preallocation_are_a_problem(tmp_path: Path) -> None:
    path = tmp_path / "0.index"
    index = OffsetIndex(path, 0, max_bytes=1024, writable=True)
    index.append(3, 40)
    index.append(9, 400)
    index.close(trim=False)  # as a crash leaves it: 1024 bytes, mostly zeros
    reopened = OffsetIndex(path, 0, max_bytes=1024, writable=False)
    assert reopened.entries == 128
    assert reopened.problem(log_size=10_000) is not None


def test_time_index_keeps_only_rising_maxima_and_finds_the_entry_below(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "0.timeindex", 50, max_bytes=1200, writable=True)
    for timestamp, offset in [(1000, 50), (900, 52), (1000, 53), (1500, 60), (1400, 61), (2000, 70)]:
        index.maybe_append(timestamp, offset)
    assert index.all_entries() == [(1000, 0), (1500, 10), (2000, 20)]
    assert index.offset_below(1000) is None
    assert index.offset_below(1001) == 50
    assert index.offset_below(1500) == 50
    assert index.offset_below(1501) == 60
    assert index.offset_below(10**15) == 70
    assert index.last() == (2000, 70)
    assert index.problem(next_offset=71) is None
    assert "beyond the segment" in (index.problem(next_offset=70) or "")


def test_an_active_index_grows_by_doubling_up_to_its_maximum(tmp_path: Path) -> None:
    path = tmp_path / "0.index"
    index = OffsetIndex(path, 0, max_bytes=64 * 1024, writable=True)
    assert path.stat().st_size == 4096, "a new index takes one page, not its maximum"
    sizes = []
    for i in range(8192):
        index.append(i, i * 10)
        sizes.append(path.stat().st_size)
    assert sorted(set(sizes)) == [4096, 8192, 16384, 32768, 65536]
    assert index.is_full
    assert index.lookup(5000) == (5000, 50000) and index.lookup(8191) == (8191, 81910)


def test_time_index_ignores_no_timestamp(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "5.timeindex", 5, max_bytes=1200, writable=True)
    index.maybe_append(-1, 4)  # what an empty segment reports as its newest message
    index.maybe_append(-1, 7)
    assert index.entries == 0
    index.maybe_append(10, 6)
    assert index.all_entries() == [(10, 1)]
