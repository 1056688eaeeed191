"""The Kafka wire protocol (message-format v0/v1 era): schemas as data, one generic codec, a registry.

Imports only kafkalog.record's neighbours' error root; knows nothing of sockets.
"""

from kafkalog.protocol.apis import REGISTRY, VERSION_RANGES, Api, ApiKey, lookup
from kafkalog.protocol.error_codes import ErrorCode
from kafkalog.protocol.frames import (
    RequestHeader,
    api_versions_body,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    peek_header,
    unsupported_api_versions_response,
)

__all__ = [
    "REGISTRY",
    "VERSION_RANGES",
    "Api",
    "ApiKey",
    "ErrorCode",
    "RequestHeader",
    "api_versions_body",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "lookup",
    "peek_header",
    "unsupported_api_versions_response",
]
