"""The C kernels (_speedups) return exactly what the pure-Python reference kernels (_fastpath) return, on any bytes."""

from __future__ import annotations

import importlib
import itertools
from types import ModuleType

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalog.record import (
    LEGACY_CODECS,
    Codec,
    Message,
    MessageSetBuilder,
    TimestampType,
    _fastpath,
    decode_messages,
    kernels,
)
from kafkalog.record.batch_format import RecordInput, encode_batch
from kafkalog.record.validate import validate_for_append

from . import hand

INT64 = st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1)


def native() -> ModuleType:
    """The C kernels, configured like kernels.py does; FAILS (never skips) when they were not built."""
    try:
        speedups = importlib.import_module("kafkalog.record._speedups")
    except ImportError as exc:
        pytest.fail(f"the C kernels kafkalog.record._speedups were not built ({exc}); build them with `make native`")
    for module in (speedups, _fastpath):
        module.configure(Message, TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME)
    return speedups


def test_the_record_layer_uses_the_c_kernels() -> None:
    speedups = native()
    assert kernels.NATIVE is True, (
        "kafkalog.record.kernels fell back to the pure-Python kernels: the C extension was not built "
        "(make native) or KAFKALOG_PURE_PYTHON=1 is set"
    )
    assert kernels.implementation is speedups
    assert kernels.decode_plain is speedups.decode_plain
    assert kernels.scan_entries is speedups.scan_entries
    assert kernels.assign_plain is speedups.assign_plain


# --- comparing one call


def same_decode(c: ModuleType, buf: bytes, pos: int, stop: int, *args) -> tuple:
    expected = _fastpath.decode_plain(buf, pos, stop, *args)
    got = c.decode_plain(buf, pos, stop, *args)
    assert got == expected, (pos, stop, args)
    assert [type(m) for m in got[0]] == [Message] * len(got[0])
    assert [type(m.timestamp_type) for m in got[0]] == [type(m.timestamp_type) for m in expected[0]]
    return expected


def same_scan(c: ModuleType, buf: bytes, pos: int, stop: int, *args) -> tuple:
    expected = _fastpath.scan_entries(buf, pos, stop, *args)
    assert c.scan_entries(buf, pos, stop, *args) == expected, (pos, stop, args)
    return expected


def same_assign(c: ModuleType, buf: bytes, pos: int, stop: int, *args) -> tuple:
    mine, theirs = bytearray(buf), bytearray(buf)  # assign_plain rewrites its buffer: one copy each
    expected = _fastpath.assign_plain(mine, pos, stop, *args)
    assert c.assign_plain(theirs, pos, stop, *args) == expected, (pos, stop, args)
    assert theirs == mine, "the C kernel rewrote the buffer differently"
    return expected


def same_everything(c: ModuleType, buf: bytes, pos: int = 0, stop: int | None = None) -> None:
    """All three kernels, with a spread of argument values."""
    stop = len(buf) if stop is None else stop
    for verify in (True, False):
        for min_offset, magic, count in ((0, -1, 1 << 20), (3, 1, 2), (-(1 << 63), 0, 0), (1 << 40, -1, 5)):
            same_decode(c, buf, pos, stop, verify, min_offset, magic, count)
        for floor, interval, since in ((0, 0, 0), (-1, 50, 100), (5, 1 << 30, 0), (1 << 62, 64, 7)):
            same_scan(c, buf, pos, stop, verify, floor, interval, since)
    for args in (
        (0, 1_000_000, 1_700_000_000_000, False, 0, 0),
        (1 << 40, 60, 5, True, 100, 100),
        (7, 0, 0, False, 1 << 30, 1 << 30),
    ):
        same_assign(c, buf, pos, stop, *args)


# --- inputs


def valid_sets() -> list[bytes]:
    sets = []
    for magic, codec in itertools.product((0, 1), LEGACY_CODECS):
        builder = MessageSetBuilder(magic=magic, codec=codec, base_offset=10)
        builder.extend([(b"k", b"v", 5), (None, b"", None), (b"", None, 1 << 41), (None, None, 0)])
        sets.append(builder.build())
    log_append = MessageSetBuilder(magic=1, timestamp_type=TimestampType.LOG_APPEND_TIME)
    log_append.extend([(b"a", b"b", 1), (None, b"c", None)])
    mixed = (
        hand.entry(0, hand.message(1, b"key", b"value", timestamp=-1))
        + hand.entry(1, hand.message(0, None, b"old"))
        + sets[5]  # magic 1 gzip wrapper: plain kernels stop there
        + hand.entry(20, hand.message(1, None, None, timestamp=-2))  # a timestamp assign_plain refuses
        + hand.entry(21, hand.message(1, b"x" * 300, b"y" * 3000, timestamp=9))
    )
    refused = hand.entry(0, hand.message(1, None, b"v", timestamp=-2)) + sets[1]
    return [*sets, log_append.build(), refused, mixed, b""]


# magic 2 batches around a magic 1 entry: a partition written before and after its format changed
MIXED_V2 = (
    encode_batch([RecordInput(b"k", b"v", 5, [("h", b"1")]), RecordInput(None, None, 7)], base_offset=0)
    + hand.entry(2, hand.message(1, b"old", b"format", timestamp=8))
    + encode_batch([RecordInput(b"z", b"s" * 200, 9)] * 3, base_offset=3, codec=Codec.ZSTD)
    + encode_batch([RecordInput(b"a", b"b", 10)], base_offset=6, timestamp_type=TimestampType.LOG_APPEND_TIME)
)


VALID = valid_sets()


def test_valid_sets() -> None:
    c = native()
    for buf in [*VALID, MIXED_V2]:
        same_everything(c, buf)
        assert _fastpath.decode_plain(buf, 0, len(buf), True, 0, -1, 1 << 20)[2] is None


def test_every_truncation() -> None:
    c = native()
    for buf in (VALID[-2], MIXED_V2):  # the mixed sets
        for cut in range(len(buf) + 1):
            same_everything(c, buf[:cut])
            same_everything(c, buf, 0, cut)


def test_every_single_bit_flip() -> None:
    c = native()
    buf = VALID[-2][:400]  # the start of the mixed set: plain entries of both magics, part of a wrapper
    for byte in range(len(buf)):
        for bit in range(8):
            flipped = bytearray(buf)
            flipped[byte] ^= 1 << bit
            same_everything(c, bytes(flipped))


@st.composite
def plausible_entries(draw: st.DrawFn) -> bytes:
    """Entries that are mostly well-formed but may lie anywhere: sizes, magics, codecs, lengths, CRCs."""
    out = b""
    for _ in range(draw(st.integers(min_value=0, max_value=6))):
        magic = draw(st.sampled_from([0, 1, 1, 0, 2, 0xFF]))
        key = draw(st.none() | st.binary(max_size=20))
        value = draw(st.none() | st.binary(max_size=40))
        lies = {}
        if draw(st.booleans()):
            lies = draw(
                st.sampled_from(
                    [
                        {"key_length": draw(st.integers(min_value=-3, max_value=70))},
                        {"value_length": draw(st.integers(min_value=-3, max_value=70))},
                        {"crc": draw(st.integers(min_value=0, max_value=(1 << 32) - 1))},
                    ]
                )
            )
        msg = hand.message(
            magic,
            key,
            value,
            attributes=draw(st.sampled_from([0, 0, 0x08, 1, 2, 3, 5, 0x80, 0xF8])),
            timestamp=draw(st.sampled_from([-1, -2, 0, 1_700_000_000_000, (1 << 63) - 1, -(1 << 63)])),
            **lies,
        )
        size = draw(st.none() | st.integers(min_value=-30, max_value=len(msg) + 30))
        out += hand.entry(draw(INT64), msg, size=size)
    return out


def flips(buf: bytes, positions: list[int]) -> bytes:
    flipped = bytearray(buf)
    for position in positions:
        flipped[position % len(flipped)] ^= 1 << (position % 8)
    return bytes(flipped)


@st.composite
def any_buffer(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["valid", "flipped", "random", "plausible"]))
    if kind == "random":
        return draw(st.binary(max_size=300))
    if kind == "plausible":
        return draw(plausible_entries())
    buf = draw(st.sampled_from([*VALID[:-1], MIXED_V2]))
    if kind == "flipped":
        buf = flips(buf, draw(st.lists(st.integers(min_value=0, max_value=1 << 20), min_size=1, max_size=4)))
    return buf


@given(buf=any_buffer(), data=st.data())
@hand.fuzz(400)
def test_random_buffers_positions_and_arguments(buf: bytes, data: st.DataObject) -> None:
    c = native()
    stop = data.draw(st.integers(min_value=0, max_value=len(buf)), label="stop")
    pos = data.draw(st.integers(min_value=0, max_value=stop), label="pos")
    verify = data.draw(st.booleans(), label="verify_crc")
    same_decode(
        c,
        buf,
        pos,
        stop,
        verify,
        data.draw(INT64, label="min_offset"),
        data.draw(st.sampled_from([-1, 0, 1, 2]), label="required_magic"),
        data.draw(st.integers(min_value=0, max_value=10), label="max_count"),
    )
    same_scan(
        c,
        buf,
        pos,
        stop,
        verify,
        data.draw(INT64, label="min_next_offset"),
        data.draw(st.integers(min_value=0, max_value=400), label="index_interval"),
        data.draw(st.integers(min_value=0, max_value=400), label="bytes_since_index"),
    )
    same_assign(
        c,
        buf,
        pos,
        stop,
        data.draw(st.integers(min_value=0, max_value=1 << 62), label="next_offset"),
        data.draw(st.integers(min_value=0, max_value=400), label="max_entry_bytes"),
        data.draw(st.integers(min_value=0, max_value=1 << 62), label="now_ms"),
        data.draw(st.booleans(), label="log_append_time"),
        data.draw(st.integers(min_value=0, max_value=400), label="index_interval"),
        data.draw(st.integers(min_value=0, max_value=400), label="bytes_since_index"),
    )
    same_everything(c, buf, pos, stop)


# --- the record layer gives the same answers whichever kernels it runs on


def outcome(action) -> tuple:
    try:
        result = action()
    except Exception as exc:  # compared, not swallowed: both kernels must fail the same way
        return ("raised", type(exc), getattr(exc, "offset", None), getattr(exc, "position", None))
    return ("returned", result)


def both_kernels(action) -> tuple[tuple, tuple]:
    native()
    with_c = outcome(action)
    with pytest.MonkeyPatch.context() as patch:
        for name in ("decode_plain", "scan_entries", "assign_plain"):
            patch.setattr(kernels, name, getattr(_fastpath, name))
        with_python = outcome(action)
    return with_c, with_python


@given(
    buf=st.sampled_from(VALID),
    crc_covered_flips=st.lists(st.integers(min_value=0, max_value=1 << 20), max_size=3),
    cut=st.integers(min_value=0, max_value=1 << 20),
)
@hand.fuzz(150)
def test_readers_and_validation_agree_on_both_kernels(buf: bytes, crc_covered_flips: list[int], cut: int) -> None:
    # flip bits only under CRCs (entry headers stay sane), then maybe cut the end off
    starts = [e.position for e in hand.walk(buf)]
    covered = [p for p in range(len(buf)) if not any(s <= p < s + 16 for s in starts)]
    flipped = bytearray(buf)
    for i in crc_covered_flips if covered else []:
        flipped[covered[i % len(covered)]] ^= 1 << (i // len(covered) % 8)
    buf = bytes(flipped)
    buf = buf[: cut % (len(buf) + 1)]

    def decode() -> list:
        return list(itertools.islice(decode_messages(buf), 1000))

    def validate() -> tuple:
        result = validate_for_append(buf, 500, now_ms=1234, index_interval_bytes=64)
        return bytes(result.data), result.next_offset, result.max_timestamp, result.index_points

    for action in (decode, validate):
        with_c, with_python = both_kernels(action)
        assert with_c == with_python
