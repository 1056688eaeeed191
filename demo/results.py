"""The last demo's results, kept until a new demo holds its ports and processes.

Role: every demo starts from an empty ``.cache/demo`` (the brokers' logs, the raw layer, the
warehouse, the reports), but a demo that fails while starting (a port taken, a broker that does
not come up) must not have destroyed the results of the last one. So the old directory is renamed
aside (``.cache/demo.previous``) instead of deleted; once the new demo's servers run, it is
deleted; if the start fails, the attempt is renamed to ``.cache/demo.failed`` (its logs say why)
and the old results are renamed back.

Invariant: at every moment the last results are whole in ``<home>`` or in ``<home>.previous``
(renames only, each of which either happens or raises). A ``<home>.previous`` found at the start
means a demo was killed while starting: that directory holds the last results, and ``<home>`` the
killed attempt, which is removed.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from types import TracebackType


class PreviousResults:
    """A context manager around the start of a demo in ``home``.

    Entering moves ``home`` aside (or clears a killed attempt, see the module doc), leaving ``home``
    free for the new demo. :meth:`discard` (called once the new demo holds its ports and processes)
    deletes the old results. Leaving the block with an error before that puts them back, the
    attempt going to ``<home>.failed``: :attr:`failed_attempt` says where, for the error message.
    """

    def __init__(self, home: Path) -> None:
        self.home = home
        self.previous = home.with_name(home.name + ".previous")
        self.failed = home.with_name(home.name + ".failed")
        self.failed_attempt: Path | None = None
        """Where the failed attempt went when the old results were put back (else None)."""
        self._kept = False

    def __enter__(self) -> PreviousResults:
        if self.previous.exists():  # a demo killed while starting: its attempt is in home
            _remove(self.home)
        elif self.home.exists():
            self.home.rename(self.previous)
        self._kept = self.previous.exists()
        return self

    def discard(self) -> None:
        """The new demo runs: the old results go (the new ones replace them)."""
        if self._kept:
            _remove(self.previous)
            self._kept = False

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        if not self._kept:
            return
        if error is None:  # a block that ended without discarding: the new demo did not run
            _remove(self.home)
        else:
            _remove(self.failed)
            if self.home.exists():
                self.home.rename(self.failed)
                self.failed_attempt = self.failed
        self.previous.rename(self.home)
        self._kept = False


def _remove(path: Path) -> None:
    """Delete a directory tree (or a file) if it is there; a failure raises, naming the path."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
