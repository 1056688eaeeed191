"""A standalone Hive metastore service (thrift, Hive 2.3 from pyspark's own jars) on 127.0.0.1,
backed by PostgreSQL (tests.support.postgres) or, without one, by an embedded Derby database of
its own. ``uri`` is what ``spark.hadoop.hive.metastore.uris`` (or a pipeline file) names.

The launcher is peers/HiveMetastore.java, run in source-file mode: Hive's own main listens on every
interface. DataNucleus creates the schema's tables on first use, without their foreign keys (Hive's
schematool needs SQL scripts that ship only in Hive's binary release); schema verification is off,
as Spark's embedded metastore has it. The launcher's command and settings are demo.metastore's:
``make demo-hadoop`` starts the same service.
"""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

from demo.metastore import common_settings, derby_settings, launcher_argv
from tests.support.installed import METASTORE_LIBS, java, require
from tests.support.ports import free_port
from tests.support.postgres import PostgresProcess
from tests.support.processes import spawn, stop_group, wait_until


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
        if self.database is None:
            return derby_settings(self.root)
        return {
            **common_settings(self.warehouse),
            "javax.jdo.option.ConnectionURL": self.database.jdbc_url,
            "javax.jdo.option.ConnectionDriverName": "org.postgresql.Driver",
            "javax.jdo.option.ConnectionUserName": self.database.user,
            "javax.jdo.option.ConnectionPassword": "",
        }

    def start(self, timeout: float = 180) -> HiveMetastoreProcess:
        libraries: tuple[Path, ...] = ()
        if self.database is not None:
            libraries = (require(METASTORE_LIBS, "the PostgreSQL JDBC driver (Maven Central)"),)
        argv = launcher_argv(self.root, self.port, self.settings(), libraries, java=str(java()))
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
