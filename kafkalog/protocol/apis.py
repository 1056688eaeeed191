"""Every request and response we speak, per API, declared once with each field's versions; and the
registry of (API, version) we serve.

Each declaration follows Apache Kafka's JSON message definition of the API field by field, in its
order (our field names are the snake_case names the handlers and clients use); ``served`` is the
range of versions we speak, ``flexible`` the first flexible version (KIP-482). kafkalog.protocol.declare
resolves a declaration into one schema per version. The tests check every served version against
Kafka's definitions, type by type.

What is left out on purpose: tagged fields we neither send nor read (a reader skips unknown tags),
and versions that need something kafkalog does not have: topic ids (Fetch 13+, Metadata 10+,
CreateTopics 7+), KIP-848's consumer groups (OffsetCommit 9+, OffsetFetch 9+), share groups
(FindCoordinator 6), transaction version 2 (EndTxn 5, TxnOffsetCommit 5). A client negotiates down
to what ApiVersions lists.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum

from kafkalog.errors import ProtocolError
from kafkalog.protocol.declare import Field, field, schema_for
from kafkalog.protocol.types import (
    BOOLEAN,
    BYTES,
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    Array,
    FlexibleSchema,
    Schema,
)

_NO_OPERATIONS = -(2**31)
"""Authorized operations not asked for (Kafka's INT32_MIN)."""


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    INCREMENTAL_ALTER_CONFIGS = 44
    OFFSET_DELETE = 47
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66


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


@dataclass(frozen=True)
class Declaration:
    """An API's request and response fields over all versions, the versions we serve (lowest and
    highest, both included, as Kafka writes "0-11"), and the first flexible one (None: none of those we
    serve is flexible)."""

    key: ApiKey
    served: tuple[int, int]
    flexible: int | None
    request: Sequence[Field]
    response: Sequence[Field]

    def api(self, version: int) -> Api:
        flexible = self.flexible is not None and version >= self.flexible
        return Api(
            self.key,
            version,
            schema_for(self.request, version, flexible=flexible),
            schema_for(self.response, version, flexible=flexible),
        )


# ------------------------------------------------------------------------------------------ Produce
# v2 (0.10): log-append time; v3 (0.11, KIP-98): transactional id, record batches; v5: log start
# offset; v7 (2.1, KIP-110): zstd; v8 (2.4, KIP-467): which records failed; v9: flexible; v10-v11 add
# only tagged fields and error codes of features we do not serve (KIP-951, KIP-890).
PRODUCE = Declaration(
    ApiKey.PRODUCE,
    served=(0, 11),
    flexible=9,
    request=[
        field("transactional_id", STRING, 3, nullable=3, default=None),
        field("acks", INT16),
        field("timeout_ms", INT32),
        field(
            "topic_data",
            [
                field("topic", STRING),
                field("data", [field("partition", INT32), field("record_set", RECORDS, nullable=0)]),
            ],
        ),
    ],
    response=[
        field(
            "responses",
            [
                field("topic", STRING),
                field(
                    "partition_responses",
                    [
                        field("partition", INT32),
                        field("error_code", INT16),
                        field("base_offset", INT64),
                        field("log_append_time", INT64, 2, default=-1),
                        field("log_start_offset", INT64, 5, default=-1),
                        field(
                            "record_errors",
                            [
                                field("batch_index", INT32),
                                field("batch_index_error_message", STRING, nullable=8, default=None),
                            ],
                            8,
                            default=(),
                        ),
                        field("error_message", STRING, 8, nullable=8, default=None),
                    ],
                ),
            ],
        ),
        field("throttle_time_ms", INT32, 1, default=0),
    ],
)
ZSTD_PRODUCE_VERSION = 7
"""The first Produce version that may carry zstd (KIP-110)."""

# -------------------------------------------------------------------------------------------- Fetch
# v3: a total size limit; v4 (0.11): isolation level, last stable offset, aborted transactions; v5:
# log start offsets; v7 (1.1, KIP-227): fetch sessions (we answer session id 0: no session, every
# fetch is full); v9 (KIP-320): leader epochs; v10 (2.1): zstd; v11 (KIP-392): rack, preferred
# replica; v12: flexible, the last fetched epoch (followers only).
FETCH = Declaration(
    ApiKey.FETCH,
    served=(0, 12),
    flexible=12,
    request=[
        field("replica_id", INT32, 0, 14, default=-1),
        field("max_wait_ms", INT32),
        field("min_bytes", INT32),
        field("max_bytes", INT32, 3, default=0x7FFFFFFF),
        field("isolation_level", INT8, 4, default=0),
        field("session_id", INT32, 7, default=0),
        field("session_epoch", INT32, 7, default=-1),
        field(
            "topics",
            [
                field("topic", STRING, 0, 12),
                field(
                    "partitions",
                    [
                        field("partition", INT32),
                        field("current_leader_epoch", INT32, 9, default=-1),
                        field("fetch_offset", INT64),
                        field("last_fetched_epoch", INT32, 12, default=-1),
                        field("log_start_offset", INT64, 5, default=-1),
                        field("max_bytes", INT32),
                    ],
                ),
            ],
        ),
        field(
            "forgotten_topics_data",
            [field("topic", STRING, 7, 12), field("partitions", Array(INT32), 7)],
            7,
            default=(),
        ),
        field("rack_id", STRING, 11, default=""),
    ],
    response=[
        field("throttle_time_ms", INT32, 1, default=0),
        field("error_code", INT16, 7, default=0),
        field("session_id", INT32, 7, default=0),
        field(
            "responses",
            [
                field("topic", STRING, 0, 12),
                field(
                    "partition_responses",
                    [
                        field("partition", INT32),
                        field("error_code", INT16),
                        field("high_watermark", INT64),
                        field("last_stable_offset", INT64, 4, default=-1),
                        field("log_start_offset", INT64, 5, default=-1),
                        field(
                            "aborted_transactions",
                            [field("producer_id", INT64, 4), field("first_offset", INT64, 4)],
                            4,
                            nullable=4,
                            default=None,
                        ),
                        field("preferred_read_replica", INT32, 11, default=-1),
                        field("record_set", RECORDS, nullable=0),
                    ],
                ),
            ],
        ),
    ],
)

# -------------------------------------------------------------------------------------- ListOffsets
# v0: the seeds' getOffsetsBefore (several offsets); v1: one offset by time; v2: isolation level;
# v4 (KIP-320): leader epochs; v6: flexible; v7 (KIP-734): -3 asks the offset of the largest timestamp.
LIST_OFFSETS = Declaration(
    ApiKey.LIST_OFFSETS,
    served=(0, 7),
    flexible=6,
    request=[
        field("replica_id", INT32, default=-1),
        field("isolation_level", INT8, 2, default=0),
        field(
            "topics",
            [
                field("topic", STRING),
                field(
                    "partitions",
                    [
                        field("partition", INT32),
                        field("current_leader_epoch", INT32, 4, default=-1),
                        field("timestamp", INT64),
                        field("max_num_offsets", INT32, 0, 0, default=1),
                    ],
                ),
            ],
        ),
    ],
    response=[
        field("throttle_time_ms", INT32, 2, default=0),
        field(
            "responses",
            [
                field("topic", STRING),
                field(
                    "partition_responses",
                    [
                        field("partition", INT32),
                        field("error_code", INT16),
                        field("offsets", Array(INT64), 0, 0, default=()),
                        field("timestamp", INT64, 1, default=-1),
                        field("offset", INT64, 1, default=-1),
                        field("leader_epoch", INT32, 4, default=-1),
                    ],
                ),
            ],
        ),
    ],
)
MAX_TIMESTAMP_LIST_OFFSETS_VERSION = 7
"""The first ListOffsets version that may ask for the offset of the largest timestamp (-3)."""

# ----------------------------------------------------------------------------------------- Metadata
# v1: racks, controller, internal topics, null for all topics; v2: cluster id; v3: throttle time;
# v4: may forbid auto-creation; v5: offline replicas; v7: leader epochs; v8: authorized operations;
# v9: flexible. Topics are structures of one name (v10 adds topic ids, not served).
METADATA = Declaration(
    ApiKey.METADATA,
    served=(0, 9),
    flexible=9,
    request=[
        field("topics", [field("name", STRING)], nullable=1),
        field("allow_auto_topic_creation", BOOLEAN, 4, default=True),
        field("include_cluster_authorized_operations", BOOLEAN, 8, 10, default=False),
        field("include_topic_authorized_operations", BOOLEAN, 8, default=False),
    ],
    response=[
        field("throttle_time_ms", INT32, 3, default=0),
        field(
            "brokers",
            [
                field("node_id", INT32),
                field("host", STRING),
                field("port", INT32),
                field("rack", STRING, 1, nullable=1, default=None),
            ],
        ),
        field("cluster_id", STRING, 2, nullable=2, default=None),
        field("controller_id", INT32, 1, default=-1),
        field(
            "topic_metadata",
            [
                field("error_code", INT16),
                field("topic", STRING),
                field("is_internal", BOOLEAN, 1, default=False),
                field(
                    "partition_metadata",
                    [
                        field("error_code", INT16),
                        field("partition", INT32),
                        field("leader", INT32),
                        field("leader_epoch", INT32, 7, default=-1),
                        field("replicas", Array(INT32)),
                        field("isr", Array(INT32)),
                        field("offline_replicas", Array(INT32), 5, default=()),
                    ],
                ),
                field("topic_authorized_operations", INT32, 8, default=_NO_OPERATIONS),
            ],
        ),
        field("cluster_authorized_operations", INT32, 8, 10, default=_NO_OPERATIONS),
    ],
)

# ------------------------------------------------------------------------- OffsetCommit/OffsetFetch
# OffsetCommit v1: generation and member (group membership), a timestamp per partition; v2-v4: a
# retention time; v3: throttle time; v6 (KIP-320): leader epochs; v7 (KIP-345): static members; v8:
# flexible.
OFFSET_COMMIT = Declaration(
    ApiKey.OFFSET_COMMIT,
    served=(0, 8),
    flexible=8,
    request=[
        field("group_id", STRING),
        field("generation_id", INT32, 1, default=-1),
        field("member_id", STRING, 1, default=""),
        field("group_instance_id", STRING, 7, nullable=7, default=None),
        field("retention_time_ms", INT64, 2, 4, default=-1),
        field(
            "topics",
            [
                field("topic", STRING),
                field(
                    "partitions",
                    [
                        field("partition", INT32),
                        field("offset", INT64),
                        field("committed_leader_epoch", INT32, 6, default=-1),
                        field("timestamp", INT64, 1, 1, default=-1),
                        field("metadata", STRING, nullable=0),
                    ],
                ),
            ],
        ),
    ],
    response=[
        field("throttle_time_ms", INT32, 3, default=0),
        field(
            "responses",
            [
                field("topic", STRING),
                field("partition_responses", [field("partition", INT32), field("error_code", INT16)]),
            ],
        ),
    ],
)

# OffsetFetch v2: null topics ask for all of the group's partitions, a top-level error; v3: throttle
# time; v5 (KIP-320): leader epochs; v6: flexible; v7 (KIP-447): require stable offsets; v8
# (KIP-709): several groups in one request.
_OFFSET_FETCH_PARTITIONS = [
    field("partition", INT32),
    field("offset", INT64),
    field("committed_leader_epoch", INT32, 5, default=-1),
    field("metadata", STRING, nullable=0),
    field("error_code", INT16),
]
_OFFSET_FETCH_REQUEST_TOPICS = [field("topic", STRING), field("partitions", Array(INT32))]
OFFSET_FETCH = Declaration(
    ApiKey.OFFSET_FETCH,
    served=(0, 8),
    flexible=6,
    request=[
        field("group_id", STRING, 0, 7),
        field("topics", _OFFSET_FETCH_REQUEST_TOPICS, 0, 7, nullable=2),
        field("groups", [field("group_id", STRING), field("topics", _OFFSET_FETCH_REQUEST_TOPICS, nullable=8)], 8),
        field("require_stable", BOOLEAN, 7, default=False),
    ],
    response=[
        field("throttle_time_ms", INT32, 3, default=0),
        field("responses", [field("topic", STRING), field("partition_responses", _OFFSET_FETCH_PARTITIONS)], 0, 7),
        field("error_code", INT16, 2, 7, default=0),
        field(
            "groups",
            [
                field("group_id", STRING),
                field("responses", [field("topic", STRING), field("partition_responses", _OFFSET_FETCH_PARTITIONS)]),
                field("error_code", INT16, default=0),
            ],
            8,
        ),
    ],
)

# ---------------------------------------------------------------------------------- FindCoordinator
# v1: a key type (0 group, 1 transaction), an error message; v3: flexible; v4 (KIP-699): several keys.
FIND_COORDINATOR = Declaration(
    ApiKey.FIND_COORDINATOR,
    served=(0, 4),
    flexible=3,
    request=[
        field("key", STRING, 0, 3),
        field("key_type", INT8, 1, default=0),
        field("coordinator_keys", Array(STRING), 4),
    ],
    response=[
        field("throttle_time_ms", INT32, 1, default=0),
        field("error_code", INT16, 0, 3, default=0),
        field("error_message", STRING, 1, 3, nullable=1, default=None),
        field("node_id", INT32, 0, 3, default=-1),
        field("host", STRING, 0, 3, default=""),
        field("port", INT32, 0, 3, default=-1),
        field(
            "coordinators",
            [
                field("key", STRING),
                field("node_id", INT32),
                field("host", STRING),
                field("port", INT32),
                field("error_code", INT16),
                field("error_message", STRING, nullable=4, default=None),
            ],
            4,
        ),
    ],
)

# ------------------------------------------------------------------------------------- ApiVersions
# v1: throttle time; v3 (KIP-511): flexible, the client's software name and version. Its responses
# always use response header v0 (kafkalog.protocol.frames).
API_VERSIONS = Declaration(
    ApiKey.API_VERSIONS,
    served=(0, 3),
    flexible=3,
    request=[
        field("client_software_name", STRING, 3, default="kafkalog"),
        field("client_software_version", STRING, 3, default="0"),
    ],
    response=[
        field("error_code", INT16),
        field("api_versions", [field("api_key", INT16), field("min_version", INT16), field("max_version", INT16)]),
        field("throttle_time_ms", INT32, 1, default=0),
    ],
)

# ------------------------------------------------------------------------------------- CreateTopics
# v1: validate only, error messages; v2: throttle time; v4 (KIP-464): -1 for the broker's default
# partitions or replication; v5: flexible, the created topic's partitions, replication and configs.
CREATE_TOPICS = Declaration(
    ApiKey.CREATE_TOPICS,
    served=(0, 6),
    flexible=5,
    request=[
        field(
            "create_topic_requests",
            [
                field("topic", STRING),
                field("num_partitions", INT32),
                field("replication_factor", INT16),
                field("replica_assignment", [field("partition", INT32), field("replicas", Array(INT32))]),
                field("config_entries", [field("config_name", STRING), field("config_value", STRING, nullable=0)]),
            ],
        ),
        field("timeout_ms", INT32, default=60_000),
        field("validate_only", BOOLEAN, 1, default=False),
    ],
    response=[
        field("throttle_time_ms", INT32, 2, default=0),
        field(
            "topic_errors",
            [
                field("topic", STRING),
                field("error_code", INT16),
                field("error_message", STRING, 1, nullable=1, default=None),
                field("num_partitions", INT32, 5, default=-1),
                field("replication_factor", INT16, 5, default=-1),
                field(
                    "configs",
                    [
                        field("name", STRING),
                        field("value", STRING, nullable=5),
                        field("read_only", BOOLEAN),
                        field("config_source", INT8, default=-1),
                        field("is_sensitive", BOOLEAN, default=False),
                    ],
                    5,
                    nullable=5,
                    default=None,
                ),
            ],
        ),
    ],
)

# ------------------------------------------------------------------------------ the group protocol
# The classic consumer-group protocol (KIP-848's ConsumerGroupHeartbeat is not served: see
# docs/broker.md). v1 JoinGroup: rebalance timeout; v4 (KIP-394): MEMBER_ID_REQUIRED on a first join;
# v5 (KIP-345): static members (group instance ids); v6/v4: flexible; v7 JoinGroup and v5 SyncGroup
# (KIP-559): protocol type and name; v8: a reason; v9 (KIP-814): skip assignment (always false here).
JOIN_GROUP = Declaration(
    ApiKey.JOIN_GROUP,
    served=(0, 9),
    flexible=6,
    request=[
        field("group_id", STRING),
        field("session_timeout_ms", INT32),
        field("rebalance_timeout_ms", INT32, 1, default=-1),
        field("member_id", STRING),
        field("group_instance_id", STRING, 5, nullable=5, default=None),
        field("protocol_type", STRING),
        field("protocols", [field("name", STRING), field("metadata", BYTES)]),
        field("reason", STRING, 8, nullable=8, default=None),
    ],
    response=[
        field("throttle_time_ms", INT32, 2, default=0),
        field("error_code", INT16),
        field("generation_id", INT32, default=-1),
        field("protocol_type", STRING, 7, nullable=7, default=None),
        field("protocol_name", STRING, nullable=7, default=""),
        field("leader", STRING, default=""),
        field("skip_assignment", BOOLEAN, 9, default=False),
        field("member_id", STRING, default=""),
        field(
            "members",
            [
                field("member_id", STRING),
                field("group_instance_id", STRING, 5, nullable=5, default=None),
                field("metadata", BYTES),
            ],
            default=(),
        ),
    ],
)

HEARTBEAT = Declaration(
    ApiKey.HEARTBEAT,
    served=(0, 4),
    flexible=4,
    request=[
        field("group_id", STRING),
        field("generation_id", INT32),
        field("member_id", STRING),
        field("group_instance_id", STRING, 3, nullable=3, default=None),
    ],
    response=[field("throttle_time_ms", INT32, 1, default=0), field("error_code", INT16)],
)

# v3 (KIP-345): several members at once, by member id or group instance id; v5: a reason.
LEAVE_GROUP = Declaration(
    ApiKey.LEAVE_GROUP,
    served=(0, 5),
    flexible=4,
    request=[
        field("group_id", STRING),
        field("member_id", STRING, 0, 2),
        field(
            "members",
            [
                field("member_id", STRING),
                field("group_instance_id", STRING, nullable=3, default=None),
                field("reason", STRING, 5, nullable=5, default=None),
            ],
            3,
        ),
    ],
    response=[
        field("throttle_time_ms", INT32, 1, default=0),
        field("error_code", INT16),
        field(
            "members",
            [
                field("member_id", STRING),
                field("group_instance_id", STRING, nullable=3),
                field("error_code", INT16),
            ],
            3,
            default=(),
        ),
    ],
)

SYNC_GROUP = Declaration(
    ApiKey.SYNC_GROUP,
    served=(0, 5),
    flexible=4,
    request=[
        field("group_id", STRING),
        field("generation_id", INT32),
        field("member_id", STRING),
        field("group_instance_id", STRING, 3, nullable=3, default=None),
        field("protocol_type", STRING, 5, nullable=5, default=None),
        field("protocol_name", STRING, 5, nullable=5, default=None),
        field("assignments", [field("member_id", STRING), field("assignment", BYTES)]),
    ],
    response=[
        field("throttle_time_ms", INT32, 1, default=0),
        field("error_code", INT16),
        field("protocol_type", STRING, 5, nullable=5, default=None),
        field("protocol_name", STRING, 5, nullable=5, default=None),
        field("assignment", BYTES, default=b""),
    ],
)

# v3: authorized operations (never computed: no ACLs); v4: group instance ids; v5: flexible; v6: an
# error message per group.
DESCRIBE_GROUPS = Declaration(
    ApiKey.DESCRIBE_GROUPS,
    served=(0, 6),
    flexible=5,
    request=[field("groups", Array(STRING)), field("include_authorized_operations", BOOLEAN, 3, default=False)],
    response=[
        field("throttle_time_ms", INT32, 1, default=0),
        field(
            "groups",
            [
                field("error_code", INT16),
                field("error_message", STRING, 6, nullable=6, default=None),
                field("group_id", STRING),
                field("group_state", STRING),
                field("protocol_type", STRING),
                field("protocol_data", STRING),
                field(
                    "members",
                    [
                        field("member_id", STRING),
                        field("group_instance_id", STRING, 4, nullable=4, default=None),
                        field("client_id", STRING),
                        field("client_host", STRING),
                        field("member_metadata", BYTES),
                        field("member_assignment", BYTES),
                    ],
                ),
                field("authorized_operations", INT32, 3, default=_NO_OPERATIONS),
            ],
        ),
    ],
)

# v3: flexible; v4 (KIP-518): a filter by state; v5 (KIP-848): a filter by type.
LIST_GROUPS = Declaration(
    ApiKey.LIST_GROUPS,
    served=(0, 5),
    flexible=3,
    request=[field("states_filter", Array(STRING), 4, default=()), field("types_filter", Array(STRING), 5, default=())],
    response=[
        field("throttle_time_ms", INT32, 1, default=0),
        field("error_code", INT16),
        field(
            "groups",
            [
                field("group_id", STRING),
                field("protocol_type", STRING),
                field("group_state", STRING, 4, default=""),
                field("group_type", STRING, 5, default="classic"),
            ],
        ),
    ],
)

# ----------------------------------------------------------------------------------- InitProducerId
# The idempotent producer's id and epoch (KIP-98). v1: no change; v2: flexible; v3 (KIP-360): the
# producer's current id and epoch, to bump the epoch; v4: no change (a new error code); v5 (KIP-890):
# no change for idempotent producers. A transactional id is served by the transaction coordinator
# (kafkalog.server.transactions): the id's producer id, its epoch bumped, fencing the previous one.
INIT_PRODUCER_ID = Declaration(
    ApiKey.INIT_PRODUCER_ID,
    served=(0, 5),
    flexible=2,
    request=[
        field("transactional_id", STRING, nullable=0, default=None),
        field("transaction_timeout_ms", INT32, default=60_000),
        field("producer_id", INT64, 3, default=-1),
        field("producer_epoch", INT16, 3, default=-1),
    ],
    response=[
        field("throttle_time_ms", INT32, default=0),
        field("error_code", INT16),
        field("producer_id", INT64, default=-1),
        field("producer_epoch", INT16, default=-1),
    ],
)

# ------------------------------------------------------------------------------------- transactions
# KIP-98's transactions as of transaction version 1 (TV1). A producer adds each partition to its
# transaction (AddPartitionsToTxn) before its first batch there, and the group whose offsets it
# commits (AddOffsetsToTxn, then TxnOffsetCommit to the group's coordinator); EndTxn commits or
# aborts, and the coordinator has the partitions' leaders write the markers (WriteTxnMarkers).
# Versions of KIP-890 part 2 (TV2: the epoch bumped at each transaction, partitions added implicitly
# by the produce) are not served: EndTxn 5, TxnOffsetCommit 5.

# AddPartitionsToTxn: v1 no change; v2 PRODUCER_FENCED; v3 flexible; v4 (KIP-890 part 1) the batched
# form the brokers use, several transactions in one request, each may only verify that its partitions
# are in the transaction (clients keep to v3 and below), and a top-level error; v5 TRANSACTION_ABORTABLE.
_ADD_PARTITIONS_TOPICS = [field("name", STRING), field("partitions", Array(INT32))]
_ADD_PARTITIONS_RESULTS = [
    field("name", STRING),
    field("results_by_partition", [field("partition_index", INT32), field("partition_error_code", INT16)]),
]
ADD_PARTITIONS_TO_TXN = Declaration(
    ApiKey.ADD_PARTITIONS_TO_TXN,
    served=(0, 5),
    flexible=3,
    request=[
        field(
            "transactions",
            [
                field("transactional_id", STRING),
                field("producer_id", INT64),
                field("producer_epoch", INT16),
                field("verify_only", BOOLEAN, default=False),
                field("topics", _ADD_PARTITIONS_TOPICS),
            ],
            4,
        ),
        field("v3_and_below_transactional_id", STRING, 0, 3),
        field("v3_and_below_producer_id", INT64, 0, 3),
        field("v3_and_below_producer_epoch", INT16, 0, 3),
        field("v3_and_below_topics", _ADD_PARTITIONS_TOPICS, 0, 3),
    ],
    response=[
        field("throttle_time_ms", INT32, default=0),
        field("error_code", INT16, 4, default=0),
        field(
            "results_by_transaction",
            [field("transactional_id", STRING), field("topic_results", _ADD_PARTITIONS_RESULTS)],
            4,
        ),
        field("results_by_topic_v3_and_below", _ADD_PARTITIONS_RESULTS, 0, 3),
    ],
)

# AddOffsetsToTxn: v1 no change; v2 PRODUCER_FENCED; v3 flexible; v4 TRANSACTION_ABORTABLE.
ADD_OFFSETS_TO_TXN = Declaration(
    ApiKey.ADD_OFFSETS_TO_TXN,
    served=(0, 4),
    flexible=3,
    request=[
        field("transactional_id", STRING),
        field("producer_id", INT64),
        field("producer_epoch", INT16),
        field("group_id", STRING),
    ],
    response=[field("throttle_time_ms", INT32, default=0), field("error_code", INT16)],
)

# EndTxn: v1 no change; v2 PRODUCER_FENCED; v3 flexible; v4 TRANSACTION_ABORTABLE. (v5, TV2, answers
# the bumped producer id and epoch: not served.)
END_TXN = Declaration(
    ApiKey.END_TXN,
    served=(0, 4),
    flexible=3,
    request=[
        field("transactional_id", STRING),
        field("producer_id", INT64),
        field("producer_epoch", INT16),
        field("committed", BOOLEAN),
    ],
    response=[field("throttle_time_ms", INT32, default=0), field("error_code", INT16)],
)

# WriteTxnMarkers (coordinator to partition leaders): v0 was removed in Kafka 4.0, v1 is flexible; v2
# (KIP-1228) the transaction version of each marker (0 or 1: TV1 here).
WRITE_TXN_MARKERS = Declaration(
    ApiKey.WRITE_TXN_MARKERS,
    served=(1, 2),
    flexible=1,
    request=[
        field(
            "markers",
            [
                field("producer_id", INT64),
                field("producer_epoch", INT16),
                field("transaction_result", BOOLEAN),
                field("topics", [field("name", STRING), field("partition_indexes", Array(INT32))]),
                field("coordinator_epoch", INT32),
                field("transaction_version", INT8, 2, default=0),
            ],
        ),
    ],
    response=[
        field(
            "markers",
            [
                field("producer_id", INT64),
                field(
                    "topics",
                    [
                        field("name", STRING),
                        field("partitions", [field("partition_index", INT32), field("error_code", INT16)]),
                    ],
                ),
            ],
        ),
    ],
)

# TxnOffsetCommit (to the group's coordinator): v1 no change; v2 leader epochs; v3 (KIP-447) flexible,
# the member's generation, id and instance id, checked like OffsetCommit's; v4 TRANSACTION_ABORTABLE.
# (v5, TV2, adds the group to the transaction implicitly: not served.)
TXN_OFFSET_COMMIT = Declaration(
    ApiKey.TXN_OFFSET_COMMIT,
    served=(0, 4),
    flexible=3,
    request=[
        field("transactional_id", STRING),
        field("group_id", STRING),
        field("producer_id", INT64),
        field("producer_epoch", INT16),
        field("generation_id", INT32, 3, default=-1),
        field("member_id", STRING, 3, default=""),
        field("group_instance_id", STRING, 3, nullable=3, default=None),
        field(
            "topics",
            [
                field("name", STRING),
                field(
                    "partitions",
                    [
                        field("partition_index", INT32),
                        field("committed_offset", INT64),
                        field("committed_leader_epoch", INT32, 2, default=-1),
                        field("committed_metadata", STRING, nullable=0, default=None),
                    ],
                ),
            ],
        ),
    ],
    response=[
        field("throttle_time_ms", INT32, default=0),
        field(
            "topics",
            [
                field("name", STRING),
                field("partitions", [field("partition_index", INT32), field("error_code", INT16)]),
            ],
        ),
    ],
)

# DescribeProducers (KIP-664, to a partition's leader): one version, flexible.
DESCRIBE_PRODUCERS = Declaration(
    ApiKey.DESCRIBE_PRODUCERS,
    served=(0, 0),
    flexible=0,
    request=[field("topics", [field("name", STRING), field("partition_indexes", Array(INT32))])],
    response=[
        field("throttle_time_ms", INT32, default=0),
        field(
            "topics",
            [
                field("name", STRING),
                field(
                    "partitions",
                    [
                        field("partition_index", INT32),
                        field("error_code", INT16),
                        field("error_message", STRING, nullable=0, default=None),
                        field(
                            "active_producers",
                            [
                                field("producer_id", INT64),
                                field("producer_epoch", INT32),
                                field("last_sequence", INT32, default=-1),
                                field("last_timestamp", INT64, default=-1),
                                field("coordinator_epoch", INT32),
                                field("current_txn_start_offset", INT64, default=-1),
                            ],
                            default=(),
                        ),
                    ],
                ),
            ],
        ),
    ],
)

# DescribeTransactions (KIP-664, to a transactional id's coordinator): one version, flexible. The
# defaults of an entry answered with an error are Kafka's (zeros and empty strings).
DESCRIBE_TRANSACTIONS = Declaration(
    ApiKey.DESCRIBE_TRANSACTIONS,
    served=(0, 0),
    flexible=0,
    request=[field("transactional_ids", Array(STRING))],
    response=[
        field("throttle_time_ms", INT32, default=0),
        field(
            "transaction_states",
            [
                field("error_code", INT16),
                field("transactional_id", STRING),
                field("transaction_state", STRING, default=""),
                field("transaction_timeout_ms", INT32, default=0),
                field("transaction_start_time_ms", INT64, default=0),
                field("producer_id", INT64, default=0),
                field("producer_epoch", INT16, default=0),
                field("topics", [field("topic", STRING), field("partitions", Array(INT32))], default=()),
            ],
        ),
    ],
)

# ListTransactions (KIP-664, to every broker): flexible; v1 (KIP-994) only those running longer than a
# duration; v2 (KIP-1152) only the transactional ids matching a regular expression.
LIST_TRANSACTIONS = Declaration(
    ApiKey.LIST_TRANSACTIONS,
    served=(0, 2),
    flexible=0,
    request=[
        field("state_filters", Array(STRING), default=()),
        field("producer_id_filters", Array(INT64), default=()),
        field("duration_filter", INT64, 1, default=-1),
        field("transactional_id_pattern", STRING, 2, nullable=2, default=None),
    ],
    response=[
        field("throttle_time_ms", INT32, default=0),
        field("error_code", INT16),
        field("unknown_state_filters", Array(STRING), default=()),
        field(
            "transaction_states",
            [field("transactional_id", STRING), field("producer_id", INT64), field("transaction_state", STRING)],
            default=(),
        ),
    ],
)

# ------------------------------------------------------------------------------------- admin APIs
# DeleteTopics: v1 throttle time; v4 flexible; v5 an error message; (v6's topic ids not served). Kafka
# 4.x accepts v1 and later only (KIP-896), and so do we.
DELETE_TOPICS = Declaration(
    ApiKey.DELETE_TOPICS,
    served=(1, 5),
    flexible=4,
    request=[field("topic_names", Array(STRING)), field("timeout_ms", INT32, default=30_000)],
    response=[
        field("throttle_time_ms", INT32, 1, default=0),
        field(
            "responses",
            [
                field("name", STRING),
                field("error_code", INT16),
                field("error_message", STRING, 5, nullable=5, default=None),
            ],
        ),
    ],
)

# DeleteRecords: v2 flexible.
DELETE_RECORDS = Declaration(
    ApiKey.DELETE_RECORDS,
    served=(0, 2),
    flexible=2,
    request=[
        field(
            "topics",
            [field("name", STRING), field("partitions", [field("partition_index", INT32), field("offset", INT64)])],
        ),
        field("timeout_ms", INT32, default=30_000),
    ],
    response=[
        field("throttle_time_ms", INT32, default=0),
        field(
            "topics",
            [
                field("name", STRING),
                field(
                    "partitions",
                    [field("partition_index", INT32), field("low_watermark", INT64), field("error_code", INT16)],
                ),
            ],
        ),
    ],
)

# DescribeConfigs: v1 synonyms and config sources; v3 types and documentation; v4 flexible. (v0,
# before KIP-226, is refused by Kafka 4.x and not served.)
DESCRIBE_CONFIGS = Declaration(
    ApiKey.DESCRIBE_CONFIGS,
    served=(1, 4),
    flexible=4,
    request=[
        field(
            "resources",
            [
                field("resource_type", INT8),
                field("resource_name", STRING),
                field("configuration_keys", Array(STRING), nullable=0, default=None),
            ],
        ),
        field("include_synonyms", BOOLEAN, 1, default=False),
        field("include_documentation", BOOLEAN, 3, default=False),
    ],
    response=[
        field("throttle_time_ms", INT32, default=0),
        field(
            "results",
            [
                field("error_code", INT16),
                field("error_message", STRING, nullable=0, default=None),
                field("resource_type", INT8),
                field("resource_name", STRING),
                field(
                    "configs",
                    [
                        field("name", STRING),
                        field("value", STRING, nullable=0),
                        field("read_only", BOOLEAN),
                        field("config_source", INT8, 1, default=-1),
                        field("is_sensitive", BOOLEAN, default=False),
                        field(
                            "synonyms",
                            [field("name", STRING), field("value", STRING, nullable=0), field("source", INT8)],
                            1,
                            default=(),
                        ),
                        field("config_type", INT8, 3, default=0),
                        field("documentation", STRING, 3, nullable=0, default=None),
                    ],
                ),
            ],
        ),
    ],
)

# CreatePartitions: v2 flexible; v3 no change.
CREATE_PARTITIONS = Declaration(
    ApiKey.CREATE_PARTITIONS,
    served=(0, 3),
    flexible=2,
    request=[
        field(
            "topics",
            [
                field("name", STRING),
                field("count", INT32),
                field("assignments", [field("broker_ids", Array(INT32))], nullable=0, default=None),
            ],
        ),
        field("timeout_ms", INT32, default=30_000),
        field("validate_only", BOOLEAN, default=False),
    ],
    response=[
        field("throttle_time_ms", INT32, default=0),
        field(
            "results",
            [
                field("name", STRING),
                field("error_code", INT16),
                field("error_message", STRING, nullable=0, default=None),
            ],
        ),
    ],
)

# DeleteGroups: v2 flexible.
DELETE_GROUPS = Declaration(
    ApiKey.DELETE_GROUPS,
    served=(0, 2),
    flexible=2,
    request=[field("groups_names", Array(STRING))],
    response=[
        field("throttle_time_ms", INT32, default=0),
        field("results", [field("group_id", STRING), field("error_code", INT16)]),
    ],
)

# IncrementalAlterConfigs (KIP-339): v1 flexible.
INCREMENTAL_ALTER_CONFIGS = Declaration(
    ApiKey.INCREMENTAL_ALTER_CONFIGS,
    served=(0, 1),
    flexible=1,
    request=[
        field(
            "resources",
            [
                field("resource_type", INT8),
                field("resource_name", STRING),
                field(
                    "configs",
                    [field("name", STRING), field("config_operation", INT8), field("value", STRING, nullable=0)],
                ),
            ],
        ),
        field("validate_only", BOOLEAN, default=False),
    ],
    response=[
        field("throttle_time_ms", INT32, default=0),
        field(
            "responses",
            [
                field("error_code", INT16),
                field("error_message", STRING, nullable=0, default=None),
                field("resource_type", INT8),
                field("resource_name", STRING),
            ],
        ),
    ],
)

# OffsetDelete (KIP-496): one version, never flexible.
OFFSET_DELETE = Declaration(
    ApiKey.OFFSET_DELETE,
    served=(0, 0),
    flexible=None,
    request=[
        field("group_id", STRING),
        field("topics", [field("name", STRING), field("partitions", [field("partition_index", INT32)])]),
    ],
    response=[
        field("error_code", INT16),
        field("throttle_time_ms", INT32, default=0),
        field(
            "topics",
            [field("name", STRING), field("partitions", [field("partition_index", INT32), field("error_code", INT16)])],
            default=(),
        ),
    ],
)

# DescribeCluster (KIP-700): always flexible; v1 an endpoint type; v2 fenced brokers (none here).
DESCRIBE_CLUSTER = Declaration(
    ApiKey.DESCRIBE_CLUSTER,
    served=(0, 2),
    flexible=0,
    request=[
        field("include_cluster_authorized_operations", BOOLEAN, default=False),
        field("endpoint_type", INT8, 1, default=1),
        field("include_fenced_brokers", BOOLEAN, 2, default=False),
    ],
    response=[
        field("throttle_time_ms", INT32, default=0),
        field("error_code", INT16),
        field("error_message", STRING, nullable=0, default=None),
        field("endpoint_type", INT8, 1, default=1),
        field("cluster_id", STRING),
        field("controller_id", INT32, default=-1),
        field(
            "brokers",
            [
                field("broker_id", INT32),
                field("host", STRING),
                field("port", INT32),
                field("rack", STRING, nullable=0, default=None),
                field("is_fenced", BOOLEAN, 2, default=False),
            ],
        ),
        field("cluster_authorized_operations", INT32, default=_NO_OPERATIONS),
    ],
)

# ------------------------------------------------------------------------------------------- SASL
# SaslHandshake: the client names its mechanism; the answer lists those enabled. After v0 the client
# sends the mechanism's bytes bare, each with a 4-byte size and no Kafka header (0.10.0's way);
# after v1 it sends them in SaslAuthenticate requests (KIP-152). v1 of SaslAuthenticate adds the
# session's lifetime (KIP-368: 0, no re-authentication asked for); v2 is flexible.
SASL_HANDSHAKE = Declaration(
    ApiKey.SASL_HANDSHAKE,
    served=(0, 1),
    flexible=None,
    request=[field("mechanism", STRING)],
    response=[field("error_code", INT16), field("mechanisms", Array(STRING), default=())],
)

SASL_AUTHENTICATE = Declaration(
    ApiKey.SASL_AUTHENTICATE,
    served=(0, 2),
    flexible=2,
    request=[field("auth_bytes", BYTES)],
    response=[
        field("error_code", INT16),
        field("error_message", STRING, nullable=0, default=None),
        field("auth_bytes", BYTES, default=b""),
        field("session_lifetime_ms", INT64, 1, default=0),
    ],
)

# ------------------------------------------------------------------------------------------- ACLs
# DescribeAcls, CreateAcls, DeleteAcls: v1 adds the pattern type (KIP-290: LITERAL, PREFIXED); v2 is
# flexible; v3 adds the USER resource type (KIP-554), which we do not store. Kafka 4.x accepts v1
# and later only (KIP-896), and so do we. The enums' codes are kafkalog.server.security.acls's.
_ACL_FILTER = [
    field("resource_type_filter", INT8),
    field("resource_name_filter", STRING, nullable=0, default=None),
    field("pattern_type_filter", INT8, default=3),
    field("principal_filter", STRING, nullable=0, default=None),
    field("host_filter", STRING, nullable=0, default=None),
    field("operation", INT8),
    field("permission_type", INT8),
]

DESCRIBE_ACLS = Declaration(
    ApiKey.DESCRIBE_ACLS,
    served=(1, 3),
    flexible=2,
    request=_ACL_FILTER,
    response=[
        field("throttle_time_ms", INT32, default=0),
        field("error_code", INT16),
        field("error_message", STRING, nullable=0, default=None),
        field(
            "resources",
            [
                field("resource_type", INT8),
                field("resource_name", STRING),
                field("pattern_type", INT8, default=3),
                field(
                    "acls",
                    [
                        field("principal", STRING),
                        field("host", STRING),
                        field("operation", INT8),
                        field("permission_type", INT8),
                    ],
                ),
            ],
            default=(),
        ),
    ],
)

CREATE_ACLS = Declaration(
    ApiKey.CREATE_ACLS,
    served=(1, 3),
    flexible=2,
    request=[
        field(
            "creations",
            [
                field("resource_type", INT8),
                field("resource_name", STRING),
                field("resource_pattern_type", INT8, default=3),
                field("principal", STRING),
                field("host", STRING),
                field("operation", INT8),
                field("permission_type", INT8),
            ],
        ),
    ],
    response=[
        field("throttle_time_ms", INT32, default=0),
        field("results", [field("error_code", INT16), field("error_message", STRING, nullable=0, default=None)]),
    ],
)

DELETE_ACLS = Declaration(
    ApiKey.DELETE_ACLS,
    served=(1, 3),
    flexible=2,
    request=[field("filters", _ACL_FILTER)],
    response=[
        field("throttle_time_ms", INT32, default=0),
        field(
            "filter_results",
            [
                field("error_code", INT16),
                field("error_message", STRING, nullable=0, default=None),
                field(
                    "matching_acls",
                    [
                        field("error_code", INT16, default=0),
                        field("error_message", STRING, nullable=0, default=None),
                        field("resource_type", INT8),
                        field("resource_name", STRING),
                        field("pattern_type", INT8, default=3),
                        field("principal", STRING),
                        field("host", STRING),
                        field("operation", INT8),
                        field("permission_type", INT8),
                    ],
                    default=(),
                ),
            ],
        ),
    ],
)

# ----------------------------------------------------------------------------------------- registry
DECLARATIONS: tuple[Declaration, ...] = (
    PRODUCE,
    FETCH,
    LIST_OFFSETS,
    METADATA,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    FIND_COORDINATOR,
    JOIN_GROUP,
    HEARTBEAT,
    LEAVE_GROUP,
    SYNC_GROUP,
    DESCRIBE_GROUPS,
    LIST_GROUPS,
    SASL_HANDSHAKE,
    API_VERSIONS,
    CREATE_TOPICS,
    DELETE_TOPICS,
    DELETE_RECORDS,
    INIT_PRODUCER_ID,
    ADD_PARTITIONS_TO_TXN,
    ADD_OFFSETS_TO_TXN,
    END_TXN,
    WRITE_TXN_MARKERS,
    TXN_OFFSET_COMMIT,
    DESCRIBE_ACLS,
    CREATE_ACLS,
    DELETE_ACLS,
    DESCRIBE_CONFIGS,
    SASL_AUTHENTICATE,
    CREATE_PARTITIONS,
    DELETE_GROUPS,
    INCREMENTAL_ALTER_CONFIGS,
    OFFSET_DELETE,
    DESCRIBE_CLUSTER,
    DESCRIBE_PRODUCERS,
    DESCRIBE_TRANSACTIONS,
    LIST_TRANSACTIONS,
)

REGISTRY: dict[tuple[int, int], Api] = {
    (declaration.key, version): declaration.api(version)
    for declaration in DECLARATIONS
    for version in range(declaration.served[0], declaration.served[1] + 1)
}
"""Every (api key, version) we serve."""

VERSION_RANGES: dict[ApiKey, tuple[int, int]] = {declaration.key: declaration.served for declaration in DECLARATIONS}
"""What ApiVersions advertises: the lowest and highest version of each API."""


def lookup(api_key: int, version: int) -> Api:
    """The Api for a request header; ProtocolError if we do not serve it."""
    api = REGISTRY.get((api_key, version))
    if api is None:
        if api_key in VERSION_RANGES:
            low, high = VERSION_RANGES[ApiKey(api_key)]
            raise ProtocolError(f"{ApiKey(api_key).name} version {version} is not supported (we serve {low}-{high})")
        raise ProtocolError(f"{api_name(api_key)} is not served")
    return api


_API_NAMES_IN_ORDER = (
    "Produce",
    "Fetch",
    "ListOffsets",
    "Metadata",
    "LeaderAndIsr",
    "StopReplica",
    "UpdateMetadata",
    "ControlledShutdown",
    "OffsetCommit",
    "OffsetFetch",
    "FindCoordinator",
    "JoinGroup",
    "Heartbeat",
    "LeaveGroup",
    "SyncGroup",
    "DescribeGroups",
    "ListGroups",
    "SaslHandshake",
    "ApiVersions",
    "CreateTopics",
    "DeleteTopics",
    "DeleteRecords",
    "InitProducerId",
    "OffsetForLeaderEpoch",
    "AddPartitionsToTxn",
    "AddOffsetsToTxn",
    "EndTxn",
    "WriteTxnMarkers",
    "TxnOffsetCommit",
    "DescribeAcls",
    "CreateAcls",
    "DeleteAcls",
    "DescribeConfigs",
    "AlterConfigs",
    "AlterReplicaLogDirs",
    "DescribeLogDirs",
    "SaslAuthenticate",
    "CreatePartitions",
    "CreateDelegationToken",
    "RenewDelegationToken",
    "ExpireDelegationToken",
    "DescribeDelegationToken",
    "DeleteGroups",
    "ElectLeaders",
    "IncrementalAlterConfigs",
    "AlterPartitionReassignments",
    "ListPartitionReassignments",
    "OffsetDelete",
    "DescribeClientQuotas",
    "AlterClientQuotas",
    "DescribeUserScramCredentials",
    "AlterUserScramCredentials",
    "Vote",
    "BeginQuorumEpoch",
    "EndQuorumEpoch",
    "DescribeQuorum",
    "AlterPartition",
    "UpdateFeatures",
    "Envelope",
    "FetchSnapshot",
    "DescribeCluster",
    "DescribeProducers",
    "BrokerRegistration",
    "BrokerHeartbeat",
    "UnregisterBroker",
    "DescribeTransactions",
    "ListTransactions",
    "AllocateProducerIds",
    "ConsumerGroupHeartbeat",
    "ConsumerGroupDescribe",
    "ControllerRegistration",
    "GetTelemetrySubscriptions",
    "PushTelemetry",
    "AssignReplicasToDirs",
    "ListClientMetricsResources",
    "DescribeTopicPartitions",
    "ShareGroupHeartbeat",
    "ShareGroupDescribe",
    "ShareFetch",
    "ShareAcknowledge",
)
API_NAMES: dict[int, str] = dict(enumerate(_API_NAMES_IN_ORDER))
"""Kafka's names of its API keys, for log lines about requests we do not serve."""


def api_name(api_key: int) -> str:
    """``Name (key)``, or ``API key N`` for a key Kafka did not have when this table was written."""
    name = API_NAMES.get(api_key)
    return f"{name} ({api_key})" if name else f"API key {api_key}"
