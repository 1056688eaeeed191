"""``kafkalog registry``: run a schema registry (Confluent's REST API) in the foreground; and
``kafkalog registry-user``: add a user to its basic-authentication users file."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from kafkalog.cli.main import main
from kafkalog.errors import KafkalogError


@main.command("registry")
@click.option(
    "--config", "config_file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
    help="YAML configuration (see conf/registry.yaml); flags override it.",
)  # fmt: skip
@click.option("--bootstrap", default=None, metavar="HOST:PORT[,HOST:PORT]", help="The cluster that holds the topic.")
@click.option("--host", default=None, help="Address to listen on (default 127.0.0.1).")
@click.option("--port", type=click.IntRange(0, 65535), default=None, help="Port to listen on (default 8081; 0: any).")
@click.option("--advertised-url", default=None, help="The URL other registries forward writes to.")
@click.option("--topic", default=None, help="The topic that holds the state (default _schemas).")
@click.option("--group", default=None, help="The group the registries elect their primary in.")
@click.option("--leader-eligibility/--no-leader-eligibility", default=None, help="May this one be primary?")
@click.option("--log-level", default="INFO", type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"]))
def registry(
    config_file: Path | None, bootstrap: str | None, host: str | None, port: int | None, advertised_url: str | None,
    topic: str | None, group: str | None, leader_eligibility: bool | None, log_level: str,
) -> None:  # fmt: skip
    """Serve Confluent's schema registry REST API, its state in a compacted topic of the cluster,
    until SIGTERM or SIGINT (Ctrl-C). Several registries on one topic elect one primary; the
    others forward writes to it (docs/schema-registry.md).

    \b
    kafkalog registry --bootstrap 127.0.0.1:9092
    kafkalog registry --config conf/registry.yaml
    """
    import logging  # noqa: PLC0415 - only the servers configure logging
    import signal  # noqa: PLC0415
    import threading  # noqa: PLC0415

    try:
        from kafkalog.schema_registry.app import RegistryApp  # noqa: PLC0415 - only this command runs it
        from kafkalog.schema_registry.config import load_registry_config  # noqa: PLC0415
    except ImportError as exc:  # the schema formats' libraries are an extra
        raise click.ClickException(
            f"kafkalog registry needs the schemas extra: pip install 'kafkalog-pipelines[schemas]' ({exc})"
        ) from exc

    logging.basicConfig(level=log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    overrides = {
        "bootstrap": bootstrap, "host": host, "port": port, "advertised_url": advertised_url, "topic": topic,
        "group": group, "leader_eligibility": leader_eligibility,
    }  # fmt: skip
    try:
        config = load_registry_config(config_file, overrides)
        app = RegistryApp(config)
    except (KafkalogError, OSError) as exc:  # OSError: the port cannot be bound
        raise click.ClickException(str(exc)) from exc
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    try:
        app.start()
    except (KafkalogError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"kafkalog registry listening on {app.url} (topic {config.topic} at {config.bootstrap})", err=True)
    try:
        stop.wait()
    finally:
        app.stop()


@main.command("registry-user")
@click.argument("user")
@click.option(
    "--file", "users_file", required=True, type=click.Path(dir_okay=False, path_type=Path),
    help="The registry's users file (its users_file setting).",
)  # fmt: skip
@click.option("--password-stdin", is_flag=True, help="Read the password from the first line of stdin.")
def registry_user(user: str, users_file: Path, password_stdin: bool) -> None:
    """Add USER to a registry's users file, or give USER a new password (salted and hashed; the
    registry reads the file at start)."""
    from kafkalog.schema_registry.auth import hash_password, set_user  # noqa: PLC0415

    if password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = click.prompt(f"password for {user}", hide_input=True, confirmation_prompt=True)
    if not password:
        raise click.ClickException("the password may not be empty")
    try:
        replaced = set_user(users_file, user, hash_password(password))
    except (KafkalogError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"{'new password for' if replaced else 'added'} {user} in {users_file}")
