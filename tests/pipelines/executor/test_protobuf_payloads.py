"""``decoder.format: protobuf`` (pipelines.executor.payloads.protobuf_values): values as
Confluent's ProtobufSerializer frames them (kafkalog.schemas.wire), decoded into the reader
message's columns by field number; every bad value alone, with its reason.

The messages are made and serialized by google.protobuf (dynamic classes of the compiled schema);
the reference the rows are compared with is protobuf's own JSON mapping of the same message
(``json_format.MessageToDict``), turned into the values the type mapping says the columns hold."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import math
import struct
from functools import cache
from typing import Any

import pyarrow as pa
import pytest
from google.protobuf import json_format, message_factory
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog.schemas import _protobuf_columns_py, protobuf_program
from kafkalog.schemas.wire import frame
from pipelines.config.pipeline import Decoder, Registry
from pipelines.executor.payloads import payload_decoder
from pipelines.executor.payloads.protobuf_values import ProtobufValues
from pipelines.schemas.protobuf_columns import protobuf_columns
from pipelines.schemas.resolved import SubjectSchemas

pytestmark = pytest.mark.unit

RICH = """syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
import "google/protobuf/duration.proto";
import "google/protobuf/wrappers.proto";
import "google/protobuf/struct.proto";
import "google/protobuf/any.proto";

message Order {
  enum Channel { WEB = 0; APP = 1; }
  message Line { string sku = 1; int32 qty = 2; }
  int32 i32 = 1; sint32 s32 = 2; sfixed32 f32 = 3;
  int64 i64 = 4; sint64 s64 = 5; sfixed64 f64 = 6;
  uint32 u32 = 7; fixed32 x32 = 8; uint64 u64 = 9; fixed64 x64 = 10;
  float fl = 11; double db = 12; bool ok = 13; string name = 14; bytes blob = 15;
  Channel channel = 16;
  Line line = 17;
  repeated Line lines = 18;
  repeated int64 nums = 19;
  map<string, int32> counts = 20;
  map<int32, Line> by_id = 21;
  oneof pick { string text = 22; int64 number = 23; Line pick_line = 24; }
  optional int32 maybe = 25;
  repeated Channel channels = 26;
  map<bool, string> flags = 27;
  repeated bytes blobs = 28;
  repeated sint64 zigs = 29;
  repeated double ds = 30;
  repeated fixed32 fx = 31;
}
message Other { string x = 1; }
message Wkt {
  google.protobuf.Timestamp at = 1;
  google.protobuf.Duration took = 2;
  google.protobuf.Int32Value w_i32 = 3;
  google.protobuf.StringValue w_str = 4;
  google.protobuf.UInt64Value w_u64 = 5;
  google.protobuf.Struct attrs = 6;
  google.protobuf.Value val = 7;
  google.protobuf.ListValue list = 8;
  google.protobuf.Any extra = 9;
}
"""
REGISTRY = Registry(urls=("http://sr:8081",))
DECODER = Decoder(format="protobuf", registry=REGISTRY)


PATHS = [
    pytest.param("kernel", marks=pytest.mark.skipif(not protobuf_program.NATIVE, reason=protobuf_program.WHY_NOT)),
    "twin",
    "upb",
]
C_KERNEL = protobuf_program.implementation


@pytest.fixture(params=PATHS)
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The decoder's path: the C kernel, its pure-Python twin, or protobuf's own parser (the
    reference, and what reads the schemas the program does not)."""
    if request.param == "twin":
        monkeypatch.setattr(protobuf_program, "implementation", _protobuf_columns_py)
    return str(request.param)


def make(decoder: Decoder, schemas: SubjectSchemas, path: str) -> ProtobufValues:
    made = ProtobufValues(decoder, schemas)
    if path == "upb":
        made._program = None
    else:
        assert made._program is not None
    return made


@cache
def rich(path: str) -> ProtobufValues:
    """A decoder of RICH's shop.Order, made once a path (hypothesis runs many examples)."""
    return make(DECODER, subject(RICH, {}), path)


def subject(reader: str, writers: dict[int, str], reader_id: int = 1, message: str | None = None) -> SubjectSchemas:
    return SubjectSchemas("PROTOBUF", reader, "t-value", 1, reader_id, writers, message=message)


@cache
def classes(text: str = RICH) -> dict[str, Any]:
    """The message classes of a schema, by full name."""
    columns = protobuf_columns(text)
    pool = columns.descriptor.file.pool
    out = {}
    for name in ("shop.Order", "shop.Other", "shop.Wkt"):
        try:
            out[name] = message_factory.GetMessageClass(pool.FindMessageTypeByName(name))
        except KeyError:
            continue
    return out


def rows(decoder: Any, values: list[bytes | None]) -> tuple[list[tuple[int, dict[str, Any]]], list[tuple[int, str]]]:
    pieces, bad = decoder.parse(values)
    out = [(i, row) for piece in pieces for i, row in zip(piece.indexes, piece.table.to_pylist(), strict=True)]
    for piece in pieces:
        assert piece.table.schema == decoder.schema
    return out, bad


def test_a_message_of_every_kind_of_field_is_one_row(path: str) -> None:
    order = classes()["shop.Order"](i32=-5, s32=-6, f32=-7, i64=-(2**40), s64=-9, f64=-10, u32=2**32 - 1,
                                    x32=2**32 - 2, u64=2**64 - 1, x64=2**63, fl=1.5, db=-2.25, ok=True,
                                    name="né", blob=b"\x00\xff", channel=1, nums=[1, -2], text="t",
                                    channels=[0, 1, 7], flags={True: "y"})  # fmt: skip
    order.counts["a"] = 3
    order.by_id[4].sku = "s"
    order.lines.add(sku="q", qty=2)
    found, bad = rows(make(DECODER, subject(RICH, {}), path), [frame(1, order.SerializeToString(), [0])])
    assert bad == []
    assert found == [(0, {
        "i32": -5, "s32": -6, "f32": -7, "i64": -(2**40), "s64": -9, "f64": -10, "u32": 2**32 - 1,
        "x32": 2**32 - 2, "u64": decimal.Decimal(2**64 - 1), "x64": decimal.Decimal(2**63), "fl": 1.5,
        "db": -2.25, "ok": True, "name": "né", "blob": b"\x00\xff", "channel": "APP",
        "line": None, "lines": [{"sku": "q", "qty": 2}], "nums": [1, -2], "counts": [("a", 3)],
        "by_id": [(4, {"sku": "s", "qty": 0})], "text": "t", "number": None, "pick_line": None,
        "maybe": None, "channels": ["WEB", "APP", "7"], "flags": [(True, "y")], "blobs": [], "zigs": [],
        "ds": [], "fx": [],
    })]  # fmt: skip


def test_well_known_types(path: str) -> None:
    wkt = classes()["shop.Wkt"]()
    wkt.at.seconds, wkt.at.nanos = 1_764_322_200, 123_456_789
    wkt.took.seconds, wkt.took.nanos = -1, -500
    wkt.w_i32.value = 0  # set to its default: present, so 0 and not null
    wkt.w_u64.value = 2**64 - 1
    wkt.attrs.update({"k": [1, "x", None, True]})
    wkt.list.extend([1.5, "a"])
    wkt.extra.Pack(classes()["shop.Other"](x="o"))
    decoder = make(DECODER, subject(RICH, {}, message="shop.Wkt"), path)
    found, bad = rows(decoder, [frame(1, wkt.SerializeToString(), [2])])
    assert bad == []
    other = base64.b64encode(classes()["shop.Other"](x="o").SerializeToString()).decode()
    assert found == [(0, {
        "at": dt.datetime(2025, 11, 28, 9, 30, 0, 123456, tzinfo=dt.UTC),
        "took": -1_000_001,  # -1.0000005 s, floored to microseconds
        "w_i32": 0, "w_str": None, "w_u64": decimal.Decimal(2**64 - 1),
        "attrs": '{"k":[1.0,"x",null,true]}', "val": None, "list": '[1.5,"a"]',
        "extra": '{"@type":"type.googleapis.com/shop.Other","value":"' + other + '"}',
    })]  # fmt: skip


def test_absent_fields_read_as_protobuf_reads_them(path: str) -> None:
    empty = frame(1, b"", [0])
    found, _ = rows(make(DECODER, subject(RICH, {}), path), [empty])
    row = found[0][1]
    defaults = (row["i32"], row["name"], row["blob"], row["ok"], row["channel"], row["u64"])
    assert defaults == (0, "", b"", False, "WEB", 0)
    assert (row["line"], row["maybe"], row["text"], row["number"]) == (None, None, None, None)  # presence: null
    assert (row["lines"], row["counts"]) == ([], [])


def test_a_value_of_another_version_is_read_by_field_number(path: str) -> None:
    v1 = 'syntax = "proto3"; package shop; message Order { string id = 1; int32 qty = 2; string note = 3; }'
    v2 = 'syntax = "proto3"; package shop; message Order { string id = 1; int64 qty = 2; optional string channel = 4; }'
    old = message_factory.GetMessageClass(protobuf_columns(v1).descriptor)(id="a", qty=7, note="gone")
    new = message_factory.GetMessageClass(protobuf_columns(v2).descriptor)(id="b", qty=2**40, channel="APP")
    decoder = make(DECODER, subject(v2, {1: v1, 2: v2}, reader_id=2), path)
    found, bad = rows(decoder, [frame(1, old.SerializeToString(), [0]), frame(2, new.SerializeToString(), [0])])
    assert bad == []
    assert [r for _, r in found] == [
        {"id": "a", "qty": 7, "channel": None},
        {"id": "b", "qty": 2**40, "channel": "APP"},
    ]


def test_bad_values_each_with_its_reason(path: str) -> None:
    order = classes()["shop.Order"](name="x").SerializeToString()
    other = 'syntax = "proto3"; package shop; message Other { string x = 1; } message Order { string name = 14; }'
    decoder = make(DECODER, subject(RICH, {1: RICH, 3: other}), path)
    values: list[bytes | None] = [
        frame(1, order, [0]),
        b'{"name": "x"}',
        b"\x00\x00\x00",
        None,
        frame(7, order, [0]),
        frame(1, order, [1]),  # shop.Other in the reader's own schema
        frame(1, order, [5]),
        frame(1, order, [0, 9]),
        frame(3, order, [1]),  # shop.Order at index 1 of version 3: the reader's message
        frame(3, order, [0]),
        frame(1, b"\x0a\x05ab", [0]),  # truncated: a string of 5 bytes with 2 left
        frame(1, b"\x72\x02\xff\xfe", [0]),  # name: not UTF-8
        frame(1, b"\x00\x00\x00\x00\x00\x00\x00\x01", None),  # no message indexes: 00 is [0], then a bad tag
        frame(1, order, [0])[:5] + b"\x03\x02",  # count 1 is zigzag 2; 3 is -2
        frame(1, order + b"\x80", [0]),
    ]
    found, bad = rows(decoder, values)
    assert [i for i, _ in found] == [0, 8]
    reasons = dict(bad)
    assert reasons[1] == "wrong magic byte 0x7b"
    assert reasons[2] == "value shorter than 5 bytes (3)"
    assert reasons[3] == "the message has no value (null)"
    assert reasons[4] == "unknown schema id 7"
    assert reasons[5] == "message indexes [1] name shop.Other, not the reader's shop.Order"
    assert reasons[6].startswith("invalid message indexes [5]: no message at index path [5]")
    assert reasons[7].startswith("invalid message indexes [0, 9]: no message at index path [0, 9]")
    assert reasons[9] == "message indexes [0] name shop.Other, not the reader's shop.Order"
    for i in (10, 11, 12, 14):
        assert reasons[i].startswith("corrupt Protobuf payload"), (i, reasons[i])
    assert reasons[13] == "invalid message index count -2 (0 to 100000)"
    assert sorted(reasons) == [i for i in range(len(values)) if i not in (0, 8)]


def test_the_payload_decoder_of_the_protobuf_format() -> None:
    decoder = payload_decoder(DECODER, subject(RICH, {}))
    assert isinstance(decoder, ProtobufValues) and decoder.schema.names[0] == "i32"


def test_required_fields_make_rows_without_them_bad(path: str) -> None:
    decoder = make(Decoder(format="protobuf", registry=REGISTRY, required=("maybe",)), subject(RICH, {}), path)
    with_it = classes()["shop.Order"](maybe=0).SerializeToString()
    found, bad = rows(decoder, [frame(1, b"", [0]), frame(1, with_it, [0])])
    assert [i for i, _ in found] == [1] and bad == [(0, "required field 'maybe' is missing or null")]


# -- against protobuf's own JSON mapping ------------------------------------------------------------

_RANGES = {
    FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1), FieldDescriptor.TYPE_SINT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SFIXED32: (-(2**31), 2**31 - 1), FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SINT64: (-(2**63), 2**63 - 1), FieldDescriptor.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1), FieldDescriptor.TYPE_FIXED32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1), FieldDescriptor.TYPE_FIXED64: (0, 2**64 - 1),
}  # fmt: skip


def scalar(fd: FieldDescriptor) -> st.SearchStrategy[Any]:
    if fd.type in _RANGES:
        low, high = _RANGES[fd.type]
        return st.one_of(st.integers(low, high), st.sampled_from([low, high, 0]))
    if fd.type == FieldDescriptor.TYPE_FLOAT:
        return st.floats(width=32, allow_nan=False)
    if fd.type == FieldDescriptor.TYPE_DOUBLE:
        return st.floats(allow_nan=False)
    if fd.type == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if fd.type == FieldDescriptor.TYPE_STRING:
        return st.text(max_size=6)
    if fd.type == FieldDescriptor.TYPE_BYTES:
        return st.binary(max_size=6)
    assert fd.enum_type is not None  # an open enum: numbers it does not name too
    return st.one_of(st.sampled_from([v.number for v in fd.enum_type.values]), st.integers(-5, 9))


def fill(data: st.DataObject, message: Message, depth: int = 0) -> Message:
    """``message`` with random values in some of its fields (one member of each oneof at most;
    no message deeper than 3 levels: Struct and Value hold each other)."""
    descriptor: Any = message.DESCRIPTOR
    taken: set[str] = set()
    for fd in descriptor.fields:
        oneof = fd.containing_oneof
        if oneof is not None and oneof.name in taken:
            continue
        if not data.draw(st.booleans()) or (fd.message_type is not None and depth >= 3):
            continue
        if oneof is not None:
            taken.add(oneof.name)
        target = getattr(message, fd.name)
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            key_fd, value_fd = fd.message_type.fields_by_name["key"], fd.message_type.fields_by_name["value"]
            for key in data.draw(st.lists(scalar(key_fd), max_size=3, unique=True)):
                if value_fd.message_type is not None:
                    fill(data, target[key], depth + 1)
                else:
                    target[key] = data.draw(scalar(value_fd))
        elif fd.is_repeated:
            for _ in range(data.draw(st.integers(0, 3))):
                if fd.message_type is not None:
                    fill(data, target.add(), depth + 1)
                else:
                    target.append(data.draw(scalar(fd)))
        elif fd.message_type is not None:
            target.SetInParent()
            fill(data, target, depth + 1)
        else:
            setattr(message, fd.name, data.draw(scalar(fd)))
    return message


def expected(message: Message) -> dict[str, Any]:
    """The row the mapping makes of ``message``, from protobuf's JSON form of it."""
    as_json = json_format.MessageToDict(message, preserving_proto_field_name=True,
                                        always_print_fields_with_no_presence=True)  # fmt: skip
    return _struct(message.DESCRIPTOR, as_json)


def _struct(descriptor: Any, as_json: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for fd in descriptor.fields:
        value = as_json.get(fd.name)
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            key_fd, value_fd = fd.message_type.fields_by_name["key"], fd.message_type.fields_by_name["value"]
            out[fd.name] = sorted((_one(key_fd, k, key=True), _one(value_fd, v)) for k, v in (value or {}).items())
        elif fd.is_repeated:
            out[fd.name] = [_one(fd, v) for v in value or []]
        else:
            out[fd.name] = None if value is None else _one(fd, value)
    return out


def _one(fd: FieldDescriptor, value: Any, *, key: bool = False) -> Any:
    if fd.message_type is not None:
        return _struct(fd.message_type, value)
    if fd.type == FieldDescriptor.TYPE_ENUM:
        return str(value)
    if fd.type in _RANGES:
        return int(value)
    if fd.type == FieldDescriptor.TYPE_BOOL and key:
        return value == "true"
    if fd.type == FieldDescriptor.TYPE_BYTES:
        return base64.b64decode(value)
    if fd.type == FieldDescriptor.TYPE_FLOAT:
        return struct.unpack("<f", struct.pack("<f", float(value)))[0]
    if fd.type == FieldDescriptor.TYPE_DOUBLE:
        return float(value)
    return value


def normal(row: Any) -> Any:
    """A row as ``expected`` makes them: decimals as ints, maps sorted by key."""
    if isinstance(row, dict):
        return {k: normal(v) for k, v in row.items()}
    if isinstance(row, list):
        items = [normal(v) for v in row]
        return sorted(items) if items and isinstance(items[0], tuple) else items
    if isinstance(row, tuple):
        return tuple(normal(v) for v in row)
    if isinstance(row, decimal.Decimal):
        return int(row)
    return row


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(st.data())
def test_random_messages_decode_as_protobuf_reads_them(path: str, data: st.DataObject) -> None:
    cls = classes()["shop.Order"]
    messages = [fill(data, cls()) for _ in range(data.draw(st.integers(1, 4)))]
    values: list[bytes | None] = [frame(1, m.SerializeToString(), [0]) for m in messages]
    found, bad = rows(rich(path), values)
    assert bad == []
    assert [normal(r) for _, r in found] == [normal(expected(m)) for m in messages]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.binary(max_size=40), min_size=1, max_size=6))
def test_corrupt_payloads_are_bad_alone_and_never_crash(path: str, payloads: list[bytes]) -> None:
    good = classes()["shop.Order"](name="g", nums=[1]).SerializeToString()
    values: list[bytes | None] = [frame(1, good, [0])]
    for payload in payloads:
        values += [frame(1, payload, [0]), frame(1, good, [0])]
    found, bad = rows(rich(path), values)
    assert sorted([i for i, _ in found] + [i for i, _ in bad]) == list(range(len(values)))
    assert all(row["name"] == "g" for i, row in found if i % 2 == 0)
    assert all(reason.startswith("corrupt Protobuf payload") for _, reason in bad)


# -- the kernel against protobuf's parser ------------------------------------------------------------

kernel_only = pytest.mark.skipif(not protobuf_program.NATIVE, reason=protobuf_program.WHY_NOT)


def mutated(data: st.DataObject, payload: bytes) -> bytes:
    """``payload`` cut, with bytes changed, inserted or dropped (a few of each at most)."""
    out = bytearray(payload)
    for _ in range(data.draw(st.integers(0, 3))):
        how = data.draw(st.sampled_from(["flip", "insert", "drop", "cut"]))
        at = data.draw(st.integers(0, len(out)))
        if how == "flip" and at < len(out):
            out[at] = data.draw(st.integers(0, 255))
        elif how == "insert":
            out[at:at] = data.draw(st.binary(min_size=1, max_size=3))
        elif how == "drop":
            del out[at : at + data.draw(st.integers(1, 3))]
        else:
            del out[at:]
    return bytes(out)


@cache
def reader(message: str, path: str) -> ProtobufValues:
    return make(DECODER, subject(RICH, {}, message=message), path)


def numeric_rows(
    decoder: Any, values: list[bytes | None]
) -> tuple[list[tuple[int, dict[str, Any]]], list[tuple[int, str]]]:
    """``rows``, timestamps as their microseconds (a random one may be past the years Python holds)."""
    pieces, bad = decoder.parse(values)
    out = []
    for piece in pieces:
        table = piece.table
        for k, f in enumerate(table.schema):
            if pa.types.is_timestamp(f.type):
                table = table.set_column(k, f.name, table.column(k).cast(pa.int64()))
        out += list(zip(piece.indexes, table.to_pylist(), strict=True))
    return out, bad


def comparable(row: Any) -> Any:
    """``normal(row)`` with NaN (a mutated float's bits) as a string, and each map as protobuf
    holds it: a key given twice keeps its last value (the kernel keeps every entry as written)."""
    if isinstance(row, dict):
        return {k: comparable(v) for k, v in row.items()}
    if isinstance(row, list):
        if row and isinstance(row[0], tuple):
            return sorted((comparable(k), comparable(v)) for k, v in dict(row).items())
        return [comparable(v) for v in row]
    if isinstance(row, float) and math.isnan(row):
        return "nan"
    return normal(row)


@kernel_only
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_the_kernel_reads_what_protobufs_parser_reads_and_refuses_no_more(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(["shop.Order", "shop.Wkt"]))
    cls = classes()[name]
    payloads = [mutated(data, fill(data, cls()).SerializeToString()) for _ in range(data.draw(st.integers(1, 5)))]
    values: list[bytes | None] = [frame(1, p, [0] if name == "shop.Order" else [2]) for p in payloads]
    kernel_rows, kernel_bad = numeric_rows(reader(name, "kernel"), values)
    upb_rows, upb_bad = numeric_rows(reader(name, "upb"), values)
    read_by_upb = dict(upb_rows)
    for i, row in kernel_rows:  # what the kernel reads, protobuf reads the same
        assert i in read_by_upb, (i, dict(kernel_bad), payloads[i].hex())
        assert comparable(row) == comparable(read_by_upb[i]), (payloads[i].hex(), row, read_by_upb[i])
    read = {i for i, _ in kernel_rows}
    for i, reason in kernel_bad:  # what it refuses and protobuf reads: only a message field given twice
        if i in read_by_upb:
            assert "occurs twice" in reason, (reason, payloads[i].hex())
    assert {i for i, _ in upb_bad} <= {i for i, _ in kernel_bad} and read | {i for i, _ in kernel_bad} == set(
        range(len(values))
    )


@kernel_only
def test_a_message_field_given_twice_is_refused_by_the_kernel_and_merged_by_protobuf() -> None:
    cls = classes()["shop.Order"]
    twice = cls(line={"sku": "a"}).SerializeToString() + cls(line={"qty": 2}).SerializeToString()
    values: list[bytes | None] = [frame(1, twice, [0])]
    assert rows(make(DECODER, subject(RICH, {}), "upb"), values)[0][0][1]["line"] == {"sku": "a", "qty": 2}
    found, bad = rows(make(DECODER, subject(RICH, {}), "kernel"), values)
    assert found == [] and bad == [
        (0, "corrupt Protobuf payload: message field 17 occurs twice at byte 12 (merging is not supported)")
    ]


@kernel_only
def test_frames_of_several_forms_in_one_chunk_are_one_piece_in_message_order() -> None:
    cls = classes()["shop.Order"]
    values: list[bytes | None] = []
    for i in range(6):
        payload = cls(i32=i).SerializeToString()
        short = frame(1, payload, [0])
        values.append(short if i % 2 else short[:5] + b"\x02\x00" + short[6:])  # [0] written long
    pieces, bad = make(DECODER, subject(RICH, {}), "kernel").parse(values)
    assert bad == [] and len(pieces) == 1
    assert pieces[0].indexes == list(range(6)) and pieces[0].table.column("i32").to_pylist() == list(range(6))


def test_what_the_kernel_does_not_do_protobufs_parser_reads() -> None:
    text = 'syntax = "proto2"; package g; message R { optional group G = 1 { optional int32 a = 2; } }'
    decoder = ProtobufValues(DECODER, subject(text, {}))
    assert decoder._program is None
    cls = message_factory.GetMessageClass(protobuf_columns(text).descriptor)
    message: Any = cls()
    message.g.a = 5
    found, bad = rows(decoder, [frame(1, message.SerializeToString(), [0])])
    assert bad == [] and found == [(0, {"g": {"a": 5}})]


@kernel_only
def test_the_kernel_refuses_a_malformed_program() -> None:
    program = protobuf_program.compile_program(protobuf_columns(RICH).fields)
    for code in ([0, 1, 1, 99, 0, 1, 1, 0, 0], [0, 5], list(program.code[:-3])):
        with pytest.raises(ValueError, match="malformed decoding program"):
            protobuf_program.decode([b"\x00"], b"", protobuf_program.Program(tuple(code), program.columns))


def test_the_last_member_of_a_oneof_given_wins(path: str) -> None:
    cls = classes()["shop.Order"]
    both = cls(text="t").SerializeToString() + cls(number=7).SerializeToString()
    again = both + cls(text="u").SerializeToString()
    found, bad = rows(rich(path), [frame(1, both, [0]), frame(1, again, [0])])
    assert bad == []
    assert [(r["text"], r["number"]) for _, r in found] == [(None, 7), ("u", None)]


def test_a_proto2_string_that_is_not_utf8_is_bad_alone(path: str) -> None:
    text = 'syntax = "proto2"; package p; message R { optional string s = 1; optional int32 n = 2; }'
    decoder = make(DECODER, subject(text, {}), path)
    values: list[bytes | None] = [
        frame(1, b"\x0a\x01a", [0]),
        frame(1, b"\x0a\x02\xff\xfe", [0]),
        frame(1, b"\x10\x05", [0]),
    ]
    found, bad = rows(decoder, values)
    assert found == [(0, {"s": "a", "n": None}), (2, {"s": None, "n": 5})]
    assert [i for i, _ in bad] == [1] and "utf" in bad[0][1].lower().replace("-", ""), bad


@kernel_only
def test_a_payload_of_many_empty_messages_is_refused_past_its_budget_of_column_values() -> None:
    # each 2-byte empty Line makes a struct and its two fields; a million of them, 48 million values
    text = 'syntax = "proto3"; message L { string a = 1; string b = 2; string c = 3; } message R { repeated L l = 1; }'
    decoder = make(DECODER, subject(text, {}, message="R"), "kernel")
    found, bad = rows(decoder, [frame(1, b"\x0a\x00" * 10, [1]), frame(1, b"\x0a\x00" * 5_000_000, [1])])
    assert [len(r["l"]) for _, r in found] == [10]
    assert bad == [(1, "corrupt Protobuf payload: the payload makes more than 16777216 column values")]


def test_a_number_a_proto2_enum_does_not_name_is_no_value_of_it(path: str) -> None:
    text = 'syntax = "proto2"; message R { enum E { A = 1; B = 5; } optional E e = 1; repeated E r = 2; }'
    decoder = make(DECODER, subject(text, {}), path)
    payloads = [b"\x08\x07\x10\x01\x10\x07\x10\x05", b"\x08\x05\x08\x07", b"\x12\x03\x05\x07\x01"]
    found, bad = rows(decoder, [frame(1, p, [0]) for p in payloads])
    assert bad == []
    assert [r for _, r in found] == [  # 7 is kept out: the field as it was (absent, or its last value)
        {"e": None, "r": ["A", "B"]},
        {"e": "B", "r": []},
        {"e": None, "r": ["B", "A"]},  # packed
    ]


PROTO2 = (
    'syntax = "proto2"; message R { enum E { A = 1; B = 5; C = -3; } optional E e = 1; repeated E r = 2; '
    "repeated E p = 3 [packed = true]; oneof o { E x = 4; string y = 5; } optional int32 n = 6; }"
)


@kernel_only
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_the_c_kernel_and_its_twin_agree_byte_for_byte(data: st.DataObject) -> None:
    header = frame(1, b"", [0])
    order, wkt = classes()["shop.Order"], classes()["shop.Wkt"]
    made = [fill(data, order()).SerializeToString(), fill(data, wkt()).SerializeToString()]
    for text, message, payload in [(RICH, None, made[0]), (RICH, "shop.Wkt", made[1]), (PROTO2, None, b"")]:
        program = protobuf_program.compile_program(protobuf_columns(text, message=message).fields)
        values: list[bytes | None] = [header + mutated(data, payload) for _ in range(data.draw(st.integers(1, 4)))]
        values += [header + data.draw(st.binary(max_size=12)), None, b"\x00"]
        args = (values, header, program.code, program.columns)
        assert C_KERNEL.decode(*args) == _protobuf_columns_py.decode(*args)


def test_a_struct_whose_bytes_do_not_parse_makes_its_value_bad_alone(path: str) -> None:
    good = classes()["shop.Wkt"]()
    good.attrs.update({"k": "v"})
    corrupt = b"\x32\x03\x0a\x05k"  # attrs: a Struct whose map entry claims 5 bytes and has 1
    decoder = make(DECODER, subject(RICH, {}, message="shop.Wkt"), path)
    found, bad = rows(decoder, [frame(1, good.SerializeToString(), [2]), frame(1, corrupt, [2])])
    assert [(i, r["attrs"]) for i, r in found] == [(0, '{"k":"v"}')]
    assert [i for i, _ in bad] == [1] and bad[0][1].startswith("corrupt Protobuf payload")


def test_a_struct_holding_a_number_json_has_not_makes_its_value_bad_alone(path: str) -> None:
    wkt = classes()["shop.Wkt"]
    infinite, finite = wkt(), wkt()
    infinite.val.number_value = float("inf")
    finite.val.number_value = 1.5
    decoder = make(DECODER, subject(RICH, {}, message="shop.Wkt"), path)
    found, bad = rows(decoder, [frame(1, m.SerializeToString(), [2]) for m in (finite, infinite)])
    assert [(i, r["val"]) for i, r in found] == [(0, "1.5")]
    assert bad == [(1, "the message cannot be a row: Fail to serialize Infinity for Value.number_value, which would "
                       "parse as string_value")]  # fmt: skip


def test_a_map_entry_holding_a_field_the_reader_does_not_know_is_left_out_of_its_map(path: str) -> None:
    # counts (20): {"a": 1} plain, {"b": 2} with an unknown field 3, {"c": 3} with its value as a string
    entries = [b"\x0a\x01a\x10\x01", b"\x0a\x01b\x10\x02\x18\x07", b"\x0a\x01c\x12\x01x"]
    payload = b"".join(b"\xa2\x01" + bytes([len(e)]) + e for e in entries)
    found, bad = rows(rich(path), [frame(1, payload, [0])])
    assert bad == [] and found[0][1]["counts"] == [("a", 1)]


def test_a_map_entry_of_a_number_its_proto2_enum_does_not_name_is_left_out(path: str) -> None:
    text = 'syntax = "proto2"; message R { enum E { A = 0; B = 5; } map<string, E> m = 1; }'
    payload = b"\x0a\x05\x0a\x01a\x10\x05" + b"\x0a\x05\x0a\x01b\x10\x07"
    found, bad = rows(make(DECODER, subject(text, {}), path), [frame(1, payload, [0])])
    assert bad == [] and found == [(0, {"m": [("a", "B")]})]
