"""Where the ACLs live: a JSON file beside the broker's data (a single broker or a static cluster).

Role: load the bindings at start, add and remove them for CreateAcls and DeleteAcls, each change
written before it is answered, and hand the whole set to the Authorizer. A ZooKeeper cluster keeps
them in ZooKeeper instead (kafkalog.server.security.zk_acls), so every broker enforces the same set.

Layout (replaced atomically; the names are Kafka's enum names, readable and diffable)::

    {"format": 1, "acls": [{"resource_type": "TOPIC", "resource_name": "orders", "pattern_type": "LITERAL",
                           "principal": "User:loader", "host": "*", "operation": "READ",
                           "permission": "ALLOW"}, ...]}

Invariants: a damaged file stops the broker with the file and the entry named (an authorizer that
silently lost its DENYs would open what was closed); the file is readable by its owner only.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

from kafkalog.log.files import write_atomically
from kafkalog.server.security.acls import AclBinding, AclError, Operation, PatternType, Permission, ResourceType

FORMAT = 1


class AclStore(Protocol):
    """What the handlers change the ACLs through."""

    def bindings(self) -> tuple[AclBinding, ...]: ...

    def add(self, bindings: Iterable[AclBinding]) -> None: ...

    def remove(self, bindings: Iterable[AclBinding]) -> None: ...


def to_json(binding: AclBinding) -> dict[str, str]:
    return {
        "resource_type": binding.resource_type.name,
        "resource_name": binding.resource_name,
        "pattern_type": binding.pattern_type.name,
        "principal": binding.principal,
        "host": binding.host,
        "operation": binding.operation.name,
        "permission": binding.permission.name,
    }


def from_json(entry: Any, where: str) -> AclBinding:
    """An entry of the file (or of a ZooKeeper node); AclError naming ``where`` if it is not one."""
    if not isinstance(entry, dict):
        raise AclError(f"{where}: not a mapping")
    try:
        binding = AclBinding(
            ResourceType[entry["resource_type"]],
            str(entry["resource_name"]),
            PatternType[entry["pattern_type"]],
            str(entry["principal"]),
            str(entry["host"]),
            Operation[entry["operation"]],
            Permission[entry["permission"]],
        )
    except KeyError as exc:
        raise AclError(f"{where}: missing or unknown {exc.args[0]!r}") from None
    try:
        return binding.check()
    except AclError as exc:
        raise AclError(f"{where}: {exc}") from None


def parse_document(raw: bytes, where: str) -> tuple[AclBinding, ...]:
    """The bindings of an ACL document (the file's, or ZooKeeper's node); AclError naming ``where``."""
    try:
        document = json.loads(raw)
    except ValueError as exc:
        raise AclError(f"{where}: not JSON ({exc})") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT or not isinstance(document.get("acls"), list):
        raise AclError(f"{where}: not an ACL document of format {FORMAT}")
    return tuple(sorted({from_json(entry, f"{where}: acls[{i}]") for i, entry in enumerate(document["acls"])}))


def render_document(bindings: Iterable[AclBinding]) -> bytes:
    return json.dumps({"format": FORMAT, "acls": [to_json(b) for b in sorted(bindings)]}, indent=1).encode()


class FileAclStore:
    """The ACLs of one broker, in one JSON file (see the module doc). Thread-safe."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._bindings = self._read()

    def _read(self) -> tuple[AclBinding, ...]:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return ()
        return parse_document(raw, str(self.path))

    def bindings(self) -> tuple[AclBinding, ...]:
        with self._lock:
            return self._bindings

    def add(self, bindings: Iterable[AclBinding]) -> None:
        with self._lock:
            self._write(tuple(sorted(set(self._bindings) | {b.check() for b in bindings})))

    def remove(self, bindings: Iterable[AclBinding]) -> None:
        with self._lock:
            self._write(tuple(sorted(set(self._bindings) - set(bindings))))

    def _write(self, bindings: tuple[AclBinding, ...]) -> None:
        if bindings == self._bindings:
            return
        data = render_document(bindings)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(self.path, data, crash_prefix="acls")
        self.path.chmod(0o600)  # who may do what is the operator's business only
        self._bindings = bindings
