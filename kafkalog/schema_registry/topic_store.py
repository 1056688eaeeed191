"""The store in the ``_schemas`` topic: written by a producer (acks=all), read back by a reader thread.

The topic is created when missing, with one partition and ``cleanup.policy=compact`` (Confluent's
registry refuses a topic with more partitions, or one that deletes: either would lose or reorder
records); an existing topic that breaks either rule is refused at start.

A reader thread fetches the partition from offset 0 at start and then follows its end, applying
every record to the state (kafkalog.schema_registry.state). ``write`` returns only once the reader
has applied the records written (their offsets reached), so the answer a caller gets is what
every registry reading the topic will hold; ``catch_up`` waits until the reader reaches the end the
topic had when it was called (ListOffsets), so a decision (a new id, a version number) is taken
on every record written before it. A registry restarted rebuilds the same state by reading the
topic again from its first offset.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence

from kafkalog.client import Admin, Producer, SimpleConsumer
from kafkalog.client.security import PLAINTEXT, ClientSecurity
from kafkalog.errors import BrokerResponseError, KafkalogError, OffsetOutOfRangeError
from kafkalog.protocol import ErrorCode
from kafkalog.schema_registry.errors import StoreError
from kafkalog.schema_registry.state import RegistryState
from kafkalog.schema_registry.store import Write

log = logging.getLogger(__name__)

PARTITION = 0
_TOO_LARGE = frozenset({ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE})
"""The cluster's answers to a record past the topic's ``max.message.bytes``."""


class TopicStore:
    """See the module docstring. ``start()`` before use; thread-safe."""

    def __init__(
        self,
        bootstrap: str,
        topic: str = "_schemas",
        *,
        security: ClientSecurity = PLAINTEXT,
        timeout_s: float = 10.0,
        init_timeout_s: float = 60.0,
        client_id: str = "kafkalog-registry",
    ) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.security = security
        self.timeout_s = timeout_s
        self.init_timeout_s = init_timeout_s
        self.client_id = client_id
        self._state = RegistryState()
        self._progress = threading.Condition()
        self._closed = threading.Event()
        self._reader_error: str | None = None
        self._producer: Producer | None = None
        self._consumer: SimpleConsumer | None = None
        """The reader thread's: its fetches wait for new records (long polls)."""
        self._offsets: SimpleConsumer | None = None
        """The topic's end for ``catch_up``: a connection of its own, never queued behind a long poll."""
        self._thread = threading.Thread(target=self._read, name=f"{client_id}-reader", daemon=True)

    @property
    def state(self) -> RegistryState:
        return self._state

    # ------------------------------------------------------------------ start and stop

    def start(self) -> None:
        """Create or check the topic, start the reader, and return once it has read the topic to
        its end; StoreError naming the first cause otherwise."""
        try:
            self._ensure_topic()
            self._consumer = SimpleConsumer(self.bootstrap, security=self.security, max_wait_ms=500)
            self._offsets = SimpleConsumer(self.bootstrap, security=self.security)
            self._producer = Producer(
                self.bootstrap, security=self.security, acks=-1, linger_ms=0,
                request_timeout_ms=int(self.timeout_s * 1000), max_block_ms=int(self.timeout_s * 1000),
            )  # fmt: skip
        except KafkalogError as e:
            self.close()
            raise StoreError(f"the {self.topic} topic at {self.bootstrap}: {e}") from e
        self._thread.start()
        self._wait_for(self._end_offset(), self.init_timeout_s, "reading the topic at start")

    def _ensure_topic(self) -> None:
        with Admin(self.bootstrap, security=self.security) as admin:
            if self.topic not in admin.list_topics():
                try:
                    admin.create_topic(self.topic, 1, {"cleanup.policy": "compact"})
                except BrokerResponseError as e:
                    if e.error_code != ErrorCode.TOPIC_ALREADY_EXISTS:  # another registry got there first
                        raise
                else:
                    log.info("created the %s topic (1 partition, compacted)", self.topic)
                    return
            partitions = admin.list_topics().get(self.topic, 0)
            if partitions != 1:
                raise StoreError(f"the {self.topic} topic has {partitions} partitions: a registry needs exactly 1")
            configs = admin.topic_configs(self.topic, ["cleanup.policy"])
            policy = (configs or {}).get("cleanup.policy")
            if configs is not None and policy is not None and "compact" not in policy.split(","):
                raise StoreError(
                    f"the {self.topic} topic has cleanup.policy={policy}: a registry needs compact "
                    "(its records would be deleted by retention)"
                )

    def close(self) -> None:
        self._closed.set()
        with self._progress:
            self._progress.notify_all()
        if self._thread.is_alive():
            self._thread.join(5)
        for client in (self._producer, self._consumer, self._offsets):
            if client is not None:
                try:
                    client.close()
                except KafkalogError as e:
                    log.debug("closing: %s", e)

    # ------------------------------------------------------------------ the store's contract

    def write(self, records: Sequence[Write]) -> None:
        producer = self._producer
        if producer is None:
            raise StoreError("the store is not started")
        try:
            futures = [producer.send(self.topic, value, key, partition=PARTITION) for key, value in records]
            last = max(f.result(self.timeout_s).offset for f in futures)
        except KafkalogError as e:
            too_large = getattr(e, "error_code", None) in _TOO_LARGE
            raise StoreError(f"writing to the {self.topic} topic: {e}", too_large=too_large) from e
        self._wait_for(last + 1, self.timeout_s, "reading back a write")

    def catch_up(self) -> None:
        self._wait_for(self._end_offset(), self.timeout_s, "catching up with the topic")

    def _end_offset(self) -> int:
        consumer = self._offsets
        if consumer is None:
            raise StoreError("the store is not started")
        try:
            return consumer.latest_offset(self.topic, PARTITION)
        except KafkalogError as e:
            raise StoreError(f"the end of the {self.topic} topic: {e}") from e

    def _wait_for(self, offset: int, timeout_s: float, doing: str) -> None:
        deadline = time.monotonic() + timeout_s
        with self._progress:
            while self._state.applied < offset:
                if self._closed.is_set():
                    raise StoreError(f"{doing}: the store is closed")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    cause = f" (the reader: {self._reader_error})" if self._reader_error else ""
                    raise StoreError(
                        f"{doing}: offset {offset} of the {self.topic} topic not read within {timeout_s:g} s, "
                        f"at {self._state.applied}{cause}",
                        timeout=True,
                    )
                self._progress.wait(remaining)

    # ------------------------------------------------------------------ the reader

    def _read(self) -> None:
        """The reader thread: it ends only when the store closes (an unexpected failure is logged, waited
        out and retried from the same offset, since a reader that stopped would leave every write of this
        registry unanswered and its reads stale)."""
        failures = 0
        while not self._closed.is_set():
            try:
                failures = self._read_once(failures)
            except Exception as e:
                failures += 1
                self._reader_error = f"{type(e).__name__}: {e}"
                log.exception("reading the %s topic at %d", self.topic, self._state.applied)
                self._closed.wait(min(0.1 * 2**failures, 5.0))

    def _read_once(self, failures: int) -> int:
        """Fetch once from the state's offset and apply what came; the count of failures in a row after it."""
        consumer = self._consumer
        assert consumer is not None
        position = self._state.applied
        try:
            result = consumer.fetch(self.topic, PARTITION, position)
        except OffsetOutOfRangeError as e:
            # only a topic whose start was deleted (not one a registry made) gets here
            if position >= e.log_start_offset:  # past the end: the topic was made again
                self._reader_error = f"the topic ends at {e.log_end_offset}, before {position}: was it deleted?"
                log.warning("%s topic: %s", self.topic, self._reader_error)
                self._closed.wait(5.0)
                return failures
            log.warning("the %s topic starts after %d: reading from %d", self.topic, position, e.log_start_offset)
            self._state.advance(e.log_start_offset)
            return failures
        except KafkalogError as e:
            failures += 1
            self._reader_error = str(e)
            log.warning("reading the %s topic at %d: %s", self.topic, position, e)
            self._closed.wait(min(0.1 * 2**failures, 5.0))
            return failures
        failures, self._reader_error = 0, None
        for message in result.messages:
            self._apply(message.key, message.value, message.offset)
        self._state.advance(result.next_offset(position))
        with self._progress:
            self._progress.notify_all()
        return 0

    def _apply(self, key: bytes | None, value: bytes | None, offset: int) -> None:
        """Apply one record; one that fails in any way is skipped, never the end of the reader (a compacted
        topic keeps it, so a reader that stopped on it would stop on it again at every start)."""
        try:
            self._state.apply(key, value, offset)
        except Exception:  # the topic is untrusted: anyone allowed to produce to it wrote this record
            with self._state.lock:
                self._state.applied = max(self._state.applied, offset + 1)
                self._state.skipped += 1
            log.exception("%s topic: the record at offset %d skipped", self.topic, offset)
