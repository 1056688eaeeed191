"""The ``pipelines`` command line, and the spark-submit job's (jobs/load_warehouse.py) with it.

``run`` and ``rewind`` start a local Spark session (``run`` only if the state files do not show the
stage done already: ``done`` asks that alone); the spark-submit job (``spark_submit_main``) takes
the session spark-submit made and the same options (``--stage``, ``--run-id``, ``--to-time`` …), so
there is one vocabulary and one runner (pipelines.app.runner) behind both. ``status``, ``offsets``,
``report``, ``location``, ``done`` and ``gc`` read the manifests through the tools' storage, without Spark.
Exit codes: 0 committed (or nothing to do), 1 the run failed (the error names its cause), 2 bad
usage or an invalid pipeline file (its transforms' SQL included), 3 another run of the pipeline won.
Every error ends in one ``error: ...`` line on stderr, click's own (bad usage) too.

Before a run starts Spark it checks, in about a second: the transforms' SQL (``lint``'s check;
exit 2) and, for a stage that loads, that the source answers and has the topics (exit 1).
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click
from rich.table import Table

from pipelines.app import runner
from pipelines.app.arguments import conf_settings, pipeline_file
from pipelines.app.output import stdout_console
from pipelines.app.runner import EXIT_BAD_SPEC, EXIT_FAILED, STAGES, state_of
from pipelines.app.tables import COMMANDS as TABLE_COMMANDS
from pipelines.config.pipeline import PipelineSpec, load_spec
from pipelines.errors import PipelineError, SpecError
from pipelines.logs import LEVELS, configure_logging
from pipelines.reporting.status import held_back, print_status, status_document

_Command = TypeVar("_Command", bound=Callable[..., Any])


def _exit_on(exc: PipelineError) -> NoReturn:
    sys.exit(runner.fail(exc))


class _ErrorLine(click.Command):
    """A command whose click errors (bad usage, a missing file, an option's bad value) end in the
    line ``error: <message>`` every error of pipelines ends in, instead of click's ``Error: ...``;
    the usage lines click prints first stay."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            return super().main(args, prog_name, complete_var, False, **extra)
        except click.ClickException as exc:
            shown = io.StringIO()
            exc.show(file=shown)
            lines = shown.getvalue().splitlines()
            for index, line in enumerate(lines):
                if line.startswith("Error: "):  # click's last line; its message may go on below
                    lines[index] = "error: " + line[len("Error: ") :]
                    break
            else:
                lines.append(f"error: {exc.format_message()}")
            click.echo("\n".join(lines), err=True)
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:
            click.echo("error: aborted", err=True)
            sys.exit(1)


class _ErrorLineGroup(_ErrorLine, click.Group):
    """The ``pipelines`` group, with _ErrorLine's errors for every subcommand."""


def _set_log_level(ctx: click.Context, param: click.Parameter, value: str | None) -> str:
    try:
        return configure_logging(value)
    except PipelineError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from exc


def _options(*decorators: Callable[[_Command], _Command]) -> Callable[[_Command], _Command]:
    def apply(command: _Command) -> _Command:
        for decorator in reversed(decorators):
            command = decorator(command)
        return command

    return apply


LOG_LEVEL = click.option(
    "--log-level",
    type=click.Choice(LEVELS, case_sensitive=False),
    default=None,
    callback=_set_log_level,
    expose_value=False,
    is_eager=True,
    help="Log level of pipelines' own log lines (default: $PIPELINES_LOG_LEVEL, else WARNING).",
)

SESSION = _options(
    click.option("--master", default="local[*]", show_default=True, help="Spark master for the local session."),
    click.option("--conf", "conf", multiple=True, metavar="KEY=VALUE", help="Extra Spark settings."),
)
"""The local session ``run`` and ``rewind`` start (the spark-submit job gets spark-submit's)."""

STAGE = _options(
    click.option(
        "--run-id", default=None, help="Name this run (e.g. the Airflow logical date); a committed run id is a no-op."
    ),
    click.option("--replan", is_flag=True, help="Discard a stored plan that was not committed and plan again."),
    click.option(
        "--stage",
        type=click.Choice(STAGES),
        default="all",
        show_default=True,
        help="all: load, then transforms, validation and publish if the pipeline has outputs; or one stage alone "
        "(of the load committed as --run-id, else the newest).",
    ),
    click.option("--step", default=None, help="With --stage transforms: only this step."),
    click.option("--quiet", is_flag=True, help="No progress or summary; errors only."),
    LOG_LEVEL,
)
"""What runs: the options of ``pipelines run`` and of the spark-submit job alike."""

REWIND = _options(
    click.option(
        "--to-time", default=None, help="Reload every message from this time on (ISO 8601, UTC unless it says)."
    ),
    click.option(
        "--to-offsets", default=None, type=click.Path(exists=True, dir_okay=False), help="A JSON file: split → offset."
    ),
    click.option("--to-run", default=None, help="Reload everything this committed run and the later ones loaded."),
    click.option("--dry-run", is_flag=True, help="Print the plan only: ranges, partitions, outputs, retention."),
    click.option("--abandon", is_flag=True, help="Drop a replay that died before committing, with what it wrote."),
    click.option("--json", "as_json", is_flag=True, help="With --dry-run: the plan as JSON."),
    click.option(
        "--schema",
        type=click.Choice(["recorded", "latest"]),
        default="recorded",
        show_default=True,
        help="Schema'd values: read with the reader schemas the replaced runs recorded (by id), or the subjects' "
        "latest (checked as the next load's would be).",
    ),
)
"""Where a replay rewinds to: the options of ``pipelines rewind`` and of the spark-submit job alike."""


@click.group(cls=_ErrorLineGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(
    package_name="kafkalog-pipelines", prog_name="pipelines"
)  # looked up lazily: a shipped zip has no metadata
@LOG_LEVEL
def main() -> None:
    """Plan, load, inspect and replay pipelines."""


for _command in TABLE_COMMANDS:
    main.add_command(_command)


@main.command()
@click.argument("pipeline", type=click.Path(exists=True, dir_okay=False))
@SESSION
@STAGE
def run(
    pipeline: str,
    master: str,
    conf: tuple[str, ...],
    run_id: str | None,
    replan: bool,
    stage: str,
    step: str | None,
    quiet: bool,
) -> None:
    """Load the new messages of PIPELINE into its raw layer, exactly once, then build its outputs.
    Before Spark starts: the transforms' SQL is checked (as `pipelines lint` does; exit 2) and, for
    a stage that loads, the source's brokers must answer and have the topics (exit 1). A failed
    run's error line names the file with Spark's log and every stack trace."""
    spec = pipeline_file(pipeline)
    settings = conf_settings(conf)
    app_name = f"pipelines-{spec.name}"
    _exit_with(
        lambda: runner.submit(
            spec, pipeline, stage, lambda: _local(master, settings, spec, app_name),
            run_id=run_id, step=step, replan=replan, quiet=quiet,
        )
    )  # fmt: skip


@main.command()
@click.argument("pipeline", type=click.Path(exists=True, dir_okay=False))
@REWIND
@SESSION
@click.option("--quiet", is_flag=True, help="Errors only.")
def rewind(
    pipeline: str,
    to_time: str | None,
    to_offsets: str | None,
    to_run: str | None,
    dry_run: bool,
    abandon: bool,
    as_json: bool,
    schema: str,
    master: str,
    conf: tuple[str, ...],
    quiet: bool,
) -> None:
    """Rewind PIPELINE and replay: reload from a time, offsets or a run into a new generation of the
    raw layer, recompute the affected partitions of every output, validate, and switch every reader
    to the new generation in one step (the old one stays until `pipelines gc`)."""
    spec = pipeline_file(pipeline)
    app_name = f"pipelines-replay-{spec.name}"
    # --conf is read only when a session is made: --abandon and --dry-run start none
    _replay(
        spec, pipeline, to_time, to_offsets, to_run, dry_run, abandon, as_json, quiet,
        session=lambda: _local(master, conf_settings(conf), spec, app_name), schema=schema,
    )  # fmt: skip


def _local(master: str, settings: dict[str, str], spec: PipelineSpec, app_name: str) -> tuple[Any, Path | None]:
    """A session of this process's own (``--master``, ``--conf``), and the file its JVM logs to."""
    from pipelines.app.session import jvm_log_path, pipeline_session  # noqa: PLC0415 - Spark only for commands that run

    jvm_log = jvm_log_path(app_name)
    return pipeline_session(spec, master, app_name, settings, jvm_log=jvm_log), jvm_log


def _exit_with(submission: Callable[[], int]) -> NoReturn:
    """Exit with the code of ``submission`` (pipelines.app.runner.submit or submit_replay); an error
    before its stage ran (the source, the session) is the one ``error:`` line, exit 1."""
    try:
        code = submission()
    except PipelineError as exc:
        _exit_on(exc)
    sys.exit(code)


def _replay(
    spec: PipelineSpec,
    path: str,
    to_time: str | None,
    to_offsets: str | None,
    to_run: str | None,
    dry_run: bool,
    abandon: bool,
    as_json: bool,
    quiet: bool,
    *,
    session: runner.SessionMaker,
    schema: str = "recorded",
) -> None:
    """``rewind``'s work, shared with the spark-submit job: abandon, print the plan, or carry it out
    on the session ``session()`` makes, with the file its JVM logs to (only then is Spark started,
    after the transforms' SQL and the source were checked)."""
    from pipelines.replay.plan import render  # noqa: PLC0415 - the replay's modules only for rewinds
    from pipelines.replay.run import Replay  # noqa: PLC0415

    try:
        if abandon:
            click.echo(Replay(spec).abandon())
            sys.exit(0)
        target = runner.rewind_target(to_time, to_offsets, to_run, schema)
        if dry_run:
            plan = Replay(spec).plan(target)
            if as_json:
                click.echo(json.dumps(plan.to_json(), indent=1))
            else:
                render(plan, stdout_console())
            sys.exit(EXIT_FAILED if plan.failing else 0)
    except PipelineError as exc:
        _exit_on(exc)
    _exit_with(lambda: runner.submit_replay(spec, path, target, session, quiet=quiet))


@click.command(cls=_ErrorLine, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--pipeline", required=True, type=click.Path(exists=True, dir_okay=False), help="The pipeline file.")
@STAGE
@REWIND
@click.option("--rewind-to", "rewind_to", default=None, hidden=True, help="Old name of --to-time.")
def spark_submit_main(
    pipeline: str,
    run_id: str | None,
    replan: bool,
    stage: str,
    step: str | None,
    quiet: bool,
    to_time: str | None,
    to_offsets: str | None,
    to_run: str | None,
    dry_run: bool,
    abandon: bool,
    as_json: bool,
    schema: str,
    rewind_to: str | None,
) -> None:
    """spark-submit jobs/load_warehouse.py --pipeline FILE [options]: what ``pipelines run`` does
    (--stage, --run-id …), or with --to-time/--to-offsets/--to-run what ``pipelines rewind`` does,
    on the session spark-submit made (its master: local, yarn, spark://, k8s://)."""
    if rewind_to is not None:
        click.echo("warning: --rewind-to is the old name of --to-time", err=True)
        to_time = to_time or rewind_to
    spec = pipeline_file(pipeline)
    if abandon or any(x is not None for x in (to_time, to_offsets, to_run)):
        _replay(
            spec, pipeline, to_time, to_offsets, to_run, dry_run, abandon, as_json, quiet,
            session=lambda: _submitted(spec, f"load_warehouse-replay-{spec.name}"), schema=schema,
        )  # fmt: skip
    if dry_run:
        raise click.UsageError("--dry-run goes with a rewind target (--to-time, --to-offsets or --to-run)")
    _exit_with(
        lambda: runner.submit(
            spec, pipeline, stage, lambda: _submitted(spec, f"load_warehouse-{spec.name}"),
            run_id=run_id, step=step, replan=replan, quiet=quiet,
        )
    )  # fmt: skip


@main.command()
@click.argument("pipeline", type=click.Path(exists=True, dir_okay=False))
@click.option("--run-id", required=True, help="The run, as `pipelines run --run-id` named it.")
@click.option("--stage", type=click.Choice(STAGES), default="all", show_default=True, help="The stage asked about.")
def done(pipeline: str, run_id: str, stage: str) -> None:
    """Exit 0 if STAGE of run RUN_ID has nothing left to do (and say why), else 1, from the state
    files alone: no Spark. Airflow's tasks ask it first, so a finished run's task starts no JVM."""
    spec = pipeline_file(pipeline)
    reason = runner.done_already(spec, stage, run_id)
    if reason is not None:
        click.echo(f"nothing to do: {reason}", err=True)
        sys.exit(0)
    click.echo(f"{'all' if stage == 'all' else f'stage {stage}'} of run {run_id} may have work to do", err=True)
    sys.exit(EXIT_FAILED)


def _submitted(spec: PipelineSpec, app_name: str) -> tuple[Any, Path | None]:
    """The session spark-submit configured, with the pipeline's metastore, and the file its JVM
    logs to with the pipelines' configuration, if it does (pipelines.app.session)."""
    from pipelines.app.session import submitted_log, submitted_session  # noqa: PLC0415 - Spark only here

    spark = submitted_session(spec, app_name)
    return spark, submitted_log(spark, app_name)


@main.command()
@click.argument("pipelines", nargs=-1, required=True, type=click.Path(dir_okay=False))
def lint(pipelines: tuple[str, ...]) -> None:
    """Check pipeline files without running anything: every error is printed as file:key.path:
    reason (unknown, duplicate or missing keys, wrong types, unknown steps, cycles; a transform's
    SQL that does not parse, with its line, column and token, or that reads a name the flow does
    not provide). What cannot be checked (Spark syntax the SQL parser does not know) is a
    warning: file:key.path: warning: reason. Exit 2 if any file is invalid."""
    bad = 0
    for path in pipelines:
        try:
            spec = load_spec(path)
        except SpecError as exc:
            bad += 1
            click.echo(f"{exc}", err=True)
            continue
        findings = []
        if spec.transforms:
            from pipelines.config.sqlcheck import check_transforms  # noqa: PLC0415 - sqlglot only for SQL

            findings = check_transforms(spec.transforms, spec.outputs, path)
        for finding in findings:
            click.echo(finding.render(path), err=True)
        if any(finding.error for finding in findings):
            bad += 1
            continue
        steps, outputs, warnings = len(spec.transforms), len(spec.outputs), len(findings)
        noted = f"; {warnings} warning{'s' * (warnings != 1)}" if warnings else ""
        click.echo(
            f"{path}: ok ({spec.name}: {steps} transform{'s' * (steps != 1)}, "
            f"{outputs} output{'s' * (outputs != 1)}{noted})"
        )
    if bad:
        click.echo(f"{bad} of {len(pipelines)} pipeline file{'s' * (len(pipelines) != 1)} invalid", err=True)
        sys.exit(EXIT_BAD_SPEC)


@main.command("spark-java-options")
@click.option("--log", "log_file", default=None, type=click.Path(dir_okay=False), help="The file Spark logs to.")
def spark_java_options(log_file: str | None) -> None:
    """Print the driver JVM options that give a spark-submit run the pipelines' Spark logging
    (warnings on the console without failed tasks' stacks, everything in a file the error line
    names; default: a new file per run under <tmp>/pipelines-spark/):

        spark-submit --driver-java-options "$(pipelines spark-java-options)" ... jobs/load_warehouse.py ...

    Without them the job applies the same configuration once its session is up, so only Spark's
    start-up lines are printed its own way."""
    from pipelines.app.session import java_options  # noqa: PLC0415

    click.echo(java_options(None if log_file is None else Path(log_file).resolve()))


@main.command()
@click.argument("pipeline", type=click.Path(exists=True, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def status(pipeline: str, as_json: bool) -> None:
    """The last committed run of PIPELINE and any run that was planned but not committed."""
    spec = pipeline_file(pipeline)
    try:
        state = state_of(spec)
        latest = state.latest()
        pending = state.pending_plan()
        held = [] if latest is None else held_back(state, latest)
    except PipelineError as exc:
        _exit_on(exc)
    if as_json:
        click.echo(json.dumps(status_document(spec.name, latest, pending, held), indent=1))
    else:
        print_status(stdout_console(), spec.name, spec.raw.path, latest, pending, held)


@main.command()
@click.argument("pipeline", type=click.Path(exists=True, dir_okay=False))
@click.option("--dry-run", is_flag=True, help="List what would be deleted.")
def gc(pipeline: str, dry_run: bool) -> None:
    """Delete the generations of PIPELINE's raw layer and outputs older than the current one (what
    a replay left for readers still on them). Manifests, and so the offset history, are kept."""
    from pipelines.replay.gc import collect_garbage, garbage  # noqa: PLC0415

    spec = pipeline_file(pipeline)
    try:
        state = state_of(spec)
        paths = garbage(spec, state) if dry_run else collect_garbage(spec, state)
    except PipelineError as exc:
        _exit_on(exc)
    for path in paths:
        click.echo(f"{'would delete' if dry_run else 'deleted'} {path}")
    if not paths:
        click.echo(f"{spec.name}: nothing to collect (generation {state.current_generation()} is the only one)")


@main.command()
@click.argument("pipeline", type=click.Path(exists=True, dir_okay=False))
@click.option("--run", "run", default=None, help="A run's number (#seq, e.g. 3) or run id; default: the latest.")
@click.option("--json", "as_json", is_flag=True, help="Print the report's JSON document instead of the paths.")
def report(pipeline: str, run: str | None, as_json: bool) -> None:
    """(Re)build a committed run's report from its state, without Spark: a JSON document and an
    HTML page under <raw>/_pipeline/reports/ (per-split offsets, rows, quarantined, lag, timings,
    the data-loss ledger, expectation results, rows per hour)."""
    from pipelines.reporting.report import build_report, write_report  # noqa: PLC0415

    spec = pipeline_file(pipeline)
    try:
        state = state_of(spec)
        state.recover()
        seqs = state.committed_seqs()
        if run is None:
            if not seqs:
                raise PipelineError(f"pipeline {spec.name}: no committed run under {state.meta} yet")
            seq = seqs[-1]
        elif run.lstrip("#").isdigit():
            seq = int(run.lstrip("#"))
        else:
            done = state.committed_run(run)
            if done is None:
                raise PipelineError(f"pipeline {spec.name}: no committed run with id {run!r}")
            seq = done.seq
        if as_json:
            click.echo(json.dumps(build_report(spec, state, seq), indent=1, sort_keys=True))
            return
        json_path, html_path = write_report(spec, state, seq)
    except PipelineError as exc:
        _exit_on(exc)
    click.echo(f"{html_path}\n{json_path}")


@main.command()
@click.argument("pipeline", type=click.Path(exists=True, dir_okay=False))
@click.option("--output", "output", default=None, help="This output's directory (default: the raw layer's).")
def location(pipeline: str, output: str | None) -> None:
    """Print the directory readers use now: the current generation of the raw layer or an output
    (the dataset's own path until the first replay)."""
    from pipelines.replay.gc import current_locations  # noqa: PLC0415

    spec = pipeline_file(pipeline)
    try:
        places = current_locations(spec, state_of(spec))
    except PipelineError as exc:
        _exit_on(exc)
    name = output or "raw"
    if name not in places:
        click.echo(f"error: pipeline {spec.name} has no output {name!r} ({', '.join(places)})", err=True)
        sys.exit(EXIT_BAD_SPEC)
    click.echo(places[name])


@main.command()
@click.argument("pipeline", type=click.Path(exists=True, dir_okay=False))
@click.option("--lag", is_flag=True, help="Also ask the brokers for each split's log end and show the lag.")
@click.option("--history", is_flag=True, help="Every committed run, oldest first: loads and replays, per split.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def offsets(pipeline: str, lag: bool, history: bool, as_json: bool) -> None:
    """The committed offsets of PIPELINE: per split, the next offset a run loads."""
    spec = pipeline_file(pipeline)
    if history:
        _history(spec, as_json)
        return
    try:
        committed = state_of(spec).committed_offsets()
        ends: dict[tuple[str, int], int] = {}
        if lag:
            from pipelines.executor.splits import open_consumer  # noqa: PLC0415 - the client only when brokers are asked

            with open_consumer(spec.source) as consumer:  # the bootstrap list, or bootstrapped from ZooKeeper
                # the high watermark: the lag includes what an open transaction holds back, as the report's does
                ends = consumer.log_end_offsets(list(committed))
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
    stdout_console().print(table)
    if not items:
        click.echo("no run committed yet")


def _history(spec: PipelineSpec, as_json: bool) -> None:
    """Every committed manifest, oldest first: what each run loaded (or a replay reloaded)."""
    try:
        state = state_of(spec)
        manifests = [state.manifest(seq) for seq in state.committed_seqs()]
    except PipelineError as exc:
        _exit_on(exc)
    items = [
        {
            "seq": m.seq,
            "run_id": m.run_id,
            "kind": m.kind,
            "committed_at": m.committed_at,
            "generation": m.generation,
            "target": m.plan.target or None,
            "splits": [
                {"topic": s.topic, "partition": s.partition, "start": s.start, "end": s.end, "rows": s.rows}
                for s in m.splits
            ],
        }
        for m in manifests
    ]
    if as_json:
        click.echo(json.dumps(items, indent=1))
        return
    table = Table(title=f"{spec.name}: offset history", title_justify="left")
    for column in ("#", "run", "kind", "committed at", "gen", "ranges"):
        table.add_column(column)
    for m in manifests:
        ranges = ", ".join(f"{s.topic}-{s.partition} {s.start}..{s.end}" for s in m.splits) or "-"
        kind = m.kind + (f" to {m.plan.target}" if m.plan.target else "")
        table.add_row(str(m.seq), m.run_id, kind, m.committed_at, str(m.generation), ranges)
    stdout_console().print(table)
    if not items:
        click.echo("no run committed yet")


if __name__ == "__main__":  # python -m pipelines.app.cli: what Airflow tasks run (no console script needed)
    main()
