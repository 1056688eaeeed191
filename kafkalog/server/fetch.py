"""Fetch: reading the requested partitions into log regions, and long-polling.

A fetch reads each partition's region (sent later with sendfile, never copied through Python) and
answers at once if it has ``min_bytes`` of data, an error, or no wait; otherwise it is parked and
retried when any partition gets new data or its ``max_wait_ms`` runs out.

The first partition that has data gets its first message whole even when it is larger than the
requested size (Kafka's rule for Fetch v3, applied to every version), so a consumer whose fetch
size is too small still makes progress instead of stalling silently. Clients on Fetch v0/v1 predate
timestamps and get magic 0; clients on v2/v3 predate record batches and get magic 1: their data is
converted (which costs a copy) where the log holds anything newer. Everyone else gets regions, sent
with sendfile.

Every v4+ answer says the partition's last stable offset (LSO: below it every transaction is
decided). A read-committed fetch (v4+, isolation level 1) reads only below the LSO and lists the
aborted transactions touching what it returns, from the fetch offset to the end of the region (an
empty list when none, as Kafka; null reading uncommitted); the consumer drops their records and the
markers. Its total, which decides whether a parked fetch may answer, counts only that data, so a
parked read-committed fetch wakes for data below the LSO, not for an open transaction's writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kafkalog.errors import CorruptSegmentError, KafkalogError, OffsetOutOfRangeError
from kafkalog.log import FileRegion, LogManager
from kafkalog.protocol import ErrorCode
from kafkalog.protocol.types import Struct
from kafkalog.record.convert import to_magic
from kafkalog.server.cluster.view import ClusterView

# the newest message format each Fetch version may carry: v0/v1 predate timestamps, v2/v3 headers
_FORMAT_OF_FETCH = {0: 0, 1: 0, 2: 1, 3: 1}

_NO_LIMIT = 1 << 30  # a fetch without a total limit (v0-v2) still stays far below the 2 GiB frame limit
READ_UNCOMMITTED = 0
READ_COMMITTED = 1


@dataclass(frozen=True, slots=True)
class FetchRequest:
    version: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    topics: tuple[tuple[str, tuple[tuple[int, int, int], ...]], ...]
    """(topic, ((partition, fetch offset, partition max bytes), ...)) in request order."""
    denied: frozenset[str] = frozenset()
    """Topics the caller may not read (answered TOPIC_AUTHORIZATION_FAILED, never read)."""
    isolation_level: int = READ_UNCOMMITTED
    """v4+: READ_COMMITTED reads below the last stable offset only (any other value: uncommitted)."""

    @property
    def read_committed(self) -> bool:
        return self.isolation_level == READ_COMMITTED

    @classmethod
    def from_body(cls, version: int, body: Struct, max_wait_cap_ms: int) -> FetchRequest:
        return cls(
            version=version,
            max_wait_ms=max(0, min(body["max_wait_ms"], max_wait_cap_ms)),
            min_bytes=body["min_bytes"],
            max_bytes=body.get("max_bytes", _NO_LIMIT) if body.get("max_bytes", _NO_LIMIT) > 0 else _NO_LIMIT,
            topics=tuple(
                (t["topic"], tuple((p["partition"], p["fetch_offset"], p["max_bytes"]) for p in t["partitions"]))
                for t in body["topics"]
            ),
            isolation_level=body.get("isolation_level", READ_UNCOMMITTED),
        )


@dataclass(slots=True)
class ParkedFetch:
    """A fetch waiting for data until ``deadline`` (time.monotonic())."""

    request: FetchRequest
    deadline: float


@dataclass(slots=True)
class FetchRead:
    """The body of a fetch response and the log regions inside it (closed after sending)."""

    body: Struct
    total_bytes: int
    has_error: bool
    regions: list[FileRegion]

    def close(self) -> None:
        for region in self.regions:
            region.close()
        self.regions.clear()


def read_fetch(cluster: ClusterView, logs: LogManager, request: FetchRequest) -> FetchRead:
    """Read every requested partition (as far as the request's limits allow): ``cluster`` says
    whether this broker serves it, ``logs`` holds its data."""
    regions: list[FileRegion] = []
    total = 0
    has_error = False
    responses = []
    try:
        for topic, partitions in request.topics:
            partition_responses = []
            for partition, offset, partition_max in partitions:
                answer: dict[str, Any] = {
                    "partition": partition,
                    "error_code": ErrorCode.NONE,
                    "high_watermark": -1,
                    "last_stable_offset": -1,  # v4+
                    "log_start_offset": -1,  # v5+
                    "aborted_transactions": [] if request.read_committed else None,  # v4+
                    "record_set": b"",
                }
                problem = (
                    ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    if topic in request.denied
                    else cluster.partition_error(topic, partition)
                )
                log = logs.get_log(topic, partition)
                if problem is not None or log is None:
                    answer["error_code"] = problem or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    limit = max(0, min(partition_max, request.max_bytes - total))
                    try:
                        stable = log.last_stable_offset if request.read_committed else None
                        info = log.read(offset, limit, min_one_message=(total == 0), max_offset=stable)
                        answer["high_watermark"] = info.log_end_offset
                        answer["last_stable_offset"] = info.last_stable_offset if stable is None else stable
                        answer["log_start_offset"] = log.log_start_offset
                        if info.region is not None and stable is not None:
                            answer["aborted_transactions"] = [
                                {"producer_id": txn.producer_id, "first_offset": txn.first_offset}
                                for txn in log.aborted_transactions(offset, info.upper_bound_offset)
                            ]
                        if info.region is not None:
                            answer["record_set"] = _for_version(info.region, request.version, log.config.message_format)
                            if answer["record_set"] is info.region:
                                regions.append(info.region)
                                total += info.region.length
                            else:
                                total += len(answer["record_set"])
                    except OffsetOutOfRangeError as exc:
                        answer["error_code"] = ErrorCode.OFFSET_OUT_OF_RANGE
                        answer["high_watermark"] = exc.log_end_offset
                        answer["last_stable_offset"] = log.last_stable_offset
                        answer["log_start_offset"] = exc.log_start_offset
                    except CorruptSegmentError:
                        answer["error_code"] = ErrorCode.CORRUPT_MESSAGE
                    except KafkalogError as exc:
                        answer["error_code"] = int(getattr(exc, "error_code", ErrorCode.UNKNOWN_SERVER_ERROR))
                if answer["error_code"] != ErrorCode.NONE:
                    has_error = True
                partition_responses.append(answer)
            responses.append({"topic": topic, "partition_responses": partition_responses})
    except BaseException:
        for region in regions:
            region.close()
        raise
    return FetchRead({"throttle_time_ms": 0, "responses": responses}, total, has_error, regions)


def _for_version(region: FileRegion, version: int, log_format: int) -> FileRegion | bytes:
    """The region itself when the fetch version can carry what it holds, else its converted bytes
    (the region is then closed). What it holds is judged by the log's format and the region's first
    entry, without reading the rest: a v1 log's regions go by sendfile to v2/v3 fetchers."""
    newest = _FORMAT_OF_FETCH.get(version)
    if newest is None:
        return region
    first = region.first_magic()
    if log_format <= newest and (first is None or first <= newest):
        return region
    with region:
        data = region.read()
    return to_magic(data, newest)
