"""The recovery-point checkpoint of a data directory: which offset of each partition is fsynced.

Kafka's text layout, so operators recognise it:

    0                     format version
    <n>                   number of lines that follow
    <topic> <partition> <offset>

It is replaced atomically (files.write_atomically). A file that cannot be parsed is reported and
treated as absent, which is safe: every partition is then recovered from its first segment.
"""

from __future__ import annotations

import logging
from pathlib import Path

from kafkalog.log.files import write_atomically
from kafkalog.topics import TopicPartition

logger = logging.getLogger(__name__)

RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
_VERSION = 0


def read_checkpoint(path: Path) -> dict[TopicPartition, int]:
    """The offsets recorded in ``path``; empty (with a warning) if it is missing or unreadable."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        logger.warning("cannot read checkpoint %s (%s): recovering every partition fully", path, exc)
        return {}
    try:
        return _parse(raw.decode("ascii"))
    except ValueError as exc:  # UnicodeDecodeError included
        logger.warning("ignoring unreadable checkpoint %s (%s): recovering every partition fully", path, exc)
        return {}


def _parse(text: str) -> dict[TopicPartition, int]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2:
        raise ValueError("missing header lines")
    if int(lines[0]) != _VERSION:
        raise ValueError(f"unknown version {lines[0]!r}")
    count = int(lines[1])
    if count != len(lines) - 2:
        raise ValueError(f"says {count} entries but has {len(lines) - 2}")
    offsets: dict[TopicPartition, int] = {}
    for line in lines[2:]:
        topic, partition, offset = line.split(" ")
        if int(partition) < 0 or int(offset) < 0:
            raise ValueError(f"negative number in {line!r}")
        offsets[(topic, int(partition))] = int(offset)
    return offsets


def write_checkpoint(path: Path, offsets: dict[TopicPartition, int]) -> None:
    """Replace ``path`` with ``offsets``: a crash leaves the old file or the new one, never a mix."""
    lines = [str(_VERSION), str(len(offsets))]
    lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())]
    write_atomically(path, ("\n".join(lines) + "\n").encode(), crash_prefix="checkpoint")
