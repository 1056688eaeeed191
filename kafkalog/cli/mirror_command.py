"""``kafkalog mirror``: mirror source clusters into a target until SIGTERM/SIGINT."""

from __future__ import annotations

from pathlib import Path

import click

from kafkalog.cli.main import main
from kafkalog.errors import KafkalogError


@main.command("mirror")
@click.option(
    "--config", "config_file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
    help="YAML configuration (see conf/mirror.yaml); flags override it.",
)  # fmt: skip
@click.option(
    "--source", "sources", multiple=True, metavar="BOOTSTRAP|zk:CONNECT",
    help="A source cluster: host:port[,host:port] or zk:host:port[/chroot] (repeatable).",
)  # fmt: skip
@click.option("--target", default=None, metavar="BOOTSTRAP|zk:CONNECT", help="The aggregate cluster.")
@click.option("--whitelist", default=None, metavar="REGEX", help="Topics to mirror (default: all but internal).")
@click.option("--blacklist", default=None, metavar="REGEX", help="Topics not to mirror.")
@click.option("--streams", type=click.IntRange(min=1), default=None, help="Consumer streams per source (ZooKeeper).")
@click.option("--group", default=None, help="Consumer group that records progress in the sources.")
@click.option("--on-gap", type=click.Choice(["fail", "continue"]), default=None, help="When retention got first.")
@click.option("--gap-file", type=click.Path(dir_okay=False), default=None, help="Where skipped ranges are recorded.")
@click.option("--compression", type=click.Choice(["preserve", "none", "gzip", "snappy"]), default=None)
@click.option("--start-from", type=click.Choice(["earliest", "latest"]), default=None, help="For a new group.")
@click.option("--commit-interval-ms", type=click.IntRange(min=1), default=None)
@click.option("--status-interval-ms", type=click.IntRange(min=0), default=None, help="0: no status lines.")
@click.option("--metrics-file", type=click.Path(dir_okay=False), default=None, help="Per-partition metrics (JSON).")
@click.option("--log-level", default="INFO", type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"]))
def mirror(
    config_file: Path | None, sources: tuple[str, ...], target: str | None, whitelist: str | None,
    blacklist: str | None, streams: int | None, group: str | None, on_gap: str | None, gap_file: str | None,
    compression: str | None, start_from: str | None, commit_interval_ms: int | None, status_interval_ms: int | None,
    metrics_file: str | None, log_level: str,
) -> None:  # fmt: skip
    """Mirror every matching topic of the source clusters into the target, committing source offsets
    only once the target acknowledged; new topics are picked up while running. SIGTERM or Ctrl-C
    stops gracefully (in-flight messages acknowledged, offsets committed, partitions released).

    \b
    kafkalog mirror --source 10.0.1.5:9092 --source 10.0.2.5:9092 --target 10.0.9.5:9092
    kafkalog mirror --source zk:zk-east:2181/kafka --target zk:zk-agg:2181/kafka --whitelist 'events\\..*'
    kafkalog mirror --config conf/mirror.yaml
    """
    import gc  # noqa: PLC0415
    import logging  # noqa: PLC0415 - only this command configures logging
    import signal  # noqa: PLC0415
    import threading  # noqa: PLC0415

    from kafkalog.mirror import Mirror, load_mirror_config  # noqa: PLC0415

    logging.basicConfig(level=log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # Up to hundreds of thousands of messages are in flight, each a few objects the cyclic collector
    # would scan again and again (measured: up to a fifth of the time); they hold no cycles.
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)
    overrides = {
        "sources": list(sources) or None, "target": target, "whitelist": whitelist, "blacklist": blacklist,
        "streams": streams, "group": group, "on_gap": on_gap, "gap_file": gap_file, "compression": compression,
        "start_from": start_from, "commit_interval_ms": commit_interval_ms, "status_interval_ms": status_interval_ms,
        "metrics_file": metrics_file,
    }  # fmt: skip
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    try:
        config = load_mirror_config(config_file, overrides)
        running = Mirror(config, status=lambda line: click.echo(line, err=True))
        click.echo(
            f"mirroring {', '.join(map(str, config.sources))} into {config.target} (group {config.group})", err=True
        )
        running.run(stop)
    except KafkalogError as exc:
        raise click.ClickException(str(exc)) from exc
