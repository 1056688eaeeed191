"""``pipelines tables``, ``pipelines repair`` and ``pipelines sql``: the pipeline's tables by name.

Role: the operator's view of the metastore side (pipelines.catalog). ``tables`` lists what the
pipeline should have registered and what the metastore lacks of it (exit 1 if anything); ``repair``
makes those changes (what every run does at its end; idempotent); ``sql`` runs a query on a session
that reaches the pipeline's metastore, the way to read an embedded metastore's tables by name.
Each starts a small local Spark session (the metastore is reached through Spark's Hive catalog).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any, NoReturn

import click
from rich.table import Table

from pipelines.app.arguments import conf_settings, pipeline_file
from pipelines.app.output import stdout_console
from pipelines.app.runner import EXIT_FAILED, EXIT_OK, fail, spark_log_note
from pipelines.config.pipeline import PipelineSpec
from pipelines.errors import CatalogError, PipelineError
from pipelines.progress import counted

SESSION_OPTIONS = (
    click.option("--master", default="local[1]", show_default=True, help="Spark master for the local session."),
    click.option("--conf", "conf", multiple=True, metavar="KEY=VALUE", help="Extra Spark settings."),
)


def _session_options(command: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(SESSION_OPTIONS):
        command = option(command)
    return command


def _with_session(
    spec: PipelineSpec, master: str, conf: tuple[str, ...], work: Callable[[Any], int], *, repairing: bool = False
) -> NoReturn:
    """Run ``work(spark)`` on a session that reaches ``spec``'s metastore; exit with its code.
    ``repairing``: an embedded metastore that cannot be opened is made anew first."""
    from pipelines.app.session import jvm_log_path, pipeline_session  # noqa: PLC0415
    from pipelines.catalog.connection import metastore_for  # noqa: PLC0415

    settings = conf_settings(conf)
    if metastore_for(spec, settings) is None:
        sys.exit(
            fail(
                CatalogError(
                    f"pipeline {spec.name} registers no tables: tables.metastore is {spec.tables.metastore}"
                    + ("" if spec.tables.metastore == "none" else f" and its raw layer ({spec.raw.path}) is not local")
                    + " (see docs/tables.md)"
                )
            )
        )
    jvm_log = jvm_log_path(f"pipelines-tables-{spec.name}")
    code = EXIT_FAILED
    try:
        spark = pipeline_session(
            spec, master, f"pipelines-tables-{spec.name}", settings, jvm_log=jvm_log, check_metastore=repairing
        )
    except PipelineError as exc:
        sys.exit(fail(exc))
    try:
        code = work(spark)
    except PipelineError as exc:
        code = fail(exc)
    finally:
        spark.stop()
        spark_log_note(jvm_log, code)
    sys.exit(code)


def _state(spec: PipelineSpec, spark: Any) -> Any:
    from pipelines.ledger.state import PipelineState  # noqa: PLC0415

    return PipelineState.for_spec(spec, spark)


@click.command()
@click.argument("pipeline", type=click.Path(exists=True, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="The tables and pending changes as JSON.")
@_session_options
def tables(pipeline: str, as_json: bool, master: str, conf: tuple[str, ...]) -> None:
    """List PIPELINE's tables (the names readers use, the generation each reads, its partitions and
    the newest run it shows) and what the metastore lacks of the committed state. Exit 0 if the
    metastore matches the newest committed manifest, 1 if a change is pending (`pipelines repair`)."""
    spec = pipeline_file(pipeline)

    def work(spark: Any) -> int:
        from pipelines.catalog.connection import attach  # noqa: PLC0415
        from pipelines.catalog.sync import compare  # noqa: PLC0415

        metastore = attach(spec, spark)
        assert metastore is not None  # the session was started for it
        comparison = compare(spec, _state(spec, spark), spark, metastore)
        if as_json:
            document = {
                "metastore": metastore.describe(),
                "tables": [
                    {"dataset": t.dataset, "name": f"{t.database}.{t.name}", "table": f"{t.database}.{t.table}",
                     "generation": t.generation, "partitions": len(t.partitions), "shows_run": t.shown_run,
                     "pending": [c.what for c in _pending(comparison, t)]}
                    for t in comparison.tables
                ],
                "pending": [c.what for c in comparison.changes],
            }  # fmt: skip
            click.echo(json.dumps(document, indent=1))
        else:
            _render(comparison)
        return EXIT_FAILED if comparison.changes else EXIT_OK

    _with_session(spec, master, conf, work)


def _pending(comparison: Any, table: Any) -> list[Any]:
    """The pending changes of one table (its view or its current generation's table)."""
    return [
        c
        for c in comparison.changes
        if c.table in (f"{table.database}.{table.name}", f"{table.database}.{table.table}")
    ]


def _render(comparison: Any) -> None:
    console = stdout_console()
    console.print(f"metastore: {comparison.metastore.describe()}")
    if not comparison.tables:
        console.print("no tables yet: nothing is committed")
        return
    grid = Table("data", "name", "reads", "partitions", "shows", "in the metastore")
    for table in comparison.tables:
        pending = _pending(comparison, table)
        grid.add_row(
            table.dataset,
            f"{table.database}.{table.name}",
            table.table,
            str(len(table.partitions)),
            f"run #{table.shown_run}",
            "matches" if not pending else f"{counted(len(pending), 'change')} pending",
        )
    console.print(grid)
    for change in comparison.changes:
        console.print(f"  pending: {change.what}")
    if comparison.changes:
        console.print("`pipelines repair` makes these changes (every run makes them at its end)")


@click.command()
@click.argument("pipeline", type=click.Path(exists=True, dir_okay=False))
@_session_options
def repair(pipeline: str, master: str, conf: tuple[str, ...]) -> None:
    """Bring PIPELINE's tables in the metastore back to its committed state: what every run does at
    its end (after a crash, or with the metastore away, the next run or this command catches up).
    An embedded metastore whose database cannot be opened is moved aside and made anew, its tables
    registered again from the committed manifests. Idempotent: a second repair changes nothing."""
    spec = pipeline_file(pipeline)

    def work(spark: Any) -> int:
        from pipelines.catalog.connection import attach  # noqa: PLC0415
        from pipelines.catalog.sync import bring_up_to_date  # noqa: PLC0415

        metastore = attach(spec, spark)
        assert metastore is not None
        comparison = bring_up_to_date(spec, _state(spec, spark), spark, metastore)
        if not comparison.changes:
            click.echo(f"nothing to repair: {metastore.describe()} matches the committed state")
            return EXIT_OK
        for change in comparison.changes:
            click.echo(f"done: {change.what}")
        return EXIT_OK

    _with_session(spec, master, conf, work, repairing=True)


@click.command()
@click.argument("pipeline", type=click.Path(exists=True, dir_okay=False))
@click.argument("query")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(min=1), help="Rows shown at most.")
@click.option("--json", "as_json", is_flag=True, help="Rows as JSON lines.")
@_session_options
def sql(pipeline: str, query: str, limit: int, as_json: bool, master: str, conf: tuple[str, ...]) -> None:
    """Run QUERY (Spark SQL) where PIPELINE's tables are found by name, in its database: for
    example `pipelines sql FILE "SELECT count(*) FROM user_sessions"`."""
    spec = pipeline_file(pipeline)

    def work(spark: Any) -> int:
        from pipelines.catalog.desired import quoted  # noqa: PLC0415

        try:
            spark.sql(f"USE {quoted(spec.tables.database)}")
            frame = spark.sql(query)
            rows = frame.limit(limit + 1).collect()
        except Exception as exc:  # Spark's analysis and execution errors: the first line names the cause
            message = next((line for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
            raise PipelineError(f"the query failed: {message.strip()[:500]}") from exc
        if as_json:
            for row in rows[:limit]:
                click.echo(json.dumps(row.asDict(recursive=True), default=str))
        else:
            grid = Table(*frame.columns)
            for row in rows[:limit]:
                grid.add_row(*("NULL" if v is None else str(v) for v in row))
            stdout_console().print(grid)
        if len(rows) > limit:
            click.echo(f"(first {limit} rows shown; --limit shows more)", err=True)
        return EXIT_OK

    _with_session(spec, master, conf, work)


COMMANDS = (tables, repair, sql)
"""Added to the ``pipelines`` group by pipelines.app.cli."""
