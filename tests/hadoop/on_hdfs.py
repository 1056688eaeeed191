"""Pipelines moved onto the mini cluster's HDFS, and what the tests read back from it.

A pipeline file written by the local helpers (tests.pipelines.harness, flow_harness) is rewritten so
that its raw layer and every output live under one HDFS directory of the test's own, with
``raw.webhdfs_url`` set: Spark reaches them as ``hdfs://`` (Hadoop RPC, driver and executors), the
tools without Spark through WebHDFS. Everything read back here goes through WebHDFS and pyarrow,
never through the code under test's own Spark session.
"""

from __future__ import annotations

import getpass
import itertools
from pathlib import Path

import yaml

from pipelines.storage.webhdfs import WebHdfsStorage
from tests.support.hadoop import HadoopCluster

_directories = itertools.count(1)


def hdfs_directory(hadoop: HadoopCluster, name: str) -> str:
    """A fresh ``hdfs://…/tests/<n>-<name>`` URL (not created): one per test, never reused."""
    return f"{hadoop.hdfs_url}/tests/{next(_directories):03d}-{name}"


def move_to_hdfs(spec_path: Path, hadoop: HadoopCluster, root: str) -> Path:
    """Rewrite the pipeline file at ``spec_path`` in place: raw layer at ``root/raw``, each output at
    ``root/warehouse/<name>``, ``raw.webhdfs_url`` the NameNode's WebHDFS address."""
    data = yaml.safe_load(spec_path.read_text())
    data["raw"]["path"] = f"{root}/raw"
    data["raw"]["webhdfs_url"] = hadoop.webhdfs_url
    for output in data.get("outputs", []):
        output["path"] = f"{root}/warehouse/{output['name']}"
    spec_path.write_text(yaml.safe_dump(data, sort_keys=False))
    return spec_path


def webhdfs(hadoop: HadoopCluster) -> WebHdfsStorage:
    """A Storage for the cluster's hdfs:// paths, over WebHDFS (as the tools reach it)."""
    return WebHdfsStorage.for_url(hadoop.hdfs_url, webhdfs_url=hadoop.webhdfs_url, user=getpass.getuser())
