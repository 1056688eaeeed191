"""A malformed request frame raises ProtocolError, never anything else, and no length or count read
from the wire makes the decoder allocate more than the frame itself."""

from __future__ import annotations

import struct
import time
import tracemalloc
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalog.errors import ProtocolError
from kafkalog.protocol import (
    REGISTRY,
    VERSION_RANGES,
    Api,
    ApiKey,
    ErrorCode,
    decode_request,
    decode_response,
    encode_request,
    peek_header,
    unsupported_api_versions_response,
)

from .schemas import ALL_APIS, API_IDS, decode_or_reject, fuzz, headers, values

INT32_EXTREMES = [0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0xFFFFFFFE, 0, 0x00007FFF, 0x7FFFFFF0]
INT16_EXTREMES = [0x7FFF, 0x8000, 0xFFFF, 0xFFFE, 0]
MiB = 1 << 20


def header(api_key: int, version: int, correlation_id: int = 1, client_id: bytes | None = b"c") -> bytes:
    """Request header v1, by hand."""
    client = struct.pack(">h", -1) if client_id is None else struct.pack(">h", len(client_id)) + client_id
    return struct.pack(">hhi", api_key, version, correlation_id) + client


def string(data: bytes) -> bytes:
    return struct.pack(">h", len(data)) + data


def rejected(frame: bytes | bytearray | memoryview) -> ProtocolError:
    with pytest.raises(ProtocolError) as info:
        decode_request(frame)
    return info.value


@st.composite
def frames(draw: st.DrawFn, api: Api) -> bytes:
    """A valid request frame of ``api`` (without its size prefix)."""
    correlation_id, client_id = draw(headers())
    return encode_request(api, correlation_id, client_id, draw(values(api.request), label="body"))[4:]


# ----------------------------------------------------------------------------- every API, mutated


@pytest.mark.parametrize("api", ALL_APIS, ids=API_IDS)
@given(data=st.data())
@fuzz(6)
def test_every_truncation_is_rejected(api: Api, data: st.DataObject) -> None:
    """A request is self-delimiting: every strict prefix of a valid frame is a ProtocolError."""
    frame = data.draw(frames(api))
    assert decode_or_reject(frame) is not None
    for end in range(len(frame)):
        rejected(frame[:end])


@pytest.mark.parametrize("api", ALL_APIS, ids=API_IDS)
@given(data=st.data())
@fuzz(2)  # every position of each frame: two frames per API version, a million more in `make fuzz`
def test_extreme_values_at_every_position(api: Api, data: st.DataObject) -> None:
    """Every 2- and 4-byte window overwritten with an extreme value (a length or count of -1, -2,
    2**31-1, -2**31, 0, ...) decodes or is a ProtocolError."""
    frame = data.draw(frames(api))
    for width, extremes in ((4, INT32_EXTREMES), (2, INT16_EXTREMES)):
        for position in range(len(frame) - width + 1):
            for value in extremes:
                mutated = bytearray(frame)
                mutated[position : position + width] = value.to_bytes(width, "big")
                decode_or_reject(mutated)


@pytest.mark.parametrize("api", ALL_APIS, ids=API_IDS)
@given(data=st.data())
@fuzz(12)
def test_random_byte_changes(api: Api, data: st.DataObject) -> None:
    """Bytes flipped, overwritten, inserted or removed anywhere: decoded or a ProtocolError."""
    mutated = bytearray(data.draw(frames(api)))
    for _ in range(data.draw(st.integers(min_value=1, max_value=4), label="changes")):
        position = data.draw(st.integers(min_value=0, max_value=len(mutated)), label="position")
        kind = data.draw(st.sampled_from(["flip", "set", "insert", "remove"]), label="kind")
        if kind == "insert":
            mutated[position:position] = data.draw(st.binary(min_size=1, max_size=8), label="inserted")
        elif position == len(mutated):
            continue
        elif kind == "remove":
            del mutated[position : position + data.draw(st.integers(min_value=1, max_value=8), label="removed")]
        elif kind == "flip":
            mutated[position] ^= data.draw(st.integers(min_value=1, max_value=255), label="mask")
        else:
            mutated[position] = data.draw(st.integers(min_value=0, max_value=255), label="byte")
    decode_or_reject(bytes(mutated))


@pytest.mark.parametrize("api", ALL_APIS, ids=API_IDS)
@given(data=st.data(), garbage=st.binary(min_size=1, max_size=16))
@fuzz(10)
def test_trailing_bytes_are_ignored_as_kafka_ignores_them(api: Api, data: st.DataObject, garbage: bytes) -> None:
    frame = data.draw(frames(api))
    header, _, body = decode_request(frame)
    assert decode_request(frame + garbage)[::2] == (header, body)


@pytest.mark.parametrize("api", ALL_APIS, ids=API_IDS)
@given(data=st.data())
@fuzz(2)
def test_lying_counts_allocate_nothing(api: Api, data: st.DataObject) -> None:
    """2**31-1 written over every 4-byte window: whatever field that hits, decoding stays under 1 MiB."""
    frame = data.draw(frames(api))
    tracemalloc.start()
    try:
        for position in range(len(frame) - 3):
            mutated = bytearray(frame)
            mutated[position : position + 4] = b"\x7f\xff\xff\xff"
            decode_or_reject(mutated)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < MiB


@pytest.mark.parametrize("api", ALL_APIS, ids=API_IDS)
@given(body=st.binary(max_size=64), data=st.data())
@fuzz(30)
def test_random_bodies_after_a_valid_header(api: Api, body: bytes, data: st.DataObject) -> None:
    """A header of ``api`` followed by random bytes: the body decoder gets the garbage."""
    correlation_id, client_id = data.draw(headers())
    frame = bytearray(encode_request(REGISTRY[(ApiKey.API_VERSIONS, 0)], correlation_id, client_id, {})[4:])
    frame[0:4] = struct.pack(">hh", api.key, api.version)
    decode_or_reject(bytes(frame) + body)


@given(frame=st.binary(max_size=96))
@fuzz(300)
def test_random_bytes(frame: bytes) -> None:
    decode_or_reject(frame)


# ----------------------------------------------------------------------------- specific lies


def test_huge_array_count_is_rejected_quickly_without_allocating() -> None:
    """Metadata v0 claiming 2**31-1 topics with 6 bytes left; and Produce with 2**31-1 topics."""
    lies = [
        header(ApiKey.METADATA, 0) + struct.pack(">i", 0x7FFFFFFF) + string(b"abcd"),
        header(ApiKey.PRODUCE, 2) + struct.pack(">hii", 1, 1000, 0x7FFFFFFF) + b"\x00" * 7,
        # a nested count: one topic whose partition array claims 2**31-1 entries
        header(ApiKey.FETCH, 0) + struct.pack(">iiii", -1, 100, 1, 1) + string(b"t") + struct.pack(">i", 0x7FFFFFFF),
        header(ApiKey.LIST_OFFSETS, 0)
        + struct.pack(">ii", -1, 1)
        + string(b"t")
        + struct.pack(">iiqi", 1, 0, -1, 0x7FFFFFFF),  # 1 partition asking for 2**31-1 offsets: a value
    ]
    tracemalloc.start()
    started = time.perf_counter()
    try:
        for frame in lies[:3]:
            error = rejected(frame)
            assert "2147483647" in str(error)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - started < 1.0
    assert peak < MiB
    # the last one is well-formed: a large *value* is not a count
    assert decode_or_reject(lies[3]) is not None


def test_string_length_longer_than_the_frame() -> None:
    rejected(header(ApiKey.FIND_COORDINATOR, 0) + struct.pack(">h", 32767) + b"abc")
    rejected(struct.pack(">hhih", ApiKey.FIND_COORDINATOR, 0, 1, 32767) + b"abc")  # in the client id
    rejected(header(ApiKey.FIND_COORDINATOR, 0) + struct.pack(">h", 4) + b"abc")  # one byte short


@pytest.mark.parametrize("length", [-2, -3, -100, -32768])
def test_negative_string_length_other_than_minus_one(length: int) -> None:
    rejected(header(ApiKey.FIND_COORDINATOR, 0) + struct.pack(">h", length) + b"abc")  # group_id
    rejected(struct.pack(">hhih", ApiKey.API_VERSIONS, 0, 1, length))  # client_id, nullable
    rejected(
        header(ApiKey.OFFSET_COMMIT, 0)  # metadata, a nullable string
        + string(b"g")
        + struct.pack(">i", 1)
        + string(b"t")
        + struct.pack(">iiqh", 1, 0, 5, length)
    )


def test_minus_one_is_null_only_where_nullable() -> None:
    # strings: the key is not nullable, client_id is
    rejected(header(ApiKey.FIND_COORDINATOR, 0) + struct.pack(">h", -1))
    parsed = decode_or_reject(header(ApiKey.FIND_COORDINATOR, 0, client_id=None) + string(b"g"))
    assert parsed is not None
    assert parsed[0].client_id is None
    assert parsed[2] == {"key": "g"}
    # arrays: Metadata v0 topics are not nullable; from v1 -1 means "all topics"
    rejected(header(ApiKey.METADATA, 0) + struct.pack(">i", -1))
    for version in (1, 2):
        parsed = decode_or_reject(header(ApiKey.METADATA, version) + struct.pack(">i", -1))
        assert parsed is not None
        assert parsed[2] == {"topics": None}
        rejected(header(ApiKey.METADATA, version) + struct.pack(">i", -2))
        rejected(header(ApiKey.METADATA, version) + struct.pack(">i", -(1 << 31)))
    # arrays of int32 inside structs (OffsetFetch partitions) are not nullable either
    rejected(
        header(ApiKey.OFFSET_FETCH, 1) + string(b"g") + struct.pack(">i", 1) + string(b"t") + struct.pack(">i", -1)
    )


def test_records_lengths() -> None:
    """RECORDS: -1 is null, other negatives and lengths past the end are ProtocolErrors."""
    produce = header(ApiKey.PRODUCE, 2) + struct.pack(">hii", 1, 1000, 1) + string(b"t") + struct.pack(">ii", 1, 0)
    parsed = decode_or_reject(produce + struct.pack(">i", -1))
    assert parsed is not None
    assert parsed[2]["topic_data"][0]["data"][0]["record_set"] is None
    for length in (-2, -(1 << 31), 4, 0x7FFFFFFF):
        rejected(produce + struct.pack(">i", length) + b"abc")


@pytest.mark.parametrize(
    "bad",
    [
        b"\xff",  # never valid in UTF-8
        b"\xc3",  # a two-byte sequence cut short
        b"\xe2\x82",  # a three-byte sequence cut short
        b"\xc0\x80",  # overlong NUL
        b"\xed\xa0\x80",  # a UTF-16 surrogate
        b"\xf4\x90\x80\x80",  # past U+10FFFF
        b"\x80abc",  # a continuation byte first
    ],
)
def test_invalid_utf8_is_rejected(bad: bytes) -> None:
    error = rejected(header(ApiKey.FIND_COORDINATOR, 0) + string(b"ok" + bad))
    assert "UTF-8" in str(error)
    rejected(header(ApiKey.FIND_COORDINATOR, 0, client_id=bad) + string(b"g"))
    rejected(header(ApiKey.METADATA, 1) + struct.pack(">i", 2) + string(b"fine") + string(bad))


@pytest.mark.parametrize(
    ("api_key", "named"),
    [(99, "API key 99"), (-1, "API key -1"), (4, "LeaderAndIsr (4)"), (62, "BrokerRegistration (62)"),
     (33, "AlterConfigs (33)"), (23, "OffsetForLeaderEpoch (23)"), (32767, "API key 32767"),
     (-32768, "API key -32768")],
)  # fmt: skip
def test_unknown_api_key(api_key: int, named: str) -> None:
    error = rejected(header(api_key, 0) + b"\x00" * 16)
    assert f"{named} is not served" in str(error)
    assert peek_header(header(api_key, 0)) == (api_key, 0, 1)


@pytest.mark.parametrize(
    ("api_key", "version"),
    [
        *((key, high + 1) for key, (_, high) in VERSION_RANGES.items()),  # one past each API's newest
        (ApiKey.PRODUCE, -1),
        (ApiKey.FIND_COORDINATOR, 32767),
    ],
)
def test_unsupported_version(api_key: ApiKey, version: int) -> None:
    error = rejected(header(api_key, version) + b"\x00" * 16)
    assert f"{api_key.name} version {version} is not supported" in str(error)


def test_frames_shorter_than_a_header() -> None:
    full = header(ApiKey.API_VERSIONS, 0, client_id=b"")  # 10 bytes: the shortest request there is
    assert decode_or_reject(full) is not None
    for end in range(len(full)):
        rejected(full[:end])
        rejected(bytearray(full[:end]))
        rejected(memoryview(full)[:end])


def test_peek_header() -> None:
    frame = header(ApiKey.FETCH, 3, correlation_id=-5) + b"rest is not looked at"
    assert peek_header(frame) == (1, 3, -5)
    assert peek_header(frame[:8]) == (1, 3, -5)
    assert peek_header(memoryview(frame)) == (1, 3, -5)
    for end in range(8):
        with pytest.raises(ProtocolError):
            peek_header(frame[:end])


# --------------------------------------------------------------------- ApiVersions we do not serve


def api_versions_v3_request(correlation_id: int, version: int = 3) -> bytes:
    """ApiVersions v3 (v4 has the same layout), flexible: request header v2 (client_id is still a
    classic nullable string, then tagged fields), and a body of compact strings and tagged fields."""
    return (
        struct.pack(">h", 18)  # api_key: ApiVersions
        + struct.pack(">h", version)  # api_version
        + struct.pack(">i", correlation_id)  # correlation_id
        + string(b"adminclient-1")  # client_id: int16 length + bytes, even in header v2
        + b"\x00"  # header tagged fields: none
        + b"\x12" + b"apache-kafka-java"  # client_software_name: compact string, varint length + 1 = 18
        + b"\x06" + b"3.9.0"  # client_software_version: compact string, varint length + 1 = 6
        + b"\x00"  # body tagged fields: none
    )  # fmt: skip


def test_api_versions_v3_is_read() -> None:
    parsed = decode_or_reject(api_versions_v3_request(1234))
    assert parsed is not None
    assert parsed[2] == {"client_software_name": "apache-kafka-java", "client_software_version": "3.9.0"}


def test_unsupported_api_versions_request_is_answered_with_v0() -> None:
    frame = api_versions_v3_request(1234, version=4)  # Kafka 4's clients open with v4
    assert peek_header(frame) == (ApiKey.API_VERSIONS, 4, 1234)
    rejected(frame)  # we cannot parse it ...

    chunks, size = unsupported_api_versions_response(1234)  # ... but answer it
    response = b"".join(bytes(chunk) for chunk in chunks)
    assert size == len(response)
    assert struct.unpack_from(">i", response)[0] == size - 4
    correlation_id, body = decode_response(REGISTRY[(ApiKey.API_VERSIONS, 0)], response[4:])
    assert correlation_id == 1234
    assert body["error_code"] == 35 == ErrorCode.UNSUPPORTED_VERSION
    advertised = {entry["api_key"]: (entry["min_version"], entry["max_version"]) for entry in body["api_versions"]}
    assert advertised == {int(key): versions for key, versions in VERSION_RANGES.items()}
    assert [entry["api_key"] for entry in body["api_versions"]] == sorted(advertised)
    assert advertised[ApiKey.API_VERSIONS] == (0, 3)
    for (key, version), _ in REGISTRY.items():
        low, high = advertised[key]
        assert low <= version <= high


def test_unsupported_api_versions_request_from_kafka_python() -> None:
    """The same, with the flexible v4 request encoded by kafka-python (header v2 and all)."""
    from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

    request: Any = ApiVersionsRequest(
        version=4, client_software_name="apache-kafka-java", client_software_version="3.9.0"
    )
    request.with_header(correlation_id=77, client_id="adminclient-1")
    frame = request.encode(header=True, framed=True)
    assert frame[4:] == api_versions_v3_request(77, version=4)  # our hand-built bytes above are right
    assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
    assert peek_header(frame[4:]) == (ApiKey.API_VERSIONS, 4, 77)
    rejected(frame[4:])

    chunks, _ = unsupported_api_versions_response(77)
    response = b"".join(bytes(chunk) for chunk in chunks)
    decoded = ApiVersionsResponse.decode(response[4:], version=0, header=True)
    assert decoded.header.correlation_id == 77
    assert decoded.error_code == 35
    assert {k.api_key: (k.min_version, k.max_version) for k in decoded.api_keys} == {
        int(key): versions for key, versions in VERSION_RANGES.items()
    }
