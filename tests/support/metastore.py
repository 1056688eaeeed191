"""A standalone Hive metastore service (thrift, Hive 2.3 from pyspark's own jars) on 127.0.0.1,
backed by PostgreSQL (tests.support.postgres) or, without one, by an embedded Derby database of
its own. ``uri`` is what ``spark.hadoop.hive.metastore.uris`` (or a pipeline file) names.

The launcher is peers/HiveMetastore.java, run in source-file mode: Hive's own main listens on every
interface. DataNucleus creates the schema's tables on first use, without their foreign keys (Hive's
schematool needs SQL scripts that ship only in Hive's binary release; see ``settings`` for why no
foreign keys); schema verification is off, as Spark's embedded metastore has it.
"""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path
from xml.sax.saxutils import escape

from tests.support.installed import METASTORE_LIBS, REPO, java, require
from tests.support.ports import free_port
from tests.support.postgres import USER, PostgresProcess
from tests.support.processes import spawn, stop_group, wait_until

# What Spark's launcher passes to its JVMs on Java 17 (Hive and DataNucleus reflect into these)
JAVA_MODULE_OPTIONS = (
    "-XX:+IgnoreUnrecognizedVMOptions",
    *(
        f"--add-opens=java.base/{package}=ALL-UNNAMED"
        for package in (
            "java.lang", "java.lang.invoke", "java.lang.reflect", "java.io", "java.net", "java.nio", "java.util",
            "java.util.concurrent", "java.util.concurrent.atomic", "jdk.internal.ref", "sun.nio.ch", "sun.nio.cs",
            "sun.security.action", "sun.util.calendar",
        )
    ),
)  # fmt: skip


def pyspark_jars() -> Path:
    """The jars directory of the installed pyspark (Hive 2.3's metastore, DataNucleus, Derby, thrift)."""
    import pyspark  # only where a metastore is started

    return Path(pyspark.__file__).parent / "jars"


def hive_site(settings: dict[str, str]) -> str:
    properties = "".join(
        f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>\n" for k, v in settings.items()
    )
    return f'<?xml version="1.0"?>\n<configuration>\n{properties}</configuration>\n'


class HiveMetastoreProcess:
    """One metastore service. ``warehouse``: where tables created without a location go."""

    def __init__(self, root: Path, database: PostgresProcess | None = None) -> None:
        self.root = root
        self.database = database
        self.port = free_port()
        self.warehouse = root / "warehouse"
        self.conf = root / "conf"
        self.log = root / "metastore.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def uri(self) -> str:
        return f"thrift://127.0.0.1:{self.port}"

    def settings(self) -> dict[str, str]:
        common = {
            "hive.metastore.warehouse.dir": self.warehouse.as_uri(),
            "datanucleus.schema.autoCreateTables": "true",
            "datanucleus.schema.autoCreateColumns": "true",
            "hive.metastore.schema.verification": "false",
            "datanucleus.autoStartMechanismMode": "ignored",
            "datanucleus.connectionPoolingType": "DBCP",  # Hive's default pool (BoneCP) is not in pyspark
            # tables are created on first use, on a connection of their own; their foreign keys (an
            # ALTER TABLE) would wait forever for the request's own open transaction on PostgreSQL
            "datanucleus.schema.autoCreateConstraints": "false",
        }
        if self.database is None:
            return {
                **common,
                "javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={self.root / 'metastore_db'};create=true",
                "javax.jdo.option.ConnectionDriverName": "org.apache.derby.jdbc.EmbeddedDriver",
            }
        return {
            **common,
            "javax.jdo.option.ConnectionURL": self.database.jdbc_url,
            "javax.jdo.option.ConnectionDriverName": "org.postgresql.Driver",
            "javax.jdo.option.ConnectionUserName": USER,
            "javax.jdo.option.ConnectionPassword": "",
        }

    def start(self, timeout: float = 180) -> HiveMetastoreProcess:
        self.conf.mkdir(parents=True, exist_ok=True)
        self.warehouse.mkdir(parents=True, exist_ok=True)
        (self.conf / "hive-site.xml").write_text(hive_site(self.settings()))
        libraries = [str(pyspark_jars() / "*")]
        if self.database is not None:
            libraries.append(str(require(METASTORE_LIBS, "the PostgreSQL JDBC driver (Maven Central)") / "*"))
        argv = [
            str(java()), "-Xmx512m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", *JAVA_MODULE_OPTIONS,
            f"-Dderby.system.home={self.root}", f"-Dhive.log.dir={self.root}",
            "-cp", ":".join([str(self.conf), *libraries]),
            str(REPO / "peers" / "HiveMetastore.java"), str(self.port),
        ]  # fmt: skip
        self.process = spawn(argv, log=self.log, cwd=self.root)
        wait_until("the Hive metastore", self._listening, process=self.process, log=self.log, timeout=timeout)
        return self

    def _listening(self) -> bool | None:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True
        except OSError:
            return None

    def stop(self) -> None:
        stop_group(self.process, grace=10)

    def __enter__(self) -> HiveMetastoreProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
