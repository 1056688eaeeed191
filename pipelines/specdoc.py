"""The pipeline file reference (docs/spec-reference.md), generated from the config classes.

    python -m pipelines.specdoc > docs/spec-reference.md

Role: one source of truth. Keys, types and defaults come from the frozen dataclasses themselves;
descriptions from their class docstrings and the docstring under each field (read with ``ast``,
since Python keeps no attribute docstrings at run time). A test checks the file is up to date.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import itertools
import sys
import types
import typing
from typing import Any

from pipelines.spec import PipelineSpec


def _field_docs(cls: type) -> dict[str, str]:
    """Field name → the string literal right after its annotation in the class body."""
    tree = ast.parse(inspect.getsource(cls))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs = {}
    for node, following in itertools.pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            docs[node.target.id] = " ".join(following.value.value.split())
    return docs


def _type_name(kind: Any) -> str:
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        names = [_type_name(a) for a in args if a is not type(None)]
        return " or ".join(names) + (" or null" if type(None) in args else "")
    if origin is typing.Literal:
        return " \\| ".join(f"`{a}`" for a in args)
    if origin is tuple:
        return f"list of {_type_name(args[0])}"
    if origin is dict:
        return f"mapping of {_type_name(args[0])} to {_type_name(args[1])}"
    if dataclasses.is_dataclass(kind):
        return "mapping (below)"
    return {str: "string", int: "integer", float: "number", bool: "true/false"}.get(kind, str(kind))


def _default(item: dataclasses.Field[Any]) -> str:
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


def _section(cls: type, path: str, out: list[str], seen: set[str]) -> None:
    hints = typing.get_type_hints(cls)
    docs = _field_docs(cls)
    title = path or "top level"
    out += [f"## `{title}`", "", " ".join((cls.__doc__ or "").split()), ""]
    out += ["| key | type | default | meaning |", "|---|---|---|---|"]
    nested = []
    for item in dataclasses.fields(cls):
        kind = hints[item.name]
        meaning = docs.get(item.name, "").replace("|", "\\|")
        out.append(f"| `{item.name}` | {_type_name(kind)} | {_default(item)} | {meaning} |")
        inner = [a for a in (kind, *typing.get_args(kind)) if dataclasses.is_dataclass(a)]
        nested += [
            (a, f"{path}.{item.name}".lstrip(".") + ("[]" if typing.get_origin(kind) is tuple else "")) for a in inner
        ]
    out.append("")
    for inner_cls, inner_path in nested:
        if inner_path not in seen:
            seen.add(inner_path)
            _section(typing.cast(type, inner_cls), inner_path, out, seen)


def reference() -> str:
    out = [
        "# Pipeline file reference",
        "",
        "Generated from the config classes by `python -m pipelines.specdoc > docs/spec-reference.md`;",
        "do not edit by hand. Every key is checked when the file loads (`pipelines lint FILE...`); errors",
        "name `file:key.path`. Strings may hold `${env:NAME}` references (secrets go there: their",
        "values never appear in errors or logs). Guides: docs/pipelines.md (the load) and",
        "docs/transforms.md (transforms, expectations, publish, Airflow).",
        "",
    ]
    _section(PipelineSpec, "", out, set())
    return "\n".join(out).rstrip() + "\n"


if __name__ == "__main__":
    sys.stdout.write(reference())
