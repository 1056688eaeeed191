"""The Airflow DAGs, with real Airflow: the DAG folder parses, a broken pipeline file breaks only its
own DAG, and `airflow dags test` runs a pipeline end to end (twice: the second changes nothing)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from demo.examples import page_views
from kafkalog.server.security.credentials import UsersFile
from pipelines.app.airflow import RUN_ID
from tests.pipelines.flow_harness import REPO, example_spec, expected_hourly_pages, send, snapshot, table_rows
from tests.pipelines.harness import write_spec
from tests.support.certificates import authority, person
from tests.support.kafkalog import BrokerProcess

AIRFLOW = str(Path(sys.executable).with_name("airflow"))


def dag_bag(folder: Path) -> Any:
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(folder))


@pytest.fixture
def airflow_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "airflow-home"
    home.mkdir()
    monkeypatch.setenv("AIRFLOW_HOME", str(home))
    monkeypatch.setenv("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    return home


def test_the_dag_folder_parses_into_one_dag_per_pipeline(airflow_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.dag_processing.dagbag import DagBag  # imported before the network goes

    def no_network(*args: object) -> None:
        raise AssertionError(f"a DAG file touched the network while parsing: connect{args[1:]}")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket.socket, "connect_ex", no_network)
    bag = DagBag(dag_folder=str(REPO / "airflow_dags"))
    assert bag.import_errors == {}
    names = ("page_views", "ops_metrics", "demo_events")
    assert set(bag.dags) == {f"{kind}_{name}" for name in names for kind in ("pipeline", "replay")}
    replay = bag.dags["replay_page_views"]
    assert replay.schedule is None and replay.max_active_runs == 1
    assert replay.params["dry_run"] is True and "rewind_to" in replay.params
    (task,) = replay.tasks
    assert '--to-time "{{ params.rewind_to }}"{% if params.dry_run %} --dry-run{% endif %}' in task.bash_command
    dag = bag.dags["pipeline_page_views"]
    assert dag.max_active_runs == 1 and dag.catchup is False
    edges = {t.task_id: sorted(t.downstream_task_ids) for t in dag.tasks}
    assert edges == {
        "load": ["transform_hourly_pages", "transform_sessions"],
        "transform_sessions": ["validate"],
        "transform_hourly_pages": ["validate"],
        "validate": ["publish"],
        "publish": [],
    }
    load = dag.get_task("load")
    assert load.retries == 2 and load.retry_delay.total_seconds() == 300
    assert "--stage load" in load.bash_command and f'--run-id "{RUN_ID}"' in load.bash_command
    assert "--master 'local[2]'" in load.bash_command
    # publishing registers the tables (through Spark's catalog): a spark-submit job like the others
    publish = dag.get_task("publish").bash_command
    assert "--stage publish" in publish and "spark-submit" in publish
    assert list(bag.dags["pipeline_demo_events"].task_ids) == ["load"]


def test_the_run_id_is_the_logical_date_or_a_clean_manual_run_id() -> None:
    import jinja2

    template = jinja2.Environment(undefined=jinja2.StrictUndefined).from_string(RUN_ID)
    scheduled = template.render(logical_date="2026-05-04", ts_nodash="20260504T110000", run_id="scheduled__x")
    assert scheduled == "airflow-20260504T110000"
    manual = template.render(logical_date=None, run_id="manual__2026-05-04T11:00:00.123+00:00/x")
    assert manual == "airflow-manual__2026-05-04T110000.1230000_x"


def test_a_broken_pipeline_file_breaks_only_its_own_dag(
    tmp_path: Path, airflow_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf, dags = tmp_path / "conf", tmp_path / "dags"
    shutil.copytree(REPO / "conf" / "pipelines", conf)
    shutil.copytree(REPO / "airflow_dags", dags, ignore=shutil.ignore_patterns("__pycache__"))
    broken = conf / "ops_metrics.yaml"
    broken.write_text(broken.read_text().replace("source: service_hourly", "source: service_hourlyy"))
    monkeypatch.setenv("PIPELINES_CONF_DIR", str(conf))
    bag = dag_bag(dags)
    assert list(bag.import_errors) == [str(dags / "ops_metrics.py")]
    message = bag.import_errors[str(dags / "ops_metrics.py")]
    assert f"{broken}:outputs[0].source: unknown step 'service_hourlyy'" in message
    assert set(bag.dags) == {
        f"{kind}_{name}" for name in ("page_views", "demo_events") for kind in ("pipeline", "replay")
    }


@dataclass(frozen=True)
class Secured:
    """A broker with a SASL_SSL listener (and PLAINTEXT on loopback for the test's own producer),
    and the pipeline ``source`` that logs in to it with its password from ``${env:LOADER_PASSWORD}``."""

    broker: BrokerProcess
    source: dict[str, Any]


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[Secured]:
    ca = authority(tmp_path / "certs")
    server = ca.issue("broker", person("broker"), server=True)
    users = UsersFile(tmp_path / "users.json")
    users.set_password("loader", LOADER_PASSWORD, ["SCRAM-SHA-512"])
    config = {
        "listeners": ["PLAINTEXT://127.0.0.1:0", "SASL_SSL://127.0.0.1:0"],
        "sasl": {"users_file": str(users.path), "mechanisms": ["SCRAM-SHA-512"]},
        "tls": {"certificate": str(server.certificate), "key": str(server.key)},
    }
    with BrokerProcess(tmp_path / "secured", **config) as broker:
        security = {"protocol": "SASL_SSL", "mechanism": "SCRAM-SHA-512", "username": "loader",
                    "password": "${env:LOADER_PASSWORD}", "ca_file": str(ca.certificate)}  # fmt: skip
        address = f"127.0.0.1:{broker.ports['SASL_SSL']}"
        yield Secured(broker, {"bootstrap": address, "retry_ms": 20_000, "security": security})


LOADER_PASSWORD = "airflow-Pw-5r7t"
CONNECTION = json.dumps({"conn_type": "generic", "login": "loader", "password": LOADER_PASSWORD})


@pytest.mark.early
def test_airflow_dags_test_runs_a_pipeline_end_to_end_and_again_changes_nothing(
    tmp_path: Path, airflow_home: Path, secured: Secured
) -> None:
    """Against a SASL_SSL broker: the pipeline file names ``${env:LOADER_PASSWORD}``, and only
    Airflow's connection (``AIRFLOW_CONN_KAFKA_LOADER``) holds the password; every task gets it
    when it runs."""
    events = list(page_views(datetime(2026, 5, 4, 10, 0, tzinfo=UTC), 300, bad_page_every=200))
    send(secured.broker.bootstrap, "web.page_views", events)  # through the loopback PLAINTEXT listener
    conf, dags = tmp_path / "conf", tmp_path / "dags"
    conf.mkdir()
    dags.mkdir()
    pipeline = example_spec(conf, "page_views", "unused")
    document = yaml.safe_load(pipeline.read_text())
    document["source"] = secured.source
    document.setdefault("schedule", {})["airflow_connection"] = "kafka_loader"
    pipeline.write_text(yaml.safe_dump(document, sort_keys=False))
    # the raw layer and the warehouse are under conf/ too (example_spec puts them beside the file)
    shutil.copy(REPO / "airflow_dags" / "page_views.py", dags / "page_views.py")
    env = {
        **{key: value for key, value in os.environ.items() if key != "LOADER_PASSWORD"},
        "PIPELINES_CONF_DIR": str(conf),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW_CONN_KAFKA_LOADER": CONNECTION,
    }
    migrate = subprocess.run(
        [AIRFLOW, "db", "migrate"], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert migrate.returncode == 0, migrate.stderr[-3000:]
    # a fresh database lists no DAG until the DAG processor has parsed the folder (docs/transforms.md):
    # `--local` parses it on the spot
    listed = subprocess.run(
        [AIRFLOW, "dags", "list", "--local", "--output", "json"], env=env, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr[-3000:]
    (listing,) = [line for line in listed.stdout.splitlines() if line.startswith("[")]  # after Airflow's warnings
    assert {"pipeline_page_views", "replay_page_views"} <= {d["dag_id"] for d in json.loads(listing)}

    def dags_test() -> str:
        done = subprocess.run(
            [AIRFLOW, "dags", "test", "pipeline_page_views", "2026-05-04T11:00:00+00:00"],
            env=env,
            capture_output=True,
            text=True,
            timeout=1200,
            check=False,
        )
        output = done.stdout + done.stderr
        assert done.returncode == 0, output[-6000:]
        assert "state=success" in output or "success" in output.lower(), output[-6000:]
        return output

    first = dags_test()
    warehouse = conf / "warehouse"
    rows = table_rows(warehouse / "hourly_page_views")
    assert {(r["dt"], r["hour"], r["page"]): (r["views"], r["users"]) for r in rows} == expected_hourly_pages(events)
    (run,) = [p.name for p in (conf / "raw" / "_pipeline" / "runs").glob("*.json")]
    assert run == "airflow-20260504T110000.json"  # the logical date names the run
    before = snapshot(warehouse)
    again = dags_test()  # the same logical date: every task again, nothing changes
    assert snapshot(warehouse) == before
    # each task saw that from the state files (`pipelines done`), without starting spark-submit
    assert again.count(f"nothing to do: run {run.removesuffix('.json')}") == 5, again[-6000:]
    # (in the first run every task's check said it had work, and its spark-submit job ran)
    assert (first.count("may have work to do"), again.count("may have work to do")) == (5, 0)

    # the manual replay DAG, triggered with its parameters: everything reloaded into generation 1
    replayed = subprocess.run(
        [AIRFLOW, "dags", "test", "replay_page_views", "-c", json.dumps({"rewind_to": "2026-01-01T00:00:00Z",
                                                                           "dry_run": False})],
        env=env, capture_output=True, text=True, timeout=1200, check=False,
    )  # fmt: skip
    assert replayed.returncode == 0, (replayed.stdout + replayed.stderr)[-6000:]
    current = warehouse / "hourly_page_views" / "_generations" / "000001"
    rows = table_rows(current)
    assert {(r["dt"], r["hour"], r["page"]): (r["views"], r["users"]) for r in rows} == expected_hourly_pages(events)
    assert not [o for o in (first, again, replayed.stdout + replayed.stderr) if LOADER_PASSWORD in o]  # masked
    assert snapshot(warehouse / "hourly_page_views" / "dt=2026-05-04") == {
        k.removeprefix("hourly_page_views/dt=2026-05-04/"): v
        for k, v in before.items()
        if k.startswith("hourly_page_views/dt=2026-05-04/")
    }, "generation 0 untouched"


def test_a_secured_pipelines_dag_parses_without_the_secret_and_asks_airflow_for_it(
    tmp_path: Path, airflow_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scheduler parsing the DAG does not have the password (and must not): the DAG builds, and
    each task's environment asks Airflow's connection for it when the task runs (the end-to-end
    test above runs such a DAG)."""
    conf, dags = tmp_path / "conf", tmp_path / "dags"
    conf.mkdir()
    dags.mkdir()
    source = {"bootstrap": "127.0.0.1:9093", "security": {"protocol": "SASL_SSL", "username": "loader",
                                                          "password": "${env:LOADER_PASSWORD}"}}  # fmt: skip
    write_spec(conf, "unused", tmp_path / "raw", source=source, schedule={"airflow_connection": "kafka_loader"})
    (dags / "secured.py").write_text('from pipelines.app.airflow import dag_for\n\ndag = dag_for("events_raw.yaml")\n')
    monkeypatch.setenv("PIPELINES_CONF_DIR", str(conf))
    monkeypatch.delenv("LOADER_PASSWORD", raising=False)
    bag = dag_bag(dags)
    assert bag.import_errors == {}
    (load,) = bag.dags["pipeline_events_raw"].tasks
    assert load.env["LOADER_PASSWORD"] == "{{ conn.get('kafka_loader').password }}"
    assert "LOADER_PASSWORD" not in os.environ  # the stand-in used while parsing is gone
    # a connection named for a pipeline whose password is not taken from the environment: refused
    write_spec(conf, "unused", tmp_path / "raw", source={"bootstrap": "127.0.0.1:9092"},
               schedule={"airflow_connection": "kafka_loader"})  # fmt: skip
    assert "is not an ${env:NAME} reference for it to fill" in str(dag_bag(dags).import_errors)
