"""Read committed (kafkalog.client.committed): what a consumer at isolation level 1 keeps of a
fetched record set, checked on record sets built byte for byte as a transactional broker serves
them: committed and aborted transactions, their markers, plain batches and old message sets."""

from __future__ import annotations

import struct

import pytest

from kafkalog.client.committed import ABORT, COMMIT, Skipped, committed_only, control_type, holds_transactions
from kafkalog.errors import CorruptRecordError
from kafkalog.record import MessageSetBuilder, decode_all, encode_batch

pytestmark = pytest.mark.unit


def batch(base: int, count: int, producer: int = -1, *, transactional: bool = False) -> bytes:
    records = [(None, b"v%d" % (base + i), 1_000, ()) for i in range(count)]
    return encode_batch(
        records, base_offset=base, producer_id=producer, producer_epoch=0 if producer >= 0 else -1,
        base_sequence=0 if producer >= 0 else -1, transactional=transactional,
    )  # fmt: skip


def marker(offset: int, producer: int, kind: int) -> bytes:
    key = struct.pack(">hh", 0, kind)
    value = struct.pack(">hi", 0, 0)  # version, coordinator epoch
    return encode_batch(
        [(key, value, 1_000, ())], base_offset=offset, producer_id=producer, producer_epoch=0,
        transactional=True, control=True,
    )  # fmt: skip


def kept(
    data: bytes, aborted: list[tuple[int, int]] | None, start: int = 0
) -> tuple[list[bytes | None], tuple[Skipped, ...], int]:
    result = committed_only(data, decode_all(data, min_offset=start), aborted)
    return [m.value for m in result.messages], result.skipped, result.last_offset


def test_committed_transactions_are_kept_aborted_ones_and_every_marker_left_out() -> None:
    data = (
        batch(0, 3, producer=7, transactional=True)
        + marker(3, 7, COMMIT)
        + batch(4, 2, producer=8, transactional=True)
        + marker(6, 8, ABORT)
        + batch(7, 2)
    )
    values, skipped, last = kept(data, [(8, 4)])
    assert values == [b"v0", b"v1", b"v2", b"v7", b"v8"]
    assert skipped == (Skipped(3, 3, "control"), Skipped(4, 5, "aborted"), Skipped(6, 6, "control"))
    assert last == 8


def test_interleaved_transactions_abort_only_the_aborted_producer_s_batches() -> None:
    data = (
        batch(0, 2, producer=1, transactional=True)
        + batch(2, 2, producer=2, transactional=True)
        + batch(4, 1, producer=1, transactional=True)
        + marker(5, 2, COMMIT)
        + marker(6, 1, ABORT)
        + batch(7, 1, producer=1, transactional=True)  # the producer's next transaction
        + marker(8, 1, COMMIT)
    )
    values, skipped, _ = kept(data, [(1, 0)])
    assert values == [b"v2", b"v3", b"v7"]
    assert [s.reason for s in skipped] == ["aborted", "aborted", "control", "control", "control"]
    assert sum(s.offsets for s in skipped) == 6


def test_an_aborted_transaction_starts_at_its_first_offset_not_before() -> None:
    """The same producer's earlier, committed transaction stays: the aborted one begins at 3."""
    data = (
        batch(0, 2, producer=5, transactional=True) + marker(2, 5, COMMIT) + batch(3, 2, producer=5, transactional=True)
    )
    values, skipped, _ = kept(data, [(5, 3)])
    assert values == [b"v0", b"v1"]
    assert skipped == (Skipped(2, 2, "control"), Skipped(3, 4, "aborted"))


def test_without_transactions_nothing_changes() -> None:
    builder = MessageSetBuilder(magic=1, base_offset=0)
    for i in range(3):
        builder.append(b"old%d" % i, timestamp=1_000)
    data = builder.build() + batch(3, 2, producer=9) + batch(5, 1)
    messages = decode_all(data)
    result = committed_only(data, messages, None)
    assert result.messages is messages and result.skipped == ()
    assert result.last_offset == 5


def test_a_fetch_that_starts_inside_a_batch_and_ends_with_a_partial_one() -> None:
    whole = batch(0, 4, producer=3, transactional=True) + marker(4, 3, COMMIT)
    partial = batch(5, 3, producer=3, transactional=True)[:-7]
    values, skipped, last = kept(whole + partial, [], start=2)
    assert values == [b"v2", b"v3"]
    assert skipped == (Skipped(4, 4, "control"),)
    assert last == 4  # the partial batch is not walked: the next fetch starts at 5


def test_a_control_record_without_a_marker_key_is_corrupt() -> None:
    (message,) = decode_all(batch(0, 1))
    with pytest.raises(CorruptRecordError, match="no marker key"):
        control_type(message)


def test_holds_transactions_tells_what_cannot_be_forwarded_as_stored() -> None:
    """A stored fetch read committed stays as sent only without transactional or control batches:
    an idempotent producer's batch and old message sets are plain; a transaction's batch or a
    marker anywhere in the set is not; a partial trailing entry is not looked at."""
    builder = MessageSetBuilder(magic=1, base_offset=0)
    builder.append(b"old", timestamp=1_000)
    plain = builder.build() + batch(1, 2, producer=9) + batch(3, 1)
    assert not holds_transactions(plain)
    assert holds_transactions(plain + batch(4, 1, producer=7, transactional=True))
    assert holds_transactions(plain + marker(4, 7, COMMIT) + batch(5, 1))
    assert not holds_transactions(plain + batch(4, 2, producer=7, transactional=True)[:-5])
    assert not holds_transactions(b"")
