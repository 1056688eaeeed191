"""Flexible versions (KIP-482) in the schemas-as-data codec: compact strings, bytes, records and
arrays, unsigned varints, tagged fields (known ones decoded, unknown ones skipped, lies refused),
and the flexible request and response headers, checked byte for byte against hand-made frames and
against kafka-python's own encoders of the same types."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalog.errors import ProtocolError
from kafkalog.protocol.apis import Api, ApiKey
from kafkalog.protocol.frames import decode_request, decode_response, encode_request, encode_response
from kafkalog.protocol.types import (
    COMPACT_BYTES,
    COMPACT_NULLABLE_BYTES,
    COMPACT_NULLABLE_STRING,
    COMPACT_RECORDS,
    COMPACT_STRING,
    INT16,
    INT32,
    UNSIGNED_VARINT,
    UUID,
    CompactArray,
    FlexibleSchema,
    Reader,
    TaggedField,
    Type,
    Writer,
    uvarint,
)

from .schemas import fuzz


def encode(kind: Type, value: Any) -> bytes:
    out = Writer()
    kind.encode(value, out)
    return b"".join(bytes(chunk) for chunk in out.finish())  # type: ignore[arg-type]


def decode(kind: Type, data: bytes) -> Any:
    reader = Reader(data)
    value = kind.decode(reader)
    assert reader.remaining == 0
    return value


def test_compact_forms_byte_for_byte() -> None:
    assert encode(UNSIGNED_VARINT, 300) == b"\xac\x02"
    assert encode(COMPACT_STRING, "abc") == b"\x04abc"
    assert encode(COMPACT_NULLABLE_STRING, None) == b"\x00"
    assert encode(COMPACT_STRING, "") == b"\x01"
    assert encode(COMPACT_BYTES, b"\x00\x01") == b"\x03\x00\x01"
    assert encode(COMPACT_NULLABLE_BYTES, None) == b"\x00"
    assert encode(COMPACT_RECORDS, b"xyz") == b"\x04xyz"
    assert encode(CompactArray(INT16), [1, 2]) == b"\x03\x00\x01\x00\x02"
    assert encode(CompactArray(INT16, nullable=True), None) == b"\x00"
    assert encode(UUID, bytes(range(16))) == bytes(range(16))
    # a flexible structure ends with its tagged fields: here none
    assert encode(FlexibleSchema(("a", INT16)), {"a": 7}) == b"\x00\x07\x00"


def test_the_same_bytes_as_kafka_pythons_encoders() -> None:
    from kafka.protocol.schemas.fields.codecs.types import Bytes, Int16, String, UnsignedVarInt32

    assert encode(UNSIGNED_VARINT, 2**31) == UnsignedVarInt32.encode(2**31)
    assert encode(COMPACT_STRING, "héllo") == String().encode("héllo", compact=True)
    assert encode(COMPACT_NULLABLE_STRING, None) == String().encode(None, compact=True)
    assert encode(COMPACT_BYTES, b"\x00" * 200) == Bytes.encode(b"\x00" * 200, compact=True)
    assert encode(CompactArray(INT16), [5, -1]) == UnsignedVarInt32.encode(3) + Int16.encode(5) + Int16.encode(-1)


TAGGED = FlexibleSchema(
    ("name", COMPACT_STRING),
    ("items", [("id", INT32), ("label", COMPACT_NULLABLE_STRING)]),
    tagged=[TaggedField(0, "cluster_id", COMPACT_NULLABLE_STRING), TaggedField(3, "epoch", INT32)],
)


@fuzz(200)
@given(
    name=st.text(max_size=10),
    items=st.lists(
        st.fixed_dictionaries({"id": st.integers(-(2**31), 2**31 - 1), "label": st.none() | st.text(max_size=5)}),
        max_size=5,
    ),
    cluster=st.none() | st.text(max_size=8),
    epoch=st.none() | st.integers(-(2**31), 2**31 - 1),
)
def test_flexible_structures_round_trip(
    name: str, items: list[dict[str, Any]], cluster: str | None, epoch: int | None
) -> None:
    value: dict[str, Any] = {"name": name, "items": items, "cluster_id": cluster, "epoch": epoch}
    decoded = decode(TAGGED, encode(TAGGED, value))
    expected = {k: v for k, v in value.items() if v is not None}
    expected["items"] = items  # nested structures carry their own (empty) tagged sections
    assert decoded == expected


def test_unknown_tags_are_skipped_and_lies_refused() -> None:
    base = encode(FlexibleSchema(("name", COMPACT_STRING)), {"name": "x"})[:-1]  # without the tag count
    unknown = base + b"\x02" + b"\x01\x02\xff\xff" + b"\x03\x04" + struct.pack(">i", 42)
    assert decode(TAGGED.__class__(("name", COMPACT_STRING), tagged=TAGGED.tagged), unknown) == {
        "name": "x",
        "epoch": 42,
    }
    schema = FlexibleSchema(("name", COMPACT_STRING), tagged=TAGGED.tagged)
    for bad, reason in (
        (base + b"\x02" + b"\x03\x04" + struct.pack(">i", 1) + b"\x01\x00", "must rise"),  # tags out of order
        (base + b"\x01" + b"\x03\x05" + struct.pack(">i", 1) + b"\x00", "leaves 1"),  # size larger than the field
        (base + b"\x01" + b"\x03\x09" + struct.pack(">i", 1), "needs 9 bytes"),  # size past the end
        (base + b"\x7f", "tagged fields claimed"),  # a count the bytes cannot hold
        (b"\x80\x80\x80\x80\x80\x01", "longer than 5 bytes"),  # an overlong varint
        (b"\x00" + b"\x00", "is null"),  # null for a non-nullable compact string
        (b"\xff\xff\xff\xff\x0f" + b"x", "needs"),  # a length that lies
    ):
        with pytest.raises(ProtocolError, match=reason):
            decode(schema, bad)
    with pytest.raises(ProtocolError, match="claims 15 elements but only 4 bytes remain"):
        decode(CompactArray(INT32), b"\x10\x00\x00\x00\x01")
    with pytest.raises(ValueError, match="share a tag"):
        FlexibleSchema(tagged=[TaggedField(1, "a", INT16), TaggedField(1, "b", INT16)])


def test_flexible_versions_use_header_v2_and_response_header_v1_but_api_versions_keeps_v0() -> None:
    request = FlexibleSchema(("topic", COMPACT_STRING))
    response = FlexibleSchema(("error_code", INT16))
    api = Api(ApiKey.METADATA, 99, request, response)
    frame = encode_request(api, 7, "client", {"topic": "t"})
    # size, key, version, correlation id, client id (a classic nullable string), empty tags, body
    assert frame[4:] == struct.pack(">hhih", 3, 99, 7, 6) + b"client" + b"\x00" + b"\x02t" + b"\x00"
    chunks, _ = encode_response(api, 7, {"error_code": 0})
    assert b"".join(bytes(c) for c in chunks)[4:] == struct.pack(">i", 7) + b"\x00" + b"\x00\x00" + b"\x00"
    assert decode_response(api, b"".join(bytes(c) for c in chunks)[4:]) == (7, {"error_code": 0})
    versions = Api(ApiKey.API_VERSIONS, 99, request, response)
    chunks, _ = encode_response(versions, 8, {"error_code": 0})
    assert b"".join(bytes(c) for c in chunks)[4:] == struct.pack(">i", 8) + b"\x00\x00" + b"\x00"  # header v0
    with pytest.raises(ProtocolError, match="version 99 is not supported"):
        decode_request(frame[4:])  # the registry does not serve it: named, not a crash
    assert uvarint(0) == b"\x00"
