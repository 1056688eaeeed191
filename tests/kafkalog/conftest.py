"""A real ZooKeeper server (Debian's package) for the registry and mirror tests, and clients chrooted per test."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from tests.peers import ZooKeeperProcess

_chroots = itertools.count()


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperProcess]:
    server = ZooKeeperProcess(Path(tmp_path_factory.mktemp("zookeeper"))).start()
    yield server
    server.stop()


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
