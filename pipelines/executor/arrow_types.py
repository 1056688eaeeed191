"""The field types a pipeline's decoder schema may name, as Arrow and as Spark types.

Role: the one table of ``decoder.schema`` kinds (pipelines.config.pipeline) and what each becomes
in the raw layer's Parquet files (Arrow) and in the tables over them (Spark SQL). Every payload
decoder and the row schema build their columns from it, so a kind means the same everywhere.
"""

from __future__ import annotations

import pyarrow as pa

ARROW_TYPES: dict[str, pa.DataType] = {
    "string": pa.string(),
    "long": pa.int64(),
    "int": pa.int32(),
    "double": pa.float64(),
    "float": pa.float32(),
    "boolean": pa.bool_(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "binary": pa.binary(),
}

SPARK_TYPES = {
    "string": "STRING",
    "long": "BIGINT",
    "int": "INT",
    "double": "DOUBLE",
    "float": "FLOAT",
    "boolean": "BOOLEAN",
    "timestamp": "TIMESTAMP",
    "binary": "BINARY",
}

TIMESTAMP = pa.timestamp("us", tz="UTC")
