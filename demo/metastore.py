"""A Hive metastore service for ``make demo-hadoop``: the tables of a raw layer on HDFS, by name.

Role: a thrift metastore (Hive 2.3's, from pyspark's own jars) on 127.0.0.1, on an embedded Derby
database of its own; launcher peers/HiveMetastore.java in source-file mode (loopback only). The
test harness (tests/support/metastore.py) starts the same launcher with the same settings, on
PostgreSQL as well, and takes them from here.
"""

from __future__ import annotations

from pathlib import Path
from xml.sax.saxutils import escape

import pyspark

REPO = Path(__file__).resolve().parents[1]
LAUNCHER = REPO / "peers" / "HiveMetastore.java"

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
"""What Spark's launcher passes to its JVMs on Java 17 (Hive and DataNucleus reflect into these)."""


def pyspark_jars() -> Path:
    """The jars directory of the installed pyspark (Hive 2.3's metastore, DataNucleus, Derby, thrift)."""
    return Path(pyspark.__file__).parent / "jars"


def hive_site(settings: dict[str, str]) -> str:
    properties = "".join(
        f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>\n" for k, v in settings.items()
    )
    return f'<?xml version="1.0"?>\n<configuration>\n{properties}</configuration>\n'


def common_settings(warehouse: Path) -> dict[str, str]:
    """The service's settings whatever its database: DataNucleus creates the schema's tables on
    first use, without their foreign keys (Hive's schematool needs SQL scripts that ship only in
    Hive's binary release); schema verification is off, as Spark's embedded metastore has it."""
    return {
        "hive.metastore.warehouse.dir": warehouse.as_uri(),
        "datanucleus.schema.autoCreateTables": "true",
        "datanucleus.schema.autoCreateColumns": "true",
        "hive.metastore.schema.verification": "false",
        "datanucleus.autoStartMechanismMode": "ignored",
        "datanucleus.connectionPoolingType": "DBCP",  # Hive's default pool (BoneCP) is not in pyspark
        # tables are created on first use, on a connection of their own; their foreign keys (an
        # ALTER TABLE) would wait forever for the request's own open transaction on PostgreSQL
        "datanucleus.schema.autoCreateConstraints": "false",
    }


def derby_settings(root: Path) -> dict[str, str]:
    """The service on a Derby database of its own in ``root`` (made on first use: the demo and
    the tests start it in a fresh directory)."""
    return {
        **common_settings(root / "warehouse"),
        "javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={root / 'metastore_db'};create=true",
        "javax.jdo.option.ConnectionDriverName": "org.apache.derby.jdbc.EmbeddedDriver",
    }


def launcher_argv(
    root: Path, port: int, settings: dict[str, str], libraries: tuple[Path, ...] = (), *, java: str = "java"
) -> list[str]:
    """The command that runs the service on 127.0.0.1:``port`` with ``settings`` (a hive-site.xml
    written into ``root/conf``), pyspark's jars and ``libraries`` (directories of jars) on its
    class path; its own files stay in ``root``."""
    conf = root / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    (root / "warehouse").mkdir(parents=True, exist_ok=True)
    (conf / "hive-site.xml").write_text(hive_site(settings))
    classpath = [str(conf), str(pyspark_jars() / "*"), *(f"{library}/*" for library in libraries)]
    return [
        java, "-Xmx512m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", *JAVA_MODULE_OPTIONS,
        f"-Dderby.system.home={root}", f"-Dhive.log.dir={root}",
        "-cp", ":".join(classpath), str(LAUNCHER), str(port),
    ]  # fmt: skip
