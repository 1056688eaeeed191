"""The application's operations: run a stage, replay, report; what ``pipelines`` and spark-submit share.

Role: the one runner behind every entry point. The ``pipelines`` command (pipelines.app.cli), the
spark-submit job (jobs/load_warehouse.py, which is the same command line) and the Airflow tasks
(which call that job) come here with a pipeline, options and how to make their Spark session
(``submit`` makes it only once the checks that need no JVM passed); each operation returns the
process's exit code and prints its errors as one ``error: …`` line:

    0 committed, or nothing to do      1 the run failed (the error names its cause)
    2 bad usage or pipeline file        3 another run of the pipeline won (nothing was written)

A run's stages, in order: ``load`` (pipelines.ingest) then, if the pipeline has outputs,
``transforms`` → ``validate`` → ``publish`` (pipelines.flow); ``all`` runs each in turn.
"""

from __future__ import annotations

import logging
import re
import sys
import time
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pipelines.app.session import logs_dir
from pipelines.config.pipeline import PipelineSpec
from pipelines.config.steps import topological_order, unbuilt
from pipelines.errors import ConcurrentRunError, FlowError, PipelineError, ReplayError
from pipelines.ledger.paths import published_marker
from pipelines.ledger.state import PipelineState
from pipelines.progress import Reporter
from pipelines.replay.target import RewindTarget, load_offsets, parse_time

log = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_SPEC = 2
EXIT_CONCURRENT = 3

STAGES = ("all", "load", "transforms", "validate", "publish")
"""The stages a run can be asked for: every one in turn, or one alone (an Airflow task each)."""

SQL_STAGES = ("all", "load", "transforms")
"""The stages checked for SQL that cannot run before they start: those that run the transforms,
and the load, which would commit what transforms that cannot run are then stuck behind."""

SOURCE_CHECK_TIMEOUT_MS = 5_000
"""How long the check of the source before a load waits for the brokers (or ZooKeeper) to answer:
a live cluster answers one metadata request in milliseconds; a stopped one refuses at once."""


_NAMED_LOGS: set[Path] = set()
"""The Spark logs an error line of this process named (``fail``)."""


def named_in_error(spark_log: Path) -> bool:
    """Whether an error line this process printed named ``spark_log`` (then nothing more need)."""
    return spark_log in _NAMED_LOGS


def spark_log_note(jvm_log: Path, code: int) -> None:
    """After a command's Spark work: on failure, name the JVM's log on stderr unless the ``error:``
    line did (``fail`` names it when the error wraps Spark's); on success, delete it if it is one
    of ``logs_dir()``'s (nothing in it is the person's business; a file the caller named is the
    caller's)."""
    if code != 0 and not named_in_error(jvm_log) and jvm_log.exists():
        sys.stderr.write(f"Spark's own messages (its JVM and executors, stack traces included): {jvm_log}\n")
    elif code == 0 and jvm_log.parent == logs_dir():
        jvm_log.unlink(missing_ok=True)


def fail(exc: PipelineError, spark_log: Path | None = None) -> int:
    """Print ``exc`` as the one ``error:`` line a person reads (its notes, failures met while
    cleaning up after it, on lines of their own after it); the exit code it means. With
    ``spark_log`` (the file the session's JVM logs to: the stacks of failed tasks) and an error
    that wraps another (Spark's, a library's: there is more to it than the line says), the line
    names the file and the driver's own stack of ``exc`` is added to it: every detail in one file."""
    log.debug("failed", exc_info=exc)
    line = f"error: {exc}"
    if spark_log is not None and exc.__cause__ is not None:
        try:
            spark_log.parent.mkdir(parents=True, exist_ok=True)
            with spark_log.open("a", encoding="utf-8") as file:
                stamp = time.strftime("%y/%m/%d %H:%M:%S")
                file.write(f"{stamp} ERROR pipelines: the run failed: {exc}\n")
                file.writelines(traceback.format_exception(exc))
            line += f" (Spark's log, with the stack traces: {spark_log})"
            _NAMED_LOGS.add(spark_log)
        except OSError as problem:  # the error line matters more than the file
            log.debug("cannot write to %s: %s", spark_log, problem)
    # what went wrong after the cause, while cleaning up (pipelines.ledger.lease), a line each
    notes = "".join(f"{note}\n" for note in getattr(exc, "__notes__", ()))
    sys.stderr.write(f"{line}\n{notes}")
    sys.stderr.flush()
    return EXIT_CONCURRENT if isinstance(exc, ConcurrentRunError) else EXIT_FAILED


def check_source(spec: PipelineSpec, *, replay_schemas: str | None = None) -> None:
    """Before a load starts Spark (seconds): the source answers and has the pipeline's topics.
    One metadata request through the bootstrap brokers, or, for a source that names ZooKeeper, one
    read of the registry there and one metadata request to the brokers registered in it; each
    waits at most ``SOURCE_CHECK_TIMEOUT_MS``. PipelineError naming the address and the cause.
    ``replay_schemas``: a replay's RewindTarget.schemas (None: a load), for ``check_schemas``."""
    from kafkalog.client import Client, read_registry  # noqa: PLC0415 - the client only when a load runs
    from kafkalog.errors import KafkalogError  # noqa: PLC0415

    source = spec.source
    timeout_ms = min(source.request_timeout_ms, SOURCE_CHECK_TIMEOUT_MS)
    wanted = None if spec.topic_pattern is not None else list(spec.topics)
    after = "checked before Spark started: nothing was loaded"
    kazoo = logging.getLogger("kazoo")
    level = kazoo.level
    kazoo.setLevel(logging.CRITICAL)  # it logs every refused connection; the one error line says it
    try:
        if source.zookeeper is not None:
            view = read_registry(source.zookeeper, topics=wanted, start_timeout_s=timeout_ms / 1000)
            if not view.brokers:
                raise PipelineError(f"no broker is registered in {source.cluster} ({after})")
            topics = set(view.topics)
            brokers: list[str] = list(view.brokers.values())
        else:
            brokers = list(source.bootstrap or ())
        with Client(
            brokers, request_timeout_ms=timeout_ms, broker_version=source.assumed_version, security=source.security
        ) as client:
            answered = client.refresh_metadata(wanted)
        if source.zookeeper is None:
            topics = set(answered)
    except KafkalogError as exc:
        raise PipelineError(f"the source {source.cluster} cannot be reached: {exc} ({after})") from exc
    finally:
        kazoo.setLevel(level)
    if spec.topic_pattern is not None:
        loaded = sorted(topic for topic in topics if re.fullmatch(spec.topic_pattern, topic))
        if not loaded:
            raise PipelineError(f"no topic on {source.cluster} matches {spec.topic_pattern!r} ({after})")
    else:
        missing = [topic for topic in spec.topics if topic not in topics]
        if missing:
            known = ", ".join(sorted(topics)[:10]) or "none"
            raise PipelineError(f"topic {missing[0]!r} does not exist on {source.cluster} (it has: {known}; {after})")
        loaded = list(spec.topics)
    check_schemas(spec, loaded, replay_schemas=replay_schemas)


def check_schemas(spec: PipelineSpec, topics: list[str], *, replay_schemas: str | None = None) -> None:
    """Before a load or a replay starts Spark: the schemas of ``topics`` can be read (the registry
    answers, a schema file reads), give columns and change the newest committed run's only as
    pipelines.schemas.evolution allows. A replay (``replay_schemas`` ``recorded``) checks the
    schemas that run recorded, by id, as it will read with them; ``latest`` and a load, the
    subjects' latest. The run reads them again before it loads a plan, for the topics planned
    (PipelineRun.run_schemas); this is the check. PipelineError in one line naming the registry
    (or the subject, versions and field) and the cause."""
    from pipelines.schemas.resolved import (  # noqa: PLC0415 - a schema'd decoder only
        needs_schemas,
        recorded_pins,
        resolve_schemas,
    )

    if not needs_schemas(spec.decoder):
        return
    recorded = recorded_schemas(spec)
    pinned = recorded_pins(recorded) if replay_schemas == "recorded" else {}
    try:
        resolve_schemas(spec.decoder, topics, event_time=spec.event_time, pinned=pinned, recorded=recorded)
    except PipelineError as exc:
        raise type(exc)(f"{exc} (checked before Spark started: nothing was loaded)") from exc


def recorded_schemas(spec: PipelineSpec) -> dict[str, Any]:
    """The reader schemas the newest committed run recorded, read without Spark; empty if there
    is none, or if the state cannot be read without Spark (hdfs:// without a WebHDFS address:
    the run checks them once its session reads the state)."""
    try:
        latest = state_of(spec).latest()
    except PipelineError:
        return {}
    return {} if latest is None else latest.schemas


def state_of(spec: PipelineSpec) -> PipelineState:
    """The pipeline's state through the tools' storage (local files or WebHDFS: no Spark needed)."""
    return PipelineState.for_spec(spec)


def load(
    spec: PipelineSpec,
    spark: Any,
    *,
    run_id: str | None,
    replan: bool,
    quiet: bool = False,
    spark_log: Path | None = None,
    flow_follows: bool = False,
) -> int:
    """The load stage: new messages into the raw layer, exactly once; then the run reports.
    ``flow_follows``: the flow runs next in this process and rewrites the reports, saying where
    they are; the load's are written all the same (a flow that cannot start leaves them), without
    the line, which would come twice."""
    from pipelines.ingest.run import PipelineRun  # noqa: PLC0415 - the Spark source only when loading
    from pipelines.reporting.summary import print_summary  # noqa: PLC0415

    reporter = Reporter(quiet=quiet)
    try:
        job = PipelineRun(spec, spark, reporter=reporter)
        result = job.run(run_id=run_id, replan=replan)
    except PipelineError as exc:
        return fail(exc, spark_log)
    for manifest in result.completed:
        print_summary(reporter, manifest)
    if result.message:
        reporter.note(result.message)
    report_runs(spec, [m.seq for m in result.completed], reporter, job.state, announce=not flow_follows)
    return EXIT_OK


def run_stage(
    spec: PipelineSpec,
    spark: Any,
    stage: str,
    *,
    run_id: str | None,
    step: str | None = None,
    replan: bool = False,
    quiet: bool = False,
    spark_log: Path | None = None,
) -> int:
    """One stage of a pipeline (``all``: the load, then, if the file has outputs, its transforms,
    validation and publish); returns the exit code. A stage that commits (load, publish, all) ends
    by bringing the pipeline's tables up to date (``register_tables``). ``spark_log``: the file
    the session's JVM logs to, which an error line names (``fail``)."""
    if stage not in STAGES:
        return fail(PipelineError(f"unknown stage {stage!r} (stages: {', '.join(STAGES)})"))
    if stage in ("all", "load"):
        flow_follows = stage == "all" and bool(spec.outputs)
        code = load(
            spec, spark, run_id=run_id, replan=replan, quiet=quiet, spark_log=spark_log, flow_follows=flow_follows
        )
        if code or stage == "load" or not spec.outputs:
            return code or register_tables(spec, spark, quiet=quiet, spark_log=spark_log)
    code = _flow_stage(spec, spark, stage, run_id=run_id, step=step, quiet=quiet, spark_log=spark_log)
    if stage in (
        "all",
        "publish",
    ):  # after a failed flow too: the load of ``all`` committed, and its raw rows are readers' now
        registered = register_tables(spec, spark, quiet=quiet, spark_log=spark_log)
        return code or registered
    return code


def _flow_stage(
    spec: PipelineSpec,
    spark: Any,
    stage: str,
    *,
    run_id: str | None,
    step: str | None,
    quiet: bool,
    spark_log: Path | None = None,
) -> int:
    """The flow's part of ``stage`` (after the load): transforms, validate, publish, or all three."""
    from pipelines.flow.run import FlowRun  # noqa: PLC0415 - great-expectations only when validating

    reporter = Reporter(quiet=quiet)
    reported: list[int] = []  # the loads whose reports this stage changes, even when it fails
    flow: FlowRun | None = None
    try:
        flow = FlowRun(spec, spark, reporter=reporter, readers=_readers(spec, spark, stage))
        seq = flow.seq_for(run_id)
        if seq is None:
            reporter.note(f"run {run_id} loaded nothing and nothing was loaded before it: nothing to do")
            return EXIT_OK
        reported = flow.covered(seq) or [seq]
        if stage == "all":
            flow.run_all(seq)
        elif stage == "transforms":
            names = [step] if step is not None else [each.name for each in topological_order(spec.transforms)]
            for name in names:
                flow.run_step(seq, name)
        elif stage == "validate":
            flow.validate(seq)
        else:
            flow.publish(seq)
    except PipelineError as exc:
        return fail(exc, spark_log)
    finally:
        report_runs(spec, reported, reporter, None if flow is None else flow.state)
    return EXIT_OK


def _readers(spec: PipelineSpec, spark: Any, stage: str) -> Any:
    """Readers by name of the outputs, kept whole by a stage that publishes (pipelines.catalog)."""
    if stage not in ("all", "publish") or spec.tables.metastore == "none":
        return None
    from pipelines.catalog.readers import readers_for  # noqa: PLC0415 - the catalog only when registering

    return readers_for(spec, spark)


def register_tables(spec: PipelineSpec, spark: Any, *, quiet: bool = False, spark_log: Path | None = None) -> int:
    """Bring the pipeline's tables in the metastore up to date with what is committed
    (pipelines.catalog); returns the exit code. Without a session (a publish that needed none) or
    without tables there is nothing to do. A metastore that fails is an error, but the data stays
    committed: the next run, or ``pipelines repair``, registers it."""
    if spark is None or spec.tables.metastore == "none":
        return EXIT_OK
    from pipelines.catalog.sync import sync  # noqa: PLC0415 - the catalog only when registering

    state = PipelineState.for_spec(spec, spark)
    try:
        sync(spec, state, spark, reporter=Reporter(quiet=quiet))
    except PipelineError as exc:
        return fail(
            PipelineError(
                f"tables not registered: {exc} (what the run loaded or published is committed; the next run, "
                "or `pipelines repair`, registers it)"
            ),
            spark_log,
        )
    return EXIT_OK


def needs_spark(spec: PipelineSpec, stage: str) -> bool:
    """Whether ``stage`` needs a Spark session. Publishing moves files and writes markers only: it
    runs without one when the raw layer and every output are reachable without the JVM (local
    paths, or a cluster with ``raw.webhdfs_url``) and the pipeline registers no tables (the
    metastore is reached through Spark), which saves a scheduled run's publish task the start of a
    JVM and a session (about 10 s); hdfs:// without a WebHDFS address needs Spark's Hadoop client."""
    if stage != "publish" or spec.tables.metastore != "none":
        return True
    for path in (spec.raw.path, *(output.path for output in spec.outputs)):
        scheme = path.partition("://")[0] if "://" in path else ""
        if scheme not in ("", "file", "webhdfs") and spec.webhdfs_url_for(path) is None:
            return True
    return False


def import_ahead(spec: PipelineSpec, stage: str) -> None:
    """For a program about to start Spark: if ``stage`` (``all``, ``validate``, or ``replay``) will
    check expectations, start importing great-expectations now, on a thread of its own, so the
    seconds it takes pass while the JVM starts and the load runs (pipelines.flow.expect)."""
    if stage in ("all", "validate", "replay") and any(output.expectations for output in spec.outputs):
        from pipelines.flow.expect import import_gx_in_background  # noqa: PLC0415

        import_gx_in_background()


def done_already(spec: PipelineSpec, stage: str, run_id: str | None) -> str | None:
    """Why ``stage`` of run ``run_id`` has nothing to do, found from the state files alone (no
    Spark session needed: a retried Airflow task of a finished run returns in seconds); None if it
    may have work, or if the state cannot be read without Spark (the normal path then decides)."""
    if run_id is None:
        return None
    try:
        state = state_of(spec)
        recorded, _ = state.run_record(run_id)  # written once the load and its raw publish finished
        if not recorded:
            return None
        if stage == "load" or not spec.outputs:
            return f"run {run_id} finished before"
        target = state.run_target(run_id)
        if target is None:
            return f"run {run_id} loaded nothing, and nothing was loaded before it"
        if all(state.storage.exists(published_marker(spec.raw.path, target, o.name)) for o in spec.outputs):
            return f"run {run_id} (#{target}) is loaded and published"
    except PipelineError:
        return None
    return None


def rewind_target(
    to_time: str | None, to_offsets: str | None, to_run: str | None, schema: str = "recorded"
) -> RewindTarget:
    """The RewindTarget the options name: exactly one of a time, an offsets file, a run id; and
    the reader schemas (``--schema``)."""
    if sum(x is not None for x in (to_time, to_offsets, to_run)) != 1:
        raise ReplayError("give exactly one of --to-time, --to-offsets, --to-run")
    if to_time is not None:
        return RewindTarget(time_ms=parse_time(to_time), schemas=schema)
    if to_offsets is not None:
        return RewindTarget(offsets=load_offsets(to_offsets), schemas=schema)
    return RewindTarget(run_id=to_run, schemas=schema)


def replay(
    spec: PipelineSpec, spark: Any, target: RewindTarget, *, quiet: bool = False, spark_log: Path | None = None
) -> int:
    """Carry a replay out on ``spark`` (or finish the stored one); returns the exit code."""
    from pipelines.replay.run import Replay  # noqa: PLC0415 - the Spark source only when replaying

    reporter = Reporter(quiet=quiet)
    try:
        job = Replay(spec, spark, reporter=reporter)
        manifest = job.run(target)
    except PipelineError as exc:
        return fail(exc, spark_log)
    report_runs(spec, [manifest.seq], reporter, job.state)
    return register_tables(spec, spark, quiet=quiet, spark_log=spark_log)


def report_runs(
    spec: PipelineSpec, seqs: Iterable[int], reporter: Reporter, state: PipelineState | None, *, announce: bool = True
) -> None:
    """(Re)write the run reports of ``seqs`` and say where they are (unless not ``announce``: warnings
    are said all the same); a report that cannot be
    written is noted, never fatal (the run committed; ``pipelines report`` rebuilds it). ``state``:
    the job's own, used when the tools' storage cannot reach the raw layer (hdfs:// without a
    WebHDFS address); otherwise local files or WebHDFS are read directly, since the job's (the
    driver's Hadoop filesystem) costs a JVM round trip per file and a report reads every manifest."""
    from pipelines.reporting.report import try_write_report  # noqa: PLC0415 - jinja2 only when reporting

    wanted = sorted(set(seqs))
    if not wanted:
        return
    try:
        state = state_of(spec)
    except PipelineError as exc:
        if state is None:
            reporter.note(f"warning: no run report written: {exc}")
            return
    for seq in wanted:
        written = try_write_report(spec, state, seq)
        if isinstance(written, str):
            reporter.note(f"warning: {written}")
        elif announce:
            reporter.note(f"run report #{seq}: {written[1]}")


SessionMaker = Callable[[], tuple[Any, Path | None]]
"""Starts the Spark session a run works on, and names the file its JVM logs to (None: unknown, as
for a session spark-submit configured without the pipelines' log settings)."""


def submit(
    spec: PipelineSpec,
    path: str,
    stage: str,
    session: SessionMaker,
    *,
    run_id: str | None = None,
    step: str | None = None,
    replan: bool = False,
    quiet: bool = False,
) -> int:
    """Run ``stage`` of the pipeline read from ``path`` as every entry point does; the exit code.

    The pre-flight sequence, cheapest first, so that nothing costs a JVM that need not: the
    transforms' SQL is checked (exit 2); a stage of a run id the state files show finished exits 0
    with the reason; a stage that needs no Spark (``needs_spark``) runs without it; a stage that
    loads checks its source (a PipelineError: the caller prints it, exit 1); great-expectations
    starts importing; only then is ``session()`` called, the stage run on it, the session stopped
    and its log named or removed (``spark_log_note``)."""
    if stage in SQL_STAGES and not transforms_sql_ok(spec, path, quiet=quiet):
        return EXIT_BAD_SPEC
    not_built = unbuilt(spec.outputs) if stage != "load" else None
    if not_built is not None:
        return fail(FlowError(not_built))
    reason = done_already(spec, stage, run_id)
    if reason is not None:  # said even with --quiet: one line that explains a task taking no time
        _say(f"nothing to do: {reason}")
        return EXIT_OK
    if not needs_spark(spec, stage):
        return run_stage(spec, None, stage, run_id=run_id, quiet=quiet)
    if stage in ("all", "load"):
        check_source(spec)
    import_ahead(spec, stage)
    spark, spark_log = session()
    return _on_session(
        spark,
        spark_log,
        lambda: run_stage(
            spec, spark, stage, run_id=run_id, step=step, replan=replan, quiet=quiet, spark_log=spark_log
        ),
    )


def submit_replay(spec: PipelineSpec, path: str, target: RewindTarget, session: SessionMaker, *, quiet: bool) -> int:
    """Carry a replay to ``target`` out as every entry point does; the exit code. The same
    pre-flight as ``submit``: the transforms' SQL (exit 2), the source, great-expectations
    imported ahead, then ``session()``, the replay, the session stopped and its log seen to."""
    if not transforms_sql_ok(spec, path, quiet=quiet):
        return EXIT_BAD_SPEC
    not_built = unbuilt(spec.outputs)
    if not_built is not None:
        return fail(ReplayError(not_built))
    check_source(spec, replay_schemas=target.schemas)
    import_ahead(spec, "replay")
    spark, spark_log = session()
    return _on_session(spark, spark_log, lambda: replay(spec, spark, target, quiet=quiet, spark_log=spark_log))


def transforms_sql_ok(spec: PipelineSpec, path: str, *, quiet: bool = False) -> bool:
    """Before a run loads anything: False if the SQL of a transform surely cannot run (each error
    an ``error: file:key.path: reason`` line, as for an invalid file); the warnings (what cannot be
    checked) are printed unless ``quiet``. Parsing takes milliseconds; no JVM."""
    if not spec.transforms:
        return True
    from pipelines.config.sqlcheck import check_transforms  # noqa: PLC0415 - sqlglot only for pipelines with SQL

    findings = check_transforms(spec.transforms, spec.outputs, path)
    for finding in findings:
        if finding.error:
            _say(f"error: {finding.render(path)}")
        elif not quiet:
            _say(finding.render(path))
    return not any(finding.error for finding in findings)


def _on_session(spark: Any, spark_log: Path | None, work: Callable[[], int]) -> int:
    """``work()``'s exit code; the session is stopped whatever happens, and then its log named (a
    failure) or removed (success)."""
    code = EXIT_FAILED
    try:
        code = work()
    finally:
        spark.stop()
        if spark_log is not None:
            spark_log_note(spark_log, code)
    return code


def _say(line: str) -> None:
    sys.stderr.write(f"{line}\n")
    sys.stderr.flush()
