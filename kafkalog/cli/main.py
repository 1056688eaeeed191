"""The ``kafkalog`` command group; each sub-command lives in its own module of this package."""

from __future__ import annotations

import click


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kafkalog-pipelines", prog_name="kafkalog")  # looked up lazily
def main() -> None:
    """kafkalog: a Kafka-style broker and its tools."""
