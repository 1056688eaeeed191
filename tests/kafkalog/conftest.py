"""Clients of the shared ZooKeeper (tests.support.fixtures), chrooted per test."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient

from tests.support.zookeeper import ZooKeeperProcess

_chroots = itertools.count()


@pytest.fixture
def zk_factory(zookeeper: ZooKeeperProcess) -> Iterator[Callable[..., Any]]:
    """New started kazoo clients on one chroot of this test (stopped at the end); ``.connect`` is the
    connect string of the chroot, for brokers and consumers that open their own sessions."""
    chroot = f"/test-{next(_chroots)}"
    root = KazooClient(hosts=zookeeper.connect, timeout=4.0)
    root.start(timeout=15)
    root.ensure_path(chroot)
    root.stop()
    root.close()
    clients: list[KazooClient] = []

    def make(**kwargs: Any) -> KazooClient:
        client = KazooClient(hosts=f"{zookeeper.connect}{chroot}", timeout=4.0, **kwargs)
        client.start(timeout=15)
        clients.append(client)
        return client

    make.connect = f"{zookeeper.connect}{chroot}"  # type: ignore[attr-defined]
    yield make
    for client in clients:
        try:
            client.stop()
            client.close()
        except Exception:
            pass
