"""Where the transaction coordinator's state is kept durably, and a transaction's group offsets
until its end.

Two kinds of documents, each written whole before the request that made it is answered:
- a transactional id's record (kafkalog.server.transactions.state): the coordinator's;
- the offsets a transaction commits for a group (TxnOffsetCommit), kept aside by the group's
  coordinator until the transaction's marker: applied to the group's committed offsets on commit,
  dropped on abort.

Without ZooKeeper both live under ``<first data dir>/.transactions/`` (``<hex id>.json`` and
``offsets/<hex group>.<producer id>.json``, replaced atomically); with ZooKeeper under /kafkalog
(kafkalog.registry.transactions), where every broker of the cluster finds them after a failover.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import Any, Protocol

from kafkalog.errors import KafkalogError, RegistryError
from kafkalog.log.files import fsync_dir, write_atomically
from kafkalog.registry.transactions import (
    TRANSACTION_OFFSETS,
    TRANSACTIONS,
    delete_document,
    get_document,
    list_documents,
    put_document,
)
from kafkalog.server.cluster.offsets import GroupOffsetStore
from kafkalog.server.transactions.state import TransactionMetadata, TransactionRecordError

logger = logging.getLogger(__name__)

DIRECTORY = ".transactions"
OFFSETS_DIRECTORY = "offsets"
_OFFSETS_FORMAT = 1

PartitionOffsets = dict[tuple[str, int], tuple[int, str | None]]
"""(topic, partition) -> (offset, metadata), as OffsetCommit takes them."""


class TransactionStoreError(KafkalogError):
    """The transaction state could not be stored or read (the client retries)."""

    error_code = 15  # COORDINATOR_NOT_AVAILABLE


class TransactionStore(Protocol):
    """The coordinator's records and the groups' transactional offsets (see the module doc). Every
    method raises TransactionStoreError when the store cannot answer."""

    def load(self, transactional_id: str) -> TransactionMetadata | None: ...

    def ids(self) -> list[str]: ...

    def save(self, record: TransactionMetadata) -> None: ...

    def delete(self, transactional_id: str) -> None: ...

    def stage_offsets(self, group: str, producer_id: int, offsets: PartitionOffsets) -> None:
        """Add ``offsets`` to what the producer's transaction commits for ``group``."""
        ...

    def staged_offsets(self, group: str) -> dict[int, PartitionOffsets]:
        """The offsets transactions still open have staged for ``group``, by producer id."""
        ...

    def end_offsets(self, group: str, producer_id: int, *, commit: bool, into: GroupOffsetStore) -> None:
        """The transaction ended: apply its offsets of ``group`` to ``into`` (commit) or drop them."""
        ...

    def groups_staged_by(self, producer_id: int) -> list[str]:
        """The groups for which ``producer_id`` has staged offsets."""
        ...


def _offsets_document(group: str, producer_id: int, offsets: PartitionOffsets) -> bytes:
    return json.dumps(
        {
            "format_version": _OFFSETS_FORMAT,
            "group": group,
            "producer_id": producer_id,
            "offsets": [[t, p, o, m] for (t, p), (o, m) in sorted(offsets.items())],
        }
    ).encode()


def _read_offsets(data: bytes, where: str) -> PartitionOffsets:
    try:
        document = json.loads(data)
        if document.get("format_version") != _OFFSETS_FORMAT:
            raise ValueError(f"unknown format_version {document.get('format_version')!r}")
        return {(str(t), int(p)): (int(o), m if m is None else str(m)) for t, p, o, m in document["offsets"]}
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise TransactionStoreError(f"transactional offsets {where} are unreadable: {exc!r}") from exc


def _apply(group: str, offsets: PartitionOffsets, into: GroupOffsetStore) -> None:
    if offsets:
        try:
            into.commit(group, offsets)
        except KafkalogError as exc:
            raise TransactionStoreError(f"cannot commit the transaction's offsets of group {group}: {exc}") from exc


class FileTransactionStore:
    """Both kinds of documents as files under ``<data dir>/.transactions``. Thread-safe."""

    def __init__(self, data_dir: Path) -> None:
        self.directory = data_dir / DIRECTORY
        self.offsets_directory = self.directory / OFFSETS_DIRECTORY
        self.offsets_directory.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def _path(self, transactional_id: str) -> Path:
        return self.directory / f"{transactional_id.encode().hex()}.json"

    def load(self, transactional_id: str) -> TransactionMetadata | None:
        path = self._path(transactional_id)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise TransactionStoreError(f"cannot read {path}: {exc}") from exc
        return _record(data, str(path))

    def ids(self) -> list[str]:
        found = []
        for path in sorted(self.directory.glob("*.json")):
            try:
                found.append(bytes.fromhex(path.stem).decode())
            except ValueError:
                logger.warning("ignoring %s: not a transactional id's record", path)
        return found

    def save(self, record: TransactionMetadata) -> None:
        path = self._path(record.transactional_id)
        try:
            write_atomically(path, json.dumps(record.to_json()).encode(), crash_prefix="transactions")
        except OSError as exc:
            raise TransactionStoreError(f"cannot store {path}: {exc}") from exc

    def delete(self, transactional_id: str) -> None:
        self._path(transactional_id).unlink(missing_ok=True)
        fsync_dir(self.directory)

    def _offsets_path(self, group: str, producer_id: int) -> Path:
        return self.offsets_directory / f"{group.encode().hex()}.{producer_id}.json"

    def stage_offsets(self, group: str, producer_id: int, offsets: PartitionOffsets) -> None:
        path = self._offsets_path(group, producer_id)
        with self._lock:
            staged = _read_offsets(path.read_bytes(), str(path)) if path.exists() else {}
            staged.update(offsets)
            try:
                write_atomically(path, _offsets_document(group, producer_id, staged), crash_prefix="transactions")
            except OSError as exc:
                raise TransactionStoreError(f"cannot store {path}: {exc}") from exc

    def staged_offsets(self, group: str) -> dict[int, PartitionOffsets]:
        found = {}
        for path in self.offsets_directory.glob(f"{group.encode().hex()}.*.json"):
            producer_id = path.name.split(".")[1]
            if producer_id.isdigit():
                found[int(producer_id)] = _read_offsets(path.read_bytes(), str(path))
        return found

    def end_offsets(self, group: str, producer_id: int, *, commit: bool, into: GroupOffsetStore) -> None:
        path = self._offsets_path(group, producer_id)
        with self._lock:
            if not path.exists():
                return  # ended already (a marker written again), or nothing staged
            if commit:
                _apply(group, _read_offsets(path.read_bytes(), str(path)), into)
            path.unlink()
            fsync_dir(self.offsets_directory)

    def groups_staged_by(self, producer_id: int) -> list[str]:
        groups = []
        for path in self.offsets_directory.glob(f"*.{producer_id}.json"):
            try:
                groups.append(bytes.fromhex(path.name.split(".")[0]).decode())
            except ValueError:
                continue
        return sorted(groups)


class ZooKeeperTransactionStore:
    """Both kinds of documents in ZooKeeper (kafkalog.registry.transactions), over ``zk`` (a kazoo
    client, the cluster's). Thread-safe (kazoo is)."""

    def __init__(self, zk: Any) -> None:
        self.zk = zk

    def _call(self, what: str, action: Any, *args: Any) -> Any:
        if not self.zk.connected:  # a request would queue until ZooKeeper is back: refuse now
            raise TransactionStoreError(f"cannot {what}: ZooKeeper is not reachable")
        try:
            return action(self.zk, *args)
        except (RegistryError, TransactionStoreError):
            raise
        except Exception as exc:  # kazoo: connection lost or session expired mid-way
            raise TransactionStoreError(f"cannot {what} in ZooKeeper: {exc!r}") from exc

    def load(self, transactional_id: str) -> TransactionMetadata | None:
        path = f"{TRANSACTIONS}/{transactional_id.encode().hex()}"
        data = self._call(f"read {path}", get_document, path)
        return None if data is None else _record(data, path)

    def ids(self) -> list[str]:
        names = self._call("list transactions", list_documents, TRANSACTIONS)
        return [bytes.fromhex(name).decode() for name in names]

    def save(self, record: TransactionMetadata) -> None:
        path = f"{TRANSACTIONS}/{record.transactional_id.encode().hex()}"
        self._call(f"store {path}", put_document, path, json.dumps(record.to_json()).encode())

    def delete(self, transactional_id: str) -> None:
        path = f"{TRANSACTIONS}/{transactional_id.encode().hex()}"
        self._call(f"delete {path}", delete_document, path)

    def _offsets_path(self, group: str, producer_id: int) -> str:
        return f"{TRANSACTION_OFFSETS}/{group.encode().hex()}.{producer_id}"

    def stage_offsets(self, group: str, producer_id: int, offsets: PartitionOffsets) -> None:
        path = self._offsets_path(group, producer_id)
        data = self._call(f"read {path}", get_document, path)
        staged = {} if data is None else _read_offsets(data, path)
        staged.update(offsets)
        self._call(f"store {path}", put_document, path, _offsets_document(group, producer_id, staged))

    def staged_offsets(self, group: str) -> dict[int, PartitionOffsets]:
        prefix = group.encode().hex() + "."
        found = {}
        for name in self._call("list transactional offsets", list_documents, TRANSACTION_OFFSETS):
            if name.startswith(prefix) and name[len(prefix) :].isdigit():
                path = f"{TRANSACTION_OFFSETS}/{name}"
                data = self._call(f"read {path}", get_document, path)
                if data is not None:
                    found[int(name[len(prefix) :])] = _read_offsets(data, path)
        return found

    def end_offsets(self, group: str, producer_id: int, *, commit: bool, into: GroupOffsetStore) -> None:
        path = self._offsets_path(group, producer_id)
        data = self._call(f"read {path}", get_document, path)
        if data is None:
            return
        if commit:
            _apply(group, _read_offsets(data, path), into)
        self._call(f"delete {path}", delete_document, path)

    def groups_staged_by(self, producer_id: int) -> list[str]:
        suffix = f".{producer_id}"
        names = self._call("list transactional offsets", list_documents, TRANSACTION_OFFSETS)
        return sorted(bytes.fromhex(name[: -len(suffix)]).decode() for name in names if name.endswith(suffix))


def _record(data: bytes, where: str) -> TransactionMetadata:
    try:
        return TransactionMetadata.from_json(json.loads(data))
    except (ValueError, TransactionRecordError) as exc:  # not JSON, or not a record
        raise TransactionStoreError(f"{where}: {exc}") from exc
