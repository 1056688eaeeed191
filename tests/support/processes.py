"""Child processes of the tests and benchmarks, and the guarantee that none outlives its owner.

Every peer (ZooKeeper, Kafka 0.9 and 4.x, Hadoop's mini clusters, Spark's daemons, kafkalog
brokers) is started through ``spawn``: in a session of its own, so that ``stop_group`` can end it
together with whatever it forked (executors, YARN containers, Python workers). ``descendants`` lists
what is still running below a process; the root conftest checks it is empty when the test run ends.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, TypeVar

T = TypeVar("T")


class PeerError(RuntimeError):
    """A peer could not be started or driven; the message names it and carries its log's tail."""


def tail(path: Path, lines: int = 40) -> str:
    """The last ``lines`` of a log, headed by its path (for error messages)."""
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return f"--- {path}: (no log)"
    return f"--- last {lines} lines of {path}:\n" + "\n".join(text.splitlines()[-lines:])


def spawn(
    argv: Sequence[str | os.PathLike[str]],
    *,
    log: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    stdin: int | IO[bytes] | None = subprocess.DEVNULL,
    stdout: int | None = None,
) -> subprocess.Popen[bytes]:
    """Start ``argv`` in a new session with stdout and stderr appended to ``log`` (stdout may be a
    pipe instead, for peers that answer on it)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as stream:  # the child keeps its own descriptor
        return subprocess.Popen(
            [str(part) for part in argv],
            stdin=stdin,
            stdout=stream if stdout is None else stdout,
            stderr=stream,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
        )


def stop_group(process: subprocess.Popen[bytes] | subprocess.Popen[str] | None, grace: float = 15.0) -> None:
    """SIGTERM to the process's whole session, SIGKILL to whatever is left after ``grace`` seconds;
    returns once the leader is reaped. Safe to call twice and on a process that already died."""
    if process is None:
        return
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and _group_alive(process):
            time.sleep(0.05)
        if not _group_alive(process):
            break
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


def _group_alive(process: subprocess.Popen[bytes] | subprocess.Popen[str]) -> bool:
    process.poll()  # reap the leader: a zombie still counts as a member of its group
    try:
        os.killpg(process.pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_until(
    what: str,
    check: Callable[[], T | None],
    *,
    process: subprocess.Popen[bytes] | subprocess.Popen[str],
    log: Path,
    timeout: float,
) -> T:
    """Poll ``check`` until it returns something; raise PeerError (with the log's tail) if the
    process dies first or ``timeout`` passes. The process is stopped before raising."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found is not None:
            return found
        if process.poll() is not None:
            stop_group(process)
            raise PeerError(f"{what}: the process exited with {process.returncode}\n{tail(log)}")
        if time.monotonic() > deadline:
            stop_group(process)
            raise PeerError(f"{what}: not ready after {timeout:.0f} s\n{tail(log)}")
        time.sleep(0.1)


def descendants(pid: int | None = None) -> list[tuple[int, str]]:
    """Every live process below ``pid`` (default: this one), as (pid, command line); zombies are
    left out (they hold nothing but a table entry until reaped)."""
    children: dict[int, list[int]] = {}
    commands: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue  # gone meanwhile
        # the command name (field 2) may hold spaces and parentheses: split after its last ')'
        state, ppid = stat[stat.rindex(")") + 2 :].split()[:2]
        if state == "Z":
            continue
        children.setdefault(int(ppid), []).append(int(entry.name))
        commands[int(entry.name)] = command
    found: list[tuple[int, str]] = []
    pending = list(children.get(os.getpid() if pid is None else pid, []))
    while pending:
        child = pending.pop()
        found.append((child, commands.get(child, "?")))
        pending.extend(children.get(child, []))
    return found
