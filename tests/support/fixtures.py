"""The peers shared by the whole test run, started once on first use (session scope) and stopped at
its end: one Spark session, one ZooKeeper, one Apache Kafka 0.9.0.1 broker, one Apache Kafka 4.x
broker, one Hive metastore service on PostgreSQL; and one set of Hadoop mini clusters (HDFS and
YARN) for the package that uses them. Loaded
by the root conftest (``pytest_plugins``). Tests that need a peer of their own (to crash it, or two
at once) construct it from tests.support directly."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.certificates import authority, person, pkcs12_keystore
from tests.support.hadoop import HadoopCluster
from tests.support.kafka09 import Kafka09Process
from tests.support.kafka4 import Kafka4Process, secured_kafka4
from tests.support.kafkalog import BrokerProcess
from tests.support.metastore import HiveMetastoreProcess
from tests.support.postgres import PostgresProcess
from tests.support.spark import spark_kafka_jars, stop_spark
from tests.support.zookeeper import ZooKeeperProcess


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local Spark session for the run (a JVM start costs seconds): ``local[2,4]``, two cores
    and failed tasks retried (plain local[N] never retries); Spark's Kafka source on its class path."""
    from pipelines.app.session import local_session

    jars = ",".join(str(jar) for jar in spark_kafka_jars())
    session = local_session("local[2,4]", "pipelines-tests", {"spark.jars": jars})
    yield session
    stop_spark(session)


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperProcess]:
    with ZooKeeperProcess(Path(tmp_path_factory.mktemp("zookeeper"))) as server:
        yield server


@pytest.fixture(scope="session")
def kafka09(zookeeper: ZooKeeperProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kafka09Process]:
    """An Apache Kafka 0.9.0.1 broker (3 partitions per new topic, topics created on first use),
    registered under a chroot of the shared ZooKeeper; stopped before it."""
    with Kafka09Process(Path(tmp_path_factory.mktemp("kafka09")), zookeeper) as broker:
        yield broker


@pytest.fixture(scope="session")
def kafka4(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kafka4Process]:
    """An Apache Kafka 4.x broker (KRaft, broker and controller in one process), serving PLAINTEXT
    (``bootstrap``) and SASL_SSL with a SCRAM-SHA-512 user (``secured``): one JVM for both. Its
    coordinator looks for timed-out transactions every second (Kafka's default: every 10 s), so a
    test of a producer that died in a transaction waits for its abort seconds, not tens of seconds;
    its log cleaner looks for a dirty compacted log every second (default: 15 s), so a test that
    waits for a compaction (tests/kafkalog/ecosystem) waits as long."""
    root = Path(tmp_path_factory.mktemp("kafka4"))
    ca = authority(root / "certs")
    keystore = pkcs12_keystore(ca.issue("broker", person("broker"), server=True), root / "broker.p12", "keystore-pw")
    broker, _ = secured_kafka4(
        root / "broker",
        keystore,
        "keystore-pw",
        {"client": "client-Pw-4x"},
        ca.certificate,
        **{"transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000, "log.cleaner.backoff.ms": 1000},
    )
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def kafkalog_shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One kafkalog broker for the tests that race it against ``kafka4`` and leave it as they found it
    (topics and transactional ids of their own): record batches, transaction timeouts checked every
    200 ms (so a test of a timeout waits for the timeout, not for the check)."""
    root = Path(tmp_path_factory.mktemp("kafkalog-shared"))
    with BrokerProcess(root / "data", transactions={"abort_check_interval_ms": 200}) as broker:
        yield broker


@pytest.fixture(scope="session")
def hive_metastore(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HiveMetastoreProcess]:
    """A standalone Hive metastore service (thrift, on loopback) backed by a real PostgreSQL."""
    with PostgresProcess() as database, HiveMetastoreProcess(tmp_path_factory.mktemp("metastore"), database) as hms:
        yield hms


@pytest.fixture(scope="package")
def hadoop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HadoopCluster]:
    """A real HDFS (NameNode with WebHDFS, one DataNode) and YARN (ResourceManager, NodeManager),
    for the tests of one package (only tests/hadoop uses them): stopped when that package is done,
    so their idle JVMs do not slow the rest of the run."""
    with HadoopCluster(Path(tmp_path_factory.mktemp("hadoop")), yarn=True) as cluster:
        yield cluster
