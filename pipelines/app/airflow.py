"""One Airflow DAG per pipeline file: load → transforms (as their graph) → validate → publish.

Role: what the thin files in ``airflow_dags/`` call. Building a DAG reads one YAML (no network, no
Spark, nothing written), so a broken pipeline file breaks only the DAG file that names it: Airflow
shows one import error, whose message is the ``file:key.path: reason`` of the spec error.

Every task runs one stage of the pipeline through spark-submit (``jobs/load_warehouse.py --stage``)
with the run id derived from the DAG run's id, never from the clock: a retried or cleared
task repeats the same work on the same load run, and each stage is idempotent (a committed run id is
a no-op; steps overwrite their staged results; a published run is never published again).
Validation runs after the transforms because expectations check the transforms' staged results;
nothing is published unless validation passed.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from pipelines.app.runner import needs_spark
from pipelines.config.pipeline import PipelineSpec, load_spec
from pipelines.config.steps import RAW_VIEW
from pipelines.errors import SpecError
from pipelines.logs import ENV_LEVEL

PROJECT_DIR = Path(__file__).resolve().parents[2]
RUN_ID = (
    "airflow-{{ ts_nodash if logical_date else (run_id | replace(':', '') | replace('+', '') | replace('/', '_')) }}"
)
"""The load's run id for a DAG run: its logical date, which identifies a scheduled run (the same for
every try of every task, and for a re-run of that date); a manual run without a logical date uses
Airflow's run id, without ':', '+' and '/' (not allowed in HDFS names)."""


def conf_dir() -> Path:
    """Where pipeline files live: $PIPELINES_CONF_DIR, else conf/pipelines of this project."""
    return Path(os.environ.get("PIPELINES_CONF_DIR", PROJECT_DIR / "conf" / "pipelines"))


def _spark_submit(spec: PipelineSpec) -> str:
    command = spec.schedule.spark_submit
    beside = Path(sys.executable).with_name("spark-submit")  # the one of this environment's pyspark
    if command == "spark-submit" and beside.exists():
        return str(beside)
    return command


def _task_env(secret: tuple[str, str] | None = None) -> dict[str, str]:
    """Spark's Python is this environment's; the driver binds to loopback. ``secret``: (the
    environment variable the source's password is read from, the Airflow connection holding it),
    rendered by Airflow when the task runs (``env`` is a templated field; Airflow masks a
    connection's password wherever it would be logged)."""
    return {
        **({secret[0]: f"{{{{ conn.get({secret[1]!r}).password }}}}"} if secret else {}),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        # a task's log shows what the job did (plan, commit, publish, the kernels tasks ran);
        # the operator's environment decides, INFO unless it says otherwise
        ENV_LEVEL: os.environ.get(ENV_LEVEL, "INFO"),
    }


def _job_command(spec: PipelineSpec, pipeline_file: Path) -> list[str]:
    """spark-submit of jobs/load_warehouse.py on ``pipeline_file``: what every task runs."""
    return [
        _spark_submit(spec),
        "--master",
        spec.schedule.spark_master,
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.sql.sources.partitionColumnTypeInference.enabled=false",
        str(PROJECT_DIR / "jobs" / "load_warehouse.py"),
        "--pipeline",
        str(pipeline_file),
    ]


def stage_command(spec: PipelineSpec, pipeline_file: Path, stage: str, step: str | None = None) -> str:
    """The shell command of one task: ``pipelines done`` first, which answers from the state files
    whether this stage of this run is finished (a cleared or re-run task of a finished DAG run), so
    that such a task exits at once instead of starting a JVM (locally) or an application (on
    YARN); then, if it may have work (or the check itself failed), the spark-submit job, which
    decides for itself again. The publish task runs ``pipelines run --stage publish`` instead when
    the pipeline's storage is reachable without Spark."""
    done = [sys.executable, "-m", "pipelines.app.cli", "done", str(pipeline_file), "--stage", stage]
    if needs_spark(spec, stage):
        parts = [*_job_command(spec, pipeline_file), "--stage", stage, *(["--step", step] if step else [])]
    else:  # publish moves files: no JVM to start (runner.needs_spark)
        parts = [sys.executable, "-m", "pipelines.app.cli", "run", str(pipeline_file), "--stage", stage]
    # the run id is a Jinja template, quoted as a whole: Airflow renders it inside the quotes
    return (
        " ".join(shlex.quote(p) for p in done)
        + f' --run-id "{RUN_ID}" || '
        + " ".join(shlex.quote(p) for p in parts)
        + f' --run-id "{RUN_ID}" --quiet'
    )


def _password_variable(pipeline_file: Path) -> str | None:
    """The environment variable a pipeline file's ``source.security.password`` names, if any (read
    from the YAML itself: the scheduler parsing DAGs does not have the secret, and must not)."""
    import yaml  # noqa: PLC0415

    try:
        document = yaml.safe_load(pipeline_file.read_text(encoding="utf-8"))
        reference = document["source"]["security"]["password"]
    except (OSError, yaml.YAMLError, KeyError, TypeError):
        return None
    match = re.fullmatch(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}", str(reference).strip())
    return match.group(1) if match else None


def _load_for_dag(pipeline_file: Path) -> tuple[PipelineSpec, tuple[str, str] | None]:
    """The spec, and (variable, connection) when its password comes from an Airflow connection.
    While parsing, the variable stands in for the password if it is unset: the DAG needs the
    pipeline's shape, not its secret, which Airflow gives the tasks when they run."""
    variable = _password_variable(pipeline_file)
    if variable is None or variable in os.environ:
        spec = load_spec(pipeline_file)
    else:
        os.environ[variable] = "(set by Airflow when a task runs)"
        try:
            spec = load_spec(pipeline_file)
        finally:
            del os.environ[variable]
    connection = spec.schedule.airflow_connection
    if connection is None:
        return spec, None
    if variable is None:
        raise SpecError(
            f"{pipeline_file}:schedule.airflow_connection: {connection!r} is given, but source.security.password"
            " is not an ${env:NAME} reference for it to fill"
        )
    return spec, (variable, connection)


def dag_for(name: str) -> Any:
    """The DAG of ``conf_dir()/name``; raises the pipeline file's SpecError if it is invalid."""
    from airflow.providers.standard.operators.bash import BashOperator  # noqa: PLC0415
    from airflow.sdk import DAG  # noqa: PLC0415 - Airflow only where DAGs are built

    pipeline_file = (conf_dir() / name).resolve()
    spec, secret = _load_for_dag(pipeline_file)
    schedule = spec.schedule
    env = _task_env(secret)
    dag = DAG(
        dag_id=f"pipeline_{spec.name}",
        description=spec.description or f"pipeline {spec.name}",
        schedule=schedule.cron,
        start_date=datetime.fromisoformat(schedule.start_date),
        catchup=False,
        max_active_runs=1,
        tags=["pipelines", *schedule.tags],
        default_args={
            "retries": schedule.retries,
            "retry_delay": timedelta(seconds=schedule.retry_delay_seconds),
            "execution_timeout": timedelta(minutes=schedule.task_timeout_minutes),
        },
        doc_md=f"Pipeline `{pipeline_file}`: {spec.description}",
    )
    with dag:

        def task(task_id: str, stage: str, step: str | None = None) -> Any:
            return BashOperator(
                task_id=task_id,
                bash_command=stage_command(spec, pipeline_file, stage, step),
                env=env,
                append_env=True,
                cwd=str(PROJECT_DIR),
            )

        load = task("load", "load")
        if not spec.outputs:
            return dag
        steps = {t.name: task(f"transform_{t.name}", "transforms", t.name) for t in spec.transforms}
        for transform in spec.transforms:
            for dependency in transform.depends_on:
                upstream = load if dependency == RAW_VIEW else steps[dependency]
                upstream >> steps[transform.name]
            if not transform.depends_on:
                load >> steps[transform.name]
        validate = task("validate", "validate")
        for transform in spec.transforms:
            steps[transform.name] >> validate
        validate >> task("publish", "publish")
    return dag


REWIND_TO_PATTERN = r"^[0-9][0-9T:.+Z -]*$"
"""What the replay DAG accepts as ``rewind_to`` (ISO 8601 or milliseconds): nothing a shell would
interpret reaches the command."""


def replay_command(spec: PipelineSpec, pipeline_file: Path) -> str:
    """The replay task's command: the spark-submit job with ``--to-time`` from the DAG run's
    parameters (``--dry-run`` unless ``dry_run`` is false)."""
    parts = _job_command(spec, pipeline_file)
    return (
        " ".join(shlex.quote(p) for p in parts)
        + ' --to-time "{{ params.rewind_to }}"{% if params.dry_run %} --dry-run{% endif %}'
    )


def replay_dag_for(name: str) -> Any:
    """The manually triggered replay DAG of ``conf_dir()/name`` (``replay_<pipeline>``): one task
    that rewinds the pipeline to the ``rewind_to`` parameter and replays (docs/replay.md). It runs
    a dry run (the plan in the task log) unless triggered with ``dry_run: false``."""
    from airflow.providers.standard.operators.bash import BashOperator  # noqa: PLC0415
    from airflow.sdk import DAG, Param  # noqa: PLC0415

    pipeline_file = (conf_dir() / name).resolve()
    spec, secret = _load_for_dag(pipeline_file)
    dag = DAG(
        dag_id=f"replay_{spec.name}",
        description=f"rewind and replay pipeline {spec.name} (manual)",
        schedule=None,
        start_date=datetime.fromisoformat(spec.schedule.start_date),
        catchup=False,
        max_active_runs=1,
        tags=["pipelines", "replay", *spec.schedule.tags],
        params={
            "rewind_to": Param(
                type="string", pattern=REWIND_TO_PATTERN, description="replay from this time (ISO 8601, UTC)"
            ),
            "dry_run": Param(True, type="boolean", description="only print the plan"),
        },
        doc_md=f"Replay of pipeline `{pipeline_file}`: see docs/replay.md.",
    )
    with dag:
        BashOperator(
            task_id="replay",
            bash_command=replay_command(spec, pipeline_file),
            env=_task_env(secret),
            append_env=True,
            cwd=str(PROJECT_DIR),
        )
    return dag
