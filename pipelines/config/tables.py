"""The spec of where readers find a pipeline's data by name: its tables in a Hive metastore.

Role: typed, frozen config (part of PipelineSpec), checked once when the file loads. What the names
become in the metastore, and when, is pipelines.catalog's business (docs/tables.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipelines.errors import SpecError

METASTORE_KINDS = ("auto", "embedded", "none")
"""The words ``tables.metastore`` may be, besides ``thrift://`` addresses."""

TABLE_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")
"""A database or table name: Hive keeps names in lower case, so we ask for them that way."""

GENERATION_SUFFIX = re.compile(r"__gen\d+$")
"""The suffix of the per-generation tables behind each name (pipelines.catalog.desired)."""


def check_table_name(key: str, name: str) -> None:
    """SpecError naming ``key`` unless ``name`` can be a metastore database or table name."""
    if not TABLE_NAME.match(name):
        raise SpecError(f"{key}: {name!r}: lower-case letters, digits and '_' (not starting with a digit)")
    if GENERATION_SUFFIX.search(name):
        raise SpecError(f"{key}: {name!r} ends like the tables behind each name (__gen<N>): choose another")


@dataclass(frozen=True, slots=True)
class Tables:
    """Where readers find the data by name: the raw layer and each output become tables of a Hive
    metastore (Spark SQL, Hive, Trino and Impala read them as ``<database>.<table>``), brought up to
    date by every run from its committed manifests (docs/tables.md)."""

    metastore: str = "auto"
    """``embedded``: Spark's built-in metastore, a Derby database beside the pipeline's state
    (``<raw>/_pipeline/metastore``; a local raw layer only; one process at a time);
    ``thrift://host:9083`` (several, comma-separated): a Hive metastore service; ``none``: no
    tables; ``auto``: the metastore Spark is configured with (``hive-site.xml`` or
    ``spark.hadoop.hive.metastore.uris``) if any, else ``embedded`` for a local raw layer, else none."""
    database: str = "warehouse"
    """The database the tables are in (created if missing)."""
    raw: str | None = None
    """The raw layer's table name; default: the pipeline's name, lower-cased, with ``.`` and ``-``
    as ``_``, then ``_raw``."""

    def __post_init__(self) -> None:
        if self.metastore not in METASTORE_KINDS:
            for i, address in enumerate(self.metastore.split(",")):
                scheme, sep, rest = address.strip().partition("://")
                host, colon, port = rest.rpartition(":")
                if scheme != "thrift" or not sep or not colon or not host or not port.isdigit():
                    shown = f"metastore[{i}]" if "," in self.metastore else "metastore"
                    raise SpecError(
                        f"{shown}: {address.strip()!r} is neither auto, embedded, none nor a thrift://host:port "
                        "address of a Hive metastore"
                    )
        check_table_name("database", self.database)
        if self.raw is not None:
            check_table_name("raw", self.raw)

    @property
    def thrift_uris(self) -> str | None:
        """The metastore service's addresses as Hive's ``hive.metastore.uris`` takes them."""
        if self.metastore in METASTORE_KINDS:
            return None
        return ",".join(address.strip() for address in self.metastore.split(","))
