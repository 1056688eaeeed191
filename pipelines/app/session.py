"""SparkSessions for the command line and tests: local mode with settings that work out of the box.

spark-submit users get their session from spark-submit (jobs/load_warehouse.py); this module is for
``pipelines run`` and ``pipelines rewind``, which start Spark themselves. Those send the JVM's own
output (Spark's log lines, and in local mode the executors' Python workers' errors, stack traces
and all) to a log file instead of the terminal: a person reads the one ``error:`` line of a failed
run, and the command names the file for the rest (``spark_log_note``).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pipelines.errors import PipelineError

SETTINGS = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
    "spark.python.worker.reuse": "true",
    "spark.ui.showConsoleProgress": "false",
}
"""What every local session gets (the caller's ``conf`` wins): loopback only, no web UI."""


def jvm_log_path(app_name: str) -> Path:
    """A new file for the JVM's output of one command: ``<tmp>/pipelines-spark/<app>-<time>-<pid>.log``."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    return Path(tempfile.gettempdir()) / "pipelines-spark" / f"{app_name}-{stamp}-{os.getpid()}.log"


def local_session(
    master: str = "local[*]",
    app_name: str = "pipelines",
    conf: dict[str, str] | None = None,
    *,
    jvm_log: Path | None = None,
) -> Any:
    """A SparkSession on this machine. Workers run this interpreter (which has pyarrow and the
    pipelines package); the driver binds to loopback; no web UI. With ``jvm_log``, the JVM this
    starts writes its output there (appending) instead of to this process's stdout and stderr."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark import SparkConf, SparkContext  # noqa: PLC0415 - starting Spark is the caller's choice
    from pyspark.sql import SparkSession  # noqa: PLC0415

    settings = {**SETTINGS, **(conf or {}), "spark.master": master, "spark.app.name": app_name}
    if jvm_log is not None and SparkContext._active_spark_context is None:
        spark_conf = SparkConf().setAll(list(settings.items()))
        SparkContext(conf=spark_conf, gateway=_gateway_logging_to(jvm_log, spark_conf))
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def pipeline_session(
    spec: Any, master: str, app_name: str, conf: dict[str, str] | None = None, *, jvm_log: Path | None = None
) -> Any:
    """A local session for ``spec``'s commands: ``local_session`` with the settings that reach the
    pipeline's metastore (pipelines.catalog.connection; the caller's ``conf`` wins)."""
    from pipelines.catalog.connection import metastore_for, prepare, session_settings  # noqa: PLC0415

    given = conf or {}
    metastore = metastore_for(spec, given)
    session = local_session(master, app_name, {**session_settings(metastore), **given}, jvm_log=jvm_log)
    prepare(session, metastore)
    return session


def submitted_session(spec: Any, app_name: str) -> Any:
    """The session spark-submit configured (master, resources, the shipped code), with the
    settings that reach ``spec``'s metastore added where spark-submit's own do not say otherwise
    (Hive's settings are read once, when the session starts)."""
    from pyspark import SparkConf  # noqa: PLC0415
    from pyspark.sql import SparkSession  # noqa: PLC0415

    from pipelines.catalog.connection import metastore_for, prepare, session_settings  # noqa: PLC0415

    given = dict(SparkConf().getAll())
    metastore = metastore_for(spec, given)
    builder = SparkSession.builder.appName(app_name)
    for key, value in session_settings(metastore).items():
        if key not in given:
            builder = builder.config(key, value)
    session = builder.getOrCreate()
    prepare(session, metastore)
    return session


def _gateway_logging_to(jvm_log: Path, spark_conf: Any) -> Any:
    """Start Spark's JVM (py4j gateway) with its stdout and stderr in ``jvm_log``; a JVM that dies
    at start is an error that quotes the end of that file."""
    from pyspark.java_gateway import launch_gateway  # noqa: PLC0415

    jvm_log.parent.mkdir(parents=True, exist_ok=True)
    with jvm_log.open("ab") as sink:
        try:
            return launch_gateway(spark_conf, popen_kwargs={"stdout": sink, "stderr": sink})  # type: ignore[no-untyped-call]
        except Exception as exc:  # pyspark's own error says only that the gateway exited
            tail = jvm_log.read_text(errors="replace")[-1500:].strip()
            raise PipelineError(f"Spark's JVM did not start ({exc}); its output, in {jvm_log}:\n{tail}") from exc


def spark_log_note(jvm_log: Path, code: int) -> None:
    """After a command's Spark work: on failure, name the JVM's log on stderr (the ``error:`` line
    came first); on success, delete it (nothing in it is the person's business)."""
    if code != 0 and jvm_log.exists():
        sys.stderr.write(f"Spark's own messages (its JVM and executors, stack traces included): {jvm_log}\n")
    elif code == 0:
        jvm_log.unlink(missing_ok=True)
