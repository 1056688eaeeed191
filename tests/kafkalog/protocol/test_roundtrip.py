"""Whatever we encode we decode back, for every (API, version) in REGISTRY, requests and responses,
with random values built by walking each schema; and regions stay separate chunks of a response."""

from __future__ import annotations

import itertools
import struct
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalog.protocol import (
    REGISTRY,
    Api,
    ApiKey,
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from kafkalog.protocol.types import (
    BOOLEAN,
    BYTES,
    INT8,
    INT16,
    INT32,
    INT64,
    NULLABLE_STRING,
    RECORDS,
    STRING,
    Array,
    Reader,
    Schema,
    Type,
    Writer,
)

from .schemas import (
    ALL_APIS,
    API_IDS,
    RECORD_TYPES,
    FakeRegion,
    contains,
    expected,
    fuzz,
    headers,
    int_range,
    normalized,
    values,
)

APIS_WITH_RECORDS_IN_RESPONSE = [api for api in ALL_APIS if any(contains(api.response, kind) for kind in RECORD_TYPES)]


def joined(chunks: list[Any]) -> bytes:
    """A response frame's bytes, FakeRegions replaced by the bytes they stand for."""
    return b"".join(chunk.payload if isinstance(chunk, FakeRegion) else bytes(chunk) for chunk in chunks)


def test_registry_is_what_we_advertise() -> None:
    """Every API key has a contiguous range of versions, and the schemas walk (no unknown wire types)."""
    by_key: dict[int, list[int]] = {}
    for key, version in REGISTRY:
        by_key.setdefault(key, []).append(version)
        api = REGISTRY[(key, version)]
        assert (api.key, api.version) == (key, version)
        values(api.request)  # raises TypeError on a type this suite does not know
        values(api.response, regions=True)
    assert set(by_key) == set(ApiKey)  # every key we name is served
    for versions in by_key.values():
        assert sorted(versions) == list(range(min(versions), max(versions) + 1))


@pytest.mark.parametrize("api", ALL_APIS, ids=API_IDS)
@given(data=st.data(), header=headers())
@fuzz(20)
def test_request_roundtrip(api: Api, data: st.DataObject, header: tuple[int, str | None]) -> None:
    body = data.draw(values(api.request), label="body")
    correlation_id, client_id = header
    frame = encode_request(api, correlation_id, client_id, body)
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4

    got_header, got_api, got_body = decode_request(frame[4:])
    assert got_header == RequestHeader(api.key, api.version, correlation_id, client_id)
    assert got_api is api
    assert normalized(api.request, got_body) == expected(api.request, body)


@pytest.mark.parametrize("api", ALL_APIS, ids=API_IDS)
@given(data=st.data(), header=headers())
@fuzz(20)
def test_response_roundtrip(api: Api, data: st.DataObject, header: tuple[int, str | None]) -> None:
    body = data.draw(values(api.response), label="body")
    correlation_id = header[0]
    chunks, size = encode_response(api, correlation_id, body)
    frame = b"".join(bytes(chunk) for chunk in chunks)
    assert size == len(frame)
    assert struct.unpack_from(">i", frame)[0] == size - 4

    got_id, got_body = decode_response(api, frame[4:])
    assert got_id == correlation_id
    assert normalized(api.response, got_body) == expected(api.response, body)


@pytest.mark.parametrize("api", APIS_WITH_RECORDS_IN_RESPONSE, ids=lambda api: f"{api.key.name}-v{api.version}")
@given(data=st.data())
@fuzz(25)
def test_regions_become_separate_chunks(api: Api, data: st.DataObject) -> None:
    """A RECORDS value with only a ``length`` (a log FileRegion) is passed through as its own chunk,
    unread, and its declared length is counted in the frame size."""
    body = data.draw(values(api.response, regions=True), label="body")
    chunks, size = encode_response(api, 7, body)

    regions = [chunk for chunk in chunks if isinstance(chunk, FakeRegion)]
    assert regions == list(_regions_in(api.response, body))  # every one, in order, the very objects
    for chunk in chunks:
        assert isinstance(chunk, FakeRegion | bytes)
    assert not any(
        isinstance(a, bytes) and isinstance(b, bytes) for a, b in itertools.pairwise(chunks)
    )  # runs of small fields are joined
    assert isinstance(chunks[0], bytes)
    frame = joined(chunks)
    assert size == len(frame)
    assert struct.unpack_from(">i", frame)[0] == size - 4
    assert decode_response(api, frame[4:]) == (7, _with_views(api.response, expected(api.response, body)))


def _regions_in(kind: Type, value: Any) -> list[FakeRegion]:
    if isinstance(kind, Array):
        return [] if value is None else [r for item in value for r in _regions_in(kind.element, item)]
    if isinstance(kind, Schema):
        return [r for name, sub in kind.fields for r in _regions_in(sub, value[name])]
    return [value] if isinstance(value, FakeRegion) else []


def _with_views(kind: Type, value: Any) -> Any:
    """Expected values as decode gives them: memoryview == bytes compares by content."""
    if isinstance(kind, Array):
        return None if value is None else [_with_views(kind.element, item) for item in value]
    if isinstance(kind, Schema):
        return {name: _with_views(sub, value[name]) for name, sub in kind.fields}
    return memoryview(value) if kind in RECORD_TYPES and value is not None else value


def test_a_region_in_a_fetch_response() -> None:
    """Hand-checked: two partitions, the first a 10-byte region, the second inline bytes."""
    api = REGISTRY[(ApiKey.FETCH, 3)]
    region = FakeRegion(b"0123456789")
    body = {
        "throttle_time_ms": 0,
        "responses": [
            {
                "topic": "t",
                "partition_responses": [
                    {"partition": 0, "error_code": 0, "high_watermark": 10, "record_set": region},
                    {"partition": 1, "error_code": 0, "high_watermark": 3, "record_set": b"abc"},
                ],
            }
        ],
    }
    chunks, size = encode_response(api, 42, body)
    assert len(chunks) == 3
    assert chunks[1] is region
    head = struct.pack(">iiii", size - 4, 42, 0, 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", 2)
    head += struct.pack(">ihqi", 0, 0, 10, 10)  # partition 0, no error, high watermark 10, 10 bytes of records
    assert chunks[0] == head
    assert chunks[2] == struct.pack(">ihqi", 1, 0, 3, 3) + b"abc"
    assert size == len(chunks[0]) + 10 + len(chunks[2])


def test_a_region_alone_is_never_read() -> None:
    """The writer only needs ``length``: an object with nothing else is accepted and counted."""

    class Opaque:
        length = 1 << 20

    api = REGISTRY[(ApiKey.FETCH, 0)]
    opaque = Opaque()
    body = {"responses": [{"topic": "", "partition_responses": [{"partition": 0, "error_code": 0}]}]}
    body["responses"][0]["partition_responses"][0].update(high_watermark=0, record_set=opaque)
    chunks, size = encode_response(api, 1, body)
    assert chunks[-1] is opaque
    assert size == len(chunks[0]) + (1 << 20)
    assert struct.unpack_from(">i", chunks[0])[0] == size - 4


@given(data=st.data())
@fuzz(200)
def test_primitives_roundtrip(data: st.DataObject) -> None:
    """Each primitive on its own, through a Writer and a Reader."""
    kind = data.draw(
        st.sampled_from([INT8, INT16, INT32, INT64, BOOLEAN, STRING, NULLABLE_STRING, BYTES, RECORDS]), label="type"
    )
    value = data.draw(values(kind), label="value")
    out = Writer()
    kind.encode(value, out)
    encoded = b"".join(bytes(chunk) for chunk in out.finish())
    assert len(encoded) == out.size
    reader = Reader(encoded)
    assert normalized(kind, kind.decode(reader)) == expected(kind, value)
    assert reader.remaining == 0


@pytest.mark.parametrize("kind", [INT8, INT16, INT32, INT64], ids=lambda kind: kind.name)
def test_integer_edges(kind: Type) -> None:
    low, high = int_range(kind)
    for value in (low, low + 1, -1, 0, 1, high - 1, high):
        out = Writer()
        kind.encode(value, out)
        assert out.size == kind.min_size
        assert kind.decode(Reader(out.finish()[0])) == value


def test_longest_string_and_unicode() -> None:
    """32767 bytes of UTF-8 is the longest string; multi-byte characters count in bytes."""
    for text in ("x" * 32767, "é" * 16383 + "x", "😀" * 8191 + "abc", "", "\x00", "日本語"):
        out = Writer()
        STRING.encode(text, out)
        encoded = out.finish()[0]
        assert encoded[:2] == struct.pack(">h", len(text.encode()))
        assert STRING.decode(Reader(encoded)) == text
