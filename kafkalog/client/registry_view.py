"""A one-time read of a cluster registered in ZooKeeper: its topics (partition → broker) and brokers.

Role: lets a caller that plans work over a cluster (the pipelines' load job) see what the registry
says without depending on kafkalog.registry itself, and checks connect strings the way brokers and
clients do. It reads once and keeps no watch: the view is a snapshot, exact at the moment it was
read. A partition's broker is the first of its replica list (the one that serves it).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kafkalog.client.client import Client
from kafkalog.errors import ClientError, RegistryError
from kafkalog.registry.brokers import live_brokers
from kafkalog.registry.connect import check_connect_string, connect
from kafkalog.registry.topics import all_topics, read_topic

__all__ = ["RegistryView", "check_connect_string", "read_registry"]


@dataclass(frozen=True, slots=True)
class RegistryView:
    """What the registry at ``connect_string`` held when it was read."""

    connect_string: str
    topics: dict[str, dict[int, int]]
    """topic → partition → id of the broker that serves it (topics asked for but not registered are absent)."""
    brokers: dict[int, str]
    """id → ``host:port`` of every live (registered) broker."""


def read_registry(
    connect_string: str,
    *,
    topics: Iterable[str] | None = None,
    client: Client | None = None,
    start_timeout_s: float = 30.0,
) -> RegistryView:
    """The topics (all of them when ``topics`` is None, else those of ``topics`` that are
    registered) and the live brokers of the registry at ``connect_string``.

    Uses the ZooKeeper session of ``client`` when it was bootstrapped from the same connect string;
    otherwise opens a session of its own for the read and closes it. Raises ClientError naming the
    connect string when ZooKeeper cannot be reached or a node cannot be read or parsed."""
    connect_string = check_connect_string(connect_string)
    discovery = client.discovery if client is not None else None
    zk: Any
    if discovery is not None and discovery.connect_string.strip() == connect_string:
        zk, owned = discovery.zk, False
    else:
        try:
            zk, owned = connect(connect_string, start_timeout_s=start_timeout_s), True
        except RegistryError as exc:
            raise ClientError(str(exc)) from exc
    from kazoo.exceptions import KazooException  # noqa: PLC0415 - kazoo only where ZooKeeper is used

    try:
        brokers = {broker_id: info.endpoint for broker_id, info in live_brokers(zk).items()}
        if topics is None:
            found = all_topics(zk)
        else:
            found = {}
            for name in dict.fromkeys(topics):
                assignment = read_topic(zk, name)
                if assignment is not None:
                    found[name] = assignment
    except (KazooException, RegistryError) as exc:
        reason = str(exc) or type(exc).__name__  # kazoo's exceptions often carry no message
        raise ClientError(f"cannot read the registry in ZooKeeper at {connect_string}: {reason}") from exc
    finally:
        if owned:
            zk.stop()
            zk.close()
    return RegistryView(connect_string, found, brokers)
