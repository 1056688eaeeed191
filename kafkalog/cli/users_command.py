"""``kafkalog users``: the SASL users of a broker, kept salted and hashed in a users file.

Passwords are read from a prompt (not echoed) or from the first line of stdin
(``--password-stdin``, for scripts), never from the command line, where any user of the machine
could read them in the process list. The file holds SCRAM credentials only (see
kafkalog.server.security.credentials), what SASL logins are checked against (kafkalog.server.security.scram).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from kafkalog.cli.main import main
from kafkalog.cli.output import plural
from kafkalog.server.security.credentials import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    MECHANISMS,
    CredentialError,
    UsersFile,
)

FILE = click.option(
    "--file",
    "users_file",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The users file (the broker's sasl users file).",
)


def _users(path: Path) -> UsersFile:
    try:
        return UsersFile(path)
    except CredentialError as exc:
        raise click.ClickException(str(exc)) from exc


@main.group("users")
def users_group() -> None:
    """Add, list and remove the users SASL logins (PLAIN, SCRAM-SHA-256/512) are checked against."""


@users_group.command("add")
@click.argument("user")
@FILE
@click.option(
    "--mechanism",
    "mechanisms",
    multiple=True,
    type=click.Choice(list(MECHANISMS)),
    help="A credential for this SCRAM mechanism (default: both). PLAIN logins use any of them.",
)
@click.option(
    "--iterations",
    type=click.IntRange(4096, MAX_ITERATIONS),
    default=DEFAULT_ITERATIONS,
    show_default=True,
    help="PBKDF2 iterations of the salted password.",
)
@click.option("--password-stdin", is_flag=True, help="Read the password from the first line of stdin.")
def add(user: str, users_file: Path, mechanisms: tuple[str, ...], iterations: int, password_stdin: bool) -> None:
    """Add USER, or set a new password for USER (a new salt for each credential)."""
    if password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = click.prompt(f"password for {user}", hide_input=True, confirmation_prompt=True)
    users = _users(users_file)
    known = user in users.users()
    try:
        users.set_password(user, password, list(mechanisms or MECHANISMS), iterations)
    except CredentialError as exc:
        raise click.ClickException(str(exc)) from exc
    chosen = list(mechanisms or MECHANISMS)
    what = "new password for" if known else "added"
    click.echo(
        f"{what} {user} in {users_file} ({len(chosen)} {plural(len(chosen), 'credential')}: {', '.join(chosen)})"
    )


@users_group.command("list")
@FILE
def list_users(users_file: Path) -> None:
    """Every user and the SCRAM mechanisms it has a credential for (tab-separated)."""
    for user, mechanisms in _users(users_file).users().items():
        click.echo(f"{user}\t{','.join(mechanisms)}")


@users_group.command("remove")
@click.argument("user")
@FILE
def remove(user: str, users_file: Path) -> None:
    """Remove USER and its credentials."""
    try:
        removed = _users(users_file).remove(user)
    except CredentialError as exc:
        raise click.ClickException(str(exc)) from exc
    if not removed:
        raise click.ClickException(f"no user {user!r} in {users_file}")
    click.echo(f"removed {user} from {users_file}")
