"""``kafkalog log ...``: inspect, verify and repair log directories."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

from kafkalog.cli.main import main
from kafkalog.errors import KafkalogError
from kafkalog.log import Log, LogConfig
from kafkalog.log.files import LOG_SUFFIX, parse_base_offset
from kafkalog.log.manager import data_dir_in_use
from kafkalog.log.scan import scan_file
from kafkalog.record import decode_messages, iter_entries
from kafkalog.record.format import Codec

_err = Console(stderr=True)


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
    click.echo(f"# {segment}: {len(data)} bytes")
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
        click.echo(f"# {tail} trailing bytes do not form a whole message (a torn write)")


def _partition_dirs(data_dirs: tuple[Path, ...]) -> list[Path]:
    found = []
    for data_dir in data_dirs:
        if any(parse_base_offset(p.name, LOG_SUFFIX) is not None for p in data_dir.iterdir()):
            found.append(data_dir)  # a partition directory was given directly
        else:
            found.extend(sorted(p for p in data_dir.iterdir() if p.is_dir()))
    return found


@log_group.command("check")
@click.argument("dirs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
def check(dirs: tuple[Path, ...]) -> None:
    """Verify every segment under DIRS (data or partition directories) without changing anything.

    Exits 1 if any message is corrupt, naming its file, byte position and offset (one line per
    problem on stdout; progress goes to stderr); a partial message at the very end of a partition is
    reported as a torn write (recovery would cut it).
    """
    for directory in dirs:
        if data_dir_in_use(directory):
            raise click.ClickException(f"{directory} is in use by a running broker: stop it first")
    partitions = _partition_dirs(dirs)
    segments = [
        (partition, path)
        for partition in partitions
        for path in sorted(partition.iterdir())
        if parse_base_offset(path.name, LOG_SUFFIX) is not None
    ]
    total = sum(path.stat().st_size for _, path in segments)
    problems = 0
    with Progress(
        TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TimeRemainingColumn(), console=_err
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
            last = path == max((p for q, p in segments if q == partition), default=path)
            if result.error is not None:
                problems += 1
                offset = result.last_offset + 1 if result.entries else base
                click.echo(f"CORRUPT {path} at byte {result.error_position} (offset {offset}): {result.error}")
            elif result.valid_end != size:
                kind = "torn write" if last else "CORRUPT (sealed segment ends inside a message)"
                problems += 0 if last else 1
                click.echo(f"{kind}: {path} has {size - result.valid_end} bytes after its last message")
            progress.advance(task, size)
    click.echo(f"checked {len(segments)} segments in {len(partitions)} partitions: {problems} corrupt")
    if problems:
        sys.exit(1)


@log_group.command("truncate")
@click.argument("partition_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--to", "offset", type=click.IntRange(min=0), required=True, help="First offset to remove.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def truncate(partition_dir: Path, offset: int, yes: bool) -> None:
    """Remove every message of PARTITION_DIR at offset --to and after (e.g. a quarantined one)."""
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
            click.confirm(f"Remove {removed} message(s) from offset {offset} of {partition_dir}?", abort=True)
        log.truncate_to(offset)
        click.echo(f"{partition_dir} now ends at offset {log.log_end_offset}")
    finally:
        log.close()
