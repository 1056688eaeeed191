"""Attempt leases: which staged attempts still belong to a live run, so that no run deletes them.

Two runs of a pipeline can execute the same plan at once (the second finds the first's stored plan
and completes it while the first is still loading). Exactly one commits; the other must find out at
its commit and stop with ConcurrentRunError, its staging intact until then. Whoever cleans up
(the winner after its commit, the next run's recovery) deletes an attempt's staging only when the
attempt is dead:

- each attempt holds a lease, ``_pipeline/leases/<seq>-<attempt>/`` (its renewals), written before its
  staging directory exists and deleted after it is gone; it names the host, the process (its id
  and start time, so a reused id is not mistaken for it) and when it was last renewed;
- a lease from this host is alive exactly while its process is (the kernel says so at once: a killed
  driver's attempt is cleaned by the very next run); from another host, while it was renewed within
  ``STALE_AFTER_S`` (the owner renews it every ``RENEW_EVERY_S``);
- a staging directory without a lease is dead (its attempt died before writing the lease or after
  removing it).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from kafkalog.retry import Backoff
from pipelines import faults
from pipelines.errors import PipelineError
from pipelines.ledger import paths
from pipelines.storage import Storage

log = logging.getLogger(__name__)

RENEW_EVERY_S = 10.0
STALE_AFTER_S = 60.0


@dataclass(frozen=True, slots=True)
class Lease:
    """Who holds an attempt: the host and process, and when the lease was last renewed."""

    host: str
    pid: int
    process_start: str
    """The process's start time as the kernel keeps it (""/proc/<pid>/stat"" field 22 with the
    boot id), so that a process id reused after a reboot or a crash is not the holder."""
    renewed_ms: int


def process_start(pid: int) -> str:
    """The kernel's start time of process ``pid`` (with this boot's id), or "" if it does not exist."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""
    fields = stat[stat.rindex(")") + 2 :].split()  # the command name may hold spaces and parentheses
    return f"{boot}:{fields[19]}"


def own_lease(now_ms: int | None = None) -> Lease:
    pid = os.getpid()
    return Lease(socket.gethostname(), pid, process_start(pid), now_ms if now_ms is not None else _now_ms())


def is_alive(lease: Lease, *, now_ms: int, host: str, start_of: Callable[[int], str] = process_start) -> bool:
    """Whether the attempt ``lease`` holds is alive, judged on ``host`` at ``now_ms``."""
    if lease.host == host and lease.process_start:
        return start_of(lease.pid) == lease.process_start
    return now_ms - lease.renewed_ms < STALE_AFTER_S * 1000


def _now_ms() -> int:
    return int(time.time() * 1000)


class Leases:
    """The leases of one pipeline's attempts under ``meta`` (its ``_pipeline`` directory).

    An attempt's lease is a directory, ``leases/<seq>-<attempt>/``, of renewals: each renewal is a
    new file (storage never overwrites), written before the older ones are deleted, so that a
    reader finds at least one at every moment; the newest counts."""

    def __init__(self, storage: Storage, meta: str) -> None:
        self.storage = storage
        self.dir = paths.leases_dir(meta)

    def path(self, name: str) -> str:
        """The lease of the attempt whose staging directory is named ``name`` (``<seq>-<attempt>``)."""
        return f"{self.dir}/{name}"

    def read(self, name: str) -> Lease | None:
        """The newest readable renewal of attempt ``name``'s lease (None: it holds none).

        Renewals are published whole (``write_new``), so an unreadable one is a torn file a storage
        without atomic publishing, or an older version of this code, left behind when its writer
        died: the renewal before it then counts, as if the torn one had never been written."""
        backoff = Backoff(first=0.01, cap=0.05, attempts=3)
        while True:  # a renewal may delete the newest file between the listing and the read
            renewals = [e for e in self.storage.list(self.path(name)) if e.name.endswith(".json")]
            if not renewals:
                return None
            torn: list[str] = []
            try:
                for entry in sorted(renewals, key=lambda e: e.name, reverse=True):
                    raw = self.storage.read_bytes(entry.path)
                    try:
                        return Lease(**json.loads(raw))
                    except (ValueError, TypeError) as exc:
                        torn.append(f"{entry.path} ({exc})")
            except PipelineError:
                if not backoff.wait():
                    raise
                continue
            raise PipelineError(
                f"unreadable attempt lease: {'; '.join(torn)}; delete {self.path(name)} if no run is loading"
            )

    def alive(self, name: str) -> bool:
        lease = self.read(name)
        return lease is not None and is_alive(lease, now_ms=_now_ms(), host=socket.gethostname())

    def write(self, name: str, lease: Lease | None = None) -> None:
        """Renew the lease of attempt ``name`` (``lease``: what to write; default: this process's)."""
        lease = lease or own_lease()
        older = self.storage.list(self.path(name))
        # published whole (a temporary renamed into place): a reader never sees a renewal half
        # written, which on HDFS is an empty file until its writer closes it
        self.storage.write_new(
            f"{self.path(name)}/{lease.renewed_ms:013d}-{uuid.uuid4().hex[:6]}.json", json.dumps(asdict(lease)).encode()
        )
        for entry in older:
            self.storage.delete(entry.path)

    def release(self, name: str) -> None:
        self.storage.delete(self.path(name), recursive=True)

    @contextlib.contextmanager
    def held(self, name: str) -> Iterator[None]:
        """Hold the lease of attempt ``name`` for the body, renewing it in a thread; released after."""
        self.write(name)
        stop = threading.Event()

        def renew() -> None:
            while not stop.wait(RENEW_EVERY_S):
                try:
                    self.write(name)
                except PipelineError as exc:  # the next renewal tries again; a stale lease is only a risk
                    log.warning("could not renew the lease of attempt %s: %s", name, exc)

        thread = threading.Thread(target=renew, name=f"lease-{name}", daemon=True)
        thread.start()
        try:
            yield
        except BaseException as exc:
            stop.set()
            thread.join()
            if faults.is_crash(exc):  # a dead process leaves its lease behind, held by nobody
                dead = own_lease()
                self.write(name, replace(dead, pid=-1, renewed_ms=dead.renewed_ms + 1))
            else:
                try:
                    self.release(name)
                except PipelineError as problem:  # the body's error is the cause; this one comes second
                    exc.add_note(f"also: {self._left_behind(name, problem)}")
            raise
        stop.set()
        thread.join()
        try:
            self.release(name)
        except PipelineError as problem:  # the work is done; a lease left behind is only tidying
            log.warning("%s", self._left_behind(name, problem))

    def _left_behind(self, name: str, problem: PipelineError) -> str:
        return (
            f"the lease of attempt {name} was not released ({problem}); "
            "the next run removes it, since this process will be gone"
        )
