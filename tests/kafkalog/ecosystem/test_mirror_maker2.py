"""MirrorMaker 2 (Apache Kafka 4.x, dedicated mode) from one broker to another: every record of the
source topic arrives in the target's remote topic, and a consumer group's offsets on the source are
translated into the same group on the target (checkpoints and group offset sync), so a consumer that
fails over to the target starts where it stopped.

What the brokers must serve for it: on the target, the compacted topics of the Connect runtime
MirrorMaker 2 runs on (configs, offsets, statuses) and of its checkpoints, its worker group, topics
created with the source topic's configs (DescribeConfigs on the source, CreateTopics on the target)
and group offsets altered by an admin client; on the source, the compacted offset-syncs topic, and
the listing and reading of its consumer groups' offsets. The pairs (source, target): ``PAIRS``."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest

from kafkalog.client import Admin, Producer
from kafkalog.client.offsets import OffsetsClient
from tests.support.connect import PEER_JVM, PEER_LOG4J
from tests.support.ecosystem import Broker, BrokerKind, eventually, fresh_broker, log_of, read_all, topic_configs
from tests.support.mirror2 import command, one_flow, write_properties
from tests.support.processes import spawn, stop_group, tail

pytestmark = pytest.mark.integration

PAIRS: tuple[tuple[BrokerKind, BrokerKind], ...] = (("kafkalog", "kafkalog"), ("kafka4", "kafkalog"))
PARTITIONS = 2
PER_PARTITION = 100


@contextlib.contextmanager
def brokers(
    kinds: tuple[BrokerKind, BrokerKind], request: pytest.FixtureRequest, root: Path
) -> Iterator[tuple[Broker, Broker]]:
    """(source, target): the session's Kafka 4.x broker for the first kafka4 of the pair (the test's
    topics, groups and cluster aliases are its own), a broker of its own for the other."""
    with contextlib.ExitStack() as stack:
        ends: list[Broker] = []
        for role, kind in zip(("source", "target"), kinds, strict=True):
            if kind == "kafka4" and "kafka4" not in kinds[: len(ends)]:
                ends.append(request.getfixturevalue("kafka4"))
            else:
                ends.append(stack.enter_context(fresh_broker(kind, root / role)))
        yield ends[0], ends[1]


def consume_all(bootstrap: str, topic: str, group: str, count: int) -> None:
    """A librdkafka consumer of ``group`` reads ``count`` records of ``topic``, commits, and leaves."""
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
         "enable.auto.commit": False}
    )  # fmt: skip
    try:
        consumer.subscribe([topic])
        read, deadline = 0, time.monotonic() + 60
        while read < count:
            assert time.monotonic() < deadline, f"{group} read {read} of {count} records of {topic} in 60 s"
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                read += 1
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


@pytest.mark.parametrize("kinds", PAIRS, ids="->".join)
def test_every_record_arrives_and_a_groups_offsets_are_translated_on_the_target(
    kinds: tuple[BrokerKind, BrokerKind], request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:6]
    source_alias, target_alias = f"src{tag}", f"dst{tag}"
    topic, group = f"mm2-{tag}-orders", f"mm2-{tag}-readers"
    remote = f"{source_alias}.{topic}"  # DefaultReplicationPolicy: <source alias>.<topic>
    with brokers(kinds, request, tmp_path) as (source, target):
        with Admin(source.bootstrap) as admin:
            admin.create_topic(topic, PARTITIONS)
        sent = {p: [(f"k{p}-{i}", f"v{p}-{i}") for i in range(PER_PARTITION)] for p in range(PARTITIONS)}
        with Producer(source.bootstrap, acks=-1) as producer:
            for p, records in sent.items():
                for key, value in records:
                    producer.send(topic, value.encode(), key.encode(), partition=p)
        consume_all(source.bootstrap, topic, group, PARTITIONS * PER_PARTITION)

        settings = {
            **one_flow(source_alias, target_alias, source.bootstrap, target.bootstrap, topic),
            f"{source_alias}->{target_alias}.groups": group,
            # translate the group's offsets and write them into the target's group, every second
            "emit.checkpoints.enabled": "true",
            "emit.checkpoints.interval.seconds": 1,
            "sync.group.offsets.enabled": "true",
            "sync.group.offsets.interval.seconds": 1,
            "refresh.groups.interval.seconds": 1,
            "refresh.topics.interval.seconds": 1,
            "emit.heartbeats.interval.seconds": 1,
            # the worker of the flow (settings for it are prefixed with the target's alias): the
            # offset syncs of the last records go out at its next offset commit (default: a minute)
            f"{target_alias}.offset.flush.interval.ms": 1000,
            # its connectors found by their ServiceLoader manifests, not by scanning every jar
            # reflectively (twice: 8 s of a start-up on the 2-core machine)
            "plugin.discovery": "service_load",
            f"{target_alias}.plugin.discovery": "service_load",
            "offset.storage.partitions": 2,  # default 25
            "status.storage.partitions": 1,  # default 5
        }
        properties = write_properties(tmp_path / "mm2.properties", settings)
        log4j = tmp_path / "mm2-log4j2.properties"
        log4j.write_text(PEER_LOG4J)
        log = tmp_path / "mm2.log"
        process = spawn(command(properties, log4j, PEER_JVM, target_alias), log=log)

        def explain() -> str:
            return "\n".join([tail(log, 60), tail(log_of(source), 15), tail(log_of(target), 15)])

        try:

            def mirrored() -> dict[int, list[tuple[str, str]]] | None:
                if process.poll() is not None:
                    raise AssertionError(f"MirrorMaker 2 exited with {process.returncode}\n{explain()}")
                with Admin(target.bootstrap) as admin:
                    if remote not in admin.list_topics():
                        return None
                held = {
                    p: [(m.key.decode(), m.value.decode()) for m in messages if m.key and m.value]
                    for p, messages in read_all(target.bootstrap, remote).items()
                }
                return held if sum(map(len, held.values())) >= PARTITIONS * PER_PARTITION else None

            held = eventually(f"every record in {remote} on the target", mirrored, timeout=120, explain=explain)
            for p in range(PARTITIONS):
                duplicates = sum(n - 1 for n in Counter(held.get(p, [])).values())
                assert held.get(p) == sent[p], (
                    f"partition {p}: {len(held.get(p, []))} records for {PER_PARTITION}, {duplicates} duplicates"
                )

            with OffsetsClient(target.bootstrap) as offsets:
                wanted = [(remote, p) for p in range(PARTITIONS)]
                translated = eventually(
                    f"{group}'s offsets of {remote} on the target",
                    lambda: found if all((found := offsets.fetch(group, wanted)).values()) and set(
                        found.values()) == {PER_PARTITION} else None,
                    timeout=90,
                    explain=lambda: f"the target's group has {offsets.fetch(group, wanted)}\n{explain()}",
                )  # fmt: skip
            assert translated == {(remote, p): PER_PARTITION for p in range(PARTITIONS)}

            compacted = {
                target.bootstrap: [f"mm2-{kind}.{source_alias}.internal" for kind in ("configs", "offsets", "status")]
                + [f"{source_alias}.checkpoints.internal"],
                source.bootstrap: [f"mm2-offset-syncs.{target_alias}.internal"],
            }
            for bootstrap, names in compacted.items():
                for name in names:
                    assert topic_configs(bootstrap, name)["cleanup.policy"] == "compact", name
        finally:
            stop_group(process)
