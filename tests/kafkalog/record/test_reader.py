"""Readers stop before a partial trailing entry and raise CorruptRecordError naming the entry for anything else."""

from __future__ import annotations

import itertools
import struct
import zlib
from collections.abc import Callable, Iterable

import pytest
import snappy

from kafkalog.errors import CorruptRecordError, RecordTooLargeError, UnsupportedCodecError
from kafkalog.record import (
    Codec,
    Message,
    TimestampType,
    decode_all,
    decode_batches,
    decode_messages,
    encode_batch,
    iter_entries,
    kernels,
    last_entry_offset,
)

from . import hand

CREATE = TimestampType.CREATE_TIME
APPEND = TimestampType.LOG_APPEND_TIME

LIMIT = 50  # never pull more than this from a reader: a reader that loops forever must fail, not hang


def take(messages: Iterable) -> list:
    return list(itertools.islice(messages, LIMIT))


def v1_wrapper(offset: int, codec: int, payload: bytes, *, timestamp: int = 100, attributes: int = 0) -> bytes:
    return hand.entry(offset, hand.message(1, None, payload, attributes=codec | attributes, timestamp=timestamp))


def v0_wrapper(offset: int, codec: int, payload: bytes) -> bytes:
    return hand.entry(offset, hand.message(0, None, payload, attributes=codec))


def _entry_end(data: bytes, count: int) -> int:
    """Where the first ``count`` entries of ``data`` end."""
    return hand.walk(data)[count - 1].position + hand.walk(data)[count - 1].size


def mixed_set() -> list[tuple[bytes, list[Message]]]:
    """Entries of several kinds, each with the messages it decodes to."""
    v1_inner = b"".join(hand.entry(i, hand.message(1, b"in%d" % i, b"x" * i, timestamp=50 + i)) for i in range(3))
    v0_inner = hand.entry(6, hand.message(0, b"six", b"6")) + hand.entry(7, hand.message(0, None, None))
    return [
        (hand.entry(0, hand.message(1, b"k", b"v", timestamp=5)), [Message(0, 5, CREATE, b"k", b"v")]),
        (hand.entry(1, hand.message(0, None, b"zero")), [Message(1, -1, CREATE, None, b"zero")]),
        (
            v1_wrapper(4, Codec.GZIP, hand.gzip(v1_inner), timestamp=99, attributes=0x08),
            [Message(2 + i, 99, APPEND, b"in%d" % i, b"x" * i) for i in range(3)],
        ),
        (hand.entry(5, hand.message(1, b"", None, timestamp=-1)), [Message(5, -1, CREATE, b"", None)]),
        (
            v0_wrapper(7, Codec.SNAPPY, hand.snappy_xerial(v0_inner)),
            [Message(6, -1, CREATE, b"six", b"6"), Message(7, -1, CREATE, None, None)],
        ),
        (
            v1_wrapper(9, Codec.LZ4, hand.lz4_frame(v1_inner[: _entry_end(v1_inner, 2)])),
            [Message(8 + i, 50 + i, CREATE, b"in%d" % i, b"x" * i) for i in range(2)],
        ),
    ]


# --- partial trailing entries


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_every_cut_yields_exactly_the_complete_messages_before_it(kind: Callable) -> None:
    parts = mixed_set()
    data = b"".join(part for part, _ in parts)
    ends = list(itertools.accumulate(len(part) for part, _ in parts))
    shallow_offsets = [struct.unpack_from(">q", part)[0] for part, _ in parts]
    for cut in range(len(data) + 1):
        complete = sum(1 for end in ends if end <= cut)
        expected = [m for _, messages in parts[:complete] for m in messages]
        buf = kind(data[:cut])
        assert take(decode_messages(buf)) == expected, f"cut at {cut}"
        assert decode_all(buf) == expected, f"cut at {cut}"
        assert [m for batch in decode_batches(buf) for m in batch] == expected, f"cut at {cut}"
        assert [e.offset for e in take(iter_entries(buf))] == shallow_offsets[:complete], f"cut at {cut}"
        assert [e.offset for e in take(iter_entries(data, end=cut))] == shallow_offsets[:complete]


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4])
@pytest.mark.parametrize("magic", [0, 1])
def test_a_cut_compressed_wrapper_yields_all_or_nothing(magic: int, codec: Codec) -> None:
    payload = {Codec.GZIP: hand.gzip, Codec.SNAPPY: hand.snappy_xerial, Codec.LZ4: hand.lz4_frame}[codec]
    if magic == 0:
        inner = b"".join(hand.entry(10 + i, hand.message(0, None, b"value %d" % i)) for i in range(4))
        if codec == Codec.LZ4:
            data = v0_wrapper(13, codec, hand.lz4_frame(inner, legacy_checksum=True))
        else:
            data = v0_wrapper(13, codec, payload(inner))
    else:
        inner = b"".join(hand.entry(i, hand.message(1, None, b"value %d" % i, timestamp=i)) for i in range(4))
        data = v1_wrapper(13, codec, payload(inner))
    full = take(decode_messages(data))
    assert [m.offset for m in full] == [10, 11, 12, 13]
    for cut in range(len(data)):
        assert take(decode_messages(data[:cut])) == [], f"cut at {cut}"
        assert take(iter_entries(data[:cut])) == [], f"cut at {cut}"


# --- corruption


def assert_corrupt_at(
    data: bytes, position: int, offset: int, before: list[Message], *, error: type = CorruptRecordError
) -> None:
    """decode_messages yields ``before`` then raises ``error`` naming the entry at ``position``."""
    got: list[Message] = []
    with pytest.raises(error) as excinfo:
        for m in itertools.islice(decode_messages(data), LIMIT):
            got.append(m)
    assert got == before
    assert (excinfo.value.position, excinfo.value.offset) == (position, offset), str(excinfo.value)
    with pytest.raises(error) as excinfo:
        decode_all(data)
    assert (excinfo.value.position, excinfo.value.offset) == (position, offset), str(excinfo.value)


def assert_shallow_corrupt_at(data: bytes, position: int, offset: int) -> None:
    """iter_entries yields the entries before ``position``, then raises naming the entry there."""
    got = []
    with pytest.raises(CorruptRecordError) as excinfo:
        for e in itertools.islice(iter_entries(data), LIMIT):
            got.append(e)
    assert all(e.position < position for e in got), f"entries yielded at or after the bad one: {got}"
    assert (excinfo.value.position, excinfo.value.offset) == (position, offset), str(excinfo.value)


def test_a_flipped_bit_anywhere_under_the_crc_names_the_right_message() -> None:
    parts = mixed_set()
    data = b"".join(part for part, _ in parts)
    position = 0
    for index, (part, _) in enumerate(parts):
        offset = struct.unpack_from(">q", part)[0]
        before = [m for _, messages in parts[:index] for m in messages]
        for byte in range(position + 16, position + len(part)):
            for bit in range(8):
                flipped = bytearray(data)
                flipped[byte] ^= 1 << bit
                assert_corrupt_at(bytes(flipped), position, offset, before)
                assert_shallow_corrupt_at(bytes(flipped), position, offset)
        position += len(part)


def test_a_flipped_bit_passes_only_when_crc_checks_are_off() -> None:
    data = hand.entry(3, hand.message(1, b"key", b"value", timestamp=8))
    flipped = data[:-1] + b"f"
    assert take(decode_messages(flipped, verify_crc=False)) == [Message(3, 8, CREATE, b"key", b"valuf")]
    assert [e.offset for e in iter_entries(flipped, verify_crc=False)] == [3]
    with pytest.raises(CorruptRecordError):
        take(decode_messages(flipped))


@pytest.mark.parametrize("magic", [0, 1])
def test_a_size_below_the_minimum_is_corrupt(magic: int) -> None:
    good = hand.entry(0, hand.message(1, b"k", b"v", timestamp=1))
    victim = hand.message(magic, b"key", b"value", timestamp=2)
    minimum = 14 if magic == 0 else 22  # crc, magic, attributes, [timestamp], key and value lengths
    for size in range(minimum):
        data = good + hand.entry(77, victim, size=size) + victim  # plenty of bytes follow: not a partial entry
        assert_corrupt_at(data, len(good), 77, [Message(0, 1, CREATE, b"k", b"v")])
        assert_shallow_corrupt_at(data, len(good), 77)


@pytest.mark.parametrize("magic", [0, 1])
def test_a_size_below_the_minimum_is_corrupt_even_when_the_set_ends_right_after_it(magic: int) -> None:
    good = hand.entry(0, hand.message(magic, b"k", b"v", timestamp=1))
    expected = [Message(0, 1 if magic else -1, CREATE, b"k", b"v")]
    for size in range(14):  # no entry can be this small, so this is no read cut inside an entry
        for tail in range(size + 1):
            data = good + hand.entry(77, bytes(tail), size=size)
            assert_corrupt_at(data, len(good), 77, expected)
            assert_shallow_corrupt_at(data, len(good), 77)


@pytest.mark.parametrize("size", [-1, -11, -12, -13, -26, -(1 << 31)])
def test_a_negative_size_is_corrupt(size: int) -> None:
    good = hand.entry(0, hand.message(1, b"k", b"v", timestamp=1))
    victim = hand.message(1, b"key", b"value", timestamp=2)
    data = good + hand.entry(77, victim, size=size) + victim
    assert_shallow_corrupt_at(data, len(good), 77)
    assert_corrupt_at(data, len(good), 77, [Message(0, 1, CREATE, b"k", b"v")])


@pytest.mark.parametrize("length", [12, 13, 25, 26, 33, 34, 100])
def test_zeros_are_corrupt_not_an_empty_set(length: int) -> None:
    assert_corrupt_at(bytes(length), 0, 0, [])
    assert_shallow_corrupt_at(bytes(length), 0, 0)
    good = hand.entry(41, hand.message(0, None, b"before the zeros"))
    assert_corrupt_at(good + bytes(length), len(good), 0, [Message(41, -1, CREATE, None, b"before the zeros")])
    assert_shallow_corrupt_at(good + bytes(length), len(good), 0)


@pytest.mark.parametrize("magic", [2, 3, 0x7F, 0x80, 0xFF])
def test_an_unknown_magic_is_corrupt(magic: int) -> None:
    good = hand.entry(0, hand.message(0, None, b"ok"))
    bad = hand.entry(1, hand.message(magic, b"key", b"a value long enough", timestamp=5))
    assert_corrupt_at(good + bad, len(good), 1, [Message(0, -1, CREATE, None, b"ok")])
    assert_shallow_corrupt_at(good + bad, len(good), 1)


def test_offsets_that_do_not_rise_are_corrupt_for_iter_entries() -> None:
    data = hand.entry(5, hand.message(0, None, b"a")) + hand.entry(5, hand.message(0, None, b"b"))
    assert_shallow_corrupt_at(data, len(data) // 2, 5)


def _lies(magic: int) -> list[bytes]:
    ts = 3 if magic else -1
    return [
        hand.message(magic, b"key", b"value", timestamp=ts, key_length=4),  # key longer than stated
        hand.message(magic, b"key", b"value", timestamp=ts, key_length=2),
        hand.message(magic, b"key", b"value", timestamp=ts, key_length=-2),
        hand.message(magic, b"key", b"value", timestamp=ts, key_length=1 << 30),
        hand.message(magic, b"key", b"value", timestamp=ts, key_length=-(1 << 31)),
        hand.message(magic, b"key", b"value", timestamp=ts, value_length=6),
        hand.message(magic, b"key", b"value", timestamp=ts, value_length=4),
        hand.message(magic, b"key", b"value", timestamp=ts, value_length=-1),  # null, yet bytes follow
        hand.message(magic, b"key", b"value", timestamp=ts, value_length=-2),
        hand.message(magic, b"key", b"", timestamp=ts, value_length=-3),
        hand.message(magic, None, None, timestamp=ts, key_length=4),  # the key eats the value length
        hand.message(magic, b"key", None, timestamp=ts, value_length=(1 << 31) - 1),
        hand.message(magic, b"", b"", timestamp=ts) + b"trailing",  # both lengths true, bytes left over
    ]


@pytest.mark.parametrize("magic", [0, 1])
def test_key_and_value_lengths_that_lie_are_corrupt_even_with_a_good_crc(magic: int) -> None:
    good = hand.entry(0, hand.message(magic, None, b"ok", timestamp=9 if magic else -1))
    expected_good = [Message(0, 9 if magic else -1, CREATE, None, b"ok")]
    for index, told in enumerate(_lies(magic)):
        lie = struct.pack(">I", zlib.crc32(told[4:])) + told[4:]  # a CRC over the bytes as they are, lie included
        data = good + hand.entry(1, lie)
        assert_corrupt_at(data, len(good), 1, expected_good)
        assert take(iter_entries(data))[1].offset == 1, f"lie {index}: the shallow entry itself is well-formed"


@pytest.mark.parametrize("magic", [0, 1])
def test_a_wrapper_whose_lengths_lie_is_corrupt(magic: int) -> None:
    payload = hand.gzip(hand.entry(0, hand.message(magic, None, b"inner", timestamp=1 if magic else -1)))
    for lie in ({"key_length": 5}, {"key_length": -2}, {"value_length": len(payload) - 1}, {"value_length": -1}):
        data = hand.entry(0, hand.message(magic, None, payload, attributes=1, timestamp=1, **lie))
        assert_corrupt_at(data, 0, 0, [])


@pytest.mark.parametrize("magic", [0, 1])
def test_a_wrapper_inside_a_wrapper_is_corrupt(magic: int) -> None:
    ts = 1 if magic else -1
    innermost = hand.entry(0, hand.message(magic, None, b"deep", timestamp=ts))
    inner = hand.entry(0, hand.message(magic, None, hand.gzip(innermost), attributes=1, timestamp=ts))
    data = hand.entry(8, hand.message(magic, None, hand.gzip(inner), attributes=1, timestamp=ts))
    assert_corrupt_at(data, 0, 8, [])


@pytest.mark.parametrize(("outer", "inner_magic"), [(0, 1), (1, 0)])
def test_an_inner_magic_different_from_the_wrapper_is_corrupt(outer: int, inner_magic: int) -> None:
    inner = hand.entry(0, hand.message(inner_magic, None, b"x", timestamp=1 if inner_magic else -1))
    data = hand.entry(4, hand.message(outer, None, hand.gzip(inner), attributes=1, timestamp=1))
    assert_corrupt_at(data, 0, 4, [])
    with pytest.raises(CorruptRecordError, match="magic"):  # the error names its cause
        take(decode_messages(data))


@pytest.mark.parametrize("magic", [0, 1])
def test_a_truncated_inner_set_is_corrupt(magic: int) -> None:
    ts = 1 if magic else -1
    first = hand.entry(0, hand.message(magic, b"k", b"first", timestamp=ts))
    inner = first + hand.entry(1, hand.message(magic, b"k", b"second", timestamp=ts))
    for cut in range(len(inner)):
        if cut == len(first):
            continue  # a complete, shorter inner set
        data = hand.entry(3, hand.message(magic, None, hand.gzip(inner[:cut]), attributes=1, timestamp=ts))
        assert_corrupt_at(data, 0, 3, [])


@pytest.mark.parametrize("codec", [4, 5, 6, 7])
@pytest.mark.parametrize("magic", [0, 1])
def test_an_unknown_codec_is_unsupported(magic: int, codec: int) -> None:
    good = hand.entry(0, hand.message(magic, None, b"ok", timestamp=1 if magic else -1))
    inner = hand.entry(0, hand.message(magic, None, b"x", timestamp=1 if magic else -1))
    data = good + hand.entry(6, hand.message(magic, None, hand.gzip(inner), attributes=codec, timestamp=1))
    expected = [Message(0, 1 if magic else -1, CREATE, None, b"ok")]
    assert_corrupt_at(data, len(good), 6, expected, error=UnsupportedCodecError)
    with pytest.raises(UnsupportedCodecError) as excinfo:
        take(decode_messages(data))
    assert excinfo.value.error_code == 76


def _garbage_payloads() -> list[tuple[Codec, bytes]]:
    inner = hand.entry(0, hand.message(1, None, b"some inner value " * 4, timestamp=1))
    gz, xerial, raw, lz = hand.gzip(inner), hand.snappy_xerial(inner), snappy.compress(inner), hand.lz4_frame(inner)
    return [
        (Codec.GZIP, b"this is not gzip at all"),
        (Codec.GZIP, gz[: len(gz) // 2]),
        (Codec.GZIP, b""),
        (Codec.SNAPPY, b"\x20not snappy, though it states 32 bytes"),
        (Codec.SNAPPY, raw[: len(raw) // 2]),
        (Codec.SNAPPY, xerial[: len(xerial) - 3]),
        (Codec.SNAPPY, xerial[:20]),
        (Codec.SNAPPY, hand.XERIAL_HEADER[:12]),
        (Codec.SNAPPY, hand.XERIAL_HEADER + struct.pack(">i", 1000) + b"short"),
        (Codec.SNAPPY, hand.XERIAL_HEADER + struct.pack(">i", -5) + b"short"),
        (Codec.SNAPPY, b""),
        (Codec.LZ4, b"not an lz4 frame"),
        (Codec.LZ4, lz[: len(lz) // 2]),
        (Codec.LZ4, lz[:5]),
        (Codec.LZ4, b""),
        (Codec.GZIP, hand.gzip(b"")),  # decompresses, but to no messages
        (Codec.GZIP, hand.gzip(b"\x00" * 11)),  # decompresses to less than one entry header
    ]


@pytest.mark.parametrize(("codec", "payload"), _garbage_payloads())
def test_a_garbage_compressed_payload_is_corrupt(codec: Codec, payload: bytes) -> None:
    data = hand.entry(0, hand.message(1, None, b"ok", timestamp=1)) + v1_wrapper(5, codec, payload)
    with pytest.raises(CorruptRecordError) as excinfo:
        take(decode_messages(data))
    assert not isinstance(excinfo.value, UnsupportedCodecError)
    assert (excinfo.value.position, excinfo.value.offset) == (len(data) - len(v1_wrapper(5, codec, payload)), 5)


def test_a_wrapper_with_a_null_value_is_corrupt() -> None:
    data = hand.entry(5, hand.message(1, None, None, attributes=Codec.GZIP, timestamp=1))
    assert_corrupt_at(data, 0, 5, [])


def test_a_compressed_payload_larger_than_the_limit_is_refused() -> None:
    inner = b"".join(hand.entry(i, hand.message(1, None, bytes(1000), timestamp=1)) for i in range(20))
    data = v1_wrapper(19, Codec.GZIP, hand.gzip(inner))
    assert len(take(decode_messages(data, max_decompressed_bytes=len(inner)))) == 20
    with pytest.raises(RecordTooLargeError):
        take(decode_messages(data, max_decompressed_bytes=len(inner) - 1))


def _emptied(batch: bytes) -> bytes:
    """``batch`` as a compacted log keeps it when the cleaner removed all its records: the header
    alone (its last offset delta kept, no record), its CRC-32C over what is left."""
    head = bytearray(batch[:61])
    struct.pack_into(">i", head, 8, 49)  # the length of a batch of no records
    struct.pack_into(">i", head, 57, 0)  # its record count
    struct.pack_into(">I", head, 17, kernels.crc32c(memoryview(head)[21:]))
    return bytes(head)


def test_last_entry_offset_counts_batches_compaction_emptied_or_thinned() -> None:
    records = [(b"k%d" % i, b"v%d" % i, 1_000 + i, ()) for i in range(5)]
    whole = encode_batch(records, base_offset=10)  # offsets 10-14
    emptied = _emptied(encode_batch(records, base_offset=15))  # 15-19, every record removed
    assert decode_all(emptied) == []
    assert last_entry_offset(emptied) == 19
    assert [m.offset for m in decode_all(whole + emptied)] == [10, 11, 12, 13, 14]
    assert last_entry_offset(whole + emptied) == 19
    assert last_entry_offset(whole + emptied[:30]) == 14  # a partial trailing entry does not count
    assert last_entry_offset(b"") == -1
