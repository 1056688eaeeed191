"""``make demo`` (``python -m demo``): the whole deployment, end to end, on this machine.

1. Starts three kafkalog brokers: one per data center (us-east, eu-west) and the aggregate; with
   ``--zookeeper`` (``make demo-zk``) a ZooKeeper server too, where each cluster registers under its
   own chroot. Then the mirror-maker, data centers → aggregate. Every server listens on a free
   loopback port (or on ``--port-base`` and the ports after it), so demos never collide.
2. Produces a day of web activity in both data centers and waits until the aggregate holds every
   message (counted: nothing missing, nothing twice).
3. Runs the page_views pipeline (conf/pipelines/page_views.yaml, with its source pointed at this
   demo's aggregate in a copy under .cache/demo/conf: load, transforms, expectations, publish) with
   ``spark-submit jobs/load_warehouse.py`` on local Spark. With ``--hadoop`` (``make demo-hadoop``)
   the demo also starts a real HDFS and YARN (Hadoop's mini clusters, ``make peers``): the raw layer
   and the warehouse are on HDFS, the jobs run on YARN with the code shipped as the archive
   (pipelines.app.ship, C kernels included), and the demo ends with a listing of what it wrote.
4. Produces the next twenty minutes (and some late events), runs the pipeline again: it loads only
   what is new.
5. Rewinds to six hours ago and replays (dry run first), and checks that the warehouse tables
   after the replay hold exactly the rows they held before.
6. Queries the raw layer and the warehouse tables by name (``pipelines sql``): every run registered
   them in the metastore: the embedded one here; with ``--hadoop``, a Hive metastore service started
   beside HDFS.
7. Prints a short report (and writes it as JSON to .cache/demo/demo-report.json) and stops every
   process it started.

Everything lives under .cache/demo/: each demo starts from nothing. Before anything is cleared the
demo checks what it needs (Java, its ports, the tools); the last demo's results are then moved aside,
not deleted, until the new demo's servers run, and put back if they fail to start (demo.results).
"""

from __future__ import annotations

import heapq
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import click
import yaml
from rich.console import Console
from rich.table import Table

from demo.activity import DATA_CENTERS, activity
from demo.hadoop import LAUNCHER, client_env, launcher_argv, listing, ready_addresses, yarn_submit_conf
from demo.metastore import derby_settings
from demo.metastore import launcher_argv as metastore_argv
from demo.processes import (
    ZOOKEEPER_JAR,
    DemoError,
    Supervisor,
    free_port,
    java_version,
    port_is_free,
    quick_jvm_env,
    zookeeper_argv,
    zookeeper_ready,
)
from demo.results import PreviousResults
from demo.tables import published_rows
from kafkalog.client import Admin, Producer, SimpleConsumer
from kafkalog.errors import KafkalogError
from pipelines.app.session import java_options
from pipelines.app.ship import ARCHIVE_NAME, build_archive, submit_options
from pipelines.config.pipeline import PipelineSpec, load_spec
from pipelines.errors import PipelineError
from pipelines.progress import Reporter
from pipelines.storage import Storage, storage_for

REPO = Path(__file__).resolve().parents[1]
HOME = Path(".cache/demo")
PIPELINE = Path("conf/pipelines/page_views.yaml")
TOPIC = "web.page_views"
PARTITIONS = 3
DATA_CENTER_NAMES = tuple(center.name for center in DATA_CENTERS)
SERVERS = ("aggregate", *DATA_CENTER_NAMES, "zookeeper", "metastore")


def pick_ports(base: int | None) -> dict[str, int]:
    """A loopback port per server (aggregate, each data center, ZooKeeper): ``base`` and the ports
    after it, or free ports the kernel hands out (two demos on one machine then never collide)."""
    if base is not None:
        return {name: base + offset for offset, name in enumerate(SERVERS)}
    ports: dict[str, int] = {}
    while len(set(ports.values())) < len(SERVERS):
        ports = {name: free_port() for name in SERVERS}
    return ports


def _serves(server: str, *, zookeeper: bool, hadoop: bool) -> bool:
    """Whether a demo with these flags runs ``server`` (ZooKeeper with ``--zookeeper``, the Hive
    metastore service with ``--hadoop``; the brokers always)."""
    return {"zookeeper": zookeeper, "metastore": hadoop}.get(server, True)


def _tool(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


def preflight(ports: dict[str, int], zookeeper: bool, hadoop: bool) -> None:
    """Everything the demo can check before it clears anything: Java, its tools, its ports. A demo
    that fails here leaves the last demo's results exactly as they were."""
    if java_version() < 17:
        raise DemoError("Spark needs Java 17 or newer; `java -version` says otherwise (set JAVA_HOME)")
    for tool in ("kafkalog", "pipelines", "spark-submit"):
        if not Path(_tool(tool)).exists():
            raise DemoError(f"{_tool(tool)} is missing: run `make install` (make demo does)")
    if zookeeper and not ZOOKEEPER_JAR.exists():
        raise DemoError(f"ZooKeeper is not installed ({ZOOKEEPER_JAR} is missing): run `make zookeeper`")
    if hadoop and not (LAUNCHER / "MiniClusters.class").exists():
        raise DemoError(f"Hadoop's mini clusters are not installed ({LAUNCHER} is missing): run `make peers`")
    wanted = [port for name, port in ports.items() if _serves(name, zookeeper=zookeeper, hadoop=hadoop)]
    busy = [port for port in wanted if not port_is_free(port)]
    if busy:
        raise DemoError(
            f"port{'s' * (len(busy) > 1)} {', '.join(map(str, busy))} on 127.0.0.1 "
            f"{'are' if len(busy) > 1 else 'is'} in use: is another demo running? (`ss -ltnp` shows who holds "
            "them; --port-base picks others)"
        )


class Demo:
    """One demo run: the clusters, what was produced, what the pipeline made of it."""

    def __init__(
        self,
        supervisor: Supervisor,
        console: Console,
        reporter: Reporter,
        zookeeper: bool,
        ports: dict[str, int],
        hadoop: bool = False,
    ) -> None:
        self.supervisor = supervisor
        self.console = console
        self.reporter = reporter
        self.zookeeper = zookeeper
        self.hadoop = hadoop
        self.hadoop_addresses: dict[str, str] = {}
        self.metastore_uri = ""
        """The Hive metastore service of a ``--hadoop`` demo (its tables are registered there)."""
        self.ports = ports
        self.produced: dict[str, int] = dict.fromkeys(DATA_CENTER_NAMES, 0)
        mode = "zookeeper" if zookeeper else "embedded"
        self.facts: dict[str, Any] = {"mode": f"{mode}+hadoop" if hadoop else mode, "ports": ports, "runs": []}
        self.pipeline = PIPELINE
        python = {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
        # SPARK_LOCAL_IP: every server here is on loopback; without it Spark warns, in every
        # spark-submit, that the hostname resolves to a loopback address
        self.env = quick_jvm_env({**os.environ, **python, "SPARK_LOCAL_IP": "127.0.0.1"})
        self.ship: list[str] = []
        self.step_started: tuple[str, float] | None = None
        self.mirror_baseline: int | None = None
        self.submits = 0
        self.produced_at = 0.0
        self.facts["step_seconds"] = {}

    def say(self, text: str) -> None:
        self.console.print(text, highlight=False)

    def step(self, title: str) -> None:
        """A new step of the story (its title as a rule); the last one's time is recorded."""
        self.end_step()
        self.step_started = (title, time.monotonic())
        self.console.rule(f"[bold]{title}", align="left")

    def end_step(self) -> None:
        if self.step_started is not None:
            title, started = self.step_started
            self.facts["step_seconds"][title] = round(time.monotonic() - started, 1)
            self.step_started = None

    # ------------------------------------------------------------------ clusters

    def start_clusters(self) -> None:
        self.step("1. three clusters and a mirror-maker")
        ports = [self.ports[name] for name in SERVERS if _serves(name, zookeeper=self.zookeeper, hadoop=self.hadoop)]
        busy = [p for p in ports if not port_is_free(p)]
        if busy:  # free at the preflight, taken since
            raise DemoError(f"port(s) {', '.join(map(str, busy))} on 127.0.0.1 were taken while the demo started")
        if self.hadoop:
            self._start_hadoop()
        if self.zookeeper:
            port = self.ports["zookeeper"]
            self.supervisor.start("zookeeper", zookeeper_argv(HOME / "zookeeper", port), zookeeper_ready(port))
            self.say(f"ZooKeeper on 127.0.0.1:{port}; each cluster registers under its own chroot")
        for name in ("aggregate", *DATA_CENTER_NAMES):
            self._start_broker(name, self.ports[name])
        for name in DATA_CENTER_NAMES:
            with Admin(self._bootstrap(name)) as admin:
                admin.create_topic(TOPIC, PARTITIONS)
        sources = [self._mirror_address(name) for name in DATA_CENTER_NAMES]
        argv = [_tool("kafkalog"), "mirror", "--target", self._mirror_address("aggregate")]
        for source in sources:
            argv += ["--source", source]
        argv += ["--whitelist", r"web\..*", "--metrics-file", str(HOME / "mirror-metrics.json")]
        argv += ["--commit-interval-ms", "1000", "--status-interval-ms", "5000"]
        self.supervisor.start("mirror", argv, (HOME / "mirror-metrics.json").exists, grace=60)
        self.say(f"mirror-maker: {' + '.join(DATA_CENTER_NAMES)} → aggregate ({' '.join(argv[1:6])} ...)")

    def _start_hadoop(self) -> None:
        """HDFS (NameNode with WebHDFS, one DataNode) and YARN (ResourceManager, one NodeManager)."""
        base = (HOME / "hadoop").resolve()
        log = HOME / "logs" / "hadoop.log"

        def ready() -> bool:
            found = ready_addresses(log.read_text(errors="replace")) if log.exists() else None
            if found is not None:
                self.hadoop_addresses = found
            return found is not None

        # cwd: MiniYARNCluster keeps its work directories under ./target
        argv = launcher_argv(base, yarn=True, nodemanager_memory_mb=4096)
        self.supervisor.start("hadoop", argv, ready, timeout=180, grace=60, cwd=base, hold_stdin=True)
        self.env.update(client_env(Path(self.hadoop_addresses["conf_dir"])))
        self.env["PYTHONPATH"] = str(REPO)  # the driver's own Python workers plan the source: they need our code
        archive = build_archive(HOME / "dist" / ARCHIVE_NAME)
        self.ship = submit_options(archive.parent, archive=True)
        for key, value in yarn_submit_conf().items():
            self.ship += ["--conf", f"{key}={value}"]
        self.say(
            f"HDFS: NameNode {self.hadoop_addresses['hdfs']} (WebHDFS {self.hadoop_addresses['webhdfs']}); "
            f"YARN: ResourceManager {self.hadoop_addresses['resourcemanager']}; Hadoop's configuration in "
            f"{self.hadoop_addresses['conf_dir']}; executors get the code as {archive}"
        )
        self._start_metastore()

    def _start_metastore(self) -> None:
        """A Hive metastore service beside HDFS (on a Derby database of its own): the runs register
        the tables there, and readers find them by name as with the local demo's embedded one."""
        port = self.ports["metastore"]
        root = (HOME / "metastore").resolve()
        argv = metastore_argv(root, port, derby_settings(root))
        self.supervisor.start("metastore", argv, lambda: not port_is_free(port), timeout=120, cwd=root)
        self.metastore_uri = f"thrift://127.0.0.1:{port}"
        self.say(f"Hive metastore service on {self.metastore_uri} (its database in {root})")

    def _start_broker(self, name: str, port: int) -> None:
        config = {
            "broker_id": 0,
            "host": "127.0.0.1",
            "port": port,
            "data_dirs": [str(HOME / name / "data")],
            # the aggregate gets its topics from the mirror, with the data centers' partition counts
            "auto_create_topics": name != "aggregate",
            "default_partitions": PARTITIONS,
        }
        if self.zookeeper:
            config["zookeeper"] = f"127.0.0.1:{self.ports['zookeeper']}/{name}"
        path = HOME / "conf" / f"{name}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(config, sort_keys=False))

        def ready() -> bool:
            try:
                with Admin(f"127.0.0.1:{port}") as admin:
                    admin.list_topics()
            except KafkalogError:
                return False
            return True

        self.supervisor.start(name, [_tool("kafkalog"), "broker", "--config", str(path)], ready)
        where = f", registered at 127.0.0.1:{self.ports['zookeeper']}/{name}" if self.zookeeper else ""
        self.say(f"kafkalog broker {name:<9} on 127.0.0.1:{port} (data in {HOME / name / 'data'}{where})")

    def _bootstrap(self, name: str) -> str:
        return f"127.0.0.1:{self.ports[name]}"

    def _mirror_address(self, name: str) -> str:
        return f"zk:127.0.0.1:{self.ports['zookeeper']}/{name}" if self.zookeeper else self._bootstrap(name)

    def point_pipeline_at_the_aggregate(self) -> None:
        """The pipeline file, copied under .cache/demo/conf with its source set to this demo's
        aggregate: its brokers (the port of this run), or with ``--zookeeper`` its ZooKeeper chroot."""
        data = yaml.safe_load(PIPELINE.read_text())
        if self.hadoop:
            root = f"{self.hadoop_addresses['hdfs']}/demo"
            data["raw"] = {
                **data["raw"],
                "path": f"{root}/page_views/raw",
                "webhdfs_url": self.hadoop_addresses["webhdfs"],
            }
            for output in data["outputs"]:
                output["path"] = f"{root}/warehouse/{output['name']}"
            data["tables"] = {**data.get("tables", {}), "metastore": self.metastore_uri}
            self.say(f"raw layer and warehouse on HDFS under {root}; tables in the metastore at {self.metastore_uri}")
        if self.zookeeper:
            data["source"] = {"zookeeper": f"127.0.0.1:{self.ports['zookeeper']}/aggregate"}
            how = f"zookeeper 127.0.0.1:{self.ports['zookeeper']}/aggregate"
        else:
            data["source"] = {**data["source"], "bootstrap": self._bootstrap("aggregate")}
            how = f"the aggregate's brokers, {self._bootstrap('aggregate')}"
        self.pipeline = HOME / "conf" / "page_views.yaml"
        self.pipeline.write_text(
            f"# {PIPELINE} with its source set to this demo's aggregate cluster (written by the demo)\n"
            + yaml.safe_dump(data, sort_keys=False)
        )
        self.say(f"pipeline source: {how} ({self.pipeline})")

    # ------------------------------------------------------------------ producing and mirroring

    def produce(self, title: str, start: datetime, end: datetime, per_center: int, seed: int) -> None:
        if self.mirror_baseline is None:  # what the aggregate held before this round of producing
            self.mirror_baseline = self._aggregate_holds()
        batches = {c.name: activity(c, start, end, per_center, seed=seed) for c in DATA_CENTERS}
        total = sum(len(b) for b in batches.values())
        self.say(f"{title}: {total:,} page views from {start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M} UTC")
        # both data centers at once, in time order, as their users act: the aggregate's log then
        # follows the clock too, and a rewind to a time reloads about what came after it
        timeline = heapq.merge(
            *([(m.timestamp_ms, center, m) for m in messages] for center, messages in batches.items())
        )
        producers = {c: Producer(self._bootstrap(c), compression="snappy", linger_ms=20) for c in batches}
        try:
            with self.reporter.work("producing", total, "page views") as advance:
                for index, (_, center, message) in enumerate(timeline, 1):
                    producers[center].send(TOPIC, message.value, key=message.key, timestamp=message.timestamp_ms)
                    if index % 1000 == 0:
                        advance(1000)
                advance(total % 1000)
                for producer in producers.values():
                    producer.flush()
        finally:
            for producer in producers.values():
                producer.close()
        for center, messages in batches.items():
            self.produced[center] += len(messages)
        self.produced_at = time.monotonic()

    def end_offsets(self, bootstrap: str) -> int:
        with SimpleConsumer(bootstrap) as consumer:
            return sum(consumer.latest_offset(TOPIC, p) for p in range(PARTITIONS))

    def _aggregate_holds(self) -> int:
        with Admin(self._bootstrap("aggregate")) as admin:
            # one metadata request: asking a missing topic's offsets would wait out the client's retries
            if TOPIC not in admin.list_topics():  # the mirror has not created it yet
                return 0
        return self.end_offsets(self._bootstrap("aggregate"))

    def wait_for_mirror(self, timeout: float = 180) -> int:
        """Until the aggregate holds every message produced (the mirror never duplicates, so the
        counts are equal exactly when nothing is missing). The mirror copies while the demo
        produces, so it is often done before this looks: the line it prints counts what this
        round of producing sent (from what the aggregate held before it) and how long after the
        last message was produced the aggregate had them all."""
        wanted = sum(self.produced.values())
        baseline = self.mirror_baseline or 0
        self.mirror_baseline = None
        deadline = time.monotonic() + timeout
        last_line = time.monotonic()
        mirrored = self._aggregate_holds()
        while mirrored < wanted and time.monotonic() < deadline:
            time.sleep(0.2)
            mirrored = self._aggregate_holds()
            if time.monotonic() - last_line >= 5:
                last_line = time.monotonic()
                self.say(f"mirroring into the aggregate: {mirrored - baseline:,}/{wanted - baseline:,} messages")
        if mirrored != wanted:
            raise DemoError(
                f"the aggregate holds {mirrored:,} of the {wanted:,} messages produced after {timeout:.0f} s; "
                f"see {HOME / 'logs' / 'mirror.log'} and {HOME / 'mirror-metrics.json'}"
            )
        after = time.monotonic() - self.produced_at
        self.say(
            f"mirrored into the aggregate: {mirrored - baseline:,} "
            f"message{'s' * (mirrored - baseline != 1)}, all there {after:.1f} s after the last was produced"
        )
        return mirrored

    # ------------------------------------------------------------------ the pipeline

    def spark_submit(self, *args: str) -> None:
        master = ["--master", "yarn", "--deploy-mode", "client"] if self.hadoop else ["--master", "local[2]"]
        self.submits += 1
        # the pipelines' log4j2 configuration: warnings on the console, Spark's INFO lines and any
        # stack in this file (without it every spark-submit repeats Spark's start-up lines)
        spark_log = (HOME / "logs" / f"spark-submit-{self.submits}.log").resolve()
        command = [
            _tool("spark-submit"), *master, *self.ship, "--driver-java-options", java_options(spark_log),
            "--conf", "spark.ui.enabled=false", "--conf", "spark.ui.showConsoleProgress=false",
            "--conf", "spark.driver.host=127.0.0.1",
            "jobs/load_warehouse.py", "--pipeline", str(self.pipeline), *args,
        ]  # fmt: skip
        shipped = " --archives .cache/demo/dist/pipelines-code.tar.gz#pipelines_code ..." if self.hadoop else ""
        shown = [
            "$ spark-submit", *master, *([shipped.strip()] if shipped else []),
            '--driver-java-options "$(pipelines spark-java-options)"',
            "jobs/load_warehouse.py --pipeline", str(self.pipeline), *args,
        ]  # fmt: skip
        self.say(f"[dim]{' '.join(shown)}[/dim]")
        code = subprocess.call(command, env=self.env)
        if code != 0:
            raise DemoError(f"spark-submit jobs/load_warehouse.py {' '.join(args)} exited with {code} (see above)")

    def pipelines(self, *args: str) -> str:
        done = subprocess.run([_tool("pipelines"), *args], env=self.env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise DemoError(f"pipelines {' '.join(args)} exited with {done.returncode}: {done.stderr.strip()}")
        return done.stdout

    def storage(self, path: str) -> Storage:
        """Local files, or HDFS through WebHDFS (the way the tools reach it)."""
        return storage_for(path, webhdfs_url=self.hadoop_addresses.get("webhdfs"))

    def latest_report(self, spec: PipelineSpec) -> dict[str, Any]:
        report: dict[str, Any] = json.loads(self.pipelines("report", str(self.pipeline), "--json"))
        raw = load_spec(self.pipeline).raw.path  # the root (location names the current generation)
        reports = self.storage(raw).list(f"{raw}/_pipeline/reports")
        html = [entry.path for entry in reports if entry.name.endswith(".html")][-1]
        if "://" in html:  # on the demo's HDFS, which stops with the demo: a copy to open afterwards
            copy = HOME / "reports" / html.rpartition("/")[2]
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_bytes(self.storage(html).read_bytes(html))
            self.say(f"run report copied from HDFS to {copy}")
        self.facts["runs"].append(
            {
                "seq": report["run"]["seq"],
                "kind": report["run"]["kind"],
                "messages": report["totals"]["messages"],
                "rows": report["totals"]["rows"],
                "quarantined": report["totals"]["quarantined"],
                "outputs": {o["name"]: o["status"] for o in report["outputs"]},
                "report": _shown(html),
            }
        )
        return report

    def raw_path(self) -> str:
        return self.pipelines("location", str(self.pipeline)).strip()

    def table_rows(self, path: str) -> list[tuple[Any, ...]]:
        """Every row of a published table, sorted (hive partition columns read as strings)."""
        rows = published_rows(self.storage(path), path)
        columns = sorted(rows[0]) if rows else []
        return sorted(tuple(str(row[c]) for c in columns) for row in rows)

    def show_run(self, report: dict[str, Any]) -> None:
        totals, run = report["totals"], report["run"]
        outputs = ", ".join(f"{o['name']} {o['status']}" for o in report["outputs"])
        self.say(
            f"run #{run['seq']} ({run['kind']}): {totals['messages']:,} messages → {totals['rows']:,} rows, "
            f"{totals['quarantined']:,} quarantined, lag {totals['lag']:,}; {outputs}"
        )


def _shown(path: str) -> str:
    """A path as the summary shows it: absolute if local, the URL as it is otherwise."""
    return path if "://" in path else str(Path(path).resolve())


def story(demo: Demo, spec: PipelineSpec, events: int) -> None:
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    demo.point_pipeline_at_the_aggregate()

    demo.step("2. a day of web activity in two data centers, mirrored into the aggregate")
    demo.produce("the last 24 hours", now - timedelta(hours=24), now - timedelta(minutes=20), events, seed=11)
    mirrored = demo.wait_for_mirror()
    demo.say(f"the aggregate holds {mirrored:,} messages: every one produced, once")

    demo.step("3. the page_views pipeline: load → transforms → expectations → publish")
    demo.spark_submit()
    demo.show_run(demo.latest_report(spec))

    demo.step("4. twenty minutes later: new views (and late ones); the next run loads only those")
    demo.produce("new activity", now - timedelta(minutes=20), now, max(events // 12, 100), seed=12)
    demo.produce("late events (6 hours old)", now - timedelta(hours=6, minutes=30), now - timedelta(hours=6),
                 max(events // 100, 20), seed=13)  # fmt: skip
    demo.wait_for_mirror()
    demo.spark_submit()
    demo.show_run(demo.latest_report(spec))

    demo.step("5. rewind to six hours ago and replay")
    tables = {o.name: demo.pipelines("location", str(demo.pipeline), "--output", o.name).strip() for o in spec.outputs}
    before = {name: demo.table_rows(path) for name, path in tables.items()}
    rewind_to = (now - timedelta(hours=6)).strftime("%Y-%m-%dT%H:%M:%SZ")
    demo.say(f"[dim]$ pipelines rewind {demo.pipeline} --to-time {rewind_to} --dry-run[/dim]")
    demo.say(demo.pipelines("rewind", str(demo.pipeline), "--to-time", rewind_to, "--dry-run").rstrip())
    demo.spark_submit("--to-time", rewind_to)
    demo.show_run(demo.latest_report(spec))
    after_tables = {
        o.name: demo.pipelines("location", str(demo.pipeline), "--output", o.name).strip() for o in spec.outputs
    }
    same = {name: demo.table_rows(after_tables[name]) == before[name] for name in before}
    if not all(same.values()):
        raise DemoError(f"after the replay, these tables differ from before: {[n for n, s in same.items() if not s]}")
    demo.say("after the replay every warehouse table holds exactly the rows it held before: none lost, none twice")
    demo.facts["replay"] = {
        "rewind_to": rewind_to,
        "tables_identical": True,
        "rows": {name: len(rows) for name, rows in before.items()},
    }
    demo.facts["tables"] = {
        name: {"path": _shown(path), "rows": len(before[name])} for name, path in after_tables.items()
    }
    raw = demo.raw_path()
    demo.facts["raw"] = _shown(raw)
    demo.facts["raw_rows"] = len(published_rows(demo.storage(raw), raw))
    by_name(demo, spec)
    if demo.hadoop:
        root = f"{demo.hadoop_addresses['hdfs']}/demo"
        demo.step("what the demo wrote on HDFS (hdfs dfs -ls, three levels)")
        lines = listing(demo.storage(root), root, depth=3)
        demo.say("\n".join(line for line in lines if "/_pipeline/" not in line or line.endswith("/_pipeline")))
        demo.facts["hdfs"] = {"root": root, "entries": len(lines)}


def by_name(demo: Demo, spec: PipelineSpec) -> None:
    """Query the tables by name, as any Spark SQL or Hive reader would, and check they hold what the
    files do."""
    where = f"the Hive metastore service at {demo.metastore_uri}" if demo.hadoop else "the embedded one here"
    demo.step(f"6. the tables by name: every run registered them in the metastore ({where})")
    names = [spec.raw_table, *(o.table_name for o in spec.outputs)]
    query = " UNION ALL ".join(f"SELECT '{name}' AS table_name, COUNT(*) AS row_count FROM {name}" for name in names)
    demo.say(f'[dim]$ pipelines sql {demo.pipeline} "{query}"[/dim]')
    found = {
        row["table_name"]: row["row_count"]
        for row in map(json.loads, demo.pipelines("sql", str(demo.pipeline), query, "--json").splitlines())
    }
    expected = {spec.raw_table: demo.facts["raw_rows"]}
    expected |= {o.table_name: demo.facts["tables"][o.name]["rows"] for o in spec.outputs}
    if found != expected:
        raise DemoError(f"the tables by name hold other row counts than their files: {found} vs {expected}")
    demo.say(
        ", ".join(f"{spec.tables.database}.{name}: {count:,} rows" for name, count in found.items())
        + " — what their files hold. Any reader of the metastore finds them so: "
        f'spark.table("{spec.tables.database}.{spec.outputs[0].table_name}"), spark-sql, Hive'
    )
    demo.facts["by_name"] = {f"{spec.tables.database}.{name}": count for name, count in found.items()}


def summary(demo: Demo, started: float) -> None:
    demo.step("7. the report")
    aggregate = demo.end_offsets(demo._bootstrap("aggregate"))
    demo.facts["produced"] = demo.produced
    demo.facts["aggregate_messages"] = aggregate
    demo.facts["seconds"] = round(time.monotonic() - started, 1)
    table = Table(show_header=True, header_style="bold")
    table.add_column("what")
    table.add_column("where", overflow="fold")
    table.add_column("", justify="right")
    for center, count in demo.produced.items():
        table.add_row(f"data center {center}", demo._bootstrap(center), f"{count:,} page views")
    table.add_row("aggregate cluster", demo._bootstrap("aggregate"), f"{aggregate:,} messages (mirrored)")
    table.add_row("raw layer (Parquet, dt/hour)", demo.facts["raw"], f"{demo.facts['raw_rows']:,} rows")
    for name, table_facts in demo.facts["tables"].items():
        table.add_row(f"warehouse table {name}", table_facts["path"], f"{table_facts['rows']:,} rows")
    for run in demo.facts["runs"]:
        table.add_row(f"run report #{run['seq']} ({run['kind']})", run["report"], "")
    demo.console.print(table)
    demo.end_step()
    steps = demo.facts["step_seconds"]
    demo.say("time per step: " + ", ".join(f"{title.split('.')[0]}: {sec:.0f} s" for title, sec in steps.items()))
    path = HOME / "demo-report.json"
    path.write_text(json.dumps(demo.facts, indent=1))
    demo.say(
        f"demo finished in {demo.facts['seconds']:.0f} s; this summary as JSON: {path}. "
        f"Open a run report in a browser; `pipelines status|offsets|report {demo.pipeline}` "
        "read the state. Every process the demo started is stopped now."
    )


@click.command()
@click.option("--zookeeper", is_flag=True, help="Register the clusters in a ZooKeeper the demo starts.")
@click.option(
    "--hadoop",
    is_flag=True,
    help="Put the raw layer and warehouse on a real HDFS and run the jobs on YARN (Hadoop's mini clusters).",
)
@click.option("--events", default=30_000, show_default=True, help="Page views per data center for the day.")
@click.option(
    "--port-base",
    type=click.IntRange(1024, 65531),
    default=None,
    help="Listen on this port and the four after it (aggregate, us-east, eu-west, ZooKeeper, the Hive metastore "
    "service) instead of free ports.",
)
def main(zookeeper: bool, hadoop: bool, events: int, port_base: int | None) -> None:
    """Run the whole deployment on this machine: clusters, mirror, pipeline, replay, report."""
    started = time.monotonic()
    os.chdir(REPO)  # the pipeline file's paths are relative to the repository
    # every child (brokers, mirror, spark-submit and its workers) runs this checkout's code, even
    # where the virtualenv's installed package points at another one
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    console = Console(width=None if sys.stdout.isatty() else 160)
    previous = PreviousResults(HOME)
    checked = False
    try:
        spec = load_spec(PIPELINE)
        ports = pick_ports(port_base)
        preflight(ports, zookeeper, hadoop)  # before anything is cleared
        checked = True
        # the last demo's results stay (aside) until this one's servers run: see demo.results
        with previous, Supervisor(HOME / "logs") as supervisor:
            reporter = Reporter(console=console, interval=5)
            demo = Demo(supervisor, console, reporter, zookeeper, ports, hadoop)
            demo.start_clusters()
            previous.discard()
            story(demo, spec, events)
            summary(demo, started)
    except (PipelineError, KafkalogError) as exc:
        if previous.failed_attempt is not None:
            stopped = (
                f"(the demo stopped every process it started; the last demo's results are back in {HOME}, "
                f"this attempt's logs are in {previous.failed_attempt / 'logs'})"
            )
        elif checked:
            stopped = f"(the demo stopped every process it started; their logs are in {HOME / 'logs'})"
        else:
            stopped = f"(nothing was started or cleared: {HOME} is as it was)"
        click.echo(f"error: {exc}\n{stopped}", err=True)  # the prefix kafkalog's and pipelines' commands use
        sys.exit(1)


if __name__ == "__main__":
    main()
