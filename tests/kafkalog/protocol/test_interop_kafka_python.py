"""Requests and responses cross between us and kafka-python, every (API, version) we serve, both ways.

kafka-python 3 carries two protocol layers, and both are checked:

* ``kafka.protocol.old``: its classic hand-written Struct classes (``ProduceRequest[2]`` ...);
* ``kafka.protocol.{producer,consumer,metadata,admin}``: classes generated from Apache Kafka's own
  JSON message definitions (the source of truth of the protocol), old versions included.

Requests: kafka-python encodes (body and request header, framed); our decode_request reads the same
values, and our encode_request gives the very same bytes. Responses: we encode, kafka-python decodes
the same values. Values are random, built from our schemas, and compared field by field in wire
order (names differ between the three codebases); our schemas are also checked against the JSON
definitions type by type, nullability included.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.protocol import admin, consumer, metadata, producer, sasl
from kafka.protocol.admin import transactions as admin_transactions
from kafka.protocol.old import add_offsets_to_txn as old_add_offsets_to_txn
from kafka.protocol.old import add_partitions_to_txn as old_add_partitions_to_txn
from kafka.protocol.old import admin as old_admin
from kafka.protocol.old import api_versions as old_api_versions
from kafka.protocol.old import commit as old_commit
from kafka.protocol.old import end_txn as old_end_txn
from kafka.protocol.old import fetch as old_fetch
from kafka.protocol.old import find_coordinator as old_find_coordinator
from kafka.protocol.old import group as old_group
from kafka.protocol.old import init_producer_id as old_init_producer_id
from kafka.protocol.old import list_offsets as old_list_offsets
from kafka.protocol.old import metadata as old_metadata
from kafka.protocol.old import produce as old_produce
from kafka.protocol.old import sasl_authenticate as old_sasl_authenticate
from kafka.protocol.old import sasl_handshake as old_sasl_handshake
from kafka.protocol.old import txn_offset_commit as old_txn_offset_commit
from kafka.protocol.old.types import Array as OldArray
from kafka.protocol.old.types import BitField as OldBitField
from kafka.protocol.old.types import Schema as OldSchema

from kafkalog.protocol import (
    REGISTRY,
    Api,
    ApiKey,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from kafkalog.protocol.types import (
    BOOLEAN,
    BYTES,
    COMPACT_BYTES,
    COMPACT_NULLABLE_BYTES,
    COMPACT_NULLABLE_STRING,
    COMPACT_RECORDS,
    COMPACT_STRING,
    INT8,
    INT16,
    INT32,
    INT64,
    NULLABLE_STRING,
    RECORDS,
    STRING,
    UUID,
    Array,
    FlexibleSchema,
    Schema,
    Type,
)

from .schemas import ALL_APIS, API_IDS, expected, flatten, fuzz, headers, normalized, positional, values

OLD: dict[ApiKey, tuple[Any, Any]] = {
    ApiKey.PRODUCE: (old_produce.ProduceRequest, old_produce.ProduceResponse),
    ApiKey.FETCH: (old_fetch.FetchRequest, old_fetch.FetchResponse),
    ApiKey.LIST_OFFSETS: (old_list_offsets.ListOffsetsRequest, old_list_offsets.ListOffsetsResponse),
    ApiKey.METADATA: (old_metadata.MetadataRequest, old_metadata.MetadataResponse),
    ApiKey.OFFSET_COMMIT: (old_commit.OffsetCommitRequest, old_commit.OffsetCommitResponse),
    ApiKey.OFFSET_FETCH: (old_commit.OffsetFetchRequest, old_commit.OffsetFetchResponse),
    ApiKey.FIND_COORDINATOR: (
        old_find_coordinator.FindCoordinatorRequest,
        old_find_coordinator.FindCoordinatorResponse,
    ),
    ApiKey.JOIN_GROUP: (old_group.JoinGroupRequest, old_group.JoinGroupResponse),
    ApiKey.HEARTBEAT: (old_group.HeartbeatRequest, old_group.HeartbeatResponse),
    ApiKey.LEAVE_GROUP: (old_group.LeaveGroupRequest, old_group.LeaveGroupResponse),
    ApiKey.SYNC_GROUP: (old_group.SyncGroupRequest, old_group.SyncGroupResponse),
    ApiKey.DESCRIBE_GROUPS: (old_admin.DescribeGroupsRequest, old_admin.DescribeGroupsResponse),
    ApiKey.LIST_GROUPS: (old_admin.ListGroupsRequest, old_admin.ListGroupsResponse),
    ApiKey.API_VERSIONS: (old_api_versions.ApiVersionsRequest, old_api_versions.ApiVersionsResponse),
    ApiKey.CREATE_TOPICS: (old_admin.CreateTopicsRequest, old_admin.CreateTopicsResponse),
    ApiKey.INIT_PRODUCER_ID: (
        old_init_producer_id.InitProducerIdRequest,
        old_init_producer_id.InitProducerIdResponse,
    ),
    ApiKey.ADD_PARTITIONS_TO_TXN: (
        old_add_partitions_to_txn.AddPartitionsToTxnRequest,
        old_add_partitions_to_txn.AddPartitionsToTxnResponse,
    ),
    ApiKey.ADD_OFFSETS_TO_TXN: (
        old_add_offsets_to_txn.AddOffsetsToTxnRequest,
        old_add_offsets_to_txn.AddOffsetsToTxnResponse,
    ),
    ApiKey.END_TXN: (old_end_txn.EndTxnRequest, old_end_txn.EndTxnResponse),
    ApiKey.TXN_OFFSET_COMMIT: (
        old_txn_offset_commit.TxnOffsetCommitRequest,
        old_txn_offset_commit.TxnOffsetCommitResponse,
    ),
    ApiKey.DELETE_TOPICS: (old_admin.DeleteTopicsRequest, old_admin.DeleteTopicsResponse),
    ApiKey.DELETE_RECORDS: (old_admin.DeleteRecordsRequest, old_admin.DeleteRecordsResponse),
    ApiKey.DESCRIBE_CONFIGS: (old_admin.DescribeConfigsRequest, old_admin.DescribeConfigsResponse),
    ApiKey.DELETE_GROUPS: (old_admin.DeleteGroupsRequest, old_admin.DeleteGroupsResponse),
    ApiKey.SASL_HANDSHAKE: (old_sasl_handshake.SaslHandshakeRequest, old_sasl_handshake.SaslHandshakeResponse),
    ApiKey.DESCRIBE_ACLS: (old_admin.DescribeAclsRequest, old_admin.DescribeAclsResponse),
    ApiKey.CREATE_ACLS: (old_admin.CreateAclsRequest, old_admin.CreateAclsResponse),
    ApiKey.DELETE_ACLS: (old_admin.DeleteAclsRequest, old_admin.DeleteAclsResponse),
    ApiKey.SASL_AUTHENTICATE: (
        old_sasl_authenticate.SaslAuthenticateRequest,
        old_sasl_authenticate.SaslAuthenticateResponse,
    ),
    # kafka-python has no hand-written classes of these (its CreatePartitionsRequest nests count and
    # assignments in a structure: "not compatible with new protocol", its own comment says)
    ApiKey.CREATE_PARTITIONS: ((), ()),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: ((), ()),
    ApiKey.OFFSET_DELETE: ((), ()),
    ApiKey.DESCRIBE_CLUSTER: ((), ()),
    ApiKey.WRITE_TXN_MARKERS: ((), ()),
    ApiKey.DESCRIBE_PRODUCERS: ((), ()),
    ApiKey.DESCRIBE_TRANSACTIONS: ((), ()),
    ApiKey.LIST_TRANSACTIONS: ((), ()),
}
OLD_MISLABELLED = {"ListGroupsRequest_v2", "DescribeAclsRequest_v2", "DescribeAclsResponse_v2"}
"""kafka-python's hand-written classes that are not what their name says: its ListGroupsRequest_v2
says version 1; its DescribeAcls v2 classes ("Enable flexible version", their docstring) reuse v1's
non-flexible schema. Its JSON layer has them right, and is checked instead."""
NEW: dict[ApiKey, tuple[Any, Any]] = {
    ApiKey.PRODUCE: (producer.ProduceRequest, producer.ProduceResponse),
    ApiKey.FETCH: (consumer.FetchRequest, consumer.FetchResponse),
    ApiKey.LIST_OFFSETS: (consumer.ListOffsetsRequest, consumer.ListOffsetsResponse),
    ApiKey.METADATA: (metadata.MetadataRequest, metadata.MetadataResponse),
    ApiKey.OFFSET_COMMIT: (consumer.OffsetCommitRequest, consumer.OffsetCommitResponse),
    ApiKey.OFFSET_FETCH: (consumer.OffsetFetchRequest, consumer.OffsetFetchResponse),
    ApiKey.FIND_COORDINATOR: (metadata.FindCoordinatorRequest, metadata.FindCoordinatorResponse),
    ApiKey.JOIN_GROUP: (consumer.JoinGroupRequest, consumer.JoinGroupResponse),
    ApiKey.HEARTBEAT: (consumer.HeartbeatRequest, consumer.HeartbeatResponse),
    ApiKey.LEAVE_GROUP: (consumer.LeaveGroupRequest, consumer.LeaveGroupResponse),
    ApiKey.SYNC_GROUP: (consumer.SyncGroupRequest, consumer.SyncGroupResponse),
    ApiKey.DESCRIBE_GROUPS: (admin.DescribeGroupsRequest, admin.DescribeGroupsResponse),
    ApiKey.LIST_GROUPS: (admin.ListGroupsRequest, admin.ListGroupsResponse),
    ApiKey.API_VERSIONS: (metadata.ApiVersionsRequest, metadata.ApiVersionsResponse),
    ApiKey.CREATE_TOPICS: (admin.CreateTopicsRequest, admin.CreateTopicsResponse),
    ApiKey.INIT_PRODUCER_ID: (producer.InitProducerIdRequest, producer.InitProducerIdResponse),
    ApiKey.ADD_PARTITIONS_TO_TXN: (producer.AddPartitionsToTxnRequest, producer.AddPartitionsToTxnResponse),
    ApiKey.ADD_OFFSETS_TO_TXN: (producer.AddOffsetsToTxnRequest, producer.AddOffsetsToTxnResponse),
    ApiKey.END_TXN: (producer.EndTxnRequest, producer.EndTxnResponse),
    ApiKey.WRITE_TXN_MARKERS: (producer.WriteTxnMarkersRequest, producer.WriteTxnMarkersResponse),
    ApiKey.TXN_OFFSET_COMMIT: (producer.TxnOffsetCommitRequest, producer.TxnOffsetCommitResponse),
    ApiKey.DESCRIBE_PRODUCERS: (
        admin_transactions.DescribeProducersRequest,
        admin_transactions.DescribeProducersResponse,
    ),
    ApiKey.DESCRIBE_TRANSACTIONS: (
        admin_transactions.DescribeTransactionsRequest,
        admin_transactions.DescribeTransactionsResponse,
    ),
    ApiKey.LIST_TRANSACTIONS: (
        admin_transactions.ListTransactionsRequest,
        admin_transactions.ListTransactionsResponse,
    ),
    ApiKey.DELETE_TOPICS: (admin.DeleteTopicsRequest, admin.DeleteTopicsResponse),
    ApiKey.DELETE_RECORDS: (admin.DeleteRecordsRequest, admin.DeleteRecordsResponse),
    ApiKey.DESCRIBE_CONFIGS: (admin.DescribeConfigsRequest, admin.DescribeConfigsResponse),
    ApiKey.CREATE_PARTITIONS: (admin.CreatePartitionsRequest, admin.CreatePartitionsResponse),
    ApiKey.DELETE_GROUPS: (admin.DeleteGroupsRequest, admin.DeleteGroupsResponse),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (admin.IncrementalAlterConfigsRequest, admin.IncrementalAlterConfigsResponse),
    ApiKey.OFFSET_DELETE: (consumer.OffsetDeleteRequest, consumer.OffsetDeleteResponse),
    ApiKey.DESCRIBE_CLUSTER: (admin.DescribeClusterRequest, admin.DescribeClusterResponse),
    ApiKey.SASL_HANDSHAKE: (sasl.SaslHandshakeRequest, sasl.SaslHandshakeResponse),
    ApiKey.SASL_AUTHENTICATE: (sasl.SaslAuthenticateRequest, sasl.SaslAuthenticateResponse),
    ApiKey.DESCRIBE_ACLS: (admin.DescribeAclsRequest, admin.DescribeAclsResponse),
    ApiKey.CREATE_ACLS: (admin.CreateAclsRequest, admin.CreateAclsResponse),
    ApiKey.DELETE_ACLS: (admin.DeleteAclsRequest, admin.DeleteAclsResponse),
}
JSON_TYPES = {
    id(INT8): "int8",
    id(INT16): "int16",
    id(INT32): "int32",
    id(INT64): "int64",
    id(BOOLEAN): "bool",
    id(STRING): "string",
    id(NULLABLE_STRING): "string",
    id(BYTES): "bytes",
    id(RECORDS): "records",
    id(COMPACT_STRING): "string",
    id(COMPACT_NULLABLE_STRING): "string",
    id(COMPACT_BYTES): "bytes",
    id(COMPACT_NULLABLE_BYTES): "bytes",
    id(COMPACT_RECORDS): "records",
    id(UUID): "uuid",
}
NULLABLE = {id(NULLABLE_STRING), id(COMPACT_NULLABLE_STRING), id(COMPACT_NULLABLE_BYTES)}
STRINGS = {id(STRING), id(NULLABLE_STRING), id(COMPACT_STRING), id(COMPACT_NULLABLE_STRING)}


def test_every_api_we_serve_is_known_to_kafka_python() -> None:
    assert set(OLD) == set(NEW) == {key for key, _ in REGISTRY}
    for key, version in REGISTRY:
        old_request, old_response = OLD[key]
        # kafka-python's hand-written classes stop at some version of each API; its JSON layer has all
        for cls in (old_request[version], old_response[version]) if version < len(old_request) else ():
            assert key == cls.API_KEY
            assert version == cls.API_VERSION or cls.__name__ in OLD_MISLABELLED
        new_request, new_response = NEW[key]
        assert new_request.API_KEY == new_response.API_KEY == key
        api = REGISTRY[(key, version)]
        # flexible exactly where Kafka's definition says so, and then compact all the way down
        assert api.flexible == new_request.flexible_version_q(version) == new_response.flexible_version_q(version)
        assert isinstance(api.response, FlexibleSchema) == api.flexible


# ------------------------------------------------------------------- the JSON message definitions


def _compare_with_json(kind: Type, field: Any, version: int, where: str) -> None:
    """Our ``kind`` against the JSON ``field`` (a request/response, struct, array or simple field)."""
    if isinstance(kind, Schema):
        if isinstance(kind, FlexibleSchema):
            theirs_tagged = field.tagged_fields(version)._tags
            for tagged in kind.tagged:  # ours are a subset of theirs: tags we do not use are left out
                assert tagged.tag in theirs_tagged, f"{where}: tag {tagged.tag} ({tagged.name}) is not Kafka's"
                _compare_with_json(tagged.type, theirs_tagged[tagged.tag], version, f"{where}.{tagged.name}")
        theirs = field.untagged_fields(version)
        assert len(theirs) == len(kind.fields), f"{where}: {[n for n, _ in kind.fields]} vs {[f.name for f in theirs]}"
        for (name, sub), their_field in zip(kind.fields, theirs, strict=True):
            _compare_with_json(sub, their_field, version, f"{where}.{name}")
        return
    if isinstance(kind, Array):
        assert field.is_array(), f"{where}: an array of ours, a {field.type_str} in Kafka's definition"
        assert kind.nullable == field.nullable_for_version_q(version), f"{where}: nullability of the array"
        if field.is_struct_array() and not isinstance(kind.element, Schema):
            # Kafka wraps a lone value in a struct (MetadataRequest topics are structs of one name)
            (only,) = field.untagged_fields(version)
            _compare_with_json(kind.element, only, version, f"{where}[]")
        elif field.is_struct_array():
            _compare_with_json(kind.element, field, version, f"{where}[]")
        else:
            assert JSON_TYPES[id(kind.element)] == field.array_of.type_str, f"{where}[]: element type"
        return
    assert not field.is_array(), f"{where}: a {kind.name} of ours, an array in Kafka's definition"
    # kafka-python names Kafka's int32 bit sets of authorized operations "bitfield"
    assert JSON_TYPES[id(kind)] == field.type_str.replace("bitfield", "int32"), f"{where}: type"
    if id(kind) in STRINGS:
        assert (id(kind) in NULLABLE) == field.nullable_for_version_q(version), f"{where}: nullability"
    if kind in (RECORDS, COMPACT_RECORDS):
        assert field.nullable_for_version_q(version), f"{where}: null records"


@pytest.mark.parametrize("api", ALL_APIS, ids=API_IDS)
def test_schemas_match_kafka_json_definitions(api: Api) -> None:
    request, response = NEW[api.key]
    _compare_with_json(api.request, request._struct, api.version, f"{request.name} v{api.version}")
    _compare_with_json(api.response, response._struct, api.version, f"{response.name} v{api.version}")


# ----------------------------------------------------------------- values into and out of kafka-python


def _build_new(cls: Any, struct: Any, tree: tuple[Any, ...], version: int) -> Any:
    """A kafka-python JSON-layer object from a positional tree (walking Kafka's definition)."""
    fields = struct.untagged_fields(version)
    assert len(fields) == len(tree)
    values_by_name = {}
    for field, value in zip(fields, tree, strict=True):
        if field.is_struct_array() and value is not None:
            values_by_name[field.name] = [
                _build_new(field.data_class, field, item if isinstance(item, tuple) else (item,), version)
                for item in value
            ]
        elif field.is_struct():
            values_by_name[field.name] = _build_new(field.data_class, field, value, version)
        else:
            values_by_name[field.name] = value
    return cls(version=version, **values_by_name)


def _new_tree(struct: Any, obj: Any, version: int) -> tuple[Any, ...]:
    out = []
    for field in struct.untagged_fields(version):
        value = getattr(obj, field.name)
        if field.is_struct_array() and value is not None:
            value = [_new_tree(field, item, version) for item in value]
        elif field.is_struct():
            value = _new_tree(field, value, version)
        elif field.type_str == "bitfield":
            value = _bits_as_int32(value)
        out.append(value)
    return tuple(out)


def _bits_as_int32(bits: set[int] | None) -> int:
    """kafka-python decodes a bit set (authorized operations) as the set of its bits, None for only
    bit 31 (Kafka's INT32_MIN, "not asked"): back to the int32 on the wire."""
    word = sum(1 << bit for bit in ({31} if bits is None else bits))
    return word - (1 << 32) if word >= 1 << 31 else word


def _old_tree(value: Any) -> Any:
    """A hand-written kafka-python Struct as a positional tree, walked with its schema (to turn bit
    sets back into ints and leave out the tagged-field section that the positional trees omit)."""
    return _old_walk(value.SCHEMA, tuple(getattr(value, name) for name in value.SCHEMA.names))


def _old_walk(kind: Any, value: Any) -> Any:
    if isinstance(kind, OldSchema):
        return tuple(
            # (an element of a flexible array may come without its "tags", the last field: zip stops there)
            _old_walk(sub, item)
            for name, sub, item in zip(kind.names, kind.fields, value, strict=False)
            if name != "tags"
        )
    if isinstance(kind, OldArray):
        return None if value is None else [_old_walk(kind.array_of, item) for item in value]
    if kind is OldBitField:
        return _bits_as_int32(value)
    return value


def _check_our_decoding(api: Api, frame: bytes, correlation_id: int, client_id: str | None, body: Any) -> None:
    assert frame == encode_request(api, correlation_id, client_id, body)  # byte for byte
    header, got_api, got_body = decode_request(frame[4:])
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        api.key,
        api.version,
        correlation_id,
        client_id,
    )
    assert got_api is api
    assert normalized(api.request, got_body) == expected(api.request, body)


def _old_request_shape(api: Api, tree: tuple[Any, ...]) -> tuple[Any, ...]:
    """kafka-python's hand-written MetadataRequest takes topic names where Kafka's definition (and
    ours) has structures of one name: the same bytes on the wire."""
    if api.key != ApiKey.METADATA or tree[0] is None:
        return tree
    return ([name for (name,) in tree[0]], *tree[1:])


@pytest.mark.parametrize("api", ALL_APIS, ids=API_IDS)
@given(data=st.data(), header=headers())
@fuzz(12)
def test_requests_from_kafka_python(api: Api, data: st.DataObject, header: tuple[int, str | None]) -> None:
    body = data.draw(values(api.request), label="body")
    correlation_id, client_id = header
    tree = positional(api.request, body)

    old_classes = OLD[api.key][0]
    # kafka-python's hand-written classes, where they go that far and say the right version
    if api.version < len(old_classes) and old_classes[api.version].__name__ not in OLD_MISLABELLED:
        old = OLD[api.key][0][api.version](*_old_request_shape(api, tree))
        old.with_header(correlation_id=correlation_id, client_id=client_id)
        _check_our_decoding(api, old.encode(header=True, framed=True), correlation_id, client_id, body)

    cls = NEW[api.key][0]
    new = _build_new(cls, cls._struct, tree, api.version)
    new.with_header(correlation_id=correlation_id, client_id=client_id)
    _check_our_decoding(api, new.encode(header=True, framed=True), correlation_id, client_id, body)


@pytest.mark.parametrize("api", ALL_APIS, ids=API_IDS)
@given(data=st.data(), header=headers())
@fuzz(12)
def test_responses_to_kafka_python(api: Api, data: st.DataObject, header: tuple[int, str | None]) -> None:
    body = data.draw(values(api.response), label="body")
    if api.key == ApiKey.API_VERSIONS and api.flexible:
        body["error_code"] = 0  # an error is always answered in v0 (frames.unsupported_api_versions_response)
    correlation_id = header[0]
    chunks, _ = encode_response(api, correlation_id, body)
    frame = b"".join(bytes(chunk) for chunk in chunks)
    wanted = flatten(positional(api.response, body))
    if api.key == ApiKey.API_VERSIONS and body["error_code"] != 0:
        # kafka-python (both layers) reads any ApiVersions response with an error as v0 (a broker
        # answers an unsupported version with a v0 body), so a v1 error response loses its throttle time
        wanted = flatten(positional(REGISTRY[(ApiKey.API_VERSIONS, 0)].response, body))
        version = 0
    else:
        version = api.version

    old_classes = OLD[api.key][1]
    if api.version < len(old_classes) and old_classes[api.version].__name__ not in OLD_MISLABELLED:
        old = old_classes[api.version].decode(frame[4:], header=True)
        assert old.header.correlation_id == correlation_id
        assert flatten(_old_tree(old)) == wanted

    cls = NEW[api.key][1]
    new = cls.decode(frame[4:], version=api.version, header=True)
    assert new.header.correlation_id == correlation_id
    assert flatten(_new_tree(cls._struct, new, version)) == wanted


# ------------------------------------------------------------------ a few by name, for the reader


def test_produce_v2_response_by_name() -> None:
    api = REGISTRY[(ApiKey.PRODUCE, 2)]
    body = {
        "responses": [
            {
                "topic": "events",
                "partition_responses": [
                    {"partition": 3, "error_code": 0, "base_offset": 1234, "log_append_time": 1_700_000_000_000}
                ],
            }
        ],
        "throttle_time_ms": 17,
    }
    chunks, _ = encode_response(api, 99, body)
    frame = b"".join(bytes(chunk) for chunk in chunks)
    decoded = old_produce.ProduceResponse[2].decode(frame[4:], header=True)
    assert decoded.header.correlation_id == 99
    assert decoded.throttle_time_ms == 17
    [(topic, [(partition, error_code, base_offset, log_append_time)])] = decoded.topics
    assert (topic, partition, error_code, base_offset, log_append_time) == ("events", 3, 0, 1234, 1_700_000_000_000)

    new = producer.ProduceResponse.decode(frame[4:], version=2, header=True)
    [topic_response] = new.responses
    [partition_response] = topic_response.partition_responses
    assert topic_response.name == "events"
    assert (partition_response.index, partition_response.base_offset) == (3, 1234)
    assert partition_response.log_append_time_ms == 1_700_000_000_000


def test_fetch_v3_request_and_response_by_name() -> None:
    request = old_fetch.FetchRequest[3](
        replica_id=-1, max_wait_time=100, min_bytes=1, max_bytes=1 << 20, topics=[("t", [(0, 42, 4096)])]
    )
    request.with_header(correlation_id=5, client_id="kafka-python")
    header, api, body = decode_request(request.encode(header=True, framed=True)[4:])
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (1, 3, 5, "kafka-python")
    assert body == {
        "replica_id": -1,
        "max_wait_ms": 100,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "topics": [{"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 42, "max_bytes": 4096}]}],
    }

    records = b"\x00" * 8 + b"\x00\x00\x00\x05" + b"hello"  # opaque to the protocol layer
    response = {
        "throttle_time_ms": 0,
        "responses": [
            {
                "topic": "t",
                "partition_responses": [
                    {"partition": 0, "error_code": 0, "high_watermark": 43, "record_set": records},
                    {"partition": 1, "error_code": 1, "high_watermark": -1, "record_set": None},
                ],
            }
        ],
    }
    chunks, _ = encode_response(api, 5, response)
    frame = b"".join(bytes(chunk) for chunk in chunks)
    decoded = old_fetch.FetchResponse[3].decode(frame[4:], header=True)
    [(topic, partitions)] = decoded.topics
    assert topic == "t"
    assert partitions == [(0, 0, 43, records), (1, 1, -1, None)]
    assert decode_response(api, frame[4:])[1]["responses"][0]["partition_responses"][0]["record_set"] == records


def test_metadata_v1_all_topics_and_v2_response_by_name() -> None:
    request = old_metadata.MetadataRequest[1](topics=None)
    request.with_header(correlation_id=1, client_id=None)
    _, _, body = decode_request(request.encode(header=True, framed=True)[4:])
    assert body == {"topics": None}

    api = REGISTRY[(ApiKey.METADATA, 2)]
    response = {
        "brokers": [{"node_id": 1, "host": "broker-1", "port": 9092, "rack": "r1"}],
        "cluster_id": "kafkalog",
        "controller_id": 1,
        "topic_metadata": [
            {
                "error_code": 0,
                "topic": "events",
                "is_internal": False,
                "partition_metadata": [{"error_code": 0, "partition": 0, "leader": 1, "replicas": [1], "isr": [1]}],
            }
        ],
    }
    chunks, _ = encode_response(api, 1, response)
    frame = b"".join(bytes(chunk) for chunk in chunks)
    decoded = metadata.MetadataResponse.decode(frame[4:], version=2, header=True)
    assert decoded.cluster_id == "kafkalog"
    assert decoded.controller_id == 1
    [broker] = decoded.brokers
    assert (broker.node_id, broker.host, broker.port, broker.rack) == (1, "broker-1", 9092, "r1")
    [topic] = decoded.topics
    assert (topic.name, topic.is_internal) == ("events", False)
    [partition] = topic.partitions
    assert (partition.partition_index, partition.leader_id, partition.replica_nodes, partition.isr_nodes) == (
        0,
        1,
        [1],
        [1],
    )
