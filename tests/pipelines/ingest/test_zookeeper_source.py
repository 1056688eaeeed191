"""A pipeline source that names ZooKeeper instead of brokers: the spec's checks, planning from the
registry (every topic/partition and the broker that serves it), tasks that read from the brokers
the driver resolved (ZooKeeper only when none of them answers), and a real load from a two-broker
cluster registered in a real ZooKeeper, checked by the oracle."""

from __future__ import annotations

import copy
import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from kafkalog.client import Admin, Producer
from pipelines.config.pipeline import PipelineSpec, Source, load_spec
from pipelines.errors import PlanError, SpecError
from pipelines.executor.source import SplitTask
from pipelines.executor.splits import open_consumer
from pipelines.ingest.plan import discover_splits, make_plan, task_brokers
from pipelines.ingest.run import PipelineRun
from tests.pipelines.harness import REPO, event, oracle, run_cli, write_spec
from tests.support.kafkalog import BrokerProcess, roundtrip
from tests.support.ports import free_port
from tests.support.zookeeper import ZooKeeperProcess

# ---------------------------------------------------------------------------------------------
# the spec


def base() -> dict[str, Any]:
    return {
        "name": "events_raw",
        "source": {"zookeeper": "zk1:2181,zk2:2181/kafka"},
        "topics": ["events"],
        "decoder": {"format": "json", "schema": {"user_id": "long", "ts": "string"}},
        "raw": {"path": "/data/raw/events"},
    }


def with_source(**source: Any) -> dict[str, Any]:
    data = copy.deepcopy(base())
    data["source"] = source
    return data


def error(tmp_path: Path, data: dict[str, Any]) -> str:
    """The SpecError of loading ``data``, without its ``file:`` prefix."""
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(SpecError) as info:
        load_spec(path)
    message = str(info.value)
    assert message.startswith(f"{path}:"), message
    return message[len(str(path)) + 1 :]


def test_a_zookeeper_source_is_parsed_and_normalized(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(with_source(zookeeper=" zk1:2181,zk2:2181/kafka ", retry_ms=5)))
    source = load_spec(path).source
    assert source == Source(zookeeper="zk1:2181,zk2:2181/kafka", retry_ms=5)
    assert source.bootstrap is None
    assert source.cluster == "ZooKeeper at zk1:2181,zk2:2181/kafka"
    assert Source(bootstrap=("a:1", "b:2")).cluster == "a:1,b:2"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ({"retry_ms": 5}, "source.bootstrap: required key is missing: give the brokers (bootstrap: "),
        ({"bootstrap": None}, "source.bootstrap: required key is missing"),
        (
            {"bootstrap": "a:1", "zookeeper": "zk:2181"},
            "source.zookeeper: give either bootstrap or zookeeper, not both",
        ),
        ({"zookeeper": "zk1"}, "source.zookeeper: ZooKeeper connect string 'zk1': 'zk1' is not host:port"),
        ({"zookeeper": "zk1:21x"}, "source.zookeeper: ZooKeeper connect string 'zk1:21x': 'zk1:21x' is not host:port"),
        ({"zookeeper": "zk1:2181,"}, "source.zookeeper: ZooKeeper connect string 'zk1:2181,': '' is not host:port"),
        ({"zookeeper": "zk1:70000"}, "source.zookeeper: ZooKeeper connect string 'zk1:70000': 'zk1:70000' is not"),
        ({"zookeeper": ""}, "source.zookeeper: ZooKeeper connect string '': '' is not host:port"),
        ({"zookeeper": "zk1:2181/"}, "source.zookeeper: ZooKeeper connect string 'zk1:2181/': the chroot must be"),
        ({"zookeeper": "zk1:2181/a//b"}, "source.zookeeper: ZooKeeper connect string 'zk1:2181/a//b': the chroot"),
        ({"zookeeper": ["zk1:2181"]}, "source.zookeeper: expected a string, got ['zk1:2181']"),
        ({"zookeeper": 2181}, "source.zookeeper: expected a string, got 2181"),
        ({"zookeper": "zk1:2181"}, "source.zookeper: unknown key (did you mean 'zookeeper'? known: "),
        ({"zookeeper": "zk1:2181", "retry_ms": 0}, "source.retry_ms: must be positive"),
    ],
)
def test_a_source_needs_exactly_one_of_bootstrap_and_zookeeper(
    tmp_path: Path, source: dict[str, Any], expected: str
) -> None:
    message = error(tmp_path, with_source(**source))
    assert message.startswith(expected), message


def test_neither_key_names_both_alternatives(tmp_path: Path) -> None:
    message = error(tmp_path, with_source())
    assert "bootstrap: host:port" in message
    assert "zookeeper: host:port[,host:port...][/chroot]" in message


def test_a_zookeeper_connect_string_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIPE_TEST_ZK", "zk-a:2181,zk-b:2181/prod")
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(with_source(zookeeper="${env:PIPE_TEST_ZK}")))
    assert load_spec(path).source.zookeeper == "zk-a:2181,zk-b:2181/prod"
    secret = "hunter2-do-not-log"
    monkeypatch.setenv("PIPE_TEST_ZK", secret)
    message = error(tmp_path, with_source(zookeeper="${env:PIPE_TEST_ZK}"))
    assert message.startswith("source.zookeeper: "), message
    assert secret not in message


def test_every_shipped_pipeline_file_still_loads_and_the_commented_zookeeper_example_is_valid(tmp_path: Path) -> None:
    files = sorted((REPO / "conf" / "pipelines").glob("*.yaml"))
    assert files
    for path in files:
        assert load_spec(path).source.bootstrap
    demo = (REPO / "conf" / "pipelines" / "demo_events.yaml").read_text()
    lines = demo.splitlines(keepends=True)
    (example,) = [i for i, line in enumerate(lines) if line.lstrip().startswith("# zookeeper:")]
    (bootstrap,) = [i for i, line in enumerate(lines) if line.lstrip().startswith("bootstrap:")]
    lines[example] = lines[example].replace("# zookeeper:", "zookeeper:", 1)
    del lines[bootstrap]
    variant = tmp_path / "demo_events.yaml"
    variant.write_text("".join(lines))
    source = load_spec(variant).source
    assert source.bootstrap is None
    assert source.zookeeper


# ---------------------------------------------------------------------------------------------
# a real cluster: one ZooKeeper, brokers 0 and 1 registered under a chroot (shared by the tests
# below, which use topics of their own)


@dataclass
class Cluster:
    zookeeper: ZooKeeperProcess
    connect: str
    brokers: list[BrokerProcess]


def metadata_brokers(port: int) -> set[int]:
    return {b["node_id"] for b in roundtrip(port, 3, 0, {"topics": []})["brokers"]}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = Path(tmp_path_factory.mktemp("zk-cluster"))
    zookeeper = ZooKeeperProcess(root / "zk").start()
    connect = f"{zookeeper.connect}/x"
    brokers: list[BrokerProcess] = []
    try:
        for broker_id in (0, 1):
            brokers.append(
                BrokerProcess(
                    root / f"b{broker_id}", broker_id=broker_id, zookeeper=connect, zookeeper_session_timeout_ms=3000
                ).start()
            )
        # a topic is spread over the brokers its creator knows: wait until each knows both
        deadline = time.monotonic() + 30
        while not all(metadata_brokers(b.port) == {0, 1} for b in brokers):
            assert time.monotonic() < deadline, "the brokers did not see each other in ZooKeeper"
            time.sleep(0.1)
        yield Cluster(zookeeper, connect, brokers)
    finally:
        for broker in brokers:
            broker.__exit__()
        zookeeper.stop()


def create(cluster: Cluster, topic: str, partitions: int) -> None:
    with Admin(zookeeper=cluster.connect) as admin:
        admin.create_topic(topic, partitions)


def produce(cluster: Cluster, topic: str, count: int, *, first: int = 0) -> None:
    """Events first..first+count-1 keyed by their number, through a producer bootstrapped from ZooKeeper."""
    with Producer(zookeeper=cluster.connect) as producer:
        for i in range(first, first + count):
            producer.send(topic, event(i), key=str(i).encode())
        producer.flush()


def zk_spec(tmp_path: Path, cluster: Cluster, name: str, **overrides: Any) -> PipelineSpec:
    source = {"zookeeper": cluster.connect, "retry_ms": 20_000}
    # write_spec's bootstrap argument is replaced by the source given here
    return load_spec(write_spec(tmp_path, "", tmp_path / f"raw-{name}", name=name, source=source, **overrides))


def leaders(cluster: Cluster, topic: str) -> dict[int, int]:
    """partition → leader as the brokers' metadata says (not the registry)."""
    with Admin(cluster.brokers[0].bootstrap) as admin:
        return admin.describe_topic(topic).leaders


@pytest.mark.slow
def test_planning_from_the_registry_finds_every_partition_and_its_broker(tmp_path: Path, cluster: Cluster) -> None:
    create(cluster, "zk.a", 4)
    create(cluster, "zk.b", 3)
    create(cluster, "other", 2)
    for topic, count in (("zk.a", 40), ("zk.b", 30), ("other", 5)):
        produce(cluster, topic, count)
    expected = {(t, p): b for t in ("zk.a", "zk.b") for p, b in leaders(cluster, t).items()}
    assert set(expected.values()) == {0, 1}, "the partitions should be spread over both brokers"

    named = zk_spec(tmp_path, cluster, "named", topics=["zk.a", "zk.b"])
    pattern = zk_spec(tmp_path, cluster, "pattern", topics=[], topic_pattern=r"zk\..*")
    with open_consumer(named.source) as consumer:
        assert discover_splits(named, consumer) == expected
        plan = make_plan(pattern, consumer, {}, 1, "first")
        assert {s.key: s.leader for s in plan.splits} == expected
        assert plan.total == 70
        for split in plan.splits:
            assert split.start == 0
            assert split.end == consumer.latest_offset(split.topic, split.partition)
        # a topic registered after the first plan is in the next one, committed offsets respected
        create(cluster, "zk.c", 2)
        produce(cluster, "zk.c", 10)
        again = make_plan(pattern, consumer, {s.key: s.end for s in plan.splits}, 2, "second")
    expected.update({("zk.c", p): b for p, b in leaders(cluster, "zk.c").items()})
    assert {s.key: s.leader for s in again.splits} == expected
    assert sum(s.size for s in again.splits if s.topic == "zk.c") == 10
    assert all(s.size == 0 and s.start == s.end for s in again.splits if s.topic != "zk.c")
    assert sorted(task_brokers(named.source)) == sorted(b.bootstrap for b in cluster.brokers)


@pytest.mark.slow
def test_planning_errors_name_the_zookeeper_connect_string(tmp_path: Path, cluster: Cluster) -> None:
    from kazoo.client import KazooClient

    from kafkalog.registry.topics import create_topic

    connect = re.escape(cluster.connect)
    missing = zk_spec(tmp_path, cluster, "missing", topics=["nope"])
    unmatched = zk_spec(tmp_path, cluster, "unmatched", topics=[], topic_pattern=r"nothing\..*")
    with open_consumer(missing.source) as consumer:
        with pytest.raises(PlanError, match=rf"^topic 'nope' is not registered in ZooKeeper at {connect}$"):
            discover_splits(missing, consumer)
        with pytest.raises(PlanError, match=rf"^no topic registered in ZooKeeper at {connect} matches"):
            discover_splits(unmatched, consumer)
    # a partition placed on a broker that is not registered (down): refused at planning, clearly
    zk = KazooClient(hosts=cluster.connect, timeout=4.0)
    zk.start(timeout=15)
    try:
        create_topic(zk, "ghost", {0: 1, 1: 7})
    finally:
        zk.stop()
        zk.close()
    ghost = zk_spec(tmp_path, cluster, "ghost", topics=["ghost"])
    down = rf"^ghost-1: its broker 7 is not registered in ZooKeeper at {connect} "
    with open_consumer(ghost.source) as consumer, pytest.raises(PlanError, match=down):
        discover_splits(ghost, consumer)
    # a chroot no broker registered in
    empty = f"{cluster.zookeeper.connect}/empty"
    lonely = load_spec(write_spec(tmp_path, "", tmp_path / "raw-lonely", name="lonely", source={"zookeeper": empty}))
    nobody = rf"^no broker is registered in ZooKeeper at {re.escape(empty)}$"
    with open_consumer(lonely.source) as consumer, pytest.raises(PlanError, match=nobody):
        discover_splits(lonely, consumer)
    with pytest.raises(PlanError, match=nobody):
        task_brokers(lonely.source)


@pytest.mark.slow
def test_a_task_reads_from_the_shipped_brokers_and_asks_zookeeper_only_when_none_answers(
    tmp_path: Path, cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kafkalog.client import client as client_module

    create(cluster, "zk.task", 2)
    produce(cluster, "zk.task", 300)
    spec = zk_spec(tmp_path, cluster, "task", topics=["zk.task"])
    with open_consumer(spec.source) as consumer:
        plan = make_plan(spec, consumer, {}, 1, "task")
    splits = [s for s in plan.splits if s.size]
    assert {s.leader for s in splits} == {0, 1}

    def read(split: Any, brokers: list[str]) -> SplitTask:
        task = SplitTask(spec.source, spec.decoder, spec.event_time, spec.bad_records, split, brokers=brokers)
        rows = sum(chunk.rows.num_rows for chunk in task.chunks())
        assert rows == split.size == task.loaded
        return task

    real = ZooKeeperBootstrapSpy(client_module.ZooKeeperBootstrap)
    monkeypatch.setattr(client_module, "ZooKeeperBootstrap", real)
    shipped = task_brokers(spec.source)
    for split in splits:  # the brokers the driver resolved answer: no ZooKeeper session at all
        assert not read(split, shipped).from_zookeeper
    assert real.sessions == 0
    gone = [f"127.0.0.1:{free_port()}"]  # the cluster moved since the run planned
    for split in splits:
        assert read(split, gone).from_zookeeper
    assert real.sessions == len(splits)


class ZooKeeperBootstrapSpy:
    """Counts the ZooKeeper sessions clients open (the class is replaced where Client looks it up)."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.sessions = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.sessions += 1
        return self.real(*args, **kwargs)


@pytest.mark.slow
def test_a_load_from_a_zookeeper_cluster_commits_every_message_once_and_a_rerun_loads_only_new_ones(
    tmp_path: Path, cluster: Cluster, spark: Any
) -> None:
    create(cluster, "zk.events", 4)
    produce(cluster, "zk.events", 1200)
    path = write_spec(
        tmp_path,
        "",
        tmp_path / "raw",
        name="zk_events",
        source={"zookeeper": cluster.connect, "retry_ms": 20_000},
        topics=["zk.events"],
    )
    spec = load_spec(path)
    bootstrap = cluster.brokers[0].bootstrap  # the oracle reads the brokers' logs directly
    first = PipelineRun(spec, spark).run()
    assert first.status == "committed"
    assert first.manifest is not None
    assert {s.leader for s in first.manifest.plan.splits} == {0, 1}
    totals = oracle(tmp_path / "raw", bootstrap)
    assert totals["rows"] == 1200
    assert served_by(tmp_path / "raw") == {0, 1}

    produce(cluster, "zk.events", 500, first=1200)
    second = PipelineRun(spec, spark).run()
    assert second.status == "committed"
    assert second.manifest is not None
    assert sum(s.end - s.start for s in second.manifest.plan.splits) == 500
    totals = oracle(tmp_path / "raw", bootstrap)
    assert totals["rows"] == 1700
    assert totals["seqs"] == [1, 2]
    assert PipelineRun(spec, spark).run().status == "up-to-date"

    offsets = run_cli("offsets", str(path), "--lag", "--json", timeout=120)
    assert offsets.returncode == 0, offsets.stderr
    items = json.loads(offsets.stdout)
    assert sum(i["offset"] for i in items) == 1700
    assert all(i["lag"] == 0 for i in items)


def served_by(raw: Path) -> set[int]:
    import pyarrow.parquet as pq

    brokers: set[int] = set()
    for path in raw.rglob("*.parquet"):
        if "_pipeline" not in path.parts:
            brokers |= set(pq.read_table(path, columns=["broker"]).column("broker").to_pylist())
    return brokers
