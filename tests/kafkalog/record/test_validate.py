"""validate_for_append checks a producer's set, assigns offsets and timestamps, reports index points, as documented."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalog.errors import CorruptRecordError, InvalidTimestampError, RecordTooLargeError
from kafkalog.record import Codec, Message, MessageSetBuilder, TimestampType, compress, decode_messages
from kafkalog.record.validate import ValidatedSet, validate_for_append

from . import hand
from .test_golden import _decompress_by_hand

NOW = 1_800_000_000_000
CREATE = TimestampType.CREATE_TIME
APPEND = TimestampType.LOG_APPEND_TIME
ITEMS = [(b"a", b"1", 10), (None, b"22", 30), (b"ccc", None, 20)]
COMPRESSED = [Codec.GZIP, Codec.SNAPPY, Codec.LZ4]


def build(items=ITEMS, *, magic: int = 1, codec: Codec = Codec.NONE, base: int = 0, **kwargs) -> bytes:
    builder = MessageSetBuilder(magic=magic, codec=codec, base_offset=base, **kwargs)
    builder.extend(items)
    return builder.build()


def validate(data: bytes | bytearray, next_offset: int = 100, **kwargs) -> ValidatedSet:
    kwargs.setdefault("now_ms", NOW)
    return validate_for_append(data, next_offset, **kwargs)


def check_untouched(data: bytes, **kwargs) -> ValidatedSet:
    """Validate a bytearray copy and check the caller's buffer is neither changed nor handed back."""
    mine = bytearray(data)
    result = validate(mine, **kwargs)
    assert mine == data, "validate_for_append changed its input"
    assert result.data is not mine
    return result


# --- offsets and timestamps


def test_uncompressed_v1_gets_offsets_and_keeps_everything_else() -> None:
    data = build(base=0)
    result = check_untouched(data)
    assert (result.first_offset, result.next_offset, result.message_count) == (100, 103, 3)
    before, after = hand.walk(data), hand.walk(result.data)
    assert [e.offset for e in after] == [100, 101, 102]
    for old, new in zip(before, after, strict=True):  # only the Offset field changed
        assert (
            result.data[new.position + 8 : new.position + new.size] == data[old.position + 8 : old.position + old.size]
        )
    assert list(decode_messages(result.data)) == [
        Message(100 + i, ts, CREATE, k, v) for i, (k, v, ts) in enumerate(ITEMS)
    ]
    assert (result.max_timestamp, result.offset_of_max_timestamp) == (30, 101)


def test_uncompressed_v0_is_converted_to_v1_with_the_append_time() -> None:
    result = check_untouched(build(magic=0, base=55))
    after = hand.walk(result.data)  # hand.walk checks every CRC
    assert [(e.offset, e.magic, e.attributes, e.timestamp) for e in after] == [
        (100 + i, 1, 0x08, NOW) for i in range(3)
    ]
    assert list(decode_messages(result.data)) == [
        Message(100 + i, NOW, APPEND, k, v) for i, (k, v, _) in enumerate(ITEMS)
    ]
    assert (result.next_offset, result.max_timestamp, result.offset_of_max_timestamp) == (103, NOW, 100)


@pytest.mark.parametrize("codec", COMPRESSED)
def test_compressed_v1_with_relative_offsets_only_gets_a_new_wrapper_header(codec: Codec) -> None:
    data = build(codec=codec, base=0)
    result = check_untouched(data)
    (before,), (after,) = hand.walk(data), hand.walk(result.data)
    assert after.value == before.value, "the compressed payload must be kept byte for byte"
    assert (after.offset, after.magic, after.attributes, after.timestamp) == (102, 1, int(codec), 30)
    assert len(result.data) == len(data)
    assert list(decode_messages(result.data)) == [
        Message(100 + i, ts, CREATE, k, v) for i, (k, v, ts) in enumerate(ITEMS)
    ]
    assert (result.first_offset, result.next_offset, result.message_count) == (100, 103, 3)
    assert (result.max_timestamp, result.offset_of_max_timestamp) == (30, 102)  # shallow: the wrapper's offset


@pytest.mark.parametrize("type_bit", [0, 0x08], ids=["create-time", "log-append-time"])
@pytest.mark.parametrize("codec", COMPRESSED)
def test_a_producers_wrapper_timestamp_and_type_are_replaced(codec: Codec, type_bit: int) -> None:
    inner = b"".join(hand.entry(i, hand.message(1, k, v, timestamp=ts)) for i, (k, v, ts) in enumerate(ITEMS))
    payload = compress(codec, inner)
    # kafka-python, for one, writes its wrappers with timestamp 0
    data = hand.entry(0, hand.message(1, None, payload, attributes=int(codec) | type_bit, timestamp=0))
    result = check_untouched(data)
    (after,) = hand.walk(result.data)
    assert after.value == payload
    assert (after.offset, after.attributes, after.timestamp) == (102, int(codec), 30)


@pytest.mark.parametrize("codec", COMPRESSED)
def test_compressed_v1_with_log_append_time_keeps_the_payload(codec: Codec) -> None:
    data = build(codec=codec)
    result = check_untouched(data, log_append_time=True)
    (before,), (after,) = hand.walk(data), hand.walk(result.data)
    assert after.value == before.value
    assert (after.offset, after.attributes, after.timestamp) == (102, int(codec) | 0x08, NOW)
    assert list(decode_messages(result.data)) == [
        Message(100 + i, NOW, APPEND, k, v) for i, (k, v, _) in enumerate(ITEMS)
    ]
    assert (result.max_timestamp, result.offset_of_max_timestamp) == (NOW, 102)


@pytest.mark.parametrize("codec", COMPRESSED)
def test_compressed_v0_is_rebuilt_as_v1_with_relative_offsets(codec: Codec) -> None:
    result = check_untouched(build(magic=0, codec=codec, base=40))
    (after,) = hand.walk(result.data)
    assert (after.offset, after.magic, after.attributes, after.timestamp) == (102, 1, int(codec) | 0x08, NOW)
    assert after.value is not None
    inner = hand.walk(_decompress_by_hand(codec, after.value))
    assert [(e.offset, e.magic, e.key, e.value) for e in inner] == [(i, 1, k, v) for i, (k, v, _) in enumerate(ITEMS)]
    assert list(decode_messages(result.data)) == [
        Message(100 + i, NOW, APPEND, k, v) for i, (k, v, _) in enumerate(ITEMS)
    ]
    assert (result.next_offset, result.max_timestamp, result.offset_of_max_timestamp) == (103, NOW, 102)


def _odd_wrapper(codec: Codec, inner_offsets: list[int]) -> bytes:
    """A magic 1 wrapper whose inner offsets are not 0..n-1 (as some producers send)."""
    inner = b"".join(
        hand.entry(o, hand.message(1, b"k", b"some value %d" % i, timestamp=1000 + i))
        for i, o in enumerate(inner_offsets)
    )
    return hand.entry(0, hand.message(1, None, compress(codec, inner), attributes=int(codec), timestamp=1001))


@pytest.mark.parametrize(
    ("codec", "inner_offsets"),
    [
        # for these the rebuilt wrapper happens to be exactly as long as the producer's
        (Codec.GZIP, [0, 2]),
        (Codec.SNAPPY, [0, 91]),
        (Codec.LZ4, [2, 2]),
        # for these it is not
        (Codec.GZIP, [1, 2]),
        (Codec.SNAPPY, [10, 11]),
        (Codec.LZ4, [0, 0]),
    ],
)
@pytest.mark.parametrize("alone", [True, False], ids=["alone", "after-a-plain-entry"])
def test_a_wrapper_with_odd_inner_offsets_is_rebuilt(codec: Codec, inner_offsets: list[int], alone: bool) -> None:
    wrapper = _odd_wrapper(codec, inner_offsets)
    plain = b"" if alone else build([(None, b"first", 999)])
    result = check_untouched(plain + wrapper)
    first = 100 if alone else 101
    expected = [] if alone else [Message(100, 999, CREATE, None, b"first")]
    expected += [Message(first + i, 1000 + i, CREATE, b"k", b"some value %d" % i) for i in range(2)]
    assert list(decode_messages(result.data)) == expected
    last = hand.walk(result.data)[-1]
    assert last.offset == first + 1, "the wrapper must carry the offset of its last inner message"
    assert last.value is not None
    assert [e.offset for e in hand.walk(_decompress_by_hand(codec, last.value))] == [0, 1]
    assert result.next_offset == first + 2


def test_log_append_time_stamps_every_uncompressed_message() -> None:
    result = check_untouched(build(), log_append_time=True)
    assert [(e.offset, e.attributes, e.timestamp) for e in hand.walk(result.data)] == [
        (100, 0x08, NOW),
        (101, 0x08, NOW),
        (102, 0x08, NOW),
    ]
    assert list(decode_messages(result.data)) == [
        Message(100 + i, NOW, APPEND, k, v) for i, (k, v, _) in enumerate(ITEMS)
    ]
    assert (result.max_timestamp, result.offset_of_max_timestamp) == (NOW, 100)


def test_a_message_without_a_timestamp_gets_the_append_time() -> None:
    result = check_untouched(build([(None, b"a", 5), (None, b"b", None), (None, b"c", 7)]))
    assert list(decode_messages(result.data)) == [
        Message(100, 5, CREATE, None, b"a"),
        Message(101, NOW, APPEND, None, b"b"),
        Message(102, 7, CREATE, None, b"c"),
    ]
    assert (result.max_timestamp, result.offset_of_max_timestamp) == (NOW, 101)


@pytest.mark.parametrize("codec", COMPRESSED)
def test_a_compressed_set_without_timestamps_gets_the_append_time(codec: Codec) -> None:
    result = check_untouched(build([(None, b"a", None), (b"k", b"b", None)], codec=codec))
    (wrapper,) = hand.walk(result.data)
    assert (wrapper.offset, wrapper.attributes, wrapper.timestamp) == (101, int(codec) | 0x08, NOW)
    assert [(m.offset, m.timestamp, m.timestamp_type) for m in decode_messages(result.data)] == [
        (100, NOW, APPEND),
        (101, NOW, APPEND),
    ]


# --- refusals


def _plain_with_timestamp(ts: int) -> bytes:
    return hand.entry(0, hand.message(1, None, b"v", timestamp=ts))


@pytest.mark.parametrize("ts", [-2, -(1 << 63)])
def test_a_timestamp_below_minus_one_is_invalid(ts: int) -> None:
    ok = build([(None, b"fine", 1)])
    inner = _plain_with_timestamp(1) + hand.entry(1, hand.message(1, None, b"bad", timestamp=ts))
    cases = [
        ok + _plain_with_timestamp(ts),
        ok + hand.entry(5, hand.message(1, None, hand.gzip(inner), attributes=1, timestamp=1)),
        ok + hand.entry(5, hand.message(1, None, hand.snappy_xerial(inner), attributes=2, timestamp=1 << 40)),
    ]
    for data in cases:
        with pytest.raises(InvalidTimestampError) as excinfo:
            validate(data)
        assert excinfo.value.error_code == 32
        with pytest.raises(InvalidTimestampError):
            validate(data, log_append_time=True)  # stamping does not excuse an invalid timestamp


@pytest.mark.parametrize(
    "data",
    [
        build([(b"k", b"x" * 500, 1)]),
        build([(b"k", b"x" * 500, None)], magic=0),
        build([(b"k", b"x" * 500, 1), (None, b"y" * 400, 2)], codec=Codec.GZIP),  # compressed: the wrapper's size
        build([(b"k", bytes(5000), 1)], codec=Codec.SNAPPY),
    ],
    ids=["v1", "v0", "v1-gzip", "v1-snappy"],
)
def test_an_entry_larger_than_max_message_bytes_is_refused(data: bytes) -> None:
    prefix = build([(None, b"small", 3)])
    size = len(data)  # one entry: Offset, MessageSize and Message
    assert validate(prefix + data, max_message_bytes=size).next_offset > 100
    with pytest.raises(RecordTooLargeError) as excinfo:
        validate(prefix + data, max_message_bytes=size - 1)
    assert excinfo.value.error_code == 10


def test_a_payload_expanding_beyond_the_limit_is_refused() -> None:
    data = build([(None, bytes(100_000), 1)], codec=Codec.GZIP)
    assert validate(data, max_decompressed_bytes=200_000).message_count == 1
    with pytest.raises(RecordTooLargeError):
        validate(data, max_decompressed_bytes=50_000)


def test_an_empty_set_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError):
        validate(b"")


def mixed() -> list[bytes]:
    """Entries of each kind validate_for_append handles differently."""
    return [
        build([(b"k", b"v1 plain", 5), (None, b"no timestamp", None)], base=0),
        build([(None, b"v0 plain", None)], magic=0),
        build([(b"a", b"v1 gzip", 7), (b"b", b"", 9)], codec=Codec.GZIP),
        build([(None, b"v0 snappy", None), (None, None, None)], magic=0, codec=Codec.SNAPPY),
        build([(b"z", b"v1 lz4", 3)], codec=Codec.LZ4),
    ]


def test_a_partial_trailing_entry_is_corrupt_at_every_cut() -> None:
    data = b"".join(mixed())
    ends = {e.position + e.size for e in hand.walk(data)}
    for cut in range(1, len(data) + 1):
        if cut in ends:  # a shorter but complete set
            assert validate(data[:cut]).message_count == len(list(decode_messages(data[:cut]))), f"cut at {cut}"
        else:
            with pytest.raises(CorruptRecordError):
                validate(data[:cut])
    assert validate(data).message_count == 8


def test_a_bad_crc_anywhere_is_refused_and_nothing_is_returned() -> None:
    data = b"".join(mixed())
    for e in hand.walk(data):
        for byte in range(e.position + 16, e.position + e.size):  # everything the CRC covers
            flipped = bytearray(data)
            flipped[byte] ^= 0x10
            frozen = bytes(flipped)
            with pytest.raises(CorruptRecordError):
                validate(flipped)
            assert flipped == frozen, "a failed validation must not change its input"


@pytest.mark.parametrize("size", [-1, -12, -13, -100])
@pytest.mark.parametrize(
    ("magic", "codec"), [(0, Codec.NONE), (1, Codec.GZIP), (0, Codec.GZIP)], ids=["v0", "v1-gzip", "v0-gzip"]
)
def test_a_negative_size_is_corrupt(magic: int, codec: Codec, size: int) -> None:
    good = build([(None, b"ok", 1)])
    victim = build([(b"key", b"value", 2)], magic=magic, codec=codec)
    data = good + hand.entry(0, victim[12:], size=size) + victim  # bytes enough follow: not a partial entry
    with pytest.raises(CorruptRecordError):
        validate(data)


@pytest.mark.parametrize("magic", [0, 1])
def test_a_bad_crc_inside_a_wrapper_is_refused(magic: int) -> None:
    ts = 1 if magic else -1
    inner = hand.entry(0, hand.message(magic, None, b"one", timestamp=ts)) + hand.entry(
        1, hand.message(magic, None, b"two", timestamp=ts, crc=12345)
    )
    data = hand.entry(1, hand.message(magic, None, hand.gzip(inner), attributes=1, timestamp=ts))
    with pytest.raises(CorruptRecordError):
        validate(data)


@pytest.mark.parametrize("magic", [0, 1])
def test_lengths_that_lie_are_refused(magic: int) -> None:
    ts = 1 if magic else -1
    for lie in ({"key_length": 2}, {"key_length": -2}, {"value_length": 3}, {"value_length": -1}):
        data = build([(None, b"ok", 1)]) + hand.entry(1, hand.message(magic, b"key", b"value", timestamp=ts, **lie))
        with pytest.raises(CorruptRecordError):
            validate(data)


@pytest.mark.parametrize("codec", [5, 7])
def test_an_unknown_codec_is_refused(codec: int) -> None:
    data = hand.entry(0, hand.message(1, None, hand.gzip(_plain_with_timestamp(1)), attributes=codec, timestamp=1))
    with pytest.raises(CorruptRecordError):
        validate(data)


# --- index points, max timestamp


def shallow_reference(data: bytes | bytearray, interval: int, since: int) -> tuple[list[tuple], int, int, int]:
    """Index points, bytes since the last one, max timestamp and its offset, recomputed from the bytes."""
    points, max_ts, offset_of_max = [], -1, -1
    for e in hand.walk(data):
        if e.timestamp > max_ts:
            max_ts, offset_of_max = e.timestamp, e.offset
        if since >= interval:
            points.append((e.position, e.offset, max_ts, offset_of_max))
            since = 0
        since += e.size
    return points, since, max_ts, offset_of_max


_pieces = st.lists(
    st.tuples(
        st.sampled_from([(1, Codec.NONE), (0, Codec.NONE), (1, Codec.GZIP), (0, Codec.SNAPPY), (1, Codec.LZ4)]),
        st.lists(
            st.tuples(
                st.none() | st.binary(max_size=8),
                st.none() | st.binary(max_size=150),
                st.none() | st.integers(min_value=0, max_value=NOW * 2),
            ),
            min_size=1,
            max_size=6,
        ),
    ),
    max_size=6,
)


@given(
    pieces=_pieces,
    interval=st.integers(min_value=0, max_value=600),
    since=st.integers(min_value=0, max_value=600),
    log_append_time=st.booleans(),
    first=st.integers(min_value=0, max_value=1 << 50),
)
@hand.fuzz(150)
def test_index_points_and_max_timestamp(pieces, interval, since, log_append_time, first) -> None:
    head = [(None, b"head", 1)]  # a plain first entry, so that the result is always assembled from parts
    data = build(head) + b"".join(build(items, magic=magic, codec=codec) for (magic, codec), items in pieces)
    result = validate(
        data, first, log_append_time=log_append_time, index_interval_bytes=interval, bytes_since_index=since
    )
    total = 1 + sum(len(items) for _, items in pieces)
    assert (result.first_offset, result.next_offset, result.message_count) == (first, first + total, total)
    decoded = list(decode_messages(result.data))
    assert [m.offset for m in decoded] == list(range(first, first + total))
    assert [(m.key, m.value) for m in decoded] == [(m.key, m.value) for m in decode_messages(data)]

    points, since_after, max_ts, offset_of_max = shallow_reference(result.data, interval, since)
    assert result.index_points == points
    assert result.bytes_since_index == since_after
    assert (result.max_timestamp, result.offset_of_max_timestamp) == (max_ts, offset_of_max)
    starts = {e.position: e.offset for e in hand.walk(result.data)}
    assert all(starts[position] == offset for position, offset, _, _ in result.index_points)
    if log_append_time:
        assert all(m.timestamp == NOW and m.timestamp_type == APPEND for m in decoded)


def test_index_points_fall_every_interval_bytes() -> None:
    data = build([(None, bytes(90), i) for i in range(20)])  # 20 entries of 124 bytes
    result = validate(data, 0, index_interval_bytes=300, bytes_since_index=300)
    assert [p[0] for p in result.index_points] == [0, 372, 744, 1116, 1488, 1860, 2232]
    assert [p[1] for p in result.index_points] == [0, 3, 6, 9, 12, 15, 18]
    assert [p[2:] for p in result.index_points] == [(0, 0), (3, 3), (6, 6), (9, 9), (12, 12), (15, 15), (18, 18)]
    assert result.bytes_since_index == 2 * 124
