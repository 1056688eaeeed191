"""A model database and the Debezium events a PostgreSQL connector would emit for its workload.

Transactions run concurrently (up to three open, each key locked by the one that wrote it), so
change LSNs interleave across transactions while the stream follows commit order; the snapshot is
taken while transactions are open (their changes then stream with LSNs below the snapshot's); a
truncate waits for no open transaction (its exclusive lock); a primary-key update is a delete of the
old key, its tombstone and a create of the new one at one LSN; every delete is followed by its
tombstone; a connector restart sends a suffix of the streamed events again at new offsets. The model
records the table it ends with and every version each key went through from the snapshot on.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

PARTITIONS = 3
KEYS = range(8)


@dataclass
class Version:
    row: dict[str, Any]
    valid_from: int
    valid_to: int | None = None


@dataclass
class Tx:
    tx_id: int
    writes: list[tuple[str, int, dict[str, Any] | None, int, int | None]] = field(default_factory=list)
    """(op, key, row after, lsn, the new key of a key change)"""
    view: dict[int, dict[str, Any] | None] = field(default_factory=dict)


@dataclass
class Workload:
    """The topic a workload made (records per partition, in offset order) and what it should give."""

    partitions: list[list[dict[str, Any]]]
    table: dict[int, dict[str, Any]]
    history: dict[int, list[Version]]
    truncated: bool


class Model:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.db: dict[int, dict[str, Any]] = {}
        self.lsn = 100
        self.clock = 1_000
        self.tx_ids = 500
        self.open: list[Tx] = []
        self.streaming = False
        self.stream: list[dict[str, Any]] = []
        """Every envelope emitted (not tombstones), in emission order: what a restart sends again."""
        self.partitions: list[list[dict[str, Any]]] = [[] for _ in range(PARTITIONS)]
        self.history: dict[int, list[Version]] = {}
        self.truncated = False
        self.value = 0

    def next_lsn(self) -> int:
        self.lsn += self.rng.randint(1, 3)
        return self.lsn

    def locked(self, key: int, tx: Tx) -> bool:
        return any(key in other.view for other in self.open if other is not tx)

    def step(self) -> None:
        choice = self.rng.random()
        if choice < 0.15:
            if len(self.open) < 3:
                self.tx_ids += 1
                self.open.append(Tx(self.tx_ids))
        elif choice < 0.7:
            if self.open:
                self.write(self.rng.choice(self.open))
        elif choice < 0.88:
            if self.open:
                self.commit(self.rng.choice(self.open))
        elif choice < 0.9:
            if not self.open and self.streaming:
                self.truncate()
        elif choice < 0.96:
            if self.streaming:
                self.restart()
        elif not self.streaming:
            self.snapshot()

    def write(self, tx: Tx) -> None:
        key = self.rng.choice(KEYS)
        if self.locked(key, tx):
            return
        current = tx.view[key] if key in tx.view else self.db.get(key)
        self.value += 1
        if current is None:
            row = {"id": key, "v": self.value, "note": self.rng.choice(["a", None])}
            tx.writes.append(("c", key, row, self.next_lsn(), None))
            tx.view[key] = row
            return
        kind = self.rng.random()
        if kind < 0.6:
            row = {**current, "v": self.value}
            tx.writes.append(("u", key, row, self.next_lsn(), None))
            tx.view[key] = row
        elif kind < 0.85:
            tx.writes.append(("d", key, None, self.next_lsn(), None))
            tx.view[key] = None
        else:
            new_key = self.rng.choice(KEYS)
            new_current = tx.view[new_key] if new_key in tx.view else self.db.get(new_key)
            if new_key == key or new_current is not None or self.locked(new_key, tx):
                return
            row = {**current, "id": new_key}
            tx.writes.append(("k", key, row, self.next_lsn(), new_key))
            tx.view[key], tx.view[new_key] = None, row

    def commit(self, tx: Tx) -> None:
        self.open.remove(tx)
        self.clock += self.rng.randint(1, 5)
        for op, key, row, lsn, new_key in tx.writes:
            if op in {"c", "u"}:
                assert row is not None
                self.db[key] = row
                self.emit(op, key, row, lsn, tx.tx_id)
            elif op == "d":
                before = self.db.pop(key)
                self.emit("d", key, before, lsn, tx.tx_id)
            else:
                assert row is not None and new_key is not None
                before = self.db.pop(key)
                self.db[new_key] = row
                self.emit("d", key, before, lsn, tx.tx_id)
                self.emit("c", new_key, row, lsn, tx.tx_id)

    def emit(self, op: str, key: int, row: dict[str, Any], lsn: int, tx_id: int | None) -> None:
        if not self.streaming:
            return
        envelope = {
            "op": op,
            "before": row if op == "d" else None,
            "after": row if op != "d" else None,
            "source": {"lsn": lsn, "ts_ms": self.clock, "snapshot": "false", "txId": tx_id},
            "key_decoded": {"id": key},
        }
        self.publish(envelope, key % PARTITIONS)
        self.stream.append(envelope)
        versions = self.history.setdefault(key, [])
        if versions and versions[-1].valid_to is None:
            versions[-1].valid_to = self.clock
        if op != "d":
            versions.append(Version(dict(row), self.clock))

    def publish(self, envelope: dict[str, Any], partition: int) -> None:
        records = self.partitions[partition]
        records.append({**envelope, "partition": partition, "offset": len(records), "tombstone": False})
        if envelope["op"] == "d":
            key = envelope["key_decoded"]
            records.append({"partition": partition, "offset": len(records), "tombstone": True, "key_decoded": key})

    def snapshot(self) -> None:
        self.streaming = True
        self.clock += 1
        snapshot_lsn = self.next_lsn()
        for key in sorted(self.db):
            row = self.db[key]
            envelope = {
                "op": "r",
                "before": None,
                "after": row,
                "source": {"lsn": snapshot_lsn, "ts_ms": self.clock, "snapshot": "true", "txId": None},
                "key_decoded": {"id": key},
            }
            self.publish(envelope, key % PARTITIONS)
            self.history.setdefault(key, []).append(Version(dict(row), self.clock))

    def truncate(self) -> None:
        self.clock += 1
        self.truncated = True
        lsn = self.next_lsn()
        envelope = {
            "op": "t",
            "before": None,
            "after": None,
            "source": {"lsn": lsn, "ts_ms": self.clock, "snapshot": "false", "txId": None},
            "key_decoded": None,
        }
        self.publish(envelope, self.rng.randrange(PARTITIONS))
        self.stream.append(envelope)
        for key in self.db:
            self.history[key][-1].valid_to = self.clock
        self.db.clear()

    def restart(self) -> None:
        """The connector restarts from an offset it flushed earlier: a suffix of what it streamed
        comes again (the same keys, LSNs and ops, new offsets; a truncate in any partition)."""
        if not self.stream:
            return
        suffix = self.stream[-self.rng.randint(1, min(len(self.stream), 6)) :]
        for envelope in suffix:
            key = envelope["key_decoded"]
            partition = key["id"] % PARTITIONS if key is not None else self.rng.randrange(PARTITIONS)
            self.publish(envelope, partition)

    def run(self, steps: int) -> Workload:
        for _ in range(steps):
            self.step()
        if not self.streaming:
            self.snapshot()
        while self.open:
            self.commit(self.open[0])
        return Workload(self.partitions, dict(self.db), self.history, self.truncated)


def workload(seed: int, steps: int) -> Workload:
    return Model(random.Random(seed)).run(steps)
