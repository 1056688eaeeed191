"""LogManager: every partition log in one or more data directories, and their upkeep.

Each data directory holds one subdirectory per partition (``<topic>-<partition>``), a lock file,
the recovery-point checkpoint and, after a clean shutdown, the clean-shutdown marker:

    <data dir>/.lock                              held (flock) while a LogManager has the directory
    <data dir>/.kafkalog_cleanshutdown            written last by close(), removed first by open
    <data dir>/recovery-point-offset-checkpoint   per partition: offset below which data is fsynced
    <data dir>/cleaner-offset-checkpoint          per compacted partition: where the cleaner goes on
    <data dir>/<topic>-<partition>/000…000.log    segments (see Log)

Other dot-directories belong to the broker (consumer offsets, topic configs, a deleted partition's
``.deleted-…`` until it is removed); any other directory is not a partition and is ignored.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import shutil
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from kafkalog.errors import LogClosedError, LogConfigError, LogDirLockedError, StorageError
from kafkalog.log.checkpoint import RECOVERY_POINT_FILE, read_checkpoint, write_checkpoint
from kafkalog.log.cleaner.cleaner import LogCleaner
from kafkalog.log.cleaner.settings import CleanerSettings
from kafkalog.log.config import LogConfig
from kafkalog.log.faults import crash_point
from kafkalog.log.files import TMP_SUFFIX, fsync_dir, write_atomically
from kafkalog.log.log import Clock, Log, wall_clock_ms
from kafkalog.topics import TopicPartition

logger = logging.getLogger(__name__)

LOCK_FILE = ".lock"
CLEAN_SHUTDOWN_FILE = ".kafkalog_cleanshutdown"
_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
_PARTITION_DIR = re.compile(r"^(?P<topic>[A-Za-z0-9._-]{1,249})-(?P<partition>0|[1-9][0-9]{0,9})$")
DELETED_PREFIX = ".deleted-"  # a deleted partition's directory, renamed first; removed at start if a crash left it


def partition_of(name: str) -> TopicPartition | None:
    """The partition a data directory's subdirectory called ``name`` holds (``<topic>-<partition>``),
    or None: the one rule for what a LogManager opens as partitions and what ``kafkalog log check``
    checks. A deleted partition's ``.deleted-<topic>-<partition>-<ns>`` is none, although it has
    the shape."""
    if name.startswith(DELETED_PREFIX):
        return None
    match = _PARTITION_DIR.match(name)
    return None if match is None else (match["topic"], int(match["partition"]))


def data_dir_in_use(data_dir: Path) -> bool:
    """Whether a LogManager (in any process) holds ``data_dir`` now; tools check before touching it."""
    lock_file = data_dir / LOCK_FILE
    if not lock_file.exists():
        return False
    fd = os.open(lock_file, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # also releases the lock taken just now
    return False


def validate_topic(topic: str) -> None:
    """Kafka's rule: 1 to 249 characters of ASCII letters, digits, '.', '_' and '-'; and not a name
    starting with ``.deleted-``, which the data directory keeps for deleted partitions (a topic so
    named would be taken for one, and removed at the next start)."""
    if not _TOPIC.match(topic) or topic in (".", ".."):
        raise LogConfigError(f"invalid topic name {topic!r}: use 1-249 of the characters a-z A-Z 0-9 . _ -")
    if topic.startswith(DELETED_PREFIX):
        raise LogConfigError(
            f"invalid topic name {topic!r}: names starting with {DELETED_PREFIX!r} are kept for deleted partitions"
        )


class LogManager:
    """Opens, creates and looks after the partition logs of a broker's data directories.

    Thread-safe. Opening locks every directory (a second LogManager, in this process or another,
    fails with LogDirLockedError), finishes what a crash interrupted (recovery of every partition
    unless the clean-shutdown marker is present), then removes the marker before anything can be
    appended. ``close()`` flushes everything, writes the checkpoints, then the marker.
    """

    def __init__(
        self,
        data_dirs: Sequence[Path | str],
        config: LogConfig | None = None,
        *,
        topic_configs: Mapping[str, LogConfig] | None = None,
        cleaner: CleanerSettings | None = None,
        clock: Clock = wall_clock_ms,
    ) -> None:
        if not data_dirs:
            raise LogConfigError("at least one data directory is needed")
        self.data_dirs = [Path(d).resolve() for d in data_dirs]
        if len(set(self.data_dirs)) != len(self.data_dirs):
            raise LogConfigError(f"a data directory is listed twice: {[str(d) for d in data_dirs]}")
        self.config = config or LogConfig()
        self.topic_configs = dict(topic_configs or {})
        self.clock = clock
        self._lock = threading.RLock()
        self._logs: dict[TopicPartition, Log] = {}
        self._log_dirs: dict[TopicPartition, Path] = {}
        self._lock_fds: list[int] = []
        self._closed = False
        self._stop = threading.Event()
        self._maintenance: threading.Thread | None = None
        try:
            for data_dir in self.data_dirs:
                self._lock_fds.append(self._lock_dir(data_dir))
            for data_dir in self.data_dirs:
                self._load_dir(data_dir)
        except BaseException:
            self._release()
            raise
        self.cleaner = LogCleaner(cleaner or CleanerSettings(), self._open_logs, self.data_dirs, clock=clock)
        """Compacts the logs whose cleanup.policy includes compact (started with the maintenance)."""

    # ------------------------------------------------------------------ opening

    @staticmethod
    def _lock_dir(data_dir: Path) -> int:
        try:
            data_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StorageError(f"cannot use data directory {data_dir}: {exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LogDirLockedError(
                f"data directory {data_dir} is in use by another broker or tool (it holds {data_dir / LOCK_FILE})"
            ) from None
        return fd

    def _load_dir(self, data_dir: Path) -> None:
        marker = data_dir / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        for leftover in data_dir.glob(f"*{TMP_SUFFIX}"):
            logger.warning("removing %s, a checkpoint a crash left half-written", leftover)
            leftover.unlink()
        for doomed in data_dir.glob(f"{DELETED_PREFIX}*"):
            logger.warning("removing %s, a deleted partition a crash left behind", doomed)
            shutil.rmtree(doomed, ignore_errors=True)
        recovery_points = read_checkpoint(data_dir / RECOVERY_POINT_FILE)
        partition_dirs = [p for p in sorted(data_dir.iterdir()) if p.is_dir() and partition_of(p.name) is not None]
        if not clean and partition_dirs:
            logger.info("%s was not shut down cleanly: recovering its partitions", data_dir)
        for path in sorted(data_dir.iterdir()):
            if not path.is_dir():
                continue
            tp = partition_of(path.name)
            if tp is None:
                if not path.name.startswith("."):  # dot-directories belong to the broker (offsets, ...)
                    logger.warning("ignoring %s: not a <topic>-<partition> directory", path)
                continue
            if tp in self._logs:
                raise StorageError(f"partition {tp[0]}-{tp[1]} is in both {self._log_dirs[tp]} and {data_dir}")
            self._logs[tp] = Log(
                path,
                self.config_for(tp[0]),
                recovery_point=recovery_points.get(tp, 0),
                clean_shutdown=clean,
                clock=self.clock,
            )
            self._log_dirs[tp] = data_dir
        # Remove the marker before anything can be appended, so a crash from now on is recovered.
        if clean:
            marker.unlink()
            fsync_dir(data_dir)
        self._write_checkpoint(data_dir)

    def config_for(self, topic: str) -> LogConfig:
        return self.topic_configs.get(topic, self.config)

    def set_topic_config(self, topic: str, config: LogConfig | None) -> None:
        """Give ``topic``'s logs new settings (None: the defaults), open ones at once."""
        with self._lock:
            if config is None:
                self.topic_configs.pop(topic, None)
            else:
                self.topic_configs[topic] = config
            logs = [log for (t, _), log in self._logs.items() if t == topic]
        for log in logs:
            log.reconfigure(self.config_for(topic))

    def delete_logs(self, topic: str) -> int:
        """Close and delete every log of ``topic`` (a topic deleted); returns how many. The
        directory is renamed first, so a crash leaves it out of the logs opened at the next start."""
        with self._lock:
            self._check_open()
            mine = sorted(tp for tp in self._logs if tp[0] == topic)
            for tp in mine:
                log = self._logs.pop(tp)
                data_dir = self._log_dirs.pop(tp)
                log.close()
                doomed = data_dir / f"{DELETED_PREFIX}{tp[0]}-{tp[1]}-{time.monotonic_ns()}"
                log.directory.rename(doomed)  # checked: a failure raises and nothing is half-deleted
                fsync_dir(data_dir)
                shutil.rmtree(doomed, ignore_errors=True)
            self.topic_configs.pop(topic, None)
            self.cleaner.forget(topic)
            return len(mine)

    # ------------------------------------------------------------------ partitions

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def get_or_create_log(self, topic: str, partition: int, config: LogConfig | None = None) -> Log:
        """The partition's log, created (in the data directory holding the fewest) if missing."""
        with self._lock:
            self._check_open()
            existing = self._logs.get((topic, partition))
            if existing is not None:
                return existing
            validate_topic(topic)
            if partition < 0:
                raise LogConfigError(f"invalid partition {partition}: must be >= 0")
            if config is not None:
                self.topic_configs[topic] = config
            counts = dict.fromkeys(self.data_dirs, 0)
            for data_dir in self._log_dirs.values():
                counts[data_dir] += 1
            data_dir = min(self.data_dirs, key=lambda d: (counts[d], self.data_dirs.index(d)))
            log = Log(data_dir / f"{topic}-{partition}", self.config_for(topic), clean_shutdown=True, clock=self.clock)
            fsync_dir(data_dir)
            self._logs[(topic, partition)] = log
            self._log_dirs[(topic, partition)] = data_dir
            return log

    @property
    def logs(self) -> dict[TopicPartition, Log]:
        return dict(self._logs)

    def _open_logs(self) -> list[tuple[TopicPartition, Log, Path]]:
        with self._lock:
            return [(tp, log, self._log_dirs[tp]) for tp, log in self._logs.items()]

    # ------------------------------------------------------------------ upkeep

    def flush_due(self, now: int | None = None) -> None:
        """Fsync every log whose time-based flush is due."""
        for log in self.logs.values():
            log.maybe_flush(now)

    def enforce_retention(self, now: int | None = None) -> int:
        """Run retention on every log; return how many segments were deleted."""
        return sum(log.enforce_retention(now) for log in self.logs.values())

    def checkpoint(self) -> None:
        """Record every log's recovery point (atomically, per data directory)."""
        with self._lock:
            for data_dir in self.data_dirs:
                self._write_checkpoint(data_dir)

    def _write_checkpoint(self, data_dir: Path) -> None:
        offsets = {tp: log.recovery_point for tp, log in self._logs.items() if self._log_dirs[tp] == data_dir}
        write_checkpoint(data_dir / RECOVERY_POINT_FILE, offsets)

    def run_maintenance(self, now: int | None = None) -> None:
        """One round of upkeep: due flushes, retention, checkpoints."""
        self.flush_due(now)
        self.enforce_retention(now)
        self.checkpoint()

    def start_maintenance(self, interval_ms: int = 1000) -> None:
        """Run ``run_maintenance`` every ``interval_ms`` in a background thread until close()."""
        if self._maintenance is not None:
            return

        def loop() -> None:
            while not self._stop.wait(interval_ms / 1000):
                try:
                    self.run_maintenance()
                except LogClosedError:
                    return
                except Exception:
                    logger.exception("log maintenance failed; retrying in %d ms", interval_ms)

        self._maintenance = threading.Thread(target=loop, name="kafkalog-log-maintenance", daemon=True)
        self._maintenance.start()
        self.cleaner.start()

    # ------------------------------------------------------------------ closing

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError("the log manager is closed")

    def close(self) -> None:
        """Flush and close every log, write checkpoints, then the clean-shutdown markers."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._stop.set()
        if self._maintenance is not None:
            self._maintenance.join()
        self.cleaner.stop()  # before the logs close: a pass stops between batches
        try:
            for log in self._logs.values():
                log.close()
            for data_dir in self.data_dirs:
                self._write_checkpoint(data_dir)
                crash_point("manager.close.before_marker")
                write_atomically(data_dir / CLEAN_SHUTDOWN_FILE, b"", crash_prefix="marker")
        finally:
            self._release()

    def _release(self) -> None:
        for fd in self._lock_fds:
            os.close(fd)  # closing the descriptor releases the flock
        self._lock_fds.clear()

    def __enter__(self) -> LogManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
