"""Writing a transaction's markers where its data is: a control batch at the end of every partition
of the transaction, and the end of its offsets in every group it committed offsets for.

A partition this broker leads gets its marker appended to its log here; a partition another broker
leads gets it through that broker's WriteTxnMarkers (Kafka's inter-broker request), sent on the
broker's first listener. A group's transactional offsets are ended by whoever can reach them: with
ZooKeeper every broker can (the store is shared); without, the group's coordinator is sent a
WriteTxnMarkers for ``__consumer_offsets`` (as Kafka sends its markers to the group's offsets
partition), which ends every group's offsets staged by the producer there.

A marker that cannot be written now (a broker down, no leader) is left for the coordinator to retry;
writing one twice is harmless (the second finds no open transaction).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable

from kafkalog.client.connection import BrokerConnection
from kafkalog.errors import KafkalogError
from kafkalog.log import LogManager
from kafkalog.log.faults import crash_point
from kafkalog.protocol import ApiKey, ErrorCode
from kafkalog.server.cluster.offsets import GroupOffsetStore
from kafkalog.server.cluster.view import ClusterView
from kafkalog.server.transactions.coordinator import Targets
from kafkalog.server.transactions.state import CoordinatorFencedError
from kafkalog.server.transactions.store import TransactionStore

logger = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
"""The topic a marker for a group's offsets names (Kafka's offsets topic; kafkalog has no such log)."""
_REMOTE_TIMEOUT_MS = 10_000
_DONE = (ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_PRODUCER_EPOCH)
"""A marker answered with these is written, or has nothing left to end (the topic was deleted; the
partition has seen a newer epoch of the producer, whose transaction there ended)."""


def end_group_offsets(
    store: TransactionStore,
    offsets: GroupOffsetStore,
    producer_id: int,
    epoch: int,
    *,
    commit: bool,
    groups: list[str] | None = None,
) -> None:
    """End ``producer_id``'s staged offsets of ``groups`` (None: of every group it staged for); a
    commit applies only those staged with ``epoch``."""
    for group in groups if groups is not None else store.groups_staged_by(producer_id):
        store.end_offsets(group, producer_id, epoch, commit=commit, into=offsets)


class BrokerMarkers:
    """The broker's MarkerWriter (kafkalog.server.transactions.coordinator)."""

    def __init__(
        self,
        broker_id: int,
        logs: LogManager,
        cluster: ClusterView,
        store: TransactionStore,
        offsets: GroupOffsetStore,
        *,
        shared_offsets: bool,
        listener: str,
        on_written: Callable[[], None] = lambda: None,
    ) -> None:
        self.broker_id = broker_id
        self.logs = logs
        self.cluster = cluster
        self.store = store
        self.offsets = offsets
        self.shared_offsets = shared_offsets
        """Whether every broker reaches every group's staged offsets (ZooKeeper)."""
        self.listener = listener
        self.on_written = on_written
        """Called after markers were appended here: parked read-committed fetches may now answer."""

    def write(
        self, producer_id: int, producer_epoch: int, *, commit: bool, coordinator_epoch: int, targets: Targets
    ) -> Targets:
        left_partitions: set[tuple[str, int]] = set()
        left_groups: set[str] = set()
        remote: dict[int, list[tuple[str, int]]] = defaultdict(list)
        appended = False
        for topic, partition in sorted(targets.partitions):
            leader, _ = self.cluster.leader_id(topic, partition)
            if leader == self.broker_id:
                if self._append(topic, partition, producer_id, producer_epoch, commit, coordinator_epoch):
                    appended = True
                else:
                    left_partitions.add((topic, partition))
                # a crash here leaves the decision written to some partitions and not others: the
                # stored Prepare* makes the restarted coordinator write it everywhere
                crash_point("txn.markers.after_append")
            elif leader < 0:
                if self.cluster.partition_count(topic) is None:
                    continue  # the topic is gone: nothing to end
                left_partitions.add((topic, partition))
            else:
                remote[leader].append((topic, partition))
        if appended:
            self.on_written()
        group_coordinators: dict[int, list[str]] = defaultdict(list)
        for group in sorted(targets.groups):
            if self.shared_offsets or self.cluster.coordinates(group):
                try:
                    end_group_offsets(
                        self.store, self.offsets, producer_id, producer_epoch, commit=commit, groups=[group]
                    )
                except KafkalogError as exc:
                    logger.warning("cannot end producer %d's offsets of group %s: %s", producer_id, group, exc)
                    left_groups.add(group)
            else:
                group_coordinators[self.cluster.coordinator(group).id].append(group)
        for broker_id in sorted(set(remote) | set(group_coordinators)):
            partitions = remote.get(broker_id, [])
            groups = group_coordinators.get(broker_id, [])
            written = self._send(
                broker_id, producer_id, producer_epoch, commit, coordinator_epoch, partitions, bool(groups)
            )
            left_partitions.update(p for p in partitions if p not in written)
            if groups and (OFFSETS_TOPIC, 0) not in written:
                left_groups.update(groups)
        return Targets(frozenset(left_partitions), frozenset(left_groups))

    def _append(
        self, topic: str, partition: int, producer_id: int, epoch: int, commit: bool, coordinator_epoch: int
    ) -> bool:
        log = self.logs.get_log(topic, partition)
        if log is None:
            return True  # deleted with its topic
        try:
            log.append_marker(producer_id, epoch, commit=commit, coordinator_epoch=coordinator_epoch)
        except KafkalogError as exc:
            if getattr(exc, "error_code", None) == ErrorCode.TRANSACTION_COORDINATOR_FENCED:
                raise CoordinatorFencedError(f"{topic}-{partition}: {exc}") from exc
            if getattr(exc, "error_code", None) == ErrorCode.INVALID_PRODUCER_EPOCH:
                # the partition has seen a newer epoch of the producer: its transaction there ended
                logger.warning(
                    "marker of producer %d epoch %d to %s-%d is stale: %s", producer_id, epoch, topic, partition, exc
                )
                return True
            logger.warning("cannot write the marker of producer %d to %s-%d: %s", producer_id, topic, partition, exc)
            return False
        return True

    def _send(
        self,
        broker_id: int,
        producer_id: int,
        epoch: int,
        commit: bool,
        coordinator_epoch: int,
        partitions: list[tuple[str, int]],
        groups: bool,
    ) -> set[tuple[str, int]]:
        """WriteTxnMarkers to ``broker_id``; the partitions whose marker it wrote."""
        broker = next((b for b in self.cluster.brokers if b.id == broker_id), None)
        address = broker.address(self.listener) if broker is not None else None
        if address is None:
            return set()
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, partition in partitions:
            by_topic[topic].append(partition)
        if groups:
            by_topic[OFFSETS_TOPIC].append(0)
        marker = {
            "producer_id": producer_id,
            "producer_epoch": epoch,
            "transaction_result": commit,
            "topics": [{"name": t, "partition_indexes": ps} for t, ps in sorted(by_topic.items())],
            "coordinator_epoch": coordinator_epoch,
        }
        connection = BrokerConnection(
            address[0], address[1], client_id=f"kafkalog-broker-{self.broker_id}", timeout_ms=_REMOTE_TIMEOUT_MS
        )
        try:
            answer = connection.request(connection.api(ApiKey.WRITE_TXN_MARKERS), {"markers": [marker]})
        except (KafkalogError, OSError) as exc:
            logger.warning("cannot send markers of producer %d to broker %d: %s", producer_id, broker_id, exc)
            return set()
        finally:
            connection.close()
        written = set()
        for result in answer["markers"]:
            for topic in result["topics"]:
                for partition in topic["partitions"]:
                    if partition["error_code"] == ErrorCode.TRANSACTION_COORDINATOR_FENCED:
                        raise CoordinatorFencedError(f"broker {broker_id} has heard from a newer coordinator")
                    if partition["error_code"] in _DONE:
                        written.add((topic["name"], partition["partition_index"]))
        return written
