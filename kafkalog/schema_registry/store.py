"""Where the registry's records go, behind one small interface: the ``_schemas`` topic
(kafkalog.schema_registry.topic_store, the real one) or memory (:class:`MemoryStore`, for tests
and for trying the API out).

Contract of a :class:`Store`:
- ``state`` is what the records written so far add up to (kafkalog.schema_registry.state), read
  under ``state.lock``;
- ``write(records)`` appends the records in order and returns only once ``state`` has applied
  them all (read back from the store), so an answer given after it is what any other reader of the
  store will see; it raises :class:`~kafkalog.schema_registry.errors.StoreError` otherwise;
- ``catch_up()`` returns once ``state`` holds every record the store held when it was called (what
  a writer must see before deciding an id or a version).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Protocol

from kafkalog.schema_registry.state import RegistryState

Write = tuple[bytes, bytes | None]
"""A record to write: its key, its value (None: a tombstone)."""


class Store(Protocol):
    @property
    def state(self) -> RegistryState: ...

    def write(self, records: Sequence[Write]) -> None: ...

    def catch_up(self) -> None: ...

    def close(self) -> None: ...


class MemoryStore:
    """A store that is a list in memory: each write is applied at once, at the next offset."""

    def __init__(self) -> None:
        self._state = RegistryState()
        self._lock = threading.Lock()
        self.log: list[Write] = []
        """Every record written, in order (what the topic would hold, before compaction)."""

    @property
    def state(self) -> RegistryState:
        return self._state

    def write(self, records: Sequence[Write]) -> None:
        with self._lock:
            for key, value in records:
                self.log.append((key, value))
                self._state.apply(key, value, len(self.log) - 1)

    def catch_up(self) -> None:
        return

    def close(self) -> None:
        return
