"""The mirror-maker against the real thing: Apache Kafka 0.9.0.1 (its broker, its ZooKeeper registry
and its own MirrorMaker), all as processes on loopback.

- ``kafkalog mirror`` from a Kafka 0.9 broker into a kafkalog broker, the source given by its
  bootstrap list (offsets committed through Kafka's coordinator: FindCoordinator, OffsetCommit v2
  with generation -1, kept in ``__consumer_offsets`` and read back by kafka-python) and by Kafka's
  own ZooKeeper registry (our group consumer reads ``/brokers/ids`` and ``/brokers/topics`` as Kafka
  wrote them and commits at ``/consumers/<group>/offsets``, which Kafka itself serves through
  OffsetFetch v0); a restart repeats nothing. Compression "preserve" keeps each message's codec,
  and a partition that mixes codecs keeps its order.
- ``kafkalog mirror`` into a Kafka 0.9 broker (which has no CreateTopics).
- ``broker_version="0.9"`` spares the 2 s ApiVersions probe a 0.9 broker leaves unanswered.
- Kafka 0.9's MirrorMaker (its old ZooKeeper consumer and its Java producer) from a kafkalog
  cluster registered in ZooKeeper into another; its offsets land in our registry, and our mirror
  takes over from them without repeating anything.

Kafka 0.9 and its ZooKeeper are started once for the module (about 10 s); each test has its own
kafkalog brokers, topics and group. The aggregate brokers do not auto-create topics: the tests poll
the target while the mirror runs, and a poll must not create the topic before the mirror does (with
the broker's default partition count, so the mirror would spread messages by key).
"""

from __future__ import annotations

import collections
import logging
import os
import re
import signal
import subprocess
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from kafkalog.client import Admin, Client, Producer, SimpleConsumer, murmur2
from kafkalog.client.offsets import OffsetsClient
from kafkalog.protocol import ApiKey
from kafkalog.record.message import Codec
from tests.support.installed import KAFKA09_HOME as KAFKA_HOME
from tests.support.kafka09 import Kafka09Process
from tests.support.kafkalog import KAFKALOG, BrokerProcess, roundtrip
from tests.support.zookeeper import ZooKeeperProcess

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # kafka-python uses a deprecated importlib API
    import kafka

PARTITIONS = 3
"""num.partitions of the Kafka 0.9 broker: what its auto-created topics get."""
CODECS = ("none", "gzip", "snappy")

Contents = dict[int, list[tuple[bytes | None, bytes | None]]]


# ------------------------------------------ peers: ZooKeeper and Kafka 0.9 are tests.support.fixtures


class MirrorProcess:
    """``kafkalog mirror ARGS`` in a child process; its status lines and log go to ``log_path``."""

    def __init__(self, log_path: Path, *args: str) -> None:
        self.log_path = log_path
        self.args = args
        self.process: subprocess.Popen[str] | None = None
        self._since = 0

    def start(self) -> MirrorProcess:
        with self.log_path.open("a") as log:  # the child keeps its own descriptor
            self._since = log.tell()
            self.process = subprocess.Popen(
                [str(KAFKALOG), "mirror", *self.args],
                stdout=log,
                stderr=subprocess.STDOUT,
                text=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        return self

    def output(self) -> str:
        """What this run wrote (the log file collects every run)."""
        return self.log_path.read_text(errors="replace")[self._since :]

    def wait(self, timeout: float) -> int:
        assert self.process is not None
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the mirror did not exit within {timeout} s:\n{self.output()[-4000:]}") from None

    def stop(self, timeout: float = 90) -> int:
        """SIGTERM (a graceful stop) and its exit code."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.wait(timeout)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


def stop_broker(broker: BrokerProcess) -> None:
    if broker.process is not None and broker.process.poll() is None:
        try:
            broker.stop()
        except subprocess.TimeoutExpired:
            broker.kill()


def stop_java(process: subprocess.Popen[bytes] | None) -> None:
    if process is not None and process.poll() is None:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


# ---------------------------------------------------------------------- helpers


def wait_for(what: str, check: Callable[[], object], timeout: float, diagnostics: Callable[[], str]) -> None:
    """Poll ``check`` until it returns something true; an exception counts as "not yet"."""
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            last = check()
        except Exception as exc:  # a topic not created yet, a node not written yet, ...
            last = exc
        if last and not isinstance(last, Exception):
            return
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not within {timeout} s (last: {last!r})\n{diagnostics()}")
        time.sleep(0.3)


def produce_mixed(client: Client, topic: str, per_codec: int, tag: str, partition: int | None = None) -> None:
    """``per_codec`` messages in each codec (none, gzip, snappy), each codec through its own producer
    flushed before the next, so the log holds sets of every codec; two in three messages have a key."""
    for codec in CODECS:
        with Producer(client=client, compression=codec, linger_ms=10) as producer:
            futures = []
            for i in range(per_codec):
                key = f"key-{i % 7}".encode() if i % 3 else None
                futures.append(producer.send(topic, f"{tag}-{codec}-{i}".encode(), key, partition=partition))
            producer.flush()
            for future in futures:
                future.result(0)


def contents(consumer: SimpleConsumer, topic: str, partitions: int) -> Contents:
    """(key, value) of every message of each partition, in offset order."""
    return {p: [(m.key, m.value) for m in consumer.messages(topic, p, 0)] for p in range(partitions)}


def as_multiset(by_partition: Contents) -> collections.Counter[tuple[bytes | None, bytes | None]]:
    return collections.Counter(item for messages in by_partition.values() for item in messages)


def summary(by_partition: Contents) -> dict[int, int]:
    return {p: len(messages) for p, messages in by_partition.items()}


def committed_in_kafka09(bootstrap: str, group: str, topic: str) -> list[int | None]:
    """The group's committed offsets as kafka-python reads them from Kafka 0.9 (OffsetFetch v1:
    Kafka's own offset storage, ``__consumer_offsets``)."""
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group, api_version=(0, 9), enable_auto_commit=False
    )
    try:
        return [consumer.committed(kafka.TopicPartition(topic, p)) for p in range(PARTITIONS)]
    finally:
        consumer.close()


def list_topics(bootstrap: str) -> dict[str, int]:
    with Admin(bootstrap) as admin:
        return admin.list_topics()


def zk_children(zk: KazooClient, path: str) -> list[str]:
    return sorted(zk.get_children(path)) if zk.exists(path) else []


def zk_offsets(zk: KazooClient, group: str, topic: str, partitions: int) -> list[int | None]:
    out: list[int | None] = []
    for p in range(partitions):
        path = f"/consumers/{group}/offsets/{topic}/{p}"
        out.append(int(zk.get(path)[0].decode()) if zk.exists(path) else None)
    return out


def codec_runs(consumer: SimpleConsumer, topic: str, partition: int, count: int) -> list[tuple[str, int, int]]:
    """(codec, first offset, last offset) of each run of messages stored in the same codec: a fetch
    at an offset answers from the message set that holds it, and its first entry's codec is that set's."""
    runs: list[tuple[str, int, int]] = []
    for offset in range(count):
        name = Codec(consumer.fetch(topic, partition, offset, max_bytes=64).codec).name.lower()
        if runs and runs[-1][0] == name:
            runs[-1] = (name, runs[-1][1], offset)
        else:
            runs.append((name, offset, offset))
    return runs


# ---------------------------------------------------------------------- our mirror, from Kafka 0.9


@pytest.mark.slow
def test_our_mirror_from_kafka09_by_bootstrap(kafka09: Kafka09Process, tmp_path: Path) -> None:
    """Every message in its partition with its key; offsets committed in Kafka's own storage equal
    the partitions' ends after SIGTERM; a restart resumes there and repeats nothing."""
    topic, group = "events.boot", "mirror-boot"
    source = Client(kafka09.bootstrap, broker_version="0.9")
    target = BrokerProcess(tmp_path / "aggregate", auto_create_topics=False)  # only the mirror creates
    mirror: MirrorProcess | None = None
    try:
        target.start()
        produce_mixed(source, topic, 40, "first")  # Kafka 0.9 auto-creates the topic (3 partitions)
        with SimpleConsumer(client=source) as reader:
            expected = contents(reader, topic, PARTITIONS)
        assert all(expected.values()), f"every partition of the source has messages: {summary(expected)}"
        ends = [len(expected[p]) for p in range(PARTITIONS)]

        mirror = MirrorProcess(
            tmp_path / "mirror.log",
            "--source", kafka09.bootstrap, "--target", target.bootstrap, "--whitelist", re.escape(topic),
            "--group", group, "--commit-interval-ms", "500", "--status-interval-ms", "1000",
        ).start()  # fmt: skip
        with SimpleConsumer(target.bootstrap, request_timeout_ms=5000) as mirrored:
            wait_for(
                "the target holds every source message, in its partition, with its key",
                lambda: contents(mirrored, topic, PARTITIONS) == expected,
                60,
                mirror.output,
            )
            assert mirror.stop() == 0, mirror.output()[-4000:]
            output = mirror.output()
            assert f"created {topic} on the target with {PARTITIONS} partition(s)" in output
            assert "mirror stopped: 120 messages" in output, output[-4000:]
            # Kafka 0.9 accepted OffsetCommit v2 with generation -1 (a "simple" commit: no group membership)
            assert committed_in_kafka09(kafka09.bootstrap, group, topic) == ends, output[-4000:]

            # more messages while the mirror is down; the restart resumes at the committed offsets
            produce_mixed(source, topic, 10, "second")
            with SimpleConsumer(client=source) as reader:
                expected = contents(reader, topic, PARTITIONS)
            new_ends = [len(expected[p]) for p in range(PARTITIONS)]
            mirror.start()
            wait_for(
                "the restarted mirror brings the new messages",
                lambda: summary(contents(mirrored, topic, PARTITIONS)) == summary(expected),
                60,
                mirror.output,
            )
            time.sleep(1.5)  # anything mirrored twice would arrive by now
            assert contents(mirrored, topic, PARTITIONS) == expected, "nothing twice, nothing lost"
            output = mirror.output()
            for p in range(PARTITIONS):
                assert f"mirroring {topic}-{p} from offset {ends[p]}" in output, output[-4000:]
            assert mirror.stop() == 0, mirror.output()[-4000:]
            assert "mirror stopped: 30 messages" in mirror.output()
            assert committed_in_kafka09(kafka09.bootstrap, group, topic) == new_ends
            # internal topics are never mirrored (Kafka 0.9 created __consumer_offsets for the commits)
            with Admin(target.bootstrap) as admin:
                assert admin.list_topics() == {topic: PARTITIONS}
    finally:
        if mirror is not None:
            mirror.kill()
        stop_broker(target)
        source.close()


@pytest.mark.slow
def test_our_mirror_from_kafka09_registered_in_zookeeper(
    kafka09: Kafka09Process, zookeeper: ZooKeeperProcess, tmp_path: Path
) -> None:
    """The source named by Kafka 0.9's own registry: our group consumer reads the broker and topic
    nodes Kafka wrote, commits at /consumers/<group>/offsets (which Kafka itself serves through
    OffsetFetch v0) and leaves the group on SIGTERM; a restart repeats nothing."""
    topic, group = "events.zk", "mirror-zk"
    chroot = f"{zookeeper.connect}/kafka09-{kafka09.port}"  # Kafka09Process's zookeeper.connect
    source = Client(kafka09.bootstrap, broker_version="0.9")
    target = BrokerProcess(tmp_path / "aggregate", auto_create_topics=False)  # only the mirror creates
    zk = KazooClient(hosts=chroot, timeout=5.0)
    mirror: MirrorProcess | None = None
    try:
        target.start()
        zk.start(timeout=15)
        produce_mixed(source, topic, 40, "first")
        with SimpleConsumer(client=source) as reader:
            expected = contents(reader, topic, PARTITIONS)
        ends = [len(expected[p]) for p in range(PARTITIONS)]
        assert zk_children(zk, "/brokers/ids") == ["0"], "Kafka 0.9 registered itself in the chroot"

        mirror = MirrorProcess(
            tmp_path / "mirror.log",
            "--source", f"zk:{chroot}", "--target", target.bootstrap, "--whitelist", re.escape(topic),
            "--group", group, "--streams", "2", "--commit-interval-ms", "500", "--status-interval-ms", "1000",
        ).start()  # fmt: skip
        with SimpleConsumer(target.bootstrap, request_timeout_ms=5000) as mirrored:
            wait_for(
                "the target holds every source message, in its partition, with its key",
                lambda: contents(mirrored, topic, PARTITIONS) == expected,
                60,
                mirror.output,
            )
            members = zk_children(zk, f"/consumers/{group}/ids")
            assert len(members) == 1, f"one member in Kafka's registry: {members}"
            owners = {p: zk.get(f"/consumers/{group}/owners/{topic}/{p}")[0].decode() for p in range(PARTITIONS)}
            assert all(owner.startswith(members[0]) for owner in owners.values()), owners
            assert mirror.stop() == 0, mirror.output()[-4000:]

            assert zk_offsets(zk, group, topic, PARTITIONS) == ends, mirror.output()[-4000:]
            # Kafka 0.9 answers OffsetFetch v0 from ZooKeeper: it reads our commits as its own
            fetched = roundtrip(
                kafka09.port, ApiKey.OFFSET_FETCH, 0,
                {"group_id": group, "topics": [{"topic": topic, "partitions": list(range(PARTITIONS))}]},
            )  # fmt: skip
            answers = {a["partition"]: a for a in fetched["responses"][0]["partition_responses"]}
            assert [(answers[p]["error_code"], answers[p]["offset"]) for p in range(PARTITIONS)] == [
                (0, end) for end in ends
            ]
            assert zk_children(zk, f"/consumers/{group}/ids") == [], "the member left the group"
            assert zk_children(zk, f"/consumers/{group}/owners/{topic}") == [], "the partitions were released"

            produce_mixed(source, topic, 10, "second")
            with SimpleConsumer(client=source) as reader:
                expected = contents(reader, topic, PARTITIONS)
            new_ends = [len(expected[p]) for p in range(PARTITIONS)]
            mirror.start()
            wait_for(
                "the restarted mirror brings the new messages",
                lambda: summary(contents(mirrored, topic, PARTITIONS)) == summary(expected),
                60,
                mirror.output,
            )
            time.sleep(1.5)  # anything mirrored twice would arrive by now
            assert contents(mirrored, topic, PARTITIONS) == expected, "nothing twice, nothing lost"
            assert mirror.stop() == 0, mirror.output()[-4000:]
            assert "mirror stopped: 30 messages" in mirror.output(), mirror.output()[-4000:]
            assert zk_offsets(zk, group, topic, PARTITIONS) == new_ends
    finally:
        if mirror is not None:
            mirror.kill()
        stop_broker(target)
        zk.stop()
        zk.close()
        source.close()


@pytest.mark.slow
def test_our_mirror_preserves_kafka09_compression(kafka09: Kafka09Process, tmp_path: Path) -> None:
    """compression: preserve (the default) forwards each message set as the source stored it: a gzip
    topic stays gzip, a snappy topic snappy, and a topic of mixed codecs keeps its runs of each."""
    source = Client(kafka09.bootstrap, broker_version="0.9")
    target = BrokerProcess(tmp_path / "aggregate", auto_create_topics=False)  # only the mirror creates
    mirror: MirrorProcess | None = None
    topics = {"codecs.gzip": "gzip", "codecs.snappy": "snappy"}
    try:
        target.start()
        for topic, codec in topics.items():
            with Producer(client=source, compression=codec, linger_ms=10) as producer:
                for i in range(20):
                    producer.send(topic, f"{codec}-{i}".encode(), partition=0)
                producer.flush()
        produce_mixed(source, "codecs.mixed", 20, "codec", partition=0)
        with SimpleConsumer(client=source) as reader:
            expected = {t: contents(reader, t, PARTITIONS) for t in [*topics, "codecs.mixed"]}
            mixed_runs = codec_runs(reader, "codecs.mixed", 0, len(expected["codecs.mixed"][0]))
        assert len({codec for codec, _, _ in mixed_runs}) == 3, mixed_runs
        mirror = MirrorProcess(
            tmp_path / "mirror.log",
            "--source", kafka09.bootstrap, "--target", target.bootstrap, "--whitelist", r"codecs\..*",
            "--group", "mirror-codecs", "--status-interval-ms", "0",
        ).start()  # fmt: skip
        with SimpleConsumer(target.bootstrap, request_timeout_ms=5000) as mirrored:
            for topic, want in expected.items():
                wait_for(
                    f"the target holds every message of {topic}",
                    lambda topic=topic, want=want: contents(mirrored, topic, PARTITIONS) == want,  # type: ignore[misc]
                    60,
                    mirror.output,
                )
            assert mirror.stop() == 0, mirror.output()[-4000:]
            for topic, codec in topics.items():
                assert codec_runs(mirrored, topic, 0, 20) == [(codec, 0, 19)]
            assert codec_runs(mirrored, "codecs.mixed", 0, 60) == mixed_runs
    finally:
        if mirror is not None:
            mirror.kill()
        stop_broker(target)
        source.close()


@pytest.mark.slow
def test_our_mirror_keeps_the_order_of_a_partition_with_mixed_codecs(kafka09: Kafka09Process, tmp_path: Path) -> None:
    """A partition that alternates uncompressed runs and gzip sets (what a Kafka 0.9 cluster written
    by differently configured producers holds), larger than one fetch: the target partition must
    hold the same messages in the same order, and the mirror must keep running."""
    topic = "events.order"
    source = Client(kafka09.bootstrap, broker_version="0.9")
    target = BrokerProcess(tmp_path / "aggregate", auto_create_topics=False)  # only the mirror creates
    mirror: MirrorProcess | None = None
    sequence = 0
    try:
        target.start()
        for _ in range(4):
            for codec, count in (("none", 1300), ("gzip", 700)):
                with Producer(client=source, compression=codec, linger_ms=5) as producer:
                    for _ in range(count):  # 1 KB values that gzip only halves, each led by its sequence
                        value = f"{sequence:08d}".encode() + os.urandom(496).hex().encode()
                        producer.send(topic, value, partition=0)
                        sequence += 1
                    producer.flush()
        with SimpleConsumer(client=source) as reader:
            expected = [m.value[:8] for m in reader.messages(topic, 0, 0) if m.value is not None]
        assert len(expected) == sequence and expected == sorted(expected)
        mirror = MirrorProcess(
            tmp_path / "mirror.log",
            "--source", kafka09.bootstrap, "--target", target.bootstrap, "--whitelist", re.escape(topic),
            "--group", "mirror-order", "--status-interval-ms", "0",
        ).start()  # fmt: skip
        running = mirror
        with SimpleConsumer(target.bootstrap, request_timeout_ms=5000) as mirrored:
            wait_for(
                "the target holds as many messages as the source, or the mirror stopped",
                lambda: (
                    running.process is None
                    or running.process.poll() is not None
                    or mirrored.latest_offset(topic, 0) >= len(expected)
                ),
                90,
                mirror.output,
            )
            got = [m.value[:8] for m in mirrored.messages(topic, 0, 0) if m.value is not None]
        problems = []
        if got != expected[: len(got)]:
            first = next(i for i, (a, b) in enumerate(zip(got, expected, strict=False)) if a != b)
            problems.append(
                "BUG (kafkalog/mirror/mirror.py TargetWriter: one Producer per codec with compression "
                "'preserve'): messages of one partition go through several producers, each with its own "
                f"batches and sender thread, so a later batch overtakes an earlier one: target offset {first} "
                f"holds source message {got[first].decode()} ({len(got)} of {len(expected)} mirrored)"
            )
        if mirror.process is not None and mirror.process.poll() is not None:
            problems.append(
                "BUG (kafkalog/client/accumulator.py RecordAccumulator.append: a batch is never closed at "
                "batch_bytes, it grows until the sender thread takes it; compressed, the whole batch is one "
                "wrapper message, which the target refuses once over its max_message_bytes): the mirror stopped:\n"
                + mirror.output()[-1500:]
            )
        assert not problems, "\n".join(problems)
        assert got == expected
        assert mirror.stop() == 0, mirror.output()[-4000:]
    finally:
        if mirror is not None:
            mirror.kill()
        stop_broker(target)
        source.close()


# ---------------------------------------------------------------------- our mirror, into Kafka 0.9


@pytest.mark.slow
def test_our_mirror_into_kafka09(kafka09: Kafka09Process, tmp_path: Path) -> None:
    """Kafka 0.9 has no CreateTopics: the mirror asks for the topic's metadata, which makes Kafka
    auto-create it (num.partitions = the source's count here), and every message lands in its
    partition with its key; the source's committed offsets end at the partitions' ends."""
    topic, group = "events.into09", "mirror-into09"
    source = BrokerProcess(tmp_path / "source")
    mirror: MirrorProcess | None = None
    try:
        source.start()
        with Admin(source.bootstrap) as admin:
            admin.create_topic(topic, PARTITIONS)
        with Client(source.bootstrap) as client:
            produce_mixed(client, topic, 20, "into09")
            with SimpleConsumer(client=client) as reader:
                expected = contents(reader, topic, PARTITIONS)
        ends = [len(expected[p]) for p in range(PARTITIONS)]
        args = (
            "--source", source.bootstrap, "--target", kafka09.bootstrap, "--whitelist", re.escape(topic),
            "--group", group, "--status-interval-ms", "0",
        )  # fmt: skip
        mirror = MirrorProcess(tmp_path / "mirror.log", *args).start()
        with (
            Client(kafka09.bootstrap, broker_version="0.9") as kafka_client,
            SimpleConsumer(client=kafka_client) as mirrored,
        ):
            wait_for(
                "Kafka 0.9 holds every source message, in its partition, with its key",
                lambda: topic in kafka_client.refresh_metadata() and contents(mirrored, topic, PARTITIONS) == expected,
                60,
                mirror.output,
            )
        assert mirror.stop() == 0, mirror.output()[-4000:]
        assert "auto-created by the broker" in mirror.output()
        with OffsetsClient(source.bootstrap) as offsets:
            committed = offsets.fetch(group, [(topic, p) for p in range(PARTITIONS)])
        assert [committed[(topic, p)] for p in range(PARTITIONS)] == ends
    finally:
        if mirror is not None:
            mirror.kill()
        stop_broker(source)


def test_broker_version_0_9_skips_the_api_versions_probe(
    kafka09: Kafka09Process, caplog: pytest.LogCaptureFixture
) -> None:
    """``broker_version="0.9"`` is documented to skip the ApiVersions probe, which a 0.9 broker
    leaves unanswered (the client then waits PROBE_TIMEOUT_S, 2 s, per connection)."""
    caplog.set_level(logging.INFO, logger="kafkalog.client.connection")
    started = time.monotonic()
    with Client(kafka09.bootstrap, broker_version="0.9") as client:
        client.refresh_metadata()
    elapsed = time.monotonic() - started
    assert "does not answer ApiVersions" not in caplog.text, (
        "BUG (kafkalog/client/client.py Client.connection_to): Client(broker_version='0.9') sets "
        "self.versions but never passes it to BrokerConnection(versions=...), so every connection still "
        f"probes ApiVersions and waits for the probe to time out ({elapsed:.1f} s for one metadata request)"
    )


# ---------------------------------------------------------------------- Kafka 0.9's MirrorMaker


MIRROR_MAKER_LOG4J = """\
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.org.apache.zookeeper=WARN
log4j.logger.org.I0Itec.zkclient=WARN
"""


def start_mirror_maker(root: Path, zookeeper: str, group: str, target: str, whitelist: str) -> subprocess.Popen[bytes]:
    """Kafka 0.9's MirrorMaker: its old consumer (ZooKeeper group, offsets in ZooKeeper) on
    ``zookeeper``, its Java producer to ``target``; started with java directly (Kafka's scripts pass
    JVM flags Java 17 removed)."""
    consumer = root / "consumer.properties"
    consumer.write_text(
        f"zookeeper.connect={zookeeper}\ngroup.id={group}\nauto.offset.reset=smallest\n"
        "zookeeper.session.timeout.ms=6000\n"
    )
    producer = root / "producer.properties"
    producer.write_text(f"bootstrap.servers={target}\n")
    log4j = root / "mirrormaker-log4j.properties"
    log4j.write_text(MIRROR_MAKER_LOG4J)
    with (root / "mirrormaker.log").open("ab") as log:
        return subprocess.Popen(
            ["java", "-Xmx256m", f"-Dlog4j.configuration=file:{log4j}", "-cp", f"{KAFKA_HOME / 'libs'}/*",
             "kafka.tools.MirrorMaker", "--consumer.config", str(consumer), "--producer.config", str(producer),
             "--whitelist", whitelist, "--num.streams", "1", "--offset.commit.interval.ms", "1000"],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip


@pytest.mark.slow
def test_kafka09_mirror_maker_between_kafkalog_clusters(zookeeper: ZooKeeperProcess, tmp_path: Path) -> None:
    """Kafka's old consumer joins a group in our registry (ids, owners), reads our brokers, commits
    at /consumers/<group>/offsets (which our broker serves to kafka-python); its Java producer writes
    into the other cluster (topics auto-created there); a topic created later is picked up by its
    whitelist watch. Then ``kafkalog mirror`` with the same group takes over where it stopped."""
    group = "kafka-mirror-maker"
    src = BrokerProcess(tmp_path / "src", broker_id=0, zookeeper=f"{zookeeper.connect}/src",
                        zookeeper_session_timeout_ms=6000)  # fmt: skip
    dst = BrokerProcess(tmp_path / "dst", broker_id=0, zookeeper=f"{zookeeper.connect}/dst",
                        zookeeper_session_timeout_ms=6000, default_partitions=PARTITIONS)  # fmt: skip
    zk = KazooClient(hosts=f"{zookeeper.connect}/src", timeout=5.0)
    maker: subprocess.Popen[bytes] | None = None
    ours: MirrorProcess | None = None
    mm_log = tmp_path / "mirrormaker.log"

    def maker_output() -> str:
        return mm_log.read_text(errors="replace")[-6000:] if mm_log.exists() else ""

    def topics_of(bootstrap: str, topics: dict[str, int]) -> dict[str, Contents]:
        with SimpleConsumer(bootstrap, request_timeout_ms=5000) as reader:
            return {t: contents(reader, t, n) for t, n in topics.items()}

    try:
        src.start()
        dst.start()
        zk.start(timeout=15)
        with Admin(src.bootstrap) as admin:
            admin.create_topic("events.x", PARTITIONS)
            admin.create_topic("other", 1)
        with Client(src.bootstrap) as client:
            produce_mixed(client, "events.x", 30, "first")
            produce_mixed(client, "other", 5, "not-mirrored")

        maker = start_mirror_maker(tmp_path, f"{zookeeper.connect}/src", group, dst.bootstrap, r"events\..*")
        source_topics = {"events.x": PARTITIONS}
        wait_for(
            "MirrorMaker copies events.x into dst",
            lambda: (
                as_multiset(topics_of(dst.bootstrap, source_topics)["events.x"])
                == as_multiset(topics_of(src.bootstrap, source_topics)["events.x"])
            ),
            90,
            maker_output,
        )
        # a topic created while it runs: its whitelist watches our /brokers/topics
        with Admin(src.bootstrap) as admin:
            admin.create_topic("events.late", 2)
        with Client(src.bootstrap) as client:
            produce_mixed(client, "events.late", 10, "late")
        source_topics = {"events.x": PARTITIONS, "events.late": 2}
        wait_for(
            "MirrorMaker picks up events.late, created while it runs",
            lambda: (
                "events.late" in list_topics(dst.bootstrap)
                and as_multiset(topics_of(dst.bootstrap, {"events.late": PARTITIONS})["events.late"])
                == as_multiset(topics_of(src.bootstrap, {"events.late": 2})["events.late"])
            ),
            60,
            maker_output,
        )
        with Admin(dst.bootstrap) as admin:
            assert admin.list_topics() == {"events.x": PARTITIONS, "events.late": PARTITIONS}, "whitelist only"
        mirrored = topics_of(dst.bootstrap, {"events.x": PARTITIONS})["events.x"]
        for partition, messages in mirrored.items():  # Kafka's DefaultPartitioner is murmur2, as ours
            for key, value in messages:
                if key is not None:
                    assert partition == (murmur2(key) & 0x7FFFFFFF) % PARTITIONS, (key, value, partition)

        # the old consumer's group, in our registry, in Kafka 0.8/0.9's layout
        members = zk_children(zk, f"/consumers/{group}/ids")
        assert len(members) == 1, members
        assert b'"white_list"' in zk.get(f"/consumers/{group}/ids/{members[0]}")[0]
        owners = {p: zk.get(f"/consumers/{group}/owners/events.x/{p}")[0].decode() for p in range(PARTITIONS)}
        assert set(owners.values()) == {f"{members[0]}-0"}, owners
        with SimpleConsumer(src.bootstrap) as reader:
            ends = {t: [reader.latest_offset(t, p) for p in range(n)] for t, n in source_topics.items()}
        wait_for(
            "MirrorMaker commits the ends to /src/consumers/<group>/offsets (every 1 s)",
            lambda: all(zk_offsets(zk, group, t, len(e)) == e for t, e in ends.items()),
            30,
            maker_output,
        )
        # our broker serves those offsets to a real client (OffsetFetch answered from ZooKeeper)
        reader = kafka.KafkaConsumer(bootstrap_servers=src.bootstrap, group_id=group, enable_auto_commit=False)
        try:
            assert [reader.committed(kafka.TopicPartition("events.x", p)) for p in range(PARTITIONS)] == ends[
                "events.x"
            ]
        finally:
            reader.close()

        maker.send_signal(signal.SIGTERM)
        assert maker.wait(60) == 128 + signal.SIGTERM, maker_output()  # the JVM's exit code for SIGTERM
        maker = None
        assert "Kafka mirror maker shutdown successfully" in mm_log.read_text(errors="replace")
        assert zk_children(zk, f"/consumers/{group}/ids") == [], "its session closed"
        assert zk_children(zk, f"/consumers/{group}/owners/events.x") == [], "its partitions were released"

        # our mirror takes the group over: it resumes at MirrorMaker's offsets and repeats nothing
        with Client(src.bootstrap) as client:
            produce_mixed(client, "events.x", 10, "after-handover")
        ours = MirrorProcess(
            tmp_path / "mirror.log",
            "--source", f"zk:{zookeeper.connect}/src", "--target", f"zk:{zookeeper.connect}/dst",
            "--whitelist", r"events\..*", "--group", group, "--commit-interval-ms", "500",
            "--status-interval-ms", "1000",
        ).start()  # fmt: skip
        wait_for(
            "our mirror brings the new messages",
            lambda: (
                sum(as_multiset(topics_of(dst.bootstrap, {"events.x": PARTITIONS})["events.x"]).values())
                == sum(as_multiset(topics_of(src.bootstrap, {"events.x": PARTITIONS})["events.x"]).values())
            ),
            60,
            ours.output,
        )
        time.sleep(1.5)  # anything mirrored twice would arrive by now
        for topic, count in source_topics.items():
            there = as_multiset(topics_of(dst.bootstrap, {topic: PARTITIONS})[topic])
            here = as_multiset(topics_of(src.bootstrap, {topic: count})[topic])
            assert there == here, f"{topic}: nothing twice, nothing lost: {there - here} / {here - there}"
        assert ours.stop() == 0, ours.output()[-4000:]
        assert "mirror stopped: 30 messages" in ours.output(), ours.output()[-4000:]
        with SimpleConsumer(src.bootstrap) as reader:
            assert zk_offsets(zk, group, "events.x", PARTITIONS) == [
                reader.latest_offset("events.x", p) for p in range(PARTITIONS)
            ]
    finally:
        if ours is not None:
            ours.kill()
        stop_java(maker)
        stop_broker(src)
        stop_broker(dst)
        zk.stop()
        zk.close()
