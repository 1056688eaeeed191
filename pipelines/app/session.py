"""SparkSessions for the command line and tests: local mode with settings that work out of the box.

spark-submit users get their session from spark-submit (jobs/load_warehouse.py); this module is for
``pipelines run``, which starts Spark itself.
"""

from __future__ import annotations

import os
import sys
from typing import Any


def local_session(master: str = "local[*]", app_name: str = "pipelines", conf: dict[str, str] | None = None) -> Any:
    """A SparkSession on this machine. Workers run this interpreter (which has pyarrow and the
    pipelines package); the driver binds to loopback; no web UI."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession  # noqa: PLC0415 - starting Spark is the caller's choice

    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
        .config("spark.python.worker.reuse", "true")
        .config("spark.ui.showConsoleProgress", "false")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
