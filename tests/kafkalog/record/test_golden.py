"""Golden bytes built by hand, field by field: our encoders produce exactly them and our readers decode them."""

from __future__ import annotations

import struct
import zlib

import lz4.frame
import pytest
import snappy

from kafkalog.record import (
    Codec,
    Entry,
    Message,
    MessageSetBuilder,
    TimestampType,
    decode_messages,
    encode_message,
    entry_size,
    frame,
    iter_entries,
)

from . import hand

CREATE = TimestampType.CREATE_TIME
APPEND = TimestampType.LOG_APPEND_TIME


def test_magic0_null_key_and_null_value() -> None:
    body = (
        struct.pack(">b", 0)  # Magic: 0
        + struct.pack(">b", 0)  # Attributes: codec 0 (none)
        + struct.pack(">i", -1)  # Key length: -1, a null key (no key bytes follow)
        + struct.pack(">i", -1)  # Value length: -1, a null value (no value bytes follow)
    )
    crc = zlib.crc32(body)
    msg = struct.pack(">I", crc) + body  # Crc: CRC-32 of Magic .. end of Value
    golden = (
        struct.pack(">q", 42)  # Offset
        + struct.pack(">i", 14)  # MessageSize: crc 4 + magic 1 + attributes 1 + key length 4 + value length 4
        + msg
    )
    assert len(golden) == 26

    assert encode_message(magic=0, attributes=0, timestamp=-1, key=None, value=None) == msg
    assert frame(42, msg) == golden
    builder = MessageSetBuilder(magic=0, base_offset=42)
    builder.append(None, None, 1234)  # magic 0 has no timestamp field: it is dropped
    assert builder.build() == golden
    assert entry_size(0, None, None) == len(golden) == builder.uncompressed_size

    assert list(decode_messages(golden)) == [Message(42, -1, CREATE, None, None)]
    assert list(iter_entries(golden)) == [Entry(42, 0, 26, crc, 0, 0, -1)]


def test_magic0_key_and_empty_value() -> None:
    body = (
        struct.pack(">b", 0)  # Magic: 0
        + struct.pack(">b", 0)  # Attributes: codec 0 (none)
        + struct.pack(">i", 3)  # Key length: 3
        + b"k\x00y"  # Key (binary, with a NUL)
        + struct.pack(">i", 0)  # Value length: 0, an empty value (not null)
    )
    crc = zlib.crc32(body)
    msg = struct.pack(">I", crc) + body  # Crc
    golden = struct.pack(">q", 7) + struct.pack(">i", len(msg)) + msg  # Offset, MessageSize, Message
    assert len(msg) == 4 + 1 + 1 + 4 + 3 + 4

    assert encode_message(magic=0, attributes=0, timestamp=-1, key=b"k\x00y", value=b"") == msg
    builder = MessageSetBuilder(magic=0, base_offset=7)
    builder.append(b"", b"k\x00y")
    assert builder.build() == golden

    (decoded,) = decode_messages(golden)
    assert decoded == Message(7, -1, CREATE, b"k\x00y", b"")
    assert decoded.value == b"" and decoded.value is not None
    assert list(iter_entries(golden)) == [Entry(7, 0, len(golden), crc, 0, 0, -1)]


def test_magic1_empty_key_and_value_create_time() -> None:
    body = (
        struct.pack(">b", 1)  # Magic: 1
        + struct.pack(">b", 0)  # Attributes: codec none, bit 3 clear = create time
        + struct.pack(">q", 1_700_000_000_123)  # Timestamp (ms since the epoch)
        + struct.pack(">i", 0)  # Key length: 0, an empty key (not null)
        + struct.pack(">i", 5)  # Value length: 5
        + b"hello"  # Value
    )
    crc = zlib.crc32(body)
    msg = struct.pack(">I", crc) + body  # Crc
    golden = (
        struct.pack(">q", 1 << 40)  # Offset (large: all 8 bytes matter)
        + struct.pack(">i", 4 + 1 + 1 + 8 + 4 + 0 + 4 + 5)  # MessageSize
        + msg
    )

    assert encode_message(magic=1, attributes=0, timestamp=1_700_000_000_123, key=b"", value=b"hello") == msg
    builder = MessageSetBuilder(magic=1, base_offset=1 << 40)
    builder.append(b"hello", b"", 1_700_000_000_123)
    assert builder.build() == golden
    assert entry_size(1, b"", b"hello") == len(golden)

    (decoded,) = decode_messages(golden)
    assert decoded == Message(1 << 40, 1_700_000_000_123, CREATE, b"", b"hello")
    assert decoded.key == b"" and decoded.key is not None
    assert list(iter_entries(golden)) == [Entry(1 << 40, 0, len(golden), crc, 1, 0, 1_700_000_000_123)]


def test_magic1_null_key_null_value_no_timestamp_log_append_time() -> None:
    body = (
        struct.pack(">b", 1)  # Magic: 1
        + struct.pack(">b", 0x08)  # Attributes: codec none, bit 3 set = log-append time
        + struct.pack(">q", -1)  # Timestamp: -1, none
        + struct.pack(">i", -1)  # Key length: null
        + struct.pack(">i", -1)  # Value length: null
    )
    crc = zlib.crc32(body)
    msg = struct.pack(">I", crc) + body  # Crc
    golden = struct.pack(">q", 0) + struct.pack(">i", 22) + msg  # Offset, MessageSize (the v1 minimum)
    assert len(golden) == 34

    assert encode_message(magic=1, attributes=0x08, timestamp=-1, key=None, value=None) == msg
    builder = MessageSetBuilder(magic=1, timestamp_type=APPEND)
    builder.append(None)  # no timestamp: -1
    assert builder.build() == golden

    assert list(decode_messages(golden)) == [Message(0, -1, APPEND, None, None)]
    (shallow,) = iter_entries(golden)
    assert shallow == Entry(0, 0, 34, crc, 1, 0x08, -1)
    assert shallow.timestamp_type == APPEND and shallow.codec == Codec.NONE and shallow.end == 34


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize(
    ("key", "value"), [(None, None), (None, b""), (b"", None), (b"", b""), (b"key", b"value"), (b"\xff" * 300, None)]
)
def test_every_null_and_empty_combination(magic: int, key: bytes | None, value: bytes | None) -> None:
    ts = 1_600_000_000_000 if magic == 1 else -1
    golden = hand.entry(9, hand.message(magic, key, value, timestamp=ts))
    builder = MessageSetBuilder(magic=magic, base_offset=9)
    builder.append(value, key, ts)
    assert builder.build() == golden
    assert list(decode_messages(golden)) == [Message(9, ts, CREATE, key, value)]
    (shallow,) = iter_entries(golden)
    assert (shallow.offset, shallow.size, shallow.magic, shallow.timestamp) == (9, len(golden), magic, ts)


@pytest.mark.parametrize("magic", [0, 1])
def test_uncompressed_set_is_the_concatenation_of_entries_with_consecutive_offsets(magic: int) -> None:
    items = [(b"a", b"1", 10), (None, b"22", 30), (b"ccc", None, 20)]
    golden = b"".join(
        hand.entry(500 + i, hand.message(magic, key, value, timestamp=ts if magic else -1))
        for i, (key, value, ts) in enumerate(items)
    )
    builder = MessageSetBuilder(magic=magic, base_offset=500)
    builder.extend(items)
    assert builder.build() == golden
    assert len(builder) == 3 and builder.uncompressed_size == len(golden)
    assert list(decode_messages(golden)) == [
        Message(500 + i, ts if magic else -1, CREATE, key, value) for i, (key, value, ts) in enumerate(items)
    ]
    assert [e.offset for e in iter_entries(golden)] == [500, 501, 502]
    smallest = 26 if magic == 0 else 34  # an entry with null key and value
    assert [e.position for e in iter_entries(golden)] == [0, smallest + 2, 2 * (smallest + 2)]


# --- compressed wrappers, built by hand


@pytest.mark.parametrize(
    ("codec", "compress"),
    [
        (Codec.GZIP, hand.gzip),  # zlib with wbits 31: a gzip container
        (Codec.SNAPPY, hand.snappy_xerial),
        (Codec.SNAPPY, snappy.compress),  # raw, as librdkafka writes it
        (Codec.LZ4, lambda inner: hand.lz4_frame(inner, legacy_checksum=True)),  # magic 0: pre-KIP-57 checksum
    ],
    ids=["gzip", "snappy-xerial", "snappy-raw", "lz4"],
)
def test_magic0_wrapper_with_absolute_inner_offsets(codec: Codec, compress) -> None:
    inner = b"".join(
        (
            hand.entry(10, hand.message(0, b"k0", b"v0")),  # inner offsets are absolute in magic 0
            hand.entry(11, hand.message(0, None, b"v1")),
            hand.entry(12, hand.message(0, b"k2", None)),
        )
    )
    payload = compress(inner)
    wrapper_body = (
        struct.pack(">b", 0)  # Magic: 0
        + struct.pack(">b", codec)  # Attributes: the codec
        + struct.pack(">i", -1)  # Key length: null
        + struct.pack(">i", len(payload))  # Value length
        + payload  # Value: the compressed inner message set
    )
    msg = struct.pack(">I", zlib.crc32(wrapper_body)) + wrapper_body  # Crc
    golden = struct.pack(">q", 12) + struct.pack(">i", len(msg)) + msg  # Offset: the last inner offset

    assert list(decode_messages(golden)) == [
        Message(10, -1, CREATE, b"k0", b"v0"),
        Message(11, -1, CREATE, None, b"v1"),
        Message(12, -1, CREATE, b"k2", None),
    ]
    (shallow,) = iter_entries(golden)
    assert (shallow.offset, shallow.size, shallow.magic, shallow.codec) == (12, len(golden), 0, codec)
    assert list(decode_messages(golden, min_offset=11)) == list(decode_messages(golden))[1:]

    # absolute means absolute: the wrapper's own offset does not move them (unlike magic 1)
    assert [m.offset for m in decode_messages(hand.set_offset(golden, 99))] == [10, 11, 12]


def test_magic0_builder_wrapper_matches_the_hand_layout() -> None:
    builder = MessageSetBuilder(magic=0, codec=Codec.GZIP, base_offset=10)
    builder.extend([(b"k0", b"v0", None), (None, b"v1", None), (b"k2", None, None)])
    (wrapper,) = hand.walk(builder.build())
    assert (wrapper.offset, wrapper.magic, wrapper.attributes, wrapper.key) == (12, 0, 1, None)
    assert wrapper.value is not None
    assert hand.gunzip(wrapper.value) == b"".join(
        (
            hand.entry(10, hand.message(0, b"k0", b"v0")),
            hand.entry(11, hand.message(0, None, b"v1")),
            hand.entry(12, hand.message(0, b"k2", None)),
        )
    )


def _relative_inner() -> bytes:
    return b"".join(
        (
            hand.entry(0, hand.message(1, b"a", b"first", timestamp=1001)),  # relative offset 0
            hand.entry(1, hand.message(1, None, b"second", timestamp=1003)),  # relative offset 1
            hand.entry(2, hand.message(1, b"c", None, timestamp=1002)),  # relative offset 2
        )
    )


def _v1_wrapper(offset: int, codec: int, timestamp: int, payload: bytes, *, log_append: bool) -> bytes:
    body = (
        struct.pack(">b", 1)  # Magic: 1
        + struct.pack(">b", codec | (0x08 if log_append else 0))  # Attributes: codec, timestamp type bit
        + struct.pack(">q", timestamp)  # Timestamp of the wrapper
        + struct.pack(">i", -1)  # Key length: null
        + struct.pack(">i", len(payload))  # Value length
        + payload  # Value: the compressed inner set
    )
    msg = struct.pack(">I", zlib.crc32(body)) + body  # Crc
    return struct.pack(">q", offset) + struct.pack(">i", len(msg)) + msg  # Offset (of the last inner), MessageSize


@pytest.mark.parametrize(
    ("codec", "compress"),
    [
        (Codec.SNAPPY, hand.snappy_xerial),  # xerial framing: Java clients, kafka-python
        (Codec.SNAPPY, snappy.compress),  # one raw block: librdkafka
        (Codec.GZIP, hand.gzip),
        (Codec.LZ4, hand.lz4_frame),
    ],
)
def test_magic1_log_append_time_wrapper_reports_its_timestamp_for_every_inner_message(codec, compress) -> None:
    golden = _v1_wrapper(102, codec, 1_700_000_000_999, compress(_relative_inner()), log_append=True)
    assert list(decode_messages(golden)) == [
        Message(100, 1_700_000_000_999, APPEND, b"a", b"first"),
        Message(101, 1_700_000_000_999, APPEND, None, b"second"),
        Message(102, 1_700_000_000_999, APPEND, b"c", None),
    ]
    (shallow,) = iter_entries(golden)
    assert (shallow.offset, shallow.timestamp, shallow.timestamp_type, shallow.codec) == (
        102,
        1_700_000_000_999,
        APPEND,
        codec,
    )


def test_magic1_create_time_wrapper_reports_inner_timestamps_and_relative_offsets_become_absolute() -> None:
    golden = _v1_wrapper(7_000_000_002, Codec.GZIP, 1003, hand.gzip(_relative_inner()), log_append=False)
    assert list(decode_messages(golden)) == [
        Message(7_000_000_000, 1001, CREATE, b"a", b"first"),
        Message(7_000_000_001, 1003, CREATE, None, b"second"),
        Message(7_000_000_002, 1002, CREATE, b"c", None),
    ]
    assert [m.offset for m in decode_messages(golden, min_offset=7_000_000_002)] == [7_000_000_002]


def test_magic0_lz4_wrapper_with_the_legacy_header_checksum() -> None:
    inner = hand.entry(5, hand.message(0, b"k", b"v" * 100)) + hand.entry(6, hand.message(0, None, b"w"))
    payload = hand.lz4_frame(inner, legacy_checksum=True)
    assert payload != hand.lz4_frame(inner), "the legacy checksum byte must differ from the correct one"
    body = b"\x00" + b"\x03" + struct.pack(">i", -1) + struct.pack(">i", len(payload)) + payload  # magic 0, lz4
    golden = hand.entry(6, struct.pack(">I", zlib.crc32(body)) + body)
    assert list(decode_messages(golden)) == [
        Message(5, -1, CREATE, b"k", b"v" * 100),
        Message(6, -1, CREATE, None, b"w"),
    ]


def _decompress_by_hand(codec: Codec, payload: bytes) -> bytes:
    if codec == Codec.GZIP:
        return hand.gunzip(payload)
    if codec == Codec.SNAPPY:
        return hand.snappy_unxerial(payload)[0]
    return lz4.frame.decompress(payload)  # checks the (correct, KIP-57) header checksum


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4])
def test_magic1_builder_wrapper_matches_the_hand_layout(codec: Codec) -> None:
    builder = MessageSetBuilder(magic=1, codec=codec, base_offset=1000)
    builder.extend([(b"a", b"first", 1001), (None, b"second", 1003), (b"c", None, 1002)])
    data = builder.build()
    (wrapper,) = hand.walk(data)
    assert wrapper.offset == 1002  # the absolute offset of the last inner message
    assert wrapper.timestamp == 1003  # create time: the largest inner timestamp
    assert (wrapper.magic, wrapper.attributes, wrapper.key) == (1, int(codec), None)
    assert wrapper.value is not None
    assert _decompress_by_hand(codec, wrapper.value) == _relative_inner()
    assert [m.offset for m in decode_messages(data)] == [1000, 1001, 1002]
