"""The transforms' SQL checked without Spark (pipelines.config.sqlcheck): Spark SQL the project's
pipelines use passes, mistakes are errors that say where, and what sqlglot cannot be sure of is a
warning, never an error. The last test asks Spark's own parser (the shared session, no job) about
every statement here, so "Spark accepts it" is Spark's word, not this file's."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from pipelines.config.pipeline import load_spec
from pipelines.config.sqlcheck import Finding, check_transforms
from pipelines.config.steps import Output, Transform

REPO = Path(__file__).resolve().parents[3]

VALID = [
    # window functions, frames, named windows, QUALIFY
    "SELECT *, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY event_time DESC) AS rn FROM raw",
    "SELECT user_id, SUM(amount) OVER (PARTITION BY user_id ORDER BY event_time "
    "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS running, dt FROM raw",
    "SELECT unix_timestamp(event_time) - unix_timestamp(LAG(event_time) OVER w) AS gap, dt FROM raw "
    "WINDOW w AS (PARTITION BY user_id ORDER BY event_time)",
    "SELECT user_id, sum(amount) OVER (PARTITION BY user_id ORDER BY event_time "
    "RANGE BETWEEN INTERVAL 1 HOUR PRECEDING AND CURRENT ROW) AS rolling, dt FROM raw",
    "SELECT user_id, first_value(page) IGNORE NULLS OVER (PARTITION BY user_id ORDER BY event_time) AS fp FROM raw",
    "SELECT user_id, dt FROM raw QUALIFY row_number() OVER (PARTITION BY user_id ORDER BY event_time) = 1",
    # lateral views, explode and other generators
    "SELECT user_id, tag, dt, hour FROM raw LATERAL VIEW explode(split(tags, ',')) t AS tag",
    "SELECT user_id, p.pos, p.item, dt FROM raw LATERAL VIEW OUTER posexplode(items) p AS pos, item",
    "SELECT a, b FROM raw LATERAL VIEW json_tuple(payload, 'a', 'b') jt AS a, b",
    "SELECT user_id, explode(from_json(payload, 'array<string>')) AS item, dt, hour FROM raw",
    "SELECT stack(2, 'a', amount, 'b', amount * 2) AS (k, v), dt FROM raw",
    "SELECT * FROM explode(array(1, 2, 3))",
    "SELECT id FROM range(24)",
    # date and time functions
    "SELECT date_format(event_time, 'yyyy-MM-dd HH:00') AS slot, to_date(event_time) AS d, hour(event_time) AS h, "
    "date_trunc('hour', event_time) AS hr, from_utc_timestamp(event_time, 'Europe/Paris') AS local, dt FROM raw",
    "SELECT event_time + INTERVAL 1 HOUR AS next_hour, datediff(current_date(), to_date(dt)) AS age, "
    "date_add(to_date(dt), 7) AS week, extract(HOUR FROM event_time) AS h, timestampadd(HOUR, 1, event_time) AS t "
    "FROM raw",
    "SELECT window(event_time, '10 minutes').start AS slot, count(*) AS n, dt, hour FROM raw "
    "GROUP BY window(event_time, '10 minutes'), dt, hour",
    # CTEs (nested, recursive) and subqueries
    "WITH daily AS (SELECT user_id, dt, count(*) AS n FROM raw GROUP BY user_id, dt), "
    "ranked AS (SELECT *, dense_rank() OVER (PARTITION BY dt ORDER BY n DESC) AS r FROM daily) "
    "SELECT * FROM ranked WHERE r <= 10",
    "WITH a AS (SELECT * FROM raw) SELECT * FROM (SELECT * FROM a) x JOIN (WITH q AS (SELECT 1 AS k) "
    "SELECT * FROM q) y ON true",
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 24) SELECT i FROM n",
    "SELECT * FROM raw WHERE user_id IN (SELECT user_id FROM clean WHERE amount > 1) "
    "AND NOT EXISTS (SELECT 1 FROM clean c WHERE c.user_id = raw.user_id)",
    "SELECT r.user_id, c.n FROM raw r JOIN (SELECT user_id, count(*) AS n FROM raw GROUP BY user_id) c "
    "ON r.user_id = c.user_id",
    # backticks, keywords as names, case
    "SELECT `offset`, `partition`, `amount` * 1.0 AS `amount eur`, `dt` FROM `raw`",
    "SELECT user, date, timestamp, key, value FROM raw",
    "SELECT * FROM RAW JOIN `Clean` USING (user_id)",
    # the rest of a day's SQL
    "SELECT service, percentile_approx(latency_ms, array(0.5, 0.95, 0.99)) AS p, approx_count_distinct(host) AS h "
    "FROM raw GROUP BY service",
    "SELECT transform(items, x -> upper(x)) AS up, filter(items, x -> x IS NOT NULL) AS kept, "
    "aggregate(items, 0, (acc, x) -> acc + length(x)) AS total FROM raw",
    "SELECT sum(amount) FILTER (WHERE event = 'buy') AS spent, count_if(event = 'click') AS clicks, dt "
    "FROM raw GROUP BY ALL",
    "SELECT dt, hour, count(*) FROM raw GROUP BY GROUPING SETS ((dt, hour), (dt))",
    "SELECT * FROM raw PIVOT (count(*) FOR event IN ('click' AS clicks, 'view' AS views))",
    "SELECT headers[0].key AS hk, element_at(headers, 1).value AS hv, CAST(value AS STRING) AS v, "
    "CAST(amount AS DECIMAL(12, 2)) AS a, try_cast(code AS INT) AS c FROM raw",
    "SELECT /*+ BROADCAST(c) */ r.user_id, c.amount FROM raw r LEFT ANTI JOIN clean c ON r.user_id = c.user_id",
    "SELECT * EXCEPT (headers, key) FROM raw DISTRIBUTE BY dt SORT BY event_time",
    "SELECT x.* FROM (VALUES (1, 'a'), (2, 'b')) AS x(id, name)",
    "SELECT * FROM parquet.`/data/lookup/countries`",
    "SELECT 4 >>> 1, X 'F0' AS b FROM raw",
    "-- sessions per user\nSELECT user_id, /* the day */ dt, count(*) AS n -- events\nFROM raw\nGROUP BY user_id, dt;",
    "FROM raw |> WHERE amount > 0 |> SELECT user_id, dt",
]

INVALID = [
    # (sql, what the error says)
    ("SELECT user_id FORM raw", "syntax error at line 1, column 21 of the SQL: 'raw' is not expected here"),
    ("SELEC user_id FROM raw", "column 15 of the SQL: 'FROM' is not expected here"),
    ("SELECT user_id, COUNT(*) FROM raw GROUP user_id", "column 41 of the SQL: 'user_id' is not expected here"),
    ("SELECT user_id COUNT(*) FROM raw", "column 21 of the SQL: '(' is not expected here"),
    ("SELECT count(DISTINCT user_id FROM raw", "column 13 of the SQL: this '(' is never closed"),
    ("SELECT user_id FROM raw WHERE amount > 0)", "column 41 of the SQL: this ')' closes no '('"),
    ("SELECT 'abc FROM raw", "the quote ' at line 1, column 8 of the SQL is never closed"),
    ("SELECT 1 FROM raw /* no end", "the comment that starts at line 1, column 19 of the SQL is never closed"),
    (
        "SELECT user_id, ROW_NUMBER() OVER (PARTITION BY user_id ORDR BY event_time) FROM raw",
        "expected ) before 'ORDR'",
    ),
    ("WITH a AS SELECT 1 SELECT * FROM a", "column 11 of the SQL: expected ( before 'SELECT'"),
    ("SELECT *\nFROM raw\nWHER amount > 0", "line 3, column 6 of the SQL: 'amount' is not expected here"),
    ("SELECT 1; SELECT 2", "the SQL holds 2 statements: a step is one query"),
    ("-- nothing but a comment", "the SQL holds no query"),
    ("CREATE TABLE t AS SELECT * FROM raw", "the SQL is a CREATE statement, not a query"),
    ("INSERT INTO t SELECT * FROM raw", "the SQL is a INSERT statement, not a query"),
]


def findings(sql: str, depends_on: tuple[str, ...] = ("raw", "clean")) -> list[Finding]:
    """What lint says about ``sql`` as step ``s`` of a pipeline with a step ``clean`` and ``other``."""
    steps = [Transform("clean", "SELECT * FROM raw"), Transform("other", "SELECT * FROM raw")]
    return [f for f in check_transforms([*steps, Transform("s", sql, depends_on)], ()) if f.key == "transforms[2].sql"]


@pytest.mark.parametrize("sql", VALID)
def test_spark_sql_the_pipelines_use_passes(sql: str) -> None:
    assert [f.message for f in findings(sql) if f.error] == []


@pytest.mark.parametrize(("sql", "said"), INVALID)
def test_a_mistake_is_an_error_that_says_where(sql: str, said: str) -> None:
    errors = [f for f in findings(sql) if f.error]
    assert len(errors) == 1, findings(sql)
    assert errors[0].key == "transforms[2].sql"
    assert errors[0].message.startswith("step s: ")
    assert said in errors[0].message


@pytest.mark.parametrize(
    ("sql", "said"),
    [
        # sqlglot takes these for keywords where Spark takes a name (checked as if quoted)
        ("SELECT select FROM raw", "sqlglot reads 'select' (line 1, column 8 of the SQL) as a keyword"),
        ("SELECT * FROM raw WHERE WHERE amount > 0", "sqlglot reads 'WHERE'"),
        # the arguments of a function sqlglot parses its own way: not checked, said
        ("SELECT concat(page user_id) FROM raw", "cannot parse the arguments of concat(...) near 'user_id'"),
        # Spark 4's JSON paths on a variant: only sqlglot's Databricks dialect knows them
        ("SELECT payload:a.b FROM raw", "its Databricks dialect can"),
        ("VALUES (1), (2)", "sqlglot does not read the SQL as a query"),
        ("SELECT * FROM warehouse.dim_users", "reads warehouse.dim_users (line 1, column 15 of the SQL), a table of"),
    ],
)
def test_what_sqlglot_cannot_be_sure_of_is_a_warning(sql: str, said: str) -> None:
    (finding,) = findings(sql)
    assert not finding.error
    assert said in finding.message
    assert finding.render("p.yaml").startswith("p.yaml:transforms[2].sql: warning: step s: ")


def test_a_warning_about_a_keyword_still_checks_the_names() -> None:
    messages = [(f.error, f.message) for f in findings("SELECT select FROM nowhere")]
    assert messages[0][0] is False
    assert messages[1][0] is True and "reads nowhere" in messages[1][1]


@pytest.mark.parametrize(
    ("sql", "said"),
    [
        ("SELECT * FROM clen", "reads clen (line 1, column 15 of the SQL), which the flow does not provide: it can "
         "read raw, clean; did you mean clean?"),
        ("SELECT * FROM other", "reads step other (line 1, column 15 of the SQL), which is not in its depends_on: "
         "add it there"),
        ("SELECT * FROM othr", "did you mean step other (then add it to depends_on)?"),
        ("SELECT * FROM s", "reads s (line 1, column 15 of the SQL), its own name"),
        ("SELECT * FROM totals", "reads totals (line 1, column 15 of the SQL), an output, not a step: read its "
         "step other"),
        # a CTE sees the CTEs before it, not those after
        ("WITH a AS (SELECT * FROM b), b AS (SELECT * FROM raw) SELECT * FROM a", "reads b (line 1, column 26"),
        # a CTE of a subquery is not seen outside it
        ("SELECT * FROM (WITH q AS (SELECT 1) SELECT * FROM q) x JOIN q ON true", "reads q (line 1, column 61"),
    ],
)  # fmt: skip
def test_a_name_the_flow_does_not_provide_is_an_error(sql: str, said: str) -> None:
    steps = [Transform("clean", "SELECT * FROM raw"), Transform("other", "SELECT * FROM raw")]
    step = Transform("s", sql, ("raw", "clean"))
    found = check_transforms([*steps, step], [Output("totals", "other", "/tmp/totals")])
    assert [(f.key, f.error) for f in found] == [("transforms[2].sql", True)], found
    assert said in found[0].message


def test_raw_is_readable_without_being_declared_and_names_compare_without_case() -> None:
    assert findings("SELECT * FROM RAW r JOIN CLEAN c ON r.k = c.k", ("clean",)) == []


def test_positions_are_the_files_when_it_writes_the_sql_as_a_block_or_one_line(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        "name: p\n"  # 1
        "transforms:\n"  # 2
        "  - name: a\n"  # 3
        "    depends_on: [raw]\n"  # 4
        "    sql: |\n"  # 5
        "      SELECT user_id,\n"  # 6
        "             count(*) AS n\n"  # 7
        "      FORM raw\n"  # 8
        "  - name: b\n"  # 9
        "    sql: SELECT * FROM a WHER x\n"  # 10
        "  - name: c\n"  # 11
        '    sql: "SELECT * FROM nowhere"\n'  # 12
    )
    steps = [Transform("a", "SELECT user_id,\n       count(*) AS n\nFORM raw\n", ("raw",))]
    steps += [Transform("b", "SELECT * FROM a WHER x", ("a",)), Transform("c", "SELECT * FROM nowhere")]
    rendered = [f.render(str(path)) for f in check_transforms(steps, (), path)]
    assert rendered == [
        f"{path}:transforms[0].sql: step a: syntax error at line 8, column 7 of the file: 'FORM' is not expected here",
        f"{path}:transforms[1].sql: step b: syntax error at line 10, column 31 of the file: 'x' is not expected here",
        f"{path}:transforms[2].sql: step c: reads nowhere (line 12, column 25 of the file), which the flow does not "
        "provide: it can read raw",
    ]


def test_every_example_pipeline_lints_clean() -> None:
    paths = sorted((REPO / "conf" / "pipelines").glob("*.yaml"))
    assert paths
    for path in paths:
        spec = load_spec(path)
        assert check_transforms(spec.transforms, spec.outputs, path) == [], path


def test_the_sql_in_the_docs_lints_clean() -> None:
    """Every YAML example in docs/ with transforms, checked as its pipeline would be."""
    checked = 0
    for doc in sorted((REPO / "docs").glob("*.md")):
        for block in re.findall(r"```yaml\n(.*?)```", doc.read_text(encoding="utf-8"), flags=re.DOTALL):
            try:
                document: Any = yaml.safe_load(block)
            except yaml.YAMLError:
                continue  # an excerpt with "..." in it, not a whole file
            if not isinstance(document, dict) or not document.get("transforms"):
                continue
            steps = [Transform(t["name"], t["sql"], tuple(t.get("depends_on", ()))) for t in document["transforms"]]
            assert check_transforms(steps, ()) == [], f"{doc.name}: {block[:200]}"
            checked += len(steps)
    assert checked >= 1


@pytest.mark.integration
def test_spark_s_own_parser_agrees(spark: Any) -> None:
    """Spark's parser (parse only: no table is looked up, no job runs) accepts every statement lint
    passes or only warns about, and refuses every one lint says is a syntax error."""
    parser = spark._jsparkSession.sessionState().sqlParser()

    def spark_parses(sql: str) -> bool:
        try:
            parser.parsePlan(sql)
        except Exception:  # py4j's error carrying Spark's ParseException
            return False
        return True

    warned = ["SELECT select FROM raw", "SELECT * FROM raw WHERE WHERE amount > 0", "SELECT payload:a.b FROM raw"]
    for sql in [*VALID, *warned]:
        assert spark_parses(sql), f"Spark refuses what lint passes: {sql}"
    for sql, said in INVALID:
        if "syntax error" in said or "statements" in said:
            assert not spark_parses(sql), f"Spark accepts what lint calls an error: {sql}"
