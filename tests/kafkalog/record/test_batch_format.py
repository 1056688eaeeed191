"""Message format v2 (record batches): encode and decode agree for every codec, kafka-python's own v2
code reads what we write and we read what it writes (byte for byte where both choose the same
fields), the header bits are reported, and mutated batches only ever raise our errors."""

from __future__ import annotations

import contextlib
import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kafkalog.errors import CorruptRecordError, RecordTooLargeError
from kafkalog.record import _fastpath, kernels
from kafkalog.record.batch_format import (
    BATCH_OVERHEAD,
    CRC_POS,
    RecordInput,
    check_crc,
    decode_batch,
    decode_batches,
    encode_batch,
    iter_headers,
    read_header,
    set_base_offset,
    with_producer,
    without_producer,
)
from kafkalog.record.message import Codec, Message, TimestampType

CODECS = list(Codec)
BASE_TS = 1_700_000_000_000

keys = st.one_of(st.none(), st.binary(max_size=40))
values = st.one_of(st.none(), st.binary(max_size=300))
header_lists = st.lists(st.tuples(st.text(max_size=12), st.one_of(st.none(), st.binary(max_size=20))), max_size=4)
timestamps = st.one_of(st.just(-1), st.integers(min_value=0, max_value=2**42))
record_lists = st.lists(st.builds(RecordInput, keys, values, timestamps, header_lists), min_size=1, max_size=30)


def _expected(records: list[RecordInput], base_offset: int) -> list[Message]:
    given_ts = [r.timestamp for r in records if r.timestamp != -1]
    base = given_ts[0] if given_ts else -1
    return [
        Message(
            base_offset + i,
            base if r.timestamp == -1 else r.timestamp,
            TimestampType.CREATE_TIME,
            r.key,
            r.value,
            tuple(r.headers),
        )
        for i, r in enumerate(records)
    ]


@settings(max_examples=60, deadline=None)
@given(records=record_lists, codec=st.sampled_from(CODECS), base_offset=st.integers(0, 2**40))
def test_decode_returns_what_was_encoded(records: list[RecordInput], codec: Codec, base_offset: int) -> None:
    data = encode_batch(records, base_offset=base_offset, codec=codec)
    header, messages = decode_batch(data)
    assert messages == _expected(records, base_offset)
    assert header.codec == codec and header.records_count == len(records) and header.size == len(data)
    assert header.last_offset == base_offset + len(records) - 1
    given_ts = [r.timestamp for r in records if r.timestamp != -1]
    assert header.max_timestamp == (max(given_ts) if given_ts else -1)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (-1, -1, -1)


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_reads_our_batches(codec: Codec) -> None:
    records = [
        RecordInput(b"k%d" % i, b"v" * i, BASE_TS + i, [("trace", b"t%d" % i), ("none", None)]) for i in range(20)
    ]
    data = encode_batch(records, base_offset=500, codec=codec, producer_id=77, producer_epoch=3, base_sequence=10)
    theirs = DefaultRecordBatch(bytearray(data))
    assert theirs.validate_crc()
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence) == (77, 3, 10)
    read = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in theirs]
    assert read == [(500 + i, BASE_TS + i, r.key, r.value, list(r.headers)) for i, r in enumerate(records)]


@pytest.mark.parametrize("codec", CODECS)
def test_we_read_kafka_python_batches_byte_for_byte(codec: Codec) -> None:
    records = [RecordInput(None if i % 3 == 0 else b"key-%d" % i, b"x" * (i * 7), BASE_TS + 2 * i, [("h", b"%d" % i)])
               for i in range(25)]  # fmt: skip
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=int(codec), is_transactional=False,
        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 20,
    )  # fmt: skip
    for i, record in enumerate(records):
        assert builder.append(i, record.timestamp, record.key, record.value, list(record.headers)) is not None
    theirs = bytes(builder.build())
    header, messages = decode_batch(theirs)
    assert messages == _expected(records, 0)
    assert header.codec == codec
    if codec == Codec.NONE:  # the same choices of every field: the same bytes
        ours = bytearray(encode_batch(records))
        struct.pack_into(">i", ours, 12, header.partition_leader_epoch)  # the one field producers differ on
        ours[CRC_POS : CRC_POS + 4] = theirs[CRC_POS : CRC_POS + 4]  # ... which the CRC does not cover
        assert bytes(ours) == theirs


def test_header_bits_and_log_append_time_are_reported() -> None:
    records = [RecordInput(b"a", b"1", BASE_TS + 5), RecordInput(b"b", b"2", BASE_TS + 1)]
    data = encode_batch(records, timestamp_type=TimestampType.LOG_APPEND_TIME, transactional=True, control=True)
    header, messages = decode_batch(data)
    assert header.transactional and header.control
    assert header.timestamp_type == TimestampType.LOG_APPEND_TIME
    # log-append time: every record reports the batch's max timestamp
    assert [(m.timestamp, m.timestamp_type) for m in messages] == [(BASE_TS + 5, TimestampType.LOG_APPEND_TIME)] * 2


def test_offsets_are_given_per_batch_outside_the_crc() -> None:
    data = bytearray(encode_batch([RecordInput(b"k", b"v", BASE_TS)] * 3 + [RecordInput(None, None, BASE_TS)]))
    set_base_offset(data, 0, 9000)
    header, messages = decode_batch(data)  # the CRC still holds
    assert [m.offset for m in messages] == [9000, 9001, 9002, 9003] and header.next_offset == 9004
    two = bytes(data) + encode_batch([RecordInput(b"x", b"y", BASE_TS)], base_offset=9004)
    assert [m.offset for _, batch in decode_batches(two) for m in batch] == [9000, 9001, 9002, 9003, 9004]
    assert [h.base_offset for h in iter_headers(two)] == [9000, 9004]


def test_bad_header_fields_are_named() -> None:
    good = encode_batch([RecordInput(b"k", b"v", BASE_TS)])
    with pytest.raises(CorruptRecordError, match="truncated"):
        read_header(good[:-1])
    with pytest.raises(CorruptRecordError, match="magic 1, not 2"):
        read_header(good[:16] + b"\x01" + good[17:])
    flipped = bytearray(good)
    flipped[-1] ^= 0x40
    with pytest.raises(CorruptRecordError, match="CRC-32C"):
        check_crc(flipped, read_header(flipped))
    unknown_codec = bytearray(good)
    unknown_codec[22] |= 0x07
    with pytest.raises(CorruptRecordError, match="unknown codec 7"):
        decode_batch(unknown_codec, verify_crc=False)
    with pytest.raises(ValueError, match="at least one record"):
        encode_batch([])
    with pytest.raises(TypeError, match="header key must be a str"):
        encode_batch([RecordInput(b"k", b"v", BASE_TS, [(b"bytes-key", b"v")])])  # type: ignore[list-item]


def test_a_zstd_bomb_is_refused_without_inflating_it() -> None:
    records = [RecordInput(None, bytes(1 << 20), BASE_TS)] * 40  # 40 MiB of zeros, a few KiB compressed
    data = encode_batch(records, codec=Codec.ZSTD)
    assert len(data) < 64 * 1024
    with pytest.raises(RecordTooLargeError):
        decode_batch(data, max_decompressed=8 << 20)


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), codec=st.sampled_from(CODECS))
def test_mutated_batches_only_raise_our_errors(seed: int, codec: Codec) -> None:
    rng = random.Random(seed)
    records = [RecordInput(b"k%d" % i, rng.randbytes(rng.randrange(30)), BASE_TS + i, [("h", b"v")]) for i in range(8)]
    data = bytearray(encode_batch(records, codec=codec))
    for _ in range(rng.randrange(1, 4)):
        kind = rng.randrange(3)
        if kind == 0 and data:
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        elif kind == 1 and data:
            del data[rng.randrange(len(data)) :]
        else:
            position = rng.randrange(min(BATCH_OVERHEAD, len(data)), len(data) + 1)
            data[position:position] = rng.randbytes(rng.randrange(1, 6))
    for verify in (True, False):  # without the CRC, the record parser itself meets the damage
        with contextlib.suppress(CorruptRecordError, RecordTooLargeError):
            decode_batch(data, verify_crc=verify)


@settings(max_examples=200, deadline=None)
@given(payload=st.binary(max_size=200), count=st.integers(0, 20), last=st.integers(0, 40))
def test_record_kernels_agree_and_never_raise(payload: bytes, count: int, last: int) -> None:
    expected = _fastpath.decode_records(payload, count, 0, BASE_TS, BASE_TS, last, False)
    assert kernels.decode_records(payload, count, 0, BASE_TS, BASE_TS, last, False) == expected


@settings(max_examples=200, deadline=None)
@given(payload=st.binary(max_size=200), count=st.integers(0, 20), stamped=st.booleans())
def test_check_kernels_agree_and_never_raise(payload: bytes, count: int, stamped: bool) -> None:
    expected = _fastpath.check_records(payload, count, BASE_TS, stamped)
    assert kernels.check_records(payload, count, BASE_TS, stamped) == expected


@settings(max_examples=200, deadline=None)
@given(records=record_lists, seed=st.integers(0, 2**32 - 1), base=st.sampled_from([BASE_TS, 0, -5]))
def test_the_check_finds_what_decoding_finds(records: list[RecordInput], seed: int, base: int) -> None:
    """The broker checks produced records with ``check_records`` instead of decoding them: on whole
    and on damaged records it must fail where decoding fails, for the same reason, and otherwise
    report the timestamps decoding reports."""
    payload = bytearray(kernels.encode_records([tuple(r) for r in records], base))
    rng = random.Random(seed)
    if seed % 3 and payload:  # two in three: damaged
        for _ in range(rng.randrange(1, 3)):
            payload[rng.randrange(len(payload))] ^= 1 << rng.randrange(8)
    count, last = len(records), len(records) - 1
    for module in (kernels, _fastpath):
        decoded, decode_error = module.decode_records(bytes(payload), count, 0, base, base, last, False)
        highest, missing, error = module.check_records(bytes(payload), count, base, False)
        if decode_error is not None:
            assert error == decode_error
            continue
        stamps = [m.timestamp for m in decoded]
        if any(t < -1 for t in stamps):
            assert error is not None and error[0] == "timestamp"
            assert f"timestamp {next(t for t in stamps if t < -1)} is negative" in error[2]
            continue
        assert error is None
        assert (highest, missing) == (max(stamps), -1 in stamps)
        # a batch the producer stamped: the records' own timestamps are not looked at
        assert module.check_records(bytes(payload), count, base, True)[2] is None


@settings(max_examples=100, deadline=None)
@given(records=record_lists)
def test_record_encoders_agree(records: list[RecordInput]) -> None:
    items = [tuple(r) for r in records]
    assert bytes(kernels.encode_records(items, BASE_TS)) == bytes(_fastpath.encode_records(items, BASE_TS))


@pytest.mark.parametrize(
    "length",
    [0, 1, 7, 8, 767, 768, 769, 3 * 256 * 2 + 5, 3 * 8192 - 1, 3 * 8192, 3 * 8192 + 1, 3 * 8192 + 777, 6 * 8192 + 13],
)
def test_crc32c_of_every_length_matches_the_reference(length: int) -> None:
    """The C CRC-32C takes long buffers in three interleaved streams of 8 KiB and then 256-byte
    blocks and joins them: lengths on each side of those block edges, at an odd alignment, give
    the reference's answer (the crc32c package, which _fastpath uses)."""
    data = random.Random(length).randbytes(length + 3)[3:]
    assert kernels.crc32c(data) == _fastpath.crc32c(data)
    flipped = bytearray(data + b"!")
    flipped[len(flipped) // 2] ^= 0x10
    assert kernels.crc32c(bytes(flipped)) != kernels.crc32c(data + b"!"), "a flipped bit changes the CRC"


@settings(max_examples=100, deadline=None)
@given(records=record_lists)
def test_batch_timestamps_agree(records: list[RecordInput]) -> None:
    """The base and largest timestamp of a batch: its first and its largest given (not -1)."""
    items = [tuple(r) for r in records]
    given = [r.timestamp for r in records if r.timestamp != -1]
    expected = (given[0], max(given)) if given else (-1, -1)
    assert kernels.batch_timestamps(items) == _fastpath.batch_timestamps(items) == expected


@pytest.mark.parametrize("module", [kernels, _fastpath], ids=["C", "python"])
def test_encoding_refuses_a_header_key_that_is_not_text(module: object) -> None:
    with pytest.raises(TypeError, match="a header key must be a str, not bytes"):
        module.encode_records([(None, b"v", BASE_TS, ((b"key", b"v"),))], BASE_TS)  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match=r"\(key, value, timestamp, headers\) tuple"):
        module.batch_timestamps([(None, b"v")])  # type: ignore[attr-defined]


def test_a_stream_mixing_formats_reads_in_order_and_stops_before_a_cut_batch() -> None:
    from kafkalog.record import MessageSetBuilder, decode_messages, iter_entries

    old = MessageSetBuilder(magic=1, codec=Codec.GZIP, base_offset=2)
    old.extend([(b"old-1", b"a", BASE_TS + 2), (b"old-2", b"b", BASE_TS + 3)])
    stream = (
        encode_batch([RecordInput(b"v2-0", b"x", BASE_TS, [("h", b"0")]), RecordInput(b"v2-1", b"y", BASE_TS + 1)])
        + old.build()
        + encode_batch([RecordInput(b"v2-4", b"z", BASE_TS + 4)] * 3, base_offset=4, codec=Codec.ZSTD)
    )
    messages = list(decode_messages(stream))
    assert [m.offset for m in messages] == [0, 1, 2, 3, 4, 5, 6]
    assert [m.key for m in messages[:4]] == [b"v2-0", b"v2-1", b"old-1", b"old-2"]
    assert messages[0].headers == (("h", b"0"),) and messages[2].headers == ()
    # entries count by their last offset, whatever their magic
    assert [(e.magic, e.offset) for e in iter_entries(stream)] == [(2, 1), (1, 3), (2, 6)]
    # a read that starts inside a batch gets the batch whole; decoding skips what lies before
    assert [m.offset for m in decode_messages(stream, min_offset=5)] == [5, 6]
    # a read cut inside the last batch stops cleanly before it
    assert [m.offset for m in decode_messages(stream[:-10])] == [0, 1, 2, 3]


def test_a_copied_batch_loses_its_producer_but_keeps_its_records() -> None:
    """A mirror sends other clusters' batches: their producer ids mean nothing on the target (two
    clusters hand out the same ids), so they are cleared; a transactional batch keeps its own."""
    records = [RecordInput(b"k%d" % i, b"v%d" % i, BASE_TS + i) for i in range(3)]
    plain = encode_batch(records)
    numbered = encode_batch(records, producer_id=7, producer_epoch=2, base_sequence=40, codec=Codec.LZ4)
    transactional = encode_batch(records, producer_id=9, producer_epoch=0, base_sequence=0, transactional=True)
    assert without_producer(plain) is plain  # nothing to clear: not copied
    cleared = without_producer(plain + numbered + transactional)
    headers = list(iter_headers(cleared))  # every CRC checked
    assert [(h.producer_id, h.producer_epoch, h.base_sequence) for h in headers] == [
        (-1, -1, -1), (-1, -1, -1), (9, 0, 0),
    ]  # fmt: skip
    assert [m.value for _, batch in decode_batches(cleared) for m in batch] == [b"v0", b"v1", b"v2"] * 3


def test_a_forwarded_batch_becomes_the_producers_own() -> None:
    """A mirror numbers the batches it forwards as its producer's: id, epoch, sequence and base
    offset 0 (Kafka refuses another), the CRC still right, the records untouched; one batch only."""
    records = [RecordInput(b"k%d" % i, b"v%d" % i, BASE_TS + i, [("h", b"%d" % i)]) for i in range(3)]
    fetched = bytearray(encode_batch(records, producer_id=7, producer_epoch=2, base_sequence=40, codec=Codec.LZ4))
    set_base_offset(fetched, 0, 1234)  # as stored at the source
    owned = with_producer(bytes(fetched), 55, 1, 300)
    header = next(iter_headers(owned))  # its CRC checked
    assert (header.base_offset, header.producer_id, header.producer_epoch, header.base_sequence) == (0, 55, 1, 300)
    assert [(m.key, m.value, m.timestamp, m.headers) for _, batch in decode_batches(owned) for m in batch] == [
        (r.key, r.value, r.timestamp, tuple(r.headers)) for r in records
    ]
    with pytest.raises(ValueError, match="takes one batch"):
        with_producer(owned + owned, 55, 1, 303)
