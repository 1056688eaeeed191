"""The embedded metastore's Derby database: never found half made in its place.

Role: before a session's Hive client first opens the embedded metastore (pipelines.catalog
connection's ``prepare``), make sure ``<metastore>/db`` is a whole Derby database:

- it is **made aside and renamed into place**: Derby creates it in ``db.creating-<token>`` (in this
  driver's JVM, through JDBC), the database is shut down, and the directory renamed to ``db``. A
  process killed while Derby creates its files leaves only the aside directory, which a later
  run removes; Hive's client never opens the database with ``create=true``;
- a ``db`` without Derby's ``service.properties`` (half made by a killed run of an earlier version,
  or by a copy cut short) cannot be opened by anyone: it is moved aside to ``db.broken-<time>``
  and made anew;
- ``repair`` also opens it: one Derby refuses to start (its files damaged) is moved aside the
  same way. One another process has open is left alone (that is not damage).

Nothing is lost by making it anew: every table, view and partition the metastore holds is
computed from the committed manifests (pipelines.catalog.desired), and the next sync (the run's
own, or ``pipelines repair``) registers them all again. Hive's own tables inside the database
(made by DataNucleus on first use) need no such care: Derby keeps each of their creations whole,
and a table still missing is made at the next start.
"""

from __future__ import annotations

import logging
import re
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

from pipelines.errors import CatalogError
from pipelines.java_errors import java_line, lines_of

log = logging.getLogger(__name__)

DATABASE = "db"
"""The database's directory in the metastore's directory."""
WHOLE_MARK = "service.properties"
"""The file Derby writes when it has made a database; without it the database cannot be opened."""
CREATING = f"{DATABASE}.creating-"
BROKEN = f"{DATABASE}.broken-"
LEFTOVER_AGE_S = 3600.0
"""An aside directory this old is a dead creator's (a live one renames its own within seconds)."""
BOOTED_ELSEWHERE = "XSDB6"
"""Derby's SQLState for a database another process (or class loader) has open."""
NOT_STARTED = "Failed to start database"
"""Derby's words (SQLState XJ040) for a database it could not boot from its files."""
NOT_DAMAGE = ("Permission denied", "AccessDenied", "No space left")
"""Reasons under a failed start that are the machine's, not the database's: nothing to move aside."""
MAX_CHAIN = 12


def derby_url(database: Path, *, create: bool = False) -> str:
    return f"jdbc:derby:;databaseName={database}" + (";create=true" if create else "")


def ensure_whole(jvm: Any, directory: str, *, check_opens: bool = False) -> list[str]:
    """Make ``<directory>/db`` a whole Derby database (see the module doc) through the JVM ``jvm``,
    before any Hive client opens it; ``check_opens`` (``pipelines repair``): open it too. Returns
    what was done, for the person running the command (empty when nothing was)."""
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    _remove_dead_creations(root)
    database = root / DATABASE
    done: list[str] = []
    if database.exists():
        problem = None if _marked_whole(database) else f"it has no {WHOLE_MARK} (its creation was cut short)"
        if problem is None and check_opens:
            problem = _refusal(jvm, database)
        if problem is None:
            return done
        aside = _move_aside(database)
        if aside is not None:
            done.append(
                f"the embedded metastore's database {database} could not be used ({problem}): moved to {aside}, "
                "to be made anew; the tables are registered again from the committed manifests"
            )
            log.warning("%s", done[-1])
        elif _marked_whole(database):
            return done  # a concurrent command moved it and made a new one meanwhile
    _create(jvm, root)
    return done


def _marked_whole(database: Path) -> bool:
    """Whether Derby finished making ``database``: its ``service.properties`` (or the copy Derby
    keeps while it rewrites that file, and boots from if it died meanwhile)."""
    return (database / WHOLE_MARK).is_file() or (database / f"{WHOLE_MARK}old").is_file()


def _remove_dead_creations(root: Path) -> None:
    for leftover in root.glob(f"{CREATING}*"):
        try:
            if time.time() - leftover.stat().st_mtime > LEFTOVER_AGE_S:
                shutil.rmtree(leftover)
        except OSError as exc:  # only tidying: the leftover is in nobody's way
            log.info("could not remove %s: %s", leftover, exc)


def _move_aside(database: Path) -> Path | None:
    """``database`` renamed to ``db.broken-<time>``; None if it was gone already (a concurrent
    command moved it first)."""
    aside = database.with_name(f"{BROKEN}{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:6]}")
    try:
        database.rename(aside)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CatalogError(f"moving the unusable metastore database {database} aside to {aside} failed: {exc}") from exc
    return aside


def _create(jvm: Any, root: Path) -> None:
    """Derby makes the database aside; shut down, it is renamed into place (refused if a
    concurrent run put one there first: theirs is kept, this one removed)."""
    aside = root / f"{CREATING}{uuid.uuid4().hex[:12]}"
    try:
        _connect(jvm, derby_url(aside, create=True)).close()
        _shut_down(jvm, aside)
    except Exception as exc:  # py4j's Py4JJavaError carrying Derby's SQLException
        shutil.rmtree(aside, ignore_errors=True)
        raise CatalogError(f"creating the embedded metastore's database in {aside} failed: {_first_line(exc)}") from exc
    if not (aside / WHOLE_MARK).is_file():
        shutil.rmtree(aside, ignore_errors=True)
        raise CatalogError(f"creating the embedded metastore's database in {aside} failed: Derby wrote no {WHOLE_MARK}")
    try:
        aside.rename(root / DATABASE)
    except OSError as exc:
        shutil.rmtree(aside, ignore_errors=True)
        if (root / DATABASE / WHOLE_MARK).is_file():
            return  # another run made it at the same moment
        raise CatalogError(f"renaming {aside} to {root / DATABASE} failed: {exc}") from exc


def _refusal(jvm: Any, database: Path) -> str | None:
    """Why Derby cannot start ``database`` from its files (the innermost of Derby's exceptions), or
    None if it opens or another process has it open. A failure that is not the database's own (no
    permission to its files, an error before Derby tried to start it) is a CatalogError: nothing
    to move aside for."""
    try:
        _connect(jvm, derby_url(database)).close()
        _shut_down(jvm, database)
    except CatalogError:
        raise
    except Exception as exc:
        chain = _chain(exc)
        if any(BOOTED_ELSEWHERE in link for link in chain):
            return None
        failed_to_start = bool(chain) and NOT_STARTED in chain[0]
        if failed_to_start and not any(word in link for link in chain for word in NOT_DAMAGE):
            return next((link for link in reversed(chain) if "ERROR " in link), chain[-1])  # Derby's own words
        raise CatalogError(
            f"opening the embedded metastore's database {database} failed: {' <- '.join(chain)}"
        ) from exc
    return None


def _chain(exc: BaseException) -> list[str]:
    """The Java exception behind py4j's ``exc`` and every one under it (an SQLException's next
    exceptions, then causes), each as its own line: Derby puts the reason a database did not
    start there, not in the outer message."""
    java = getattr(exc, "java_exception", None)
    if java is None:
        return [_first_line(exc)]
    links: list[str] = []
    while java is not None and len(links) < MAX_CHAIN:
        links.append(str(java.toString()).strip())
        following = None
        if "SQLException" in str(java.getClass().getName()):
            following = java.getNextException()
        java = following if following is not None else java.getCause()
    return links


def _connect(jvm: Any, url: str) -> Any:
    return jvm.java.sql.DriverManager.getConnection(url)


def _shut_down(jvm: Any, database: Path) -> None:
    """Close ``database`` in this JVM's Derby so that its files are complete and free: Derby
    answers a shutdown that worked with an SQLException (08006), which is the expected answer."""
    try:
        _connect(jvm, f"{derby_url(database)};shutdown=true")
    except Exception as exc:
        if "08006" not in str(exc) and "shutdown" not in str(exc):
            raise
        return
    raise CatalogError(f"Derby did not shut down {database}")


def _first_line(exc: BaseException) -> str:
    """Derby's first cause out of py4j's text: its innermost ``ERROR <SQLState>: …`` (the outer
    ones say "see the next exception for details"), else the Java exception's own line."""
    lines = [line.removeprefix("Caused by:").strip() for line in lines_of(exc)]
    derby = [line for line in lines if re.match(r"(\S+: )?ERROR [0-9A-Z]{5}: ", line)]
    return derby[-1] if derby else java_line(exc)
