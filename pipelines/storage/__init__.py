"""Storage behind the commit protocol and the tools: the one place a path becomes a Storage.

``storage_for(path)`` decides by scheme and by whether there is a Spark session:

- a local path or file:// is local files (the OS: atomic no-replace renames), with or without Spark;
- with a Spark session, any other scheme goes through Hadoop's FileSystem in the driver's JVM (the
  filesystem Spark writes the data with, so the commit protocol sees what the tasks wrote);
- without one, webhdfs:// (and hdfs:// when a WebHDFS address is configured) go through the ``hdfs``
  package, so the tools (status, offsets, report, gc) run without a JVM.
"""

from __future__ import annotations

from typing import Any

from pipelines.errors import StorageError
from pipelines.storage.base import FileStatus, Storage
from pipelines.storage.local import LocalStorage, local_path

__all__ = ["FileStatus", "LocalStorage", "Storage", "local_path", "storage_for"]


def storage_for(path: str, *, spark: Any = None, webhdfs_url: str | None = None, user: str | None = None) -> Storage:
    """The storage for ``path`` (see the module doc). ``webhdfs_url``: the WebHDFS address of
    ``path``'s cluster, for an hdfs:// path without Spark; ``user``: the WebHDFS user."""
    scheme = path.partition("://")[0] if "://" in path else ""
    if scheme in ("", "file"):
        return LocalStorage()
    if spark is not None:
        from pipelines.storage.hadoop import HadoopStorage  # noqa: PLC0415 - the JVM's filesystem, with Spark only

        return HadoopStorage(spark)
    if scheme in ("webhdfs", "hdfs"):
        from pipelines.storage.webhdfs import WebHdfsStorage  # noqa: PLC0415 - optional, network only

        return WebHdfsStorage.for_url(path, webhdfs_url=webhdfs_url, user=user)
    raise StorageError(
        f"{path}: no storage for scheme {scheme!r} without Spark (supported: local paths, file://, hdfs:// with "
        "raw.webhdfs_url, webhdfs://)"
    )
