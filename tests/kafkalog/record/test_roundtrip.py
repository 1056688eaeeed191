"""Whatever MessageSetBuilder encodes, decode_messages and iter_entries give back (random messages, magics, codecs)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalog.errors import InvalidTimestampError
from kafkalog.record import (
    LEGACY_CODECS,
    Codec,
    Message,
    MessageSetBuilder,
    TimestampType,
    decode_all,
    decode_batches,
    decode_messages,
    entry_size,
    iter_entries,
)

from . import hand

_triples = st.lists(
    st.tuples(
        st.none() | st.binary(max_size=64),
        st.none() | st.binary(max_size=300),
        st.none() | st.integers(min_value=-1, max_value=(1 << 63) - 1),
    ),
    max_size=25,
)


def expected_messages(
    triples: list, magic: int, codec: Codec, base: int, timestamp_type: TimestampType
) -> list[Message]:
    stamps = [-1 if ts is None else ts for _, _, ts in triples]
    if magic == 0:
        return [Message(base + i, -1, TimestampType.CREATE_TIME, k, v) for i, (k, v, _) in enumerate(triples)]
    if codec != Codec.NONE and timestamp_type == TimestampType.LOG_APPEND_TIME:
        stamps = [max(stamps, default=-1)] * len(triples)  # every inner message reports the wrapper's timestamp
    return [Message(base + i, stamps[i], timestamp_type, k, v) for i, (k, v, _) in enumerate(triples)]


@st.composite
def message_sets(draw: st.DrawFn) -> tuple:
    triples = draw(_triples)
    magic = draw(st.sampled_from([0, 1]))
    codec = draw(st.sampled_from(LEGACY_CODECS))
    base = draw(st.integers(min_value=0, max_value=(1 << 62)))
    timestamp_type = draw(st.sampled_from(list(TimestampType))) if magic == 1 else TimestampType.CREATE_TIME
    builder = MessageSetBuilder(magic=magic, codec=codec, base_offset=base, timestamp_type=timestamp_type)
    builder.extend(triples)
    return builder, triples, magic, codec, base, timestamp_type


@given(built=message_sets(), data=st.data())
@hand.fuzz(250)
def test_decode_returns_what_was_built(built: tuple, data: st.DataObject) -> None:
    builder, triples, magic, codec, base, timestamp_type = built
    encoded = builder.build()
    expected = expected_messages(triples, magic, codec, base, timestamp_type)
    decoded = list(decode_messages(encoded))
    assert decoded == expected
    assert all(type(m) is Message for m in decoded)
    assert list(decode_messages(bytearray(encoded))) == expected
    assert decode_all(encoded) == expected
    assert [m for batch in decode_batches(encoded) for m in batch] == expected
    assert list(decode_messages(memoryview(b"<" + encoded + b">")[1:-1])) == expected

    skip = data.draw(st.integers(min_value=0, max_value=len(triples)), label="skip")
    assert list(decode_messages(encoded, min_offset=base + skip)) == expected[skip:]
    assert decode_all(encoded, min_offset=base + skip) == expected[skip:]

    entries = list(iter_entries(encoded))
    if not triples:
        assert encoded == b"" and entries == []
    elif codec == Codec.NONE:
        assert [e.offset for e in entries] == [base + i for i in range(len(triples))]
        assert [e.size for e in entries] == [entry_size(magic, k, v) for k, v, _ in triples]
        assert len(encoded) == builder.uncompressed_size
    else:
        (wrapper,) = entries
        assert (wrapper.offset, wrapper.codec, wrapper.magic, wrapper.end) == (
            base + len(triples) - 1,
            codec,
            magic,
            len(encoded),
        )
    assert all(e.magic == magic for e in entries)
    assert [(s.offset, s.size) for s in hand.walk(encoded)] == [(e.offset, e.size) for e in entries]


@given(first=message_sets(), second=message_sets())
@hand.fuzz(80)
def test_concatenated_sets_decode_as_one(first: tuple, second: tuple) -> None:
    builder_a, triples_a, magic_a, codec_a, base_a, type_a = first
    _, triples_b, magic_b, codec_b, _, type_b = second
    base_b = base_a + len(triples_a)
    builder_b = MessageSetBuilder(magic=magic_b, codec=codec_b, base_offset=base_b, timestamp_type=type_b)
    builder_b.extend(triples_b)
    expected = expected_messages(triples_a, magic_a, codec_a, base_a, type_a) + expected_messages(
        triples_b, magic_b, codec_b, base_b, type_b
    )
    assert list(decode_messages(builder_a.build() + builder_b.build())) == expected


def test_more_messages_than_one_kernel_batch() -> None:
    builder = MessageSetBuilder(magic=1, base_offset=100)
    for i in range(10_000):
        builder.append(b"%d" % i, None, i)
    data = builder.build()
    decoded = list(decode_messages(data))
    assert [m.offset for m in decoded] == list(range(100, 10_100))
    assert [m.value for m in decoded] == [b"%d" % i for i in range(10_000)]
    assert [m.offset for m in decode_messages(data, min_offset=9_000)] == list(range(9_000, 10_100))
    assert sum(1 for _ in iter_entries(data)) == 10_000


def test_builder_refuses_impossible_settings() -> None:
    with pytest.raises(ValueError, match="magic"):
        MessageSetBuilder(magic=2)
    with pytest.raises(ValueError, match="timestamp type"):
        MessageSetBuilder(magic=0, timestamp_type=TimestampType.LOG_APPEND_TIME)
    builder = MessageSetBuilder(magic=1)
    with pytest.raises(InvalidTimestampError):
        builder.append(b"v", None, -2)
    assert len(builder) == 0 and builder.build() == b""
