"""Writes to a real ``_schemas`` topic on a kafkalog broker, and what the topic refuses.

Two registries on one ``_schemas`` topic that both believe they are primary (an election hand-over:
the old primary has not yet learnt it was replaced) and decide the same next version and id for
different schemas: the race is forced by holding each write until both have decided. The topic
orders the two records and every reader keeps the first; the registry whose record lost answers
50001 and no client is ever told an id that later names another schema. And a registry demoted
between deciding a write and producing it writes nothing (50004). A record past the topic's
``max.message.bytes`` is Confluent's 42209."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from kafkalog.client import Admin
from kafkalog.schema_registry.api import Api, Request
from kafkalog.schema_registry.election import StaticPrimary
from kafkalog.schema_registry.forward import Forwarder
from kafkalog.schema_registry.registry import Registry
from kafkalog.schema_registry.server import RegistryServer
from kafkalog.schema_registry.state import RegistryState
from kafkalog.schema_registry.store import Write
from kafkalog.schema_registry.topic_store import TopicStore
from kafkalog.server import Broker, BrokerConfig

pytestmark = pytest.mark.integration

V1 = {"type": "record", "name": "Ev", "fields": [{"name": "id", "type": "string"}]}


def field(name: str) -> dict[str, Any]:
    return {**V1, "fields": [*V1["fields"], {"name": name, "type": "int", "default": 0}]}


class HeldStore:
    """A real topic store whose writes wait at a gate: ``decided`` is set once the registry has
    decided its records (it is in ``write``), and they are produced once ``go`` is set."""

    def __init__(self, store: TopicStore) -> None:
        self.inner = store
        self.decided = threading.Event()
        self.go = threading.Event()

    @property
    def state(self) -> RegistryState:
        return self.inner.state

    def write(self, records: Sequence[Write]) -> None:
        self.decided.set()
        assert self.go.wait(30)
        self.inner.write(records)

    def catch_up(self) -> None:
        self.inner.catch_up()

    def close(self) -> None:
        self.inner.close()


@pytest.fixture
def bootstrap(tmp_path: Path) -> Iterator[str]:
    with Broker(BrokerConfig(port=0, data_dirs=(tmp_path / "data",))) as running:
        yield f"127.0.0.1:{running.port}"


def started(bootstrap: str) -> TopicStore:
    store = TopicStore(bootstrap, timeout_s=10, init_timeout_s=30)
    store.start()
    return store


def register(api: Api, subject: str, schema: Any, out: dict[str, Any]) -> None:
    body = json.dumps({"schema": json.dumps(schema)}).encode()
    answer = api.handle(Request.of("POST", f"/subjects/{subject}/versions", body))
    out[subject + schema["fields"][-1]["name"]] = (answer.status, json.loads(answer.body))


def schema_of_id(state: RegistryState, schema_id: int) -> str:
    with state.lock:
        return state.schemas[schema_id].text


@pytest.mark.parametrize("same_subject", [True, False], ids=["one-subject", "two-subjects"])
def test_two_primaries_deciding_the_same_id_never_rebind_it(bootstrap: str, same_subject: bool) -> None:
    one, two = started(bootstrap), started(bootstrap)
    try:
        held_one, held_two = HeldStore(one), HeldStore(two)
        api_one, api_two = Api(Registry(held_one)), Api(Registry(held_two))
        held_one.go.set()
        answers: dict[str, Any] = {}
        register(api_one, "s", V1, answers)
        held_one.go.clear()
        two.catch_up()
        held_one.decided.clear()

        # both decide version 2 of "s" (or version 1 of "t") with the next id, 2, before either writes
        other = "s" if same_subject else "t"
        a = threading.Thread(target=register, args=(api_one, "s", field("a"), answers))
        b = threading.Thread(target=register, args=(api_two, other, field("b"), answers))
        a.start()
        assert held_one.decided.wait(30)
        b.start()
        assert held_two.decided.wait(30)
        held_one.go.set()  # the first record lands and is answered ...
        a.join(30)
        held_two.go.set()  # ... then the other primary's, deciding the same id for another schema
        b.join(30)

        first, second = answers["sa"], answers[other + "b"]
        assert first == (200, {"id": 2})
        assert second[0] == 500 and second[1]["error_code"] == 50001, second
        assert "Register schema operation failed while writing to the Kafka store" in second[1]["message"]
        two.catch_up()
        one.catch_up()
        fresh = started(bootstrap)
        try:
            for state in (one.state, two.state, fresh.state):
                assert json.loads(schema_of_id(state, 2)) == field("a"), "id 2 names the schema it was answered for"
        finally:
            fresh.close()

        # the loser's client retries and gets an id of its own
        held_two.go.set()
        register(api_two, other, field("b"), answers)
        assert answers[other + "b"] == (200, {"id": 3})
    finally:
        one.close()
        two.close()


def test_a_registry_demoted_before_it_writes_writes_nothing(bootstrap: str) -> None:
    store = started(bootstrap)
    try:
        held = HeldStore(store)
        terms: list[object | None] = [1]
        api = Api(Registry(held, term=lambda: terms[0]))
        answers: dict[str, Any] = {}
        # demoted after the decision: the write is held at the gate only once the term is read, so
        # flip it as soon as the registry decided (the store's gate comes after the check: release it)
        held.go.set()
        register(api, "s", V1, answers)
        assert answers["sid"] == (200, {"id": 1})
        end = store.state.applied

        terms[0] = None
        register(api, "s", field("a"), answers)
        assert answers["sa"] == (500, {"error_code": 50004, "message": "Leader not known."})

        class Demoting(HeldStore):
            def catch_up(self) -> None:
                self.inner.catch_up()
                terms[0] = 2  # a new generation between the decision and the write

        terms[0] = 1
        api = Api(Registry(Demoting(store), term=lambda: terms[0]))
        register(api, "s", field("b"), answers)
        assert answers["sb"] == (500, {"error_code": 50004, "message": "Leader not known."})
        store.catch_up()
        assert store.state.applied == end, "nothing was written"
    finally:
        store.close()


def test_a_schema_larger_than_the_topic_takes_is_42209(bootstrap: str) -> None:
    """The cluster refuses the record (past the topic's max.message.bytes): Confluent's 42209, not a 500."""
    with Admin(bootstrap) as admin:
        admin.create_topic("_schemas", 1, {"cleanup.policy": "compact", "max.message.bytes": "4096"})
    store = started(bootstrap)
    server = RegistryServer(Api(Registry(store)), store, StaticPrimary(None), Forwarder(timeout_s=5), port=0)
    try:
        large = {**V1, "doc": "x" * 10_000}
        answer = server.answer("POST", "/subjects/s/versions", json.dumps({"schema": json.dumps(large)}).encode(), {})
        body = json.loads(answer.body)
        assert (answer.status, body["error_code"]) == (422, 42209), body
        assert body["message"].startswith("Write failed because schema is too large")
        answer = server.answer("POST", "/subjects/s/versions", json.dumps({"schema": json.dumps(V1)}).encode(), {})
        assert (answer.status, json.loads(answer.body)) == (200, {"id": 1}), "nothing was written before"
    finally:
        server.stop()
        store.close()
