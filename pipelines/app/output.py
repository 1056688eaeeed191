"""What the ``pipelines`` commands print on stdout: through one rich Console, made here.

On a terminal the Console has the terminal's width (tables fit it, long lines wrap). Piped or
redirected, rich would assume 80 columns and cut a table's run ids and paths short with an
ellipsis, or wrap a path mid-way, so a script reading the output would get pieces: there nothing
is cut or wrapped, each table is as wide as its content and each line as long as it is.
(``pipelines.progress`` owns what goes to stderr.)
"""

from __future__ import annotations

from rich.console import Console

UNLIMITED = 1_000_000
"""The width a Console off a terminal has: no table or line of ours comes near it."""


def stdout_console() -> Console:
    """A Console for stdout: the terminal's width, or when stdout is not a terminal, no limit."""
    console = Console()
    if console.is_terminal:
        return console
    return Console(width=UNLIMITED, soft_wrap=True)
