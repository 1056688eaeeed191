"""Data-quality checks (expect.py) with real Spark DataFrames and real great-expectations.

A GX validation costs a second or more, so each one checks many expectations at once and the
validations that several tests read are module-scoped fixtures.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import pytest

from pipelines.config.steps import Expectation
from pipelines.errors import ValidationError
from pipelines.flow import expect
from pipelines.flow.expect import (
    FAILED_CHECKS,
    REASON,
    LoadedCheck,
    QuarantineRefused,
    Sample,
    Validation,
    as_loaded,
    mark_failing_rows,
    split_for_quarantine,
    validate,
)

SCHEMA = "id int, page string, views long, country string, code string, dt string"

NOT_NULL = Expectation("not_null", column="page")
BETWEEN = Expectation("between", column="views", min=0, max=100)
IN_SET = Expectation("in_set", column="country", values=("de", "fr", "us"))
UNIQUE = Expectation("unique", columns=("id",))
COMPOUND = Expectation("unique", columns=("page", "dt"))
MATCH = Expectation("regex", column="code", pattern="^[A-Z]{3}$")
SEARCH = Expectation("regex", column="code", pattern="[A-Z]{3}")
EVERY_KIND = (NOT_NULL, BETWEEN, IN_SET, UNIQUE, COMPOUND, MATCH, Expectation("row_count", min=1, max=10))

CLEAN = [
    (1, "home", 0, "de", "ABC", "2026-03-01"),
    (2, "home", 100, "fr", "XYZ", "2026-03-02"),
    (3, "about", 50, "us", "QQQ", "2026-03-01"),
]

# every failing row is commented with the checks it fails; nulls sit where GX ignores them
DIRTY = [
    (1, "home", 5, "de", "ABC", "d1"),  # unique(page, dt) with 8
    (2, None, 5, "de", "ABC", "d1"),  # not_null; unique(page, dt) with 3 (nulls compare equal)
    (3, None, 150, "xx", "abc", "d1"),  # not_null, between, in_set, both regexes; unique(page, dt) with 2
    (4, "about", None, None, None, "d1"),  # unique(id) with 5; null views, country, code are not failures
    (4, "blog", -1, "fr", "ABCD", "d2"),  # unique(id) with 4, between; ^[A-Z]{3}$ only (search finds ABC)
    (None, "blog", 0, "us", "XYZ", "d3"),  # null id twice: not a duplicate; 0 and 100 are inside (inclusive)
    (None, "home", 100, "us", "QQQ", "d3"),
    (8, "home", 100, "de", "ZZZ", "d1"),  # unique(page, dt) with 1
    (9, None, 1, "de", "AAA", None),  # not_null; page and dt both null: ignored by unique(page, dt)
    (10, None, 2, "de", "BBB", None),  # not_null; likewise
]
DIRTY_CHECKS = (
    NOT_NULL,
    BETWEEN,
    IN_SET,
    UNIQUE,
    COMPOUND,
    MATCH,
    SEARCH,
    Expectation("row_count", max=5),
    Expectation("row_count", min=20),
    Expectation("row_count", min=10, max=10),
)
DIRTY_UNEXPECTED = {
    "not_null(page)": 4,
    "between(views, 0..100)": 2,
    "in_set(country, 3 values)": 1,
    "unique(id)": 2,
    "unique(page, dt)": 4,
    "regex(code ~ ^[A-Z]{3}$)": 2,
    "regex(code ~ [A-Z]{3})": 1,
}


def frame(spark: Any, rows: Sequence[tuple[Any, ...]], schema: str = SCHEMA) -> Any:
    return spark.createDataFrame(list(rows), schema)


def mirror_counts(marked: Any) -> dict[str, int]:
    """How many rows mark_failing_rows flags per check."""
    from pyspark.sql import functions as F

    exploded = marked.select(F.explode(FAILED_CHECKS).alias("check")).groupBy("check").count().collect()
    return {row["check"]: row["count"] for row in exploded}


def checks_by_name(validation: Validation) -> dict[str, tuple[bool, int, str]]:
    return {c.expectation: (c.success, c.unexpected, c.observed) for c in validation.checks}


@pytest.fixture(scope="module")
def dirty(spark: Any) -> Any:
    return frame(spark, DIRTY)


@pytest.fixture(scope="module")
def dirty_validation(dirty: Any) -> Validation:
    return validate(dirty, DIRTY_CHECKS, "events")


def test_a_clean_batch_passes_every_kind(spark: Any) -> None:
    clean = frame(spark, CLEAN)
    validation = validate(clean, EVERY_KIND, "events")
    assert validation.success and validation.rows == 3 and validation.output == "events"
    assert [c.expectation for c in validation.checks] == [e.describe() for e in EVERY_KIND]  # spec order
    assert all(c.success and c.unexpected == 0 for c in validation.checks)
    assert validation.checks[0].observed == "0 of 3 rows"
    assert validation.checks[-1].observed == "row count 3"
    assert mirror_counts(mark_failing_rows(clean, EVERY_KIND)) == {}
    only_row_count = mark_failing_rows(clean, EVERY_KIND[-1:])  # not per row: nothing to mark
    assert dict(only_row_count.dtypes)[FAILED_CHECKS] == "array<string>"
    assert [r[FAILED_CHECKS] for r in only_row_count.collect()] == [[], [], []]


def test_a_dirty_batch_fails_every_kind_with_gx_exact_counts(dirty_validation: Validation) -> None:
    assert not dirty_validation.success
    assert dirty_validation.rows == len(DIRTY)
    got = checks_by_name(dirty_validation)
    for name, unexpected in DIRTY_UNEXPECTED.items():
        assert got[name] == (False, unexpected, f"{unexpected} of {len(DIRTY)} rows"), name


def test_nulls_fail_only_not_null_and_partly_null_keys(dirty_validation: Validation) -> None:
    got = checks_by_name(dirty_validation)
    # row 4's null views/country/code are not counted: 2, 1 and 2 are exactly the non-null failures
    assert got["between(views, 0..100)"][1] == 2
    assert got["in_set(country, 3 values)"][1] == 1
    # two null ids are not duplicates of each other; only the two 4s are
    assert got["unique(id)"][1] == 2
    # (null, d1) twice is a duplicate (nulls compare equal), (null, null) twice is ignored
    assert got["unique(page, dt)"][1] == 4


def test_regex_searches_unless_anchored(dirty_validation: Validation) -> None:
    got = checks_by_name(dirty_validation)
    assert got["regex(code ~ ^[A-Z]{3}$)"][1] == 2  # abc, ABCD
    assert got["regex(code ~ [A-Z]{3})"][1] == 1  # abc only: ABCD contains ABC


def test_row_count_bounds_are_inclusive(dirty_validation: Validation) -> None:
    got = checks_by_name(dirty_validation)
    assert got["row_count(..5)"] == (False, 0, "row count 10")
    assert got["row_count(20..)"] == (False, 0, "row count 10")
    assert got["row_count(10..10)"] == (True, 0, "row count 10")


def test_mark_failing_rows_names_each_rows_failed_checks(dirty: Any) -> None:
    marked = mark_failing_rows(dirty, DIRTY_CHECKS)
    assert marked.columns == [*dirty.columns, FAILED_CHECKS]
    assert dict(marked.dtypes)[FAILED_CHECKS] == "array<string>"
    by_id = {(r["id"], r["page"]): r[FAILED_CHECKS] for r in marked.collect()}
    assert by_id[(3, None)] == [
        "not_null(page)",
        "between(views, 0..100)",
        "in_set(country, 3 values)",
        "unique(page, dt)",
        "regex(code ~ ^[A-Z]{3}$)",
        "regex(code ~ [A-Z]{3})",
    ]
    assert by_id[(4, "about")] == ["unique(id)"]
    assert by_id[(None, "blog")] == []
    assert by_id[(9, None)] == ["not_null(page)"]


EDGE_SCHEMA = "k int, k2 string, v double, s string"
EDGE_CHECKS = (
    Expectation("not_null", column="s"),
    Expectation("not_null", column="v"),
    Expectation("between", column="v", min=-1, max=1),
    Expectation("between", column="v", min=0),
    Expectation("between", column="v", max=0.5),
    Expectation("in_set", column="s", values=("a", "", "ü")),
    Expectation("in_set", column="k", values=(1, 2)),
    Expectation("unique", columns=("v",)),
    Expectation("unique", columns=("s",)),
    Expectation("unique", columns=("k", "k2")),
    Expectation("regex", column="s", pattern="^a"),
    Expectation("regex", column="s", pattern="b|^$"),
)
NAN, INF = math.nan, math.inf
EDGES = [
    (1, "x", NAN, "a"),  # NaN sorts above every number: passes a min-only bound, fails any max
    (1, "x", NAN, ""),
    (2, None, INF, "ab"),
    (2, None, -INF, "ba"),
    (None, None, -0.0, "ü"),
    (None, None, 0.0, None),
    (3, "y", 1.0, "a"),
    (3, "y", -1.0, None),
    (4, "z", 0.5, "b"),
    (None, "z", None, "ab"),
    (None, None, None, None),  # all null twice: only not_null counts them
    (None, None, None, None),
]
EDGE_UNEXPECTED = {
    "not_null(s)": 4,
    "not_null(v)": 3,
    "between(v, -1..1)": 4,  # NaN, NaN, inf, -inf
    "between(v, 0..)": 2,  # -inf, -1 (NaN and -0.0 pass)
    "between(v, ..0.5)": 4,  # NaN, NaN, inf, 1
    "in_set(s, 3 values)": 4,  # ab, ba, b, ab
    "in_set(k, 2 values)": 3,  # 3, 3, 4
    "unique(s)": 4,  # a, a, ab, ab
    "unique(k, k2)": 6,  # (1, x), (2, null), (3, y) twice each; (null, null) ignored
    "regex(s ~ ^a)": 4,  # "", ba, ü, b
    "regex(s ~ b|^$)": 3,  # a, a, ü
}


@pytest.fixture(scope="module")
def edges(spark: Any) -> Any:
    return frame(spark, EDGES, EDGE_SCHEMA)


@pytest.fixture(scope="module")
def edges_validation(edges: Any) -> Validation:
    return validate(edges, EDGE_CHECKS, "edges")


def test_edge_values_follow_gx_semantics(edges_validation: Validation) -> None:
    got = {c.expectation: c.unexpected for c in edges_validation.checks}
    assert {name: got[name] for name in EDGE_UNEXPECTED} == EDGE_UNEXPECTED
    # unique(v): the two NaNs are duplicates; -0.0 and 0.0 are one value to Spark's grouping
    assert got["unique(v)"] == 4


@pytest.mark.parametrize("name", ["edges", "dirty", "empty"])
def test_mark_failing_rows_agrees_with_gx_for_every_kind(request: pytest.FixtureRequest, spark: Any, name: str) -> None:
    if name == "empty":
        checks = [EDGE_CHECKS[i] for i in (0, 2, 5, 7, 9, 10)]  # one of each kind is enough for no rows
        data = frame(spark, [], EDGE_SCHEMA)
        validation = validate(data, checks, "empty")
    else:
        checks = [e for e in (DIRTY_CHECKS if name == "dirty" else EDGE_CHECKS) if e.per_row]
        data, validation = request.getfixturevalue(name), request.getfixturevalue(f"{name}_validation")
    gx_counts = {c.expectation: c.unexpected for c in validation.checks if c.unexpected}
    assert all(not c.observed.startswith("error") for c in validation.checks)
    assert mirror_counts(mark_failing_rows(data, checks)) == gx_counts
    assert bool(gx_counts) == (name != "empty")  # not vacuous where there are rows
    if name == "empty":
        assert validation.success and validation.rows == 0


QUARANTINE_CHECKS = (NOT_NULL, BETWEEN, IN_SET, UNIQUE)


def quarantine_frame(spark: Any) -> Any:
    rows = [(i, "home", i, "de", "ABC", "d1") for i in range(1, 19)]
    rows += [(19, None, 5, "de", "ABC", "d1"), (20, "home", 500, "xx", "ABC", "d1")]
    return frame(spark, rows)


def test_quarantine_sets_failing_rows_aside_with_their_reasons(spark: Any) -> None:
    def reads_a_cache(rows: Any) -> bool:
        return "InMemoryRelation" in rows._jdf.queryExecution().withCachedData().toString()

    with split_for_quarantine(quarantine_frame(spark), QUARANTINE_CHECKS, "events", 0.1) as split:
        passing, failing, validation = split
        assert passing.columns == ["id", "page", "views", "country", "code", "dt"]
        assert sorted(r["id"] for r in passing.collect()) == list(range(1, 19))
        assert failing.columns == [*passing.columns, REASON]
        assert {r["id"]: r[REASON] for r in failing.collect()} == {
            19: "not_null(page)",
            20: "between(views, 0..100); in_set(country, 3 values)",
        }
        assert validation.success and validation.rows == 18 and len(validation.checks) == len(QUARANTINE_CHECKS)
        # GX's checks are of the 18 rows kept; the rows as loaded are 20, two of them set aside
        assert all(c.success and c.observed == "0 of 18 rows" for c in validation.checks)
        loaded = validation.loaded
        assert loaded is not None and (loaded.rows, loaded.failing) == (20, 2)
        assert loaded.checks == (
            LoadedCheck("not_null(page)", unexpected=1, samples=(Sample("null", 1),), quarantined=1),
            LoadedCheck("between(views, 0..100)", unexpected=1, samples=(Sample("500", 1),), quarantined=1),
            LoadedCheck("in_set(country, 3 values)", unexpected=1, samples=(Sample('"xx"', 1),), quarantined=1),
            LoadedCheck("unique(id)", unexpected=0, samples=(), quarantined=0),
        )
        assert validation.to_json()["loaded"]["checks"][2] == {
            "expectation": "in_set(country, 3 values)",
            "unexpected": 1,
            "samples": [{"value": '"xx"', "rows": 1}],
            "quarantined": 1,
        }
        # both come from the marks kept for the block (GX's jobs and the writes reuse them) ...
        assert reads_a_cache(passing) and reads_a_cache(failing)
    assert not reads_a_cache(failing.select("*"))  # ... which are let go after it


def test_the_kept_marks_are_not_cut_into_a_task_per_shuffle_partition(spark: Any) -> None:
    # spark-submit's default is 200 shuffle partitions, which a cached plan would otherwise keep
    # (the marks' window functions shuffle): then every job over 20 rows would run 200 tasks
    partitions = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "200")
    try:
        with split_for_quarantine(quarantine_frame(spark), QUARANTINE_CHECKS, "events", 0.1) as (passing, _, _):
            assert passing.rdd.getNumPartitions() < 10
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", partitions)
    assert spark.conf.get(expect._ADAPTIVE_CACHE) == "false"  # the session's own setting, put back


def test_quarantine_refuses_a_share_above_the_maximum(spark: Any) -> None:
    with (
        pytest.raises(ValidationError) as raised,
        split_for_quarantine(quarantine_frame(spark), QUARANTINE_CHECKS, "events", 0.05),
    ):
        pass
    message = str(raised.value)
    assert message.startswith("events: 2 of 20 rows (10.00%)")
    assert "max_quarantine_share 5.00%" in message
    # what was found on the rows as loaded is kept for the record; nothing was set aside, GX never ran
    assert isinstance(raised.value, QuarantineRefused) and raised.value.kept is None
    assert (raised.value.loaded.rows, raised.value.loaded.failing) == (20, 2)
    assert [(c.unexpected, c.samples, c.quarantined) for c in raised.value.loaded.checks] == [
        (1, (Sample("null", 1),), 0),
        (1, (Sample("500", 1),), 0),
        (1, (Sample('"xx"', 1),), 0),
        (0, (), 0),
    ]
    assert "not_null(page) (1 row), between(views, 0..100) (1 row), in_set(country, 3 values) (1 row)" in message


def test_a_failing_row_count_cannot_be_quarantined(spark: Any) -> None:
    checks = (*QUARANTINE_CHECKS, Expectation("row_count", min=19))
    with pytest.raises(ValidationError) as raised, split_for_quarantine(quarantine_frame(spark), checks, "events", 0.5):
        pass
    message = str(raised.value)
    assert message.startswith("events: a row_count check fails on the 18 rows to publish")
    assert "cannot be quarantined" in message and "row_count(19..): row count 18" in message
    assert isinstance(raised.value, QuarantineRefused) and raised.value.kept is not None
    assert not raised.value.kept.success and raised.value.kept.rows == 18  # GX's verdict on the rows kept
    row_count = raised.value.loaded.checks[-1]  # not per row: judged on the rows kept, not counted as loaded
    assert (row_count.expectation, row_count.unexpected, row_count.quarantined) == ("row_count(19..)", None, None)


def test_quarantine_refuses_rows_gx_rejects_that_the_mirror_let_through(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pyspark.sql import functions as F

    monkeypatch.setattr(expect, "_failure", lambda e: F.lit(False))  # a mirror that sees nothing wrong
    with (
        pytest.raises(ValidationError) as raised,
        split_for_quarantine(quarantine_frame(spark), QUARANTINE_CHECKS, "events", 0.5),
    ):
        pass
    message = str(raised.value)
    assert message.startswith("events: 20 rows kept after quarantining 0 of 20 (0.00%) still fail")
    assert "not_null(page): 1 of 20 rows" in message


def test_validation_json_round_trips(dirty_validation: Validation) -> None:
    record = dirty_validation.to_json()
    assert json.loads(json.dumps(record)) == record
    assert record["statistics"] == {
        "evaluated_expectations": len(DIRTY_CHECKS),
        "successful_expectations": 1,
        "unsuccessful_expectations": len(DIRTY_CHECKS) - 1,
        "success_percent": 10.0,
    }
    assert [c["expectation"] for c in record["checks"]] == [e.describe() for e in DIRTY_CHECKS]
    assert record["checks"][0] == {
        "expectation": "not_null(page)",
        "success": False,
        "unexpected": 4,
        "observed": "4 of 10 rows",
    }
    assert (record["output"], record["rows"], record["success"]) == ("events", 10, False)


def test_a_check_gx_cannot_evaluate_fails_without_raising(spark: Any) -> None:
    validation = validate(frame(spark, CLEAN), [Expectation("not_null", column="missing")], "events")
    assert not validation.success
    (check,) = validation.checks
    assert not check.success and check.observed.startswith("error: ")
    assert validation.rows == 3  # counted by Spark, as GX had no element count


def test_every_kind_of_row_check_samples_its_failing_values_as_loaded(dirty: Any) -> None:
    row_checks = {e.describe(): e for e in DIRTY_CHECKS if e.per_row}
    samples = expect._samples(mark_failing_rows(dirty, list(row_checks.values())), row_checks)  # one job for all
    assert {name: [(s.value, s.rows) for s in found] for name, found in samples.items()} == {
        "not_null(page)": [("null", 4)],
        "between(views, 0..100)": [("-1", 1), ("150", 1)],  # numbers as Spark writes them
        "in_set(country, 3 values)": [('"xx"', 1)],  # strings quoted, as JSON writes them
        "unique(id)": [("4", 2)],
        "unique(page, dt)": [('("home", "d1")', 2), ('(null, "d1")', 2)],  # a compound key, nulls equal
        "regex(code ~ ^[A-Z]{3}$)": [('"ABCD"', 1), ('"abc"', 1)],
        "regex(code ~ [A-Z]{3})": [('"abc"', 1)],
    }
    # fewer than SAMPLES distinct values each: every failing row has its value among the samples
    assert {name: sum(s.rows for s in found) for name, found in samples.items()} == DIRTY_UNEXPECTED


def test_a_failing_validation_of_the_rows_as_loaded_gets_samples_of_what_failed(
    dirty: Any, dirty_validation: Validation
) -> None:
    validation = as_loaded(dirty, DIRTY_CHECKS, dirty_validation)  # policy fail: GX's counts, our samples
    loaded = validation.loaded
    assert loaded is not None and (loaded.rows, loaded.failing) == (len(DIRTY), None)
    assert validation.checks == dirty_validation.checks
    by_name = {c.expectation: c for c in loaded.checks}
    assert {name: by_name[name].unexpected for name in DIRTY_UNEXPECTED} == DIRTY_UNEXPECTED
    assert by_name["between(views, 0..100)"].samples == (Sample("-1", 1), Sample("150", 1))
    assert by_name["row_count(..5)"].unexpected is None and by_name["row_count(..5)"].samples == ()
    assert all(c.quarantined is None for c in loaded.checks)  # nothing is quarantined under policy fail
    # every check passed: nothing to sample, so no Spark job (the frame is not even looked at)
    checks = tuple(expect.CheckResult(e.describe(), True, 0, "0 of 3 rows") for e in EVERY_KIND)
    passed = as_loaded(None, EVERY_KIND, Validation("events", 3, True, checks))
    assert passed.loaded is not None and all(c.unexpected in (0, None) and not c.samples for c in passed.loaded.checks)


def test_samples_are_the_most_frequent_few_cut_short_and_escaped(spark: Any) -> None:
    long = "x" * 200
    values = ["a\u202eb", "tab\there", long, long, "q\x07", *[f"v{i}" for i in range(8)], "v3", "v3", "ok"]
    rows = frame(spark, [(v,) for v in values], "s string")
    check = Expectation("in_set", column="s", values=("ok",))
    (samples,) = expect._samples(mark_failing_rows(rows, [check]), {check.describe(): check}).values()
    assert len(samples) == expect.SAMPLES
    assert samples[0] == Sample('"v3"', 3) and samples[1].rows == 2  # the most frequent first
    assert samples[1].value == '"' + "x" * (expect.SAMPLE_CHARS - 2) + "…"  # cut, and says so
    assert all(len(s.value) <= expect.SAMPLE_CHARS for s in samples)
    shown = {
        s.value
        for s in expect._samples(mark_failing_rows(rows.filter("s not like 'v%'"), [check]), {check.describe(): check})[
            check.describe()
        ]
    }
    assert {'"a\\u202eb"', '"tab\\there"', '"q\\u0007"'} <= shown  # nothing unprintable reaches a page or a log
