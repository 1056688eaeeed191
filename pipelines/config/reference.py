"""The pipeline file reference (docs/spec-reference.md), generated from the config classes.

    python -m pipelines.config.reference > docs/spec-reference.md

Role: one source of truth. Keys, types and defaults come from the frozen dataclasses themselves;
descriptions from their class docstrings and the docstring under each field, and the rules every
file obeys from the loader that reads it (kafkalog.configfile, shared with the broker's and the
mirror-maker's reference). A test checks the file is up to date.
"""

from __future__ import annotations

import sys

from kafkalog.configfile.reference import render, rules, sections
from pipelines.config.pipeline import PipelineSpec


def reference() -> str:
    out = [
        "# Pipeline file reference",
        "",
        "Generated from the config classes by `python -m pipelines.config.reference > docs/spec-reference.md`;",
        "do not edit by hand. Every key is checked when the file loads (`pipelines lint FILE...`), by the",
        "loader that reads the broker's and the mirror-maker's files too (docs/config-reference.md):",
        "",
        *rules(),
        "Guides: docs/pipelines.md (the load) and docs/transforms.md (transforms, expectations, publish,",
        "Airflow).",
        "",
        *render(sections(PipelineSpec)),
    ]
    return "\n".join(out).rstrip() + "\n"


if __name__ == "__main__":
    sys.stdout.write(reference())
