"""Change data capture through the real chain: PostgreSQL (logical decoding) → the Debezium PostgreSQL
connector 3.6.1 (pgoutput) → Kafka Connect 4.x in distributed mode → the broker (kafkalog, and Kafka
4.x the same way). The topic of a table must say exactly what the database did, key by key: the
initial snapshot's rows (op r), then every insert (c), update (u, ``before`` and ``after`` whole:
REPLICA IDENTITY FULL), delete (d, then a tombstone) and primary-key change (a delete and tombstone
of the old key, a create of the new), with the values as PostgreSQL holds them (numerics, timestamps
with time zones, text, NULLs: a NULL in a column with a DEFAULT stays null).

Then Connect's worker is SIGKILLed in the middle of the changes and started again: nothing is lost.
Debezium resumes from the last source offset Connect flushed, so what followed may come twice
(at-least-once); a repeated event is the same event again (its key, op and ``source.lsn``), and with
the repeats left out the topic is again exactly what the database did.

What the broker must serve beyond Connect's own needs (tests/kafkalog/ecosystem/test_connect.py):
Connect's topic creation with the connector's topic configs, lz4 batches with headers
(``__debezium.oldkey``...), keys spread over partitions by Connect's producer (murmur2)."""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tests.support import debezium
from tests.support.connect import ConnectCluster, ConnectWorker
from tests.support.debezium import ChangeEvent
from tests.support.ecosystem import Broker, eventually, last_values, list_topics, topic_configs
from tests.support.postgres import LOGICAL_DECODING, PostgresProcess
from tests.support.processes import tail

pytestmark = [pytest.mark.integration, pytest.mark.slow]

BROKERS = ("kafkalog", "kafka4")
TABLE = "public.orders"
PARTITIONS = 3

Row = dict[str, Any]
Expected = tuple[str, Row | None, Row | None]
"""One event of a key as the test compares it: (op, before, after); a tombstone is ("tombstone",
None, None)."""
TOMBSTONE: Expected = ("tombstone", None, None)


@pytest.fixture
def cdc_broker(request: pytest.FixtureRequest) -> Broker:
    """The session's broker of the kind asked for: its topics, groups and slots here are the test's own."""
    broker: Broker = request.getfixturevalue("kafka4" if request.param == "kafka4" else "kafkalog_shared")
    return broker


@pytest.fixture
def source_database() -> Iterator[PostgresProcess]:
    with PostgresProcess("shop", user="shop", settings={**LOGICAL_DECODING, "TimeZone": "UTC"}) as database:
        yield database


def literal(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, datetime):
        return f"'{value.isoformat()}'::timestamptz"
    return "'" + str(value).replace("'", "''") + "'"


def normalised(row: Row | None) -> Row | None:
    """A row as PostgreSQL's JSON writes it, or as Debezium's envelope carries it, in one form:
    the timestamp as an aware datetime (PostgreSQL: ``...+00:00``; Debezium's ZonedTimestamp:
    ``...Z``), numerics as Decimal (equal whatever their written scale), the rest as it is."""
    if row is None:
        return None
    placed = row["placed"]
    return {**row, "placed": None if placed is None else datetime.fromisoformat(placed)}


class Workload:
    """Random changes to the orders table, one statement per transaction, and what each should
    come out as: the events of each key in order (``expected``), from the rows as PostgreSQL
    returns them before and after."""

    def __init__(self, database: PostgresProcess, seed: int) -> None:
        self.database = database
        self.random = random.Random(seed)
        self.rows: dict[int, Row] = {}
        self.expected: dict[int, list[Expected]] = {}
        self.next_id = 1

    def row(self, key: int) -> Row:
        return self.database.query(f"SELECT * FROM {TABLE} WHERE id = {key}")[0]

    def values(self) -> dict[str, object]:
        pick = self.random.random
        return {
            "amount": None if pick() < 0.2 else Decimal(self.random.randrange(-(10**8), 10**8)).scaleb(-2),
            "placed": None
            if pick() < 0.2
            else datetime(2026, 1, 1, tzinfo=UTC) + timedelta(microseconds=self.random.randrange(10**14)),
            "note": None if pick() < 0.2 else self.random.choice(["plain", "it's quoted", "ünïcödé ✓", "", "a\nb"]),
        }

    def insert(self, *, op: str = "c") -> None:
        key, self.next_id = self.next_id, self.next_id + 1
        values = self.values()
        self.database.sql(
            f"INSERT INTO {TABLE} (id, amount, placed, note) VALUES "
            f"({key}, {literal(values['amount'])}, {literal(values['placed'])}, {literal(values['note'])})"
        )
        self.rows[key] = self.row(key)
        self.expected.setdefault(key, []).append((op, None, self.rows[key]))

    def update(self) -> None:
        key = self.random.choice(sorted(self.rows))
        changed = {k: v for k, v in self.values().items() if self.random.random() < 0.6} or {"note": "changed"}
        self.database.sql(
            f"UPDATE {TABLE} SET {', '.join(f'{k} = {literal(v)}' for k, v in changed.items())} WHERE id = {key}"
        )
        before, self.rows[key] = self.rows[key], self.row(key)
        self.expected[key].append(("u", before, self.rows[key]))

    def delete(self) -> None:
        key = self.random.choice(sorted(self.rows))
        self.database.sql(f"DELETE FROM {TABLE} WHERE id = {key}")
        self.expected[key] += [("d", self.rows.pop(key), None), TOMBSTONE]

    def change_key(self) -> None:
        old = self.random.choice(sorted(self.rows))
        new, self.next_id = self.next_id, self.next_id + 1
        self.database.sql(f"UPDATE {TABLE} SET id = {new}, note = 'moved' WHERE id = {old}")
        self.rows[new] = self.row(new)
        self.expected[old] += [("d", self.rows.pop(old), None), TOMBSTONE]
        self.expected.setdefault(new, []).append(("c", None, self.rows[new]))

    def changes(self, count: int) -> None:
        """``count`` random changes: mostly updates, some inserts, deletes and key changes."""
        for _ in range(count):
            if len(self.rows) < 3:
                self.insert()
                continue
            self.random.choices([self.insert, self.update, self.delete, self.change_key], [3, 5, 1, 1])[0]()

    def total(self) -> int:
        return sum(len(events) for events in self.expected.values())


def by_key(events: list[ChangeEvent]) -> tuple[dict[int, list[Expected]], int]:
    """The events of each key in topic order, repeats left out, and how many repeats there were.
    A repeat is an event whose (op, source.lsn) the key already had, with the tombstone after a
    repeated delete; it must be the same event again (asserted here)."""
    seen: dict[int, dict[tuple[str, int], Expected]] = {}
    keyed: dict[int, list[Expected]] = {}
    repeats = 0
    skip_tombstone: set[int] = set()
    for event in events:
        assert event.key is not None, f"a record without a key at {event.partition}:{event.offset}"
        key = event.key["id"]
        if event.value is None:
            if key in skip_tombstone:
                skip_tombstone.discard(key)
                repeats += 1
            else:
                keyed.setdefault(key, []).append(TOMBSTONE)
            continue
        value = event.value
        assert value["source"]["table"] == "orders" and isinstance(event.lsn, int), value
        entry: Expected = (value["op"], normalised(value["before"]), normalised(value["after"]))
        first = seen.setdefault(key, {}).setdefault((value["op"], event.lsn), entry)
        if first is not entry and value["op"] != "r":
            assert first == entry, f"key {key}: two different events at LSN {event.lsn}: {first} and {entry}"
            repeats += 1
            if value["op"] == "d":
                skip_tombstone.add(key)
            continue
        keyed.setdefault(key, []).append(entry)
    return keyed, repeats


def expected_by_key(workload: Workload) -> dict[int, list[Expected]]:
    return {
        key: [(op, normalised(before), normalised(after)) for op, before, after in events]
        for key, events in workload.expected.items()
    }


@pytest.mark.parametrize(
    ("cdc_broker", "exactly_once"),
    [*((kind, False) for kind in BROKERS), ("kafkalog", True)],
    ids=[*BROKERS, "kafkalog-exactly-once"],
    indirect=["cdc_broker"],
)
def test_the_topic_of_a_table_is_what_the_database_did_and_a_killed_worker_loses_nothing(
    cdc_broker: Broker, exactly_once: bool, source_database: PostgresProcess, tmp_path: Path
) -> None:
    """At least once by default; with Connect's exactly-once source support (KIP-618: the task's
    records and its source offsets in one transaction per poll), on kafkalog, nothing comes twice."""
    name = f"cdc{uuid.uuid4().hex[:8]}"  # the connector, its topics' prefix, slot and publication
    topic = f"{name}.{TABLE}"
    database = source_database
    database.sql(
        f"CREATE TABLE {TABLE} (id integer PRIMARY KEY, amount numeric(12, 2), placed timestamptz, "
        "note text DEFAULT 'none')"
    )
    debezium.prepare_source(database, [TABLE], publication=name)
    workload = Workload(database, seed=47)
    for _ in range(12):
        workload.insert(op="r")  # before the connector: its snapshot's rows

    cluster = ConnectCluster(cdc_broker.bootstrap, f"connect-{name}")
    # source offsets flushed every 5 s: a crash soon after some events were sent finds their
    # offsets not yet stored, and Debezium sends them again
    eos_worker = {"exactly.once.source.support": "enabled"} if exactly_once else {}
    worker = ConnectWorker(
        tmp_path / "worker", cluster, **debezium.worker_settings(), **{"offset.flush.interval.ms": 5000}, **eos_worker
    )

    def stored_lsn() -> int:
        """The LSN of the source offset Connect last stored (in its offsets topic), 0 if none."""
        stored = [json.loads(v) for k, v in last_values(cdc_broker.bootstrap, cluster.internal_topics[1]).items()
                  if json.loads(k)[0] == name]  # fmt: skip
        return int(stored[-1]["lsn"]) if stored and stored[-1].get("lsn") is not None else 0

    def sent_lsn() -> int:
        """The highest source.lsn of a change (not a snapshot read) in the topic."""
        return max(e.lsn or 0 for e in debezium.read_events(cdc_broker.bootstrap, topic) if e.op in ("c", "u", "d"))

    def caught_up(what: str) -> tuple[dict[int, list[Expected]], int]:
        """Wait until the topic has every expected event (repeats aside); return it by key."""

        def complete() -> tuple[dict[int, list[Expected]], int] | None:
            keyed, repeats = by_key(debezium.read_events(cdc_broker.bootstrap, topic))
            return (keyed, repeats) if sum(map(len, keyed.values())) >= workload.total() else None

        return eventually(f"{what}: {workload.total()} events in {topic}", complete, timeout=90,
                          explain=lambda: tail(worker.log, 60))  # fmt: skip

    try:
        worker.start()
        debezium.register(
            worker,
            name,
            debezium.connector_config(
                database,
                name,
                [TABLE],
                slot=name,
                publication=name,
                partitions=PARTITIONS,
                **({"exactly.once.support": "required"} if exactly_once else {}),
            ),
        )
        caught_up("the snapshot")
        workload.changes(40)
        keyed, repeats = caught_up("the changes")
        assert (keyed, repeats) == (expected_by_key(workload), 0)
        configs = topic_configs(cdc_broker.bootstrap, topic)
        assert configs["cleanup.policy"] == "delete"
        assert {topic, f"__debezium-heartbeat.{name}"} <= list_topics(cdc_broker.bootstrap)
        partitions = {event.partition for event in debezium.read_events(cdc_broker.bootstrap, topic)}
        assert len(partitions) > 1, "the keys spread over the topic's partitions"

        # a crash in the middle of the changes: the events after the last stored offset come again
        # (once an offset after the snapshot is stored: else the restart would take the snapshot again)
        last = sent_lsn()
        worker.poll("an offset stored after the first changes", lambda: True if stored_lsn() >= last else None, 30)
        workload.changes(15)
        eventually("some of the changes sent", lambda: True if sent_lsn() > last else None, timeout=60,
                   explain=lambda: tail(worker.log, 60))  # fmt: skip
        worker.kill()
        behind = stored_lsn() < sent_lsn()  # some events sent after the last offset stored
        workload.changes(15)  # while no worker runs: the slot keeps them
        worker.start()
        worker.poll(f"{name} running again", lambda: worker.running(name, 1), timeout=120)
        workload.changes(15)
        keyed, repeats = caught_up("the changes across the crash")
        assert keyed == expected_by_key(workload), f"{repeats} repeats"
        if exactly_once:
            assert repeats == 0, "exactly once: no event twice"
        else:
            assert repeats > 0 or not behind, "events sent after the last stored offset were not sent again"
        # the table as PostgreSQL has it: the last event of each key that is not deleted
        current = {key: events[-1][2] for key, events in keyed.items() if events[-1][0] in ("r", "c", "u")}
        in_database = {row["id"]: normalised(row) for row in database.query(f"SELECT * FROM {TABLE}")}
        assert current == in_database
    finally:
        worker.stop()
        debezium.drop_slot(database, name)
