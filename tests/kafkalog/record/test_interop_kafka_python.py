"""Message sets cross between us and kafka-python's own v0/v1 record code, every magic and codec, both ways."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from kafkalog.record import Codec, Message, MessageSetBuilder, TimestampType, decode_messages

from . import hand

CODECS = [Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4]
ITEMS: list[tuple[bytes | None, bytes | None, int]] = [
    (b"key-0", b"value-0", 1_700_000_000_000),
    (None, b"", 1_700_000_000_005),
    (b"", None, 1_700_000_000_003),
    (None, None, 0),
    (b"k" * 100, bytes(range(256)) * 300, 1_700_000_000_001),  # 75 KiB: several snappy and lz4 blocks
]


def kafka_python_read(data: bytes) -> list[tuple]:
    """(offset, timestamp, timestamp type, key, value) of every record, as kafka-python reads them."""
    out = []
    records = MemoryRecords(bytes(data))
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc()
        for record in batch:
            assert record.validate_crc()
            out.append((record.offset, record.timestamp, record.timestamp_type, record.key, record.value))
    return out


def kafka_python_build(magic: int, codec: int, base: int, items: list) -> bytes:
    """A produce-style set from kafka-python, with the wrapper offset a broker would give it."""
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=int(codec), batch_size=1 << 24)
    for i, (key, value, timestamp) in enumerate(items):
        # magic 1 wrappers hold relative inner offsets; magic 0 ones absolute offsets (set by the broker)
        offset = i if codec and magic == 1 else base + i
        assert builder.append(offset, timestamp=timestamp, key=key, value=value) is not None
    data = bytes(builder.build())
    return hand.set_offset(data, base + len(items) - 1) if codec else data


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("magic", [0, 1])
def test_sets_built_by_kafka_python_decode_with_ours(magic: int, codec: Codec) -> None:
    data = kafka_python_build(magic, codec, 3000, ITEMS)
    expected = [
        Message(3000 + i, ts if magic else -1, TimestampType.CREATE_TIME, key, value)
        for i, (key, value, ts) in enumerate(ITEMS)
    ]
    assert list(decode_messages(data)) == expected
    # ... and kafka-python agrees with itself on the same bytes
    assert [(o, k, v) for o, _, _, k, v in kafka_python_read(data)] == [(m.offset, m.key, m.value) for m in expected]
    assert list(decode_messages(data, min_offset=3002)) == expected[2:]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("magic", [0, 1])
def test_sets_built_by_us_are_read_back_by_kafka_python(magic: int, codec: Codec) -> None:
    builder = MessageSetBuilder(magic=magic, codec=codec, base_offset=7_000_000_000)
    builder.extend(ITEMS)
    expected = [
        (7_000_000_000 + i, ts if magic else None, 0 if magic else None, key, value)
        for i, (key, value, ts) in enumerate(ITEMS)
    ]
    assert kafka_python_read(builder.build()) == expected


@pytest.mark.parametrize("codec", CODECS)
def test_log_append_time_sets_built_by_us_are_read_back_by_kafka_python(codec: Codec) -> None:
    builder = MessageSetBuilder(magic=1, codec=codec, base_offset=10, timestamp_type=TimestampType.LOG_APPEND_TIME)
    builder.extend(ITEMS)
    got = kafka_python_read(builder.build())
    # uncompressed, each message carries its own log-append timestamp; compressed, the wrapper's stands for all
    own, wrappers = [ts for _, _, ts in ITEMS], [max(ts for _, _, ts in ITEMS)] * len(ITEMS)
    stamps = own if codec == Codec.NONE else wrappers
    assert got == [(10 + i, stamps[i], 1, key, value) for i, (key, value, _) in enumerate(ITEMS)]
    assert [(m.offset, m.timestamp, m.timestamp_type) for m in decode_messages(builder.build())] == [
        (10 + i, stamps[i], TimestampType.LOG_APPEND_TIME) for i in range(len(ITEMS))
    ]


_items = st.lists(
    st.tuples(
        st.none() | st.binary(max_size=40),
        st.none() | st.binary(max_size=200),
        st.integers(min_value=0, max_value=(1 << 63) - 1),
    ),
    min_size=1,
    max_size=12,
)


@given(
    items=_items,
    magic=st.sampled_from([0, 1]),
    codec=st.sampled_from(CODECS),
    base=st.integers(min_value=0, max_value=1 << 50),
)
@hand.fuzz(60)
def test_random_sets_cross_both_ways(items: list, magic: int, codec: Codec, base: int) -> None:
    expected = [(base + i, ts if magic else -1, key, value) for i, (key, value, ts) in enumerate(items)]
    theirs = kafka_python_build(magic, codec, base, items)
    assert [(m.offset, m.timestamp, m.key, m.value) for m in decode_messages(theirs)] == expected
    builder = MessageSetBuilder(magic=magic, codec=codec, base_offset=base)
    builder.extend(items)
    assert [(o, -1 if t is None else t, k, v) for o, t, _, k, v in kafka_python_read(builder.build())] == expected
