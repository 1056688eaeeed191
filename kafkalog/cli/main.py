"""The ``kafkalog`` command group; each sub-command lives in its own module of this package."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import click

from kafkalog.cli.output import show_error


class _Commands(click.Group):
    """The top-level group: click's standalone mode (exit codes, ``--help``, Ctrl-C), except that a
    click error ends with the line ``error: <message>`` on stderr (kafkalog.cli.output.show_error)."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:  # the caller handles click's exceptions itself
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            # Click then raises its errors instead of printing them, and handles the rest as in
            # standalone mode (a broken pipe exits 1, Ctrl-C becomes Abort).
            result = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.ClickException as exc:
            show_error(exc)
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo("Aborted!", err=True)  # what click says: a declined confirmation, Ctrl-C
            sys.exit(1)
        except (EOFError, KeyboardInterrupt):  # arrived during click's own teardown
            sys.exit(1)
        # A command's return value (None for every command here), or the code of an explicit exit
        # (--help, --version and ctx.exit(n) return theirs).
        sys.exit(result if isinstance(result, int) else 0)


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kafkalog-pipelines", prog_name="kafkalog")  # looked up lazily
def main() -> None:
    """kafkalog: a Kafka-style broker and its tools."""
