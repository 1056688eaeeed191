"""Typed YAML loading: mappings into frozen dataclasses, with errors that name ``file:key.path``.

Refuses what YAML would silently accept: duplicate keys (the last would win), unknown keys (a typo
would be ignored), wrong types (``"10"`` for a number). ``${env:NAME}`` in a string is replaced by
the environment variable NAME (an error names the key if it is unset); values read from the
environment are never echoed in errors, so secrets stay out of logs.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import types
import typing
from typing import Any

import yaml

from kafkalog.yamlfile import YamlKeyError, parse_strict
from pipelines.errors import SpecError

_ENV_REFERENCE = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")
_URL_PASSWORD = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/@\s:]+:([^/@\s]+)@")
"""``scheme://user:password@``: the password group must be an environment reference."""


def read_yaml(text: str, source: str) -> dict[str, Any]:
    """Parse ``text`` (named ``source`` in errors); the top level must be a mapping."""
    try:
        loaded = parse_strict(text, source)
    except YamlKeyError as exc:
        raise SpecError(f"{source}:{exc}") from exc
    except yaml.YAMLError as exc:
        raise SpecError(f"{source}: not valid YAML: {exc}") from exc
    if not isinstance(loaded, dict):
        raise SpecError(f"{source}: the top level must be a mapping of keys to values")
    return loaded


_expanded: list[tuple[str, str]] = []
"""(value, NAME) of the environment values substituted during the current load, for redact()."""


def expand_env(value: str, where: str) -> str:
    """Replace each ``${env:NAME}``; an unset variable is an error naming the key and the variable."""

    def lookup(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in os.environ:
            raise SpecError(f"{where}: environment variable {name} is not set")
        if os.environ[name]:
            _expanded.append((os.environ[name], name))
        return os.environ[name]

    return _ENV_REFERENCE.sub(lookup, value)


def redact(message: str) -> str:
    """``message`` with every value that came from the environment replaced by its reference."""
    for value, name in sorted(_expanded, key=lambda item: -len(item[0])):
        message = message.replace(value, f"${{env:{name}}}")
    return message


def forget_expansions() -> None:
    _expanded.clear()


def convert(value: Any, kind: Any, where: str) -> Any:
    """Convert a YAML value to the annotated type ``kind``, or raise naming ``where``."""
    origin = typing.get_origin(kind)
    args = typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        choices = [a for a in args if a is not type(None)]
        for choice in choices[:-1]:  # scalars tried in the order written: the first that fits
            try:
                return convert(value, choice, where)
            except SpecError:
                continue
        return convert(value, choices[-1], where)
    if origin is typing.Literal:
        if value not in args:
            raise SpecError(f"{where}: must be one of {', '.join(map(str, args))}, not {value!r}")
        return value
    if origin is tuple:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            raise SpecError(f"{where}: expected a list, got {type(value).__name__}")
        return tuple(convert(item, args[0], f"{where}[{i}]") for i, item in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict):
            raise SpecError(f"{where}: expected a mapping, got {type(value).__name__}")
        return {
            convert(k, args[0], f"{where}") if not isinstance(k, str) else k: convert(v, args[1], f"{where}.{k}")
            for k, v in value.items()
        }
    if dataclasses.is_dataclass(kind):
        if not isinstance(value, dict):
            raise SpecError(f"{where}: expected a mapping, got {type(value).__name__}")
        return build(kind, value, where)
    if kind is bool:
        if not isinstance(value, bool):
            raise SpecError(f"{where}: expected true or false, got {value!r}")
        return value
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise SpecError(f"{where}: expected an integer, got {value!r}")
        return value
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise SpecError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if kind is str:
        if not isinstance(value, str):
            raise SpecError(f"{where}: expected a string, got {value!r}")
        for match in _URL_PASSWORD.finditer(value):
            if not _ENV_REFERENCE.fullmatch(match.group(1)):
                # the value itself is not echoed: it holds the password
                raise SpecError(
                    f"{where}: a password in a URL must be an ${{env:NAME}} reference, not written in the file"
                )
        return expand_env(value, where)
    raise SpecError(f"{where}: unsupported type {kind!r}")


def build(cls: Any, values: dict[str, Any], where: str) -> Any:
    """Build dataclass ``cls`` from ``values``; the dataclass validates itself in __post_init__ by
    raising SpecError with a key-relative message, which gets ``where`` prefixed."""
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}
    dot = "." if where else ""
    for key in values:
        if not isinstance(key, str):
            raise SpecError(f"{where}: keys must be strings, got {key!r}")
    unknown = sorted(set(values) - known)
    if unknown:
        close = difflib.get_close_matches(unknown[0], known, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise SpecError(f"{where}{dot}{unknown[0]}: unknown key ({hint}known: {', '.join(sorted(known))})")
    missing = sorted(
        f.name
        for f in dataclasses.fields(cls)
        if f.name not in values and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    )
    if missing:
        raise SpecError(f"{where}{dot}{missing[0]}: required key is missing")
    converted = {name: convert(value, hints[name], f"{where}{dot}{name}") for name, value in values.items()}
    try:
        return cls(**converted)
    except SpecError as exc:
        message = str(exc)
        raise SpecError(f"{where}{dot}{message}" if where else message) from exc
