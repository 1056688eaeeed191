"""SimpleConsumer: read a partition from an offset you choose (the seeds' SimpleConsumer API).

Every message's CRC is checked; a fetch that ends inside a message returns the whole ones before it;
a read that starts inside a compressed set skips the set's messages before the requested offset.
``fetch_many(..., stored=True)`` checks the entries without decoding them and returns them as the
broker sent them (what a mirror forwards); reading committed, a set that holds transactional or
control batches comes decoded and filtered instead (it cannot be forwarded whole). If
a broker (Kafka 0.9 does) returns only part of a message larger than the fetch size, the fetch is
repeated with the size doubled, as the seeds describe, up to ``max_message_bytes``.

``isolation="read_committed"`` (Kafka's ``isolation.level``) reads as Kafka's consumer does: fetches
stop at the last stable offset, the records of aborted transactions and every transaction marker
are left out (kafkalog.client.committed) and reported as ``FetchResult.skipped``, and the latest
offset is the last stable offset. The default reads every record the log holds, markers included.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from kafkalog.client.client import Client, UsesClient, check, error_name
from kafkalog.client.committed import ISOLATION_LEVELS, Isolation, Skipped, committed_only, holds_transactions
from kafkalog.client.security import PLAINTEXT, ClientSecurity
from kafkalog.errors import (
    BrokerResponseError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    UnsupportedByBrokerError,
)
from kafkalog.protocol import ApiKey, ErrorCode, lookup
from kafkalog.record import Message, decode_all, last_entry_offset, stored_entries
from kafkalog.record.reader import first_codec

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3  # ListOffsets v7+ (KIP-734)
_MAX_TIMESTAMP_VERSION = 7


@dataclass(frozen=True)
class FetchResult:
    messages: list[Message]
    high_watermark: int
    """The partition's log end offset when the broker answered."""
    codec: int = 0
    """Compression codec of the first message set entry fetched (0: none), what a mirror preserves."""
    record_set: bytes | memoryview = b""
    """Only with ``stored=True``: the complete entries after ``messages``, as stored (CRCs checked,
    nothing decoded). ``messages`` then holds only the part of a first compressed entry that is at or
    after the requested offset, when the fetch began inside one. Empty (everything in ``messages``)
    for a set read committed that holds transactional or control batches."""
    last_offset: int = -1
    """Offset of the last message fetched, of either part, or of the last batch skipped after it
    (read committed), or the last offset of the last complete batch (on a compacted log a batch
    keeps its last offset when the cleaner removed its last records, or all of them); -1: none.
    ``next_offset`` goes on after it: the offsets between the messages and it hold no record."""
    last_stable_offset: int = -1
    """Fetch v4+: the offset below which every transaction is decided (-1: not said)."""
    skipped: tuple[Skipped, ...] = ()
    """Read committed: the batches left out (aborted transactions, markers), in offset order."""

    def next_offset(self, requested: int) -> int:
        return self.last_offset + 1 if self.last_offset >= 0 else requested

    def readable_end(self, isolation: Isolation) -> int:
        """Where reading stops for now: the last stable offset reading committed (a transaction
        still open holds it back), else the high watermark."""
        if isolation == "read_committed" and self.last_stable_offset >= 0:
            return self.last_stable_offset
        return self.high_watermark


class SimpleConsumer(UsesClient):
    """Fetches partitions at offsets the caller manages. Thread-safe (connections serialize)."""

    def __init__(
        self,
        bootstrap: str | Sequence[str] | None = None,
        *,
        client: Client | None = None,
        zookeeper: str | None = None,
        broker_version: str | None = None,
        max_bytes: int = 1024 * 1024,
        max_message_bytes: int = 64 * 1024 * 1024,
        max_wait_ms: int = 100,
        min_bytes: int = 1,
        request_timeout_ms: int = 30_000,
        security: ClientSecurity = PLAINTEXT,
        isolation: Isolation = "read_uncommitted",
    ) -> None:
        if isolation not in ISOLATION_LEVELS:
            raise ValueError(f"isolation must be read_uncommitted or read_committed, not {isolation!r}")
        super().__init__(
            bootstrap, client, zookeeper=zookeeper, request_timeout_ms=request_timeout_ms,
            broker_version=broker_version, security=security,
        )  # fmt: skip
        self.isolation = isolation
        self.max_bytes = max_bytes
        self.max_message_bytes = max_message_bytes
        self.max_wait_ms = max_wait_ms
        self.min_bytes = min_bytes

    # ------------------------------------------------------------------ fetching

    def topic_configs(self, topic: str, keys: Sequence[str] | None = None) -> dict[str, str | None] | None:
        """The topic's configs (kafkalog.client.admin.Admin.topic_configs): None from a broker that
        does not serve DescribeConfigs."""
        from kafkalog.client.admin import Admin  # noqa: PLC0415 - the consumer needs it only here

        return Admin(client=self.client).topic_configs(topic, keys)

    def fetch(self, topic: str, partition: int, offset: int, *, max_bytes: int | None = None) -> FetchResult:
        """Messages of one partition from ``offset`` (raises OffsetOutOfRangeError outside its log)."""
        return self.fetch_many({(topic, partition): offset}, max_bytes=max_bytes)[(topic, partition)]

    def fetch_many(
        self, offsets: dict[tuple[str, int], int], *, max_bytes: int | None = None, stored: bool = False
    ) -> dict[tuple[str, int], FetchResult]:
        """Fetch several partitions: one request per leader broker. ``stored``: leave the message
        sets as the broker sent them (FetchResult.record_set) instead of decoding them. Reading
        committed, only a set without transactional or control batches is left as sent: one with
        them is decoded and filtered (``messages``, ``skipped``), since forwarding it whole would
        forward aborted records and markers, and its batches' transactional ids with them."""
        size = max_bytes or self.max_bytes
        results: dict[tuple[str, int], FetchResult] = {}
        pending = dict(offsets)
        while pending:
            by_leader: dict[Any, dict[tuple[str, int], int]] = {}
            for (topic, partition), offset in pending.items():
                by_leader.setdefault(self.client.leader(topic, partition), {})[(topic, partition)] = offset
            pending = {}
            for connection, wanted in by_leader.items():
                for tp, result in self._fetch_from(connection, wanted, size, stored).items():
                    if result is None:  # only part of one oversized message came back: ask for more
                        if size * 2 > self.max_message_bytes:
                            raise RecordTooLargeError(
                                f"a message of {tp[0]}-{tp[1]} at offset {wanted[tp]} is larger than "
                                f"max_message_bytes={self.max_message_bytes}"
                            )
                        pending[tp] = wanted[tp]
                    else:
                        results[tp] = result
            size *= 2
        return results

    def _fetch_from(
        self, connection: Any, wanted: dict[tuple[str, int], int], size: int, stored: bool
    ) -> dict[tuple[str, int], FetchResult | None]:
        api = connection.api(ApiKey.FETCH)
        topics: dict[str, list[dict[str, int]]] = {}
        for (topic, partition), offset in wanted.items():
            topics.setdefault(topic, []).append({"partition": partition, "fetch_offset": offset, "max_bytes": size})
        body = {
            "replica_id": -1,
            "max_wait_ms": self.max_wait_ms,
            "min_bytes": self.min_bytes,
            "max_bytes": size * max(1, len(wanted)),
            "isolation_level": ISOLATION_LEVELS[self.isolation],  # v4+; older brokers have no transactions
            "topics": [{"topic": t, "partitions": p} for t, p in topics.items()],
        }
        response = connection.request(api, body)
        if response.get("error_code"):  # v7+: the request as a whole failed (fetch sessions)
            code = response["error_code"]
            raise BrokerResponseError(code, error_name(code), f"fetch from {connection.host}:{connection.port}")
        out: dict[tuple[str, int], FetchResult | None] = {}
        for topic_response in response["responses"]:
            topic = topic_response["topic"]
            for answer in topic_response["partition_responses"]:
                tp = (topic, answer["partition"])
                offset = wanted[tp]
                if answer["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE:
                    earliest, latest = self.earliest_offset(*tp), self.latest_offset(*tp)
                    raise OffsetOutOfRangeError(offset, earliest, latest, where=f"{topic}-{tp[1]}")
                if answer["error_code"] in (ErrorCode.NOT_LEADER_FOR_PARTITION, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                    self.client.invalidate(topic)
                check(answer["error_code"], f"fetching {topic}-{tp[1]} at offset {offset}")
                data = answer["record_set"] or b""
                record_set: bytes | memoryview
                skipped: tuple[Skipped, ...] = ()
                if stored and not (self.isolation == "read_committed" and holds_transactions(data)):
                    messages, record_set, last_offset = stored_entries(data, offset)
                else:
                    messages, record_set = decode_all(data, min_offset=offset), b""
                    # by the entries, not the messages: on a compacted log a batch may end in
                    # offsets the cleaner removed, or hold none at all (kept for its producer)
                    last_offset = max(messages[-1].offset if messages else -1, last_entry_offset(data))
                    # Reading committed, the aborted transactions' records are left out; whatever
                    # the isolation, so are the markers: Kafka's consumers never return a control record.
                    committed = self.isolation == "read_committed"
                    if committed or holds_transactions(data):
                        listed = (answer.get("aborted_transactions") or ()) if committed else ()  # Fetch v4+
                        aborted = [(a["producer_id"], a["first_offset"]) for a in listed]
                        kept = committed_only(data, messages, aborted)
                        # a fetch that began inside a skipped batch accounts only from its offset on
                        messages = kept.messages
                        skipped = tuple(
                            s._replace(first=max(s.first, offset)) for s in kept.skipped if s.last >= offset
                        )
                        last_offset = max(last_offset, kept.last_offset if kept.last_offset >= offset else -1)
                if last_offset < 0 and len(data) > 0 and answer["high_watermark"] > offset:
                    out[tp] = None  # a partial message only
                else:
                    codec = first_codec(data)
                    stable = answer.get("last_stable_offset", -1)  # Fetch v4+
                    out[tp] = FetchResult(
                        messages, answer["high_watermark"], codec, record_set, last_offset, stable, skipped
                    )
        return out

    def messages(self, topic: str, partition: int, start: int, end: int | None = None) -> Iterator[Message]:
        """Every message from ``start`` up to ``end`` (exclusive; None: the log end when reached)."""
        offset = start
        while end is None or offset < end:
            result = self.fetch(topic, partition, offset)
            for message in result.messages:
                if end is not None and message.offset >= end:
                    return
                yield message
            if result.last_offset >= offset:  # messages, or batches read committed leaves out
                offset = result.next_offset(offset)
                continue
            if end is None or offset >= result.readable_end(self.isolation):
                return

    # ------------------------------------------------------------------ offsets

    def offsets_before(self, topic: str, partition: int, timestamp: int, max_count: int = 1) -> list[int]:
        """The seeds' getOffsetsBefore (ListOffsets v0): -1 latest, -2 earliest, else by time."""
        connection = self.client.leader(topic, partition)
        api = connection.api(ApiKey.LIST_OFFSETS)
        if api.version != 0:
            api = lookup(ApiKey.LIST_OFFSETS, 0)  # v1 has no max_num_offsets: this call is v0's
        body = {
            "replica_id": -1,
            "topics": [
                {
                    "topic": topic,
                    "partitions": [{"partition": partition, "timestamp": timestamp, "max_num_offsets": max_count}],
                }
            ],
        }
        answer = connection.request(api, body)["responses"][0]["partition_responses"][0]
        check(answer["error_code"], f"offsets of {topic}-{partition}")
        return list(answer["offsets"])

    def offset_for_timestamp(self, topic: str, partition: int, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first message at or after ``timestamp``, None if none is that
        new. Needs ListOffsets v1 (Kafka 0.10.1+); older brokers raise UnsupportedByBrokerError."""
        connection = self.client.leader(topic, partition)
        api = connection.api(ApiKey.LIST_OFFSETS)
        if api.version < 1:
            raise UnsupportedByBrokerError(
                f"{connection.host}:{connection.port} cannot look offsets up by message time "
                "(ListOffsets v1, Kafka 0.10.1+); offsets_before() answers at segment granularity"
            )
        body = {
            "replica_id": -1,
            "topics": [{"topic": topic, "partitions": [{"partition": partition, "timestamp": timestamp}]}],
        }
        answer = connection.request(api, body)["responses"][0]["partition_responses"][0]
        check(answer["error_code"], f"offset for time in {topic}-{partition}")
        return None if answer["offset"] < 0 else (answer["offset"], answer["timestamp"])

    def offset_of_max_timestamp(self, topic: str, partition: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the message with the largest timestamp, None for an empty log.
        Needs ListOffsets v7 (Kafka 3.0+); older brokers raise UnsupportedByBrokerError."""
        connection = self.client.leader(topic, partition)
        api = connection.api(ApiKey.LIST_OFFSETS)
        if api.version < _MAX_TIMESTAMP_VERSION:
            raise UnsupportedByBrokerError(
                f"{connection.host}:{connection.port} cannot find the largest timestamp (ListOffsets v7, Kafka 3.0+)"
            )
        body = {"topics": [{"topic": topic, "partitions": [{"partition": partition, "timestamp": MAX_TIMESTAMP}]}]}
        answer = connection.request(api, body)["responses"][0]["partition_responses"][0]
        check(answer["error_code"], f"largest timestamp in {topic}-{partition}")
        return None if answer["offset"] < 0 else (answer["offset"], answer["timestamp"])

    def earliest_offset(self, topic: str, partition: int) -> int:
        return self._one_offset(topic, partition, EARLIEST)

    def latest_offset(self, topic: str, partition: int) -> int:
        return self._one_offset(topic, partition, LATEST)

    def earliest_offsets(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """The earliest offset of every (topic, partition): one ListOffsets request per leader."""
        return self._offsets(partitions, EARLIEST)

    def latest_offsets(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """The latest offset of every (topic, partition) for this consumer's isolation: the log end
        (high watermark) reading uncommitted, the last stable offset reading committed. One
        ListOffsets request per leader."""
        return self._offsets(partitions, LATEST)

    def log_end_offsets(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """The log end offset (high watermark) of every (topic, partition), whatever the isolation:
        how far a read-committed consumer's latest offset lags behind it is an open transaction."""
        return self._offsets(partitions, LATEST, isolation_level=0)

    def _offsets(
        self, partitions: Iterable[tuple[str, int]], which: int, *, isolation_level: int | None = None
    ) -> dict[tuple[str, int], int]:
        level = ISOLATION_LEVELS[self.isolation] if isolation_level is None else isolation_level
        by_leader: dict[Any, list[tuple[str, int]]] = {}
        for topic, partition in partitions:
            by_leader.setdefault(self.client.leader(topic, partition), []).append((topic, partition))
        found: dict[tuple[str, int], int] = {}
        for connection, keys in by_leader.items():
            if connection.api(ApiKey.LIST_OFFSETS).version < 1:  # v0 answers one partition at a time here
                found.update({(t, p): self._one_offset(t, p, which) for t, p in keys})
                continue
            asked: dict[str, list[dict[str, int]]] = {}
            for topic, partition in keys:
                asked.setdefault(topic, []).append({"partition": partition, "timestamp": which})
            body = {
                "replica_id": -1,
                "isolation_level": level,  # v2+; older brokers have no transactions
                "topics": [{"topic": t, "partitions": ps} for t, ps in asked.items()],
            }
            for answered in connection.request(connection.api(ApiKey.LIST_OFFSETS), body)["responses"]:
                for answer in answered["partition_responses"]:
                    name = f"{answered['topic']}-{answer['partition']}"
                    check(answer["error_code"], f"offsets of {name}")
                    found[(answered["topic"], answer["partition"])] = int(answer["offset"])
            missing = [f"{t}-{p}" for t, p in keys if (t, p) not in found]
            if missing:
                raise BrokerResponseError(-1, "NO_OFFSETS", f"{missing[0]} answered no offset")
        return found

    def _one_offset(self, topic: str, partition: int, which: int) -> int:
        connection = self.client.leader(topic, partition)
        if connection.api(ApiKey.LIST_OFFSETS).version >= 1:
            # v1 answers -1 (latest) and -2 (earliest) too; Kafka 4.x serves nothing older
            return self._offsets([(topic, partition)], which)[(topic, partition)]
        offsets = self.offsets_before(topic, partition, which, 1)
        if not offsets:
            raise BrokerResponseError(-1, "NO_OFFSETS", f"{topic}-{partition} answered no offset")
        return offsets[0]
