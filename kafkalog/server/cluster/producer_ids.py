"""Producer ids for InitProducerId: unique in the cluster, never handed out twice, even across restarts.

Ids are reserved a block at a time, durably, before any of the block is handed out; a restart
starts at the next block, so an id given before a crash is never given again (the rest of its block
is skipped). Without ZooKeeper the blocks are this broker's own: ids are ``broker_id << 40`` plus a
counter kept in ``<first data dir>/.producer_ids`` (so brokers of a static cluster never collide);
with ZooKeeper the blocks come from Kafka's /latest_producer_id_block (kafkalog.registry.producer_ids).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

from kafkalog.errors import KafkalogError
from kafkalog.log.files import write_atomically

BLOCK_SIZE = 1000
_BROKER_SHIFT = 40
FILE_NAME = ".producer_ids"
FORMAT_VERSION = 1


class ProducerIdError(KafkalogError):
    """No producer id can be handed out (the reservation could not be stored)."""

    error_code = 15  # COORDINATOR_NOT_AVAILABLE: the client retries


class ProducerIds:
    """Hands out ids from blocks that ``reserve`` makes durable first. Thread-safe."""

    def __init__(self, reserve: Callable[[], tuple[int, int]]) -> None:
        self._reserve = reserve
        self._lock = threading.Lock()
        self._next = 0
        self._end = -1

    def next_id(self) -> int:
        with self._lock:
            if self._next > self._end:
                self._next, self._end = self._reserve()
            handed_out = self._next
            self._next += 1
            return handed_out


def file_blocks(data_dir: Path, broker_id: int) -> Callable[[], tuple[int, int]]:
    """Blocks of ``broker_id``'s own id range, reserved in ``data_dir/.producer_ids``."""
    path = data_dir / FILE_NAME
    base = broker_id << _BROKER_SHIFT

    def reserve() -> tuple[int, int]:
        start = 0
        if path.exists():
            try:
                document = json.loads(path.read_text(encoding="utf-8"))
                if document.get("format_version") != FORMAT_VERSION:
                    raise ValueError(f"unknown format_version {document.get('format_version')!r}")
                start = int(document["next_block_start"])
            except (OSError, ValueError, KeyError, TypeError) as exc:
                # Refuse to guess: an id handed out twice lets one producer's retries pass as another's.
                raise ProducerIdError(f"{path} is unreadable: {exc}") from exc
        end = start + BLOCK_SIZE
        if end >= 1 << _BROKER_SHIFT:
            raise ProducerIdError(f"broker {broker_id} has handed out every producer id of its range")
        document = {"format_version": FORMAT_VERSION, "next_block_start": end}
        try:
            write_atomically(path, json.dumps(document).encode(), crash_prefix="producer_ids")
        except OSError as exc:
            raise ProducerIdError(f"cannot reserve producer ids in {path}: {exc}") from exc
        return base + start, base + end - 1

    return reserve
