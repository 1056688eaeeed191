"""Access control lists: who may do what to which topic, group or the cluster, as Kafka decides it.

Role: the model (bindings of a resource pattern to an access entry, Kafka's codes for every enum),
the filters DescribeAcls and DeleteAcls match with, and :class:`Authorizer`, which answers "may this
principal, from this host, do this operation on this resource?". Storage is
kafkalog.server.security.acl_store's; the handlers ask; nothing here knows the network.

Kafka's rules, kept exactly:
- A DENY that matches wins over any ALLOW.
- A binding matches a resource when its pattern is LITERAL and names it (or is ``*``), or PREFIXED
  and the name starts with it; its principal is the caller's or ``User:*``; its host the caller's
  address or ``*``; its operation the one asked or ALL.
- Asking to DESCRIBE is allowed by an ALLOW of READ, WRITE, DELETE or ALTER too; DESCRIBE_CONFIGS by
  ALTER_CONFIGS (Kafka's implied operations).
- Super users may do everything. With no binding that matches, the answer is ``allow_if_none``:
  True while no ACL exists at all and ``deny_by_default`` is off (a broker without ACLs stays open),
  False once any ACL exists (deny by default) or when configured.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from kafkalog.errors import KafkalogError


class AclError(KafkalogError):
    """An ACL binding or filter that cannot be stored or matched; the message names the field."""


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


CLUSTER_NAME = "kafka-cluster"
"""The one cluster resource's name (Kafka's)."""
WILDCARD = "*"

_IMPLIED_BY: dict[Operation, frozenset[Operation]] = {
    Operation.DESCRIBE: frozenset({Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.ALTER_CONFIGS}),
}
_STORABLE_RESOURCES = frozenset({ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
                                 ResourceType.TRANSACTIONAL_ID})  # fmt: skip


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    """One ACL: a resource pattern and an access entry."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: Operation
    permission: Permission

    def check(self) -> AclBinding:
        """Itself, or AclError naming the field that makes it unusable (what CreateAcls refuses)."""
        if self.resource_type not in _STORABLE_RESOURCES:
            raise AclError(f"resource type {self.resource_type.name}: only TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID")
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise AclError(f"pattern type {self.pattern_type.name}: an ACL is LITERAL or PREFIXED")
        if not self.resource_name:
            raise AclError("resource name: empty")
        if self.resource_type == ResourceType.CLUSTER and self.resource_name != CLUSTER_NAME:
            raise AclError(f"resource name {self.resource_name!r}: the cluster is named {CLUSTER_NAME!r}")
        if self.pattern_type == PatternType.PREFIXED and self.resource_name == WILDCARD:
            raise AclError("resource name '*': a wildcard is LITERAL, not PREFIXED")
        kind, colon, name = self.principal.partition(":")
        if not colon or not kind or not name:
            raise AclError(f"principal {self.principal!r}: must be TYPE:NAME (User:alice, User:*)")
        if not self.host:
            raise AclError("host: empty (use '*' for any host)")
        if self.operation in (Operation.UNKNOWN, Operation.ANY):
            raise AclError(f"operation {self.operation.name}: not an operation an ACL can grant")
        if self.permission not in (Permission.ALLOW, Permission.DENY):
            raise AclError(f"permission {self.permission.name}: ALLOW or DENY")
        return self

    def grants(self, principal: str, host: str, operation: Operation) -> bool:
        """Whether this binding's access entry applies to the caller asking for ``operation``."""
        if self.principal not in (principal, "User:*"):
            return False
        if self.host not in (host, WILDCARD):
            return False
        if self.operation in (operation, Operation.ALL):
            return True
        # an ALLOW of READ lets one DESCRIBE; a DENY of READ denies only READ
        return self.permission == Permission.ALLOW and self.operation in _IMPLIED_BY.get(operation, frozenset())

    def covers(self, resource_type: ResourceType, name: str) -> bool:
        """Whether this binding's pattern matches the resource ``name`` of ``resource_type``."""
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PatternType.LITERAL:
            return self.resource_name in (name, WILDCARD)
        return name.startswith(self.resource_name)


@dataclass(frozen=True, slots=True)
class AclFilter:
    """What DescribeAcls and DeleteAcls match: ANY (or None for a name, principal, host) matches all."""

    resource_type: ResourceType
    resource_name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: Operation
    permission: Permission

    def matches(self, binding: AclBinding) -> bool:
        if self.resource_type not in (ResourceType.ANY, binding.resource_type):
            return False
        if not self._pattern_matches(binding):
            return False
        if self.principal is not None and self.principal != binding.principal:
            return False
        if self.host is not None and self.host != binding.host:
            return False
        if self.operation not in (Operation.ANY, binding.operation):
            return False
        return self.permission in (Permission.ANY, binding.permission)

    def _pattern_matches(self, binding: AclBinding) -> bool:
        pattern, name = self.pattern_type, self.resource_name
        if pattern == PatternType.MATCH:  # every binding that would apply to the resource ``name``
            return name is None or binding.covers(binding.resource_type, name)
        if pattern not in (PatternType.ANY, binding.pattern_type):
            return False
        return name is None or name == binding.resource_name


class Authorizer:
    """Answers ``allowed`` from the bindings it holds (replaced whole by ``replace``). Thread-safe:
    the network threads read while an admin request or the store's watch replaces the set."""

    def __init__(self, super_users: Iterable[str] = (), *, deny_by_default: bool = False) -> None:
        self.super_users = frozenset(super_users)
        self.deny_by_default = deny_by_default
        self._lock = threading.Lock()
        self._bindings: tuple[AclBinding, ...] = ()
        self._by_type: dict[ResourceType, tuple[AclBinding, ...]] = {}

    @property
    def bindings(self) -> tuple[AclBinding, ...]:
        return self._bindings

    @property
    def enforcing(self) -> bool:
        """False while every request is allowed anyway (no ACL, not deny-by-default): the handlers
        skip asking."""
        return bool(self._bindings) or self.deny_by_default

    def replace(self, bindings: Iterable[AclBinding]) -> None:
        ordered = tuple(sorted(set(bindings)))
        by_type: dict[ResourceType, list[AclBinding]] = {}
        for binding in ordered:
            by_type.setdefault(binding.resource_type, []).append(binding)
        with self._lock:
            self._bindings = ordered
            self._by_type = {kind: tuple(found) for kind, found in by_type.items()}

    def allowed(self, principal: str, host: str, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        """Kafka's decision (see the module doc)."""
        if principal in self.super_users:
            return True
        candidates = [b for b in self._by_type.get(resource_type, ()) if b.covers(resource_type, name)]
        if not candidates:
            return not self.enforcing
        applicable = [b for b in candidates if b.grants(principal, host, operation)]
        if any(b.permission == Permission.DENY for b in applicable):
            return False
        return any(b.permission == Permission.ALLOW for b in applicable)
