"""Appending to a log of message format v2: produced batches checked and given offsets in place, older
formats up-converted, the append time stamped where due; and v2 batches produced into a v1 log."""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from kafkalog.errors import (
    CorruptRecordError,
    InvalidTimestampError,
    RecordTooLargeError,
    UnsupportedCodecError,
    UnsupportedForMessageFormatError,
)
from kafkalog.record import MessageSetBuilder, _fastpath, decode_messages, iter_entries, kernels
from kafkalog.record.batch_format import RecordInput, decode_batch, encode_batch, read_header
from kafkalog.record.codec import decompress
from kafkalog.record.message import Codec, TimestampType
from kafkalog.record.validate import validate_for_append

NOW = 1_800_000_000_000
TS = 1_700_000_000_000


def append(data: bytes, next_offset: int = 1000, **options: object) -> object:
    settings = {"now_ms": NOW, "message_format": 2, "index_interval_bytes": 1, "bytes_since_index": 1 << 30}
    return validate_for_append(data, next_offset, **{**settings, **options})  # type: ignore[arg-type]


def test_a_produced_batch_is_written_as_it_came_with_its_offsets() -> None:
    produced = encode_batch([RecordInput(b"k%d" % i, b"v", TS + i, [("h", b"x")]) for i in range(5)], codec=Codec.LZ4)
    result = append(produced)
    assert (result.first_offset, result.next_offset, result.message_count) == (1000, 1005, 5)  # type: ignore[attr-defined]
    data = bytes(result.data)  # type: ignore[attr-defined]
    assert data[8:] == produced[8:]  # only BaseOffset changed: the CRC still holds
    header, records = decode_batch(data)
    assert [r.offset for r in records] == [1000, 1001, 1002, 1003, 1004]
    assert records[0].headers == (("h", b"x"),) and header.codec == Codec.LZ4
    assert result.max_timestamp == TS + 4 and result.offset_of_max_timestamp == 1004  # type: ignore[attr-defined]
    assert result.index_points == [(0, 1004, TS + 4, 1004)]  # type: ignore[attr-defined]


def test_log_append_time_and_records_without_a_timestamp_are_stamped() -> None:
    produced = encode_batch([RecordInput(b"a", b"1", TS), RecordInput(b"b", b"2", TS + 9)])
    for data, options in ((produced, {"log_append_time": True}), (encode_batch([RecordInput(b"n", b"1", -1)]), {})):
        result = append(data, **options)
        header, records = decode_batch(bytes(result.data))  # type: ignore[attr-defined] # CRC recomputed
        assert header.timestamp_type == TimestampType.LOG_APPEND_TIME and header.max_timestamp == NOW
        assert {(r.timestamp, r.timestamp_type) for r in records} == {(NOW, TimestampType.LOG_APPEND_TIME)}
        assert result.max_timestamp == NOW  # type: ignore[attr-defined]


def test_older_formats_are_up_converted_to_batches() -> None:
    plain = MessageSetBuilder(magic=1)
    plain.extend([(b"p1", b"a", TS + 1), (b"p2", b"b", TS + 2)])
    wrapped = MessageSetBuilder(magic=1, codec=Codec.SNAPPY)
    wrapped.extend([(b"w1", b"c", TS + 3), (b"w2", b"d", TS + 4)])
    old = MessageSetBuilder(magic=0)
    old.extend([(b"o1", b"e", None)])
    produced = plain.build() + wrapped.build() + old.build()
    result = append(produced, 7)
    entries = list(iter_entries(bytes(result.data)))  # type: ignore[attr-defined]
    assert [(e.magic, e.offset, e.codec) for e in entries] == [
        (2, 8, Codec.NONE),
        (2, 10, Codec.SNAPPY),
        (2, 11, Codec.NONE),
    ]
    messages = list(decode_messages(bytes(result.data)))  # type: ignore[attr-defined]
    assert [(m.offset, m.key, m.timestamp) for m in messages] == [
        (7, b"p1", TS + 1), (8, b"p2", TS + 2), (9, b"w1", TS + 3), (10, b"w2", TS + 4), (11, b"o1", NOW),
    ]  # fmt: skip
    assert messages[-1].timestamp_type == TimestampType.LOG_APPEND_TIME


def test_what_recovery_scans_agrees_with_what_the_append_indexed() -> None:
    produced = b"".join(encode_batch([RecordInput(b"k", b"v" * 50, TS + i)] * 3) for i in range(6))
    result = append(produced, 0, index_interval_bytes=150, bytes_since_index=150)
    data = bytes(result.data)  # type: ignore[attr-defined]
    scan = kernels.scan_entries(data, 0, len(data), True, 0, 150, 150)
    assert scan[0] == len(data) and scan[2] == 17 and scan[7] is None
    assert scan[5] == result.index_points  # type: ignore[attr-defined]


def test_bad_batches_are_refused_whole() -> None:
    good = encode_batch([RecordInput(b"k", b"v", TS)] * 3)
    with pytest.raises(CorruptRecordError, match="ends inside"):
        append(good + good[:30])
    corrupt = bytearray(good)
    corrupt[-2] ^= 0x10
    with pytest.raises(CorruptRecordError, match="CRC-32C"):
        append(bytes(corrupt))
    # offset deltas that do not start at 0 (kafka-python builder given offsets 5, 6)
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    builder.append(5, TS, b"a", b"b", [])
    builder.append(6, TS, b"a", b"b", [])
    with pytest.raises(CorruptRecordError, match="offset deltas"):
        append(bytes(builder.build()))
    with pytest.raises(RecordTooLargeError):
        append(encode_batch([RecordInput(None, b"x" * 5000, TS)]), max_message_bytes=1000)
    with pytest.raises(InvalidTimestampError):
        append(encode_batch([RecordInput(b"k", b"v", TS), RecordInput(b"k", b"v", -5)]))


def test_a_v1_log_takes_batches_without_headers_and_refuses_the_rest() -> None:
    produced = encode_batch([RecordInput(b"k%d" % i, b"v", TS + i) for i in range(3)], codec=Codec.GZIP)
    result = append(produced, 40, message_format=1)
    assert [(e.magic, e.offset) for e in iter_entries(bytes(result.data))] == [(1, 42)]  # type: ignore[attr-defined]
    assert [(m.offset, m.key, m.timestamp) for m in decode_messages(bytes(result.data))] == [  # type: ignore[attr-defined]
        (40, b"k0", TS), (41, b"k1", TS + 1), (42, b"k2", TS + 2),
    ]  # fmt: skip
    with pytest.raises(UnsupportedForMessageFormatError, match="headers"):
        append(encode_batch([RecordInput(b"k", b"v", TS, [("h", b"1")])]), message_format=1)
    with pytest.raises(UnsupportedCodecError, match="zstd"):
        append(encode_batch([RecordInput(b"k", b"v", TS)], codec=Codec.ZSTD), message_format=1)
    with pytest.raises(ValueError, match="message format"):
        append(produced, message_format=3)
    assert read_header(produced).records_count == 3


_sets = st.lists(
    st.tuples(
        st.lists(
            st.tuples(
                st.one_of(st.none(), st.binary(max_size=8)),
                st.one_of(st.none(), st.binary(max_size=30)),
                st.one_of(st.just(-1), st.integers(0, 2**41), st.integers(0, 2**41), st.just(-7)),
                st.lists(st.tuples(st.text(max_size=3), st.one_of(st.none(), st.binary(max_size=4))), max_size=2),
            ),
            min_size=1,
            max_size=6,
        ),
        st.sampled_from([Codec.NONE, Codec.NONE, Codec.NONE, Codec.GZIP, Codec.LZ4, Codec.ZSTD]),
        st.booleans(),  # stamped by the producer (LogAppendTime)
    ),
    min_size=1,
    max_size=5,
)


def _decompress(codec: int, records: memoryview) -> bytes:
    return decompress(Codec(codec), records, magic=2, max_size=1 << 20)


@settings(max_examples=300, deadline=None)
@given(
    batches=_sets,
    damage=st.one_of(st.none(), st.none(), st.none(), st.tuples(st.integers(0, 10_000), st.integers(0, 7))),
    cut=st.sampled_from([0, 0, 0, 1, 3]),
    log_append_time=st.booleans(),
    interval=st.sampled_from([1, 100, 1 << 20, 0]),  # 0: the first batch's size, an edge
    since=st.sampled_from([0, 5, 1 << 30]),
    max_bytes=st.sampled_from([120, 1_000_000]),
)
def test_the_fast_path_changes_nothing_but_speed(
    batches: list[tuple[list[tuple[bytes | None, bytes | None, int, list[tuple[str, bytes | None]]]], Codec, bool]],
    damage: tuple[int, int] | None,
    cut: int,
    log_append_time: bool,
    interval: int,
    since: int,
    max_bytes: int,
) -> None:
    """Uncompressed batches go through one kernel (``assign_batches``) that stops before anything
    it does not take as it is. On whole, damaged, cut, oversized and mixed sets, the append's
    result (bytes, offsets, timestamps, index points) or its error is the same with the kernel as
    with the full path alone, and the C kernel and its Python reference agree."""
    data = bytearray(
        b"".join(
            encode_batch(
                [RecordInput(k, v, ts, h) for k, v, ts, h in records],
                codec=codec,
                timestamp_type=TimestampType.LOG_APPEND_TIME if stamped else TimestampType.CREATE_TIME,
            )
            for records, codec, stamped in batches
        )
    )
    if damage is not None:
        data[damage[0] % len(data)] ^= 1 << damage[1]
    produced = bytes(data[: len(data) - cut])
    interval = interval or 12 + int.from_bytes(produced[8:12], "big", signed=True)
    options = {
        "log_append_time": log_append_time,
        "index_interval_bytes": interval,
        "bytes_since_index": since,
        "max_message_bytes": max_bytes,
    }

    def outcome() -> object:
        try:
            result = append(produced, **options)
        except (CorruptRecordError, InvalidTimestampError, RecordTooLargeError) as exc:
            return type(exc), str(exc)
        return (bytes(result.data), *result[1:])  # type: ignore[index]

    with_kernel = outcome()

    def take_nothing(_buf: bytearray, pos: int, _stop: int, next_offset: int, *rest: object) -> object:
        *_, bytes_since_index, _decompress = rest
        return pos, next_offset, -1, -1, [], bytes_since_index

    with mock.patch.object(kernels, "assign_batches", take_nothing):
        without = outcome()
    assert with_kernel == without
    args = (0, len(produced), 1000, max_bytes, NOW, log_append_time, interval, since, _decompress)
    c_buf, py_buf = bytearray(produced), bytearray(produced)
    assert kernels.assign_batches(c_buf, *args) == _fastpath.assign_batches(py_buf, *args)
    assert c_buf == py_buf


@pytest.mark.parametrize("module", [kernels, _fastpath], ids=["C", "python"])
def test_the_fast_path_indexes_where_the_full_path_does(module: object) -> None:
    """Index points fall where ``bytes_since_index`` reaches the interval, not only past it: with the
    interval one batch long, every batch after the first is indexed, by either kernel."""
    one = encode_batch([RecordInput(None, b"x", TS)])
    data = bytearray(one * 3)
    got = module.assign_batches(data, 0, len(data), 10, 10**6, NOW, False, len(one), 0, None)  # type: ignore[attr-defined]
    size = len(one)
    assert got == (3 * size, 13, TS, 10, [(size, 11, TS, 10), (2 * size, 12, TS, 10)], size)
    assert [read_header(data, i * size).base_offset for i in range(3)] == [10, 11, 12]
