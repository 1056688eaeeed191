"""A throwaway PostgreSQL server (Debian's package) on 127.0.0.1: the Hive metastore's database.

PostgreSQL refuses to run as root; when the tests run as root, the server runs as the ``postgres``
user that Debian's package creates, in a directory of its own under /tmp (pytest's temporary
directories are private to the user who runs the tests). Trust authentication on loopback only:
the server holds nothing but a test's metastore and lives as long as the test session.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.support.installed import MissingPeer
from tests.support.ports import free_port
from tests.support.processes import PeerError, spawn, stop_group, wait_until

POSTGRES_BINARIES = Path("/usr/lib/postgresql")
USER = "hive"
"""The database role the metastore connects as (created by initdb, trusted on loopback)."""


def postgres_bin() -> Path:
    """The newest installed server's bin directory (Debian keeps initdb and postgres off the PATH)."""
    found = sorted(POSTGRES_BINARIES.glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]))
    if not found:
        raise MissingPeer(f"PostgreSQL is not installed (no {POSTGRES_BINARIES}/*/bin/initdb): run `make install`")
    return found[-1].parent


class PostgresProcess:
    """One PostgreSQL server with one database, ``database``; ``jdbc_url`` reaches it."""

    def __init__(self, database: str = "metastore") -> None:
        self.bin = postgres_bin()
        self.database = database
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
        self._run("initdb", "-D", str(self.data), "-U", USER, "--auth=trust", "-E", "UTF8", "--no-locale", "-N")
        # fsync and full-page writes off: a test database that dies with the test needs no durability
        self.process = spawn(
            self._argv(
                "postgres", "-D", str(self.data), "-h", "127.0.0.1", "-p", str(self.port), "-k", str(self.root),
                "-F", "-c", "full_page_writes=off", "-c", "synchronous_commit=off",
            ),
            log=self.log,
        )  # fmt: skip
        wait_until("PostgreSQL", self._ready, process=self.process, log=self.log, timeout=timeout)
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", USER, self.database)
        return self

    def _ready(self) -> bool | None:
        done = subprocess.run(
            [str(self.bin / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port), "-U", USER],
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
