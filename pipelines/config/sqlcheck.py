"""The transforms' SQL, checked without Spark: it parses, and it reads only names the flow provides.

Role: what ``pipelines lint`` says about each step's ``sql``, and what ``pipelines run`` (and the
spark-submit job) checks before it loads anything, so a typo fails in a second, before a load is
committed, rather than in the transform after it. The parser is sqlglot's Spark dialect (no JVM).

What a step may read (pipelines.flow.transforms registers exactly these before it runs the step):

- ``raw``: always (the raw rows of the partitions the run covers), declared or not;
- the steps in its ``depends_on``, each a view of that step's staged rows. A step it does not
  declare is not registered: read anyway it fails when the step runs alone (an Airflow task), and
  works by accident only when an earlier step of the same process happened to declare it;
- the CTEs of its own query, where SQL scopes them (a CTE sees those before it, not after);
- files by path (``parquet.`/path```, any data source format): nothing to check.

A name qualified by a database (``db.table``) is a table of the session's catalog, which lint
cannot see: a warning says it is not checked. Names compare as Spark compares them by default
(case-insensitively).

Invariant: an error is only said when the check is sure, so that SQL Spark accepts is never
refused. sqlglot does not know all of Spark's syntax, so a parse failure is an error only where
its grammar is Spark's (the clauses of a query, quotes, parentheses); a failure inside the
arguments of a function, a word sqlglot takes for a keyword where Spark allows a name, and a
statement sqlglot cannot parse at all but its Databricks dialect (a superset of Spark's) can, are
warnings that say the SQL is not checked there. ``tests/pipelines/config/test_sqlcheck.py`` holds the
Spark features the project's pipelines use, and an integration test compares the verdicts with
Spark's own parser.
"""

from __future__ import annotations

import difflib
import logging
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlglot
import yaml
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokenizer_core import Token, TokenType

from pipelines.config.steps import RAW_VIEW, Output, Transform

DIALECT = "spark"
FALLBACK_DIALECT = "databricks"
"""A superset of Spark's SQL: a statement only it parses may be Spark syntax sqlglot's Spark dialect lacks."""

FILE_FORMATS = frozenset({"parquet", "orc", "json", "csv", "text", "avro", "binaryfile", "delta", "xml"})
"""``format.`path``` reads files directly: the 'database' is a data source format, the name a path."""

STRUCTURAL = frozenset(
    {"IN", "OVER", "AS", "FROM", "JOIN", "USING", "EXISTS", "VALUES", "ON", "WHERE", "AND", "OR", "NOT", "SELECT"}
    | {"BY", "HAVING", "LATERAL", "TABLESAMPLE", "PIVOT", "UNPIVOT", "WITH", "UNION", "ALL", "DISTINCT", "QUALIFY"}
    | {"INTERSECT", "EXCEPT", "THEN", "ELSE", "WHEN", "CASE", "IS", "LIKE", "RLIKE", "BETWEEN", "ANY", "SOME"}
    | {"LIMIT", "ORDER", "GROUP", "PARTITION", "TABLE", "INTO"}
)
"""Keywords after which ``(`` opens a subquery, a list or a clause, not a function's arguments."""

_NOT_NAMES = frozenset({TokenType.VAR, TokenType.IDENTIFIER, TokenType.STRING, TokenType.NUMBER})
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SPELLINGS = (
    (re.compile(r">>>"), lambda m: ">> "),  # Spark's unsigned shift, unknown to sqlglot
    (re.compile(r"\b([Xx])(\s+)'"), lambda m: f"{m[2]}{m[1]}'"),  # X 'F0': a binary literal with a space
)
"""Spark spellings sqlglot does not parse, rewritten (to the same length, so every position holds)
into ones it parses that mean the same to the check."""
_STATEMENTS = (exp.Create, exp.Insert, exp.Drop, exp.Delete, exp.Update, exp.Merge, exp.Alter, exp.Use, exp.Set)
"""Statements that are surely not a step's query (DDL, DML, session commands)."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing lint says about a step's SQL: an error (the step cannot run as written) or a
    warning (lint cannot be sure: that part of the SQL is not checked)."""

    key: str
    """The key path of the step's SQL: ``transforms[2].sql``."""
    message: str
    """What is wrong and where, naming the step: ``step sessions: ...``."""
    error: bool = True

    def render(self, source: str) -> str:
        """``file:key.path: reason`` (the format of every pipeline file error), ``warning:``
        before the reason of a warning."""
        return f"{source}:{self.key}: {'' if self.error else 'warning: '}{self.message}"


@dataclass(frozen=True, slots=True)
class _Where:
    """Maps an offset in a step's SQL to its line and column there, and in the file when the
    file writes the SQL so that its lines are the file's (a ``|`` block, or one line)."""

    sql: str
    file_line: int | None = None
    """The file's line (1-based) of the SQL's first line; None: not known."""
    file_column: int = 0
    """Columns before the SQL's text on each of its lines in the file."""

    def describe(self, offset: int) -> str:
        line = self.sql.count("\n", 0, offset) + 1
        column = offset - (self.sql.rfind("\n", 0, offset) + 1) + 1
        if self.file_line is None:
            return f"line {line}, column {column} of the SQL"
        return f"line {self.file_line + line - 1}, column {self.file_column + column} of the file"


def check_transforms(
    transforms: Sequence[Transform], outputs: Sequence[Output] = (), source: str | Path | None = None
) -> list[Finding]:
    """Every finding about the SQL of ``transforms`` (a loaded pipeline's: names unique, graph
    acyclic), in file order; ``source``: the pipeline file, read again for the file lines of
    positions (optional). No finding is an error unless it is sure (see the module doc)."""
    places = _sql_places(source) if source is not None else {}
    steps = {t.name.lower(): t.name for t in transforms}
    outputs_by_name = {o.name.lower(): o for o in outputs}
    findings: list[Finding] = []
    for index, step in enumerate(transforms):
        key = f"transforms[{index}].sql"
        line, column = places.get(index, (None, 0))
        where = _Where(step.sql, line, column)
        for message, error in _check_step(step, steps, outputs_by_name, where):
            findings.append(Finding(key, f"step {step.name}: {message}", error))
    return findings


# ---------------------------------------------------------------------------------------- parsing


def _check_step(
    step: Transform, steps: dict[str, str], outputs: dict[str, Output], where: _Where
) -> Iterator[tuple[str, bool]]:
    """(message, is_error) for one step: its parse, its statement, the names it reads."""
    tree: exp.Expr | None = None
    parsed = _parse(step.sql, where)
    if isinstance(parsed, _Verdict):
        yield parsed.message, parsed.error
        tree = parsed.tree
    else:
        statements = [s for s in parsed if s is not None]
        if not statements:
            yield "the SQL holds no query (only comments or semicolons)", True
            return
        if len(statements) > 1:
            yield f"the SQL holds {len(statements)} statements: a step is one query, whose rows are the step's", True
            return
        tree = statements[0]
        statement = _statement_problem(tree)
        if statement is not None:
            yield statement
            tree = None
    if tree is None:
        return
    yield from _check_reads(step, tree, steps, outputs, where)


@dataclass(frozen=True, slots=True)
class _Verdict:
    """A parse that did not go through cleanly: what to say, and the tree if one was still had
    (a keyword quoted, or the fallback dialect), whose names are then checked all the same."""

    message: str
    error: bool
    tree: exp.Expr | None = None


def _parse(sql: str, where: _Where) -> list[exp.Expr | None] | _Verdict:
    """sqlglot's statements for ``sql``, or the verdict on a parse that failed."""
    quiet = logging.getLogger("sqlglot")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # it warns on stderr about statements it falls back on; those are our warnings
    for pattern, spelling in _SPELLINGS:
        sql = pattern.sub(spelling, sql)
    try:
        try:
            return list(sqlglot.parse(sql, read=DIALECT))
        except TokenError:
            return _Verdict(f"syntax error: {_unclosed(sql, where)}", error=True)
        except ParseError as exc:
            return _failed_parse(sql, exc, where)
    finally:
        quiet.setLevel(level)


def _failed_parse(sql: str, exc: ParseError, where: _Where) -> _Verdict:
    """The verdict on a ParseError: an error where sqlglot's grammar is surely Spark's, else a
    warning (see the module doc)."""
    tokens = Dialect.get_or_raise(DIALECT).tokenize(sql)
    first = exc.errors[0] if exc.errors else {}
    at = _error_token(tokens, first.get("line"), first.get("col"))
    token = tokens[at] if at is not None else None
    near = f"'{token.text}'" if token is not None else "the end"
    offset = token.start if token is not None else len(sql.rstrip())
    unbalanced = _unbalanced(tokens)
    if unbalanced is not None:
        return _Verdict(f"syntax error at {where.describe(unbalanced[0])}: {unbalanced[1]}", error=True)
    if at is not None:
        quoted = _with_keyword_quoted(sql, tokens, at)
        if quoted is not None:
            word, tree = quoted
            return _Verdict(
                f"sqlglot reads {word!r} ({where.describe(tokens[at].start)}) as a keyword where Spark may take it "
                f"as a name; the SQL is checked as if it were `{word}` (write it so, in backticks, if it is a name)",
                error=False,
                tree=tree,
            )
        function = _enclosing_function(tokens, at)
        if function is not None:
            return _Verdict(
                f"sqlglot cannot parse the arguments of {function}(...) near {near} ({where.describe(offset)}): "
                "they may be Spark syntax it does not know; not checked",
                error=False,
            )
    fallback = _parse_quietly(sql, FALLBACK_DIALECT)
    if fallback is not None:
        return _Verdict(
            f"sqlglot's Spark dialect cannot parse the SQL near {near} ({where.describe(offset)}), its Databricks "
            "dialect can: it may be Spark syntax sqlglot does not know; the names it reads are checked, not its syntax",
            error=False,
            tree=fallback,
        )
    reason = _reason(str(first.get("description") or "unexpected"), near)
    return _Verdict(f"syntax error at {where.describe(offset)}: {reason}", error=True)


def _parse_quietly(sql: str, dialect: str) -> exp.Expr | None:
    """The one query ``sql`` holds as ``dialect`` reads it, or None."""
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except (ParseError, TokenError):
        return None
    return statements[0] if len(statements) == 1 and _statement_problem(statements[0]) is None else None


def _reason(description: str, near: str) -> str:
    """sqlglot's description of a parse error in a reader's words."""
    if description.startswith("Expecting "):
        return f"expected {description.removeprefix('Expecting ')} before {near}"
    if description.startswith("Required keyword"):
        return f"something is missing before {near}"
    if "Unexpected token" in description or "Invalid expression" in description:
        return f"{near} is not expected here"
    return f"{description[:1].lower()}{description[1:]} (near {near})"


def _error_token(tokens: list[Token], line: Any, col: Any) -> int | None:
    """The index of the token sqlglot's error points at (it names its line and last column)."""
    for index, token in enumerate(tokens):
        if token.line == line and token.col == col:
            return index
    return None


def _unbalanced(tokens: list[Token]) -> tuple[int, str] | None:
    """(offset, what) of the first parenthesis without its other half; None if all are paired."""
    open_at: list[Token] = []
    for token in tokens:
        if token.token_type == TokenType.L_PAREN:
            open_at.append(token)
        elif token.token_type == TokenType.R_PAREN:
            if not open_at:
                return token.start, "this ')' closes no '('"
            open_at.pop()
    if open_at:
        return open_at[-1].start, "this '(' is never closed"
    return None


def _unclosed(sql: str, where: _Where) -> str:
    """Where the quote or comment that the tokenizer found unterminated starts."""
    index = 0
    while index < len(sql):
        char = sql[index]
        if sql.startswith("--", index):
            end = sql.find("\n", index)
            index = len(sql) if end < 0 else end
        elif sql.startswith("/*", index):
            end = sql.find("*/", index + 2)
            if end < 0:
                return f"the comment that starts at {where.describe(index)} is never closed"
            index = end + 2
        elif char in "'\"`":
            end = index + 1
            while end < len(sql) and sql[end] != char:
                end += 2 if sql[end] == "\\" and char != "`" else 1
            if end >= len(sql):
                return f"the quote {char} at {where.describe(index)} is never closed"
            index = end
        index += 1
    return "the SQL cannot be split into words (an unterminated quote or comment?)"


def _with_keyword_quoted(sql: str, tokens: list[Token], at: int) -> tuple[str, exp.Expr] | None:
    """Spark lets most keywords be names; sqlglot does not. If writing the keyword at (or just
    before) the error in backticks makes the SQL parse: that word and the tree."""
    for index in range(at, max(at - 3, -1), -1):
        token = tokens[index]
        if token.token_type in _NOT_NAMES or not _WORD.fullmatch(token.text):
            continue
        quoted = f"{sql[: token.start]}`{token.text}`{sql[token.end + 1 :]}"
        tree = _parse_quietly(quoted, DIALECT)
        if tree is not None:
            return token.text, tree
    return None


def _enclosing_function(tokens: list[Token], at: int) -> str | None:
    """The name of the function whose parentheses hold the token at ``at``, if it is in one."""
    open_at: list[int] = []
    for index, token in enumerate(tokens[:at]):
        if token.token_type == TokenType.L_PAREN:
            open_at.append(index)
        elif token.token_type == TokenType.R_PAREN and open_at:
            open_at.pop()
    if not open_at or open_at[-1] == 0:
        return None
    before = tokens[open_at[-1] - 1]
    if before.token_type == TokenType.VAR or (
        _WORD.fullmatch(before.text) and before.token_type not in _NOT_NAMES and before.text.upper() not in STRUCTURAL
    ):
        return before.text
    return None


def _statement_problem(tree: exp.Expr) -> tuple[str, bool] | None:
    """What is wrong with a statement as a step's query (None: it is a query)."""
    if isinstance(tree, exp.Query):
        return None
    if isinstance(tree, exp.Command):
        return f"sqlglot does not know the statement {str(tree.this).upper()!r}: not checked", False
    if isinstance(tree, _STATEMENTS):
        kind = tree.key.upper()
        return f"the SQL is a {kind} statement, not a query: a step's rows are what its query returns", True
    return f"sqlglot does not read the SQL as a query ({tree.key}): not checked", False


# ---------------------------------------------------------------------------------------- names


def _check_reads(
    step: Transform, tree: exp.Expr, steps: dict[str, str], outputs: dict[str, Output], where: _Where
) -> Iterator[tuple[str, bool]]:
    """A finding for every table the query reads that the flow does not register for ``step``."""
    declared = {d.lower(): d for d in step.depends_on if d != RAW_VIEW}
    provided = {RAW_VIEW: RAW_VIEW, **declared}
    said: set[str] = set()
    for table in tree.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier) or table.find_ancestor(exp.Hint) is not None:
            continue  # a table-valued function (range(10), explode(...)), or a hint's argument (BROADCAST(c))
        name = table.name
        at = where.describe(_offset(table.parts[0]))
        if table.args.get("db") is not None or table.args.get("catalog") is not None:
            qualified = ".".join(p.name for p in table.parts)
            if table.db.lower() in FILE_FORMATS and not table.catalog:
                continue  # parquet.`/path`: files read directly
            if qualified.lower() not in said:
                said.add(qualified.lower())
                yield (
                    f"reads {qualified} ({at}), a table of the session's catalog: lint cannot see it, so it is not "
                    "checked (the flow registers raw and the steps in depends_on)",
                    False,
                )
            continue
        lowered = name.lower()
        ctes = _visible_ctes(table)
        if lowered in provided or lowered in ctes or lowered in said:
            continue
        said.add(lowered)
        yield _unknown(step, name, at, provided, ctes, steps, outputs), True


def _unknown(
    step: Transform, name: str, at: str, provided: dict[str, str], ctes: dict[str, str], steps: dict[str, str],
    outputs: dict[str, Output],
) -> str:  # fmt: skip
    """The error for a name the step reads that the flow does not register for it."""
    lowered = name.lower()
    if lowered == step.name.lower():
        return f"reads {name} ({at}), its own name: a step cannot read its own rows"
    if lowered in steps:
        return (
            f"reads step {steps[lowered]} ({at}), which is not in its depends_on: add it there (the flow registers "
            "only the steps a step depends on; run alone, as an Airflow task is, the step would not find it)"
        )
    if lowered in outputs:
        output = outputs[lowered]
        return f"reads {name} ({at}), an output, not a step: read its step {output.source} (and add it to depends_on)"
    readable = [*provided.values(), *ctes.values()]
    close = difflib.get_close_matches(lowered, [*provided, *ctes, *steps], n=1, cutoff=0.6)
    readable_now = {**provided, **ctes}
    hint = ""
    if close and close[0] in readable_now:
        hint = f"; did you mean {readable_now[close[0]]}?"
    elif close:
        hint = f"; did you mean step {steps[close[0]]} (then add it to depends_on)?"
    return f"reads {name} ({at}), which the flow does not provide: it can read {', '.join(readable)}{hint}"


def _visible_ctes(node: exp.Expr) -> dict[str, str]:
    """The CTE names (lower-cased → as written) that SQL's scoping lets ``node`` read: those of
    every enclosing WITH, but within a CTE's own definition only the CTEs before it (and itself,
    in a WITH RECURSIVE)."""
    visible: dict[str, str] = {}
    child: exp.Expr = node
    parent = node.parent
    while parent is not None:
        with_ = parent.args.get("with_") if isinstance(parent, exp.Query) else None
        if isinstance(with_, exp.With) and child is not with_:
            for cte in with_.expressions:
                visible.setdefault(cte.alias.lower(), cte.alias)
        elif isinstance(parent, exp.With):
            recursive = bool(parent.args.get("recursive"))
            for cte in parent.expressions:
                if cte is child:
                    if recursive:
                        visible.setdefault(cte.alias.lower(), cte.alias)
                    break
                visible.setdefault(cte.alias.lower(), cte.alias)
        child, parent = parent, parent.parent
    return visible


def _offset(identifier: exp.Expr) -> int:
    """Where an identifier starts in the SQL (sqlglot keeps the token's offsets on it)."""
    start = identifier.meta.get("start") if identifier.meta else None
    return int(start) if isinstance(start, int) else 0


# ---------------------------------------------------------------------------------------- the file


def _sql_places(source: str | Path) -> dict[int, tuple[int | None, int]]:
    """Step index → (the file line of the first line of its SQL, the columns before it) where the
    file's lines are the SQL's (a ``|`` block, or the SQL on one line); a file that cannot be read
    again gives none (positions are then the SQL's own)."""
    try:
        text = Path(source).read_text(encoding="utf-8")
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return {}
    transforms = _value(root, "transforms")
    if not isinstance(transforms, yaml.SequenceNode):
        return {}
    lines = text.splitlines()
    places: dict[int, tuple[int | None, int]] = {}
    for index, item in enumerate(transforms.value):
        node = _value(item, "sql")
        if not isinstance(node, yaml.ScalarNode):
            continue
        one_line = node.start_mark.line == node.end_mark.line
        if node.style == "|":
            first = node.start_mark.line + 1  # 0-based: the SQL's first line is the one after the indicator
            content = next((line for line in lines[first:] if line.strip()), "")
            places[index] = (first + 1, len(content) - len(content.lstrip(" ")))
        elif one_line and node.style is None:
            places[index] = (node.start_mark.line + 1, node.start_mark.column)
        elif one_line and not any(c in node.value for c in "\\'\""):  # no escape moves a column
            places[index] = (node.start_mark.line + 1, node.start_mark.column + 1)  # after the quote
    return places


def _value(node: Any, key: str) -> Any:
    """The value node of ``key`` in a YAML mapping node (None if it is not one, or has no such key)."""
    if not isinstance(node, yaml.MappingNode):
        return None
    for key_node, value_node in node.value:
        if isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
            return value_node
    return None
