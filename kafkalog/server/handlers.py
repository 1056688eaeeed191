"""Request handlers: what the broker does for each API, over the log manager, cluster and offsets.

The network layer decodes a request, calls ``RequestHandlers.handle`` and sends what it returns:
a response body, ``NO_RESPONSE`` (produce with acks=0), or a ``ParkedFetch`` to finish later.
Handlers never raise for a client's mistake: every per-partition problem is an error code.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from kafkalog.errors import (
    CorruptSegmentError,
    KafkalogError,
    OffsetOutOfRangeError,
    RegistryError,
    UnsupportedCodecError,
)
from kafkalog.log import EARLIEST_TIME, LATEST_TIME, LogManager
from kafkalog.protocol import Api, ApiKey, ErrorCode, RequestHeader, api_versions_body
from kafkalog.protocol.apis import ZSTD_PRODUCE_VERSION
from kafkalog.protocol.types import Struct
from kafkalog.record import Codec
from kafkalog.record.reader import first_codec
from kafkalog.server.cluster import ClusterView, TopicExistsError
from kafkalog.server.config import BrokerConfig
from kafkalog.server.fetch import FetchRequest, ParkedFetch, read_fetch
from kafkalog.server.offsets import GroupOffsetStore
from kafkalog.server.topic_config import topic_log_config

logger = logging.getLogger(__name__)

NO_RESPONSE = object()
"""Returned for a produce with acks=0: Kafka sends nothing back."""

HandlerResult = Struct | ParkedFetch | object
_MAX_OFFSET_METADATA = 4096


def error_code_of(exc: BaseException) -> int:
    """The wire error code for an exception raised by the log or record layers."""
    return int(getattr(exc, "error_code", ErrorCode.UNKNOWN_SERVER_ERROR))


class RequestHandlers:
    """Serves decoded requests. Thread-safe: every processor thread calls ``handle`` concurrently;
    state lives in thread-safe components (LogManager, Cluster, OffsetStore)."""

    def __init__(
        self,
        config: BrokerConfig,
        logs: LogManager,
        cluster: ClusterView,
        offsets: GroupOffsetStore,
        *,
        on_append: Callable[[], None] = lambda: None,
    ) -> None:
        self.config = config
        self.logs = logs
        self.cluster = cluster
        self.offsets = offsets
        self.on_append = on_append
        self._table: dict[ApiKey, Callable[[RequestHeader, Api, Struct], HandlerResult]] = {
            ApiKey.PRODUCE: self.produce,
            ApiKey.FETCH: self.fetch,
            ApiKey.LIST_OFFSETS: self.list_offsets,
            ApiKey.METADATA: self.metadata,
            ApiKey.OFFSET_COMMIT: self.offset_commit,
            ApiKey.OFFSET_FETCH: self.offset_fetch,
            ApiKey.FIND_COORDINATOR: self.find_coordinator,
            ApiKey.API_VERSIONS: self.api_versions,
            ApiKey.CREATE_TOPICS: self.create_topics,
        }

    def handle(self, header: RequestHeader, api: Api, body: Struct) -> HandlerResult:
        return self._table[api.key](header, api, body)

    # ------------------------------------------------------------------ produce

    def produce(self, header: RequestHeader, api: Api, body: Struct) -> HandlerResult:
        acks = body["acks"]
        appended = False
        responses = []
        for topic_data in body["topic_data"]:
            topic = topic_data["topic"]
            partitions = []
            for data in topic_data["data"]:
                partition = data["partition"]
                error: int = ErrorCode.NONE
                base_offset, log_append_time, log_start_offset = -1, -1, -1
                problem = ErrorCode.INVALID_REQUIRED_ACKS if acks not in (0, 1, -1) else None
                problem = problem or self.cluster.partition_error(topic, partition)
                log = self.logs.get_log(topic, partition)
                if problem is not None:
                    error = problem
                elif log is None:
                    error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif data["record_set"] is None:
                    error = ErrorCode.CORRUPT_MESSAGE
                else:
                    try:
                        if api.version < ZSTD_PRODUCE_VERSION and first_codec(data["record_set"]) == Codec.ZSTD:
                            raise UnsupportedCodecError(f"zstd needs Produce v{ZSTD_PRODUCE_VERSION} or later")
                        info = log.append(data["record_set"])
                        base_offset, log_append_time = info.first_offset, info.log_append_time
                        log_start_offset = log.log_start_offset
                        appended = True
                    except CorruptSegmentError:
                        error = ErrorCode.KAFKA_STORAGE_ERROR  # the partition is quarantined read-only
                    except KafkalogError as exc:
                        error = error_code_of(exc)
                partitions.append(
                    {
                        "partition": partition,
                        "error_code": error,
                        "base_offset": base_offset,
                        "log_append_time": log_append_time,
                        "log_start_offset": log_start_offset,
                    }
                )
            responses.append({"topic": topic, "partition_responses": partitions})
        if appended:
            self.on_append()
        if acks == 0:
            return NO_RESPONSE
        # acks=-1 ("all in-sync replicas") is answered like acks=1: there is no replication, so the
        # leader's append is all there is. docs/broker.md says so.
        return {"responses": responses, "throttle_time_ms": 0}

    # ------------------------------------------------------------------ fetch

    def fetch(self, header: RequestHeader, api: Api, body: Struct) -> HandlerResult:
        request = FetchRequest.from_body(api.version, body, self.config.limits.max_fetch_wait_ms)
        read = read_fetch(self, request)
        if read.has_error or read.total_bytes >= request.min_bytes or request.max_wait_ms <= 0:
            return read.body
        read.close()
        return ParkedFetch(request, time.monotonic() + request.max_wait_ms / 1000)

    def retry_fetch(self, parked: ParkedFetch, *, expired: bool) -> Struct | None:
        """The response of a parked fetch once it can answer (enough data, an error, or its wait ran
        out); None to keep waiting."""
        read = read_fetch(self, parked.request)
        if expired or read.has_error or read.total_bytes >= parked.request.min_bytes:
            return read.body
        read.close()
        return None

    # ------------------------------------------------------------------ list offsets

    def list_offsets(self, header: RequestHeader, api: Api, body: Struct) -> HandlerResult:
        responses = []
        for topic_request in body["topics"]:
            topic = topic_request["topic"]
            partitions = []
            for request in topic_request["partitions"]:
                partition, timestamp = request["partition"], request["timestamp"]
                answer: dict[str, Any] = {"partition": partition, "error_code": ErrorCode.NONE}
                if api.version == 0:
                    answer["offsets"] = []
                else:
                    answer["timestamp"] = answer["offset"] = -1
                problem = self.cluster.partition_error(topic, partition)
                log = self.logs.get_log(topic, partition)
                if problem is not None or log is None:
                    answer["error_code"] = problem or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif api.version == 0:
                    answer["offsets"] = log.offsets_before(timestamp, max(0, request["max_num_offsets"]))
                elif timestamp == LATEST_TIME:
                    answer["offset"] = log.log_end_offset
                elif timestamp == EARLIEST_TIME:
                    answer["offset"] = log.log_start_offset
                else:
                    found = log.offset_for_timestamp(timestamp)
                    if found is not None:  # none that new: -1, -1, as Kafka answers
                        answer["timestamp"], answer["offset"] = found.timestamp, found.offset
                partitions.append(answer)
            responses.append({"topic": topic, "partition_responses": partitions})
        return {"responses": responses}

    # ------------------------------------------------------------------ metadata

    def metadata(self, header: RequestHeader, api: Api, body: Struct) -> HandlerResult:
        requested = body["topics"]
        known = self.cluster.topics()
        if requested is None or (api.version == 0 and not requested):
            names = sorted(known)
        else:
            names = list(dict.fromkeys(requested))
        topic_metadata = []
        for topic in names:
            if topic not in known and self.config.auto_create_topics and self.cluster.can_create_topics():
                try:
                    self.cluster.create_topic(topic, self.config.default_partitions)
                    logger.info("auto-created topic %s with %d partition(s)", topic, self.config.default_partitions)
                except TopicExistsError:
                    pass  # another request created it meanwhile
                except KafkalogError:
                    topic_metadata.append(self._topic_metadata(topic, ErrorCode.INVALID_TOPIC_EXCEPTION, 0))
                    continue
                known = self.cluster.topics()
            if topic not in known:
                topic_metadata.append(self._topic_metadata(topic, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0))
            else:
                topic_metadata.append(self._topic_metadata(topic, ErrorCode.NONE, known[topic]))
        return {
            "throttle_time_ms": 0,
            "brokers": [{"node_id": b.id, "host": b.host, "port": b.port, "rack": None} for b in self.cluster.brokers],
            "cluster_id": self.config.cluster_id,
            "controller_id": self.cluster.controller_id,
            "topic_metadata": topic_metadata,
        }

    def _topic_metadata(self, topic: str, error: ErrorCode, partitions: int) -> Struct:
        metadata = []
        for partition in range(partitions):
            leader, replica = self.cluster.leader_id(topic, partition)
            metadata.append(
                {
                    "error_code": ErrorCode.NONE if leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
                    "partition": partition,
                    "leader": leader,
                    "replicas": [replica],
                    "isr": [leader] if leader >= 0 else [],
                }
            )
        return {"error_code": error, "topic": topic, "is_internal": False, "partition_metadata": metadata}

    # ------------------------------------------------------------------ group offsets

    def offset_commit(self, header: RequestHeader, api: Api, body: Struct) -> HandlerResult:
        group = body["group_id"]
        generation = body.get("generation_id", -1)
        group_error: ErrorCode | None = None
        if not self.cluster.coordinates(group):
            group_error = ErrorCode.NOT_COORDINATOR
        elif generation != -1:
            # Only "simple" commits (no group membership) until groups are served.
            group_error = ErrorCode.ILLEGAL_GENERATION
        accepted: dict[tuple[str, int], tuple[int, str | None]] = {}
        responses = []
        for topic_request in body["topics"]:
            topic = topic_request["topic"]
            partitions = []
            for request in topic_request["partitions"]:
                partition = request["partition"]
                count = self.cluster.partition_count(topic)
                error: int = ErrorCode.NONE
                if group_error is not None:
                    error = group_error
                elif count is None or not 0 <= partition < count:
                    error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif request["metadata"] is not None and len(request["metadata"]) > _MAX_OFFSET_METADATA:
                    error = ErrorCode.OFFSET_METADATA_TOO_LARGE
                else:
                    accepted[(topic, partition)] = (request["offset"], request["metadata"])
                partitions.append({"partition": partition, "error_code": error})
            responses.append({"topic": topic, "partition_responses": partitions})
        if accepted:
            try:
                self.offsets.commit(group, accepted)
            except KafkalogError as exc:
                logger.warning("cannot store offsets of group %s: %s", group, exc)
                for topic_response in responses:
                    for partition_response in topic_response["partition_responses"]:
                        if partition_response["error_code"] == ErrorCode.NONE:
                            partition_response["error_code"] = ErrorCode.COORDINATOR_NOT_AVAILABLE
        return {"responses": responses}

    def offset_fetch(self, header: RequestHeader, api: Api, body: Struct) -> HandlerResult:
        group = body["group_id"]
        not_coordinator = not self.cluster.coordinates(group)
        responses = []
        for topic_request in body["topics"]:
            topic = topic_request["topic"]
            partitions = []
            for partition in topic_request["partitions"]:
                error: int = ErrorCode.NOT_COORDINATOR if not_coordinator else ErrorCode.NONE
                committed = None
                if not not_coordinator:
                    try:
                        committed = self.offsets.fetch(group, topic, partition)
                    except KafkalogError as exc:  # the store (ZooKeeper) is unreachable: clients retry
                        logger.warning("cannot read offsets of group %s: %s", group, exc)
                        error = ErrorCode.COORDINATOR_NOT_AVAILABLE
                offset, metadata = committed if committed is not None else (-1, "")
                partitions.append(
                    {
                        "partition": partition,
                        "offset": offset,
                        "metadata": metadata if metadata is not None else "",
                        "error_code": error,
                    }
                )
            responses.append({"topic": topic, "partition_responses": partitions})
        return {"responses": responses}

    def find_coordinator(self, header: RequestHeader, api: Api, body: Struct) -> HandlerResult:
        coordinator = self.cluster.coordinator(body["group_id"])
        return {"error_code": 0, "node_id": coordinator.id, "host": coordinator.host, "port": coordinator.port}

    # ------------------------------------------------------------------ admin

    def api_versions(self, header: RequestHeader, api: Api, body: Struct) -> HandlerResult:
        return api_versions_body()

    def create_topics(self, header: RequestHeader, api: Api, body: Struct) -> HandlerResult:
        results = []
        validate_only = body.get("validate_only", False)
        for request in body["create_topic_requests"]:
            topic = request["topic"]
            error, message = self._create_topic(request, validate_only)
            results.append({"topic": topic, "error_code": error, "error_message": message})
        return {"throttle_time_ms": 0, "topic_errors": results}

    def _create_topic(self, request: Struct, validate_only: bool) -> tuple[int, str | None]:
        topic = request["topic"]
        if not self.cluster.can_create_topics():
            return ErrorCode.POLICY_VIOLATION, "topics of a static multi-broker cluster are declared in its config"
        if self.cluster.partition_count(topic) is not None:
            return ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {topic!r} already exists"
        partitions = request["num_partitions"]
        placement: dict[int, int] | None = None
        if request["replica_assignment"]:
            if partitions not in (-1, len(request["replica_assignment"])):
                return ErrorCode.INVALID_REQUEST, "give num_partitions or a replica assignment, not both"
            partitions = len(request["replica_assignment"])
            for assignment in request["replica_assignment"]:
                if not self.cluster.accepts_placement(topic, assignment["partition"], assignment["replicas"]):
                    return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "one replica per partition, on a broker of the cluster"
            placement = {a["partition"]: a["replicas"][0] for a in request["replica_assignment"]}
            if sorted(placement) != list(range(partitions)):
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"partitions must be numbered 0..{partitions - 1}"
        if partitions < 1:
            return ErrorCode.INVALID_PARTITIONS, f"num_partitions {partitions} must be at least 1"
        if request["replication_factor"] not in (-1, 1):
            return ErrorCode.INVALID_REPLICATION_FACTOR, "a partition has one replica here (no replication)"
        try:
            entries = {e["config_name"]: e["config_value"] for e in request["config_entries"] or []}
            config = topic_log_config(self.config.log, entries)
        except (KeyError, ValueError, KafkalogError) as exc:
            return ErrorCode.INVALID_CONFIG, str(exc.args[0] if isinstance(exc, KeyError) and exc.args else exc)
        if validate_only:
            return ErrorCode.NONE, None
        try:
            self.cluster.create_topic(topic, partitions, config, entries, placement)
        except TopicExistsError as exc:
            return ErrorCode.TOPIC_ALREADY_EXISTS, str(exc)
        except RegistryError as exc:  # ZooKeeper unreachable: a client may retry
            return ErrorCode.REQUEST_TIMED_OUT, str(exc)
        except KafkalogError as exc:
            return ErrorCode.INVALID_TOPIC_EXCEPTION, str(exc)
        logger.info("created topic %s with %d partition(s)", topic, partitions)
        return ErrorCode.NONE, None


__all__ = ["NO_RESPONSE", "OffsetOutOfRangeError", "RequestHandlers"]
