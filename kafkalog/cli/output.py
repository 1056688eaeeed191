"""What every ``kafkalog`` command prints the same way: counts that agree with their noun, consoles
that do not cut lines at 80 columns in a pipe or a log file, and errors as ``error: <message>``."""

from __future__ import annotations

import sys

import click
from rich.console import Console

# A console that does not write to a terminal is given this width instead of rich's 80 columns:
# nobody reads a pipe or a log file in a narrow window, and a topic name alone may have 249
# characters, a path thousands. Nothing printed here expands to the width (no expanding tables,
# rules or panels), so a wide console pads nothing: lines are as long as what they say.
UNCUT_WIDTH = 1 << 16


def plural(count: int, singular: str, plural_form: str | None = None) -> str:
    """``singular`` for a count of 1, else the plural (``singular + "s"`` unless given):
    ``f"{n} {plural(n, 'message')}"`` reads "1 message", "0 messages", "2 messages"."""
    if count == 1:
        return singular
    return plural_form if plural_form is not None else singular + "s"


def console(*, stderr: bool = False) -> Console:
    """A rich console on stdout (or stderr): the terminal's width on a terminal, else uncut.

    Made per command run, not at import: the stream (and whether it is a terminal) is the one the
    command runs with, e.g. a test's captured stream."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(file=stream, width=None if stream.isatty() else UNCUT_WIDTH)


def show_error(exc: click.ClickException) -> None:
    """Print a click error the project's way, on stderr: for a usage error click's ``Usage:`` line
    and its ``Try ... --help`` hint first, then, always last, one line ``error: <message>``
    (click's own says ``Error: <message>``; the pipelines command says ``error:`` too)."""
    if type(exc).show not in (click.ClickException.show, click.UsageError.show):
        exc.show()  # an error that is not a message, e.g. the help shown for a bare group
        return
    if isinstance(exc, click.UsageError) and exc.ctx is not None:
        ctx = exc.ctx
        hint = ""
        if ctx.command.get_help_option(ctx) is not None:
            option = max(ctx.command.get_help_option_names(ctx), key=len)
            hint = f"Try '{ctx.command_path} {option}' for help.\n"
        click.echo(f"{ctx.get_usage()}\n{hint}", err=True, color=ctx.color)
    click.echo(f"error: {exc.format_message()}", err=True)
