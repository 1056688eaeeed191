"""Apache Kafka 4.x's MirrorMaker 2 in its dedicated mode (``org.apache.kafka.connect.mirror.MirrorMaker``,
what bin/connect-mirror-maker.sh starts, on Kafka Connect's runtime), between two single-broker
clusters: what the ecosystem tests (tests/kafkalog/ecosystem/test_mirror_maker2.py) and the
benchmark (bench/mirror2_bench.py) share.

``one_flow`` is the part of an mm2.properties every such run has (the two clusters, the one flow
source→target, one replica for every topic MirrorMaker 2 creates); each caller adds its own
settings and writes them with ``write_properties``. ``command`` is its command line, run with
``--clusters <target>``: only the herders of flows into the target, as it runs beside that cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from tests.support.installed import KAFKA4_LIBS, require_jar

MM2_MAIN = "org.apache.kafka.connect.mirror.MirrorMaker"
MM2_LOG4J = """\
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {path}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
"""
"""MirrorMaker 2's log4j2 configuration writing its INFO lines to the file ``{path}``."""


def require_mm2() -> Path:
    """connect-mirror's jar among Kafka 4.x's, else MissingPeer saying to run `make peers`."""
    return require_jar("connect-mirror-4.*.jar", "MirrorMaker 2 (connect-mirror 4.x, Maven Central)")


def one_flow(source: str, target: str, source_bootstrap: str, target_bootstrap: str, topics: str) -> dict[str, object]:
    """The settings of one flow ``source``→``target`` (cluster aliases) mirroring the topics the
    regex ``topics`` matches, each cluster one broker: every topic MirrorMaker 2 creates (the
    mirrored ones, its heartbeats, checkpoints and offset syncs, and Connect's configs, offsets and
    statuses) gets one replica (its default, 3, fails to create on one broker)."""
    return {
        "clusters": f"{source}, {target}",
        f"{source}.bootstrap.servers": source_bootstrap,
        f"{target}.bootstrap.servers": target_bootstrap,
        f"{source}->{target}.enabled": "true",
        f"{source}->{target}.topics": topics,
        "replication.factor": 1,
        "heartbeats.topic.replication.factor": 1,
        "checkpoints.topic.replication.factor": 1,
        "offset-syncs.topic.replication.factor": 1,
        "offset.storage.replication.factor": 1,
        "status.storage.replication.factor": 1,
        "config.storage.replication.factor": 1,
    }


def write_properties(path: Path, settings: Mapping[str, object]) -> Path:
    """``settings`` as an mm2.properties file at ``path``."""
    path.write_text("".join(f"{key} = {value}\n" for key, value in settings.items()))
    return path


def command(properties: Path, log4j: Path, jvm: Sequence[str], target: str) -> list[str]:
    """MirrorMaker 2's command line (``java`` from PATH, Kafka 4.x's jars on the class path) running
    only the herders of flows into ``target``."""
    require_mm2()
    return ["java", *jvm, f"-Dlog4j2.configurationFile={log4j}", "-cp", f"{KAFKA4_LIBS}/*", MM2_MAIN,
            str(properties), "--clusters", target]  # fmt: skip
