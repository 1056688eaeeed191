"""The ``pipelines`` command line: run a load, check pipeline files, show state and offsets.

``run`` starts a local Spark session (spark-submit users run jobs/load_warehouse.py instead, which
shares everything below). ``status`` and ``offsets`` read the manifests through the storage
interface, without Spark. Exit codes: 0 committed (or nothing to do), 1 the run failed (the error
names its cause), 2 bad usage or an invalid pipeline file, 3 another run of the pipeline won.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from pipelines.errors import ConcurrentRunError, PipelineError, SpecError
from pipelines.spec import PipelineSpec, load_spec
from pipelines.state import PipelineState
from pipelines.storage import storage_for

EXIT_FAILED = 1
EXIT_BAD_SPEC = 2
EXIT_CONCURRENT = 3


def _spec(path: str) -> PipelineSpec:
    try:
        return load_spec(path)
    except SpecError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_BAD_SPEC)


def run_job(spec: PipelineSpec, spark: Any, *, run_id: str | None, replan: bool, quiet: bool = False) -> int:
    """Run ``spec`` on ``spark`` and report; returns the process exit code (shared with spark-submit)."""
    from pipelines.load import PipelineRun  # noqa: PLC0415 - Spark-side imports only when running
    from pipelines.progress import Reporter  # noqa: PLC0415

    reporter = Reporter(quiet=quiet)
    try:
        result = PipelineRun(spec, spark, reporter=reporter).run(run_id=run_id, replan=replan)
    except ConcurrentRunError as exc:
        click.echo(f"error: {exc}", err=True)
        return EXIT_CONCURRENT
    except PipelineError as exc:
        click.echo(f"error: {exc}", err=True)
        return EXIT_FAILED
    if result.message:
        reporter.note(result.message)
    return 0


STAGES = ("all", "load", "transforms", "validate", "publish")


def run_stage(
    spec: PipelineSpec,
    spark: Any,
    stage: str,
    *,
    run_id: str | None,
    step: str | None = None,
    replan: bool = False,
    quiet: bool = False,
) -> int:
    """One stage of a pipeline (``all``: the load, then, if the file has outputs, its transforms,
    validation and publish); returns the exit code. Shared by ``pipelines run``, the spark-submit
    job and the Airflow tasks."""
    from pipelines.flow import FlowRun  # noqa: PLC0415
    from pipelines.progress import Reporter  # noqa: PLC0415

    if stage in ("all", "load"):
        code = run_job(spec, spark, run_id=run_id, replan=replan, quiet=quiet)
        if code or stage == "load" or not spec.outputs:
            return code
    reporter = Reporter(quiet=quiet)
    try:
        flow = FlowRun(spec, spark, reporter=reporter)
        seq = flow.seq_for(run_id)
        if seq is None:
            reporter.note(f"run {run_id} loaded nothing and nothing was loaded before it: nothing to do")
            return 0
        if stage == "all":
            flow.run_all(seq)
        elif stage == "transforms":
            if step is not None:
                flow.run_step(seq, step)
            else:
                from pipelines.flowspec import topological_order  # noqa: PLC0415

                for each in topological_order(spec.transforms):
                    flow.run_step(seq, each.name)
        elif stage == "validate":
            flow.validate(seq)
        elif stage == "publish":
            flow.publish(seq)
        else:
            raise PipelineError(f"unknown stage {stage!r} (stages: {', '.join(STAGES)})")
    except PipelineError as exc:
        click.echo(f"error: {exc}", err=True)
        return EXIT_FAILED
    return 0


def done_already(spec: PipelineSpec, stage: str, run_id: str | None) -> str | None:
    """Why ``stage`` of run ``run_id`` has nothing to do, found from the state files alone (no
    Spark session needed: a retried Airflow task of a finished run returns in seconds); None if it
    may have work, or if the state cannot be read without Spark (the normal path then decides)."""
    if run_id is None:
        return None
    try:
        state = _state(spec)
        recorded, _ = state.run_record(run_id)  # written once the load and its raw publish finished
        if not recorded:
            return None
        if stage == "load" or not spec.outputs:
            return f"run {run_id} finished before"
        target = state.run_target(run_id)
        if target is None:
            return f"run {run_id} loaded nothing, and nothing was loaded before it"
        from pipelines.flow import published_marker  # noqa: PLC0415 - only for pipelines with outputs

        if all(state.storage.exists(published_marker(spec.raw.path, target, o.name)) for o in spec.outputs):
            return f"run {run_id} (#{target}) is loaded and published"
    except PipelineError:
        return None
    return None


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(
    package_name="kafkalog-pipelines", prog_name="pipelines"
)  # looked up lazily: a shipped zip has no metadata
def main() -> None:
    """Plan, load, inspect and replay pipelines."""


@main.command()
@click.argument("pipeline", type=click.Path(exists=True, dir_okay=False))
@click.option("--master", default="local[*]", show_default=True, help="Spark master for the local session.")
@click.option(
    "--run-id", default=None, help="Name this run (e.g. the Airflow logical date); a committed run id is a no-op."
)
@click.option("--replan", is_flag=True, help="Discard a stored plan that was not committed and plan again.")
@click.option("--conf", "conf", multiple=True, metavar="KEY=VALUE", help="Extra Spark settings.")
@click.option("--quiet", is_flag=True, help="No progress or summary; errors only.")
@click.option(
    "--stage",
    type=click.Choice(STAGES),
    default="all",
    show_default=True,
    help="all: load, then transforms, validation and publish if PIPELINE has outputs; or one stage alone "
    "(of the load committed as --run-id, else the newest).",
)
@click.option("--step", default=None, help="With --stage transforms: only this step.")
def run(
    pipeline: str,
    master: str,
    run_id: str | None,
    replan: bool,
    conf: tuple[str, ...],
    quiet: bool,
    stage: str,
    step: str | None,
) -> None:
    """Load the new messages of PIPELINE into its raw layer, exactly once, then build its outputs."""
    spec = _spec(pipeline)
    settings = {}
    for item in conf:
        key, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="--conf")
        settings[key] = value
    from pipelines.session import local_session  # noqa: PLC0415

    spark = local_session(master, f"pipelines-{spec.name}", settings)
    try:
        code = run_stage(spec, spark, stage, run_id=run_id, step=step, replan=replan, quiet=quiet)
    finally:
        spark.stop()
    sys.exit(code)


@main.command()
@click.argument("pipelines", nargs=-1, required=True, type=click.Path(dir_okay=False))
def lint(pipelines: tuple[str, ...]) -> None:
    """Check pipeline files without running anything: every error is printed as file:key.path:
    reason (unknown, duplicate or missing keys, wrong types, unknown steps, cycles). Exit 2 if any
    file is invalid."""
    bad = 0
    for path in pipelines:
        try:
            spec = load_spec(path)
        except SpecError as exc:
            bad += 1
            click.echo(f"{exc}", err=True)
            continue
        steps, outputs = len(spec.transforms), len(spec.outputs)
        click.echo(
            f"{path}: ok ({spec.name}: {steps} transform{'s' * (steps != 1)}, {outputs} output{'s' * (outputs != 1)})"
        )
    if bad:
        click.echo(f"{bad} of {len(pipelines)} pipeline file{'s' * (len(pipelines) != 1)} invalid", err=True)
        sys.exit(EXIT_BAD_SPEC)


def _state(spec: PipelineSpec) -> PipelineState:
    return PipelineState(storage_for(spec.raw.path, webhdfs_url=spec.raw.webhdfs_url), spec.raw.path)


@main.command()
@click.argument("pipeline", type=click.Path(exists=True, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def status(pipeline: str, as_json: bool) -> None:
    """The last committed run of PIPELINE and any run that was planned but not committed."""
    spec = _spec(pipeline)
    try:
        state = _state(spec)
        latest = state.latest()
        pending = state.pending_plan()
    except PipelineError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_FAILED)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "pipeline": spec.name,
                    "last_run": None if latest is None else json.loads(latest.dumps()),
                    "pending_plan": None if pending is None else pending.to_json(),
                },
                indent=1,
            )
        )
        return
    console = Console()
    if latest is None:
        console.print(f"{spec.name}: no run committed yet ({spec.raw.path})")
    else:
        rows = sum(s.rows for s in latest.splits)
        quarantined = sum(s.quarantined for s in latest.splits)
        console.print(
            f"{spec.name}: last run {latest.run_id} committed as #{latest.seq} at {latest.committed_at}: "
            f"{rows:,} rows, {quarantined:,} quarantined, {len(latest.files)} files",
            highlight=False,
        )
        lost = [s for s in latest.splits if s.lost_from is not None]
        for s in lost:
            console.print(f"  data loss recorded: {s.topic}-{s.partition} offsets [{s.lost_from}, {s.lost_to})")
    if pending is not None:
        console.print(
            f"pending: run {pending.run_id} (#{pending.seq}) planned {pending.created_at}, {pending.total:,} "
            "messages, not committed; the next run completes it",
            highlight=False,
        )


@main.command()
@click.argument("pipeline", type=click.Path(exists=True, dir_okay=False))
@click.option("--lag", is_flag=True, help="Also ask the brokers for each split's log end and show the lag.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def offsets(pipeline: str, lag: bool, as_json: bool) -> None:
    """The committed offsets of PIPELINE: per split, the next offset a run loads."""
    spec = _spec(pipeline)
    try:
        committed = _state(spec).committed_offsets()
        ends: dict[tuple[str, int], int] = {}
        if lag:
            from pipelines.plan import open_consumer  # noqa: PLC0415 - the client only when brokers are asked

            with open_consumer(spec.source) as consumer:  # the bootstrap list, or bootstrapped from ZooKeeper
                for topic, partition in committed:
                    ends[(topic, partition)] = consumer.latest_offset(topic, partition)
    except (PipelineError, Exception) as exc:  # the client raises kafkalog errors: report, do not trace
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_FAILED)
    items = [
        {"topic": t, "partition": p, "offset": o, **({"log_end": ends[(t, p)], "lag": ends[(t, p)] - o} if lag else {})}
        for (t, p), o in sorted(committed.items())
    ]
    if as_json:
        click.echo(json.dumps(items, indent=1))
        return
    table = Table(title=f"{spec.name}: committed offsets", title_justify="left")
    for column in ("topic", "partition", "offset", *(("log end", "lag") if lag else ())):
        table.add_column(column, justify="left" if column == "topic" else "right")
    for item in items:
        table.add_row(*(str(v) for v in item.values()))
    Console().print(table)
    if not items:
        click.echo("no run committed yet")
