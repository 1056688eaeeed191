"""The flow's validation: each output's great-expectations gate on its step's staged rows.

Role: per output, the expectations (pipelines.flow.expect) on the staged rows of its step, and the
rows that pass staged for publishing under ``<output>/_staging/<pipeline>-<seq>/`` (``output_staging_dir``).
Policy fail: a failing check stops the run, nothing of it is staged. Policy quarantine: failing
rows go to ``<output>/_quarantine/seq=<seq>/`` with their reasons, the rest is staged, within
``max_quarantine_share``. Results are kept as JSON under ``<raw>/_pipeline/flow/<seq>/validation/``
(pipelines.ledger.paths.validation_record): GX's on the rows it validated (the rows kept, under
quarantine) and, under ``loaded``, every check on the rows as loaded (expect.Loaded).

Invariants: a validation first removes what an earlier validation of the same run staged or
quarantined, so a failing one never leaves rows an earlier one let through; its results are
written whether it passes or fails.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from rich.markup import escape

from pipelines.config.pipeline import PipelineSpec
from pipelines.config.steps import Output
from pipelines.errors import FlowError, ValidationError
from pipelines.flow import expect
from pipelines.ledger import paths
from pipelines.ledger.state import PipelineState
from pipelines.progress import Reporter, counted
from pipelines.storage import Storage


def run_tag(pipeline: str, seq: int) -> str:
    """How an output's working directories name the flow of load #seq (``<pipeline>-<seq>``)."""
    return f"{pipeline}-{seq:06d}"


def output_staging_dir(pipeline: str, seq: int, output: Output) -> str:
    """Where the validation of load #seq stages the rows ``output`` publishes."""
    return f"{output.path.rstrip('/')}/_staging/{run_tag(pipeline, seq)}"


class Validator:
    """The gates of ``spec``'s outputs, run by ``spark``; results recorded beside ``state``, rows
    staged through ``storage_of`` (an output path → its storage)."""

    def __init__(
        self,
        spec: PipelineSpec,
        spark: Any,
        state: PipelineState,
        reporter: Reporter,
        storage_of: Callable[[str], Storage],
    ) -> None:
        self.spec = spec
        self.spark = spark
        self.state = state
        self.reporter = reporter
        self.storage_of = storage_of

    def validate_output(self, seq: int, output: Output) -> expect.Validation:
        """Check ``output``'s staged step rows of run ``seq`` and stage what passes under
        ``<output>/_staging/<pipeline>-<seq>/`` (see the module doc)."""
        where = paths.step_dir(self.state.root, seq, output.source)
        if not self.state.storage.exists(f"{where}/_SUCCESS"):
            raise FlowError(f"output {output.name} needs step {output.source} of run #{seq}, which has not run")
        frame = self.spark.read.parquet(where)
        missing = [c for c in output.partition_by if c not in frame.columns]
        if missing:
            raise FlowError(
                f"output {output.name}: step {output.source} has no column {missing[0]!r} "
                f"(partition_by {list(output.partition_by)} needs it)"
            )
        staged = output_staging_dir(self.spec.name, seq, output)
        quarantine_dir = f"{output.path.rstrip('/')}/_quarantine/seq={seq:06d}"
        storage = self.storage_of(output.path)
        # what an earlier validation of this run staged must not survive a failing one
        storage.delete(staged, recursive=True)
        storage.delete(quarantine_dir, recursive=True)
        policy = {"on_failure": output.on_failure}
        if output.on_failure == "quarantine" and output.expectations:
            try:
                with expect.split_for_quarantine(
                    frame, output.expectations, output.name, output.max_quarantine_share
                ) as (good, bad, validation):
                    assert validation.loaded is not None and validation.loaded.failing is not None  # a split sets both
                    if validation.loaded.failing:
                        bad.write.mode("overwrite").option("compression", output.compression).parquet(quarantine_dir)
                    self._stage(good, output, staged)
            except expect.QuarantineRefused as exc:
                kept = exc.kept.to_json() if exc.kept is not None else {"output": output.name}
                record = {**kept, **policy, "success": False, "error": str(exc), "quarantined": 0}
                self._save_validation(seq, output, {**record, "loaded": exc.loaded.to_json()})
                raise
        else:
            # GX on the rows as loaded (policy fail), and a few values of what failed
            validation = expect.as_loaded(
                frame, output.expectations, expect.validate(frame, output.expectations, output.name)
            )
            if not validation.success:
                self._save_validation(seq, output, {**validation.to_json(), **policy, "quarantined": 0})
                assert validation.loaded is not None  # as_loaded's
                checks = zip(validation.checks, validation.loaded.checks, strict=True)
                failed = [(c, loaded) for c, loaded in checks if not c.success]
                raise ValidationError(
                    f"output {output.name} of run #{seq}: {counted(len(failed), 'expectation')} failed: "
                    + "; ".join(f"{c.expectation}: {c.observed}{_for_example(loaded)}" for c, loaded in failed[:5])
                    + " (nothing of this run is published)"
                )
            self._stage(frame, output, staged)
        quarantined = validation.loaded.failing if validation.loaded is not None else None
        self._save_validation(seq, output, {**validation.to_json(), **policy, "quarantined": quarantined or 0})
        note_validation(self.reporter, output.name, validation)
        return validation

    @staticmethod
    def _stage(frame: Any, output: Output, staged: str) -> None:
        """Write the rows ``output`` publishes under its staging directory ``staged``."""
        frame.write.mode("overwrite").partitionBy(*output.partition_by).option(
            "compression", output.compression
        ).parquet(staged)

    def _save_validation(self, seq: int, output: Output, document: dict[str, Any]) -> None:
        path = paths.validation_record(self.state.root, seq, output.name)
        self.state.storage.delete(path)
        self.state.storage.write_new(path, json.dumps(document, indent=1, default=str).encode())


def note_validation(reporter: Reporter, output: str, validation: expect.Validation) -> None:
    """Print :func:`validation_line` as it is written: on a console, rich would take a pattern's
    ``[a-z]`` for markup and drop it; a log (quiet) gets the text itself."""
    line = validation_line(output, validation)
    reporter.note(line if reporter.quiet else escape(line))


def validation_line(output: str, validation: expect.Validation) -> str:
    """The line a validation prints: the rows as loaded, which checks fail on them and how many
    rows each (the quarantine took them out), and GX's verdict on the rows kept (published)."""
    total = len(validation.checks)
    if not total:
        return f"output {output}: {validation.rows:,} rows (no expectations)"
    every = "its 1 check" if total == 1 else f"all {total} checks"
    loaded = validation.loaded
    if loaded is None or loaded.failing is None:  # policy fail: GX judged the rows as loaded
        return f"output {output}: {validation.rows:,} rows as loaded pass {every}"
    if not loaded.failing:
        return f"output {output}: {loaded.rows:,} rows as loaded pass {every}, none quarantined"
    failing = ", ".join(f"{c.expectation} fails {c.unexpected:,}" for c in loaded.checks if c.unexpected)
    return (
        f"output {output}: {loaded.rows:,} rows as loaded, {loaded.failing:,} quarantined ({failing}); "
        f"the {validation.rows:,} rows kept pass {every}"
    )


def _for_example(loaded: expect.LoadedCheck) -> str:
    """A few failing values for an error message (already cut short and escaped by expect)."""
    values = [sample.value for sample in loaded.samples[:3]]
    return f", e.g. {', '.join(values)}" if values else ""
