"""The Hive metastore peer is real: a standalone thrift service (Hive 2.3 from pyspark's jars) backed
by a real PostgreSQL, reached by Spark in two separate processes: a table and its partitions
created by a Spark program are found by name by Spark's SQL command line (``spark-sql -e``), and
their rows live in PostgreSQL's tables. The service listens on loopback only."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.metastore import HiveMetastoreProcess
from tests.support.postgres import USER

pytestmark = pytest.mark.integration

SESSION = """
import json, sys
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[1]").appName("metastore-smoke")
         .config("spark.ui.enabled", "false")
         .config("spark.sql.catalogImplementation", "hive")
         .config("spark.hadoop.hive.metastore.uris", sys.argv[1])
         .config("spark.sql.warehouse.dir", sys.argv[2])
         .getOrCreate())
"""

WRITER = (
    SESSION
    + """
spark.sql("CREATE DATABASE IF NOT EXISTS smoke")
spark.createDataFrame([(1, "a", "2026-05-04"), (2, "b", "2026-05-05")], "id INT, page STRING, dt STRING") \\
    .write.partitionBy("dt").format("parquet").saveAsTable("smoke.views")
spark.stop()
"""
)

READER = "SELECT id, page, dt FROM smoke.views ORDER BY id; SHOW PARTITIONS smoke.views"
"""Read by name with Spark's own SQL command line, ``spark-sql -e``, as an analyst would."""


@pytest.fixture
def metastore(hive_metastore: HiveMetastoreProcess) -> HiveMetastoreProcess:
    return hive_metastore


def _spark(program: str, metastore: HiveMetastoreProcess) -> str:
    done = subprocess.run(
        [sys.executable, "-c", program, metastore.uri, metastore.warehouse.as_uri()],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout


def _spark_sql(statements: str, metastore: HiveMetastoreProcess, workdir: Path) -> list[str]:
    bin_dir = Path(sys.executable).parent
    done = subprocess.run(
        [str(bin_dir / "spark-sql"), "--master", "local[1]", "--conf", "spark.ui.enabled=false",
         "--conf", f"spark.hadoop.hive.metastore.uris={metastore.uri}",
         "--conf", f"spark.sql.warehouse.dir={metastore.warehouse.as_uri()}", "-S", "-e", statements],
        capture_output=True, text=True, timeout=300, check=False, cwd=workdir,
        env={**os.environ, "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}", "PYSPARK_PYTHON": sys.executable},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    return [line for line in done.stdout.splitlines() if line.strip()]


def test_a_table_written_by_one_spark_is_read_by_name_by_another(
    metastore: HiveMetastoreProcess, tmp_path: Path
) -> None:
    _spark(WRITER, metastore)
    # spark-sql prints each row with its fields tab-separated: the rows, then the partitions
    assert _spark_sql(READER, metastore, tmp_path) == [
        "1\ta\t2026-05-04",
        "2\tb\t2026-05-05",
        "dt=2026-05-04",
        "dt=2026-05-05",
    ]
    database = metastore.database
    assert database is not None
    listed = subprocess.run(
        [str(database.bin / "psql"), "-h", "127.0.0.1", "-p", str(database.port), "-U", USER, "-d", database.database,
         "-At", "-c", 'SELECT "TBL_NAME" FROM "TBLS"'],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert "views" in listed.stdout.split()  # the metastore's rows are PostgreSQL's


def test_the_metastore_listens_on_loopback_only(metastore: HiveMetastoreProcess) -> None:
    assert metastore.process is not None
    listening = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    mine = [line.split()[3] for line in listening.splitlines() if f"pid={metastore.process.pid}," in line]
    assert f"127.0.0.1:{metastore.port}" in mine or f"[::ffff:127.0.0.1]:{metastore.port}" in mine, mine
    assert all("127.0.0.1" in address for address in mine), mine
