"""Storage behind the commit protocol and the tools that run without Spark.

``storage_for(url)`` picks the implementation by scheme: plain paths and file:// are local files;
webhdfs:// (and hdfs:// when a WebHDFS address is configured) go through the ``hdfs`` package.
"""

from __future__ import annotations

from pipelines.errors import StorageError
from pipelines.storage.base import FileStatus, Storage
from pipelines.storage.local import LocalStorage, local_path

__all__ = ["FileStatus", "LocalStorage", "Storage", "local_path", "storage_for"]


def storage_for(url: str, *, webhdfs_url: str | None = None, user: str | None = None) -> Storage:
    """The storage for ``url``: local for paths and file://, WebHDFS for webhdfs:// and hdfs://."""
    scheme = url.partition("://")[0] if "://" in url else ""
    if scheme in ("", "file"):
        return LocalStorage()
    if scheme in ("webhdfs", "hdfs"):
        from pipelines.storage.webhdfs import WebHdfsStorage  # noqa: PLC0415 - optional, network only

        return WebHdfsStorage.for_url(url, webhdfs_url=webhdfs_url, user=user)
    raise StorageError(
        f"{url}: no storage for scheme {scheme!r} (supported: local paths, file://, hdfs://, webhdfs://)"
    )
