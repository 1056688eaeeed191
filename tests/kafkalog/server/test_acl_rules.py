"""The ACL rules as Kafka decides them (kafkalog.server.security.acls) and their file
(kafkalog.server.security.acl_store)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from kafkalog.server.security.acl_store import FileAclStore
from kafkalog.server.security.acls import (
    AclBinding,
    AclError,
    AclFilter,
    Authorizer,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)

pytestmark = pytest.mark.unit

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY


def acl(
    name: str, operation: Operation, permission: Permission = ALLOW, *, principal: str = "User:alice",
    kind: ResourceType = TOPIC, pattern: PatternType = LITERAL, host: str = "*",
) -> AclBinding:  # fmt: skip
    return AclBinding(kind, name, pattern, principal, host, operation, permission).check()


def authorizer(*bindings: AclBinding, super_users: tuple[str, ...] = (), deny: bool = False) -> Authorizer:
    made = Authorizer(super_users, deny_by_default=deny)
    made.replace(bindings)
    return made


def test_without_any_acl_everything_is_allowed_unless_deny_by_default() -> None:
    assert authorizer().allowed("User:anyone", "10.0.0.1", Operation.WRITE, TOPIC, "orders")
    assert not authorizer().enforcing
    locked = authorizer(deny=True, super_users=("User:admin",))
    assert not locked.allowed("User:anyone", "10.0.0.1", Operation.WRITE, TOPIC, "orders")
    assert locked.allowed("User:admin", "10.0.0.1", Operation.ALTER, CLUSTER, "kafka-cluster")


def test_once_one_acl_exists_what_none_allows_is_denied() -> None:
    rules = authorizer(acl("orders", Operation.WRITE))
    assert rules.allowed("User:alice", "h", Operation.WRITE, TOPIC, "orders")
    assert not rules.allowed("User:bob", "h", Operation.WRITE, TOPIC, "orders")  # not his
    assert not rules.allowed("User:alice", "h", Operation.READ, TOPIC, "orders")  # not that operation
    assert not rules.allowed("User:alice", "h", Operation.WRITE, TOPIC, "payments")  # no ACL: denied now
    assert not rules.allowed("User:alice", "h", Operation.READ, GROUP, "g")


def test_a_deny_wins_over_any_allow_and_wildcards_and_hosts_match() -> None:
    rules = authorizer(
        acl("*", Operation.ALL, principal="User:*"),
        acl("secrets", Operation.READ, DENY, principal="User:*", host="10.0.0.9"),
        acl("secrets", Operation.READ, DENY, principal="User:bob"),
    )
    assert rules.allowed("User:alice", "10.0.0.1", Operation.READ, TOPIC, "secrets")
    assert not rules.allowed("User:alice", "10.0.0.9", Operation.READ, TOPIC, "secrets")  # from that host
    assert not rules.allowed("User:bob", "10.0.0.1", Operation.READ, TOPIC, "secrets")
    assert rules.allowed("User:bob", "10.0.0.1", Operation.WRITE, TOPIC, "secrets")  # a DENY of READ only
    assert rules.allowed("User:bob", "10.0.0.1", Operation.DESCRIBE, TOPIC, "secrets")  # ... denies no DESCRIBE


def test_prefixed_patterns_and_implied_operations() -> None:
    rules = authorizer(
        acl("pay", Operation.READ, pattern=PREFIXED), acl("alice-", Operation.READ, kind=GROUP, pattern=PREFIXED),
        acl("configs", Operation.ALTER_CONFIGS),
    )  # fmt: skip
    assert rules.allowed("User:alice", "h", Operation.READ, TOPIC, "payments")
    assert rules.allowed("User:alice", "h", Operation.DESCRIBE, TOPIC, "payments")  # READ implies DESCRIBE
    assert not rules.allowed("User:alice", "h", Operation.READ, TOPIC, "repay")
    assert rules.allowed("User:alice", "h", Operation.READ, GROUP, "alice-loader")
    assert not rules.allowed("User:alice", "h", Operation.READ, GROUP, "bob-loader")
    assert rules.allowed("User:alice", "h", Operation.DESCRIBE_CONFIGS, TOPIC, "configs")  # implied
    assert not rules.allowed("User:alice", "h", Operation.ALTER, TOPIC, "configs")


@pytest.mark.parametrize(
    ("binding", "reason"),
    [
        (AclBinding(ResourceType.ANY, "x", LITERAL, "User:a", "*", Operation.READ, ALLOW), "resource type ANY"),
        (AclBinding(TOPIC, "x", PatternType.MATCH, "User:a", "*", Operation.READ, ALLOW), "pattern type MATCH"),
        (AclBinding(TOPIC, "", LITERAL, "User:a", "*", Operation.READ, ALLOW), "resource name: empty"),
        (AclBinding(CLUSTER, "c", LITERAL, "User:a", "*", Operation.ALTER, ALLOW), "named 'kafka-cluster'"),
        (AclBinding(TOPIC, "*", PREFIXED, "User:a", "*", Operation.READ, ALLOW), "a wildcard is LITERAL"),
        (AclBinding(TOPIC, "x", LITERAL, "alice", "*", Operation.READ, ALLOW), "must be TYPE:NAME"),
        (AclBinding(TOPIC, "x", LITERAL, "User:a", "", Operation.READ, ALLOW), "host: empty"),
        (AclBinding(TOPIC, "x", LITERAL, "User:a", "*", Operation.ANY, ALLOW), "operation ANY"),
        (AclBinding(TOPIC, "x", LITERAL, "User:a", "*", Operation.READ, Permission.ANY), "permission ANY"),
    ],
)
def test_unusable_bindings_are_refused_naming_the_field(binding: AclBinding, reason: str) -> None:
    with pytest.raises(AclError, match=reason):
        binding.check()


def test_filters_match_as_describe_and_delete_acls_ask() -> None:
    orders = acl("orders", Operation.WRITE)
    prefixed = acl("ord", Operation.READ, pattern=PREFIXED, principal="User:bob")
    anything = AclFilter(ResourceType.ANY, None, PatternType.ANY, None, None, Operation.ANY, Permission.ANY)
    assert anything.matches(orders) and anything.matches(prefixed)
    literal = AclFilter(TOPIC, "orders", LITERAL, None, None, Operation.ANY, Permission.ANY)
    assert literal.matches(orders) and not literal.matches(prefixed)
    applying = AclFilter(TOPIC, "orders", PatternType.MATCH, None, None, Operation.ANY, Permission.ANY)
    assert applying.matches(orders) and applying.matches(prefixed)  # both apply to the topic "orders"
    bobs = AclFilter(ResourceType.ANY, None, PatternType.ANY, "User:bob", None, Operation.READ, ALLOW)
    assert bobs.matches(prefixed) and not bobs.matches(orders)


def test_the_acl_file_keeps_bindings_across_restarts_and_refuses_damage(tmp_path: Path) -> None:
    path = tmp_path / ".acls.json"
    store = FileAclStore(path)
    assert store.bindings() == ()
    store.add([acl("orders", Operation.WRITE), acl("orders", Operation.WRITE)])
    store.add([acl("g", Operation.READ, kind=GROUP)])
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    again = FileAclStore(path)
    assert set(again.bindings()) == {acl("orders", Operation.WRITE), acl("g", Operation.READ, kind=GROUP)}
    again.remove([acl("orders", Operation.WRITE)])
    assert FileAclStore(path).bindings() == (acl("g", Operation.READ, kind=GROUP),)
    document = json.loads(path.read_text())
    document["acls"][0]["operation"] = "FLY"
    path.write_text(json.dumps(document))
    with pytest.raises(AclError, match=r"\.acls\.json: acls\[0\]: missing or unknown 'FLY'"):
        FileAclStore(path)
    path.write_text("{")
    with pytest.raises(AclError, match="not JSON"):
        FileAclStore(path)
