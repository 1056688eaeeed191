"""One transactional id's state, as the coordinator keeps and stores it.

The states and their order are Kafka's (TransactionState in Kafka's coordinator):

    Empty -> Ongoing -> PrepareCommit -> CompleteCommit -> Ongoing ...
                     -> PrepareAbort  -> CompleteAbort  -> Ongoing ...

``Ongoing`` holds the partitions and groups added since the transaction began. ``Prepare*`` is the
decision, stored before any marker is written: once it is stored the outcome is fixed, and a
coordinator restarted in it writes the markers again (a marker written twice is harmless: the
second finds no open transaction). ``Complete*`` is stored once every marker is written; only then
may the producer begin its next transaction.

Every field is a plain value, so a record round-trips through JSON (``to_json``/``from_json``) and
is written whole by the store.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from kafkalog.errors import KafkalogError

FORMAT_VERSION = 1
NO_PRODUCER_ID = -1
NO_EPOCH = -1
MAX_EPOCH = 32767
"""Kafka's producer epoch is an int16; an id whose epoch would pass 32766 gets a new producer id."""


class TransactionRecordError(KafkalogError):
    """A stored transaction record cannot be read."""


class CoordinatorFencedError(KafkalogError):
    """A newer coordinator of the id has taken it up (stored its state, or written its markers):
    this one must let the id go."""

    error_code = 16  # NOT_COORDINATOR: the client finds the coordinator again


class TxnState(enum.Enum):
    """Kafka's transaction states; the value is the name DescribeTransactions and ListTransactions
    answer with and ``kafka-transactions`` prints."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"

    @property
    def preparing(self) -> bool:
        """Markers are being written: the id takes no new request but InitProducerId's retry."""
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def ended(self) -> bool:
        """No transaction is open: the next AddPartitionsToTxn or AddOffsetsToTxn begins one."""
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


@dataclass
class TransactionMetadata:
    """A transactional id's producer and its open transaction. The coordinator mutates it under
    its lock and stores it whole after each change."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    """The partitions added to the open transaction (or, in Prepare*, those the markers go to)."""
    groups: set[str] = field(default_factory=set)
    """The consumer groups whose offsets the transaction commits (AddOffsetsToTxn)."""
    start_ms: int = -1
    """When the open transaction began (its first AddPartitionsToTxn/AddOffsetsToTxn); -1: none."""
    update_ms: int = 0
    """The last change (an id idle for ``transactional_id_expiration_ms`` is forgotten)."""
    last_epoch: int = NO_EPOCH
    """The epoch before the last bump that a producer may still ask about with KIP-360's
    InitProducerId (its own bump, or the coordinator's abort of its transaction); NO_EPOCH after a
    new instance's InitProducerId, so no older instance can pass for the current one."""
    coordinator_epoch: int = 0
    """Raised each time a coordinator takes the id up (a restart, a failover) and carried by its
    markers: a partition refuses the markers of a coordinator older than the last it heard from
    (TRANSACTION_COORDINATOR_FENCED), and the store refuses its writes."""

    @property
    def committing(self) -> bool:
        return self.state in (TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT)

    def to_json(self) -> dict[str, Any]:
        return {
            "format_version": FORMAT_VERSION,
            "transactional_id": self.transactional_id,
            "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
            "last_epoch": self.last_epoch,
            "timeout_ms": self.timeout_ms,
            "state": self.state.value,
            "partitions": sorted([topic, partition] for topic, partition in self.partitions),
            "groups": sorted(self.groups),
            "start_ms": self.start_ms,
            "update_ms": self.update_ms,
            "coordinator_epoch": self.coordinator_epoch,
        }

    @classmethod
    def from_json(cls, document: Any) -> TransactionMetadata:
        """A record from ``to_json``'s document; TransactionRecordError for anything else."""
        try:
            if document.get("format_version") != FORMAT_VERSION:
                raise ValueError(f"unknown format_version {document.get('format_version')!r}")
            return cls(
                transactional_id=str(document["transactional_id"]),
                producer_id=int(document["producer_id"]),
                producer_epoch=int(document["producer_epoch"]),
                last_epoch=int(document["last_epoch"]),
                timeout_ms=int(document["timeout_ms"]),
                state=TxnState(document["state"]),
                partitions={(str(topic), int(partition)) for topic, partition in document["partitions"]},
                groups={str(group) for group in document["groups"]},
                start_ms=int(document["start_ms"]),
                update_ms=int(document["update_ms"]),
                coordinator_epoch=int(document["coordinator_epoch"]),
            )
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise TransactionRecordError(f"a transaction record is unreadable: {exc!r}") from exc
