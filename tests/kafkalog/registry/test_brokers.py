"""Broker registration against a real ZooKeeper: rows Z1 (session expiry) and Z2 (fast restart,
duplicate id) of the reliability matrix."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from kazoo.client import KazooClient

from kafkalog.errors import RegistryError
from kafkalog.registry.brokers import BrokerInfo, BrokerRegistration, broker_path, live_brokers

ME = BrokerInfo(1, "127.0.0.1", 9092)


def expire(client: KazooClient, zk_factory: Callable[..., Any]) -> None:
    """Make ZooKeeper expire ``client``'s session: a second client joins it and closes it."""
    twin = zk_factory(client_id=client.client_id)
    twin.stop()
    twin.close()


def wait_for(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_broker_registers_its_endpoint_as_kafka_does(zk_factory: Callable[..., Any]) -> None:
    client = zk_factory()
    registration = BrokerRegistration(client, ME)
    registration.register()
    raw, stat = client.get(broker_path(1))
    data = json.loads(raw)
    assert (data["host"], data["port"], data["endpoints"], data["version"]) == (
        "127.0.0.1",
        9092,
        ["PLAINTEXT://127.0.0.1:9092"],
        2,
    )
    assert stat.ephemeralOwner == client.client_id[0]
    assert live_brokers(client) == {1: ME}
    registration.register()  # again on the same session: the same node, data refreshed
    assert registration.registrations == 1
    registration.unregister()
    assert live_brokers(client) == {}


def test_a_second_broker_with_the_same_id_fails_at_once(zk_factory: Callable[..., Any]) -> None:
    BrokerRegistration(zk_factory(), ME).register()
    other = BrokerRegistration(zk_factory(), BrokerInfo(1, "127.0.0.1", 9093), stale_wait_s=30)
    started = time.monotonic()
    with pytest.raises(RegistryError, match=r"broker id 1 is already registered by another broker at 127.0.0.1:9092"):
        other.register()
    assert time.monotonic() - started < 5
    assert live_brokers(zk_factory())[1] == ME  # the first is untouched


def test_a_fast_restart_waits_for_the_old_session_then_registers(zk_factory: Callable[..., Any]) -> None:
    old = zk_factory()
    BrokerRegistration(old, ME).register()
    # the old process "dies": its session lingers until ZooKeeper expires it (here: 1.5 s later)
    threading.Timer(1.5, lambda: expire(old, zk_factory)).start()
    new = zk_factory()
    started = time.monotonic()
    BrokerRegistration(new, ME, stale_wait_s=20).register()
    assert time.monotonic() - started >= 1.0
    _, stat = new.get(broker_path(1))
    assert stat.ephemeralOwner == new.client_id[0]


def test_a_stale_node_that_never_goes_away_is_an_error_naming_it(zk_factory: Callable[..., Any]) -> None:
    BrokerRegistration(zk_factory(), ME).register()  # a live session with the same endpoint
    with pytest.raises(RegistryError, match=r"/brokers/ids/1 still holds this broker's previous registration"):
        BrokerRegistration(zk_factory(), ME, stale_wait_s=1).register()


def test_after_its_session_expires_the_broker_registers_again(zk_factory: Callable[..., Any]) -> None:
    client = zk_factory()
    registration = BrokerRegistration(client, ME)
    registration.register()
    first_session = client.client_id[0]
    watcher = zk_factory()
    expire(client, zk_factory)
    wait_for(lambda: registration.registrations == 2)
    raw, stat = watcher.get(broker_path(1))
    assert stat.ephemeralOwner == client.client_id[0] != first_session
    assert BrokerInfo.from_json(1, raw, "x") == ME
    registration.unregister()
    expire(client, zk_factory)  # after unregister, an expiry brings nothing back
    time.sleep(1.0)
    assert watcher.exists(broker_path(1)) is None


def test_registrations_of_kafka_brokers_are_read_too(zk_factory: Callable[..., Any]) -> None:
    client = zk_factory()
    client.create(
        broker_path(7),
        json.dumps({"endpoints": ["PLAINTEXT://h7:9097"], "host": None, "port": -1}).encode(),
        makepath=True,
    )
    client.create(broker_path(8), b"not json", makepath=True)
    with pytest.raises(RegistryError, match="/brokers/ids/8: not a broker registration"):
        live_brokers(client)
    client.delete(broker_path(8))
    assert live_brokers(client) == {7: BrokerInfo(7, "h7", 9097)}
