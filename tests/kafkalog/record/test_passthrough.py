"""stored_entries: a fetched set checked shallowly and returned as stored, except the part of a first
compressed wrapper before the requested offset (decoded and cut off)."""

from __future__ import annotations

import pytest

from kafkalog.errors import CorruptRecordError
from kafkalog.record import Codec, MessageSetBuilder, decode_all, stored_entries

ALL = -(1 << 63)


def build(first: int, count: int, codec: Codec = Codec.NONE, magic: int = 1) -> bytes:
    builder = MessageSetBuilder(magic=magic, codec=codec, base_offset=first)
    for i in range(first, first + count):
        builder.append(f"v{i}".encode(), f"k{i}".encode(), 1_000 + i)
    return builder.build()


def offsets(data: bytes | memoryview) -> list[int]:
    return [m.offset for m in decode_all(data, min_offset=ALL)]


def test_plain_entries_from_the_requested_offset_go_as_stored() -> None:
    data = build(10, 5) + build(15, 5)
    head, stored, last = stored_entries(data, 10)
    assert head == [] and bytes(stored) == data and last == 19


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4])
@pytest.mark.parametrize("magic", [0, 1])
def test_wrappers_starting_at_the_requested_offset_go_as_stored(codec: Codec, magic: int) -> None:
    data = build(10, 5, codec, magic) + build(15, 5, codec, magic)
    head, stored, last = stored_entries(data, 10)
    assert head == [] and bytes(stored) == data and last == 19


@pytest.mark.parametrize("magic", [0, 1])
def test_a_fetch_inside_a_wrapper_decodes_that_wrapper_from_the_offset_on(magic: int) -> None:
    first, second = build(10, 5, Codec.GZIP, magic), build(15, 5, Codec.SNAPPY, magic)
    head, stored, last = stored_entries(first + second, 12)
    assert [(m.offset, m.key, m.value) for m in head] == [(i, f"k{i}".encode(), f"v{i}".encode()) for i in (12, 13, 14)]
    assert bytes(stored) == second and last == 19
    # only that wrapper: the set after it may be a single message beyond it
    head, stored, last = stored_entries(first, 14)
    assert [m.offset for m in head] == [14] and bytes(stored) == b"" and last == 14


def test_entries_wholly_before_the_offset_are_left_out() -> None:
    early, late = build(0, 5) + build(5, 5, Codec.GZIP), build(10, 3)
    head, stored, last = stored_entries(early + late, 10)
    assert head == [] and bytes(stored) == late and last == 12
    head, stored, last = stored_entries(early, 10)
    assert head == [] and bytes(stored) == b"" and last == -1


def test_a_partial_trailing_entry_is_left_out() -> None:
    data = build(0, 3) + build(3, 4, Codec.GZIP)
    head, stored, last = stored_entries(data[:-5], 0)
    assert head == [] and bytes(stored) == build(0, 3) and last == 2 and offsets(stored) == [0, 1, 2]
    assert stored_entries(data[:7], 0).last_offset == -1


@pytest.mark.parametrize("codec", [Codec.NONE, Codec.GZIP])
def test_a_damaged_entry_is_refused_with_its_offset(codec: Codec) -> None:
    data = bytearray(build(20, 1) + build(21, 4, codec))
    data[-3] ^= 0xFF  # inside the second entry's value (or compressed payload): its CRC fails
    with pytest.raises(CorruptRecordError, match="CRC") as raised:
        stored_entries(bytes(data), 20)
    assert raised.value.offset == 24  # the last plain message, or the wrapper (its last offset)
