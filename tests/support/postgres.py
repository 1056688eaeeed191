"""A throwaway PostgreSQL server (Debian's package) on 127.0.0.1: the Hive metastore's database, and
the source database of change data capture (tests.support.debezium: started with LOGICAL_DECODING).

PostgreSQL refuses to run as root; when the tests run as root, the server runs as the ``postgres``
user that Debian's package creates, in a directory of its own under /tmp (pytest's temporary
directories are private to the user who runs the tests). Trust authentication on loopback only
(replication connections included): the server holds nothing but a test's data and lives as long as
the test or the session. Statements and queries go through Debian's ``psql`` (no Python driver).
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

from tests.support.installed import MissingPeer
from tests.support.ports import free_port
from tests.support.processes import PeerError, spawn, stop_group, wait_until

POSTGRES_BINARIES = Path("/usr/lib/postgresql")
USER = "hive"
"""The database role the metastore connects as (created by initdb, trusted on loopback)."""

LOGICAL_DECODING: dict[str, object] = {
    "wal_level": "logical",
    "max_replication_slots": 4,
    "max_wal_senders": 4,
    # the WAL writer's round (default 200 ms): with synchronous_commit off, a commit reaches the WAL
    # (and a logical decoder such as Debezium's) up to that late
    "wal_writer_delay": "10ms",
}
"""The server settings of a change-data-capture source: logical decoding (pgoutput) and a few
replication slots and WAL senders (Debian's defaults are 10 of each; a test's server needs one)."""


def postgres_bin() -> Path:
    """The newest installed server's bin directory (Debian keeps initdb and postgres off the PATH)."""
    found = sorted(POSTGRES_BINARIES.glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]))
    if not found:
        raise MissingPeer(f"PostgreSQL is not installed (no {POSTGRES_BINARIES}/*/bin/initdb): run `make install`")
    return found[-1].parent


class PostgresProcess:
    """One PostgreSQL server with one database, ``database``, owned by the superuser ``user``
    (initdb's); ``settings`` are server settings (``-c name=value``) beside the defaults below.
    ``jdbc_url`` reaches it; ``sql`` and ``query`` run statements."""

    def __init__(
        self, database: str = "metastore", *, user: str = USER, settings: Mapping[str, object] | None = None
    ) -> None:
        self.bin = postgres_bin()
        self.database = database
        self.user = user
        self.settings = dict(settings or {})
        self.host = "127.0.0.1"
        self.port = free_port()
        self.as_root = os.geteuid() == 0
        self.root = Path(tempfile.mkdtemp(prefix="pipelines-postgres-"))
        if self.as_root:
            owner = pwd.getpwnam("postgres")
            os.chown(self.root, owner.pw_uid, owner.pw_gid)
        self.data = self.root / "data"
        self.log = self.root / "postgres.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def jdbc_url(self) -> str:
        return f"jdbc:postgresql://127.0.0.1:{self.port}/{self.database}"

    def _argv(self, program: str, *args: str) -> list[str]:
        command = [str(self.bin / program), *args]
        return ["runuser", "-u", "postgres", "--", *command] if self.as_root else command

    def _run(self, program: str, *args: str) -> None:
        done = subprocess.run(self._argv(program, *args), capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise PeerError(
                f"PostgreSQL: {program} exited with {done.returncode}: {(done.stderr or done.stdout)[-2000:]}"
            )

    def start(self, timeout: float = 60) -> PostgresProcess:
        self._run("initdb", "-D", str(self.data), "-U", self.user, "--auth=trust", "-E", "UTF8", "--no-locale", "-N")
        # fsync and full-page writes off: a test database that dies with the test needs no durability
        settings = {"full_page_writes": "off", "synchronous_commit": "off", **self.settings}
        self.process = spawn(
            self._argv(
                "postgres", "-D", str(self.data), "-h", self.host, "-p", str(self.port), "-k", str(self.root), "-F",
                *(arg for name, value in settings.items() for arg in ("-c", f"{name}={value}")),
            ),
            log=self.log,
        )  # fmt: skip
        wait_until("PostgreSQL", self._ready, process=self.process, log=self.log, timeout=timeout)
        self._run("createdb", "-h", self.host, "-p", str(self.port), "-U", self.user, self.database)
        return self

    def _psql(self, command: str, user: str | None) -> str:
        argv = [str(self.bin / "psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", self.host,
                "-p", str(self.port), "-U", user or self.user, "-d", self.database, "-c", command]  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        if done.returncode != 0:
            raise PeerError(f"PostgreSQL: {command[:200]!r} failed: {done.stderr.strip()[-2000:]}")
        return done.stdout

    def sql(self, statements: str, user: str | None = None) -> None:
        """Run ``statements`` (several, separated by ``;``) as one transaction, as ``user`` (the
        superuser by default); PeerError with the server's message if one fails (none then applies)."""
        self._psql(statements, user)

    def query(self, select: str, user: str | None = None) -> list[dict[str, Any]]:
        """The rows of ``select`` as dicts by column name, as PostgreSQL writes them in JSON (numerics
        as Decimal, timestamps as ISO strings in the session's time zone, NULL as None)."""
        out = self._psql(f"SELECT coalesce(json_agg(q), '[]') FROM ({select}) AS q", user)
        rows: list[dict[str, Any]] = json.loads(out, parse_float=Decimal)
        return rows

    def _ready(self) -> bool | None:
        done = subprocess.run(
            [str(self.bin / "pg_isready"), "-h", self.host, "-p", str(self.port), "-U", self.user],
            capture_output=True,
            timeout=30,
            check=False,
        )
        return True if done.returncode == 0 else None

    def stop(self) -> None:
        """A fast shutdown (open connections are ended), then the directory goes."""
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(PeerError):  # stop_group below ends it anyway
                self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "-t", "30", "stop")
        stop_group(self.process, grace=10)
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PostgresProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
