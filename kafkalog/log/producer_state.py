"""What an idempotent producer last appended to one partition, so a retried batch is appended once.

An idempotent producer (KIP-98) numbers its batches per partition: a producer id and epoch, and a
base sequence counting records from 0. Per producer the log keeps its epoch and its last five
batches (first and last sequence, first and last offset), as Kafka does, because a producer has at
most five requests in flight:
- a batch whose sequences equal one of those five is a retry of an appended batch: it is not
  appended again, and its first append's offsets are the answer (DuplicateBatch);
- otherwise its base sequence must follow the producer's last one (0 for a new producer or a new,
  higher epoch), else OutOfOrderSequenceError; an epoch lower than the producer's is
  InvalidProducerEpochError (a fenced, older instance).

Durability: the state is a function of the log (each batch carries its producer id, epoch and base
sequence), saved as a snapshot ``<offset>.producers`` beside the segments when a segment is rolled
and when the log closes, and rebuilt on load from the latest snapshot at or below the log end plus
the batches after it. So a broker SIGKILLed after appending a batch but before answering knows the
batch when the producer retries it.

    <offset, 20 digits>.producers (JSON): {"format_version": 1, "offset": N,
      "producers": {"<id>": {"epoch": E, "last_append_ms": T,
                             "batches": [[first_seq, last_seq, first_offset, last_offset], ...]}}}
"""

from __future__ import annotations

import json
import logging
import os
import struct
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from kafkalog.errors import LogError
from kafkalog.log.files import write_atomically

logger = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".producers"
FORMAT_VERSION = 1
BATCHES_KEPT = 5
"""A producer has at most five requests in flight: a retry is always one of its last five batches."""
SNAPSHOTS_KEPT = 2
_MAX_SEQUENCE = 2**31 - 1
_HEADER = struct.Struct(">qiibIhiqqqhii")
"""A record batch header (kafkalog.record.batch_format): base offset, length, leader epoch, magic, CRC,
attributes, last offset delta, base and max timestamp, producer id and epoch, base sequence, count."""
_CONTROL_BIT = 0x20


class OutOfOrderSequenceError(LogError):
    """A batch's base sequence does not follow the producer's last one (a gap: something was lost)."""

    error_code = 45  # OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpochError(LogError):
    """A batch from an older epoch of a producer that has moved on (a fenced instance)."""

    error_code = 47  # INVALID_PRODUCER_EPOCH


class ProducerSnapshotError(LogError):
    """A producer state snapshot cannot be read (it is set aside and the state rebuilt from the log)."""


class ProducerBatch(NamedTuple):
    """Who wrote a batch and which records it holds, from its header."""

    producer_id: int
    epoch: int
    first_sequence: int
    record_count: int

    @property
    def last_sequence(self) -> int:
        return (self.first_sequence + self.record_count - 1) % (_MAX_SEQUENCE + 1)


class DuplicateBatch(NamedTuple):
    """The first append of a batch that came again: where it landed."""

    first_offset: int
    last_offset: int


@dataclass
class _Producer:
    epoch: int
    last_append_ms: int
    batches: deque[tuple[int, int, int, int]] = field(default_factory=lambda: deque(maxlen=BATCHES_KEPT))
    """(first sequence, last sequence, first offset, last offset), oldest first."""


def producer_batch(data: bytes | bytearray | memoryview) -> ProducerBatch | None:
    """The producer of ``data`` if it is exactly one record batch of an idempotent producer (a
    producer id >= 0); None for anything else (v0/v1 message sets, batches without a producer)."""
    if len(data) < _HEADER.size or data[16] != 2:
        return None
    fields = _HEADER.unpack_from(data)
    producer_id, epoch, sequence, count = fields[9], fields[10], fields[11], fields[12]
    if producer_id < 0 or fields[1] + 12 != len(data):
        return None
    return ProducerBatch(producer_id, epoch, sequence, count)


class ProducerStateManager:
    """The producer state of one partition log (see the module doc). Not thread-safe: the log calls
    it under its own lock."""

    def __init__(self, directory: Path, *, expiration_ms: int) -> None:
        self.directory = directory
        self.expiration_ms = expiration_ms
        """A producer that appended nothing for this long is forgotten at the next snapshot."""
        self._producers: dict[int, _Producer] = {}

    def __len__(self) -> int:
        return len(self._producers)

    # ------------------------------------------------------------------ appending

    def check(self, batch: ProducerBatch) -> DuplicateBatch | None:
        """Before appending ``batch``: its first append if it is a retry, None if it may be appended;
        raises OutOfOrderSequenceError or InvalidProducerEpochError if it may not."""
        known = self._producers.get(batch.producer_id)
        if known is None:
            if batch.first_sequence != 0:
                raise OutOfOrderSequenceError(
                    f"producer {batch.producer_id} is unknown here and its batch starts at sequence "
                    f"{batch.first_sequence}, not 0"
                )
            return None
        if batch.epoch < known.epoch:
            raise InvalidProducerEpochError(
                f"producer {batch.producer_id} epoch {batch.epoch} is older than its current epoch {known.epoch}"
            )
        if batch.epoch > known.epoch:
            if batch.first_sequence != 0:
                raise OutOfOrderSequenceError(
                    f"producer {batch.producer_id} starts epoch {batch.epoch} at sequence {batch.first_sequence}, not 0"
                )
            return None
        for first_sequence, last_sequence, first_offset, last_offset in known.batches:
            if (first_sequence, last_sequence) == (batch.first_sequence, batch.last_sequence):
                return DuplicateBatch(first_offset, last_offset)
        expected = (known.batches[-1][1] + 1) % (_MAX_SEQUENCE + 1) if known.batches else 0
        if batch.first_sequence != expected:
            raise OutOfOrderSequenceError(
                f"producer {batch.producer_id} epoch {batch.epoch}: batch at sequence {batch.first_sequence}, "
                f"expected {expected}"
            )
        return None

    def appended(self, batch: ProducerBatch, first_offset: int, last_offset: int, now_ms: int) -> None:
        """Record that ``batch`` now occupies ``first_offset``..``last_offset``."""
        known = self._producers.get(batch.producer_id)
        if known is None or batch.epoch > known.epoch:
            known = self._producers[batch.producer_id] = _Producer(batch.epoch, now_ms)
        known.last_append_ms = max(known.last_append_ms, now_ms)
        known.batches.append((batch.first_sequence, batch.last_sequence, first_offset, last_offset))

    # ------------------------------------------------------------------ snapshots

    def _snapshots(self) -> list[tuple[int, Path]]:
        found = []
        for path in self.directory.glob(f"*{SNAPSHOT_SUFFIX}"):
            stem = path.name[: -len(SNAPSHOT_SUFFIX)]
            if stem.isdigit():
                found.append((int(stem), path))
        return sorted(found)

    def take_snapshot(self, offset: int, now_ms: int) -> None:
        """Save the state as of ``offset`` (the log end: every batch below it is included), forget
        expired producers, keep the newest SNAPSHOTS_KEPT snapshots."""
        self._producers = {
            pid: p for pid, p in self._producers.items() if now_ms - p.last_append_ms < self.expiration_ms
        }
        document = {
            "format_version": FORMAT_VERSION,
            "offset": offset,
            "producers": {
                str(pid): {
                    "epoch": p.epoch,
                    "last_append_ms": p.last_append_ms,
                    "batches": [list(b) for b in p.batches],
                }
                for pid, p in sorted(self._producers.items())
            },
        }
        path = self.directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"
        write_atomically(path, json.dumps(document).encode(), crash_prefix="producers")
        for _, old in self._snapshots()[:-SNAPSHOTS_KEPT]:
            old.unlink(missing_ok=True)

    def load(self, log_end_offset: int) -> int:
        """Take the newest readable snapshot at or below ``log_end_offset`` (snapshots above it
        describe data that recovery cut away: deleted); return the offset from which the log's
        batches must be replayed with ``replay``."""
        self._producers = {}
        for offset, path in reversed(self._snapshots()):
            if offset > log_end_offset:
                logger.info("removing producer snapshot %s: beyond the log end %d", path, log_end_offset)
                path.unlink(missing_ok=True)
                continue
            try:
                self._producers = _read_snapshot(path)
            except ProducerSnapshotError as exc:
                logger.warning("%s; rebuilding the producer state from the log", exc)
                path.rename(path.with_name(path.name + ".unreadable"))
                continue
            return offset
        return 0

    def replay(self, batches: Iterable[tuple[ProducerBatch, int, int]]) -> None:
        """Apply (batch, first offset, last offset) of batches appended after the snapshot, in order."""
        for batch, first_offset, last_offset in batches:
            self.appended(batch, first_offset, last_offset, 0)

    def truncate(self) -> None:
        """The log lost data (truncation): the state is rebuilt by the caller from what remains."""
        self._producers = {}
        for _, path in self._snapshots():
            path.unlink(missing_ok=True)


def _read_snapshot(path: Path) -> dict[int, _Producer]:
    try:
        document = json.loads(path.read_bytes())
        if document.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"unknown format_version {document.get('format_version')!r}")
        producers = {}
        for pid, entry in document["producers"].items():
            producer = _Producer(int(entry["epoch"]), int(entry["last_append_ms"]))
            for first_seq, last_seq, first_offset, last_offset in entry["batches"][-BATCHES_KEPT:]:
                producer.batches.append((int(first_seq), int(last_seq), int(first_offset), int(last_offset)))
            producers[int(pid)] = producer
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ProducerSnapshotError(f"producer snapshot {path} is unreadable: {exc}") from exc
    return producers


def batches_in_file(fd: int, start: int, end: int, min_offset: int) -> Iterable[tuple[ProducerBatch, int, int]]:
    """(producer batch, first offset, last offset) of every idempotent record batch in bytes
    ``start``..``end`` of a segment file whose last offset is at least ``min_offset``, read header by
    header (the log was validated when it was loaded)."""
    position = start
    chunk = b""
    chunk_start = start
    while position + 17 <= end:
        if position + min(_HEADER.size, end - position) > chunk_start + len(chunk):
            chunk_start = position
            chunk = os.pread(fd, min(4 << 20, end - position), position)
            if len(chunk) < 17:
                return
        at = position - chunk_start
        size = int.from_bytes(chunk[at + 8 : at + 12], "big", signed=True) + 12
        if size < 12:
            return
        if chunk[at + 16] == 2 and at + _HEADER.size <= len(chunk):
            fields = _HEADER.unpack_from(chunk, at)
            base_offset, attributes, delta, producer_id = fields[0], fields[5], fields[6], fields[9]
            last_offset = base_offset + delta
            if producer_id >= 0 and not attributes & _CONTROL_BIT and last_offset >= min_offset:
                yield ProducerBatch(producer_id, fields[10], fields[11], fields[12]), base_offset, last_offset
        position += size
