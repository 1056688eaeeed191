"""Where the transaction coordinator's state is kept durably, and a transaction's group offsets
until its end.

Two kinds of documents, each written whole before the request that made it is answered:
- a transactional id's record (kafkalog.server.transactions.state): the coordinator's;
- the offsets a transaction commits for a group (TxnOffsetCommit), kept aside by the group's
  coordinator until the transaction's marker: applied to the group's committed offsets on commit,
  dropped on abort. They carry the producer epoch that staged them: a marker applies only offsets
  of its own epoch, and an older epoch (a fenced instance) cannot stage over a newer one's.

Without ZooKeeper both live under ``<first data dir>/.transactions/`` (``<name>.json`` and
``offsets/<name of the group>.<producer id>.json``, replaced atomically); with ZooKeeper under
/kafkalog (kafkalog.registry.transactions), where every broker of the cluster finds them after a
failover. A name is the id's (or group's) UTF-8 in hex, or for one too long for a file name
``h-`` and its SHA-256 (the id is inside the document either way). With ZooKeeper a record is not
replaced by one of an older coordinator epoch: a coordinator that lost the id cannot write over
the state of the one that took it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

from kafkalog.errors import KafkalogError, RegistryError, StorageError
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
from kafkalog.server.transactions.state import CoordinatorFencedError, TransactionMetadata, TransactionRecordError

logger = logging.getLogger(__name__)

DIRECTORY = ".transactions"
OFFSETS_DIRECTORY = "offsets"
_OFFSETS_FORMAT = 1
_HEX_NAME_LIMIT = 200
"""Names whose hex is longer than this are hashed (a file name has at most 255 bytes)."""
_HASHED = "h-"

PartitionOffsets = dict[tuple[str, int], tuple[int, str | None]]
"""(topic, partition) -> (offset, metadata), as OffsetCommit takes them."""
_T = TypeVar("_T")


class TransactionStoreError(KafkalogError):
    """The transaction state could not be stored or read (the client retries)."""

    error_code = 15  # COORDINATOR_NOT_AVAILABLE


class StaleEpochError(TransactionStoreError):
    """Offsets staged with a producer epoch older than those already staged (a fenced instance)."""

    error_code = 47  # INVALID_PRODUCER_EPOCH


class TransactionStore(Protocol):
    """The coordinator's records and the groups' transactional offsets (see the module doc). Every
    method raises TransactionStoreError when the store cannot answer."""

    def load(self, transactional_id: str) -> TransactionMetadata | None: ...

    def ids(self) -> list[str]: ...

    def save(self, record: TransactionMetadata) -> None: ...

    def delete(self, transactional_id: str) -> None: ...

    def stage_offsets(self, group: str, producer_id: int, epoch: int, offsets: PartitionOffsets) -> None:
        """Add ``offsets`` to what the producer's transaction commits for ``group``."""
        ...

    def staged_offsets(self, group: str) -> dict[int, PartitionOffsets]:
        """The offsets transactions still open have staged for ``group``, by producer id."""
        ...

    def end_offsets(self, group: str, producer_id: int, epoch: int, *, commit: bool, into: GroupOffsetStore) -> None:
        """The transaction ended: apply its offsets of ``group`` to ``into`` (commit, and staged
        with ``epoch``) or drop them."""
        ...

    def groups_staged_by(self, producer_id: int) -> list[str]:
        """The groups for which ``producer_id`` has staged offsets."""
        ...


def document_name(key: str) -> str:
    """The file or node name of an id or a group (see the module doc)."""
    encoded = key.encode()
    if len(encoded) * 2 <= _HEX_NAME_LIMIT:
        return encoded.hex()
    return _HASHED + hashlib.sha256(encoded).hexdigest()


def _key_of(name: str) -> str | None:
    """The id or group a hex name spells; None for a hashed name (read its document) or a stray."""
    if name.startswith(_HASHED):
        return None
    try:
        return bytes.fromhex(name).decode()
    except ValueError:
        return None


def _offsets_document(group: str, producer_id: int, epoch: int, offsets: PartitionOffsets) -> bytes:
    return json.dumps(
        {
            "format_version": _OFFSETS_FORMAT,
            "group": group,
            "producer_id": producer_id,
            "producer_epoch": epoch,
            "offsets": [[t, p, o, m] for (t, p), (o, m) in sorted(offsets.items())],
        }
    ).encode()


def _read_offsets(data: bytes, where: str) -> tuple[str, int, PartitionOffsets]:
    """(group, producer epoch, offsets) of a staged-offsets document."""
    try:
        document = json.loads(data)
        if document.get("format_version") != _OFFSETS_FORMAT:
            raise ValueError(f"unknown format_version {document.get('format_version')!r}")
        offsets = {(str(t), int(p)): (int(o), m if m is None else str(m)) for t, p, o, m in document["offsets"]}
        return str(document["group"]), int(document["producer_epoch"]), offsets
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise TransactionStoreError(f"transactional offsets {where} are unreadable: {exc!r}") from exc


def _merged(
    staged: bytes | None, where: str, group: str, producer_id: int, epoch: int, offsets: PartitionOffsets
) -> bytes:
    """The staged document after staging ``offsets`` with ``epoch`` over ``staged``."""
    merged: PartitionOffsets = {}
    if staged is not None:
        _, staged_epoch, previous = _read_offsets(staged, where)
        if staged_epoch > epoch:
            raise StaleEpochError(
                f"producer {producer_id} epoch {epoch} is older than epoch {staged_epoch}, whose offsets of group "
                f"{group} are staged"
            )
        if staged_epoch == epoch:
            merged = previous  # an older epoch's (a fenced instance's, never ended) are dropped
    merged.update(offsets)
    return _offsets_document(group, producer_id, epoch, merged)


def _apply(group: str, offsets: PartitionOffsets, into: GroupOffsetStore) -> None:
    if offsets:
        try:
            into.commit(group, offsets)
        except KafkalogError as exc:
            raise TransactionStoreError(f"cannot commit the transaction's offsets of group {group}: {exc}") from exc


def _guarded(what: str, action: Callable[[], _T]) -> _T:
    """``action``'s result, its I/O failures as TransactionStoreError (retried by the client)."""
    try:
        return action()
    except TransactionStoreError:
        raise
    except (OSError, StorageError) as exc:
        raise TransactionStoreError(f"cannot {what}: {exc}") from exc


class FileTransactionStore:
    """Both kinds of documents as files under ``<data dir>/.transactions``. Thread-safe."""

    def __init__(self, data_dir: Path, *, fsync: bool = True) -> None:
        self.fsync = fsync
        """Fsync each document (the broker's ``transactions.fsync``); else a rename, left to the OS."""
        self.directory = data_dir / DIRECTORY
        self.offsets_directory = self.directory / OFFSETS_DIRECTORY
        self.offsets_directory.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def _path(self, transactional_id: str) -> Path:
        return self.directory / f"{document_name(transactional_id)}.json"

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
            key = _key_of(path.stem)
            if key is None and path.stem.startswith(_HASHED):
                try:
                    key = _record(path.read_bytes(), str(path)).transactional_id
                except (OSError, TransactionStoreError) as exc:
                    logger.warning("ignoring %s: %s", path, exc)
            if key is None:
                logger.warning("ignoring %s: not a transactional id's record", path)
            else:
                found.append(key)
        return found

    def save(self, record: TransactionMetadata) -> None:
        path = self._path(record.transactional_id)
        data = json.dumps(record.to_json()).encode()
        _guarded(f"store {path}", lambda: write_atomically(path, data, crash_prefix="transactions", fsync=self.fsync))

    def delete(self, transactional_id: str) -> None:
        path = self._path(transactional_id)

        def remove() -> None:
            path.unlink(missing_ok=True)
            if self.fsync:
                fsync_dir(self.directory)

        _guarded(f"delete {path}", remove)

    def _offsets_path(self, group: str, producer_id: int) -> Path:
        return self.offsets_directory / f"{document_name(group)}.{producer_id}.json"

    def stage_offsets(self, group: str, producer_id: int, epoch: int, offsets: PartitionOffsets) -> None:
        path = self._offsets_path(group, producer_id)

        def stage() -> None:
            staged = path.read_bytes() if path.exists() else None
            data = _merged(staged, str(path), group, producer_id, epoch, offsets)
            write_atomically(path, data, crash_prefix="transactions", fsync=self.fsync)

        with self._lock:
            _guarded(f"store {path}", stage)

    def staged_offsets(self, group: str) -> dict[int, PartitionOffsets]:
        def read() -> dict[int, PartitionOffsets]:
            found = {}
            for path in self.offsets_directory.glob(f"{document_name(group)}.*.json"):
                producer_id = path.name.split(".")[1]
                if producer_id.isdigit():
                    found[int(producer_id)] = _read_offsets(path.read_bytes(), str(path))[2]
            return found

        return _guarded(f"read the staged offsets of group {group}", read)

    def end_offsets(self, group: str, producer_id: int, epoch: int, *, commit: bool, into: GroupOffsetStore) -> None:
        path = self._offsets_path(group, producer_id)

        def end() -> None:
            if not path.exists():
                return  # ended already (a marker written again), or nothing staged
            _, staged_epoch, offsets = _read_offsets(path.read_bytes(), str(path))
            if commit and staged_epoch == epoch:
                _apply(group, offsets, into)
            path.unlink()
            if self.fsync:
                fsync_dir(self.offsets_directory)

        with self._lock:
            _guarded(f"end the staged offsets {path}", end)

    def groups_staged_by(self, producer_id: int) -> list[str]:
        def read() -> list[str]:
            groups = []
            for path in self.offsets_directory.glob(f"*.{producer_id}.json"):
                groups.append(_read_offsets(path.read_bytes(), str(path))[0])
            return sorted(groups)

        return _guarded(f"list the offsets staged by producer {producer_id}", read)


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

    def _path(self, transactional_id: str) -> str:
        return f"{TRANSACTIONS}/{document_name(transactional_id)}"

    def load(self, transactional_id: str) -> TransactionMetadata | None:
        path = self._path(transactional_id)
        data = self._call(f"read {path}", get_document, path)
        return None if data is None else _record(data, path)

    def ids(self) -> list[str]:
        found = []
        for name in self._call("list transactions", list_documents, TRANSACTIONS):
            key = _key_of(name)
            if key is None and name.startswith(_HASHED):
                path = f"{TRANSACTIONS}/{name}"
                data = self._call(f"read {path}", get_document, path)
                key = None if data is None else _record(data, path).transactional_id
            if key is None:
                logger.warning("ignoring %s/%s: not a transactional id's record", TRANSACTIONS, name)
            else:
                found.append(key)
        return found

    def save(self, record: TransactionMetadata) -> None:
        path = self._path(record.transactional_id)
        stored = self._call(f"read {path}", get_document, path)
        if stored is not None:
            try:
                newer = _record(stored, path).coordinator_epoch > record.coordinator_epoch
            except TransactionStoreError:
                newer = False  # an unreadable record is replaced
            if newer:
                raise CoordinatorFencedError(
                    f"{path}: a coordinator of a newer epoch than {record.coordinator_epoch} has stored the "
                    f"transaction of {record.transactional_id!r}"
                )
        self._call(f"store {path}", put_document, path, json.dumps(record.to_json()).encode())

    def delete(self, transactional_id: str) -> None:
        path = self._path(transactional_id)
        self._call(f"delete {path}", delete_document, path)

    def _offsets_path(self, group: str, producer_id: int) -> str:
        return f"{TRANSACTION_OFFSETS}/{document_name(group)}.{producer_id}"

    def stage_offsets(self, group: str, producer_id: int, epoch: int, offsets: PartitionOffsets) -> None:
        path = self._offsets_path(group, producer_id)
        staged = self._call(f"read {path}", get_document, path)
        data = _merged(staged, path, group, producer_id, epoch, offsets)
        self._call(f"store {path}", put_document, path, data)

    def staged_offsets(self, group: str) -> dict[int, PartitionOffsets]:
        prefix = document_name(group) + "."
        found = {}
        for name in self._call("list transactional offsets", list_documents, TRANSACTION_OFFSETS):
            if name.startswith(prefix) and name[len(prefix) :].isdigit():
                path = f"{TRANSACTION_OFFSETS}/{name}"
                data = self._call(f"read {path}", get_document, path)
                if data is not None:
                    found[int(name[len(prefix) :])] = _read_offsets(data, path)[2]
        return found

    def end_offsets(self, group: str, producer_id: int, epoch: int, *, commit: bool, into: GroupOffsetStore) -> None:
        path = self._offsets_path(group, producer_id)
        data = self._call(f"read {path}", get_document, path)
        if data is None:
            return
        _, staged_epoch, offsets = _read_offsets(data, path)
        if commit and staged_epoch == epoch:
            _apply(group, offsets, into)
        self._call(f"delete {path}", delete_document, path)

    def groups_staged_by(self, producer_id: int) -> list[str]:
        suffix = f".{producer_id}"
        groups = []
        for name in self._call("list transactional offsets", list_documents, TRANSACTION_OFFSETS):
            if name.endswith(suffix):
                path = f"{TRANSACTION_OFFSETS}/{name}"
                data = self._call(f"read {path}", get_document, path)
                if data is not None:
                    groups.append(_read_offsets(data, path)[0])
        return sorted(groups)


def _record(data: bytes, where: str) -> TransactionMetadata:
    try:
        return TransactionMetadata.from_json(json.loads(data))
    except (ValueError, TransactionRecordError) as exc:  # not JSON, or not a record
        raise TransactionStoreError(f"{where}: {exc}") from exc
