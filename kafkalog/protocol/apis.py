"""Every request and response we speak, per API and version, declared as schemas; and the registry.

Versions are those of the message-format v0/v1 era (no flexible versions, no tagged fields). Field
names follow Kafka's protocol guide. Where versions differ only by a field, the later schema is
written out in full: each version reads top to bottom exactly as it is on the wire.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from kafkalog.errors import ProtocolError
from kafkalog.protocol.types import (
    BOOLEAN,
    INT8,
    INT16,
    INT32,
    INT64,
    NULLABLE_STRING,
    RECORDS,
    STRING,
    Array,
    FlexibleSchema,
    Schema,
)


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    API_VERSIONS = 18
    CREATE_TOPICS = 19


@dataclass(frozen=True)
class Api:
    """One (API, version): its request and response schemas. A flexible version (KIP-482) has
    FlexibleSchema bodies, request header v2 and (but for ApiVersions) response header v1."""

    key: ApiKey
    version: int
    request: Schema
    response: Schema

    @property
    def flexible(self) -> bool:
        return isinstance(self.request, FlexibleSchema)


# ------------------------------------------------------------------------------------------ Produce
_PRODUCE_REQUEST = Schema(
    ("acks", INT16),
    ("timeout_ms", INT32),
    ("topic_data", [("topic", STRING), ("data", [("partition", INT32), ("record_set", RECORDS)])]),
)
_PRODUCE_PARTITION_V0 = [("partition", INT32), ("error_code", INT16), ("base_offset", INT64)]
_PRODUCE_PARTITION_V2 = [*_PRODUCE_PARTITION_V0, ("log_append_time", INT64)]
# v3 (Kafka 0.11, KIP-98): a transactional id first; the records are message format v2 batches
_PRODUCE_REQUEST_V3 = Schema(("transactional_id", NULLABLE_STRING), *_PRODUCE_REQUEST.fields)
PRODUCE = {
    0: (_PRODUCE_REQUEST, Schema(("responses", [("topic", STRING), ("partition_responses", _PRODUCE_PARTITION_V0)]))),
    1: (
        _PRODUCE_REQUEST,
        Schema(
            ("responses", [("topic", STRING), ("partition_responses", _PRODUCE_PARTITION_V0)]),
            ("throttle_time_ms", INT32),
        ),
    ),
    2: (
        _PRODUCE_REQUEST,
        Schema(
            ("responses", [("topic", STRING), ("partition_responses", _PRODUCE_PARTITION_V2)]),
            ("throttle_time_ms", INT32),
        ),
    ),
    3: (
        _PRODUCE_REQUEST_V3,
        Schema(
            ("responses", [("topic", STRING), ("partition_responses", _PRODUCE_PARTITION_V2)]),
            ("throttle_time_ms", INT32),
        ),
    ),
}
# v4 (Kafka 1.0) adds an error code only; v5 (1.0) answers the log start offset too; v6 (2.0) changes
# nothing on the wire; v7 (2.1, KIP-110) may carry zstd batches (a broker refuses zstd below v7).
_PRODUCE_RESPONSE_V5 = Schema(
    (
        "responses",
        [("topic", STRING), ("partition_responses", [*_PRODUCE_PARTITION_V2, ("log_start_offset", INT64)])],
    ),
    ("throttle_time_ms", INT32),
)
PRODUCE |= {
    4: PRODUCE[3],
    5: (_PRODUCE_REQUEST_V3, _PRODUCE_RESPONSE_V5),
    6: (_PRODUCE_REQUEST_V3, _PRODUCE_RESPONSE_V5),
    7: (_PRODUCE_REQUEST_V3, _PRODUCE_RESPONSE_V5),
}
ZSTD_PRODUCE_VERSION = 7
"""The first Produce version that may carry zstd (KIP-110)."""

# -------------------------------------------------------------------------------------------- Fetch
_FETCH_TOPICS = (
    "topics",
    [("topic", STRING), ("partitions", [("partition", INT32), ("fetch_offset", INT64), ("max_bytes", INT32)])],
)
_FETCH_REQUEST_V0 = Schema(("replica_id", INT32), ("max_wait_ms", INT32), ("min_bytes", INT32), _FETCH_TOPICS)
_FETCH_REQUEST_V3 = Schema(
    ("replica_id", INT32), ("max_wait_ms", INT32), ("min_bytes", INT32), ("max_bytes", INT32), _FETCH_TOPICS
)
_FETCH_RESPONSES = (
    "responses",
    [
        ("topic", STRING),
        (
            "partition_responses",
            [("partition", INT32), ("error_code", INT16), ("high_watermark", INT64), ("record_set", RECORDS)],
        ),
    ],
)
_FETCH_RESPONSE_V1 = Schema(("throttle_time_ms", INT32), _FETCH_RESPONSES)
# v4 (Kafka 0.11, KIP-98): the isolation level asked; the last stable offset and aborted
# transactions answered per partition (record batches may come back)
_FETCH_REQUEST_V4 = Schema(*_FETCH_REQUEST_V3.fields[:4], ("isolation_level", INT8), _FETCH_TOPICS)
_FETCH_RESPONSE_V4 = Schema(
    ("throttle_time_ms", INT32),
    (
        "responses",
        [
            ("topic", STRING),
            (
                "partition_responses",
                [
                    ("partition", INT32),
                    ("error_code", INT16),
                    ("high_watermark", INT64),
                    ("last_stable_offset", INT64),
                    ("aborted_transactions", Array([("producer_id", INT64), ("first_offset", INT64)], nullable=True)),
                    ("record_set", RECORDS),
                ],
            ),
        ],
    ),
)
FETCH = {
    0: (_FETCH_REQUEST_V0, Schema(_FETCH_RESPONSES)),
    1: (_FETCH_REQUEST_V0, _FETCH_RESPONSE_V1),
    2: (_FETCH_REQUEST_V0, _FETCH_RESPONSE_V1),
    3: (_FETCH_REQUEST_V3, _FETCH_RESPONSE_V1),
    4: (_FETCH_REQUEST_V4, _FETCH_RESPONSE_V4),
}

# -------------------------------------------------------------------------------------- ListOffsets
LIST_OFFSETS = {
    0: (
        Schema(
            ("replica_id", INT32),
            (
                "topics",
                [
                    ("topic", STRING),
                    ("partitions", [("partition", INT32), ("timestamp", INT64), ("max_num_offsets", INT32)]),
                ],
            ),
        ),
        Schema(
            (
                "responses",
                [
                    ("topic", STRING),
                    ("partition_responses", [("partition", INT32), ("error_code", INT16), ("offsets", Array(INT64))]),
                ],
            ),
        ),
    ),
    1: (
        Schema(
            ("replica_id", INT32),
            ("topics", [("topic", STRING), ("partitions", [("partition", INT32), ("timestamp", INT64)])]),
        ),
        Schema(
            (
                "responses",
                [
                    ("topic", STRING),
                    (
                        "partition_responses",
                        [("partition", INT32), ("error_code", INT16), ("timestamp", INT64), ("offset", INT64)],
                    ),
                ],
            ),
        ),
    ),
}

# ----------------------------------------------------------------------------------------- Metadata
_BROKER_V0 = [("node_id", INT32), ("host", STRING), ("port", INT32)]
_BROKER_V1 = [*_BROKER_V0, ("rack", NULLABLE_STRING)]
_PARTITION_METADATA = [
    ("error_code", INT16),
    ("partition", INT32),
    ("leader", INT32),
    ("replicas", Array(INT32)),
    ("isr", Array(INT32)),
]
METADATA = {
    0: (
        Schema(("topics", Array(STRING))),
        Schema(
            ("brokers", _BROKER_V0),
            (
                "topic_metadata",
                [("error_code", INT16), ("topic", STRING), ("partition_metadata", _PARTITION_METADATA)],
            ),
        ),
    ),
    1: (
        Schema(("topics", Array(STRING, nullable=True))),
        Schema(
            ("brokers", _BROKER_V1),
            ("controller_id", INT32),
            (
                "topic_metadata",
                [
                    ("error_code", INT16),
                    ("topic", STRING),
                    ("is_internal", BOOLEAN),
                    ("partition_metadata", _PARTITION_METADATA),
                ],
            ),
        ),
    ),
    2: (
        Schema(("topics", Array(STRING, nullable=True))),
        Schema(
            ("brokers", _BROKER_V1),
            ("cluster_id", NULLABLE_STRING),
            ("controller_id", INT32),
            (
                "topic_metadata",
                [
                    ("error_code", INT16),
                    ("topic", STRING),
                    ("is_internal", BOOLEAN),
                    ("partition_metadata", _PARTITION_METADATA),
                ],
            ),
        ),
    ),
}


def _metadata_response_v3(partition: Sequence[tuple[str, Any]]) -> Schema:
    return Schema(
        ("throttle_time_ms", INT32),
        *METADATA[2][1].fields[:3],  # brokers, cluster_id, controller_id
        (
            "topic_metadata",
            [
                ("error_code", INT16),
                ("topic", STRING),
                ("is_internal", BOOLEAN),
                ("partition_metadata", list(partition)),
            ],
        ),
    )


# v3 (Kafka 0.11): throttle time first. Not v4 yet: kafka-python infers a broker of 0.11 or later from
# Metadata v4 and then turns its idempotent producer on, which needs InitProducerId (not served yet).
METADATA[3] = (METADATA[2][0], _metadata_response_v3(_PARTITION_METADATA))

# ------------------------------------------------------------------------- OffsetCommit/OffsetFetch
_COMMIT_RESPONSE = Schema(
    ("responses", [("topic", STRING), ("partition_responses", [("partition", INT32), ("error_code", INT16)])])
)
OFFSET_COMMIT = {
    0: (
        Schema(
            ("group_id", STRING),
            (
                "topics",
                [
                    ("topic", STRING),
                    ("partitions", [("partition", INT32), ("offset", INT64), ("metadata", NULLABLE_STRING)]),
                ],
            ),
        ),
        _COMMIT_RESPONSE,
    ),
    1: (
        Schema(
            ("group_id", STRING),
            ("generation_id", INT32),
            ("member_id", STRING),
            (
                "topics",
                [
                    ("topic", STRING),
                    (
                        "partitions",
                        [("partition", INT32), ("offset", INT64), ("timestamp", INT64), ("metadata", NULLABLE_STRING)],
                    ),
                ],
            ),
        ),
        _COMMIT_RESPONSE,
    ),
    2: (
        Schema(
            ("group_id", STRING),
            ("generation_id", INT32),
            ("member_id", STRING),
            ("retention_time_ms", INT64),
            (
                "topics",
                [
                    ("topic", STRING),
                    ("partitions", [("partition", INT32), ("offset", INT64), ("metadata", NULLABLE_STRING)]),
                ],
            ),
        ),
        _COMMIT_RESPONSE,
    ),
}
_OFFSET_FETCH = (
    Schema(("group_id", STRING), ("topics", [("topic", STRING), ("partitions", Array(INT32))])),
    Schema(
        (
            "responses",
            [
                ("topic", STRING),
                (
                    "partition_responses",
                    [("partition", INT32), ("offset", INT64), ("metadata", NULLABLE_STRING), ("error_code", INT16)],
                ),
            ],
        ),
    ),
)
OFFSET_FETCH = {0: _OFFSET_FETCH, 1: _OFFSET_FETCH}

# ---------------------------------------------------------------------------------- FindCoordinator
FIND_COORDINATOR = {
    0: (
        Schema(("group_id", STRING)),
        Schema(("error_code", INT16), ("node_id", INT32), ("host", STRING), ("port", INT32)),
    ),
}

# ------------------------------------------------------------------------------------- ApiVersions
_API_VERSIONS_LIST = ("api_versions", [("api_key", INT16), ("min_version", INT16), ("max_version", INT16)])
API_VERSIONS = {
    0: (Schema(), Schema(("error_code", INT16), _API_VERSIONS_LIST)),
    1: (Schema(), Schema(("error_code", INT16), _API_VERSIONS_LIST, ("throttle_time_ms", INT32))),
}

# ------------------------------------------------------------------------------------- CreateTopics
_CREATE_TOPIC = [
    ("topic", STRING),
    ("num_partitions", INT32),
    ("replication_factor", INT16),
    ("replica_assignment", [("partition", INT32), ("replicas", Array(INT32))]),
    ("config_entries", [("config_name", STRING), ("config_value", NULLABLE_STRING)]),
]
CREATE_TOPICS = {
    0: (
        Schema(("create_topic_requests", _CREATE_TOPIC), ("timeout_ms", INT32)),
        Schema(("topic_errors", [("topic", STRING), ("error_code", INT16)])),
    ),
    1: (
        Schema(("create_topic_requests", _CREATE_TOPIC), ("timeout_ms", INT32), ("validate_only", BOOLEAN)),
        Schema(("topic_errors", [("topic", STRING), ("error_code", INT16), ("error_message", NULLABLE_STRING)])),
    ),
}
# v2 (Kafka 1.0): the response starts with throttle_time_ms; v3 (2.0) and v4 (2.4, KIP-464: -1 for
# the broker's default partitions or replication) change nothing on the wire. Kafka 4.x serves 2+.
_CREATE_TOPICS_V2 = (
    CREATE_TOPICS[1][0],
    Schema(
        ("throttle_time_ms", INT32),
        ("topic_errors", [("topic", STRING), ("error_code", INT16), ("error_message", NULLABLE_STRING)]),
    ),
)
CREATE_TOPICS |= {2: _CREATE_TOPICS_V2, 3: _CREATE_TOPICS_V2, 4: _CREATE_TOPICS_V2}

# ----------------------------------------------------------------------------------------- registry
_BY_KEY = {
    ApiKey.PRODUCE: PRODUCE,
    ApiKey.FETCH: FETCH,
    ApiKey.LIST_OFFSETS: LIST_OFFSETS,
    ApiKey.METADATA: METADATA,
    ApiKey.OFFSET_COMMIT: OFFSET_COMMIT,
    ApiKey.OFFSET_FETCH: OFFSET_FETCH,
    ApiKey.FIND_COORDINATOR: FIND_COORDINATOR,
    ApiKey.API_VERSIONS: API_VERSIONS,
    ApiKey.CREATE_TOPICS: CREATE_TOPICS,
}

REGISTRY: dict[tuple[int, int], Api] = {
    (key, version): Api(key, version, request, response)
    for key, versions in _BY_KEY.items()
    for version, (request, response) in versions.items()
}
"""Every (api key, version) we serve."""

VERSION_RANGES: dict[ApiKey, tuple[int, int]] = {
    key: (min(versions), max(versions)) for key, versions in _BY_KEY.items()
}
"""What ApiVersions advertises: the lowest and highest version of each API."""


def lookup(api_key: int, version: int) -> Api:
    """The Api for a request header; ProtocolError if we do not serve it."""
    api = REGISTRY.get((api_key, version))
    if api is None:
        if api_key in VERSION_RANGES:
            low, high = VERSION_RANGES[ApiKey(api_key)]
            raise ProtocolError(f"{ApiKey(api_key).name} version {version} is not supported (we serve {low}-{high})")
        raise ProtocolError(f"unknown API key {api_key}")
    return api
