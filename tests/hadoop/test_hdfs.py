"""HDFS is real: files written, renamed and read through the ``hdfs`` package over WebHDFS and
through Spark ``hdfs://`` on a MiniDFSCluster; HDFS's own rename rule (never onto an existing path);
the NameNode restarted by the fixture comes back with the data, and the Spark driver's client
reads it again over the connection the restart broke."""

from __future__ import annotations

import getpass
import time
from typing import Any

import pytest
from hdfs import InsecureClient
from hdfs.util import HdfsError

from pipelines.storage.hadoop import HadoopStorage
from tests.support.hadoop import HadoopCluster

pytestmark = pytest.mark.integration


def _client(hadoop: HadoopCluster) -> InsecureClient:
    return InsecureClient(hadoop.webhdfs_url, user=getpass.getuser(), timeout=30)


def test_webhdfs_write_rename_read(hadoop: HadoopCluster) -> None:
    client = _client(hadoop)
    client.makedirs("/smoke/webhdfs")
    client.write("/smoke/webhdfs/a.partial", data=b"hello hdfs\n", overwrite=True)
    client.rename("/smoke/webhdfs/a.partial", "/smoke/webhdfs/a.txt")
    with client.read("/smoke/webhdfs/a.txt") as reader:
        assert reader.read() == b"hello hdfs\n"
    assert client.list("/smoke/webhdfs") == ["a.txt"]
    # unlike rename(2) on a local disk, HDFS refuses to rename onto an existing file
    client.write("/smoke/webhdfs/b.txt", data=b"other", overwrite=True)
    with pytest.raises(HdfsError):
        client.rename("/smoke/webhdfs/b.txt", "/smoke/webhdfs/a.txt")
    with client.read("/smoke/webhdfs/a.txt") as reader:
        assert reader.read() == b"hello hdfs\n"
    status = client.status("/smoke/webhdfs/a.txt")
    assert status["type"] == "FILE" and status["length"] == 11 and status["replication"] == 1


def test_spark_reads_and_writes_hdfs(hadoop: HadoopCluster, spark: Any) -> None:
    target = f"{hadoop.hdfs_url}/smoke/spark/numbers"
    spark.range(0, 1000, numPartitions=3).selectExpr("id", "id * 2 AS twice").write.mode("overwrite").parquet(target)
    back = spark.read.parquet(target)
    assert back.count() == 1000
    assert back.selectExpr("sum(twice)").first()[0] == 999_000
    # the files are on the NameNode, seen from WebHDFS too
    parts = [name for name in _client(hadoop).list("/smoke/spark/numbers") if name.endswith(".parquet")]
    assert len(parts) == 3


def test_namenode_restart_keeps_the_data(hadoop: HadoopCluster, spark: Any) -> None:
    client = _client(hadoop)
    client.write("/smoke/restart/kept.txt", data=b"survives a restart", overwrite=True)
    driver = HadoopStorage(spark)  # the driver's own client, connected before the restart
    assert driver.exists(f"{hadoop.hdfs_url}/smoke/restart/kept.txt")
    hadoop.command("namenode stop")
    with pytest.raises(Exception):  # noqa: B017 - the connection error's type is urllib3's
        InsecureClient(hadoop.webhdfs_url, user=getpass.getuser(), timeout=3).status("/smoke/restart/kept.txt")
    hadoop.command("namenode start")
    # The DataNode's first call to the new NameNode may still go down its dead connection (an
    # EOFException, as any HDFS client sees after a restart): read as a client would, retrying.
    deadline = time.monotonic() + 30
    while True:
        try:
            with _client(hadoop).read("/smoke/restart/kept.txt") as reader:
                assert reader.read() == b"survives a restart"
            break
        except HdfsError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    assert _client(hadoop).list("/smoke/restart") == ["kept.txt"]
    # the driver's client's connection died with the old NameNode: its reads still work (a read
    # that meets the dead connection's EOFException is asked again)
    assert [f.name for f in driver.list(f"{hadoop.hdfs_url}/smoke/restart")] == ["kept.txt"]
    assert driver.read_bytes(f"{hadoop.hdfs_url}/smoke/restart/kept.txt") == b"survives a restart"
