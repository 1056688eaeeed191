"""The transaction APIs' handlers: each request checked (who may, which broker), then handed to the
transaction coordinator (kafkalog.server.transactions), the logs (markers, producers) or the
transactional offsets' store, and its answer shaped for the request's version.

Who may (Kafka's rules): WRITE on the TransactionalId for InitProducerId, AddPartitionsToTxn (and
WRITE on each topic), AddOffsetsToTxn (and READ on the group), EndTxn and TxnOffsetCommit (and READ on
the group and its topics); DESCRIBE on it for FindCoordinator and DescribeTransactions (ListTransactions
lists only those); CLUSTER_ACTION for WriteTxnMarkers and for AddPartitionsToTxn v4+ (brokers' requests);
READ on the topic for DescribeProducers.

PRODUCER_FENCED (90) came with KIP-588; clients of the versions before it (InitProducerId < 4,
AddPartitionsToTxn, AddOffsetsToTxn and EndTxn < 2, TxnOffsetCommit < 3) are told
INVALID_PRODUCER_EPOCH instead, as Kafka does.
"""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from typing import Any

from kafkalog.errors import KafkalogError
from kafkalog.log import LogManager
from kafkalog.protocol import Api, ApiKey, ErrorCode, RequestHeader
from kafkalog.protocol.types import Struct
from kafkalog.server.caller import Caller
from kafkalog.server.cluster.offsets import GroupOffsetStore
from kafkalog.server.cluster.view import ClusterView
from kafkalog.server.groups import GroupCoordinator
from kafkalog.server.security.access import Access
from kafkalog.server.security.acls import Operation
from kafkalog.server.transactions import TransactionCoordinator, TxnState
from kafkalog.server.transactions.markers import OFFSETS_TOPIC, end_group_offsets
from kafkalog.server.transactions.store import TransactionStore

logger = logging.getLogger(__name__)

_FENCED_SINCE = {
    ApiKey.INIT_PRODUCER_ID: 4,
    ApiKey.ADD_PARTITIONS_TO_TXN: 2,
    ApiKey.ADD_OFFSETS_TO_TXN: 2,
    ApiKey.END_TXN: 2,
    ApiKey.TXN_OFFSET_COMMIT: 3,
}
_BATCHED_ADD_PARTITIONS_VERSION = 4
_MAX_OFFSET_METADATA = 4096
_MAX_PATTERN = 256
"""ListTransactions' regular expression runs on a handler thread: a long one is refused (a short
one can still be slow: only those allowed to describe transactional ids send it)."""


def for_version(api: Api, error: int) -> int:
    """``error`` as a client of ``api``'s version knows it (see the module doc)."""
    if error == ErrorCode.PRODUCER_FENCED and api.version < _FENCED_SINCE.get(api.key, 0):
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error


class TransactionHandlers:
    """The transaction APIs (see the module doc). Thread-safe as its components are."""

    def __init__(
        self,
        coordinator: TransactionCoordinator,
        store: TransactionStore,
        logs: LogManager,
        cluster: ClusterView,
        offsets: GroupOffsetStore,
        groups: GroupCoordinator,
        access: Access,
    ) -> None:
        self.coordinator = coordinator
        self.store = store
        self.logs = logs
        self.cluster = cluster
        self.offsets = offsets
        self.groups = groups
        self.access = access

    def transactional_id(self, caller: Caller, operation: Operation, transactional_id: str) -> ErrorCode | None:
        return self.access.transactional_id(caller, operation, transactional_id)

    # ------------------------------------------------------------------ InitProducerId

    def init_producer_id(self, api: Api, body: Struct, caller: Caller) -> Struct:
        transactional_id = body["transactional_id"]
        if not transactional_id:
            return {"error_code": ErrorCode.INVALID_REQUEST}  # an empty transactional id, as Kafka refuses it
        refused = self.transactional_id(caller, Operation.WRITE, transactional_id)
        if refused is not None:
            return {"error_code": refused}
        answer = self.coordinator.init_producer_id(
            transactional_id,
            body["transaction_timeout_ms"],
            body.get("producer_id", -1),
            body.get("producer_epoch", -1),
        )
        return {
            "error_code": for_version(api, answer.error),
            "producer_id": answer.producer_id,
            "producer_epoch": answer.producer_epoch,
        }

    # ------------------------------------------------------------------ AddPartitionsToTxn

    def add_partitions_to_txn(self, header: RequestHeader, api: Api, body: Struct, caller: Caller) -> Struct:
        if api.version < _BATCHED_ADD_PARTITIONS_VERSION:
            results = self._add_partitions(
                api,
                caller,
                body["v3_and_below_transactional_id"],
                body["v3_and_below_producer_id"],
                body["v3_and_below_producer_epoch"],
                body["v3_and_below_topics"],
                verify_only=False,
            )
            return {"results_by_topic_v3_and_below": results}
        refused = self.access.cluster(caller, Operation.CLUSTER_ACTION)
        if refused is not None:
            return {"error_code": refused, "results_by_transaction": []}
        by_transaction = [
            {
                "transactional_id": txn["transactional_id"],
                "topic_results": self._add_partitions(
                    api,
                    caller,
                    txn["transactional_id"],
                    txn["producer_id"],
                    txn["producer_epoch"],
                    txn["topics"],
                    verify_only=txn["verify_only"],
                ),
            }
            for txn in body["transactions"]
        ]
        return {"error_code": ErrorCode.NONE, "results_by_transaction": by_transaction}

    def _add_partitions(
        self,
        api: Api,
        caller: Caller,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        topics: list[Struct],
        *,
        verify_only: bool,
    ) -> list[Struct]:
        wanted = [(t["name"], p) for t in topics for p in t["partitions"]]
        errors: dict[tuple[str, int], int] = {}
        refused = self.transactional_id(caller, Operation.WRITE, transactional_id) if transactional_id else None
        if not transactional_id:
            refused = ErrorCode.INVALID_REQUEST
        if refused is not None:
            errors = dict.fromkeys(wanted, refused)
        else:
            for topic, partition in wanted:
                denied = self.access.topic(caller, Operation.WRITE, topic)
                count = self.cluster.partition_count(topic)
                if denied is not None:
                    errors[(topic, partition)] = denied
                elif count is None or not 0 <= partition < count:
                    errors[(topic, partition)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if errors:  # nothing is added when one partition is refused (Kafka's rule)
                for key in wanted:
                    errors.setdefault(key, ErrorCode.OPERATION_NOT_ATTEMPTED)
            elif verify_only:
                errors = self.coordinator.verify(transactional_id, producer_id, epoch, wanted)
            else:
                error = self.coordinator.add_partitions(transactional_id, producer_id, epoch, wanted)
                errors = dict.fromkeys(wanted, for_version(api, error))
        by_topic: dict[str, list[Struct]] = defaultdict(list)
        for (topic, partition), error in errors.items():
            by_topic[topic].append({"partition_index": partition, "partition_error_code": error})
        return [{"name": topic, "results_by_partition": results} for topic, results in by_topic.items()]

    # ------------------------------------------------------------------ AddOffsetsToTxn, EndTxn

    def add_offsets_to_txn(self, header: RequestHeader, api: Api, body: Struct, caller: Caller) -> Struct:
        transactional_id, group = body["transactional_id"], body["group_id"]
        if not transactional_id or not group:
            return {"error_code": ErrorCode.INVALID_REQUEST}
        refused = self.transactional_id(caller, Operation.WRITE, transactional_id) or self.access.group(
            caller, Operation.READ, group
        )
        if refused is not None:
            return {"error_code": refused}
        error = self.coordinator.add_group(transactional_id, body["producer_id"], body["producer_epoch"], group)
        return {"error_code": for_version(api, error)}

    def end_txn(self, header: RequestHeader, api: Api, body: Struct, caller: Caller) -> Struct:
        transactional_id = body["transactional_id"]
        if not transactional_id:
            return {"error_code": ErrorCode.INVALID_REQUEST}
        refused = self.transactional_id(caller, Operation.WRITE, transactional_id)
        if refused is not None:
            return {"error_code": refused}
        error = self.coordinator.end_transaction(
            transactional_id, body["producer_id"], body["producer_epoch"], commit=body["committed"]
        )
        return {"error_code": for_version(api, error)}

    # ------------------------------------------------------------------ TxnOffsetCommit

    def txn_offset_commit(self, header: RequestHeader, api: Api, body: Struct, caller: Caller) -> Struct:
        """A transaction's offsets for a group, kept aside until its marker (the group's coordinator's
        part). A member's generation is checked like OffsetCommit's (KIP-447; a commit naming no
        member is not, as Kafka leaves transactional commits unchecked then); where this broker
        coordinates the transactional id too, the commit must belong to the producer's open
        transaction (its epoch, the group added by AddOffsetsToTxn)."""
        group, producer_id, epoch = body["group_id"], body["producer_id"], body["producer_epoch"]
        transactional_id = body["transactional_id"]
        group_error: int | None = None
        if not transactional_id or not group:
            group_error = ErrorCode.INVALID_REQUEST
        else:
            group_error = self.transactional_id(caller, Operation.WRITE, transactional_id) or self.access.group(
                caller, Operation.READ, group
            )
        if group_error is None and not self.cluster.coordinates(group):
            group_error = ErrorCode.NOT_COORDINATOR
        generation, member = body.get("generation_id", -1), body.get("member_id", "")
        instance = body.get("group_instance_id")
        if group_error is None and (generation >= 0 or member or instance is not None):
            fenced = self.groups.commit_error(group, generation, member, instance)
            group_error = fenced or None
        if group_error is None and self.cluster.coordinates(transactional_id):
            unverified = self.coordinator.verify_group(transactional_id, producer_id, epoch, group)
            if unverified == ErrorCode.PRODUCER_FENCED:
                unverified = ErrorCode.INVALID_PRODUCER_EPOCH  # what Kafka's group coordinator answers
            group_error = unverified or None
        staged: dict[tuple[str, int], tuple[int, str | None]] = {}
        topics = []
        for topic in body["topics"]:
            count = self.cluster.partition_count(topic["name"])
            denied = self.access.topic(caller, Operation.READ, topic["name"])
            answers = []
            for partition in topic["partitions"]:
                index = partition["partition_index"]
                error: int = group_error or denied or ErrorCode.NONE
                if error == ErrorCode.NONE:
                    metadata = partition["committed_metadata"]
                    if count is None or not 0 <= index < count:
                        error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    elif metadata is not None and len(metadata) > _MAX_OFFSET_METADATA:
                        error = ErrorCode.OFFSET_METADATA_TOO_LARGE
                    else:
                        staged[(topic["name"], index)] = (partition["committed_offset"], metadata)
                answers.append({"partition_index": index, "error_code": error})
            topics.append({"name": topic["name"], "partitions": answers})
        if staged:
            try:
                self.store.stage_offsets(group, producer_id, epoch, staged)
            except KafkalogError as exc:
                logger.warning("cannot keep the transactional offsets of group %s: %s", group, exc)
                code = int(getattr(exc, "error_code", ErrorCode.COORDINATOR_NOT_AVAILABLE))
                for topic_answer in topics:
                    for answer in topic_answer["partitions"]:
                        if answer["error_code"] == ErrorCode.NONE:
                            answer["error_code"] = code
        return {"topics": topics}

    def unstable_partitions(self, group: str) -> set[tuple[str, int]]:
        """The partitions of ``group`` with offsets of a transaction not ended yet (OffsetFetch's
        require_stable answers UNSTABLE_OFFSET_COMMIT for them)."""
        try:
            staged = self.store.staged_offsets(group)
        except KafkalogError:
            return set()
        return {key for offsets in staged.values() for key in offsets}

    # ------------------------------------------------------------------ WriteTxnMarkers

    def write_txn_markers(self, header: RequestHeader, api: Api, body: Struct, caller: Caller) -> Struct:
        """Markers from a coordinator (or from ``kafka-transactions abort``): each appended to the
        partitions this broker leads; a marker for ``__consumer_offsets`` ends the producer's staged
        group offsets kept here."""
        refused = self.access.cluster(caller, Operation.CLUSTER_ACTION)
        answers = []
        for marker in body["markers"]:
            producer_id, epoch, commit = marker["producer_id"], marker["producer_epoch"], marker["transaction_result"]
            topics = []
            for topic in marker["topics"]:
                partitions = []
                for partition in topic["partition_indexes"]:
                    error = refused or self._write_marker(topic["name"], partition, producer_id, epoch, commit, marker)
                    partitions.append({"partition_index": partition, "error_code": error})
                topics.append({"name": topic["name"], "partitions": partitions})
            answers.append({"producer_id": producer_id, "topics": topics})
        return {"markers": answers}

    def _write_marker(
        self, topic: str, partition: int, producer_id: int, epoch: int, commit: bool, marker: Struct
    ) -> int:
        if producer_id < 0 or epoch < 0:
            return ErrorCode.INVALID_REQUEST  # a marker names the producer it ends
        if topic == OFFSETS_TOPIC:
            try:
                end_group_offsets(self.store, self.offsets, producer_id, epoch, commit=commit)
            except KafkalogError as exc:
                logger.warning("cannot end producer %d's group offsets: %s", producer_id, exc)
                return ErrorCode.COORDINATOR_NOT_AVAILABLE
            return ErrorCode.NONE
        problem = self.cluster.partition_error(topic, partition)
        log = self.logs.get_log(topic, partition)
        if problem is not None or log is None:
            return problem or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        try:
            log.append_marker(producer_id, epoch, commit=commit, coordinator_epoch=marker["coordinator_epoch"])
        except KafkalogError as exc:
            logger.warning("marker of producer %d to %s-%d refused: %s", producer_id, topic, partition, exc)
            return int(getattr(exc, "error_code", ErrorCode.UNKNOWN_SERVER_ERROR))
        return ErrorCode.NONE

    # ------------------------------------------------------------------ describing

    def describe_producers(self, header: RequestHeader, api: Api, body: Struct, caller: Caller) -> Struct:
        topics = []
        for topic in body["topics"]:
            denied = self.access.topic(caller, Operation.READ, topic["name"])
            partitions = []
            for partition in topic["partition_indexes"]:
                answer: dict[str, Any] = {
                    "partition_index": partition,
                    "error_code": ErrorCode.NONE,
                    "error_message": None,
                }
                problem = denied or self.cluster.partition_error(topic["name"], partition)
                log = self.logs.get_log(topic["name"], partition)
                if problem is not None or log is None:
                    answer["error_code"] = problem or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    answer["active_producers"] = []
                else:
                    answer["active_producers"] = [
                        {
                            "producer_id": state.producer_id,
                            "producer_epoch": state.epoch,
                            "last_sequence": state.last_sequence,
                            "last_timestamp": state.last_timestamp,
                            "coordinator_epoch": state.coordinator_epoch,
                            "current_txn_start_offset": state.current_txn_start_offset,
                        }
                        for state in log.producer_states()
                    ]
                partitions.append(answer)
            topics.append({"name": topic["name"], "partitions": partitions})
        return {"topics": topics}

    def describe_transactions(self, header: RequestHeader, api: Api, body: Struct, caller: Caller) -> Struct:
        states = []
        for transactional_id in body["transactional_ids"]:
            error: int | None = self.transactional_id(caller, Operation.DESCRIBE, transactional_id)
            record = None
            if error is None:
                error, record = self.coordinator.describe(transactional_id)
            if record is None:
                states.append({"error_code": error, "transactional_id": transactional_id})
                continue
            by_topic: dict[str, list[int]] = defaultdict(list)
            for topic, partition in sorted(record.partitions):
                by_topic[topic].append(partition)
            states.append(
                {
                    "error_code": ErrorCode.NONE,
                    "transactional_id": transactional_id,
                    "transaction_state": record.state.value,
                    "transaction_timeout_ms": record.timeout_ms,
                    "transaction_start_time_ms": record.start_ms,
                    "producer_id": record.producer_id,
                    "producer_epoch": record.producer_epoch,
                    "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
                }
            )
        return {"transaction_states": states}

    def list_transactions(self, header: RequestHeader, api: Api, body: Struct, caller: Caller) -> Struct:
        known = {state.value for state in TxnState}
        wanted_states = set(body["state_filters"] or ())
        wanted_producers = set(body["producer_id_filters"] or ())
        min_duration = body.get("duration_filter", -1)
        pattern = body.get("transactional_id_pattern")
        if pattern is not None and len(pattern) > _MAX_PATTERN:
            logger.warning("ListTransactions with a pattern of %d characters (at most %d)", len(pattern), _MAX_PATTERN)
            return {"error_code": ErrorCode.INVALID_REQUEST, "unknown_state_filters": [], "transaction_states": []}
        try:
            matcher = re.compile(pattern) if pattern else None
        except re.error as exc:
            logger.warning("ListTransactions with an invalid pattern %r: %s", pattern, exc)
            return {"error_code": ErrorCode.INVALID_REQUEST, "unknown_state_filters": [], "transaction_states": []}
        now = self.coordinator.clock()
        listed = []
        for record in self.coordinator.listed():
            if wanted_states and record.state.value not in wanted_states:
                continue
            if wanted_producers and record.producer_id not in wanted_producers:
                continue
            if min_duration >= 0 and (record.start_ms < 0 or now - record.start_ms < min_duration):
                continue
            if matcher is not None and not matcher.fullmatch(record.transactional_id):
                continue
            if self.transactional_id(caller, Operation.DESCRIBE, record.transactional_id) is not None:
                continue
            listed.append(
                {
                    "transactional_id": record.transactional_id,
                    "producer_id": record.producer_id,
                    "transaction_state": record.state.value,
                }
            )
        return {
            "error_code": ErrorCode.NONE,
            "unknown_state_filters": sorted(wanted_states - known),
            "transaction_states": listed,
        }
