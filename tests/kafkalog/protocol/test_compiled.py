"""The protocol's C walk (kafkalog/protocol/_wire.c, through kafkalog.protocol.compiled) gives exactly
the reference's result (kafkalog.protocol.types) on every schema of REGISTRY, requests and responses,
or declines where the reference refuses: the same bytes and chunks when encoding (regions apart,
fields left to their defaults, tagged fields), the same values and end when decoding, and for damaged
bytes the same reading, or a refusal where the reference raises (which then names the fault)."""

from __future__ import annotations

import array
import struct
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalog.errors import ProtocolError
from kafkalog.protocol import ApiKey, compiled, lookup
from kafkalog.protocol.frames import REQUEST_HEADER_V2, encode_request
from kafkalog.protocol.types import (
    BOOLEAN,
    BYTES,
    COMPACT_NULLABLE_STRING,
    COMPACT_RECORDS,
    COMPACT_STRING,
    INT32,
    INT64,
    REQUIRED,
    UNSIGNED_VARINT,
    UUID,
    Array,
    CompactArray,
    FlexibleSchema,
    Reader,
    Schema,
    TaggedField,
    Type,
    Writer,
)

from .schemas import ALL_APIS, FakeRegion, fuzz, values

native = compiled.native

WITH_TAGS = FlexibleSchema(
    ("id", UUID),
    ("name", COMPACT_STRING),
    ("count", UNSIGNED_VARINT, 7),
    ("items", [("n", INT32), ("records", COMPACT_RECORDS)]),
    tagged=[
        TaggedField(0, "note", COMPACT_NULLABLE_STRING),
        TaggedField(3, "offsets", CompactArray(INT64)),
        TaggedField(5, "extra", COMPACT_RECORDS),
        TaggedField(70000, "flag", BOOLEAN),  # a tag of three varint bytes
    ],
)
"""No API we serve has tagged fields or uuids yet: this schema stands for those that will."""
SCHEMAS = [
    (f"{api.key.name}-v{api.version}-{side}", getattr(api, side))
    for api in ALL_APIS
    for side in ("request", "response")
]
SCHEMAS.append(("tagged", WITH_TAGS))


def test_the_c_walk_is_built_and_every_schema_compiles() -> None:
    assert native is not None, "kafkalog/protocol/_wire.c is not built: run make native"
    for name, schema in SCHEMAS:
        assert compiled.program(schema) is not None, f"{name} has a type the C walk lacks"


def full_values(kind: Type, *, regions: bool = False) -> st.SearchStrategy[Any]:
    """``values``, but a field with a default may be left out, and a flexible structure's tagged
    fields may be there (the encoder writes those present and not None)."""
    if kind is UNSIGNED_VARINT:
        return st.integers(0, 2**32 - 1)
    if not isinstance(kind, Schema):
        if hasattr(kind, "element"):
            items = st.lists(full_values(kind.element, regions=regions), max_size=3)
            return st.none() | items if kind.nullable else items  # type: ignore[attr-defined]
        return values(kind, regions=regions)
    required = {name: full_values(sub, regions=regions) for name, sub, default in kind.plan if default is REQUIRED}
    optional = {name: full_values(sub, regions=regions) for name, sub, default in kind.plan if default is not REQUIRED}
    if isinstance(kind, FlexibleSchema):
        optional.update({field.name: st.none() | full_values(field.type) for field in kind.tagged})
    return st.fixed_dictionaries(required, optional=optional)


def reference_encoding(schema: Schema, value: Any) -> tuple[list[Any], int]:
    out = Writer()
    schema.encode(value, out)
    return out.finish(), out.size


def joined(chunks: list[Any]) -> bytes:
    return b"".join(chunk.payload if isinstance(chunk, FakeRegion) else bytes(chunk) for chunk in chunks)


def shape(chunks: list[Any]) -> list[Any]:
    """Chunks as (bytes) or (the region itself): the same shape means the same frame and sendfile."""
    return [bytes(chunk) if isinstance(chunk, bytes | memoryview) else ("region", id(chunk)) for chunk in chunks]


def plain(value: Any) -> Any:
    """A decoded value with memoryviews as bytes, and the type of every leaf kept (1 is not True)."""
    if isinstance(value, dict):
        return [(name, plain(item)) for name, item in value.items()]  # the order of the keys too
    if isinstance(value, list):
        return [plain(item) for item in value]
    if isinstance(value, memoryview):
        return ("view", value.tobytes())
    return (type(value).__name__, value)


def reference_decoding(schema: Schema, frame: bytes) -> tuple[Any, int] | None:
    reader = Reader(frame)
    try:
        value = schema.decode(reader)
    except ProtocolError:
        return None
    return value, reader.pos


def c_decoding(schema: Schema, frame: bytes) -> tuple[Any, int] | None:
    assert native is not None
    found = native.decode(compiled.program(schema), memoryview(frame), 0, len(frame))
    return None if found is None else (found[0], found[1])


@pytest.mark.parametrize("schema", [schema for _, schema in SCHEMAS], ids=[name for name, _ in SCHEMAS])
@fuzz(10)
@given(data=st.data())
def test_encoding_and_decoding_give_the_references_result(schema: Schema, data: st.DataObject) -> None:
    assert native is not None
    value = data.draw(full_values(schema, regions=True), label="value")
    wanted, size = reference_encoding(schema, value)
    found = native.encode(compiled.program(schema), value)
    assert found is not None
    assert shape(found[0]) == shape(wanted) and found[1] == size
    frame = joined(wanted)
    reference = reference_decoding(schema, frame)
    assert reference is not None
    decoded = c_decoding(schema, frame)
    assert decoded is not None
    assert plain(decoded[0]) == plain(reference[0]) and decoded[1] == reference[1] == len(frame)


def damaged(data: st.DataObject, frame: bytes) -> bytes:
    """``frame`` cut short, with bytes flipped, inserted or set to extremes (lengths and counts)."""
    out = bytearray(frame)
    for _ in range(data.draw(st.integers(1, 3), label="damages")):
        how = data.draw(st.sampled_from(["cut", "flip", "insert", "extreme"]), label="how")
        at = data.draw(st.integers(0, max(len(out) - 1, 0)), label="at")
        if how == "cut":
            del out[at:]
        elif how == "flip" and out:
            out[at] ^= data.draw(st.integers(1, 255), label="bits")
        elif how == "insert":
            out[at:at] = data.draw(st.binary(min_size=1, max_size=4), label="inserted")
        elif how == "extreme" and len(out) >= at + 4:
            out[at : at + 4] = data.draw(
                st.sampled_from([b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff", b"\x80\x80\x80\x80", b"\x00\x00\x00\x00"])
            )
    return bytes(out)


@pytest.mark.parametrize("schema", [schema for _, schema in SCHEMAS], ids=[name for name, _ in SCHEMAS])
@fuzz(10)
@given(data=st.data())
def test_damaged_bytes_are_read_as_the_reference_reads_them_or_refused_where_it_raises(
    schema: Schema, data: st.DataObject
) -> None:
    value = data.draw(full_values(schema), label="value")
    frame = damaged(data, joined(reference_encoding(schema, value)[0]))
    reference = reference_decoding(schema, frame)
    decoded = c_decoding(schema, frame)
    if reference is None:
        assert decoded is None
    else:
        assert decoded is not None and plain(decoded[0]) == plain(reference[0]) and decoded[1] == reference[1]


PRODUCE = lookup(ApiKey.PRODUCE, 9)
GOOD_PRODUCE = {
    "transactional_id": None,
    "acks": 1,
    "timeout_ms": 30000,
    "topic_data": [{"topic": "t", "data": [{"partition": 0, "record_set": b"x"}]}],
}


GOOD_TAGGED = {"id": bytes(16), "name": "n", "items": []}


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        (PRODUCE.request, {k: v for k, v in GOOD_PRODUCE.items() if k != "acks"}),  # a field without default
        (PRODUCE.request, {**GOOD_PRODUCE, "acks": 40000}),  # out of int16
        (PRODUCE.request, {**GOOD_PRODUCE, "timeout_ms": 1.5}),  # not an int
        (PRODUCE.request, {**GOOD_PRODUCE, "topic_data": [{"topic": "t" * 40000, "data": []}]}),  # too long
        (PRODUCE.request, {**GOOD_PRODUCE, "topic_data": [{"topic": None, "data": []}]}),  # not nullable
        (PRODUCE.request, {**GOOD_PRODUCE, "topic_data": [{"topic": "\ud800", "data": []}]}),  # no UTF-8 form
        (PRODUCE.request, {**GOOD_PRODUCE, "topic_data": None}),  # a null array that may not be
        (WITH_TAGS, {**GOOD_TAGGED, "id": b"short"}),  # a uuid of 5 bytes
        (WITH_TAGS, {**GOOD_TAGGED, "count": -1}),  # not an unsigned varint
        (WITH_TAGS, {**GOOD_TAGGED, "offsets": [2**63]}),  # out of int64, in a tagged field
        (WITH_TAGS, {**GOOD_TAGGED, "extra": FakeRegion(b"x")}),  # a region in a tagged field
        (REQUEST_HEADER_V2, {"api_key": 0, "api_version": 0, "correlation_id": 2**31, "client_id": None}),
    ],
)
def test_what_the_reference_refuses_to_encode_the_c_walk_declines(schema: Schema, value: dict[str, Any]) -> None:
    assert native is not None
    with pytest.raises((ProtocolError, TypeError, AttributeError, struct.error)):
        reference_encoding(schema, value)
    assert native.encode(compiled.program(schema), value) is None


def test_a_frame_the_c_walk_declines_still_fails_with_the_references_error() -> None:
    """Through the frames: the error a caller sees names the fault, C built or not."""
    with pytest.raises(ProtocolError, match=r"does not fit"):
        encode_request(PRODUCE, 1, "c", {**GOOD_PRODUCE, "acks": 40000})


class ClearsItsList:
    """A value whose truth, asked while its list is encoded, empties that list."""

    def __init__(self, owner: list[Any]) -> None:
        self.owner = owner

    def __bool__(self) -> bool:
        self.owner.clear()
        return True


def test_values_changed_while_they_are_encoded_are_declined_not_read_after_they_are_gone() -> None:
    """Encoding may run a value's own code (its truth, a region's length); what it changes is the
    reference's to encode, and the C walk never reads freed memory meanwhile."""
    assert native is not None
    flags = Schema(("flags", Array(BOOLEAN)))
    items: list[Any] = []
    items.extend([ClearsItsList(items), True, False])
    assert native.encode(compiled.program(flags), {"flags": items}) is None
    assert items == []


def test_bytes_like_values_of_wider_items_are_the_references_to_encode() -> None:
    """The reference writes len(value), which counts items: an array of ints is not its bytes."""
    assert native is not None
    wide = array.array("i", [1, 2])
    assert native.encode(compiled.program(WITH_TAGS), {**GOOD_TAGGED, "id": array.array("i", [1, 2, 3, 4])}) is None
    schema = Schema(("data", BYTES))
    assert native.encode(compiled.program(schema), {"data": wide}) is None
    assert native.encode(compiled.program(schema), {"data": memoryview(b"ab")}) == ([b"\x00\x00\x00\x02ab"], 6)


def test_a_frame_whose_bytes_cannot_be_had_is_declined() -> None:
    assert native is not None
    view = memoryview(b"\x00\x01")
    view.release()
    assert native.decode(compiled.program(PRODUCE.request), view, 0, 0) is None
