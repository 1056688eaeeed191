"""The handlers' questions to the ACLs, answered in Kafka's error codes.

Role: one place that knows which operation on which resource each request needs (Kafka's own
choices: WRITE on a topic to produce, READ to fetch, DESCRIBE to list offsets or see metadata, READ on
a group to join or commit, CREATE on the cluster or the topic to create it, ALTER on the cluster to
change ACLs...), so a handler asks ``access.topic(caller, Operation.WRITE, topic)`` and puts the
answer where Kafka puts it: per partition, per topic, per group or for the whole request.

Invariants: while the authorizer enforces nothing (no ACL, not deny-by-default) every question is
answered "allowed" without looking at anything, so a broker without ACLs pays nothing.
"""

from __future__ import annotations

from kafkalog.protocol import ErrorCode
from kafkalog.server.caller import Caller
from kafkalog.server.security.acls import CLUSTER_NAME, Authorizer, Operation, Permission, ResourceType


class Access:
    """Asks ``authorizer`` on behalf of a caller (see the module doc)."""

    def __init__(self, authorizer: Authorizer) -> None:
        self.authorizer = authorizer

    def may(self, caller: Caller, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        if not self.authorizer.enforcing and caller.principal not in self.authorizer.super_users:
            return True
        return self.authorizer.allowed(caller.principal, caller.host, operation, resource_type, name)

    def topic(self, caller: Caller, operation: Operation, topic: str) -> ErrorCode | None:
        """None if allowed, else TOPIC_AUTHORIZATION_FAILED."""
        if self.may(caller, operation, ResourceType.TOPIC, topic):
            return None
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED

    def group(self, caller: Caller, operation: Operation, group: str) -> ErrorCode | None:
        """None if allowed, else GROUP_AUTHORIZATION_FAILED."""
        if self.may(caller, operation, ResourceType.GROUP, group):
            return None
        return ErrorCode.GROUP_AUTHORIZATION_FAILED

    def transactional_id(self, caller: Caller, operation: Operation, transactional_id: str) -> ErrorCode | None:
        """None if allowed, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED."""
        if self.may(caller, operation, ResourceType.TRANSACTIONAL_ID, transactional_id):
            return None
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

    def cluster(self, caller: Caller, operation: Operation) -> ErrorCode | None:
        """None if allowed, else CLUSTER_AUTHORIZATION_FAILED."""
        if self.may(caller, operation, ResourceType.CLUSTER, CLUSTER_NAME):
            return None
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED

    def create_topic(self, caller: Caller, topic: str) -> ErrorCode | None:
        """CREATE on the cluster, or on the topic itself (Kafka allows either)."""
        if self.cluster(caller, Operation.CREATE) is None:
            return None
        return self.topic(caller, Operation.CREATE, topic)

    def idempotent_write(self, caller: Caller) -> ErrorCode | None:
        """IDEMPOTENT_WRITE on the cluster, or WRITE allowed on some topic (KIP-679: a principal
        that may write anywhere may get a producer id)."""
        if self.cluster(caller, Operation.IDEMPOTENT_WRITE) is None:
            return None
        for binding in self.authorizer.bindings:
            if (
                binding.resource_type == ResourceType.TOPIC
                and binding.permission == Permission.ALLOW
                and binding.operation in (Operation.WRITE, Operation.ALL)
                and binding.grants(caller.principal, caller.host, binding.operation)
            ):
                return None
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
