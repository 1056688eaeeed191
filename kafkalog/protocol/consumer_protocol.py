"""The consumer protocol: what consumers put inside JoinGroup's metadata and SyncGroup's assignment.

The broker carries these bytes without reading them (but for DescribeGroups, which passes them on);
the members of a group read each other's. Each is an int16 version, then the fields of that version
(Kafka's ConsumerProtocolSubscription and ConsumerProtocolAssignment definitions, never flexible):

    Subscription  v0: topics [string], user_data nullable bytes
                  v1: + owned_partitions [topic string, partitions [int32]]
                  v2: + generation_id int32
                  v3: + rack_id nullable string
    Assignment    v0: assigned_partitions [topic string, partitions [int32]], user_data nullable bytes

A reader takes the fields of the versions it knows and ignores what a newer writer added after them
(Kafka's own rule for these structures), so a member of a newer client can share a group with ours.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kafkalog.errors import ProtocolError
from kafkalog.protocol.declare import Field, field, schema_for
from kafkalog.protocol.types import BYTES, INT32, STRING, Array, Reader, Writer
from kafkalog.topics import TopicPartition

CONSUMER = "consumer"
"""The protocol type of consumer groups."""

_VERSION = struct.Struct(">h")
_TOPIC_PARTITIONS = [field("topic", STRING), field("partitions", Array(INT32))]

_SUBSCRIPTION = [
    field("topics", Array(STRING)),
    field("user_data", BYTES, nullable=0, default=None),
    field("owned_partitions", _TOPIC_PARTITIONS, 1, default=()),
    field("generation_id", INT32, 2, default=-1),
    field("rack_id", STRING, 3, nullable=3, default=None),
]
_ASSIGNMENT = [field("assigned_partitions", _TOPIC_PARTITIONS), field("user_data", BYTES, nullable=0, default=None)]
_SUBSCRIPTION_VERSIONS = 3
_ASSIGNMENT_VERSIONS = 3  # v1-v3 add no field to v0
_WRITTEN_SUBSCRIPTION_VERSION = 1
"""What we write: v1 carries the partitions a member owns, which cooperative assignors of other
members' clients read; v2's generation and v3's rack are for assignors we do not run."""


@dataclass(frozen=True, slots=True)
class Subscription:
    """One member's JoinGroup metadata."""

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation_id: int = -1
    rack_id: str | None = None


def _grouped(partitions: Sequence[TopicPartition]) -> list[dict[str, Any]]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        by_topic.setdefault(topic, []).append(partition)
    return [{"topic": topic, "partitions": numbers} for topic, numbers in by_topic.items()]


def _flattened(entries: list[dict[str, Any]] | None) -> tuple[TopicPartition, ...]:
    return tuple((entry["topic"], partition) for entry in entries or () for partition in entry["partitions"])


def _encode(fields: Sequence[Field], version: int, body: dict[str, Any]) -> bytes:
    out = Writer()
    out.write(_VERSION.pack(version))
    schema_for(fields, version, flexible=False).encode(body, out)
    return b"".join(bytes(chunk) for chunk in out.finish())  # type: ignore[arg-type]  # no regions here


def _decode(fields: Sequence[Field], known: int, data: bytes, what: str) -> dict[str, Any]:
    if len(data) < 2:
        raise ProtocolError(f"a consumer {what} of {len(data)} bytes has no version")
    version = _VERSION.unpack_from(data)[0]
    if version < 0:
        raise ProtocolError(f"a consumer {what} has version {version}")
    try:
        return schema_for(fields, min(version, known), flexible=False).decode(Reader(data, 2))
    except ProtocolError as exc:
        raise ProtocolError(f"a consumer {what} (v{version}) is malformed: {exc}") from exc


def encode_subscription(subscription: Subscription) -> bytes:
    return _encode(
        _SUBSCRIPTION,
        _WRITTEN_SUBSCRIPTION_VERSION,
        {
            "topics": list(subscription.topics),
            "user_data": subscription.user_data,
            "owned_partitions": _grouped(subscription.owned_partitions),
        },
    )


def decode_subscription(data: bytes) -> Subscription:
    """ProtocolError if ``data`` is not a subscription of any version."""
    body = _decode(_SUBSCRIPTION, _SUBSCRIPTION_VERSIONS, data, "subscription")
    return Subscription(
        tuple(body["topics"] or ()),
        body["user_data"],
        _flattened(body.get("owned_partitions")),
        body.get("generation_id", -1),
        body.get("rack_id"),
    )


def encode_assignment(partitions: Sequence[TopicPartition], user_data: bytes | None = None) -> bytes:
    return _encode(_ASSIGNMENT, 0, {"assigned_partitions": _grouped(partitions), "user_data": user_data})


def decode_assignment(data: bytes) -> tuple[TopicPartition, ...]:
    """The partitions of an assignment (empty bytes: none, as a coordinator sends a member the
    leader left out). ProtocolError if ``data`` is not an assignment."""
    if not data:
        return ()
    body = _decode(_ASSIGNMENT, _ASSIGNMENT_VERSIONS, data, "assignment")
    return _flattened(body["assigned_partitions"])


def assignments_by_member(owned: Mapping[str, Sequence[TopicPartition]]) -> list[dict[str, Any]]:
    """SyncGroup's assignments field from member id → partitions."""
    return [{"member_id": member, "assignment": encode_assignment(parts)} for member, parts in sorted(owned.items())]
