"""The Hive metastore peer is real: a standalone thrift service (Hive 2.3 from pyspark's jars) backed
by a real PostgreSQL, reached by Spark SQL in two separate processes: a table and its partitions
created by one are found by name by the other, and their rows live in PostgreSQL's tables. The
service listens on loopback only."""

from __future__ import annotations

import json
import subprocess
import sys

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

READER = (
    SESSION
    + """
rows = spark.sql("SELECT id, page, dt FROM smoke.views ORDER BY id").collect()
partitions = [r[0] for r in spark.sql("SHOW PARTITIONS smoke.views").collect()]
print(json.dumps({"rows": [list(r) for r in rows], "partitions": partitions}))
spark.stop()
"""
)


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


def test_a_table_written_by_one_spark_is_read_by_name_by_another(metastore: HiveMetastoreProcess) -> None:
    _spark(WRITER, metastore)
    found = json.loads(_spark(READER, metastore).strip().splitlines()[-1])
    assert found == {
        "rows": [[1, "a", "2026-05-04"], [2, "b", "2026-05-05"]],
        "partitions": ["dt=2026-05-04", "dt=2026-05-05"],
    }
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
