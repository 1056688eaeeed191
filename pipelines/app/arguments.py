"""What every ``pipelines`` command does with its arguments: read the pipeline file (an invalid one
exits 2 with its ``file:key.path`` error) and turn ``--conf KEY=VALUE`` options into settings.
Shared by pipelines.app.cli and pipelines.app.tables. (A run's checks before Spark starts, its
transforms' SQL first, are pipelines.app.runner.submit's.)"""

from __future__ import annotations

import sys

import click

from pipelines.app.runner import EXIT_BAD_SPEC
from pipelines.config.pipeline import PipelineSpec, load_spec
from pipelines.errors import SpecError


def pipeline_file(path: str) -> PipelineSpec:
    """The pipeline at ``path``; exits 2 with its error if the file is invalid."""
    try:
        return load_spec(path)
    except SpecError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_BAD_SPEC)


def conf_settings(conf: tuple[str, ...]) -> dict[str, str]:
    """``--conf KEY=VALUE`` options as Spark settings."""
    settings = {}
    for item in conf:
        key, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="--conf")
        settings[key] = value
    return settings
