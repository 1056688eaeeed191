"""Committed consumer-group offsets, kept durably: one file per group, replaced atomically.

    <data dir>/.consumer_offsets/<hex of the group id>.json
    {"format_version": 1, "group": "<id>", "offsets": {"<topic>": {"<partition>": [offset, metadata]}}}

A commit returns once the new file is fsynced and renamed into place, so an acknowledged commit
survives a crash. The file name is the group id in hex: any group id is a safe file name.
(ZooKeeper becomes the store when brokers register there.)
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import Protocol

from kafkalog.errors import KafkalogError
from kafkalog.log.files import fsync_dir, write_atomically

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
DIRECTORY = ".consumer_offsets"

GroupOffsets = dict[str, dict[int, tuple[int, str | None]]]


class GroupOffsetStore(Protocol):
    """Where OffsetCommit/OffsetFetch keep a group's offsets: this module's files, or ZooKeeper
    (kafkalog.server.cluster.zookeeper.ZooKeeperOffsetStore). ``commit`` raises KafkalogError if it could
    not store them durably."""

    def commit(self, group: str, offsets: dict[tuple[str, int], tuple[int, str | None]]) -> None: ...

    def fetch(self, group: str, topic: str, partition: int) -> tuple[int, str | None] | None: ...

    def committed_partitions(self, group: str) -> list[tuple[str, int]]: ...

    def groups(self) -> list[str]: ...

    def delete(self, group: str, partitions: list[tuple[str, int]] | None = None) -> None:
        """Forget the group's offsets of ``partitions`` (None: all of them), durably."""
        ...


class OffsetStore:
    """Per-group committed offsets with a write-through file per group. Thread-safe."""

    def __init__(self, data_dir: Path) -> None:
        self.directory = data_dir / DIRECTORY
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._groups: dict[str, GroupOffsets] = {}
        for path in sorted(self.directory.glob("*.json")):
            self._load(path)

    def _load(self, path: Path) -> None:
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
            if document.get("format_version") != FORMAT_VERSION:
                raise ValueError(f"unknown format_version {document.get('format_version')!r}")
            group = document["group"]
            if bytes.fromhex(path.stem).decode("utf-8") != group:
                raise ValueError("the group inside does not match the file name")
            self._groups[group] = {
                topic: {int(p): (int(v[0]), v[1]) for p, v in partitions.items()}
                for topic, partitions in document["offsets"].items()
            }
        except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
            # Refuse to guess: a consumer restarting from a wrong offset loses or duplicates data.
            raise OffsetStoreError(f"committed offsets file {path} is unreadable: {exc}") from exc

    def commit(self, group: str, offsets: dict[tuple[str, int], tuple[int, str | None]]) -> None:
        """Record ``offsets`` ((topic, partition) -> (offset, metadata)) for ``group``, durably."""
        with self._lock:
            current = {topic: dict(parts) for topic, parts in self._groups.get(group, {}).items()}
            for (topic, partition), value in offsets.items():
                current.setdefault(topic, {})[partition] = value
            self._store(group, current)

    def _store(self, group: str, current: GroupOffsets) -> None:
        """Replace the group's file with ``current`` (no file at all when it is empty)."""
        path = self.directory / (group.encode("utf-8").hex() + ".json")
        current = {topic: parts for topic, parts in current.items() if parts}
        if not current:
            path.unlink(missing_ok=True)
            fsync_dir(self.directory)
            self._groups.pop(group, None)
            return
        document = {
            "format_version": FORMAT_VERSION,
            "group": group,
            "offsets": {
                topic: {str(p): [offset, metadata] for p, (offset, metadata) in sorted(parts.items())}
                for topic, parts in sorted(current.items())
            },
        }
        write_atomically(path, json.dumps(document, indent=1).encode(), crash_prefix="offsets")
        self._groups[group] = current

    def fetch(self, group: str, topic: str, partition: int) -> tuple[int, str | None] | None:
        """The committed (offset, metadata), or None if nothing was committed."""
        return self._groups.get(group, {}).get(topic, {}).get(partition)

    def delete(self, group: str, partitions: list[tuple[str, int]] | None = None) -> None:
        """Forget the group's offsets of ``partitions`` (None: all of them), durably."""
        with self._lock:
            current = {} if partitions is None else {t: dict(p) for t, p in self._groups.get(group, {}).items()}
            for topic, partition in partitions or ():
                current.get(topic, {}).pop(partition, None)
            self._store(group, current)

    def groups(self) -> list[str]:
        """Every group with committed offsets, sorted."""
        with self._lock:
            return sorted(group for group, topics in self._groups.items() if topics)

    def committed_partitions(self, group: str) -> list[tuple[str, int]]:
        """Every (topic, partition) the group committed an offset for, sorted."""
        with self._lock:
            return sorted((t, p) for t, parts in self._groups.get(group, {}).items() for p in parts)


class OffsetStoreError(KafkalogError):
    """The offsets store cannot be read; the broker refuses to start rather than guess."""
