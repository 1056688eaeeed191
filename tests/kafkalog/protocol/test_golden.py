"""Golden bytes built by hand, field by field from Kafka's protocol guide: encode_request produces
exactly them, decode_request reads them back, and kafka-python's classic encoders agree."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from kafkalog.protocol import REGISTRY, ApiKey, decode_request, decode_response, encode_request, encode_response

from .schemas import normalized


def i8(value: int) -> bytes:
    return struct.pack(">b", value)


def i16(value: int) -> bytes:
    return struct.pack(">h", value)


def i32(value: int) -> bytes:
    return struct.pack(">i", value)


def i64(value: int) -> bytes:
    return struct.pack(">q", value)


def s(text: str) -> bytes:
    data = text.encode()
    return i16(len(data)) + data


def sized(frame: bytes) -> bytes:
    return i32(len(frame)) + frame  # Size: int32 count of the bytes that follow


CASES: dict[str, tuple[ApiKey, int, int, str | None, dict[str, Any], bytes]] = {}


CASES["ApiVersions v0"] = (
    ApiKey.API_VERSIONS,
    0,
    1,
    "kafkalog-test",
    {},
    sized(
        i16(18)  # api_key: 18, ApiVersions
        + i16(0)  # api_version: 0
        + i32(1)  # correlation_id: 1
        + s("kafkalog-test")  # client_id: int16 length 13, then the UTF-8 bytes
        # (an ApiVersions v0 body is empty)
    ),
)

CASES["Metadata v0, two topics"] = (
    ApiKey.METADATA,
    0,
    2,
    "c",
    {"topics": [{"name": "events"}, {"name": "pagé-views"}]},
    sized(
        i16(3)  # api_key: 3, Metadata
        + i16(0)  # api_version: 0
        + i32(2)  # correlation_id: 2
        + s("c")  # client_id: "c"
        + i32(2)  # topics: array count 2
        + s("events")  # topics[0]: int16 length 6, "events"
        + i16(11)  # topics[1]: int16 length 11 (10 characters, "é" is two UTF-8 bytes) ...
        + b"pag\xc3\xa9-views"  # ... then the bytes
    ),
)

CASES["Produce v2, one partition, 3-byte record set"] = (
    ApiKey.PRODUCE,
    2,
    3,
    None,
    {"acks": -1, "timeout_ms": 30000, "topic_data": [{"topic": "t", "data": [{"partition": 5, "record_set": b"abc"}]}]},
    sized(
        i16(0)  # api_key: 0, Produce
        + i16(2)  # api_version: 2
        + i32(3)  # correlation_id: 3
        + i16(-1)  # client_id: null (length -1, no bytes)
        + i16(-1)  # acks: -1 (all in-sync replicas)
        + i32(30000)  # timeout_ms: 30000
        + i32(1)  # topic_data: array count 1
        + s("t")  # topic_data[0].topic: "t"
        + i32(1)  # topic_data[0].data: array count 1
        + i32(5)  # data[0].partition: 5
        + i32(3)  # data[0].record_set: int32 size 3 ...
        + b"abc"  # ... then the message set bytes, verbatim
    ),
)

CASES["Fetch v3"] = (
    ApiKey.FETCH,
    3,
    -7,
    "consumer-1",
    {
        "replica_id": -1,
        "max_wait_ms": 500,
        "min_bytes": 1,
        "max_bytes": 52428800,
        "topics": [
            {
                "topic": "a",
                "partitions": [
                    {"partition": 0, "fetch_offset": 0, "max_bytes": 1048576},
                    {"partition": 1, "fetch_offset": 1 << 40, "max_bytes": 65536},
                ],
            },
            {"topic": "b", "partitions": []},
        ],
    },
    sized(
        i16(1)  # api_key: 1, Fetch
        + i16(3)  # api_version: 3
        + i32(-7)  # correlation_id: -7 (any int32)
        + s("consumer-1")  # client_id
        + i32(-1)  # replica_id: -1, a consumer
        + i32(500)  # max_wait_ms
        + i32(1)  # min_bytes
        + i32(52428800)  # max_bytes: the response limit, new in v3
        + i32(2)  # topics: array count 2
        + s("a")  # topics[0].topic
        + i32(2)  # topics[0].partitions: array count 2
        + i32(0)  # partitions[0].partition
        + i64(0)  # partitions[0].fetch_offset
        + i32(1048576)  # partitions[0].max_bytes
        + i32(1)  # partitions[1].partition
        + i64(1 << 40)  # partitions[1].fetch_offset: needs all 64 bits
        + i32(65536)  # partitions[1].max_bytes
        + s("b")  # topics[1].topic
        + i32(0)  # topics[1].partitions: array count 0
    ),
)

CASES["ListOffsets v1"] = (
    ApiKey.LIST_OFFSETS,
    1,
    4,
    "c",
    {
        "replica_id": -1,
        "topics": [
            {"topic": "t", "partitions": [{"partition": 0, "timestamp": -1}, {"partition": 2, "timestamp": -2}]}
        ],
    },
    sized(
        i16(2)  # api_key: 2, ListOffsets
        + i16(1)  # api_version: 1
        + i32(4)  # correlation_id
        + s("c")  # client_id
        + i32(-1)  # replica_id: -1, a consumer
        + i32(1)  # topics: array count 1
        + s("t")  # topics[0].topic
        + i32(2)  # topics[0].partitions: array count 2
        + i32(0)  # partitions[0].partition
        + i64(-1)  # partitions[0].timestamp: -1, latest (v1 has no max_num_offsets)
        + i32(2)  # partitions[1].partition
        + i64(-2)  # partitions[1].timestamp: -2, earliest
    ),
)

CASES["FindCoordinator v0"] = (
    ApiKey.FIND_COORDINATOR,
    0,
    5,
    "",
    {"key": "my-group"},
    sized(
        i16(10)  # api_key: 10, FindCoordinator (GroupCoordinator)
        + i16(0)  # api_version: 0
        + i32(5)  # correlation_id
        + s("")  # client_id: empty, not null (length 0)
        + s("my-group")  # group_id
    ),
)


@pytest.mark.parametrize("name", list(CASES))
def test_golden_request(name: str) -> None:
    key, version, correlation_id, client_id, body, golden = CASES[name]
    api = REGISTRY[(key, version)]
    assert encode_request(api, correlation_id, client_id, body) == golden
    header, got_api, got_body = decode_request(golden[4:])
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        key,
        version,
        correlation_id,
        client_id,
    )
    assert got_api is api
    assert normalized(api.request, got_body) == body


def test_golden_produce_v2_response() -> None:
    api = REGISTRY[(ApiKey.PRODUCE, 2)]
    body = {
        "responses": [
            {
                "topic": "t",
                "partition_responses": [
                    {"partition": 5, "error_code": 0, "base_offset": 100, "log_append_time": -1},
                    {"partition": 6, "error_code": 6, "base_offset": -1, "log_append_time": -1},
                ],
            }
        ],
        "throttle_time_ms": 0,
    }
    golden = sized(
        i32(3)  # correlation_id: 3, the request's
        + i32(1)  # responses: array count 1
        + s("t")  # responses[0].topic
        + i32(2)  # responses[0].partition_responses: array count 2
        + i32(5)  # [0].partition
        + i16(0)  # [0].error_code: NONE
        + i64(100)  # [0].base_offset
        + i64(-1)  # [0].log_append_time: -1, CreateTime topic (new in v2)
        + i32(6)  # [1].partition
        + i16(6)  # [1].error_code: NOT_LEADER_FOR_PARTITION
        + i64(-1)  # [1].base_offset
        + i64(-1)  # [1].log_append_time
        + i32(0)  # throttle_time_ms (at the end since v1)
    )
    chunks, size = encode_response(api, 3, body)
    assert b"".join(bytes(chunk) for chunk in chunks) == golden
    assert size == len(golden)
    assert decode_response(api, golden[4:]) == (3, body)


def test_golden_api_versions_v0_response() -> None:
    api = REGISTRY[(ApiKey.API_VERSIONS, 0)]
    body = {"error_code": 0, "api_versions": [{"api_key": 0, "min_version": 0, "max_version": 2}]}
    golden = sized(
        i32(1)  # correlation_id
        + i16(0)  # error_code
        + i32(1)  # api_versions: array count 1
        + i16(0)  # api_versions[0].api_key: Produce
        + i16(0)  # api_versions[0].min_version
        + i16(2)  # api_versions[0].max_version
    )
    chunks, size = encode_response(api, 1, body)
    assert b"".join(bytes(chunk) for chunk in chunks) == golden
    assert size == len(golden)
    assert decode_response(api, golden[4:]) == (1, body)


def test_golden_metadata_v1_null_topics_and_boolean() -> None:
    """Metadata v1: a null topic array asks for all topics; a response boolean is one byte."""
    api = REGISTRY[(ApiKey.METADATA, 1)]
    golden = sized(i16(3) + i16(1) + i32(9) + s("c") + i32(-1))  # header, then topics: null (count -1)
    assert encode_request(api, 9, "c", {"topics": None}) == golden
    response = {
        "brokers": [{"node_id": 0, "host": "h", "port": 9092, "rack": None}],
        "controller_id": 0,
        "topic_metadata": [{"error_code": 0, "topic": "t", "is_internal": True, "partition_metadata": []}],
    }
    golden_response = sized(
        i32(9)  # correlation_id
        + i32(1)  # brokers: array count 1
        + i32(0)  # brokers[0].node_id
        + s("h")  # brokers[0].host
        + i32(9092)  # brokers[0].port
        + i16(-1)  # brokers[0].rack: null
        + i32(0)  # controller_id
        + i32(1)  # topic_metadata: array count 1
        + i16(0)  # [0].error_code
        + s("t")  # [0].topic
        + i8(1)  # [0].is_internal: true
        + i32(0)  # [0].partition_metadata: array count 0
    )
    chunks, _ = encode_response(api, 9, response)
    assert b"".join(bytes(chunk) for chunk in chunks) == golden_response
    assert decode_response(api, golden_response[4:]) == (9, response)


# ---------------------------------------------------------------- the same, from kafka-python


def test_golden_requests_match_kafka_python_classic_encoders() -> None:
    """kafka-python's hand-written (kafka.protocol.old) request classes give the same golden bytes."""
    from kafka.protocol.old.api_versions import ApiVersionsRequest
    from kafka.protocol.old.fetch import FetchRequest
    from kafka.protocol.old.find_coordinator import FindCoordinatorRequest
    from kafka.protocol.old.list_offsets import ListOffsetsRequest
    from kafka.protocol.old.metadata import MetadataRequest
    from kafka.protocol.old.produce import ProduceRequest

    requests: dict[str, Any] = {
        "ApiVersions v0": ApiVersionsRequest[0](),
        "Metadata v0, two topics": MetadataRequest[0](topics=["events", "pagé-views"]),
        "Produce v2, one partition, 3-byte record set": ProduceRequest[2](
            required_acks=-1, timeout=30000, topics=[("t", [(5, b"abc")])]
        ),
        "Fetch v3": FetchRequest[3](
            replica_id=-1,
            max_wait_time=500,
            min_bytes=1,
            max_bytes=52428800,
            topics=[("a", [(0, 0, 1048576), (1, 1 << 40, 65536)]), ("b", [])],
        ),
        "ListOffsets v1": ListOffsetsRequest[1](replica_id=-1, topics=[("t", [(0, -1), (2, -2)])]),
        "FindCoordinator v0": FindCoordinatorRequest[0](key="my-group"),
    }
    for name, request in requests.items():
        _, _, correlation_id, client_id, _, golden = CASES[name]
        request.with_header(correlation_id=correlation_id, client_id=client_id)
        assert request.encode(header=True, framed=True) == golden, name
