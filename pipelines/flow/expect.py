"""Data-quality checks of an output's rows with great-expectations (GX Core), and the quarantine split.

Role: turn the ``Expectation`` configs of an output (pipelines.config.steps) into one GX suite, run it on a
Spark DataFrame (ephemeral context, spark datasource, dataframe asset, one batch, result format
BASIC, no samples) and report per check; for ``on_failure: quarantine`` outputs, set aside the rows that fail
a row check, with their reasons, and publish the rest.

Two sets of rows are reported, and never confused: the rows **as loaded** (the output's step rows,
before any quarantine: per check how many fail, a few of their values, how many were set aside for
it; :class:`Loaded`) and the rows **GX validated** (:class:`Validation`: for ``quarantine`` the rows
kept, which are what is published; for ``fail`` the rows as loaded themselves).

Invariant: GX is the judge. The Spark SQL expressions of :func:`mark_failing_rows` mirror GX's own
Spark conditions, but they only pick which rows to set aside; the rows kept are validated again by
GX, and a disagreement (a kept row GX still rejects) fails the output instead of publishing it.

GX semantics mirrored here (great-expectations 1.x, Spark execution engine):

* ``not_null``: a null fails; NaN is not null.
* ``between``, ``in_set``, ``regex``: a null never fails (GX filters nulls out of the domain). Bounds
  are inclusive and compared as doubles (GX coerces ``min_value``/``max_value`` to float). NaN sorts
  above every number in Spark, so NaN passes a ``min``-only bound and fails any ``max``.
* ``regex``: Spark ``rlike`` (Java regex, *search* anywhere in the value, like ``re.search``):
  anchor the pattern with ``^...$`` to match the whole value.
* ``unique`` of one column: every row whose value occurs more than once fails (all copies, not just
  the second); nulls are ignored, so repeated nulls are fine.
* ``unique`` of several columns (GX's compound uniqueness, ``ignore_row_if="all_values_are_missing"``):
  a row whose columns are all null is ignored; otherwise nulls compare equal to each other, so
  ``(1, null)`` twice fails twice.
* ``row_count``: the whole frame, inclusive bounds; it is not per row and cannot be quarantined.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from pipelines.config.steps import Expectation
from pipelines.errors import PipelineError, ValidationError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

FAILED_CHECKS = "_failed_checks"
"""The helper column of :func:`mark_failing_rows`: the ``describe()`` of every row check a row fails."""

REASON = "reason"
"""The column of quarantined rows: their failed checks joined with ``'; '``."""

_RESULT_FORMAT = {"result_format": "BASIC", "partial_unexpected_count": 0}
"""What GX computes per check: its unexpected and element counts, no sample of unexpected values.
A sample costs GX one more Spark job per check (a third of a validation's time on small data); the
samples a record shows come from one job of ours for all the checks (:func:`_samples`)."""
_FIRST_CHECKS = 3
"""How many failing checks an error message names (the validation has them all)."""


@dataclass(frozen=True, slots=True)
class CheckResult:
    """The outcome of one expectation in one GX validation."""

    expectation: str
    """``Expectation.describe()``."""
    success: bool
    unexpected: int
    """Failing rows as GX counted them (0 for ``row_count``, and for a check GX could not evaluate)."""
    observed: str
    """A short human summary: ``3 of 120 rows``, ``row count 0``, or ``error: ...``."""

    def to_json(self) -> dict[str, Any]:
        return {
            "expectation": self.expectation,
            "success": self.success,
            "unexpected": self.unexpected,
            "observed": self.observed,
        }


SAMPLES = 5
"""How many distinct failing values a row check keeps as its sample (the most frequent first)."""
SAMPLE_CHARS = 80
"""How long a sample value may be as shown; longer ones are cut and end with ``…``."""


@dataclass(frozen=True, slots=True)
class Sample:
    """One failing value of a row check as loaded, and how many failing rows hold it."""

    value: str
    """As JSON writes it (strings quoted, ``null``), a compound key as ``(a, b)``; at most
    :data:`SAMPLE_CHARS` characters, anything unprintable escaped. Untrusted data: escape it to show it."""
    rows: int

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "rows": self.rows}


@dataclass(frozen=True, slots=True)
class LoadedCheck:
    """One expectation on the rows as loaded (before any quarantine)."""

    expectation: str
    """``Expectation.describe()``."""
    unexpected: int | None
    """Rows failing it; None for a check that is not per row (``row_count``: judged on the rows GX
    validates) or that GX could not evaluate."""
    samples: tuple[Sample, ...]
    """A few distinct values of its failing rows (of the column, or of the columns of a compound
    ``unique``), the most frequent first; empty when none fail."""
    quarantined: int | None
    """Rows set aside because they fail it (a row failing two checks counts for both); 0 when the
    split was refused; None when the output's policy is not quarantine."""

    def to_json(self) -> dict[str, Any]:
        return {
            "expectation": self.expectation,
            "unexpected": self.unexpected,
            "samples": [sample.to_json() for sample in self.samples],
            "quarantined": self.quarantined,
        }


@dataclass(frozen=True, slots=True)
class Loaded:
    """An output's rows as loaded, checked: one :class:`LoadedCheck` per expectation, in spec order."""

    rows: int
    failing: int | None
    """Rows failing at least one row check (the rows a quarantine sets aside); None where unknown
    (policy fail: GX counts per check only)."""
    checks: tuple[LoadedCheck, ...]

    def to_json(self) -> dict[str, Any]:
        return {"rows": self.rows, "failing": self.failing, "checks": [check.to_json() for check in self.checks]}


@dataclass(frozen=True, slots=True)
class Validation:
    """The GX validation of one output's rows: one :class:`CheckResult` per expectation, in spec order.

    ``loaded``: the same checks on the rows as loaded, when known (see the module doc): for a
    quarantine split they are other rows than those GX validated."""

    output: str
    rows: int
    success: bool
    checks: tuple[CheckResult, ...]
    loaded: Loaded | None = None

    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable record (for the run manifest): every check and GX's statistics, and
        the rows as loaded under ``loaded`` when known."""
        evaluated = len(self.checks)
        successful = sum(1 for check in self.checks if check.success)
        return {
            "output": self.output,
            "rows": self.rows,
            "success": self.success,
            # the same keys and arithmetic as GX's ExpectationSuiteValidationResult.statistics: each
            # check is one GX result, so these are GX's numbers without keeping GX's object around
            "statistics": {
                "evaluated_expectations": evaluated,
                "successful_expectations": successful,
                "unsuccessful_expectations": evaluated - successful,
                "success_percent": successful / evaluated * 100 if evaluated else None,
            },
            "checks": [check.to_json() for check in self.checks],
            **({"loaded": self.loaded.to_json()} if self.loaded is not None else {}),
        }

    @property
    def failed(self) -> tuple[CheckResult, ...]:
        return tuple(check for check in self.checks if not check.success)


def validate(frame: DataFrame, expectations: Sequence[Expectation], output: str, *, persist: bool = True) -> Validation:
    """Run every expectation with GX (ephemeral context, spark datasource, dataframe asset, one suite,
    one batch); result format BASIC without samples (``_RESULT_FORMAT``).

    ``frame`` is persisted for the duration (GX runs several Spark jobs over it) unless it already
    is or ``persist`` is false (a cheap view of rows persisted elsewhere), and unpersisted
    afterwards. A check GX cannot evaluate (e.g. a missing column) fails with ``observed`` starting
    ``error:``; it does not raise.
    """
    gx, gxe = _import_gx()
    context = _context(gx)
    source = context.data_sources.add_spark(name="spark", persist=False)
    batch_definition = source.add_dataframe_asset(name="frame").add_batch_definition_whole_dataframe("whole")
    suite = context.suites.add(gx.ExpectationSuite(name=output))
    for index, expectation in enumerate(expectations):
        # GX reorders results (it groups them by domain): the index in meta maps each one back
        suite.add_expectation(_to_gx(gxe, expectation, {"index": index}))

    persisted_here = persist and not frame.is_cached
    if persisted_here:
        frame.persist()
    try:
        result = batch_definition.get_batch(batch_parameters={"dataframe": frame}).validate(
            suite, result_format=_RESULT_FORMAT
        )
        by_index = {int(r.expectation_config.meta["index"]): r for r in result.results}
        checks = tuple(_check(expectation, by_index[i]) for i, expectation in enumerate(expectations))
        rows = _rows(result.results)
        if rows is None:  # no expectations, or none GX could evaluate: count ourselves
            rows = frame.count()
    finally:
        if persisted_here:
            frame.unpersist()
    return Validation(output=output, rows=rows, success=bool(result.success), checks=checks)


def mark_failing_rows(frame: DataFrame, expectations: Sequence[Expectation]) -> DataFrame:
    """`frame` plus a column `_failed_checks` (array<string> of Expectation.describe() of the per-row
    checks the row fails; empty array when it passes), computed with Spark SQL expressions that
    mirror GX's (see the module docstring for nulls, NaN, regex search and unique). row_count is not
    per row and is ignored here.

    The ``unique`` checks use window functions, so the rows come back reshuffled.
    """
    from pyspark.sql import functions as F  # noqa: PLC0415 - pyspark is the caller's, imported on use

    row_checks = [e for e in expectations if e.per_row]
    # one temporary boolean column per check first: window functions (unique) are then plain
    # projections instead of being nested inside the array expression
    flags = {f"__expect_failed_{i}": _failure(e) for i, e in enumerate(row_checks)}
    marked = frame.withColumns(flags) if flags else frame
    names = [F.when(F.col(flag), F.lit(e.describe())) for flag, e in zip(flags, row_checks, strict=True)]
    # when(null) is null, like a false condition: GX counts a row only where its condition is true
    failed = F.array_compact(F.array(*names)) if names else F.array()
    return marked.withColumn(FAILED_CHECKS, failed.cast("array<string>")).drop(*flags)


class QuarantineRefused(ValidationError):
    """:func:`split_for_quarantine` refused the output (nothing of it is published or set aside),
    with what it found, for the validation record: the rows as loaded and, if GX ran, its validation
    of the rows that would have been kept."""

    def __init__(self, message: str, loaded: Loaded, kept: Validation | None) -> None:
        super().__init__(message)
        self.loaded = loaded
        self.kept = kept


@contextmanager
def split_for_quarantine(
    frame: DataFrame, expectations: Sequence[Expectation], output: str, max_share: float
) -> Iterator[tuple[DataFrame, DataFrame, Validation]]:
    """(passing rows without the helper column, failing rows with a `reason` string column joining
    the failed checks with '; ', GX's validation of the passing rows with ``loaded`` set: every check
    on the rows as loaded, their samples and what was set aside for each), valid inside the ``with``
    block: the marked rows they all come from are persisted until it ends, so the counting, the
    samples, GX's jobs and the caller's writes compute the marks (window functions, for ``unique``)
    once. ``validation.loaded.failing`` is the number of failing rows.

    Raises :class:`QuarantineRefused` (a ValidationError naming the output, the share and the first
    failing checks) if failing rows / all rows > max_share, or if a row_count check fails (it cannot
    be quarantined; it is judged on the rows that would be published), or if the passing rows still
    fail GX (mirror mismatch).

    ``frame`` is evaluated several times (counting, validation, and later the caller's writes), so
    it must be deterministic: staged rows, not a random sample.
    """
    marked = _persisted_adaptively(mark_failing_rows(frame, expectations))
    try:
        yield _split(marked, expectations, output, max_share)
    finally:
        marked.unpersist()


def as_loaded(frame: DataFrame, expectations: Sequence[Expectation], validation: Validation) -> Validation:
    """``validation`` (GX's, of ``frame``: the rows as loaded, for a ``fail`` output) with its
    ``loaded`` part: GX's count per check and samples of the values failing each row check GX failed,
    all from one Spark job over the mirror's marks of ``frame`` (none when no row check failed)."""
    failed: dict[str, Expectation] = {}
    for e, check in zip(expectations, validation.checks, strict=True):
        if e.per_row and check.unexpected > 0:
            failed.setdefault(e.describe(), e)
    samples = _samples(mark_failing_rows(frame, list(failed.values())), failed) if failed else {}
    checks = tuple(
        LoadedCheck(
            check.expectation,
            unexpected=check.unexpected if e.per_row and not check.observed.startswith("error:") else None,
            samples=samples.get(check.expectation, ()),
            quarantined=None,
        )
        for e, check in zip(expectations, validation.checks, strict=True)
    )
    return replace(validation, loaded=Loaded(rows=validation.rows, failing=None, checks=checks))


_ADAPTIVE_CACHE = "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning"


def _persisted_adaptively(frame: DataFrame) -> DataFrame:
    """``frame.persist()``, its plan made with adaptive execution on. Spark otherwise plans a cached
    frame without it, so the marks' window shuffle keeps ``spark.sql.shuffle.partitions`` (200
    unless set) partitions, and every later job over the cache runs that many tasks: the
    quarantine split of 6,000 rows took 20 s instead of 3 on two cores. The session's setting is
    put back afterwards (it is read when the cache is registered)."""
    conf = frame.sparkSession.conf
    before = conf.get(_ADAPTIVE_CACHE, None)
    conf.set(_ADAPTIVE_CACHE, "true")
    try:
        return frame.persist()
    finally:
        if before is None:
            conf.unset(_ADAPTIVE_CACHE)
        else:
            conf.set(_ADAPTIVE_CACHE, before)


def _split(
    marked: DataFrame, expectations: Sequence[Expectation], output: str, max_share: float
) -> tuple[DataFrame, DataFrame, Validation]:
    """split_for_quarantine's work on the rows :func:`mark_failing_rows` marked."""
    from pyspark.sql import functions as F  # noqa: PLC0415

    is_failing = F.size(F.col(FAILED_CHECKS)) > 0
    row_checks: dict[str, Expectation] = {}
    for e in expectations:
        if e.per_row:
            row_checks.setdefault(e.describe(), e)
    counts = marked.agg(
        F.count(F.lit(1)).alias("rows"),
        F.count_if(is_failing).alias("failing"),
        *[F.count_if(F.array_contains(F.col(FAILED_CHECKS), name)).alias(f"c{i}") for i, name in enumerate(row_checks)],
    ).first()
    assert counts is not None  # an aggregate without grouping has exactly one row
    rows, failing = int(counts["rows"]), int(counts["failing"])
    per_check = {name: int(counts[f"c{i}"]) for i, name in enumerate(row_checks)}
    # one more job, only when rows fail: a few of their values per check, for the record
    samples = _samples(marked, {n: e for n, e in row_checks.items() if per_check[n]}) if failing else {}

    def loaded(set_aside: bool) -> Loaded:
        checks = tuple(
            LoadedCheck(
                e.describe(),
                unexpected=per_check[e.describe()] if e.per_row else None,
                samples=samples.get(e.describe(), ()),
                quarantined=(per_check[e.describe()] if set_aside else 0) if e.per_row else None,
            )
            for e in expectations
        )
        return Loaded(rows=rows, failing=failing, checks=checks)

    share = failing / rows if rows else 0.0
    if share > max_share:
        first = _first([f"{name} ({_rows_text(n)})" for name, n in per_check.items() if n], ", ")
        raise QuarantineRefused(
            f"{output}: {failing} of {rows} rows ({share:.2%}) fail row checks, more than "
            f"max_quarantine_share {max_share:.2%}; first failing checks: {first}",
            loaded(set_aside=False),
            None,
        )

    passing = marked.filter(~is_failing).drop(FAILED_CHECKS)
    quarantined = marked.filter(is_failing).withColumn(REASON, F.array_join(F.col(FAILED_CHECKS), "; "))
    validation = validate(passing, expectations, output, persist=False)  # a filter of the persisted marks
    if not validation.success:
        failed = validation.failed
        names = _first([f"{c.expectation}: {c.observed}" for c in failed], "; ")
        if any(c.expectation.startswith("row_count(") for c in failed):
            raise QuarantineRefused(
                f"{output}: a row_count check fails on the {validation.rows} rows to publish ({failing} of "
                f"{rows} rows, {share:.2%}, set aside) and cannot be quarantined; first failing checks: {names}",
                loaded(set_aside=False),
                validation,
            )
        raise QuarantineRefused(
            f"{output}: {validation.rows} rows kept after quarantining {failing} of {rows} ({share:.2%}) still "
            f"fail great-expectations, so the Spark mirror of these checks disagrees with GX; first failing "
            f"checks: {names}",
            loaded(set_aside=False),
            validation,
        )
    return passing, quarantined.drop(FAILED_CHECKS), replace(validation, loaded=loaded(set_aside=True))


def _samples(marked: DataFrame, checks: dict[str, Expectation]) -> dict[str, tuple[Sample, ...]]:
    """Up to :data:`SAMPLES` distinct failing values of each check of ``checks`` (describe() →
    expectation) among ``marked``'s rows (:func:`mark_failing_rows`), the most frequent first, then
    by value: one Spark job for every check. Values are cut in Spark (only their first
    SAMPLE_CHARS + 1 characters travel), so a long value costs no more than a short one."""
    from pyspark.sql import Window  # noqa: PLC0415
    from pyspark.sql import functions as F  # noqa: PLC0415

    if not checks:
        return {}
    schema = {field.name: field.dataType for field in marked.schema.fields}
    pairs = [
        F.when(
            F.array_contains(F.col(FAILED_CHECKS), name),
            F.struct(F.lit(name).alias("check"), F.substring(_shown(e, schema), 1, SAMPLE_CHARS + 1).alias("value")),
        )
        for name, e in checks.items()
    ]
    ranked = Window.partitionBy("check").orderBy(F.desc("rows"), F.asc("value"))
    found = (
        marked.filter(F.size(F.col(FAILED_CHECKS)) > 0)
        .select(F.explode(F.array_compact(F.array(*pairs))).alias("pair"))
        .groupBy(F.col("pair.check").alias("check"), F.col("pair.value").alias("value"))
        .agg(F.count(F.lit(1)).alias("rows"))
        .withColumn("rank", F.row_number().over(ranked))
        .filter(F.col("rank") <= SAMPLES)
        .collect()
    )
    by_check: dict[str, list[Sample]] = {}
    for row in sorted(found, key=lambda r: (r["check"], r["rank"])):
        by_check.setdefault(row["check"], []).append(Sample(_printable(row["value"]), int(row["rows"])))
    return {name: tuple(samples) for name, samples in by_check.items()}


def _shown(e: Expectation, schema: dict[str, Any]) -> Column:
    """The failing value of a row as a sample shows it (never null): numbers and booleans as Spark
    writes them, ``null``, anything else as JSON writes it (strings quoted and escaped); the columns of
    a compound ``unique`` as ``(a, b)``."""
    from pyspark.sql import functions as F  # noqa: PLC0415
    from pyspark.sql.types import BooleanType, NumericType  # noqa: PLC0415

    def one(name: str) -> Column:
        column = F.col(name)
        if isinstance(schema.get(name), NumericType | BooleanType):
            return F.coalesce(column.cast("string"), F.lit("null"))
        # JSON of a one-element array, brackets taken off: "text" with its quotes escaped, or null
        return F.regexp_extract(F.to_json(F.array(column)), r"(?s)^\[(.*)\]$", 1)

    if e.expect == "unique":
        if len(e.columns) == 1:
            return one(e.columns[0])
        return F.concat(F.lit("("), F.concat_ws(", ", *[one(c) for c in e.columns]), F.lit(")"))
    assert e.column is not None  # flowspec: every other row check names its column
    return one(e.column)


def _printable(value: str) -> str:
    """A sample value as shown: what is not printable escaped (control and bidi characters, which
    JSON may leave as they are), cut to :data:`SAMPLE_CHARS` characters ending with ``…``."""
    text = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in value)
    return text if len(text) <= SAMPLE_CHARS else text[: SAMPLE_CHARS - 1] + "…"


def _rows_text(n: int) -> str:
    return f"{n} row" if n == 1 else f"{n} rows"


def _first(items: list[str], separator: str) -> str:
    """The first few items of an error message, and how many more there are."""
    more = len(items) - _FIRST_CHECKS
    return separator.join(items[:_FIRST_CHECKS]) + (f"{separator}and {more} more" if more > 0 else "")


_background_import: threading.Thread | None = None


def import_gx_in_background() -> None:
    """Start importing great-expectations on a daemon thread, for a program that validates later.

    The import is seconds of Python, while the Spark start and the load before the first check
    mostly wait on the JVM; :func:`_import_gx` waits for this thread instead of importing again.
    For programs (the command line, the spark-submit job), not for library callers: the thread
    turns DeprecationWarnings off process-wide while it imports (warnings filters are global).
    Calling it again does nothing."""
    global _background_import  # one import per process, started at most once
    if _background_import is None:
        _background_import = threading.Thread(target=_import_quietly, name="import great-expectations", daemon=True)
        _background_import.start()


def _import_quietly() -> None:
    with suppress(Exception, SystemExit):  # the first check imports again, and says what failed
        _import_gx()


def _import_gx() -> tuple[Any, Any]:
    """great_expectations and its expectations module, imported on first use (seconds of imports
    that only validating runs pay), with analytics off."""
    started = _background_import
    if started is not None and started is not threading.current_thread():
        started.join()
    # GX reads this when it is imported; a batch job must not phone home
    os.environ["GX_ANALYTICS_ENABLED"] = "False"
    with warnings.catch_warnings():
        # GX's own imports raise DeprecationWarnings (e.g. sre_constants) we cannot fix, and the
        # test suite turns warnings into errors
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            import great_expectations as gx  # noqa: PLC0415
            import great_expectations.expectations as gxe  # noqa: PLC0415
        except SystemExit as exc:
            # pyspark.sql.connect, which GX imports, exits (code 0) when its packages are missing and
            # the program was started as `python -c`: a run would end silently, "successful"
            raise PipelineError(
                "great-expectations could not be imported: pyspark.sql.connect exited"
                f" (code {exc.code}); install pyspark[connect] (the pipelines extra does)"
            ) from None
    return gx, gxe


def _context(gx: Any) -> Any:
    """A fresh ephemeral context (about 10 ms): in-memory stores, so nothing is written to the working
    directory; no analytics; no progress bars on stderr."""
    from great_expectations.data_context.types.base import (  # noqa: PLC0415
        DataContextConfig,
        InMemoryStoreBackendDefaults,
        ProgressBarsConfig,
    )

    config = DataContextConfig(
        store_backend_defaults=InMemoryStoreBackendDefaults(),
        analytics_enabled=False,
        progress_bars=ProgressBarsConfig(globally=False, metric_calculations=False),
    )
    return gx.get_context(project_config=config, mode="ephemeral")


def _to_gx(gxe: Any, e: Expectation, meta: dict[str, Any]) -> Any:
    """The GX expectation of one config; bounds as floats, as GX stores them anyway."""
    bounds = {
        "min_value": None if e.min is None else float(e.min),
        "max_value": None if e.max is None else float(e.max),
    }
    match e.expect:
        case "not_null":
            return gxe.ExpectColumnValuesToNotBeNull(column=e.column, meta=meta)
        case "between":
            return gxe.ExpectColumnValuesToBeBetween(column=e.column, **bounds, meta=meta)
        case "in_set":
            return gxe.ExpectColumnValuesToBeInSet(column=e.column, value_set=list(e.values), meta=meta)
        case "regex":
            return gxe.ExpectColumnValuesToMatchRegex(column=e.column, regex=e.pattern, meta=meta)
        case "unique" if len(e.columns) == 1:
            return gxe.ExpectColumnValuesToBeUnique(column=e.columns[0], meta=meta)
        case "unique":
            # explicit, because GX's docs and its default have disagreed; mark_failing_rows mirrors this
            return gxe.ExpectCompoundColumnsToBeUnique(
                column_list=list(e.columns), ignore_row_if="all_values_are_missing", meta=meta
            )
        case "row_count":
            return gxe.ExpectTableRowCountToBeBetween(**bounds, meta=meta)
    raise AssertionError(f"unknown expectation kind {e.expect!r}")  # flowspec's Literal rules it out


def _failure(e: Expectation) -> Column:
    """The Spark condition under which a row fails ``e``, as GX's Spark engine computes it: GX's
    expected condition negated, and for every check but not_null only where the value is not null
    (GX's domain filter). Null where GX's condition is null, which counts as not failing."""
    from pyspark.sql import Window  # noqa: PLC0415
    from pyspark.sql import functions as F  # noqa: PLC0415

    if e.expect == "unique":
        if len(e.columns) == 1:
            column = F.col(e.columns[0])
            return column.isNotNull() & (F.count(F.lit(1)).over(Window.partitionBy(column)) > 1)
        # a struct groups nulls together, as GX's partitionBy(struct(...)) does
        key = F.struct(*[F.col(c) for c in e.columns])
        all_null = F.lit(True)
        for c in e.columns:
            all_null = all_null & F.col(c).isNull()
        return ~all_null & (F.count(F.lit(1)).over(Window.partitionBy(key)) > 1)

    assert e.column is not None  # flowspec: every other row check names its column
    column = F.col(e.column)
    expected: Column
    match e.expect:
        case "not_null":
            return column.isNull()
        case "between":
            if e.min is not None and e.max is not None:
                expected = (column >= F.lit(float(e.min))) & (column <= F.lit(float(e.max)))
            elif e.min is not None:
                expected = column >= F.lit(float(e.min))
            else:
                expected = column <= F.lit(float(e.max))  # type: ignore[arg-type]  # flowspec: min or max
        case "in_set":
            expected = column.isin(list(e.values))
        case "regex":
            expected = column.rlike(e.pattern)  # type: ignore[arg-type]  # flowspec: regex has a pattern
        case _:
            raise AssertionError(f"{e.expect} is not a row check")
    return column.isNotNull() & ~expected


def _check(e: Expectation, result: Any) -> CheckResult:
    """One GX result as a CheckResult."""
    details: dict[str, Any] = dict(result.result or {})
    error = _exception_message(result.exception_info)
    if error is not None:
        return CheckResult(e.describe(), success=False, unexpected=0, observed=f"error: {error}")
    if not e.per_row:
        return CheckResult(
            e.describe(),
            success=bool(result.success),
            unexpected=0,
            observed=f"row count {_number(details['observed_value'])}",
        )
    # GX reports unexpected_count None (not 0) for some checks of an empty batch
    unexpected = int(details.get("unexpected_count") or 0)
    elements = int(details.get("element_count") or 0)
    return CheckResult(
        e.describe(),
        success=bool(result.success),
        unexpected=unexpected,
        observed=f"{unexpected:,} of {elements:,} rows",
    )


def _number(value: Any) -> str:
    """A count as people read it (``5,723``); anything else as it is."""
    return f"{value:,}" if isinstance(value, int) else str(value)


def _exception_message(info: Any) -> str | None:
    """The first line of the exception GX caught while evaluating a check, or None. GX gives either
    one ``{raised_exception, exception_message, ...}`` or one such dict per failed metric."""
    if not info:
        return None
    entries = [info] if "raised_exception" in info else list(info.values())
    for entry in entries:
        if isinstance(entry, dict) and entry.get("raised_exception", True) and entry.get("exception_message"):
            return str(entry["exception_message"]).strip().splitlines()[0]
    return None


def _rows(results: Sequence[Any]) -> int | None:
    """The batch's row count as GX saw it: a map check's element_count or a row_count's observed value."""
    for result in results:
        details = result.result or {}
        if details.get("element_count") is not None:
            return int(details["element_count"])
        if result.expectation_config.type == "expect_table_row_count_to_be_between" and "observed_value" in details:
            return int(details["observed_value"])
    return None
