"""Connecting to ZooKeeper: the connect string (``host:port[,host:port...][/chroot]``) checked once,
and a started kazoo client whose failure names the ensemble.

Role: the one place brokers, clients and the load job open a ZooKeeper session, so they all accept
the same strings and retry the same way: the connection is retried forever (kazoo re-sets watches
and, after a session expiry, callers re-create their ephemeral nodes), each request is not.
"""

from __future__ import annotations

import warnings
from typing import Any

from kafkalog.errors import RegistryError


def check_connect_string(value: str) -> str:
    """``value`` if it is ``host:port[,host:port...][/chroot]``; RegistryError naming the flaw."""
    hosts, slash, chroot = value.strip().partition("/")
    if slash and (not chroot or chroot.endswith("/") or "//" in chroot):
        raise RegistryError(f"ZooKeeper connect string {value!r}: the chroot must be /name[/name...]")
    for item in hosts.split(","):
        host, sep, port = item.strip().rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise RegistryError(f"ZooKeeper connect string {value!r}: {item.strip()!r} is not host:port")
    return value.strip()


def connect(connect_string: str, *, session_timeout_s: float = 6.0, start_timeout_s: float = 30.0) -> Any:
    """A started KazooClient on ``connect_string``; RegistryError if no server answers in time.
    The caller stops and closes it."""
    from kazoo.client import KazooClient  # noqa: PLC0415 - kazoo only where ZooKeeper is used
    from kazoo.handlers.threading import KazooTimeoutError  # noqa: PLC0415
    from kazoo.retry import KazooRetry  # noqa: PLC0415

    check_connect_string(connect_string)
    client = KazooClient(
        hosts=connect_string,
        timeout=session_timeout_s,
        connection_retry=KazooRetry(max_tries=-1, delay=0.1, max_delay=1.0),
    )
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "No chroot path exists")  # created just below
            client.start(timeout=start_timeout_s)
    except KazooTimeoutError as exc:
        client.close()
        raise RegistryError(f"cannot connect to ZooKeeper at {connect_string} within {start_timeout_s:g} s") from exc
    client.ensure_path("/")  # the chroot, for a cluster's first member
    return client
