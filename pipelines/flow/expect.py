"""Data-quality checks of an output's rows with great-expectations (GX Core), and the quarantine split.

Role: turn the ``Expectation`` configs of an output (pipelines.config.steps) into one GX suite, run it on a
Spark DataFrame (ephemeral context, spark datasource, dataframe asset, one batch, result format
BASIC, no samples) and report per check; for ``on_failure: quarantine`` outputs, set aside the rows that fail
a row check, with their reasons, and publish the rest.

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
from dataclasses import dataclass
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
A sample costs GX one more Spark job per check (a third of a validation's time on small data),
and no result here shows one."""
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


@dataclass(frozen=True, slots=True)
class Validation:
    """The GX validation of one output's rows: one :class:`CheckResult` per expectation, in spec order."""

    output: str
    rows: int
    success: bool
    checks: tuple[CheckResult, ...]

    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable record (for the run manifest): every check and GX's statistics."""
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


@contextmanager
def split_for_quarantine(
    frame: DataFrame, expectations: Sequence[Expectation], output: str, max_share: float
) -> Iterator[tuple[DataFrame, DataFrame, Validation]]:
    """(passing rows without the helper column, failing rows with a `reason` string column joining
    the failed checks with '; ', validation of the passing rows), valid inside the ``with`` block:
    the marked rows they both come from are persisted until it ends, so the counting, GX's jobs and
    the caller's writes compute the marks (window functions, for ``unique``) once.

    Raises ValidationError naming the output, the share and the first failing checks if failing rows
    / all rows > max_share, or if a row_count check fails (it cannot be quarantined; it is judged on
    the rows that would be published), or if the passing rows still fail GX (mirror mismatch).

    ``frame`` is evaluated several times (counting, validation, and later the caller's writes), so
    it must be deterministic: staged rows, not a random sample.
    """
    marked = _persisted_adaptively(mark_failing_rows(frame, expectations))
    try:
        yield _split(marked, expectations, output, max_share)
    finally:
        marked.unpersist()


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
    row_checks = list(dict.fromkeys(e.describe() for e in expectations if e.per_row))
    counts = marked.agg(
        F.count(F.lit(1)).alias("rows"),
        F.count_if(is_failing).alias("failing"),
        *[F.count_if(F.array_contains(F.col(FAILED_CHECKS), name)).alias(f"c{i}") for i, name in enumerate(row_checks)],
    ).first()
    assert counts is not None  # an aggregate without grouping has exactly one row
    rows, failing = int(counts["rows"]), int(counts["failing"])
    share = failing / rows if rows else 0.0
    if share > max_share:
        per_check = [(name, int(counts[f"c{i}"])) for i, name in enumerate(row_checks)]
        first = _first([f"{name} ({_rows_text(n)})" for name, n in per_check if n], ", ")
        raise ValidationError(
            f"{output}: {failing} of {rows} rows ({share:.2%}) fail row checks, more than "
            f"max_quarantine_share {max_share:.2%}; first failing checks: {first}"
        )

    passing = marked.filter(~is_failing).drop(FAILED_CHECKS)
    quarantined = marked.filter(is_failing).withColumn(REASON, F.array_join(F.col(FAILED_CHECKS), "; "))
    validation = validate(passing, expectations, output, persist=False)  # a filter of the persisted marks
    if not validation.success:
        failed = validation.failed
        names = _first([f"{c.expectation}: {c.observed}" for c in failed], "; ")
        if any(c.expectation.startswith("row_count(") for c in failed):
            raise ValidationError(
                f"{output}: a row_count check fails on the {validation.rows} rows to publish ({failing} of "
                f"{rows} rows, {share:.2%}, set aside) and cannot be quarantined; first failing checks: {names}"
            )
        raise ValidationError(
            f"{output}: {validation.rows} rows kept after quarantining {failing} of {rows} ({share:.2%}) still "
            f"fail great-expectations, so the Spark mirror of these checks disagrees with GX; first failing "
            f"checks: {names}"
        )
    return passing, quarantined.drop(FAILED_CHECKS), validation


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
            e.describe(), success=bool(result.success), unexpected=0, observed=f"row count {details['observed_value']}"
        )
    # GX reports unexpected_count None (not 0) for some checks of an empty batch
    unexpected = int(details.get("unexpected_count") or 0)
    elements = int(details.get("element_count") or 0)
    return CheckResult(
        e.describe(), success=bool(result.success), unexpected=unexpected, observed=f"{unexpected} of {elements} rows"
    )


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
