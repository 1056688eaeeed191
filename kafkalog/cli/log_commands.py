"""``kafkalog log ...``: inspect, verify and repair log directories."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import click
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

from kafkalog.cli.main import main
from kafkalog.cli.output import console, plural
from kafkalog.errors import KafkalogError
from kafkalog.log import Log, LogConfig
from kafkalog.log.checkpoint import RECOVERY_POINT_FILE
from kafkalog.log.files import LOG_SUFFIX, parse_base_offset
from kafkalog.log.manager import CLEAN_SHUTDOWN_FILE, LOCK_FILE, data_dir_in_use, partition_of
from kafkalog.log.scan import scan_file
from kafkalog.record import decode_messages, iter_entries
from kafkalog.record.message import Codec


@main.group("log")
def log_group() -> None:
    """Inspect, verify and repair log directories (never while a broker uses them)."""


@log_group.command("dump")
@click.argument("segment", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--deep", is_flag=True, help="Open compressed wrappers and print every message.")
@click.option("--values", is_flag=True, help="Print keys and values too (with --deep).")
def dump(segment: Path, deep: bool, values: bool) -> None:
    """Print the entries of one SEGMENT file (a .log), checking every CRC."""
    data = segment.read_bytes()
    click.echo(f"# {segment}: {len(data)} {plural(len(data), 'byte')}")
    last_end = 0
    try:
        for entry in iter_entries(data):
            click.echo(
                f"offset {entry.offset} position {entry.position} size {entry.size} magic {entry.magic} "
                f"codec {Codec(entry.attributes & 7).name.lower()} timestamp {entry.timestamp} "
                f"({entry.timestamp_type.name.lower()}) crc {entry.crc}"
            )
            if deep:
                for message in decode_messages(data[entry.position : entry.end]):
                    line = f"  | offset {message.offset} timestamp {message.timestamp}"
                    if values:
                        line += f" key {message.key!r} value {message.value!r}"
                    click.echo(line)
            last_end = entry.end
    except KafkalogError as exc:
        raise click.ClickException(f"{segment}: {exc}") from exc
    tail = len(data) - last_end
    if tail:
        click.echo(f"# {tail} trailing {plural(tail, 'byte does', 'bytes do')} not form a whole message (a torn write)")


@dataclass
class _Found:
    """What ``log check`` found under its arguments, each list in the order it is reported."""

    partitions: list[Path] = field(default_factory=list)
    """Partition directories, with segments or without (an empty partition)."""
    strangers: list[Path] = field(default_factory=list)
    """Directories in a data directory that are neither partitions nor the broker's own."""


def _has_segments(directory: Path) -> bool:
    return any(parse_base_offset(p.name, LOG_SUFFIX) is not None for p in directory.iterdir())


def _is_partition_dir(directory: Path) -> bool:
    """Whether a directory given to ``log check`` is a partition's rather than a data directory: it
    holds segments, or (empty, or holding only index files) it is named ``<topic>-<partition>`` and
    shows nothing of a data directory. A data directory may be named like a partition too
    (``kafka-1``); the files a LogManager leaves in it, or its partition directories, tell."""
    if _has_segments(directory):
        return True
    if partition_of(directory.resolve().name) is None:
        return False
    if any((directory / name).exists() for name in (LOCK_FILE, CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_FILE)):
        return False
    return not any(p.is_dir() and partition_of(p.name) is not None for p in directory.iterdir())


def _find_partitions(dirs: tuple[Path, ...]) -> _Found:
    """The partition directories among and under ``dirs``: the subdirectories of a data directory
    that a broker would open as partitions (kafkalog.log.manager.partition_of), not its own
    dot-directories (``.consumer_offsets``, ``.topic_configs``, a deleted partition's ``.deleted-…``)
    and not a stranger's (``lost+found``), which are set apart to be named."""
    found = _Found()
    for directory in dirs:
        if _is_partition_dir(directory):
            found.partitions.append(directory)
            continue
        for path in sorted(directory.iterdir()):
            if not path.is_dir():
                continue  # the broker's files: the lock, the checkpoint, the clean-shutdown marker, ...
            if partition_of(path.name) is not None:
                found.partitions.append(path)
            elif not path.name.startswith("."):  # dot-directories are the broker's, as LogManager has it
                found.strangers.append(path)
    return found


@log_group.command("check")
@click.argument("dirs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
def check(dirs: tuple[Path, ...]) -> None:
    """Verify every segment under DIRS (data or partition directories) without changing anything.

    Exits 1 if any message is corrupt, naming its file, byte position and offset (one line per
    problem on stdout; progress goes to stderr); a partial message at the very end of a partition is
    reported as a torn write (recovery would cut it). A partition directory without segments is
    named and counted as a partition (a broker opens it empty); a directory of a data directory that
    is not a partition is named as skipped, unless it is the broker's own (a dot-directory).
    """
    for directory in dirs:
        if data_dir_in_use(directory):
            raise click.ClickException(f"{directory} is in use by a running broker: stop it first")
    found = _find_partitions(dirs)
    for stranger in found.strangers:
        click.echo(f"skipped {stranger}: not a <topic>-<partition> directory (a broker ignores it too)")
    segments = [
        (partition, path)
        for partition in found.partitions
        for path in sorted(partition.iterdir())
        if parse_base_offset(path.name, LOG_SUFFIX) is not None
    ]
    last_of = dict(segments)  # per partition its last segment: the list is sorted, the last one stays
    empty = [partition for partition in found.partitions if partition not in last_of]
    for partition in empty:
        click.echo(f"no segments: {partition} is an empty partition (a broker opens it with no messages)")
    total = sum(path.stat().st_size for _, path in segments)
    problems = 0
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
        console=console(stderr=True),
    ) as progress:
        task = progress.add_task("checking", total=total)
        for partition, path in segments:
            progress.update(task, description=f"checking {partition.name}")
            base = parse_base_offset(path.name, LOG_SUFFIX) or 0
            fd = os.open(path, os.O_RDONLY)
            try:
                size = os.fstat(fd).st_size
                result = scan_file(fd, 0, size, min_next_offset=base, index_interval=1 << 62, bytes_since_index=0)
            finally:
                os.close(fd)
            if result.error is not None:
                problems += 1
                offset = result.last_offset + 1 if result.entries else base
                click.echo(f"CORRUPT {path} at byte {result.error_position} (offset {offset}): {result.error}")
            elif result.valid_end != size:
                last = path == last_of[partition]
                kind = "torn write" if last else "CORRUPT (sealed segment ends inside a message)"
                problems += 0 if last else 1
                extra = size - result.valid_end
                click.echo(f"{kind}: {path} has {extra} {plural(extra, 'byte')} after its last message")
            progress.advance(task, size)
    checked = f"checked {len(segments)} {plural(len(segments), 'segment')}"
    partitions = len(found.partitions)
    checked += f" in {partitions} {plural(partitions, 'partition')}"
    if empty:
        checked += f" ({len(empty)} without segments)"
    click.echo(f"{checked}: {problems} corrupt")
    if problems:
        sys.exit(1)


@log_group.command("truncate")
@click.argument("partition_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--to", "offset", type=click.IntRange(min=0), required=True, help="First offset to remove.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def truncate(partition_dir: Path, offset: int, yes: bool) -> None:
    """Remove every message of PARTITION_DIR at offset --to and after (e.g. a quarantined one)."""
    if partition_of(partition_dir.resolve().name) is None:  # a log opened there would be made
        raise click.ClickException(
            f"{partition_dir} is not a partition directory (<topic>-<partition>, as a broker names them)"
        )
    data_dir = partition_dir.parent
    if data_dir_in_use(data_dir):
        raise click.ClickException(f"{data_dir} is in use by a running broker: stop it first")
    log = Log(partition_dir, LogConfig(on_corruption="quarantine"), clean_shutdown=False)
    try:
        if offset >= log.log_end_offset:
            click.echo(f"{partition_dir} ends at offset {log.log_end_offset}: nothing to remove")
            return
        removed = log.log_end_offset - offset
        if not yes:
            click.confirm(
                f"Remove {removed} {plural(removed, 'message')} from offset {offset} of {partition_dir}?", abort=True
            )
        log.truncate_to(offset)
        click.echo(f"{partition_dir} now ends at offset {log.log_end_offset}")
    finally:
        log.close()
