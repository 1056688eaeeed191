"""YARN is real: ``spark-submit --master yarn`` of a small PySpark job finishes on the
MiniYARNCluster (the Hadoop configuration directory written by the fixture), its executors reading
and writing the mini cluster's HDFS; the ResourceManager reports the application as succeeded."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from pathlib import Path

import pytest

from tests.support.hadoop import HadoopCluster
from tests.support.spark import spark_submit

pytestmark = pytest.mark.integration

JOB = """
import socket, sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.appName("yarn-smoke").getOrCreate()
sc = spark.sparkContext
executors = sc.parallelize(range(8), 4).map(lambda x: socket.gethostname()).distinct().count()
total = sc.parallelize(range(10000), 4).map(lambda x: x * 3).sum()
spark.range(100).write.mode("overwrite").parquet(sys.argv[1])
print("RESULT", sc.master, sc.applicationId, total, spark.read.parquet(sys.argv[1]).count(), executors)
spark.stop()
"""


def test_spark_submit_on_yarn(hadoop: HadoopCluster, tmp_path: Path) -> None:
    job = tmp_path / "yarn_smoke.py"
    job.write_text(JOB)
    confs = [arg for key, value in hadoop.yarn_submit_conf().items() for arg in ("--conf", f"{key}={value}")]
    done = subprocess.run(
        [str(spark_submit()), "--master", "yarn", "--deploy-mode", "client", *confs, str(job), "/smoke/yarn/out"],
        env={**os.environ, **hadoop.client_env()},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    result = next(line.split() for line in done.stdout.splitlines() if line.startswith("RESULT"))
    master, app_id, total, rows = result[1], result[2], int(result[3]), int(result[4])
    assert master == "yarn" and app_id.startswith("application_")
    assert total == 3 * sum(range(10000)) and rows == 100
    # the ResourceManager ran it, and the output is on HDFS (defaultFS from the conf directory)
    web = hadoop.addresses["resourcemanager_web"]
    with urllib.request.urlopen(f"http://{web}/ws/v1/cluster/apps/{app_id}", timeout=30) as answer:
        app = json.load(answer)["app"]
    assert app["state"] == "FINISHED" and app["finalStatus"] == "SUCCEEDED"
    assert app["applicationType"] == "SPARK"
