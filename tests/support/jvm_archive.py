"""A class-data archive for the Spark driver JVMs the tests start (the session's, every
``pipelines run``, spark-submit and Airflow task): made once, reused by every later start.

Role: a Spark driver spends most of a short test's start-up loading and verifying some 8,000 classes
from the jars. Java's dynamic class-data sharing (``-XX:ArchiveClassesAtExit`` once, then
``-XX:SharedArchiveFile``) maps them already parsed and verified: a driver that counts ten rows starts
in about 8 s instead of 12, on a third less CPU, which the other test worker gets.

Invariants: the archive's name is a digest of the training, the JVM binary and Spark's jars (names, sizes,
times), so a new JDK or pyspark makes a new archive instead of one the JVM would refuse; it appears
by one checked rename, whole or not at all. A JVM whose class path does not start with the one the
archive was made with (spark-submit ``--driver-class-path``) ignores it, silently (the flags turn the
CDS log off: its warnings go to stdout, where tests read a command's output), and starts as before.
The tests only: the benchmarks and the product's own commands set nothing.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pyspark

from tests.support.installed import REPO

ARCHIVE_DIR = REPO / ".cache" / "jvm"
QUIET_CDS = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")

# The work the archive is trained on: what the tests' drivers do (DataFrames from Python rows,
# Parquet written and read, SQL with a window, a Python UDF, a Python data source: the load's), in
# a session with Hive's metastore (Derby in the work directory), as every pipeline's session has:
# tables by name, partitions added and listed, a view. Hive's classes in the archive take about
# 2 s off each of the many such starts (`pipelines sql`: 10 s instead of 12, measured here).
_TRAINING = """
import sys
from pyspark.sql import SparkSession, functions as F
from pyspark.sql.datasource import DataSource, DataSourceReader
work = sys.argv[1]
spark = (SparkSession.builder.appName("class-archive").enableHiveSupport()
         .config("spark.sql.warehouse.dir", f"{work}/warehouse")
         .config("spark.hadoop.javax.jdo.option.ConnectionURL",
                 f"jdbc:derby:;databaseName={work}/metastore_db;create=true")
         .getOrCreate())
rows = spark.createDataFrame([(i % 7, str(i), float(i)) for i in range(1000)], "k int, s string, x double")
rows.write.mode("overwrite").partitionBy("k").parquet(f"{work}/parquet")
back = spark.read.parquet(f"{work}/parquet")
back.createOrReplaceTempView("t")
spark.sql("select k, count(*) n, max(x) over (partition by k) m from t group by k, x").collect()
back.select(F.udf(lambda s: s + "!", "string")("s")).count()
spark.read.json(spark.sparkContext.parallelize(['{"a": 1}'])).collect()

class Reader(DataSourceReader):
    def read(self, partition):
        yield (1, "a")

class Source(DataSource):
    @classmethod
    def name(cls):
        return "training"
    def schema(self):
        return "n int, s string"
    def reader(self, schema):
        return Reader()

spark.dataSource.register(Source)
spark.read.format("training").load().collect()
spark.sql("create database if not exists d")
spark.sql(f"create table d.t (s string, x double) partitioned by (k int) stored as parquet location '{work}/parquet'")
spark.sql("msck repair table d.t")
spark.sql(f"alter table d.t add if not exists partition (k=99) location '{work}/parquet/k=99'")
spark.sql("create or replace view d.v as select * from d.t")
spark.table("d.v").count()
spark.catalog.listTables("d")
spark.sql("show partitions d.t").collect()
spark.stop()
"""


def _java() -> Path:
    home = os.environ.get("JAVA_HOME")
    found = Path(home) / "bin" / "java" if home else Path(shutil.which("java") or "java")
    return found.resolve()


def archive_path() -> Path:
    """Where the archive for this JVM and this pyspark is (it may not exist yet)."""
    digest = hashlib.sha256(_TRAINING.encode())  # new training, new archive
    jars = Path(pyspark.__file__).resolve().parent / "jars"
    for path in (_java(), *sorted(jars.glob("*.jar"))):
        with_stat = path.stat() if path.exists() else None
        digest.update(f"{path}:{with_stat and with_stat.st_size}:{with_stat and with_stat.st_mtime_ns}\n".encode())
    return ARCHIVE_DIR / f"spark-driver-{digest.hexdigest()[:16]}.jsa"


def enabled() -> bool:
    """Unless TEST_CLASS_ARCHIVE=0 (to compare, or to rule the archive out)."""
    return os.environ.get("TEST_CLASS_ARCHIVE", "1") != "0"


def driver_flags() -> tuple[str, ...]:
    """The JVM flags that use the archive (harmless while it does not exist); none when disabled."""
    return (f"-XX:SharedArchiveFile={archive_path()}", *QUIET_CDS) if enabled() else ()


def ensure_archive(timeout: float = 300) -> str:
    """Make the archive unless it exists; returns one line saying what was done (for the run's
    header). A failure to make it is said, not raised: the tests run as before without it."""
    target = archive_path()
    if not enabled():
        return "Spark driver class archive: not used (TEST_CLASS_ARCHIVE=0)"
    if target.exists():
        return f"Spark driver class archive: {target.name}"
    ARCHIVE_DIR.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    work = ARCHIVE_DIR / f"training-{os.getpid()}"
    script = work / "train.py"
    work.mkdir(exist_ok=True)
    script.write_text(_TRAINING)
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_SUBMIT_OPTS": f"-XX:ArchiveClassesAtExit={partial} -Xlog:cds=off -Xlog:cds+dynamic=off",
    }
    spark_submit = Path(sys.executable).with_name("spark-submit")
    started = time.monotonic()
    try:
        done = subprocess.run(
            [str(spark_submit), "--master", "local[1]", "--conf", "spark.ui.enabled=false", str(script), str(work)],
            env=env, cwd=work, capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
        if done.returncode != 0 or not partial.exists():
            tail = (done.stderr or done.stdout)[-400:].strip().replace("\n", " | ")
            return f"Spark driver class archive NOT made (exit {done.returncode}): {tail}"
        partial.replace(target)
        for stale in ARCHIVE_DIR.glob("spark-driver-*.jsa"):  # made for another JDK or pyspark
            if stale != target:
                stale.unlink(missing_ok=True)
        if not target.exists():
            return f"Spark driver class archive NOT made: the rename to {target} did not take"
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"Spark driver class archive NOT made: {exc}"
    finally:
        partial.unlink(missing_ok=True)
        shutil.rmtree(work, ignore_errors=True)
    return f"Spark driver class archive made in {time.monotonic() - started:.0f} s: {target}"
