"""``kafkalog broker``: run one broker in the foreground."""

from __future__ import annotations

from pathlib import Path

import click

from kafkalog.cli.main import main
from kafkalog.errors import KafkalogError


@main.command("broker")
@click.option(
    "--config",
    "config_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="YAML configuration (see conf/broker.yaml); flags override it.",
)
@click.option("--port", type=click.IntRange(0, 65535), default=None, help="Port to listen on (0: any free port).")
@click.option("--host", default=None, help="Address to listen on (default 127.0.0.1).")
@click.option(
    "--data-dir", "data_dirs", multiple=True, type=click.Path(file_okay=False), help="Data directory (repeatable)."
)
@click.option("--broker-id", type=click.IntRange(min=0), default=None)
@click.option(
    "--zookeeper",
    default=None,
    metavar="HOST:PORT[/CHROOT]",
    help="Join the cluster registered in this ZooKeeper (host:port[,host:port...][/chroot]).",
)
@click.option("--log-level", default="INFO", type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"]))
def broker(
    config_file: Path | None, port: int | None, host: str | None, data_dirs: tuple[str, ...], broker_id: int | None,
    zookeeper: str | None, log_level: str,
) -> None:  # fmt: skip
    """Run one broker in the foreground until SIGTERM or SIGINT (Ctrl-C), then stop cleanly."""
    import logging  # noqa: PLC0415 - the other commands do not configure logging
    import signal  # noqa: PLC0415
    import threading  # noqa: PLC0415

    from kafkalog.server import Broker, load_config  # noqa: PLC0415 - only this command runs a server

    logging.basicConfig(level=log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    overrides = {
        "port": port, "host": host, "broker_id": broker_id, "data_dirs": list(data_dirs) or None,
        "zookeeper": zookeeper,
    }  # fmt: skip
    try:
        config = load_config(config_file, overrides)
        server = Broker(config)
    except KafkalogError as exc:
        raise click.ClickException(str(exc)) from exc
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    try:
        server.start()
    except KafkalogError as exc:
        raise click.ClickException(str(exc)) from exc
    listening = ", ".join(
        f"{listener.host}:{listener.port} ({listener.name})" for listener in server.config.listener_specs
    )
    click.echo(f"kafkalog broker {server.config.broker_id} listening on {listening}", err=True)
    try:
        stop.wait()
    finally:
        server.stop()
