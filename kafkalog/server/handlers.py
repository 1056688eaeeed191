"""Request handlers: what the broker does for each API, over the log manager, cluster and offsets.

The network layer decodes a request, calls ``RequestHandlers.handle`` and sends what it returns:
a response body, ``NO_RESPONSE`` (produce with acks=0), or a ``ParkedFetch`` to finish later.
Handlers never raise for a client's mistake: every per-partition problem is an error code.
"""

from __future__ import annotations

import dataclasses
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
from kafkalog.log import EARLIEST_TIME, LATEST_TIME, MAX_TIMESTAMP, Log, LogManager, VerificationGuard
from kafkalog.protocol import Api, ApiKey, ErrorCode, RequestHeader, api_versions_body
from kafkalog.protocol.apis import MAX_TIMESTAMP_LIST_OFFSETS_VERSION, ZSTD_PRODUCE_VERSION
from kafkalog.protocol.frames import error_body
from kafkalog.protocol.types import Struct
from kafkalog.record import Codec
from kafkalog.record.reader import first_codec
from kafkalog.server.admin import AdminHandlers
from kafkalog.server.caller import LOCAL, Caller
from kafkalog.server.cluster.offsets import GroupOffsetStore
from kafkalog.server.cluster.producer_ids import ProducerIds, file_blocks
from kafkalog.server.cluster.topic_config import topic_log_config
from kafkalog.server.cluster.view import ClusterView, TopicExistsError
from kafkalog.server.config import BrokerConfig
from kafkalog.server.deferred import DeferredResponse
from kafkalog.server.fetch import FetchRequest, ParkedFetch, read_fetch
from kafkalog.server.groups import GroupCoordinator
from kafkalog.server.security.access import Access
from kafkalog.server.security.acl_store import AclStore
from kafkalog.server.security.acls import Authorizer, Operation
from kafkalog.server.transaction_requests import TransactionHandlers
from kafkalog.server.transactions import TransactionCoordinator
from kafkalog.server.transactions.markers import BrokerMarkers
from kafkalog.server.transactions.store import FileTransactionStore, TransactionStore

logger = logging.getLogger(__name__)

_GROUP_KEY = 0
_TRANSACTION_KEY = 1
_READ_COMMITTED = 1
_TRANSACTIONAL_BIT = 0x10
_BATCH_HEADER_SIZE = 61
"""A record batch's header (kafkalog.record.batch_format): attributes at 21, producer id at 43, epoch at 51."""
_GROUP_MEMBERSHIP = frozenset({ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT, ApiKey.LEAVE_GROUP})

NO_RESPONSE = object()
"""Returned for a produce with acks=0: Kafka sends nothing back."""

HandlerResult = Struct | ParkedFetch | DeferredResponse | object
_MAX_OFFSET_METADATA = 4096
_MAX_PRODUCER_EPOCH = 32767


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
        producer_ids: ProducerIds | None = None,
        on_append: Callable[[], None] = lambda: None,
        access: Access | None = None,
        acl_store: AclStore | None = None,
        transaction_store: TransactionStore | None = None,
    ) -> None:
        self.config = config
        self.logs = logs
        self.cluster = cluster
        self.offsets = offsets
        self.on_append = on_append
        self.groups = GroupCoordinator(config.groups, cluster.coordinates)
        self.producer_ids = producer_ids or ProducerIds(file_blocks(config.data_dirs[0], config.broker_id))
        self.access = access or Access(Authorizer())  # no ACLs: everything allowed
        self.admin = AdminHandlers(config, cluster, offsets, self.groups, logs, self.access, acl_store)
        store = transaction_store or FileTransactionStore(config.data_dirs[0], fsync=config.transactions.fsync)
        markers = BrokerMarkers(
            config.broker_id, logs, cluster, store, offsets,
            shared_offsets=transaction_store is not None, listener=_inter_broker_listener(config),
            on_written=lambda: self.on_append(),  # noqa: PLW0108  (on_append is set after us: looked up when called)
        )  # fmt: skip
        coordinator = TransactionCoordinator(
            config.transactions,
            store,
            markers,
            coordinates=cluster.coordinates,
            next_producer_id=self.producer_ids.next_id,
            membership=lambda: tuple(broker.id for broker in cluster.brokers),
        )
        self.transactions = TransactionHandlers(coordinator, store, logs, cluster, offsets, self.groups, self.access)
        self._table: dict[ApiKey, Callable[[RequestHeader, Api, Struct, Caller], HandlerResult]] = {
            ApiKey.PRODUCE: self.produce,
            ApiKey.FETCH: self.fetch,
            ApiKey.LIST_OFFSETS: self.list_offsets,
            ApiKey.OFFSET_COMMIT: self.offset_commit,
            ApiKey.OFFSET_FETCH: self.offset_fetch,
            ApiKey.HEARTBEAT: lambda header, api, body, caller: self.groups.heartbeat(body),
            ApiKey.LEAVE_GROUP: lambda header, api, body, caller: self.groups.leave_group(api.version, body),
            ApiKey.SYNC_GROUP: lambda header, api, body, caller: self.groups.sync_group(api.version, body),
            ApiKey.DESCRIBE_GROUPS: self.describe_groups,
            ApiKey.LIST_GROUPS: self.list_groups,
            ApiKey.API_VERSIONS: self.api_versions,
            ApiKey.CREATE_TOPICS: self.create_topics,
            ApiKey.INIT_PRODUCER_ID: self.init_producer_id,
            ApiKey.DESCRIBE_CONFIGS: self.admin.describe_configs,
            ApiKey.INCREMENTAL_ALTER_CONFIGS: self.admin.incremental_alter_configs,
            ApiKey.CREATE_PARTITIONS: self.admin.create_partitions,
            ApiKey.DELETE_TOPICS: self.admin.delete_topics,
            ApiKey.DELETE_RECORDS: self.admin.delete_records,
            ApiKey.DELETE_GROUPS: self.admin.delete_groups,
            ApiKey.OFFSET_DELETE: self.admin.offset_delete,
            ApiKey.DESCRIBE_ACLS: self.admin.describe_acls,
            ApiKey.CREATE_ACLS: self.admin.create_acls,
            ApiKey.DELETE_ACLS: self.admin.delete_acls,
            ApiKey.ADD_PARTITIONS_TO_TXN: self.transactions.add_partitions_to_txn,
            ApiKey.ADD_OFFSETS_TO_TXN: self.transactions.add_offsets_to_txn,
            ApiKey.END_TXN: self.transactions.end_txn,
            ApiKey.WRITE_TXN_MARKERS: self.write_txn_markers,
            ApiKey.TXN_OFFSET_COMMIT: self.transactions.txn_offset_commit,
            ApiKey.DESCRIBE_PRODUCERS: self.transactions.describe_producers,
            ApiKey.DESCRIBE_TRANSACTIONS: self.transactions.describe_transactions,
            ApiKey.LIST_TRANSACTIONS: self.transactions.list_transactions,
        }

    def handle(self, header: RequestHeader, api: Api, body: Struct, caller: Caller = LOCAL) -> HandlerResult:
        """The response to one request from ``caller`` (its address, listener and principal)."""
        if api.key in _GROUP_MEMBERSHIP:  # a member's requests: READ on the group, or refused whole
            refused = self.access.group(caller, Operation.READ, body["group_id"])
            if refused is not None:
                return error_body(api.response, refused)
        if api.key == ApiKey.JOIN_GROUP:  # the only one that keeps the client's address
            return self.groups.join_group(api.version, body, header.client_id or "", caller.host)
        if api.key == ApiKey.METADATA:  # these tell addresses: those of the caller's listener
            return self.metadata(header, api, body, caller)
        if api.key == ApiKey.FIND_COORDINATOR:
            return self.find_coordinator(header, api, body, caller)
        if api.key == ApiKey.DESCRIBE_CLUSTER:
            return self.admin.describe_cluster(header, api, body, caller.listener)
        return self._table[api.key](header, api, body, caller)

    # ------------------------------------------------------------------ produce

    def produce(self, header: RequestHeader, api: Api, body: Struct, caller: Caller) -> HandlerResult:
        acks = body["acks"]
        appended = False
        responses = []
        transactional_id = body.get("transactional_id")
        txn_refused = None
        if transactional_id is not None:
            txn_refused = self.transactions.transactional_id(caller, Operation.WRITE, transactional_id)
        for topic_data in body["topic_data"]:
            topic = topic_data["topic"]
            denied = self.access.topic(caller, Operation.WRITE, topic)
            partitions = []
            for data in topic_data["data"]:
                partition = data["partition"]
                error: int = ErrorCode.NONE
                base_offset, log_append_time, log_start_offset = -1, -1, -1
                problem = ErrorCode.INVALID_REQUIRED_ACKS if acks not in (0, 1, -1) else None
                problem = problem or txn_refused or denied or self.cluster.partition_error(topic, partition)
                log = self.logs.get_log(topic, partition)
                guard = None
                if problem is None:
                    problem, guard = self._unverified(transactional_id, topic, partition, data["record_set"], log)
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
                        info = log.append(data["record_set"], verification_guard=guard)
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

    def write_txn_markers(self, header: RequestHeader, api: Api, body: Struct, caller: Caller) -> HandlerResult:
        answer = self.transactions.write_txn_markers(header, api, body, caller)
        self.on_append()  # a marker moves the last stable offset: parked read-committed fetches may answer
        return answer

    def _unverified(
        self, transactional_id: str | None, topic: str, partition: int, record_set: Any, log: Log | None
    ) -> tuple[ErrorCode | None, VerificationGuard | None]:
        """KIP-890 part 1: a transactional batch is appended only to a partition its producer added
        to its open transaction. Answers (None, the guard to append with) if it may be, else (the
        error, None): INVALID_TXN_STATE, or the producer's fencing, or INVALID_PRODUCER_ID_MAPPING
        for a producer id the transactional id does not have. Checked here when this broker
        coordinates the transactional id (else no check and no guard).

        The log's verification guard is taken before the coordinator is asked: if the transaction
        ends (its marker is written) before the append, the guard is gone and the log refuses a
        batch that would open a transaction the coordinator does not know (kafkalog.log.producer_state)."""
        producer = _transactional_producer(record_set)
        if producer is None:
            return None, None
        if transactional_id is None:
            return ErrorCode.INVALID_TXN_STATE, None  # transactional records need their transactional id
        if not self.cluster.coordinates(transactional_id):
            return None, None  # its coordinator is another broker: that broker checked the AddPartitionsToTxn
        producer_id, epoch = producer
        guard = log.verification_guard(producer_id) if log is not None else None  # before asking: see above
        error = self.transactions.coordinator.verify(transactional_id, producer_id, epoch, [(topic, partition)])
        code = error[(topic, partition)]
        if code == ErrorCode.NONE:
            return None, guard
        if code == ErrorCode.PRODUCER_FENCED:
            return ErrorCode.INVALID_PRODUCER_EPOCH, None  # what Produce answers an old epoch (Kafka maps it so too)
        if code in (ErrorCode.INVALID_PRODUCER_ID_MAPPING, ErrorCode.CONCURRENT_TRANSACTIONS):
            return ErrorCode(code), None  # no such producer; or its last transaction's markers are being written
        if code == ErrorCode.INVALID_TXN_STATE:
            return ErrorCode.INVALID_TXN_STATE, None
        # the check could not be made (the coordinator's store failed): retried, as Kafka answers
        # a verification that could not reach the coordinator
        return ErrorCode.NOT_ENOUGH_REPLICAS, None

    # ------------------------------------------------------------------ fetch

    def fetch(self, header: RequestHeader, api: Api, body: Struct, caller: Caller) -> HandlerResult:
        session_error = _fetch_session_error(body)
        if session_error is not None:
            return {"throttle_time_ms": 0, "error_code": session_error, "session_id": 0, "responses": []}
        request = FetchRequest.from_body(api.version, body, self.config.limits.max_fetch_wait_ms)
        denied = frozenset(t for t, _ in request.topics if self.access.topic(caller, Operation.READ, t) is not None)
        if denied:
            request = dataclasses.replace(request, denied=denied)
        read = read_fetch(self.cluster, self.logs, request)
        if read.has_error or read.total_bytes >= request.min_bytes or request.max_wait_ms <= 0:
            return read.body
        read.close()
        return ParkedFetch(request, time.monotonic() + request.max_wait_ms / 1000)

    def retry_fetch(self, parked: ParkedFetch, *, expired: bool) -> Struct | None:
        """The response of a parked fetch once it can answer (enough data, an error, or its wait ran
        out); None to keep waiting."""
        read = read_fetch(self.cluster, self.logs, parked.request)
        if expired or read.has_error or read.total_bytes >= parked.request.min_bytes:
            return read.body
        read.close()
        return None

    # ------------------------------------------------------------------ list offsets

    def list_offsets(self, header: RequestHeader, api: Api, body: Struct, caller: Caller) -> HandlerResult:
        responses = []
        for topic_request in body["topics"]:
            topic = topic_request["topic"]
            denied = self.access.topic(caller, Operation.DESCRIBE, topic)
            partitions = []
            for request in topic_request["partitions"]:
                partition, timestamp = request["partition"], request["timestamp"]
                answer: dict[str, Any] = {"partition": partition, "error_code": ErrorCode.NONE}
                if api.version == 0:
                    answer["offsets"] = []
                else:
                    answer["timestamp"] = answer["offset"] = -1
                problem = denied or self.cluster.partition_error(topic, partition)
                log = self.logs.get_log(topic, partition)
                if problem is not None or log is None:
                    answer["error_code"] = problem or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif api.version == 0:
                    answer["offsets"] = log.offsets_before(timestamp, max(0, request["max_num_offsets"]))
                elif timestamp == LATEST_TIME:
                    # read committed (v2+): the end is the last stable offset, as far as such a reader reads
                    committed = body.get("isolation_level", 0) == _READ_COMMITTED
                    answer["offset"] = log.last_stable_offset if committed else log.log_end_offset
                elif timestamp == EARLIEST_TIME:
                    answer["offset"] = log.log_start_offset
                elif timestamp == MAX_TIMESTAMP and api.version >= MAX_TIMESTAMP_LIST_OFFSETS_VERSION:
                    found = log.offset_of_max_timestamp()
                    if found is not None:  # an empty log: -1, -1, as Kafka answers
                        answer["timestamp"], answer["offset"] = found.timestamp, found.offset
                else:
                    found = log.offset_for_timestamp(timestamp)
                    if found is not None:  # none that new: -1, -1, as Kafka answers
                        answer["timestamp"], answer["offset"] = found.timestamp, found.offset
                partitions.append(answer)
            responses.append({"topic": topic, "partition_responses": partitions})
        return {"throttle_time_ms": 0, "responses": responses}

    # ------------------------------------------------------------------ metadata

    def metadata(self, header: RequestHeader, api: Api, body: Struct, caller: Caller) -> HandlerResult:
        requested = body["topics"]
        known = self.cluster.topics()
        if requested is None or (api.version == 0 and not requested):
            # every topic the caller may see (Kafka leaves the others out, unnamed)
            names = [t for t in sorted(known) if self.access.topic(caller, Operation.DESCRIBE, t) is None]
        else:
            names = list(dict.fromkeys(topic["name"] for topic in requested))
        topic_metadata = []
        # v4+: a client may ask not to create (Kafka's consumers do since 2.3); before, it always may
        may_create = body.get("allow_auto_topic_creation", True) and self.config.auto_create_topics
        for topic in names:
            denied = self.access.topic(caller, Operation.DESCRIBE, topic)
            if denied is not None:
                topic_metadata.append(self._topic_metadata(topic, denied, 0))
                continue
            if (
                topic not in known
                and may_create
                and self.cluster.can_create_topics()
                and self.access.create_topic(caller, topic) is None  # else: unknown, as Kafka answers
            ):
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
            "brokers": [
                {"node_id": broker.id, "host": address[0], "port": address[1], "rack": None}
                for broker in self.cluster.brokers
                if (address := broker.address(caller.listener)) is not None  # Kafka leaves such a broker out too
            ],
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

    def offset_commit(self, header: RequestHeader, api: Api, body: Struct, caller: Caller) -> HandlerResult:
        group = body["group_id"]
        generation = body.get("generation_id", -1)
        group_error: int | None = self.access.group(caller, Operation.READ, group)
        if group_error is not None:
            pass  # every partition answered GROUP_AUTHORIZATION_FAILED
        elif not self.cluster.coordinates(group):
            group_error = ErrorCode.NOT_COORDINATOR
        else:  # a member of the current generation, or nobody while the group has no members
            fenced = self.groups.commit_error(
                group, generation, body.get("member_id", ""), body.get("group_instance_id")
            )
            group_error = fenced or None
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
                elif (denied := self.access.topic(caller, Operation.READ, topic)) is not None:
                    error = denied
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

    # ------------------------------------------------------------------ idempotent producers

    def init_producer_id(self, header: RequestHeader, api: Api, body: Struct, caller: Caller) -> HandlerResult:
        """A producer id and epoch: of a transactional id from its coordinator
        (kafkalog.server.transactions); else for an idempotent producer, where one that names its
        current id and epoch (v3+, KIP-360: after a sequence error) gets the next epoch of the same id."""
        if body["transactional_id"] is not None:
            return self.transactions.init_producer_id(api, body, caller)
        refused = self.access.idempotent_write(caller)
        if refused is not None:
            return {"error_code": refused}
        producer_id, epoch = body.get("producer_id", -1), body.get("producer_epoch", -1)
        if producer_id >= 0 and 0 <= epoch < _MAX_PRODUCER_EPOCH:
            return {"error_code": ErrorCode.NONE, "producer_id": producer_id, "producer_epoch": epoch + 1}
        try:
            return {"error_code": ErrorCode.NONE, "producer_id": self.producer_ids.next_id(), "producer_epoch": 0}
        except KafkalogError as exc:
            logger.warning("cannot hand out a producer id: %s", exc)
            return {"error_code": error_code_of(exc)}

    # ------------------------------------------------------------------ describing groups

    def describe_groups(self, header: RequestHeader, api: Api, body: Struct, caller: Caller) -> HandlerResult:
        described = []
        for group in body["groups"]:
            refused = self.access.group(caller, Operation.DESCRIBE, group)
            if refused is not None:
                described.append(self.groups.describe(group, api.version, has_offsets=False))
                described[-1].update(error_code=refused, error_message=None)
                continue
            try:
                has_offsets = (
                    bool(self.offsets.committed_partitions(group)) if self.cluster.coordinates(group) else False
                )
            except KafkalogError as exc:
                described.append(self.groups.describe(group, api.version, has_offsets=False))
                described[-1].update(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, error_message=str(exc))
                continue
            described.append(self.groups.describe(group, api.version, has_offsets=has_offsets))
        return {"groups": described}

    def list_groups(self, header: RequestHeader, api: Api, body: Struct, caller: Caller) -> HandlerResult:
        """The groups this broker coordinates: those with members, and those with committed offsets
        only (as "Empty", protocol type "consumer" like Kafka's)."""
        try:
            stored = [group for group in self.offsets.groups() if self.cluster.coordinates(group)]
        except KafkalogError as exc:
            logger.warning("cannot list groups: %s", exc)
            return {"error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "groups": []}
        listed = dict.fromkeys(stored, ("consumer", "Empty"))
        listed.update(self.groups.listed())
        states = set(body.get("states_filter") or ())
        types = {t.lower() for t in body.get("types_filter") or ()}
        everything = self.access.cluster(caller, Operation.DESCRIBE) is None  # else the groups it may describe
        groups = [
            {"group_id": group, "protocol_type": protocol_type, "group_state": state, "group_type": "classic"}
            for group, (protocol_type, state) in sorted(listed.items())
            if (not states or state in states)
            and (not types or "classic" in types)
            and (everything or self.access.group(caller, Operation.DESCRIBE, group) is None)
        ]
        return {"error_code": ErrorCode.NONE, "groups": groups}

    def offset_fetch(self, header: RequestHeader, api: Api, body: Struct, caller: Caller) -> HandlerResult:
        if "groups" in body:  # v8+: several groups in one request, each answered on its own
            stable = body.get("require_stable", False)
            groups = [self._group_offsets(g["group_id"], g["topics"], caller, stable) for g in body["groups"]]
            return {"throttle_time_ms": 0, "groups": groups}
        answer = self._group_offsets(body["group_id"], body["topics"], caller, body.get("require_stable", False))
        # before v2 a group error is per partition only; from v2 it is also top-level
        return {"throttle_time_ms": 0, "responses": answer["responses"], "error_code": answer["error_code"]}

    def _group_offsets(
        self, group: str, topics: list[Struct] | None, caller: Caller, require_stable: bool = False
    ) -> Struct:
        """One group's committed offsets: of the partitions asked, or (topics null, v2+) of every
        partition the group committed. An error of the group as a whole is both top-level and on
        every partition answered, so clients of every version see it. With ``require_stable``
        (v7+, a read-committed consumer) a partition whose offset an open transaction is about to
        change is answered UNSTABLE_OFFSET_COMMIT: the consumer asks again after its end."""
        group_error: int = self.access.group(caller, Operation.DESCRIBE, group) or ErrorCode.NONE
        wanted: list[tuple[str, list[int]]] = []
        if group_error == ErrorCode.NONE and not self.cluster.coordinates(group):
            group_error = ErrorCode.NOT_COORDINATOR
        if topics is not None:
            wanted = [(t["topic"], list(t["partitions"])) for t in topics]
        elif group_error == ErrorCode.NONE:
            try:
                by_topic: dict[str, list[int]] = {}
                for topic, partition in self.offsets.committed_partitions(group):
                    by_topic.setdefault(topic, []).append(partition)
                wanted = list(by_topic.items())
            except KafkalogError as exc:  # the store (ZooKeeper) is unreachable: clients retry
                logger.warning("cannot list offsets of group %s: %s", group, exc)
                group_error = ErrorCode.COORDINATOR_NOT_AVAILABLE
        unstable = self.transactions.unstable_partitions(group) if require_stable and group_error == 0 else set()
        responses = []
        for topic, partitions in wanted:
            answers = []
            topic_denied = self.access.topic(caller, Operation.DESCRIBE, topic)
            for partition in partitions:
                error = group_error or topic_denied or ErrorCode.NONE
                if error == ErrorCode.NONE and (topic, partition) in unstable:
                    error = ErrorCode.UNSTABLE_OFFSET_COMMIT
                committed = None
                if error == ErrorCode.NONE:
                    try:
                        committed = self.offsets.fetch(group, topic, partition)
                    except KafkalogError as exc:
                        logger.warning("cannot read offsets of group %s: %s", group, exc)
                        error = group_error = ErrorCode.COORDINATOR_NOT_AVAILABLE
                offset, metadata = committed if committed is not None else (-1, "")
                answers.append(
                    {
                        "partition": partition,
                        "offset": offset,
                        "metadata": metadata if metadata is not None else "",
                        "error_code": error,
                    }
                )
            responses.append({"topic": topic, "partition_responses": answers})
        return {"group_id": group, "responses": responses, "error_code": group_error}

    def find_coordinator(self, header: RequestHeader, api: Api, body: Struct, caller: Caller) -> HandlerResult:
        key_type = body.get("key_type", _GROUP_KEY)
        if "coordinator_keys" in body:  # v4+: several keys of one type
            return {"coordinators": [self._coordinator(key, key_type, caller) for key in body["coordinator_keys"]]}
        return self._coordinator(body["key"], key_type, caller)

    def _coordinator(self, key: str, key_type: int, caller: Caller) -> Struct:
        """A group's coordinator (key type 0) or a transactional id's (1): the same broker for the
        same key, so a transactional id and a group of the same name meet on one broker."""
        if key_type not in (_GROUP_KEY, _TRANSACTION_KEY):
            return {
                "key": key,
                "error_code": ErrorCode.INVALID_REQUEST,
                "error_message": f"no coordinator key type {key_type}: only groups (0) and transactions (1)",
                "node_id": -1,
                "host": "",
                "port": -1,
            }
        if key_type == _TRANSACTION_KEY:
            refused = self.access.transactional_id(caller, Operation.DESCRIBE, key)
        else:
            refused = self.access.group(caller, Operation.DESCRIBE, key)
        if refused is not None:
            return {"key": key, "error_code": refused, "error_message": None, "node_id": -1, "host": "", "port": -1}
        listener = caller.listener
        coordinator = self.cluster.coordinator(key)
        address = coordinator.address(listener)
        if address is None:
            return {
                "key": key,
                "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE,
                "error_message": f"broker {coordinator.id} coordinates it but has no {listener} listener",
                "node_id": -1,
                "host": "",
                "port": -1,
            }
        return {
            "key": key,
            "error_code": ErrorCode.NONE,
            "error_message": None,
            "node_id": coordinator.id,
            "host": address[0],
            "port": address[1],
        }

    # ------------------------------------------------------------------ admin

    def api_versions(self, header: RequestHeader, api: Api, body: Struct, caller: Caller) -> HandlerResult:
        return api_versions_body()

    def create_topics(self, header: RequestHeader, api: Api, body: Struct, caller: Caller) -> HandlerResult:
        results = []
        validate_only = body.get("validate_only", False)
        for request in body["create_topic_requests"]:
            topic = request["topic"]
            refused = self.access.create_topic(caller, topic)
            error, message = (refused, None) if refused is not None else self._create_topic(request, validate_only)
            result: Struct = {"topic": topic, "error_code": error, "error_message": message}
            if error == ErrorCode.NONE:  # v5+ tell what was created, with its configs (Java's admin needs them)
                result["num_partitions"] = self.cluster.partition_count(topic) or self._planned_partitions(request)
                result["replication_factor"] = 1
                result["configs"] = self.admin.created_topic_configs(request)
            results.append(result)
        return {"throttle_time_ms": 0, "topic_errors": results}

    def _planned_partitions(self, request: Struct) -> int:
        """The partitions a valid CreateTopics entry asks for (a validate-only request creates none)."""
        if request["replica_assignment"]:
            return len(request["replica_assignment"])
        return self.config.default_partitions if request["num_partitions"] == -1 else int(request["num_partitions"])

    def _create_topic(self, request: Struct, validate_only: bool) -> tuple[int, str | None]:
        topic = request["topic"]
        if not self.cluster.can_create_topics():
            return ErrorCode.POLICY_VIOLATION, "topics of a static multi-broker cluster are declared in its config"
        if self.cluster.partition_count(topic) is not None:
            return ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {topic!r} already exists"
        partitions = request["num_partitions"]
        if partitions == -1 and not request["replica_assignment"]:
            partitions = self.config.default_partitions  # KIP-464: -1 asks for the broker's default
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


def _fetch_session_error(body: Struct) -> int | None:
    """Fetch v7+ may ask for an incremental fetch session (KIP-227). We open none: a request to open
    one (id 0, epoch 0) is answered with session id 0, which tells the client to keep sending full
    fetches; a full fetch without a session (epoch -1) is what older versions do. Only a request
    naming a session, which we never gave, is an error."""
    session_id, epoch = body.get("session_id", 0), body.get("session_epoch", -1)
    if session_id != 0:
        return ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    if epoch not in (0, -1):
        return ErrorCode.INVALID_FETCH_SESSION_EPOCH
    return None


__all__ = ["NO_RESPONSE", "OffsetOutOfRangeError", "RequestHandlers"]


def _transactional_producer(record_set: Any) -> tuple[int, int] | None:
    """(producer id, epoch) of the first batch of ``record_set`` if it is a transactional record
    batch; None for anything else (checked by the log's validation when appended)."""
    if record_set is None or len(record_set) < _BATCH_HEADER_SIZE or record_set[16] != 2:
        return None
    header = bytes(record_set[:_BATCH_HEADER_SIZE])
    if not int.from_bytes(header[21:23], "big") & _TRANSACTIONAL_BIT:
        return None
    return int.from_bytes(header[43:51], "big", signed=True), int.from_bytes(header[51:53], "big", signed=True)


def _inter_broker_listener(config: BrokerConfig) -> str:
    """The listener markers to other brokers go on: the first plaintext one, else the first
    (docs/transactions.md, "Limits")."""
    listeners = config.listener_specs
    plain = [
        listener
        for listener in listeners
        if not listener.security_protocol.uses_tls and not listener.security_protocol.uses_sasl
    ]
    return (plain or list(listeners))[0].name
