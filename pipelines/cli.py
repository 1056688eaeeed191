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
        job = PipelineRun(spec, spark, reporter=reporter)
        result = job.run(run_id=run_id, replan=replan)
    except ConcurrentRunError as exc:
        click.echo(f"error: {exc}", err=True)
        return EXIT_CONCURRENT
    except PipelineError as exc:
        click.echo(f"error: {exc}", err=True)
        return EXIT_FAILED
    if result.message:
        reporter.note(result.message)
    report_runs(spec, [m.seq for m in result.completed], reporter, job.state)
    return 0


def report_runs(spec: PipelineSpec, seqs: list[int], reporter: Any, state: PipelineState | None = None) -> None:
    """(Re)write the run reports of ``seqs`` and say where they are; a report that cannot be
    written is noted, never fatal (the run committed; ``pipelines report`` rebuilds it). ``state``:
    the job's own, used when the tools' storage cannot reach the raw layer (hdfs:// without a
    WebHDFS address); otherwise local files or WebHDFS are read directly, since the job's (the
    driver's Hadoop filesystem) costs a JVM round trip per file and a report reads every manifest."""
    from pipelines.report import try_write_report  # noqa: PLC0415 - jinja2 only when reporting

    if not seqs:
        return
    try:
        state = _state(spec)
    except PipelineError as exc:
        if state is None:
            reporter.note(f"warning: no run report written: {exc}")
            return
    for seq in sorted(set(seqs)):
        written = try_write_report(spec, state, seq)
        reporter.note(f"warning: {written}" if isinstance(written, str) else f"run report #{seq}: {written[1]}")


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
    reported: list[int] = []  # the loads whose reports this stage changes, even when it fails
    flow: FlowRun | None = None
    try:
        flow = FlowRun(spec, spark, reporter=reporter)
        seq = flow.seq_for(run_id)
        if seq is None:
            reporter.note(f"run {run_id} loaded nothing and nothing was loaded before it: nothing to do")
            return 0
        reported = flow.covered(seq) or [seq]
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
    finally:
        report_runs(spec, reported, reporter, None if flow is None else flow.state)
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
    settings = _settings(conf)
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
    if latest is not None and latest.generation:
        console.print(
            f"generation {latest.generation} is current (a replay switched to it); readers find it with "
            "`pipelines location`",
            highlight=False,
        )
    if pending is not None and pending.kind == "replay":
        console.print(
            f"pending: a replay to {pending.target} (#{pending.seq}) planned {pending.created_at} did not commit; "
            "run `pipelines rewind` again to finish it or `pipelines rewind --abandon` to drop it",
            highlight=False,
        )
    elif pending is not None:
        console.print(
            f"pending: run {pending.run_id} (#{pending.seq}) planned {pending.created_at}, {pending.total:,} "
            "messages, not committed; the next run completes it",
            highlight=False,
        )


def rewind_target(to_time: str | None, to_offsets: str | None, to_run: str | None) -> Any:
    """The RewindTarget the options name (exactly one of them)."""
    from pipelines.replay import RewindTarget, load_offsets, parse_time  # noqa: PLC0415

    if sum(x is not None for x in (to_time, to_offsets, to_run)) != 1:
        raise click.UsageError("give exactly one of --to-time, --to-offsets, --to-run")
    if to_time is not None:
        return RewindTarget(time_ms=parse_time(to_time))
    if to_offsets is not None:
        return RewindTarget(offsets=load_offsets(to_offsets))
    return RewindTarget(run_id=to_run)


def replay_job(spec: PipelineSpec, spark: Any, target: Any, *, quiet: bool = False) -> int:
    """Carry a replay out on ``spark``; returns the exit code (shared with spark-submit)."""
    from pipelines.progress import Reporter  # noqa: PLC0415
    from pipelines.replay import Replay  # noqa: PLC0415

    reporter = Reporter(quiet=quiet)
    try:
        replay = Replay(spec, spark, reporter=reporter)
        manifest = replay.run(target)
    except ConcurrentRunError as exc:
        click.echo(f"error: {exc}", err=True)
        return EXIT_CONCURRENT
    except PipelineError as exc:
        click.echo(f"error: {exc}", err=True)
        return EXIT_FAILED
    report_runs(spec, [manifest.seq], reporter, replay.state)
    return 0


@main.command()
@click.argument("pipeline", type=click.Path(exists=True, dir_okay=False))
@click.option("--to-time", default=None, help="Reload every message from this time on (ISO 8601, UTC unless it says).")
@click.option(
    "--to-offsets", default=None, type=click.Path(exists=True, dir_okay=False), help="A JSON file: split → offset."
)
@click.option("--to-run", default=None, help="Reload everything this committed run and the later ones loaded.")
@click.option("--dry-run", is_flag=True, help="Print the plan only: ranges, partitions, outputs, retention.")
@click.option("--abandon", is_flag=True, help="Drop a replay that died before committing, with what it wrote.")
@click.option("--json", "as_json", is_flag=True, help="With --dry-run: the plan as JSON.")
@click.option("--master", default="local[*]", show_default=True, help="Spark master for the local session.")
@click.option("--conf", "conf", multiple=True, metavar="KEY=VALUE", help="Extra Spark settings.")
@click.option("--quiet", is_flag=True, help="Errors only.")
def rewind(
    pipeline: str,
    to_time: str | None,
    to_offsets: str | None,
    to_run: str | None,
    dry_run: bool,
    abandon: bool,
    as_json: bool,
    master: str,
    conf: tuple[str, ...],
    quiet: bool,
) -> None:
    """Rewind PIPELINE and replay: reload from a time, offsets or a run into a new generation of the
    raw layer, recompute the affected partitions of every output, validate, and switch every reader
    to the new generation in one step (the old one stays until `pipelines gc`)."""
    from pipelines.replay import Replay, render  # noqa: PLC0415

    spec = _spec(pipeline)
    try:
        if abandon:
            click.echo(Replay(spec).abandon())
            return
        target = rewind_target(to_time, to_offsets, to_run)
        if dry_run:
            plan = Replay(spec).plan(target)
            if as_json:
                click.echo(json.dumps(plan.to_json(), indent=1))
            else:
                render(plan, Console())
            sys.exit(EXIT_FAILED if plan.failing else 0)
    except PipelineError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_FAILED)
    from pipelines.session import local_session  # noqa: PLC0415

    spark = local_session(master, f"pipelines-replay-{spec.name}", _settings(conf))
    try:
        code = replay_job(spec, spark, target, quiet=quiet)
    finally:
        spark.stop()
    sys.exit(code)


def _settings(conf: tuple[str, ...]) -> dict[str, str]:
    settings = {}
    for item in conf:
        key, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="--conf")
        settings[key] = value
    return settings


@main.command()
@click.argument("pipeline", type=click.Path(exists=True, dir_okay=False))
@click.option("--dry-run", is_flag=True, help="List what would be deleted.")
def gc(pipeline: str, dry_run: bool) -> None:
    """Delete the generations of PIPELINE's raw layer and outputs older than the current one (what
    a replay left for readers still on them). Manifests, and so the offset history, are kept."""
    from pipelines.replay import collect_garbage, garbage  # noqa: PLC0415

    spec = _spec(pipeline)
    try:
        state = _state(spec)
        paths = garbage(spec, state) if dry_run else collect_garbage(spec, state)
    except PipelineError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_FAILED)
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
    from pipelines.report import build_report, write_report  # noqa: PLC0415

    spec = _spec(pipeline)
    try:
        state = _state(spec)
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
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_FAILED)
    click.echo(f"{html_path}\n{json_path}")


@main.command()
@click.argument("pipeline", type=click.Path(exists=True, dir_okay=False))
@click.option("--output", "output", default=None, help="This output's directory (default: the raw layer's).")
def location(pipeline: str, output: str | None) -> None:
    """Print the directory readers use now: the current generation of the raw layer or an output
    (the dataset's own path until the first replay)."""
    from pipelines.replay import current_locations  # noqa: PLC0415

    spec = _spec(pipeline)
    try:
        places = current_locations(spec, _state(spec))
    except PipelineError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_FAILED)
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
    spec = _spec(pipeline)
    if history:
        _history(spec, as_json)
        return
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


def _history(spec: PipelineSpec, as_json: bool) -> None:
    """Every committed manifest, oldest first: what each run loaded (or a replay reloaded)."""
    try:
        state = _state(spec)
        manifests = [state.manifest(seq) for seq in state.committed_seqs()]
    except PipelineError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_FAILED)
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
    Console().print(table)
    if not items:
        click.echo("no run committed yet")
