"""Request and response frames: a 4-byte size, a header, a body.

    Request  => Size RequestHeader Body     RequestHeader v1 => api_key int16, api_version int16,
                                                                correlation_id int32, client_id nullable string
                                            RequestHeader v2 => the same, then tagged fields
    Response => Size ResponseHeader Body    ResponseHeader v0 => correlation_id int32
                                            ResponseHeader v1 => correlation_id int32, tagged fields

A flexible version of an API (KIP-482) uses request header v2 and response header v1; every other
version header v1 and v0. ApiVersions responses always use header v0 (a client must be able to
read the answer before it knows which versions the broker has). A request for an ApiVersions
version we do not serve is still answered, with a v0 body carrying UNSUPPORTED_VERSION and our
version ranges, as Kafka does, so clients that open with a newer ApiVersions fall back.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from kafkalog.errors import ProtocolError
from kafkalog.protocol import compiled
from kafkalog.protocol.apis import REGISTRY, VERSION_RANGES, Api, ApiKey, lookup
from kafkalog.protocol.error_codes import ErrorCode
from kafkalog.protocol.types import (
    INT16,
    INT32,
    NULLABLE_STRING,
    REQUIRED,
    Array,
    FlexibleSchema,
    Reader,
    Region,
    Schema,
    Struct,
)

_SIZE = struct.Struct(">i")
_PEEK = struct.Struct(">hhi")
REQUEST_HEADER = Schema(
    ("api_key", INT16), ("api_version", INT16), ("correlation_id", INT32), ("client_id", NULLABLE_STRING)
)
RESPONSE_HEADER = Schema(("correlation_id", INT32))
REQUEST_HEADER_V2 = FlexibleSchema(
    ("api_key", INT16), ("api_version", INT16), ("correlation_id", INT32), ("client_id", NULLABLE_STRING)
)
RESPONSE_HEADER_V1 = FlexibleSchema(("correlation_id", INT32))


def _request_header(api: Api) -> Schema:
    return REQUEST_HEADER_V2 if api.flexible else REQUEST_HEADER


def _response_header(api: Api) -> Schema:
    return RESPONSE_HEADER_V1 if api.flexible and api.key != ApiKey.API_VERSIONS else RESPONSE_HEADER


Chunk = bytes | memoryview | Region


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def peek_header(frame: bytes | bytearray | memoryview) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) of a request frame (without its size prefix)."""
    if len(frame) < _PEEK.size:
        raise ProtocolError(f"request of {len(frame)} bytes is shorter than a request header")
    api_key, api_version, correlation_id = _PEEK.unpack_from(frame)
    return api_key, api_version, correlation_id


def client_id_of(frame: bytes | bytearray | memoryview) -> str | None:
    """The client id of a request frame whatever its API and version (every request header has it
    in the same place), or None where it cannot be read."""
    try:
        reader = Reader(frame, _PEEK.size)
        client_id: str | None = NULLABLE_STRING.decode(reader)
    except ProtocolError:
        return None
    return client_id


def decode_request(frame: bytes | bytearray | memoryview) -> tuple[RequestHeader, Api, Struct]:
    """Header, API and body of a request frame (without its size prefix); ProtocolError if invalid.

    Bytes after the request's last field are ignored, as Kafka's brokers ignore them: librdkafka
    2.16 ends its all-topics Metadata v9 request with one. Every field before them was read and
    checked, and nothing is allocated for them."""
    api_key, api_version, _ = peek_header(frame)
    api = lookup(api_key, api_version)
    reader = Reader(frame)
    fields = compiled.decode(_request_header(api), reader)
    header = RequestHeader(fields["api_key"], fields["api_version"], fields["correlation_id"], fields["client_id"])
    body = compiled.decode(api.request, reader)
    return header, api, body


def encode_request(api: Api, correlation_id: int, client_id: str | None, body: Struct) -> bytes:
    """A whole request frame, size prefix included."""
    header, header_size = compiled.encode(
        _request_header(api),
        {"api_key": api.key, "api_version": api.version, "correlation_id": correlation_id, "client_id": client_id},
    )
    chunks, size = compiled.encode(api.request, body)
    return b"".join([_SIZE.pack(header_size + size), *(bytes(c) for c in (*header, *chunks))])  # type: ignore[arg-type]


def encode_response(api: Api, correlation_id: int, body: Struct) -> tuple[list[Chunk], int]:
    """A whole response frame as chunks (regions of log files stay separate) and its total size."""
    header, header_size = compiled.encode(_response_header(api), {"correlation_id": correlation_id})
    chunks, size = compiled.encode(api.response, body)
    size += header_size
    if size > 2**31 - 1:
        raise ProtocolError(f"a {api.key.name} response of {size} bytes exceeds the 2 GiB frame limit")
    # the size, the header and the body's first run of bytes in one chunk (regions stay apart)
    first = [_SIZE.pack(size), *(bytes(c) for c in header)]  # type: ignore[arg-type]
    head = chunks[0] if chunks else None
    if isinstance(head, bytes | memoryview):
        first.append(bytes(head))
        chunks = chunks[1:]
    return [b"".join(first), *chunks], size + _SIZE.size


def decode_response(api: Api, frame: bytes | bytearray | memoryview) -> tuple[int, Struct]:
    """Correlation id and body of a response frame (without its size prefix)."""
    reader = Reader(frame)
    correlation_id: int = compiled.decode(_response_header(api), reader)["correlation_id"]
    body = compiled.decode(api.response, reader)
    if reader.remaining:
        raise ProtocolError(f"{reader.remaining} bytes left over after a {api.key.name} v{api.version} response")
    return correlation_id, body


def api_versions_body(error_code: ErrorCode = ErrorCode.NONE) -> dict[str, Any]:
    """The ApiVersions response body: our version range of every API."""
    return {
        "error_code": int(error_code),
        "api_versions": [
            {"api_key": int(key), "min_version": low, "max_version": high}
            for key, (low, high) in sorted(VERSION_RANGES.items())
        ],
        "throttle_time_ms": 0,
    }


def unsupported_api_versions_response(correlation_id: int) -> tuple[list[Chunk], int]:
    """The answer to an ApiVersions request of a version we do not serve: v0, UNSUPPORTED_VERSION."""
    return encode_response(
        REGISTRY[(ApiKey.API_VERSIONS, 0)], correlation_id, api_versions_body(ErrorCode.UNSUPPORTED_VERSION)
    )


def refusal(api_key: int, api_version: int, correlation_id: int) -> tuple[list[Chunk], int] | None:
    """The answer to a request we do not serve, where one can be given: ApiVersions of a version we
    do not serve is answered in v0 with our ranges (KIP-511). None: nothing a client could read can
    be answered (an API or version we know nothing of), so the caller closes."""
    if api_key == ApiKey.API_VERSIONS:
        return unsupported_api_versions_response(correlation_id)
    return None


def error_body(schema: Schema, error_code: int) -> dict[str, Any]:
    """A response body of ``schema`` that carries ``error_code`` in its top-level error code: every
    other field its default, or the zero value of its type (0, "", no elements). The answer to a
    request refused whole (a group request the caller may not make)."""
    body: dict[str, Any] = {}
    for name, kind, default in schema.plan:
        if name == "error_code":
            body[name] = error_code
        elif default is REQUIRED:
            body[name] = _zero(kind)
    return body


def _zero(kind: Any) -> Any:
    if isinstance(kind, Array):
        return []
    if kind.name.endswith("string"):
        return ""
    if kind.name.endswith("bytes"):
        return b""
    return 0
