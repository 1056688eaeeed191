"""The metastore as Spark's catalog reaches it: read what a table holds, make one change.

Role: every metastore call of pipelines goes through ``SparkMetastore``, whichever metastore the
session talks to (the embedded Derby or a thrift service). Reads use Spark's external catalog
directly (a few calls for a table, one for all of its partitions, read from the text Spark gives
them); changes are SQL statements, each one metastore change: ``ALTER VIEW … AS`` is one
alter_table (``CREATE OR REPLACE VIEW`` would drop and create, leaving a moment with no view), and
``ALTER TABLE … ADD PARTITION`` with many partitions is one add_partitions call (the batch size is
raised to hold them all). Errors name the metastore and the statement.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pipelines.catalog.connection import Metastore
from pipelines.catalog.desired import literal, quoted
from pipelines.errors import CatalogError
from pipelines.layout import Partition
from pipelines.progress import counted


@dataclass(frozen=True, slots=True)
class Registered:
    """A table or view as the metastore holds it."""

    name: str
    kind: str
    """EXTERNAL, MANAGED or VIEW."""
    location: str
    columns: tuple[str, ...]
    """Data columns, lower-cased, without the partition columns."""
    partition_columns: tuple[str, ...]
    view_text: str | None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    for raw_line in text.splitlines():
        line = raw_line.strip()
        if line and not line.startswith(("at ", "Traceback", "File ")):
            return line[:400]
    return type(exc).__name__


def same_location(a: str, b: str) -> bool:
    """Whether two locations name the same directory (file:/x, file:///x and /x are one)."""

    def norm(path: str) -> str:
        for prefix in ("file://", "file:"):
            if path.startswith(prefix):
                path = path[len(prefix) :]
                break
        return path.rstrip("/")

    return norm(a) == norm(b)


class SparkMetastore:
    """The metastore ``metastore`` through the Hive catalog of the session ``spark``."""

    def __init__(self, spark: Any, metastore: Metastore) -> None:
        self.spark = spark
        self.metastore = metastore
        self._jvm = spark._jvm
        self._converters = self._jvm.scala.jdk.javaapi.CollectionConverters

    def _fail(self, what: str, exc: BaseException) -> CatalogError:
        cause = _first_line(exc)
        if "Another instance of Derby" in str(exc) or "XSDB6" in str(exc):
            cause = "another process has it open (a run of this pipeline?); try again when it ends"
        return CatalogError(f"{self.metastore.describe()}: {what}: {cause}")

    def _catalog(self) -> Any:
        try:
            return self.spark._jsparkSession.sessionState().catalog().externalCatalog()
        except Exception as exc:
            raise self._fail("cannot be reached", exc) from exc

    def sql(self, statement: str) -> list[Any]:
        try:
            return list(self.spark.sql(statement).collect())
        except Exception as exc:  # Spark's analysis errors and the metastore's, through py4j
            raise self._fail(statement if len(statement) < 300 else statement[:300] + " …", exc) from exc

    # ------------------------------------------------------------------ reading

    def database_exists(self, database: str) -> bool:
        try:
            return bool(self._catalog().databaseExists(database))
        except CatalogError:
            raise
        except Exception as exc:
            raise self._fail(f"looking up database {database}", exc) from exc

    def tables(self, database: str) -> list[str]:
        try:
            return sorted(str(name) for name in self._converters.asJava(self._catalog().listTables(database)))
        except CatalogError:
            raise
        except Exception as exc:
            raise self._fail(f"listing the tables of {database}", exc) from exc

    def table(self, database: str, name: str) -> Registered | None:
        """The table or view ``database.name``, or None if there is none."""
        try:
            catalog = self._catalog()
            if not catalog.tableExists(database, name):
                return None
            found = catalog.getTable(database, name)
            partition_columns = tuple(str(c).lower() for c in self._converters.asJava(found.partitionColumnNames()))
            fields = json.loads(found.schema().json())["fields"]
            text = found.viewText()
        except CatalogError:
            raise
        except Exception as exc:
            raise self._fail(f"reading {database}.{name}", exc) from exc
        location = found.storage().locationUri()
        return Registered(
            name=name,
            kind=str(found.tableType().name()),
            location=str(location.get().toString()) if location.isDefined() else "",
            columns=tuple(f["name"].lower() for f in fields if f["name"].lower() not in partition_columns),
            partition_columns=partition_columns,
            view_text=str(text.get()) if text.isDefined() else None,
        )

    def partitions(self, database: str, table: str, columns: tuple[str, ...]) -> dict[Partition, str]:
        """Partition values (in ``columns``' order) → location, of ``database.table``."""
        try:
            return dict(self._read(self._listed(database, table), columns))
        except CatalogError:
            raise
        except Exception as exc:
            raise self._fail(f"listing the partitions of {database}.{table}", exc) from exc

    def _listed(self, database: str, table: str) -> Any:
        none = getattr(self._jvm.scala, "None$").__getattr__("MODULE$")
        return self._catalog().listPartitions(database, table, none)

    def _read(self, listed: Any, columns: tuple[str, ...]) -> list[tuple[Partition, str]]:
        read = _read_listing(listed, columns)
        return self._read_one_by_one(listed, columns) if read is None else read

    def _read_one_by_one(self, listed: Any, columns: tuple[str, ...]) -> list[tuple[Partition, str]]:
        """``_read_listing``'s answer the slow way (several calls per partition), for a listing
        whose text it could not read."""
        out = []
        for partition in self._converters.asJava(listed):
            spec = dict(self._converters.asJava(partition.spec()))
            out.append((tuple(str(spec[c]) for c in columns), str(partition.location().toString())))
        return out

    # ------------------------------------------------------------------ changing

    def add_partitions(self, qualified: str, columns: tuple[str, ...], partitions: dict[Partition, str]) -> None:
        """All of ``partitions`` in one metastore call."""
        if not partitions:
            return
        self.spark.conf.set("spark.sql.addPartitionInBatch.size", str(max(100, len(partitions))))
        specs = " ".join(
            f"PARTITION ({_spec(columns, values)}) LOCATION {literal(location)}"
            for values, location in sorted(partitions.items())
        )
        self.sql(f"ALTER TABLE {qualified} ADD IF NOT EXISTS {specs}")

    def drop_partitions(self, qualified: str, columns: tuple[str, ...], partitions: list[Partition]) -> None:
        if partitions:
            specs = ", ".join(f"PARTITION ({_spec(columns, values)})" for values in sorted(partitions))
            self.sql(f"ALTER TABLE {qualified} DROP IF EXISTS {specs}")

    def relocate_partitions(
        self, database: str, table: str, columns: tuple[str, ...], moves: dict[Partition, str]
    ) -> None:
        """Give every partition of ``moves`` its new location in one metastore call (Hive's
        alter_partitions, one transaction): readers see all of them moved, or none. SQL has one
        statement per partition, so this goes through Spark's external catalog."""
        if not moves:
            return
        jvm = self._jvm
        try:
            listed = self._listed(database, table)
            moved = jvm.java.util.ArrayList()
            for index, (values, _) in enumerate(self._read(listed, columns)):
                where = moves.get(values)
                if where is None:
                    continue
                partition = listed.apply(index)
                uri = jvm.scala.Option.apply(jvm.org.apache.hadoop.fs.Path(where).toUri())
                relocated = _copy_with(partition.storage(), 0, uri)  # locationUri is the first field
                moved.add(_copy_with(partition, 1, relocated))  # and storage the partition's second
            self._catalog().alterPartitions(database, table, self._converters.asScala(moved).toSeq())
        except CatalogError:
            raise
        except Exception as exc:
            raise self._fail(f"moving {counted(len(moves), 'partition')} of {database}.{table}", exc) from exc


_SEPARATOR = "\u0000"
_VALUES, _LOCATION, _LINE_END = "\n\tPartition Values: [", "]\n\tLocation: ", "\n\t"


def _read_listing(listed: Any, columns: tuple[str, ...]) -> list[tuple[Partition, str]] | None:
    """Every partition of ``listed`` (Spark's listing: a Scala Seq of CatalogTablePartition) as
    (values in ``columns``' order, location), in its order, from one call: the text Spark gives
    each partition (its ``toString``), ``Partition Values: [c1=v1, c2=v2]`` then ``Location: …``.
    Reading them field by field through py4j took a dozen calls per partition (1.5 s for 25, and
    minutes for a year of hours). None if the text is not as expected (another Spark's format, or
    a value that holds the separators), so the caller reads them one by one."""
    size = int(listed.size())
    if size == 0:
        return []
    texts = str(listed.mkString(_SEPARATOR)).split(_SEPARATOR)
    if len(texts) != size:
        return None
    out = []
    for text in texts:
        start, middle = text.find(_VALUES), text.find(_LOCATION)
        if start < 0 or middle < start:
            return None
        values = _split_values(text[start + len(_VALUES) : middle], columns)
        if values is None:
            return None
        location = text[middle + len(_LOCATION) :]
        end = location.find(_LINE_END)
        out.append((values, location if end < 0 else location[:end]))
    return out


def _split_values(spec: str, columns: tuple[str, ...]) -> Partition | None:
    """``c1=v1, c2=v2`` → (v1, v2), the columns known and in order; None if it does not read so."""
    values = []
    rest = spec
    for i, column in enumerate(columns):
        if not rest.startswith(f"{column}="):
            return None
        rest = rest[len(column) + 1 :]
        if i + 1 < len(columns):
            cut = rest.find(f", {columns[i + 1]}=")
            if cut < 0 or rest.find(f", {columns[i + 1]}=", cut + 1) >= 0:  # absent, or ambiguous
                return None
            values.append(rest[:cut])
            rest = rest[cut + 2 :]
        else:
            values.append(rest)
    return tuple(values)


def _copy_with(case: Any, index: int, value: Any) -> Any:
    """A copy of the Scala case class instance ``case`` with field ``index`` (from 0) set to
    ``value``: its ``copy`` called with every other field as it is (``copy$default$N`` is field N),
    so a field Spark adds in a later version is kept without naming it here."""
    fields = [getattr(case, f"copy$default${n}")() for n in range(1, case.productArity() + 1)]
    fields[index] = value
    return case.copy(*fields)


def _spec(columns: tuple[str, ...], values: Partition) -> str:
    return ", ".join(f"{quoted(c)} = {literal(v)}" for c, v in zip(columns, values, strict=True))
