"""Reference tables generated from frozen config dataclasses (docs/config-reference.md, docs/spec-reference.md).

Role: the generic half of a generated configuration reference. ``sections(cls)`` walks a config
class and the dataclasses it nests into one ``Section`` per mapping of the file (dotted paths,
``[]`` marking list items); ``render`` turns sections into markdown tables. Keys, types and
defaults come from the classes themselves; descriptions from each class's docstring and the string
literal right under each field, read with ``ast`` since Python keeps no attribute docstrings at run
time. ``rules()`` states what the loader (kafkalog.configfile.typed) enforces for every file, in
the same words in both references. Callers add what only they know (titles, the file's own
conventions) around the tables.

Invariant: this module imports nothing of ours outside kafkalog.configfile, so any package
(kafkalog's commands, pipelines) may use it without crossing a layer.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import itertools
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafkalog.configfile.typed import RULES

TOP_LEVEL = "top level"
"""The title of the section of the file's top-level keys (whose path is "")."""


@dataclass(frozen=True, slots=True)
class Row:
    """One key of a mapping, as rendered: every cell is text."""

    key: str
    type: str
    default: str
    meaning: str
    """The field's docstring, whitespace collapsed; "" when the field has none."""


@dataclass(frozen=True, slots=True)
class Section:
    """One mapping of the file: the keys of one dataclass, at ``path``."""

    path: str
    """Dotted path from the top ("" for the top level); ``name[]`` stands for every item of a list."""

    cls: type
    """The dataclass whose fields are the keys."""

    doc: str
    """``cls.__doc__``, whitespace collapsed (see ``missing_docs`` for classes without a docstring)."""

    rows: tuple[Row, ...]

    def key_path(self, row: Row) -> str:
        """The full dotted path of one of this section's keys (``outputs[].name``)."""
        return f"{self.path}.{row.key}" if self.path else row.key


def _class_node(cls: type) -> ast.ClassDef:
    node = ast.parse(inspect.getsource(cls)).body[0]
    if not isinstance(node, ast.ClassDef):
        raise TypeError(f"{cls!r}: its source is not a class statement")
    return node


def has_own_docstring(cls: type) -> bool:
    """Whether the class body has a docstring (``__doc__`` alone cannot tell: @dataclass fills a
    missing one with the class's signature)."""
    return ast.get_docstring(_class_node(cls)) is not None


def field_docs(cls: type) -> dict[str, str]:
    """Field name → the string literal right after its annotation in the class body."""
    docs = {}
    for node, following in itertools.pairwise(_class_node(cls).body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            docs[node.target.id] = " ".join(following.value.value.split())
    return docs


_SCALARS: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "true/false",
    Path: "path",
    Any: "any value",
}


def type_name(kind: Any) -> str:
    """How a YAML author reads an annotation: ``list of string``, ``integer or null``, ..."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        names = [type_name(a) for a in args if a is not type(None)]
        return " or ".join(names) + (" or null" if type(None) in args else "")
    if origin is typing.Literal:
        return " \\| ".join(f"`{a}`" for a in args)
    if origin is tuple:
        return f"list of {type_name(args[0])}"
    if origin is dict:
        return f"mapping of {type_name(args[0])} to {type_name(args[1])}"
    if dataclasses.is_dataclass(kind):
        return "mapping (below)"
    return _SCALARS.get(kind, str(kind))


def default_text(item: dataclasses.Field[Any]) -> str:
    """A field's default as the YAML author would write it; ``**required**`` when it has none."""
    if item.default is not dataclasses.MISSING:
        value = item.default
    elif item.default_factory is not dataclasses.MISSING:
        value = item.default_factory()
        if dataclasses.is_dataclass(value):
            return "(defaults below)"
    else:
        return "**required**"
    if value is None:
        return "null"
    if isinstance(value, tuple):
        return "[" + ", ".join(map(str, value)) + "]" if value else "[]"
    if isinstance(value, bool):
        return str(value).lower()
    return f"`{value}`" if value != "" else '""'


def sections(cls: type) -> list[Section]:
    """``cls`` and every dataclass it nests (in a field, a list, or an optional), depth first in
    field order: the order a reader meets them in the file. A path is listed once."""
    out: list[Section] = []
    _walk(cls, "", out, set())
    return out


def _walk(cls: type, path: str, out: list[Section], seen: set[str]) -> None:
    hints = typing.get_type_hints(cls)
    docs = field_docs(cls)
    rows, nested = [], []
    for item in dataclasses.fields(cls):
        kind = hints[item.name]
        rows.append(Row(item.name, type_name(kind), default_text(item), docs.get(item.name, "")))
        inner = [a for a in (kind, *typing.get_args(kind)) if dataclasses.is_dataclass(a)]
        suffix = "[]" if typing.get_origin(kind) is tuple else ""
        nested += [(a, f"{path}.{item.name}".lstrip(".") + suffix) for a in inner]
    out.append(Section(path, cls, " ".join((cls.__doc__ or "").split()), tuple(rows)))
    for inner_cls, inner_path in nested:
        if inner_path not in seen:
            seen.add(inner_path)
            _walk(typing.cast(type, inner_cls), inner_path, out, seen)


def with_defaults(parts: list[Section], defaults: typing.Mapping[str, str]) -> list[Section]:
    """``parts`` with the default cell of some keys (by full dotted path) replaced: for a default a
    loader fills in that the class cannot state. A path that names no key is an error, so a
    replacement cannot outlive the key it describes unnoticed."""
    unused = set(defaults)
    out = []
    for section in parts:
        rows = []
        for row in section.rows:
            path = section.key_path(row)
            unused.discard(path)
            rows.append(dataclasses.replace(row, default=defaults[path]) if path in defaults else row)
        out.append(dataclasses.replace(section, rows=tuple(rows)))
    if unused:
        raise KeyError(f"no such key to give a default: {', '.join(sorted(unused))}")
    return out


def missing_docs(parts: typing.Iterable[Section]) -> list[str]:
    """What a reader would find undescribed: sections whose class has no docstring of its own, and
    keys whose field has none (as dotted paths, sections named by their heading)."""
    out: list[str] = []
    for section in parts:
        if not has_own_docstring(section.cls):
            out.append(f"{section.path or TOP_LEVEL} (the class {section.cls.__name__})")
        out += [section.key_path(row) for row in section.rows if not row.meaning]
    return out


def render(parts: typing.Iterable[Section], level: int = 2) -> list[str]:
    """Markdown: per section a heading (its path) at ``level``, its doc, and a table of its keys."""
    out: list[str] = []
    for section in parts:
        out += [f"{'#' * level} `{section.path or TOP_LEVEL}`", "", section.doc, ""]
        out += ["| key | type | default | meaning |", "|---|---|---|---|"]
        for row in section.rows:
            meaning = row.meaning.replace("|", "\\|")  # a bare pipe would end the table cell
            out.append(f"| `{row.key}` | {row.type} | {row.default} | {meaning} |")
        out.append("")
    return out


def rules() -> list[str]:
    """Markdown bullets: what the loader enforces in every file (typed.RULES)."""
    return [f"- {rule}" for rule in RULES] + [""]
