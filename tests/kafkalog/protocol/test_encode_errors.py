"""A value the encoders cannot put on the wire is a ProtocolError, like a frame the decoder cannot read.

The encoders already do this for an int out of its width, a string over 32767 bytes, None where a
field is not nullable and a missing field; the same holds for sizes that do not fit an int32 (a log
region of 2 GiB or more, a response frame over 2 GiB) and for strings with no UTF-8 form.
"""

from __future__ import annotations

from typing import Any

import pytest

from kafkalog.errors import ProtocolError
from kafkalog.protocol import REGISTRY, ApiKey, encode_request, encode_response

from .schemas import OpaqueRegion

FIND_COORDINATOR = REGISTRY[(ApiKey.FIND_COORDINATOR, 0)]
METADATA = REGISTRY[(ApiKey.METADATA, 0)]
FETCH = REGISTRY[(ApiKey.FETCH, 0)]


def fetch_response(*record_sets: Any) -> dict[str, Any]:
    partitions = [
        {"partition": i, "error_code": 0, "high_watermark": 0, "record_set": record_set}
        for i, record_set in enumerate(record_sets)
    ]
    return {"responses": [{"topic": "t", "partition_responses": partitions}]}


@pytest.mark.parametrize(
    ("correlation_id", "body"),
    [
        (1 << 31, {"key": "g"}),  # correlation id over int32
        (-(1 << 31) - 1, {"key": "g"}),
        (1, {"key": "x" * 32768}),  # a string over 32767 bytes ...
        (1, {"key": "é" * 16384}),  # ... counted in UTF-8 bytes
        (1, {"key": None}),  # a non-nullable string
        (1, {}),  # a missing field
    ],
)
def test_unencodable_request_values(correlation_id: int, body: dict[str, Any]) -> None:
    with pytest.raises(ProtocolError):
        encode_request(FIND_COORDINATOR, correlation_id, None, body)


def test_unencodable_arrays_and_ints() -> None:
    with pytest.raises(ProtocolError):
        encode_request(METADATA, 1, None, {"topics": None})  # v0 topics are not nullable
    with pytest.raises(ProtocolError):
        encode_request(REGISTRY[(ApiKey.PRODUCE, 0)], 1, None, {"acks": 1 << 15, "timeout_ms": 0, "topic_data": []})
    with pytest.raises(ProtocolError):  # node_id over int32, in a response
        encode_response(FIND_COORDINATOR, 1, {"error_code": 0, "node_id": 1 << 31, "host": "h", "port": 1})
    encode_response(FETCH, 1, fetch_response(OpaqueRegion(1 << 30)))  # a 1 GiB region is fine


def test_region_of_two_gib_or_more_is_a_protocol_error() -> None:
    """BUG: a RECORDS region whose length does not fit the int32 size field escapes as struct.error
    (kafkalog/protocol/types.py, _Records.encode: ``_I32.pack(value.length)`` is not guarded)."""
    with pytest.raises(ProtocolError):
        encode_response(FETCH, 1, fetch_response(OpaqueRegion(1 << 31)))


def test_response_frame_over_two_gib_is_a_protocol_error() -> None:
    """BUG: two 1 GiB regions make a frame whose size does not fit the int32 size prefix; the
    struct.error of the size patch escapes (kafkalog/protocol/frames.py, encode_response:
    ``_SIZE.pack_into(first, 0, out.size - _SIZE.size)`` is not guarded)."""
    with pytest.raises(ProtocolError):
        encode_response(FETCH, 1, fetch_response(OpaqueRegion(1 << 30), OpaqueRegion(1 << 30)))


@pytest.mark.parametrize("text", ["\ud800", "topic-\udcff"])  # lone surrogates, as os.fsdecode gives for bad bytes
def test_string_without_utf8_form_is_a_protocol_error(text: str) -> None:
    """BUG: a str with a lone surrogate (what os.listdir / os.fsdecode return for a file name that is
    not UTF-8) escapes as UnicodeEncodeError (kafkalog/protocol/types.py, _String.encode:
    ``value.encode("utf-8")`` is not guarded, unlike the length check just after it)."""
    with pytest.raises(ProtocolError):
        encode_request(FIND_COORDINATOR, 1, None, {"key": text})
    with pytest.raises(ProtocolError):
        encode_request(FIND_COORDINATOR, 1, text, {"key": "g"})
