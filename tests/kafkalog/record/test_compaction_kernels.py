"""The log cleaner's kernels: the C ones (_speedups_compact.c) leave the same offset map bytes and
``out`` bytes and return the same values as their pure-Python reference (_fastpath_compact), raise
the same ValueError on damage; and what they keep of a log is what the compaction rule keeps,
computed here from the decoded records (the latest record of each key; tombstones as asked)."""

from __future__ import annotations

import importlib
import struct
from collections.abc import Callable
from types import ModuleType
from typing import Any, NamedTuple

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalog.record import Codec, Message, TimestampType, kernels
from kafkalog.record import _fastpath_compact as py
from kafkalog.record.batch_format import (
    BatchHeader,
    RecordInput,
    decode_batch,
    decode_batches,
    encode_batch,
    records_payload,
)

from . import hand

SLOT = struct.Struct("<QQq")
HEADER = struct.Struct(">qiibIhiqqqhii")


def native() -> ModuleType:
    """The C kernels; FAILS (never skips) when they were not built."""
    try:
        return importlib.import_module("kafkalog.record._speedups")
    except ImportError as exc:
        pytest.fail(f"the C kernels kafkalog.record._speedups were not built ({exc}); build them with `make native`")


C = native()
IMPLEMENTATIONS = (py, C)


def empty_table(slots: int) -> bytearray:
    return bytearray(b"\xff") * (slots * py.MAP_SLOT_BYTES)


def outcome(call: Callable[..., Any], *args: Any) -> tuple[str, Any]:
    """What a kernel did: its result, or the message of the ValueError it raised (any other
    exception fails the test)."""
    try:
        return "returned", call(*args)
    except ValueError as exc:
        return "raised", str(exc)


# --- records made by hand (the oracle of the hash and of the damaged payloads)


def varint(value: int) -> bytes:
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while zigzag >= 0x80:
        out.append(zigzag & 0x7F | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


def record(key: bytes | None, value: bytes | None, offset_delta: int = 0, timestamp_delta: int = 0) -> bytes:
    body = b"\x00" + varint(timestamp_delta) + varint(offset_delta)
    body += varint(-1) if key is None else varint(len(key)) + key
    body += varint(-1) if value is None else varint(len(value)) + value
    body += varint(0)  # headers
    return varint(len(body)) + body


def c_hash(key: bytes) -> tuple[int, int]:
    """The C kernels' hash of ``key``, as map_put_records stores it in a table of one slot."""
    table = empty_table(1)
    assert C.map_put_records(table, 1, 0, record(key, b"v"), 1, 7) == 1
    h1, h2, offset = SLOT.unpack(table)
    assert offset == 7
    return h1, h2


# --- the hash and the map


def test_the_record_layer_takes_the_c_compaction_kernels() -> None:
    assert kernels.NATIVE, "the C kernels were not built (make native) or KAFKALOG_PURE_PYTHON=1 is set"
    for name in ("map_get", "map_put_records", "map_put_batches", "filter_records", "filter_batches"):
        assert getattr(kernels, name) is getattr(C, name), name


def test_murmur3_x64_128_vectors() -> None:
    vectors = {
        b"": (0, 0),
        b"hello": (0xCBD8A7B341BD9B02, 0x5B1E906A48AE1D19),
        # smhasher's digest 6c1b07bc7bbc4be347939ac4a93c437a, as two little-endian words
        b"The quick brown fox jumps over the lazy dog": (0xE34BBC7BBC071B6C, 0x7A433CA9C49A9347),
    }
    for key, expected in vectors.items():
        assert py.key_hash(key) == expected, key
        assert c_hash(key) == expected, key


def test_the_hash_of_every_tail_length_agrees() -> None:
    for length in range(41):
        key = bytes((i * 151 + 200) % 256 for i in range(length))  # high bits set: no sign slips
        assert c_hash(key) == py.key_hash(key), length


def test_a_map_built_by_one_is_read_by_the_other() -> None:
    payload = b"".join(record(b"k%d" % (i % 7), b"v", i) for i in range(20)) + record(None, b"keyless", 20)
    tables = []
    for impl in IMPLEMENTATIONS:
        table = empty_table(11)
        assert impl.map_put_records(table, 10, 0, payload, 21, 100) == 7
        tables.append(table)
    assert tables[0] == tables[1]
    for impl in IMPLEMENTATIONS:
        for i in range(7):  # the last record of key i is record 14 + i (13 for the key 6)
            assert impl.map_get(bytes(tables[0]), b"k%d" % i) == 100 + (14 + i if i < 6 else 13)
        assert impl.map_get(tables[0], b"absent") == -1
        assert impl.map_get(tables[0], b"") == -1


def test_a_map_without_room_raises_the_same_and_is_left_the_same() -> None:
    payload = b"".join(record(b"k%d" % i, b"v", i) for i in range(5))
    for slots, max_entries, message in ((3, 10, "the offset map is full"), (8, 3, "holds 3 keys: no room")):
        results, tables = [], []
        for impl in IMPLEMENTATIONS:
            table = empty_table(slots)
            results.append(outcome(impl.map_put_records, table, max_entries, 0, payload, 5, 0))
            tables.append(table)
        assert results[0] == results[1]
        assert results[0][0] == "raised"
        assert message in results[0][1]
        assert tables[0] == tables[1]
        assert sum(SLOT.unpack_from(tables[0], i)[2] != -1 for i in range(0, len(tables[0]), 24)) <= max_entries


def test_a_table_without_a_slot_raises_in_both() -> None:
    payload = record(b"k", b"v")
    batch = encode_batch([RecordInput(b"k", b"v")])
    for impl in IMPLEMENTATIONS:
        for call, args in (
            (impl.map_get, (b"\xff" * 23, b"k")),
            (impl.map_put_records, (bytearray(10), 5, 0, payload, 1, 0)),
            (impl.filter_records, (b"", payload, 1, 0, True)),
            (impl.map_put_batches, (bytearray(), 5, 0, batch, 0, len(batch))),
            (impl.filter_batches, (b"", batch, 0, len(batch), bytearray(), True, set())),
        ):
            with pytest.raises(ValueError, match="has no slot"):
                call(*args)
        # keyless records need no slot
        assert impl.filter_records(b"", record(None, b"v"), 1, 0, True) == (bytearray(), 0, -(1 << 63))


# --- random logs


class Entry(NamedTuple):
    """One entry of a generated log: where it lies and what it is."""

    pos: int
    data: bytes
    kind: str  # plain, gzip, transactional, control, v1
    header: BatchHeader | None
    messages: list[Message]


@st.composite
def logs(draw: st.DrawFn) -> tuple[bytes, list[Entry], int]:
    """(log bytes, its whole entries, where its partial trailing entry starts (its length when none))."""
    keys = st.sampled_from([None, b"", b"a", b"b", b"c", b"key-" * 5, b"\xff\x00"])
    values = st.one_of(st.none(), st.binary(max_size=12))
    timestamps = st.one_of(st.just(-1), st.integers(min_value=0, max_value=1 << 42))
    headers = st.sampled_from([(), (("h", b"1"),)])
    items = st.lists(st.builds(RecordInput, keys, values, timestamps, headers), min_size=1, max_size=8)
    entries: list[Entry] = []
    buf = b""
    offset = draw(st.integers(min_value=0, max_value=1 << 40))
    for _ in range(draw(st.integers(min_value=0, max_value=10))):
        kind = draw(st.sampled_from(["plain"] * 6 + ["gzip", "transactional", "control", "v1"]))
        offset += draw(st.sampled_from([0, 0, 1, 5]))  # compacted logs have gaps
        if kind == "v1":
            data = hand.entry(offset, hand.message(1, draw(keys), draw(values), timestamp=draw(timestamps)))
            offset += 1
        else:
            records = draw(items)
            idempotent = draw(st.booleans()) or kind == "transactional"
            data = encode_batch(
                records,
                base_offset=offset,
                codec=Codec.GZIP if kind == "gzip" else Codec.NONE,
                timestamp_type=draw(st.sampled_from(TimestampType)),
                producer_id=draw(st.integers(0, 1 << 40)) if idempotent else -1,
                producer_epoch=draw(st.integers(0, 32767)) if idempotent else -1,
                base_sequence=draw(st.integers(0, 1 << 30)) if idempotent else -1,
                partition_leader_epoch=draw(st.integers(-1, 9)),
                transactional=kind in {"transactional", "control"},
                control=kind == "control",
            )
            offset += len(records)
        header, messages = decode_batch(data) if kind != "v1" else (None, [])
        entries.append(Entry(len(buf), data, kind, header, messages))
        buf += data
    whole = len(buf)
    if draw(st.booleans()) and entries:
        cut = draw(st.sampled_from(entries)).data
        buf += cut[: draw(st.integers(min_value=1, max_value=len(cut) - 1))]
    return buf, entries, whole


def build_map(impl: ModuleType, buf: bytes, entries: list[Entry], slots: int, max_entries: int) -> tuple[Any, ...]:
    """The map a cleaner builds of ``buf``: plain batches by map_put_batches, gzip ones by
    map_put_records on their records, the others skipped; it stops where the map is full.
    Returns (table, keys held, every kernel result, where the map ends)."""
    table, used, pos, results = empty_table(slots), 0, 0, []
    at = {entry.pos: entry for entry in entries}
    while True:
        result = impl.map_put_batches(table, max_entries, used, buf, pos, len(buf))
        results.append(result)
        pos, used, _, status = result
        assert used <= max_entries
        if status != 1:
            if status == 2:
                assert at[pos].kind == "plain"
                assert used + len(at[pos].messages) > max_entries
            break
        entry = at[pos]
        assert entry.kind != "plain"
        if entry.kind == "gzip":
            assert entry.header is not None
            if used + entry.header.records_count > max_entries:
                break
            used = impl.map_put_records(
                table, max_entries, used, records_payload(entry.data, entry.header), entry.header.records_count,
                entry.header.base_offset,
            )  # fmt: skip
            results.append(used)
        pos += len(entry.data)
    return table, used, results, pos


def clean(impl: ModuleType, table: Any, buf: bytes, retain: bool, protected: set[int]) -> tuple[bytearray, list[Any]]:
    """What filter_batches keeps of ``buf``'s plain batches (other entries skipped), after a prefix
    already in ``out``."""
    out, pos, results = bytearray(b"prefix"), 0, []
    starts = {}
    offset = 0
    while offset < len(buf):  # every whole entry's size, to skip the ones the kernels stop at
        (length,) = struct.unpack_from(">i", buf, offset + 8) if len(buf) - offset >= 12 else (len(buf),)
        starts[offset] = 12 + length
        offset += 12 + length
    while True:
        result = impl.filter_batches(table, buf, pos, len(buf), out, retain, protected)
        results.append(result)
        pos, status = result[0], result[1]
        if status == 0:
            break
        assert status == 1
        pos += starts[pos]
    return out, results


def expected_batches(
    entries: list[Entry], latest: dict[bytes, int], retain: bool, protected: set[int]
) -> list[tuple[str, Entry, list[Message]]]:
    """What the rule keeps of each plain batch, from its decoded records: ("verbatim" | "rebuilt"
    | "empty", the batch, the records kept)."""
    kept_batches = []
    for entry in entries:
        if entry.kind != "plain":
            continue
        assert entry.header is not None
        kept = [
            m for m in entry.messages
            if m.key is not None and (m.value is not None or retain) and m.offset >= latest.get(m.key, -1)
        ]  # fmt: skip
        if kept and len(kept) == len(entry.messages):
            kept_batches.append(("verbatim", entry, kept))
        elif kept:
            kept_batches.append(("rebuilt", entry, kept))
        elif entry.header.last_offset in protected:
            kept_batches.append(("empty", entry, kept))
    return kept_batches


def check_kept(out: bytes, expected: list[tuple[str, Entry, list[Message]]]) -> None:
    """``out`` holds exactly the expected batches, each whole (CRC-32C checked) and as the rule says."""
    decoded = list(decode_batches(out, verify_crc=True))
    assert len(decoded) == len(expected)
    for (header, records), (how, entry, kept) in zip(decoded, expected, strict=True):
        original = entry.header
        assert original is not None
        assert records == kept, how
        got = out[header.position : header.end]
        if how == "verbatim":
            assert got == entry.data
            continue
        same = ("base_offset", "partition_leader_epoch", "magic", "attributes", "last_offset_delta",
                "producer_id", "producer_epoch", "base_sequence")  # fmt: skip
        assert [getattr(header, f) for f in same] == [getattr(original, f) for f in same]
        assert header.records_count == len(kept)
        if how == "empty":
            assert (header.base_timestamp, header.max_timestamp) == (-1, original.max_timestamp)
            assert header.size == 61
        elif original.timestamp_type == TimestampType.LOG_APPEND_TIME:
            assert (header.base_timestamp, header.max_timestamp) == (original.base_timestamp, original.max_timestamp)
        else:
            assert header.base_timestamp == original.base_timestamp
            assert header.max_timestamp == max(m.timestamp for m in kept)


@given(
    log=logs(),
    extra_slots=st.sampled_from([1, 2, 9, 64]),
    max_entries=st.one_of(st.integers(min_value=0, max_value=9), st.just(64)),  # near full, or room
    retain=st.booleans(),
    protect=st.sampled_from(["none", "some", "idempotent", "all"]),
    data=st.data(),
)
@hand.fuzz(100)
def test_random_logs_are_cleaned_alike_and_by_the_rule(
    log: tuple[bytes, list[Entry], int],
    extra_slots: int,
    max_entries: int,
    retain: bool,
    protect: str,
    data: st.DataObject,
) -> None:
    buf, entries, whole = log
    maps = [build_map(impl, buf, entries, max_entries + extra_slots, max_entries) for impl in IMPLEMENTATIONS]
    assert maps[0][1:] == maps[1][1:]
    assert maps[0][0] == maps[1][0], "the tables differ"
    table, used, _, map_end = maps[1]
    latest: dict[bytes, int] = {}
    for entry in entries:
        if entry.pos < map_end and entry.kind in {"plain", "gzip"}:
            for m in entry.messages:
                if m.key is not None:
                    latest[m.key] = m.offset
    assert used == len(latest)
    for key, offset in latest.items():
        assert C.map_get(table, key) == py.map_get(table, key) == offset
    assert C.map_get(table, b"never put") == -1

    plain_lasts = [e.header.last_offset for e in entries if e.kind == "plain" and e.header is not None]
    protected = {
        "none": set(),
        "some": set(data.draw(st.lists(st.sampled_from(plain_lasts))) if plain_lasts else []),
        "idempotent": {e.header.last_offset for e in entries if e.header is not None and e.header.producer_id >= 0},
        "all": set(plain_lasts),
    }[protect]
    cleaned = [clean(impl, table, buf, retain, protected) for impl in IMPLEMENTATIONS]
    assert cleaned[0][1] == cleaned[1][1]
    assert cleaned[0][0] == cleaned[1][0], "the outputs differ"
    out, results = cleaned[1]
    assert results[-1][0] == whole  # at the partial entry, or the end
    assert sum(r[2] for r in results) == sum(len(e.messages) for e in entries if e.kind == "plain")
    expected = expected_batches(entries, latest, retain, protected)
    assert sum(r[3] for r in results) == sum(len(kept) for _, _, kept in expected)
    assert out[:6] == b"prefix"
    check_kept(bytes(out[6:]), expected)

    # cleaning the cleaned log again keeps its records; an empty batch no longer protected goes
    again_protected = set(data.draw(st.lists(st.sampled_from(sorted(protected))))) if protected else set()
    first = bytes(out[6:])
    again = [clean(impl, table, first, retain, again_protected) for impl in IMPLEMENTATIONS]
    assert again[0] == again[1]
    first_batches = {h.base_offset: first[h.position : h.end] for h, _ in decode_batches(first, verify_crc=True)}
    second = bytes(again[1][0][6:])
    decoded_again = list(decode_batches(second, verify_crc=True))
    still = [
        kept for how, e, kept in expected if how != "empty" or (e.header and e.header.last_offset in again_protected)
    ]
    assert [records for _, records in decoded_again] == still
    for header, _ in decoded_again:  # whole now, or empty and still protected: the same bytes
        assert second[header.position : header.end] == first_batches[header.base_offset]


# --- the walk's stops


def test_the_walkers_stop_at_each_kind_of_entry_and_at_partial_ones() -> None:
    plain = encode_batch([RecordInput(b"k", b"v", 1), RecordInput(b"k", b"w", 2)], base_offset=0)
    v1 = hand.entry(2, hand.message(1, b"k", b"old", timestamp=3))  # 34 + 3 + 1 bytes: less than a batch header
    assert len(v1) < 61
    gzip = encode_batch([RecordInput(b"k", b"z", 4)], base_offset=3, codec=Codec.GZIP)
    for special in (v1, gzip, encode_batch([RecordInput(b"k", b"t")], base_offset=3, producer_id=1,
                                           producer_epoch=0, base_sequence=0, transactional=True)):  # fmt: skip
        buf = plain + special
        for stop in range(len(plain), len(buf) + 1):
            whole = stop == len(buf)
            results = []
            for impl in IMPLEMENTATIONS:
                table = empty_table(4)
                put = impl.map_put_batches(table, 3, 0, buf, 0, stop)
                out = bytearray()
                filtered = impl.filter_batches(table, buf, 0, stop, out, False, set())
                results.append((put, table, filtered, out))
            assert results[0] == results[1]
            put, _, filtered, out = results[1]
            assert put == (len(plain), 1, 1, 1 if whole else 0)
            assert filtered == (len(plain), 1 if whole else 0, 2, 1)
            assert [m.value for _, ms in decode_batches(out) for m in ms] == [b"w"]
        # from a position inside the partial entry: nothing whole, status 0 where it started
        for impl in IMPLEMENTATIONS:
            assert impl.map_put_batches(empty_table(4), 3, 0, buf, len(plain), len(buf) - 1)[3] == 0
            assert impl.map_put_batches(empty_table(4), 3, 0, buf, len(buf), len(buf)) == (len(buf), 0, -1, 0)


def test_status_2_leaves_the_batch_that_might_not_fit() -> None:
    batches = [
        encode_batch([RecordInput(b"k%d" % (i * 3 + j), b"v") for j in range(3)], base_offset=i * 3) for i in range(3)
    ]
    buf, size = b"".join(batches), len(batches[0])
    assert {len(b) for b in batches} == {size}
    for max_entries, expected in (
        (2, (0, 0, -1, 2)),
        (5, (size, 3, 2, 2)),
        (6, (2 * size, 6, 5, 2)),
        (9, (3 * size, 9, 8, 0)),
    ):
        results = []
        for impl in IMPLEMENTATIONS:
            table = empty_table(max_entries + 1)
            results.append((impl.map_put_batches(table, max_entries, 0, buf, 0, len(buf)), table))
        assert results[0] == results[1]
        assert results[1][0] == expected


def test_out_of_range_positions_raise_in_both() -> None:
    batch = encode_batch([RecordInput(b"k", b"v")])
    for pos, stop in ((-1, 10), (5, 4), (0, len(batch) + 1)):
        for impl in IMPLEMENTATIONS:
            with pytest.raises(ValueError, match="lie outside"):
                impl.map_put_batches(empty_table(2), 1, 0, batch, pos, stop)
            with pytest.raises(ValueError, match="lie outside"):
                impl.filter_batches(empty_table(2), batch, pos, stop, bytearray(), True, set())


# --- damage


@given(
    payload=st.binary(max_size=60),
    count=st.integers(min_value=-1, max_value=6),
    base=st.sampled_from([0, 7, (1 << 63) - 3]),
)
@hand.fuzz(200)
def test_damaged_payloads_raise_the_same(payload: bytes, count: int, base: int) -> None:
    puts = []
    for impl in IMPLEMENTATIONS:
        table = empty_table(5)
        puts.append((outcome(impl.map_put_records, table, 4, 0, payload, count, base), table))
    assert puts[0] == puts[1]
    filtered = [outcome(impl.filter_records, puts[1][1], payload, count, base, True) for impl in IMPLEMENTATIONS]
    assert filtered[0] == filtered[1]


@st.composite
def plausible_payloads(draw: st.DrawFn) -> tuple[bytes, int]:
    """Records made by hand, then one byte changed or the bytes cut: mostly valid up to the damage."""
    records = [
        record(draw(st.sampled_from([None, b"a", b"bb"])), draw(st.sampled_from([None, b"", b"v"])), i,
               draw(st.integers(-5, 5)))
        for i in range(draw(st.integers(min_value=1, max_value=5)))
    ]  # fmt: skip
    payload = bytearray(b"".join(records))
    if draw(st.booleans()):
        payload[draw(st.integers(0, len(payload) - 1))] = draw(st.integers(0, 255))
    else:
        del payload[draw(st.integers(0, len(payload) - 1)) :]
    return bytes(payload), len(records) + draw(st.sampled_from([0, 0, -1, 1]))


@given(damaged=plausible_payloads())
@hand.fuzz(200)
def test_plausibly_damaged_payloads_raise_the_same(damaged: tuple[bytes, int]) -> None:
    payload, count = damaged
    puts = []
    for impl in IMPLEMENTATIONS:
        table = empty_table(8)
        puts.append((outcome(impl.map_put_records, table, 8, 0, payload, count, 10), table))
    assert puts[0] == puts[1]
    filtered = [outcome(impl.filter_records, empty_table(8), payload, count, 10, False) for impl in IMPLEMENTATIONS]
    assert filtered[0] == filtered[1]


BATCHES = (
    encode_batch([RecordInput(b"a", b"1", 5), RecordInput(b"b", None, 6), RecordInput(None, b"x", 7)], base_offset=3)
    + encode_batch([RecordInput(b"a", b"2", 8)], base_offset=6, producer_id=4, producer_epoch=1, base_sequence=0)
    + encode_batch([RecordInput(b"c", b"3", 9)] * 2, base_offset=7, timestamp_type=TimestampType.LOG_APPEND_TIME)
)


@given(byte=st.integers(0, len(BATCHES) - 1), value=st.integers(0, 255), retain=st.booleans())
@hand.fuzz(250)
def test_damaged_batches_raise_the_same_and_leave_the_same_bytes(byte: int, value: int, retain: bool) -> None:
    buf = bytearray(BATCHES)
    buf[byte] = value
    results = []
    for impl in IMPLEMENTATIONS:
        table = empty_table(6)
        put = outcome(impl.map_put_batches, table, 5, 0, bytes(buf), 0, len(buf))
        out = bytearray(b"before")
        filtered = outcome(impl.filter_batches, table, bytes(buf), 0, len(buf), out, retain, {9})
        results.append((put, table, filtered, out))
    assert results[0] == results[1]


def test_a_record_offset_or_kept_timestamp_beyond_int64_raises() -> None:
    huge = (1 << 63) - 2
    for impl in IMPLEMENTATIONS:
        with pytest.raises(ValueError, match="offset is out of range"):
            impl.map_put_records(empty_table(2), 1, 0, record(b"k", b"v", 2), 1, huge)
        with pytest.raises(ValueError, match="offset is out of range"):
            impl.filter_records(empty_table(2), record(b"k", b"v", -1), 1, 0, True)
    # a batch whose base timestamp plus a kept record's delta leaves int64
    payload = record(b"k", b"old", 0) + record(b"k", b"new", 1, timestamp_delta=10)
    batch = bytearray(
        HEADER.pack(0, 49 + len(payload), -1, 2, 0, 0, 1, (1 << 63) - 5, (1 << 63) - 1, -1, -1, -1, 2) + payload
    )
    outs = []
    for impl in IMPLEMENTATIONS:
        table = empty_table(3)
        assert impl.map_put_batches(table, 2, 0, bytes(batch), 0, len(batch)) == (len(batch), 1, 1, 0)
        out = bytearray()
        with pytest.raises(ValueError, match="timestamp out of range"):
            impl.filter_batches(table, bytes(batch), 0, len(batch), out, True, set())
        outs.append(out)
    assert outs == [bytearray(), bytearray()]
