"""The pipeline file reference (docs/spec-reference.md), generated from the config classes.

    python -m pipelines.config.reference > docs/spec-reference.md

Role: one source of truth. Keys, types and defaults come from the frozen dataclasses themselves;
descriptions from their class docstrings and the docstring under each field (kafkalog.docgen reads
them, shared with the broker and mirror-maker reference). A test checks the file is up to date.
"""

from __future__ import annotations

import sys

from kafkalog.docgen import render, sections
from pipelines.config.pipeline import PipelineSpec


def reference() -> str:
    out = [
        "# Pipeline file reference",
        "",
        "Generated from the config classes by `python -m pipelines.config.reference > docs/spec-reference.md`;",
        "do not edit by hand. Every key is checked when the file loads (`pipelines lint FILE...`); errors",
        "name `file:key.path`. Strings may hold `${env:NAME}` references (secrets go there: their",
        "values never appear in errors or logs). Guides: docs/pipelines.md (the load) and",
        "docs/transforms.md (transforms, expectations, publish, Airflow).",
        "",
        *render(sections(PipelineSpec)),
    ]
    return "\n".join(out).rstrip() + "\n"


if __name__ == "__main__":
    sys.stdout.write(reference())
