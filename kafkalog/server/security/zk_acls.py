"""The ACLs of a ZooKeeper cluster: one node every broker reads, watches and changes.

Role: the AclStore of a broker that joined a cluster through ZooKeeper. ``/kafkalog/acls`` holds
the same document as kafkalog.server.security.acl_store's file; a change is a compare-and-set on the node's
version (retried when another broker changed it meanwhile), and every broker's watch hands the new
set to its Authorizer, so an ACL added through any broker is enforced by all within a watch's
round trip.

Invariants: a node that cannot be read as ACLs is refused (at start: the broker stops; later: the
broker keeps the set it had and logs why), never taken for "no ACLs", which would open what was
closed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from kafkalog.server.security.acl_store import parse_document, render_document
from kafkalog.server.security.acls import AclBinding, AclError

logger = logging.getLogger(__name__)

ACLS_PATH = "/kafkalog/acls"
_MAX_CONFLICTS = 20


class ZooKeeperAclStore:
    """See the module doc. ``on_change`` gets every new set, from kazoo's watch thread."""

    def __init__(self, zk: Any, on_change: Callable[[tuple[AclBinding, ...]], None], path: str = ACLS_PATH) -> None:
        from kazoo.recipe.watchers import DataWatch  # noqa: PLC0415 - kazoo only in ZooKeeper mode

        self.zk = zk
        self.path = path
        self._on_change = on_change
        zk.ensure_path(path)
        raw, _ = zk.get(path)
        self._bindings = self._parse(raw)  # AclError at start: the broker stops
        DataWatch(zk, path, self._changed)

    def _parse(self, raw: bytes | None) -> tuple[AclBinding, ...]:
        return parse_document(raw, f"zookeeper {self.path}") if raw else ()

    def _changed(self, raw: bytes | None, _stat: Any) -> None:
        try:
            bindings = self._parse(raw)
        except AclError as exc:
            logger.error("kept the ACLs as they were: %s", exc)  # noqa: TRY400 (the message says it all)
            return
        self._bindings = bindings
        self._on_change(bindings)

    def bindings(self) -> tuple[AclBinding, ...]:
        return self._bindings

    def add(self, bindings: Iterable[AclBinding]) -> None:
        added = {b.check() for b in bindings}
        self._update(lambda current: current | added)

    def remove(self, bindings: Iterable[AclBinding]) -> None:
        removed = set(bindings)
        self._update(lambda current: current - removed)

    def _update(self, change: Callable[[set[AclBinding]], set[AclBinding]]) -> None:
        from kazoo.exceptions import BadVersionError  # noqa: PLC0415

        for _ in range(_MAX_CONFLICTS):
            raw, stat = self.zk.get(self.path)
            current = set(self._parse(raw))
            wanted = change(current)
            if wanted == current:
                return
            try:
                self.zk.set(self.path, render_document(wanted), version=stat.version)
            except BadVersionError:
                continue  # another broker changed them meanwhile: apply ours to theirs
            self._bindings = tuple(sorted(wanted))
            return
        raise AclError(f"zookeeper {self.path}: changed by others {_MAX_CONFLICTS} times in a row; try again")
