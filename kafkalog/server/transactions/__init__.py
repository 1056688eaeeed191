"""Kafka's transaction coordinator (KIP-98, transaction version 1): each transactional id's producer
id and epoch, the partitions and groups of its open transaction, the two-phase end (prepare, markers,
complete), timeouts and fencing. The state is stored whole before any answer that depends on it."""

from kafkalog.server.transactions.coordinator import TransactionCoordinator
from kafkalog.server.transactions.state import TransactionMetadata, TxnState

__all__ = ["TransactionCoordinator", "TransactionMetadata", "TxnState"]
