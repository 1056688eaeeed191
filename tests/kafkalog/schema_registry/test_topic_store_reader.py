"""The ``_schemas`` reader never stops on what it reads: a hostile record is skipped (logged and
counted), and an unexpected failure of a fetch is waited out and retried. Anyone allowed to produce to
the topic can write such a record, and a compacted topic keeps it: a reader that stopped on it would
stop on it again at every start. The topic's fetches are scripted here (the broker is the integration
tier's, tests/kafkalog/schema_registry/test_registry_cluster.py)."""

from __future__ import annotations

import threading
from typing import Any

from kafkalog.client.consumer import FetchResult
from kafkalog.record.message import Message, TimestampType
from kafkalog.schema_registry import records
from kafkalog.schema_registry.state import RegistryState
from kafkalog.schema_registry.topic_store import TopicStore


class ScriptedTopic:
    """Answers the reader's fetches from a list of steps: a FetchResult, or an exception to raise."""

    def __init__(self, steps: list[FetchResult | BaseException], store: TopicStore) -> None:
        self.steps = steps
        self.store = store
        self.done = threading.Event()

    def fetch(self, topic: str, partition: int, offset: int, **_: Any) -> FetchResult:
        if not self.steps:
            self.done.set()
            self.store._closed.set()
            return FetchResult([], offset)
        step = self.steps.pop(0)
        if isinstance(step, BaseException):
            raise step
        return step


def _batch(first: int, *pairs: tuple[bytes | None, bytes | None]) -> FetchResult:
    messages = [Message(first + i, 0, TimestampType.CREATE_TIME, k, v) for i, (k, v) in enumerate(pairs)]
    return FetchResult(messages, first + len(messages), last_offset=first + len(messages) - 1)


class ExplodingState(RegistryState):
    """A state whose apply fails at one offset in a way no decoder foresaw."""

    def apply(self, key: bytes | None, value: bytes | None, offset: int) -> None:
        if offset == 1:
            raise RecursionError("maximum recursion depth exceeded")
        super().apply(key, value, offset)


def test_the_reader_skips_hostile_records_and_survives_unexpected_failures() -> None:
    store = TopicStore("127.0.0.1:1", timeout_s=1.0)
    store._state = ExplodingState()
    good = records.SchemaValue("s", 1, 1, '"int"')
    later = records.SchemaValue("s", 2, 2, '"long"')
    hostile_type = b'{"subject":"a","version":1,"id":1,"schema":"x","schemaType":5}'
    topic = ScriptedTopic(
        [
            _batch(
                0,
                (records.schema_key("s", 1), good.encode()),
                (records.schema_key("x", 1), b'{"subject":"x"}'),  # offset 1: the state raises
                (b"[" * 5000, None),  # json's RecursionError
                (records.schema_key("a", 1), hostile_type),  # AttributeError in a decoder once
            ),
            RuntimeError("a fetch that failed in a way nobody foresaw"),
            _batch(4, (records.schema_key("s", 2), later.encode())),
        ],
        store,
    )
    store._consumer = topic  # type: ignore[assignment]
    store._read()  # returns once the script is done (it closes the store)
    assert topic.done.is_set()
    state = store.state
    assert state.applied == 5
    assert state.skipped == 3
    assert state.versions == {"s": {1: good, 2: later}}
    assert state.max_id == 2
