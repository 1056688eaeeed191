"""Which metastore a pipeline's tables live in, and the Spark settings that reach it.

Role: the one place that turns ``tables.metastore`` (auto, embedded, none, thrift://…) into Spark
settings for a session about to start, and checks that a session handed in talks to that
metastore. Hive's settings are static in Spark (read once per JVM), so they are chosen before the
session starts: by ``pipelines run``/``rewind`` (pipelines.app.session) and by the spark-submit
job, from the pipeline file.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pipelines.catalog.embedded import DATABASE, derby_url, ensure_whole
from pipelines.config.pipeline import PipelineSpec
from pipelines.errors import CatalogError
from pipelines.ledger import paths

log = logging.getLogger(__name__)

CATALOG_SETTING = "spark.sql.catalogImplementation"
URIS_SETTING = "spark.hadoop.hive.metastore.uris"
DERBY_SETTING = "spark.hadoop.javax.jdo.option.ConnectionURL"


@dataclass(frozen=True, slots=True)
class Metastore:
    """The metastore a pipeline's tables are registered in.

    ``embedded``: a Derby database in ``address`` (a local directory), opened inside the driver's
    JVM; ``thrift``: the service(s) at ``address`` (Hive's ``hive.metastore.uris``); ``spark``:
    whatever Spark's own configuration names (hive-site.xml, --conf)."""

    kind: Literal["embedded", "thrift", "spark"]
    address: str = ""

    def describe(self) -> str:
        if self.kind == "embedded":
            return f"the embedded metastore in {self.address}"
        if self.kind == "thrift":
            return f"the Hive metastore at {self.address}"
        return "the Hive metastore Spark is configured with"

    @property
    def derby_url(self) -> str:
        """Without ``create=true``: the database is made aside before (pipelines.catalog.embedded)."""
        return derby_url(Path(self.address, DATABASE))


def embedded_directory(spec: PipelineSpec) -> str:
    """Where the embedded metastore's Derby database lives: beside the pipeline's state."""
    root = spec.raw.path
    for prefix in ("file://", "file:"):
        if root.startswith(prefix):
            root = root[len(prefix) :]
            break
    return paths.embedded_metastore_dir(root)


SPARK_DEFAULT_WAREHOUSE = "spark-warehouse"
"""Spark's warehouse directory when nothing names one: ``spark-warehouse`` in the working directory."""


def database_location(spec: PipelineSpec, spark: Any) -> str | None:
    """Where a database the pipeline creates goes: None (the session's warehouse directory) when
    the session or the cluster's configuration names one (``spark.sql.warehouse.dir``, or Hive's
    ``hive.metastore.warehouse.dir`` in hive-site.xml); else beside the pipeline's state
    (pipelines.ledger.paths.database_dir), never Spark's default ``spark-warehouse/`` in whatever directory
    the command ran in. Every table is external, so nothing is written there but the directory."""
    warehouse = str(spark.conf.get("spark.sql.warehouse.dir", "") or "").rstrip("/")
    default = Path.cwd() / SPARK_DEFAULT_WAREHOUSE
    if warehouse and warehouse not in (f"file:{default}", default.as_uri()):
        return None
    root = spec.raw.path.rstrip("/")
    if "://" not in root and not root.startswith("file:"):
        root = f"file:{Path(root).absolute()}"  # as pipelines.catalog.desired.absolute_location makes it
    return paths.database_dir(root, spec.tables.database)


def _hive_site_configured(conf: Mapping[str, str]) -> bool:
    """Whether the session about to start will find a Hive metastore of its own configuration:
    named in its settings, or a hive-site.xml where Spark reads its configuration."""
    if conf.get(URIS_SETTING) or conf.get(CATALOG_SETTING) == "hive":
        return True
    directories = [os.environ.get(name) for name in ("SPARK_CONF_DIR", "HIVE_CONF_DIR", "HADOOP_CONF_DIR")]
    if os.environ.get("SPARK_HOME"):
        directories.append(f"{os.environ['SPARK_HOME']}/conf")
    return any(d and Path(d, "hive-site.xml").is_file() for d in directories)


def _same_derby(given: str, ours: str) -> bool:
    """Whether the Derby URL ``given`` (a session's) names our database: with or without the
    ``;create=true`` earlier versions put in it (and told users to set)."""
    return given.removesuffix(";create=true") == ours


def metastore_for(spec: PipelineSpec, conf: Mapping[str, str]) -> Metastore | None:
    """The metastore of ``spec``'s tables for a session about to start with the settings ``conf``
    (its --conf and spark-defaults); None: no tables (``none``, or ``auto`` with nothing to use)."""
    tables = spec.tables
    if tables.metastore == "none":
        return None
    if tables.thrift_uris is not None:
        return Metastore("thrift", tables.thrift_uris)
    if tables.metastore == "embedded":
        return Metastore("embedded", embedded_directory(spec))
    if _hive_site_configured(conf):
        return Metastore("spark")
    if spec.raw.is_local:
        return Metastore("embedded", embedded_directory(spec))
    return None


def session_settings(metastore: Metastore | None) -> dict[str, str]:
    """The Spark settings a session needs to reach ``metastore`` (none for None)."""
    if metastore is None:
        return {}
    settings = {CATALOG_SETTING: "hive"}
    if metastore.kind == "thrift":
        settings[URIS_SETTING] = metastore.address
    elif metastore.kind == "embedded":
        settings.update(
            {
                DERBY_SETTING: metastore.derby_url,
                "spark.hadoop.javax.jdo.option.ConnectionDriverName": "org.apache.derby.jdbc.EmbeddedDriver",
                # the schema is created on first use, as Spark's own embedded metastore does
                "spark.hadoop.datanucleus.schema.autoCreateAll": "true",
                "spark.hadoop.hive.metastore.schema.verification": "false",
                # where databases created here would keep managed tables (ours are all external)
                "spark.sql.warehouse.dir": Path(metastore.address, "warehouse").as_uri(),
            }
        )
    return settings


def prepare(spark: Any, metastore: Metastore | None, *, check_opens: bool = False) -> None:
    """Before the session's first catalog call: Derby's log goes beside its database, not into the
    working directory (Derby reads the property when it boots); the embedded database is whole
    (pipelines.catalog.embedded; ``check_opens``, for ``pipelines repair``: it opens, too); Hive's
    start-up warnings about its own settings, the same every run and nothing a user can act on,
    are not printed (its errors are). Then Hive's client is started on a thread of its own (see
    ``_start_client``)."""
    if metastore is None:
        return
    jvm = spark._jvm
    if metastore.kind == "embedded":
        Path(metastore.address).mkdir(parents=True, exist_ok=True)
        jvm.java.lang.System.setProperty("derby.stream.error.file", f"{metastore.address}/derby.log")
        if _same_derby(spark.sparkContext.getConf().get(DERBY_SETTING, ""), metastore.derby_url):  # not one of its own
            ensure_whole(jvm, metastore.address, check_opens=check_opens)
    for logger in ("org.apache.hadoop.hive", "hive"):
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(logger, jvm.org.apache.logging.log4j.Level.ERROR)
    threading.Thread(target=_start_client, args=(spark, metastore), name="metastore-client", daemon=True).start()


def _start_client(spark: Any, metastore: Metastore) -> None:
    """Start the session's Hive client now, beside the work a run does before its first catalog
    call (the load): Hive sets itself up, then boots Derby or connects to the service, about 5 s
    that every run and replay waited for at its first publish or sync. Spark makes the client
    once, under a lock, so a catalog call made meanwhile waits for this one instead of making
    another. A failure here is only logged: the first real call meets it again and reports it."""
    try:
        spark._jsparkSession.sharedState().externalCatalog().databaseExists("default")
    except Exception as exc:  # a metastore down, or the session stopped meanwhile
        log.debug("starting the client of %s: %s", metastore.describe(), exc)


def attach(spec: PipelineSpec, spark: Any) -> Metastore | None:
    """The metastore ``spec``'s tables go to through ``spark``, checked against the session's
    settings; None if the pipeline has no tables, or if it leaves the metastore to ``auto`` and
    the session has no Hive catalog (a session the caller made without one). CatalogError if the
    pipeline names a metastore the session was not started for."""
    if spec.tables.metastore == "none":
        return None
    conf = spark.sparkContext.getConf()
    hive = conf.get(CATALOG_SETTING, "in-memory") == "hive"
    wanted = metastore_for(spec, {CATALOG_SETTING: "hive"} if hive else {})
    if not hive:
        if spec.tables.metastore == "auto":
            return None
        raise CatalogError(
            f"tables.metastore is {spec.tables.metastore}, but this Spark session has no Hive catalog: start it "
            f"with {', '.join(f'{k}={v}' for k, v in session_settings(wanted).items())} "
            "(`pipelines run` and the spark-submit job do)"
        )
    if spec.tables.metastore == "auto":  # whichever the session was started with
        if spec.raw.is_local and _same_derby(
            conf.get(DERBY_SETTING, ""), Metastore("embedded", embedded_directory(spec)).derby_url
        ):
            return Metastore("embedded", embedded_directory(spec))
        uris = conf.get(URIS_SETTING, "")
        return Metastore("thrift", uris) if uris else Metastore("spark")
    assert wanted is not None
    if wanted.kind == "thrift" and conf.get(URIS_SETTING, "") != wanted.address:
        raise CatalogError(
            f"tables.metastore is {wanted.address}, but this Spark session's metastore is "
            f"{conf.get(URIS_SETTING, '(its embedded one)')}: start it with {URIS_SETTING}={wanted.address}"
        )
    if wanted.kind == "embedded" and not _same_derby(conf.get(DERBY_SETTING, ""), wanted.derby_url):
        raise CatalogError(
            f"this Spark session was not started for {wanted.describe()}: start it with "
            f"{DERBY_SETTING}={wanted.derby_url}"
        )
    return wanted
