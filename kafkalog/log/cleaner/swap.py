"""Putting a cleaned segment in the place of the segments it was made from, crash-safely.

A cleaning pass writes each group of segments it rewrites as one new segment beside them, named by
the group's first base offset: ``<base>.log.cleaned`` and its ``.index.cleaned``,
``.timeindex.cleaned`` (and ``.txnindex.cleaned`` when it holds aborted transactions). Then, as
Kafka does, the swap:

1. every ``.cleaned`` file is fsynced and renamed to ``.swap``: complete, not yet in use;
2. the swap's intent, ``cleaner-swap`` in the partition's directory, is written atomically:
   the new segment's base offset, its files, and the base offsets of the segments it replaces.
   This is the commit point: from here on the swap is finished, by this process or by the next
   one that opens the log;
3. the replaced segments are deleted (each file renamed to ``.deleted``, then removed);
4. every ``.swap`` file is renamed to its final name; the directory is fsynced;
5. the intent is removed.

Steps 2 to 4 run under the log's lock (``Log.replace_segments``), 1 and 5 outside it: appends wait
for a few renames and two fsyncs only.

Opening a log (``recover``) finishes what a crash interrupted: with an intent, steps 3 to 5 (a
replaced segment's files that remain are deleted, a ``.swap`` file still there takes its final
name); without one, the ``.cleaned`` and ``.swap`` files are an unfinished pass and are removed, the
old segments being whole. Kafka infers the replaced segments from the new one's offsets; writing
them down also covers a replaced segment whose every record was cleaned away.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from kafkalog.errors import StorageError
from kafkalog.log.faults import crash_point
from kafkalog.log.files import SEGMENT_SUFFIXES, fsync_dir, rename_new, segment_path, write_atomically

logger = logging.getLogger(__name__)

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
INTENT_FILE = "cleaner-swap"
_FORMAT_VERSION = 1


def write_intent(directory: Path, base: int, suffixes: list[str], replaces: list[int]) -> None:
    """Step 2: the commit point of a swap (see the module doc)."""
    document = {"format_version": _FORMAT_VERSION, "base": base, "suffixes": suffixes, "replaces": replaces}
    write_atomically(directory / INTENT_FILE, json.dumps(document).encode(), crash_prefix="cleaner.swap")


def to_swap(directory: Path, base: int, suffixes: list[str]) -> None:
    """Step 1: the cleaned files (already fsynced) renamed to ``.swap``."""
    for suffix in suffixes:
        cleaned = segment_path(directory, base, suffix + CLEANED_SUFFIX)
        rename_new(cleaned, cleaned.with_name(cleaned.name[: -len(CLEANED_SUFFIX)] + SWAP_SUFFIX))
        crash_point("cleaner.swap.after_swap_rename")
    fsync_dir(directory)


def finish(directory: Path, base: int, suffixes: list[str], replaces: list[int]) -> None:
    """Steps 3 to 5, from wherever they stopped: idempotent."""
    for old in replaces:
        for suffix in SEGMENT_SUFFIXES:
            path = segment_path(directory, old, suffix)
            if old == base and suffix in suffixes and not path.with_name(path.name + SWAP_SUFFIX).exists():
                continue  # the new segment's file, already in place
            if path.exists():
                doomed = path.with_name(path.name + ".deleted")
                path.rename(doomed)
                crash_point("cleaner.swap.after_delete_rename")
                doomed.unlink()
    crash_point("cleaner.swap.after_delete")
    for suffix in suffixes:
        final = segment_path(directory, base, suffix)
        swap = final.with_name(final.name + SWAP_SUFFIX)
        if swap.exists():
            rename_new(swap, final)
            crash_point("cleaner.swap.after_final_rename")
    fsync_dir(directory)  # the new names are durable before the intent can go


def remove_intent(directory: Path) -> None:
    """Step 5, once the swap is whole on disk. Not fsynced: an intent that a power cut brings back
    describes a finished swap, which finishing again leaves as it is."""
    crash_point("cleaner.swap.before_intent_removed")
    (directory / INTENT_FILE).unlink(missing_ok=True)


def recover(directory: Path) -> None:
    """Finish a swap whose intent was written; remove a pass that never reached it."""
    intent = directory / INTENT_FILE
    if intent.exists():
        try:
            document = json.loads(intent.read_bytes())
            if document.get("format_version") != _FORMAT_VERSION:
                raise ValueError(f"unknown format_version {document.get('format_version')!r}")
            base, suffixes, replaces = int(document["base"]), list(document["suffixes"]), list(document["replaces"])
            if not set(suffixes) <= set(SEGMENT_SUFFIXES) or not all(isinstance(r, int) for r in replaces):
                raise ValueError("unknown suffixes or base offsets")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            # written atomically, so damage, not a torn write: guessing could lose a segment
            raise StorageError(f"{intent} is unreadable ({exc}): the cleaner's swap cannot be finished") from exc
        logger.warning("%s: finishing the cleaner's swap of %d segment(s) into %d", directory, len(replaces), base)
        finish(directory, base, suffixes, replaces)
        remove_intent(directory)
    for leftover in sorted(directory.iterdir()):
        if leftover.name.endswith((CLEANED_SUFFIX, SWAP_SUFFIX)):
            logger.warning("removing %s, left by a cleaning pass a crash interrupted", leftover)
            leftover.unlink()
