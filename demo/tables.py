"""What a reader of a published table sees: every row under its root, read with pyarrow through a
``Storage`` (a local directory, or HDFS over WebHDFS), Hive partitions ``k=v`` as string columns,
``_`` and ``.`` directories and files left out (other generations, staging, markers)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.storage import Storage


def published_rows(storage: Storage, root: str) -> list[dict[str, Any]]:
    """Every row of the table published at ``root`` (see the module doc); [] if there is none."""
    rows: list[dict[str, Any]] = []
    base = root.rstrip("/")
    for item in storage.walk_files(base):
        parts = item.path[len(base) + 1 :].split("/")
        if any(part.startswith(("_", ".")) for part in parts) or not item.name.endswith(".parquet"):
            continue
        partitions = dict(part.split("=", 1) for part in parts[:-1] if "=" in part)
        rows += [
            {**row, **partitions} for row in pq.read_table(pa.BufferReader(storage.read_bytes(item.path))).to_pylist()
        ]
    return rows
