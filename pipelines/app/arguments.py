"""What every ``pipelines`` command does with its arguments: read the pipeline file (an invalid one
exits 2 with its ``file:key.path`` error), check its transforms' SQL before a run (a step that
cannot run exits 2 the same way, pipelines.config.sqlcheck), and turn ``--conf KEY=VALUE`` options
into settings. Shared by pipelines.app.cli and pipelines.app.tables."""

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


def transforms_checked(spec: PipelineSpec, path: str, *, quiet: bool = False) -> None:
    """Before a run loads anything: exit 2 if the SQL of a transform surely cannot run (each
    error an ``error: file:key.path: reason`` line, as for an invalid file); print the warnings
    (what cannot be checked) unless ``quiet``. Parsing takes milliseconds; no JVM."""
    if not spec.transforms:
        return
    from pipelines.config.sqlcheck import check_transforms  # noqa: PLC0415 - sqlglot only for pipelines with SQL

    findings = check_transforms(spec.transforms, spec.outputs, path)
    for finding in findings:
        if finding.error:
            click.echo(f"error: {finding.render(path)}", err=True)
        elif not quiet:
            click.echo(finding.render(path), err=True)
    if any(finding.error for finding in findings):
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
