"""Spark's own Kafka source is real: ``spark.read.format("kafka")`` (spark-sql-kafka from Maven
Central, on the shared session's class path) reads a topic of the Apache Kafka 4.x peer: every
record once, with its offsets, keys, values and headers."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.kafka4 import Kafka4Process

pytestmark = pytest.mark.integration


def test_batch_read_of_a_kafka4_topic(kafka4: Kafka4Process, spark: Any) -> None:
    kafka4.create_topic("smoke-spark", partitions=2)
    records = [({"n": str(i)}, f"key-{i}", f"value-{i}") for i in range(50)]
    kafka4.console_produce("smoke-spark", records)
    frame = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", kafka4.bootstrap)
        .option("subscribe", "smoke-spark")
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .option("includeHeaders", "true")
        .load()
    )
    rows = frame.selectExpr(
        "CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value", "partition", "offset", "headers"
    ).collect()
    assert sorted(row.key for row in rows) == sorted(f"key-{i}" for i in range(50))
    assert {row.key: row.value for row in rows} == {f"key-{i}": f"value-{i}" for i in range(50)}
    assert {row.partition for row in rows} <= {0, 1}
    per_partition: dict[int, list[int]] = {}
    for row in rows:
        per_partition.setdefault(row.partition, []).append(row.offset)
    for offsets in per_partition.values():  # each partition from 0, no gaps, none twice
        assert sorted(offsets) == list(range(len(offsets)))
    for row in rows:
        assert [(h.key, bytes(h.value).decode()) for h in row.headers] == [("n", row.key.removeprefix("key-"))]
