"""SparkSessions for the command line and tests: local mode with settings that work out of the box,
and Spark's logging for the pipelines' sessions.

spark-submit users get their session from spark-submit (jobs/load_warehouse.py); this module is for
``pipelines run`` and ``pipelines rewind``, which start Spark themselves. Those send the JVM's own
output (Spark's log lines, and in local mode the executors' Python workers' errors, stack traces
and all) to a log file instead of the terminal: a person reads the one ``error:`` line of a failed
run, which names the file for the rest.

Spark's log: the pipelines' log4j2 configuration (``log4j2.properties`` beside this module, package
data, shipped by pipelines.app.ship too) shows warnings and errors on the console without the
noise of failed tasks, and writes everything from INFO to a file. ``pipelines run`` gives it to the
JVM it starts (``-Dlog4j2.configurationFile``, in ``spark.driver.extraJavaOptions``); a spark-submit
caller passes ``java_options()`` (``pipelines spark-options`` prints them) with
``--driver-java-options``, or else the job applies it once its session is up, if the JVM runs
Spark's default profile (``submitted_log``): the lines Spark prints before that stay as they were.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import os
import shlex
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


LOG_CONFIG = "log4j2.properties"
"""The log4j2 configuration of the pipelines' sessions: package data of pipelines.app."""
LOG_CONFIG_NAME = "pipelines"
"""Its ``name``: how a running JVM shows that it has this configuration."""
LOG_FILE_PROPERTY = "pipelines.spark.log"
"""The JVM system property that names the file the configuration writes to."""
CONSOLE_PROPERTY = "pipelines.spark.console"
"""The JVM system property of the console's level (``off``: nothing on the console)."""
SPARK_DEFAULT_PROFILE = "org/apache/spark/log4j2"
"""Where Spark's own default profiles live in its jars: a JVM on one was given no configuration."""


def logs_dir() -> Path:
    """Where the pipelines' Spark logs go unless told otherwise: ``<tmp>/pipelines-spark``."""
    return Path(tempfile.gettempdir()) / "pipelines-spark"


def jvm_log_path(app_name: str) -> Path:
    """A new file for the JVM's output of one command: ``<tmp>/pipelines-spark/<app>-<time>-<pid>.log``."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    return logs_dir() / f"{app_name}-{stamp}-{os.getpid()}.log"


def log_config() -> Path:
    """The log4j2 configuration as a file a JVM can read: the package's own, or, when the code
    runs from a zip (a cluster's --py-files), a copy in ``logs_dir()`` named by its content."""
    resource = importlib.resources.files("pipelines.app") / LOG_CONFIG
    if isinstance(resource, Path):
        return resource
    data = resource.read_bytes()
    copy = logs_dir() / f"log4j2-{hashlib.sha256(data).hexdigest()[:12]}.properties"
    if not copy.exists():
        copy.parent.mkdir(parents=True, exist_ok=True)
        temporary = copy.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_bytes(data)
        temporary.replace(copy)  # the same bytes whoever wins
    return copy


def java_options(log_file: Path | None = None, *, console: bool = True) -> str:
    """The JVM options that give a driver the pipelines' log4j2 configuration (for
    ``spark.driver.extraJavaOptions`` or spark-submit's ``--driver-java-options``), writing to
    ``log_file`` (default: a new file per run in ``logs_dir()``), and with ``console=False``
    nothing on the console."""
    options = [f"-Dlog4j2.configurationFile={log_config().as_uri()}"]
    if log_file is not None:
        options.append(f"-D{LOG_FILE_PROPERTY}={log_file}")
    if not console:
        options.append(f"-D{CONSOLE_PROPERTY}=off")
    return " ".join(shlex.quote(option) for option in options)


def _with_java_options(settings: dict[str, str], options: str) -> dict[str, str]:
    """``settings`` with ``options`` before the caller's own driver JVM options (theirs win)."""
    key = "spark.driver.extraJavaOptions"
    given = settings.get(key, "").strip()
    return {**settings, key: f"{options} {given}".strip()}


def local_session(
    master: str = "local[*]",
    app_name: str = "pipelines",
    conf: dict[str, str] | None = None,
    *,
    jvm_log: Path | None = None,
) -> Any:
    """A SparkSession on this machine. Workers run this interpreter (which has pyarrow and the
    pipelines package); the driver binds to loopback; no web UI. With ``jvm_log``, the JVM this
    starts writes its output there (appending) instead of to this process's stdout and stderr,
    and logs with the pipelines' configuration (everything from INFO, into the same file);
    without, Spark logs errors only, to stderr."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark import SparkConf, SparkContext  # noqa: PLC0415 - starting Spark is the caller's choice
    from pyspark.sql import SparkSession  # noqa: PLC0415

    settings = {**SETTINGS, **(conf or {}), "spark.master": master, "spark.app.name": app_name}
    if jvm_log is not None:
        settings = _with_java_options(settings, java_options(jvm_log, console=False))
    if jvm_log is not None and SparkContext._active_spark_context is None:
        spark_conf = SparkConf().setAll(list(settings.items()))
        SparkContext(conf=spark_conf, gateway=_gateway_logging_to(jvm_log, spark_conf))
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    if jvm_log is None:
        session.sparkContext.setLogLevel("ERROR")
    return session


def pipeline_session(
    spec: Any,
    master: str,
    app_name: str,
    conf: dict[str, str] | None = None,
    *,
    jvm_log: Path | None = None,
    check_metastore: bool = False,
) -> Any:
    """A local session for ``spec``'s commands: ``local_session`` with the settings that reach the
    pipeline's metastore (pipelines.catalog.connection; the caller's ``conf`` wins).
    ``check_metastore`` (``pipelines repair``): an embedded metastore's database that Derby will
    not open is moved aside and made anew (pipelines.catalog.embedded)."""
    from pipelines.catalog.connection import metastore_for, prepare, session_settings  # noqa: PLC0415
    from pipelines.storage.hadoop import session_settings as hdfs_settings  # noqa: PLC0415

    given = conf or {}
    metastore = metastore_for(spec, given)
    settings = {**session_settings(metastore), **hdfs_settings(given), **given}
    session = local_session(master, app_name, settings, jvm_log=jvm_log)
    prepare(session, metastore, check_opens=check_metastore)
    return session


def submitted_session(spec: Any, app_name: str) -> Any:
    """The session spark-submit configured (master, resources, the shipped code), with the
    settings that reach ``spec``'s metastore added where spark-submit's own do not say otherwise
    (Hive's settings are read once, when the session starts)."""
    from pyspark import SparkConf  # noqa: PLC0415
    from pyspark.sql import SparkSession  # noqa: PLC0415

    from pipelines.catalog.connection import metastore_for, prepare, session_settings  # noqa: PLC0415
    from pipelines.storage.hadoop import session_settings as hdfs_settings  # noqa: PLC0415

    given = dict(SparkConf().getAll())
    metastore = metastore_for(spec, given)
    builder = SparkSession.builder.appName(app_name)
    for key, value in {**session_settings(metastore), **hdfs_settings(given)}.items():
        if key not in given:
            builder = builder.config(key, value)
    session = builder.getOrCreate()
    prepare(session, metastore)
    return session


def submitted_log(spark: Any, app_name: str) -> Path | None:
    """The file the session's JVM logs to with the pipelines' configuration (its failed tasks'
    stacks are there). A JVM started with it (``java_options``) says which file; a JVM on Spark's
    default profile (the caller gave no configuration) gets it now, writing to a new file in
    ``logs_dir()``: only the lines Spark printed before this call were printed its way. A JVM
    with a configuration of its own (a cluster's) is left as it is: None."""
    jvm = spark._jvm
    context = jvm.org.apache.logging.log4j.LogManager.getContext(False)
    configuration = context.getConfiguration()
    if configuration.getName() != LOG_CONFIG_NAME:
        source = configuration.getConfigurationSource()
        location = str(source.getLocation() or "") if source is not None else ""
        if location and SPARK_DEFAULT_PROFILE not in location:
            return None
        system = jvm.java.lang.System
        if system.getProperty(LOG_FILE_PROPERTY) is None:
            system.setProperty(LOG_FILE_PROPERTY, str(jvm_log_path(app_name)))
        # Applied after the session started: applied before, the SparkContext's start would put
        # Spark's default profile back (its logging re-initialises when spark-submit handed over)
        jvm.org.apache.logging.log4j.core.config.Configurator.reconfigure(jvm.java.net.URI(log_config().as_uri()))
        configuration = context.getConfiguration()
    appender = configuration.getAppender("file")
    return None if appender is None else Path(str(appender.getFileName()))


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
