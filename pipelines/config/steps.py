"""The spec of what happens after the load: transforms, outputs with expectations, and the schedule.

Role: typed, frozen config (part of PipelineSpec, parsed by specload) and the checks that need the
whole graph: step names unique, dependencies known, no cycles, outputs reading existing steps.
The transform graph is acyclic by construction once it loads; ``topological_order`` is its order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from typing import Literal

from pipelines.config.tables import check_table_name
from pipelines.errors import SpecError

RAW_VIEW = "raw"
"""The view every transform can read: the raw rows of the time partitions a run touched."""

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

DEFAULT_BUCKETS = 16
"""A mirror's buckets unless the file says: a run with a few changes rewrites about a sixteenth of
the table or more, and a table of a few thousand rows is not split into many tiny files."""
MAX_BUCKETS = 4096

ExpectKind = Literal["not_null", "between", "in_set", "unique", "regex", "row_count"]


def _fail(key: str, message: str) -> SpecError:
    return SpecError(f"{key}: {message}")


@dataclass(frozen=True, slots=True)
class Transform:
    """One Spark SQL step. Its result is a view named ``name`` that later steps can read."""

    name: str
    """The step's name; later steps read its rows as a view of this name."""
    sql: str
    """One Spark SQL query; it may read ``raw``, the steps in ``depends_on`` and its own CTEs.
    ``pipelines lint`` and every run check, before Spark starts, that it parses and reads nothing else."""
    depends_on: tuple[str, ...] = ()
    """Steps (or ``raw``) this one reads. Explicit, so the graph (and the Airflow tasks) are known
    from the file; the flow registers only these (and ``raw``) for the step, so lint refuses SQL that
    reads a step not declared here."""

    def __post_init__(self) -> None:
        if not _NAME.match(self.name) or self.name == RAW_VIEW:
            raise _fail("name", f"{self.name!r}: letters, digits and '_' (not starting with a digit), not 'raw'")
        if not self.sql.strip():
            raise _fail("sql", "must not be empty")


@dataclass(frozen=True, slots=True)
class Expectation:
    """One data-quality check, run with great-expectations on an output's staged rows.

    ``not_null``, ``between`` (min and/or max), ``in_set`` (values), ``regex`` (pattern) check one
    ``column`` per row; ``unique`` checks ``columns`` together per row; ``row_count`` (min and/or
    max) checks the whole output. Row checks can quarantine failing rows; ``row_count`` cannot.
    """

    expect: ExpectKind
    """The kind of check."""
    column: str | None = None
    """The column of a per-row check (not_null, between, in_set, regex)."""
    columns: tuple[str, ...] = ()
    """unique: the columns whose combination must be unique."""
    min: float | None = None
    """between, row_count: the lowest allowed value (inclusive)."""
    max: float | None = None
    """between, row_count: the highest allowed value (inclusive)."""
    values: tuple[str | int | float | bool, ...] = ()
    """in_set: the allowed values."""
    pattern: str | None = None
    """regex: a Java regular expression searched in the value (anchor it with ^...$ to match the whole value)."""

    def __post_init__(self) -> None:
        kind = self.expect
        needs_column = kind in ("not_null", "between", "in_set", "regex")
        if needs_column and not self.column:
            raise _fail("column", f"{kind} needs a column")
        if not needs_column and self.column:
            raise _fail("column", f"{kind} takes no column" + (" (use columns)" if kind == "unique" else ""))
        if kind == "unique" and not self.columns:
            raise _fail("columns", "unique needs one or more columns")
        if kind != "unique" and self.columns:
            raise _fail("columns", f"only unique takes columns, not {kind}")
        if kind in ("between", "row_count"):
            if self.min is None and self.max is None:
                raise _fail("min", f"{kind} needs min, max or both")
            if self.min is not None and self.max is not None and self.min > self.max:
                raise _fail("min", f"min {self.min} is greater than max {self.max}")
        elif self.min is not None or self.max is not None:
            raise _fail("min" if self.min is not None else "max", f"{kind} takes no min or max")
        if (kind == "in_set") != bool(self.values):
            raise _fail("values", "in_set needs values" if kind == "in_set" else f"{kind} takes no values")
        if (kind == "regex") != (self.pattern is not None):
            raise _fail("pattern", "regex needs a pattern" if kind == "regex" else f"{kind} takes no pattern")
        if self.pattern is not None:
            try:
                re.compile(self.pattern)
            except re.error as exc:
                raise _fail("pattern", f"not a valid regular expression: {exc}") from exc

    @property
    def per_row(self) -> bool:
        return self.expect != "row_count"

    def describe(self) -> str:
        """A short human name: ``not_null(page)``, ``between(views, 1..)``, ``row_count(1..1000)``."""
        bounds = f"{_number(self.min)}..{_number(self.max)}"
        target = {
            "not_null": f"{self.column}",
            "between": f"{self.column}, {bounds}",
            "in_set": f"{self.column}, {len(self.values)} values",
            "unique": ", ".join(self.columns),
            "regex": f"{self.column} ~ {self.pattern}",
            "row_count": bounds,
        }[self.expect]
        return f"{self.expect}({target})"


def _number(value: float | None) -> str:
    if value is None:
        return ""
    return str(int(value)) if value == int(value) else str(value)


@dataclass(frozen=True, slots=True)
class Output:
    """A warehouse table: the rows of step ``source``, Parquet, partitioned by ``partition_by``;
    each run overwrites exactly the partitions it recomputed (``mode: partitions``, the default). Or,
    with ``mode: mirror``, a source database's table made from the change events the step holds."""

    name: str
    """The output's name (Airflow task ids and validation records use it)."""
    source: str
    """The transform whose rows this output holds (YAML key ``from`` is not allowed: use ``source``)."""
    path: str
    """The table's directory: ``<path>/dt=.../hour=.../*.parquet`` (any scheme the raw path may have)."""
    partition_by: tuple[Literal["dt", "hour"], ...] = ("dt", "hour")
    """``[dt, hour]`` or ``[dt]``: the step's rows must have these columns (strings, as in raw)."""
    expectations: tuple[Expectation, ...] = ()
    """Checks of the rows before they are published."""
    on_failure: Literal["fail", "quarantine"] = "fail"
    """fail: nothing of the run is published; quarantine: rows failing a row check are kept aside
    with their reasons, the rest is published, if they are at most ``max_quarantine_share``."""
    max_quarantine_share: float = 0.01
    """quarantine only: if more than this share of the rows fail, nothing is published."""
    compression: Literal["snappy", "zstd", "gzip", "none"] = "snappy"
    """Parquet compression codec."""
    table: str | None = None
    """Its table's name in the metastore (``tables``); default: the output's name, lower-cased."""
    mode: Literal["partitions", "mirror"] = "partitions"
    """partitions: the step's rows, each run overwriting the partitions it recomputed. mirror: a
    table equal to a source database's table, from the change events (Debezium's envelope) the
    step's rows hold: the current row of every key, deletes applied (docs/cdc.md). Not built yet:
    a run refuses it (the load stage alone still keeps the change events in the raw layer)."""
    key: tuple[str, ...] = ()
    """mirror only: the source table's primary-key columns, as the envelope's ``after`` names them."""
    buckets: int | None = None
    """mirror only: how many buckets the table is split into by a hash of the key (default 16); a run
    rewrites only the buckets its changes touch. Fixed when the table is made: changing it is a replay."""
    history: str | None = None
    """mirror only: the metastore name of a second table with every version of every row, valid
    from and to the source's commit times (a type-2 dimension); null: no history."""

    @property
    def table_name(self) -> str:
        """The name readers find the output by in the metastore (without the database)."""
        return self.table if self.table is not None else self.name.lower()

    @property
    def bucket_count(self) -> int:
        """A mirror's number of buckets (``buckets``, or its default)."""
        return self.buckets if self.buckets is not None else DEFAULT_BUCKETS

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise _fail("name", f"{self.name!r}: letters, digits and '_' (not starting with a digit)")
        if self.table is not None:
            check_table_name("table", self.table)
        if self.partition_by not in (("dt", "hour"), ("dt",)):
            raise _fail("partition_by", f"[dt, hour] or [dt], not {list(self.partition_by)}")
        if not self.path:
            raise _fail("path", "must not be empty")
        if not 0.0 <= self.max_quarantine_share <= 1.0:
            raise _fail("max_quarantine_share", "must be between 0 and 1")
        if self.mode == "mirror":
            self._check_mirror()
        else:
            for name in ("key", "buckets", "history"):
                if getattr(self, name) not in ((), None):
                    raise _fail(name, f"only a mirror (mode: mirror) has {name}")

    def _check_mirror(self) -> None:
        if not self.key:
            raise _fail("key", "a mirror needs the source table's key columns (key: [id])")
        for i, column in enumerate(self.key):
            if not _NAME.match(column):
                raise _fail(f"key[{i}]", f"{column!r}: letters, digits and '_' (not starting with a digit)")
            if column in self.key[:i]:
                raise _fail(f"key[{i}]", f"{column!r} is already key[{self.key.index(column)}]")
        if self.buckets is not None and not 1 <= self.buckets <= MAX_BUCKETS:
            raise _fail("buckets", f"must be between 1 and {MAX_BUCKETS}, not {self.buckets}")
        if self.partition_by != ("dt", "hour"):
            raise _fail("partition_by", "a mirror is split into buckets by its key, not partitioned by dt/hour")
        if self.on_failure == "quarantine":
            raise _fail("on_failure", "a mirror cannot set a change aside (it would no longer equal the source): fail")
        if self.history is not None:
            check_table_name("history", self.history)
            if self.history == self.table_name:
                raise _fail("history", f"{self.history!r} is the mirror's own table: name another")


@dataclass(frozen=True, slots=True)
class Schedule:
    """How Airflow runs the pipeline (one DAG per pipeline file)."""

    cron: str | None = "@hourly"
    """A cron expression or preset (``@hourly``, ``@daily``); null: triggered by hand only."""
    start_date: str = "2026-01-01"
    """The first logical date (YYYY-MM-DD); runs are not caught up."""
    retries: int = 2
    """Attempts after a failure, per task (every task is idempotent)."""
    retry_delay_seconds: int = 300
    """Wait between attempts."""
    spark_master: str = "local[2]"
    """``--master`` for spark-submit (local[N], spark://, yarn, k8s://)."""
    spark_submit: str = "spark-submit"
    """The spark-submit command (a path, or a name on PATH)."""
    task_timeout_minutes: int = 120
    """A task running longer fails (and is retried)."""
    tags: tuple[str, ...] = ()
    """Airflow tags (``pipelines`` is always added)."""
    airflow_connection: str | None = None
    """For a secured source: the Airflow connection whose password the tasks get in the environment
    variable ``source.security.password`` names (``${env:NAME}``), so the secret lives in Airflow's
    store, masked in its logs, and never in the DAG or the pipeline file."""

    def __post_init__(self) -> None:
        if self.airflow_connection is not None and not re.fullmatch(r"[A-Za-z0-9_.-]+", self.airflow_connection):
            raise _fail("airflow_connection", f"{self.airflow_connection!r} is not an Airflow connection id")
        try:
            date.fromisoformat(self.start_date)
        except ValueError as exc:
            raise _fail("start_date", f"{self.start_date!r} is not a date YYYY-MM-DD") from exc
        for key in ("retries", "retry_delay_seconds", "task_timeout_minutes"):
            if getattr(self, key) < 0:
                raise _fail(key, "must not be negative")
        if self.cron is not None and not (self.cron.startswith("@") or len(self.cron.split()) in (5, 6)):
            raise _fail("cron", f"{self.cron!r} is neither a preset like @hourly nor a 5-field cron expression")


MIRROR_NOT_BUILT = (
    "mode: mirror is not built yet: the rule that makes the table from its change events is "
    "(pipelines/cdc), but not the table's bucketed layout, the rewrite of the buckets a run touches, nor its "
    "publish through the readers' view switch; run the load stage alone (--stage load) to keep the change "
    "events in the raw layer meanwhile"
)


def unbuilt(outputs: tuple[Output, ...]) -> str | None:
    """Why a run cannot build these outputs (None: it can): an output of a mode not built yet,
    refused before a run loads or publishes anything rather than half done."""
    for i, output in enumerate(outputs):
        if output.mode == "mirror":
            return f"outputs[{i}] ({output.name}): {MIRROR_NOT_BUILT}"
    return None


def check_graph(transforms: tuple[Transform, ...], outputs: tuple[Output, ...]) -> None:
    """Names unique, dependencies known, no cycle, every output reads a step; SpecError naming
    the key path otherwise."""
    names: dict[str, int] = {}
    for i, step in enumerate(transforms):
        if step.name in names:
            raise _fail(f"transforms[{i}].name", f"{step.name!r} is already step {names[step.name]}")
        names[step.name] = i
    for i, step in enumerate(transforms):
        for j, dependency in enumerate(step.depends_on):
            if dependency != RAW_VIEW and dependency not in names:
                known = ", ".join([RAW_VIEW, *names])
                raise _fail(f"transforms[{i}].depends_on[{j}]", f"unknown step {dependency!r} (known: {known})")
    topological_order(transforms)
    seen_outputs: set[str] = set()
    for i, output in enumerate(outputs):
        if output.name in seen_outputs:
            raise _fail(f"outputs[{i}].name", f"{output.name!r} is already an output")
        seen_outputs.add(output.name)
        if output.source not in names:
            raise _fail(f"outputs[{i}].source", f"unknown step {output.source!r} (steps: {', '.join(names) or 'none'})")


def topological_order(transforms: tuple[Transform, ...]) -> list[Transform]:
    """The steps in an order where every step comes after its dependencies (file order among
    independent steps); SpecError naming the cycle if there is one."""
    by_name = {t.name: t for t in transforms}
    order: list[Transform] = []
    state: dict[str, str] = {}

    def visit(name: str, path: list[str]) -> None:
        if state.get(name) == "done":
            return
        if state.get(name) == "visiting":
            cycle = [*path[path.index(name) :], name]
            index = list(by_name).index(name)
            raise _fail(f"transforms[{index}].depends_on", "cycle: " + " -> ".join(cycle))
        state[name] = "visiting"
        for dependency in by_name[name].depends_on:
            if dependency in by_name:
                visit(dependency, [*path, name])
        state[name] = "done"
        order.append(by_name[name])

    for name in by_name:
        visit(name, [])
    return order
