"""The admin APIs: describing the cluster, describing and altering topic configs, adding partitions,
deleting topics, deleting groups and their offsets.

Role: what Kafka's admin clients and tools (kafka-topics, kafka-configs, kafka-consumer-groups,
confluent-kafka's and kafka-python's AdminClient) ask, answered over the cluster view (which makes
topic changes durable: the broker's own files, or ZooKeeper), the offset store and the group
coordinator. Every refusal is an error code with a message naming the cause; nothing here raises for
a client's mistake.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from kafkalog.errors import KafkalogError, LogConfigError
from kafkalog.log import LogManager
from kafkalog.protocol import Api, ErrorCode, RequestHeader
from kafkalog.protocol.types import Struct
from kafkalog.server.caller import Caller
from kafkalog.server.cluster.offsets import GroupOffsetStore
from kafkalog.server.cluster.topic_config import TOPIC_CONFIGS, kafka_value, topic_log_config
from kafkalog.server.cluster.view import ClusterView
from kafkalog.server.config import BrokerConfig
from kafkalog.server.groups import GroupCoordinator
from kafkalog.server.security.access import Access
from kafkalog.server.security.acl_store import AclStore
from kafkalog.server.security.acls import (
    AclBinding,
    AclError,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)

logger = logging.getLogger(__name__)

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
_SET, _DELETE, _APPEND, _SUBTRACT = 0, 1, 2, 3
_DYNAMIC_TOPIC_CONFIG, _STATIC_BROKER_CONFIG, _DEFAULT_CONFIG = 1, 4, 5
_CONFIG_TYPES = {
    "message.format.version": 2,  # STRING
    "message.timestamp.type": 2,
    "compression.type": 2,
    "cleanup.policy": 7,  # LIST
    "min.cleanable.dirty.ratio": 6,  # DOUBLE
}
"""Each config's ConfigType in DescribeConfigs v3+ where it is not LONG (5)."""
_READ_ONLY_TOPIC_CONFIGS = {"min.insync.replicas": "1"}
"""What every topic here is and cannot be changed to: no replication."""


class AdminHandlers:
    """The admin APIs' handlers (see the module doc). Thread-safe as its components are."""

    def __init__(
        self,
        config: BrokerConfig,
        cluster: ClusterView,
        offsets: GroupOffsetStore,
        groups: GroupCoordinator,
        logs: LogManager,
        access: Access,
        acl_store: AclStore | None = None,
    ) -> None:
        self.config = config
        self.logs = logs
        self.cluster = cluster
        self.offsets = offsets
        self.groups = groups
        self.access = access
        self.acl_store = acl_store

    # ------------------------------------------------------------------ the cluster

    def describe_cluster(self, header: RequestHeader, api: Api, body: Struct, listener: str) -> Struct:
        if body.get("endpoint_type", 1) != 1:  # 2 asks for controllers: a KRaft notion, none here
            return {
                "error_code": ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
                "error_message": "only brokers",
                "cluster_id": "",
            }
        return {
            "error_code": ErrorCode.NONE,
            "cluster_id": self.config.cluster_id,
            "controller_id": self.cluster.controller_id,
            "brokers": [
                {"broker_id": broker.id, "host": address[0], "port": address[1]}
                for broker in self.cluster.brokers
                if (address := broker.address(listener)) is not None
            ],
        }

    # ------------------------------------------------------------------ configs

    def describe_configs(self, header: RequestHeader, api: Api, body: Struct, caller: Caller) -> Struct:
        results = []
        for resource in body["resources"]:
            kind, name, keys = resource["resource_type"], resource["resource_name"], resource["configuration_keys"]
            result: Struct = {"resource_type": kind, "resource_name": name, "error_code": 0, "error_message": None}
            refused = self._config_access(caller, Operation.DESCRIBE_CONFIGS, kind, name)
            entries: list[Struct] | tuple[int, str | None]
            if refused is not None:
                entries = (refused, None)
            elif kind == TOPIC_RESOURCE:
                entries = self._topic_configs(name)
            elif kind == BROKER_RESOURCE and name in ("", str(self.config.broker_id)):
                entries = self._broker_configs()
            elif kind == BROKER_RESOURCE:
                entries = (ErrorCode.INVALID_REQUEST, f"broker {name}'s configs are described by broker {name}")
            else:
                entries = (ErrorCode.INVALID_REQUEST, f"resource type {kind}: only topics (2) and brokers (4)")
            if isinstance(entries, tuple):
                result.update(error_code=entries[0], error_message=entries[1], configs=[])
            else:
                wanted = set(keys) if keys is not None else None
                result["configs"] = [entry for entry in entries if wanted is None or entry["name"] in wanted]
            results.append(result)
        return {"results": results}

    def _config_access(self, caller: Caller, operation: Operation, kind: int, name: str) -> ErrorCode | None:
        """A topic's configs need the operation on the topic; a broker's, on the cluster."""
        if kind == TOPIC_RESOURCE:
            return self.access.topic(caller, operation, name)
        return self.access.cluster(caller, operation)

    def _topic_configs(self, topic: str) -> list[Struct] | tuple[int, str | None]:
        if self.cluster.partition_count(topic) is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic!r} does not exist"
        try:
            overrides = self.cluster.topic_config_entries(topic)
            effective = topic_log_config(self.config.log, overrides) or self.config.log
        except (KeyError, ValueError, KafkalogError) as exc:
            return ErrorCode.INVALID_CONFIG, f"topic {topic!r} has an invalid stored config: {exc}"
        entries = []
        for name in sorted(TOPIC_CONFIGS):
            source = _DYNAMIC_TOPIC_CONFIG if name in overrides else _DEFAULT_CONFIG
            entries.append(_entry(name, kafka_value(name, effective), source, read_only=False))
        entries += [_entry(n, v, _DEFAULT_CONFIG, read_only=True) for n, v in sorted(_READ_ONLY_TOPIC_CONFIGS.items())]
        return entries

    def created_topic_configs(self, request: Struct) -> list[Struct]:
        """CreateTopics v5+'s configs of a topic just created (or validated) from ``request``."""
        entries = {e["config_name"]: e["config_value"] for e in request["config_entries"] or []}
        effective = topic_log_config(self.config.log, entries) or self.config.log
        return [
            {
                "name": name,
                "value": kafka_value(name, effective),
                "read_only": False,
                "config_source": _DYNAMIC_TOPIC_CONFIG if name in entries else _DEFAULT_CONFIG,
                "is_sensitive": False,
            }
            for name in sorted(TOPIC_CONFIGS)
        ]

    def _broker_configs(self) -> list[Struct]:
        config, log, groups = self.config, self.config.log, self.config.groups
        values = {
            "broker.id": config.broker_id,
            "num.partitions": config.default_partitions,
            "auto.create.topics.enable": str(config.auto_create_topics).lower(),
            "log.retention.ms": -1 if log.retention_ms is None else log.retention_ms,
            "log.retention.bytes": -1 if log.retention_bytes is None else log.retention_bytes,
            "log.segment.bytes": log.segment_bytes,
            "log.cleanup.policy": log.cleanup_policy,
            "log.cleaner.min.cleanable.ratio": log.min_cleanable_dirty_ratio,
            "log.cleaner.delete.retention.ms": log.delete_retention_ms,
            "message.max.bytes": log.max_message_bytes,
            "group.min.session.timeout.ms": groups.min_session_timeout_ms,
            "group.max.session.timeout.ms": groups.max_session_timeout_ms,
            "group.initial.rebalance.delay.ms": groups.initial_rebalance_delay_ms,
            "offsets.topic.replication.factor": 1,
            "default.replication.factor": 1,
        }
        return [_entry(n, str(v), _STATIC_BROKER_CONFIG, read_only=True) for n, v in sorted(values.items())]

    def incremental_alter_configs(self, header: RequestHeader, api: Api, body: Struct, caller: Caller) -> Struct:
        responses = []
        for resource in body["resources"]:
            kind, name = resource["resource_type"], resource["resource_name"]
            refused = self._config_access(caller, Operation.ALTER_CONFIGS, kind, name)
            error: int
            message: str | None
            if refused is not None:
                error, message = refused, None
            elif kind == TOPIC_RESOURCE:
                error, message = self._alter_topic(name, resource["configs"], validate_only=body["validate_only"])
            elif kind == BROKER_RESOURCE:
                error, message = (
                    ErrorCode.INVALID_REQUEST,
                    "broker configs are static: change the broker's YAML config and restart it (docs/broker.md)",
                )
            else:
                error, message = ErrorCode.INVALID_REQUEST, f"resource type {kind}: only topics (2)"
            responses.append(
                {"error_code": error, "error_message": message, "resource_type": kind, "resource_name": name}
            )
        return {"responses": responses}

    def _alter_topic(self, topic: str, changes: list[Struct], *, validate_only: bool) -> tuple[int, str | None]:
        if self.cluster.partition_count(topic) is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic!r} does not exist"
        entries = self.cluster.topic_config_entries(topic)
        for change in changes:
            name, operation, value = change["name"], change["config_operation"], change["value"]
            if name in _READ_ONLY_TOPIC_CONFIGS:
                return ErrorCode.INVALID_CONFIG, f"{name} is always {_READ_ONLY_TOPIC_CONFIGS[name]} here"
            if operation == _SET:
                if value is None:
                    return ErrorCode.INVALID_CONFIG, f"{name}: SET needs a value"
                entries[name] = value
            elif operation == _DELETE:
                entries.pop(name, None)
            elif operation in (_APPEND, _SUBTRACT):
                return ErrorCode.INVALID_CONFIG, f"{name} is not a list: APPEND and SUBTRACT do not apply"
            else:
                return ErrorCode.INVALID_REQUEST, f"unknown config operation {operation}"
        try:
            topic_log_config(self.config.log, entries)
        except KeyError as exc:
            return ErrorCode.INVALID_CONFIG, str(exc.args[0] if exc.args else exc)
        except (ValueError, LogConfigError) as exc:
            return ErrorCode.INVALID_CONFIG, str(exc)
        if validate_only:
            return ErrorCode.NONE, None
        try:
            self.cluster.alter_topic_config(topic, entries)
        except KafkalogError as exc:
            return _error_of(exc), str(exc)
        logger.info("topic %s: configs now %s", topic, entries or "the broker's defaults")
        return ErrorCode.NONE, None

    # ------------------------------------------------------------------ topics

    def create_partitions(self, header: RequestHeader, api: Api, body: Struct, caller: Caller) -> Struct:
        results = []
        for request in body["topics"]:
            topic, count = request["name"], request["count"]
            refused = self.access.topic(caller, Operation.ALTER, topic)
            error, message = (
                (refused, None)
                if refused is not None
                else self._create_partitions(topic, count, request["assignments"], body["validate_only"])
            )
            results.append({"name": topic, "error_code": error, "error_message": message})
        return {"results": results}

    def _create_partitions(
        self, topic: str, count: int, assignments: list[Struct] | None, validate_only: bool
    ) -> tuple[int, str | None]:
        current = self.cluster.partition_count(topic)
        if current is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic!r} does not exist"
        if count <= current:
            return ErrorCode.INVALID_PARTITIONS, f"topic {topic!r} has {current} partitions; a count must be more"
        if assignments is not None:
            if len(assignments) != count - current:
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"{count - current} assignments are needed"
            for partition, assignment in enumerate(assignments, start=current):
                if not self.cluster.accepts_placement(topic, partition, assignment["broker_ids"]):
                    return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "one replica per partition, on a live broker"
        if validate_only:
            return ErrorCode.NONE, None
        try:
            self.cluster.add_partitions(topic, count)
        except KafkalogError as exc:
            return _error_of(exc), str(exc)
        logger.info("topic %s: %d partitions now (was %d)", topic, count, current)
        return ErrorCode.NONE, None

    def delete_topics(self, header: RequestHeader, api: Api, body: Struct, caller: Caller) -> Struct:
        responses = []
        for topic in body["topic_names"]:
            error: int = ErrorCode.NONE
            message: str | None = None
            refused = self.access.topic(caller, Operation.DELETE, topic)
            if refused is not None:
                error = refused
            elif self.cluster.partition_count(topic) is None:
                error, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic!r} does not exist"
            else:
                try:
                    self.cluster.delete_topic(topic)
                    logger.info("deleted topic %s (asked by %r)", topic, header.client_id)
                except KafkalogError as exc:
                    error, message = _error_of(exc), str(exc)
            responses.append({"name": topic, "error_code": error, "error_message": message})
        return {"responses": responses}

    def delete_records(self, header: RequestHeader, api: Api, body: Struct, caller: Caller) -> Struct:
        """Move each partition's log start up to the given offset (-1: its end), deleting what is
        below; answered with the new log start (the low watermark) once it is durable."""
        topics = []
        for topic in body["topics"]:
            partitions = []
            denied = self.access.topic(caller, Operation.DELETE, topic["name"])
            for request in topic["partitions"]:
                partition, offset = request["partition_index"], request["offset"]
                answer: Struct = {"partition_index": partition, "low_watermark": -1, "error_code": ErrorCode.NONE}
                problem = denied or self.cluster.partition_error(topic["name"], partition)
                log = self.logs.get_log(topic["name"], partition)
                if problem is not None or log is None:
                    answer["error_code"] = problem or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif not log.config.delete:
                    # Kafka's rule: deleting records below an offset would drop keys' only values
                    answer["error_code"] = ErrorCode.POLICY_VIOLATION
                else:
                    try:
                        answer["low_watermark"] = log.delete_records_before(
                            log.log_end_offset if offset == -1 else offset
                        )
                    except KafkalogError as exc:
                        answer["error_code"] = _error_of(exc)
                partitions.append(answer)
            topics.append({"name": topic["name"], "partitions": partitions})
        return {"topics": topics}

    # ------------------------------------------------------------------ groups

    def delete_groups(self, header: RequestHeader, api: Api, body: Struct, caller: Caller) -> Struct:
        results = []
        for group in body["groups_names"]:
            refused = self.access.group(caller, Operation.DELETE, group)
            results.append({"group_id": group, "error_code": refused or self._delete_group(group)})
        return {"results": results}

    def _delete_group(self, group: str) -> int:
        if not self.cluster.coordinates(group):
            return ErrorCode.NOT_COORDINATOR
        if self.groups.has_members(group):
            return ErrorCode.NON_EMPTY_GROUP
        try:
            if not self.offsets.committed_partitions(group):
                return ErrorCode.GROUP_ID_NOT_FOUND
            self.offsets.delete(group)
        except KafkalogError as exc:
            logger.warning("cannot delete group %s: %s", group, exc)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        logger.info("deleted group %s", group)
        return ErrorCode.NONE

    def offset_delete(self, header: RequestHeader, api: Api, body: Struct, caller: Caller) -> Struct:
        group = body["group_id"]
        refused = self.access.group(caller, Operation.DELETE, group)
        if refused is not None:
            return {"error_code": refused}
        if not self.cluster.coordinates(group):
            return {"error_code": ErrorCode.NOT_COORDINATOR}
        try:
            committed = set(self.offsets.committed_partitions(group))
        except KafkalogError:
            return {"error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE}
        if not committed and not self.groups.has_members(group):
            return {"error_code": ErrorCode.GROUP_ID_NOT_FOUND}
        subscribed = self.groups.subscribed_topics(group)
        doomed: list[tuple[str, int]] = []
        topics = []
        for topic in body["topics"]:
            partitions = []
            for request in topic["partitions"]:
                partition = request["partition_index"]
                error = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC if topic["name"] in subscribed else ErrorCode.NONE
                error = self.access.topic(caller, Operation.READ, topic["name"]) or error
                if not error and (topic["name"], partition) in committed:
                    doomed.append((topic["name"], partition))
                partitions.append({"partition_index": partition, "error_code": error})
            topics.append({"name": topic["name"], "partitions": partitions})
        try:
            if doomed:
                self.offsets.delete(group, doomed)
        except KafkalogError:
            return {"error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE}
        return {"error_code": ErrorCode.NONE, "topics": topics}

    # ------------------------------------------------------------------ ACLs

    def describe_acls(self, header: RequestHeader, api: Api, body: Struct, caller: Caller) -> Struct:
        refused = self.access.cluster(caller, Operation.DESCRIBE)
        if refused is not None:
            return {"error_code": refused, "error_message": f"{caller.principal} may not describe ACLs"}
        try:
            wanted = _filter(body)
        except (ValueError, AclError) as exc:
            return {"error_code": ErrorCode.INVALID_REQUEST, "error_message": str(exc)}
        by_pattern: dict[tuple[int, str, int], list[Struct]] = {}
        for binding in self.access.authorizer.bindings:
            if wanted.matches(binding):
                entry = {"principal": binding.principal, "host": binding.host, "operation": binding.operation,
                         "permission_type": binding.permission}  # fmt: skip
                key = (binding.resource_type, binding.resource_name, binding.pattern_type)
                by_pattern.setdefault(key, []).append(entry)
        resources = [
            {"resource_type": kind, "resource_name": name, "pattern_type": pattern, "acls": acls}
            for (kind, name, pattern), acls in sorted(by_pattern.items())
        ]
        return {"error_code": ErrorCode.NONE, "error_message": None, "resources": resources}

    def create_acls(self, header: RequestHeader, api: Api, body: Struct, caller: Caller) -> Struct:
        refused = self.access.cluster(caller, Operation.ALTER)
        results: list[Struct] = []
        made: list[AclBinding] = []
        for creation in body["creations"]:
            if refused is not None:
                results.append({"error_code": refused, "error_message": f"{caller.principal} may not alter ACLs"})
                continue
            try:
                binding = AclBinding(
                    ResourceType(creation["resource_type"]), creation["resource_name"],
                    PatternType(creation["resource_pattern_type"]), creation["principal"], creation["host"],
                    Operation(creation["operation"]), Permission(creation["permission_type"]),
                ).check()  # fmt: skip
            except (ValueError, AclError) as exc:
                results.append({"error_code": ErrorCode.INVALID_REQUEST, "error_message": str(exc)})
                continue
            made.append(binding)
            results.append({"error_code": ErrorCode.NONE, "error_message": None})
        if made:
            failure = self._store_acls(add=made)
            if failure is not None:
                results = [failure if r["error_code"] == ErrorCode.NONE else r for r in results]
            else:
                logger.info("ACLs added by %s: %s", caller.principal, "; ".join(map(_describe, made)))
        return {"results": results}

    def delete_acls(self, header: RequestHeader, api: Api, body: Struct, caller: Caller) -> Struct:
        refused = self.access.cluster(caller, Operation.ALTER)
        results: list[Struct] = []
        doomed: set[AclBinding] = set()
        for raw in body["filters"]:
            if refused is not None:
                results.append({"error_code": refused, "error_message": f"{caller.principal} may not alter ACLs"})
                continue
            try:
                wanted = _filter(raw)
            except (ValueError, AclError) as exc:
                results.append({"error_code": ErrorCode.INVALID_REQUEST, "error_message": str(exc)})
                continue
            matching = [b for b in self.access.authorizer.bindings if wanted.matches(b)]
            doomed.update(matching)
            results.append({"error_code": ErrorCode.NONE, "error_message": None,
                            "matching_acls": [_matching(b) for b in matching]})  # fmt: skip
        if doomed:
            failure = self._store_acls(remove=doomed)
            if failure is not None:
                return {"filter_results": [{**failure, "matching_acls": []} for _ in results]}
            logger.info("ACLs removed by %s: %s", caller.principal, "; ".join(map(_describe, sorted(doomed))))
        return {"filter_results": results}

    def _store_acls(self, *, add: Iterable[AclBinding] = (), remove: Iterable[AclBinding] = ()) -> Struct | None:
        """Change the stored ACLs and the authorizer's set; None, or the error every result gets."""
        store = self.acl_store
        if store is None:
            return {"error_code": ErrorCode.SECURITY_DISABLED, "error_message": "this broker keeps no ACLs"}
        try:
            if add:
                store.add(add)
            if remove:
                store.remove(remove)
        except (KafkalogError, OSError) as exc:
            logger.warning("cannot store ACLs: %s", exc)
            return {"error_code": ErrorCode.UNKNOWN_SERVER_ERROR, "error_message": f"cannot store ACLs: {exc}"}
        self.access.authorizer.replace(store.bindings())
        return None


def _entry(name: str, value: str | None, source: int, *, read_only: bool) -> Struct:
    return {
        "name": name,
        "value": value,
        "read_only": read_only,
        "config_source": source,
        "is_sensitive": False,
        "synonyms": [],
        "config_type": _CONFIG_TYPES.get(name, 5 if value is None or value.lstrip("-").isdigit() else 2),
        "documentation": None,
    }


def _error_of(exc: Any) -> int:
    return int(getattr(exc, "error_code", ErrorCode.UNKNOWN_SERVER_ERROR))


def _filter(body: Struct) -> AclFilter:
    """An ACL filter of DescribeAcls or DeleteAcls (ValueError for a code Kafka does not define)."""
    return AclFilter(
        ResourceType(body["resource_type_filter"]), body["resource_name_filter"],
        PatternType(body["pattern_type_filter"]), body["principal_filter"], body["host_filter"],
        Operation(body["operation"]), Permission(body["permission_type"]),
    )  # fmt: skip


def _matching(binding: AclBinding) -> Struct:
    return {
        "error_code": ErrorCode.NONE, "error_message": None, "resource_type": binding.resource_type,
        "resource_name": binding.resource_name, "pattern_type": binding.pattern_type,
        "principal": binding.principal, "host": binding.host, "operation": binding.operation,
        "permission_type": binding.permission,
    }  # fmt: skip


def _describe(binding: AclBinding) -> str:
    return (
        f"{binding.permission.name} {binding.principal} from {binding.host} {binding.operation.name} on"
        f" {binding.resource_type.name} {binding.pattern_type.name} {binding.resource_name!r}"
    )
