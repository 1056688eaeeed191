"""The ``pipelines`` command line. Commands arrive with the load job; today it reports its version."""

from __future__ import annotations

from importlib.metadata import version

import click


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(version("kafkalog-pipelines"), prog_name="pipelines")
def main() -> None:
    """Plan, load, inspect and replay pipelines."""
