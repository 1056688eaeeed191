"""Typed config files: a YAML mapping into frozen dataclasses, with errors that name ``file:key.path``.

Role: the one loader of the broker's, the mirror-maker's and the pipelines' files, so all three
refuse the same mistakes in the same words. It refuses what YAML alone would accept: duplicate keys
(the last would silently win), unknown keys (a typo would be ignored; the closest known key is
suggested), missing required keys, wrong types (``"10"`` for a number, ``1`` for true). A string
may hold ``${env:NAME}`` references, replaced by the environment variable NAME (an unset one is an
error naming the key); values read from the environment never appear in an error, and a password
written into a URL in clear, or as a key whose name ends in ``password``, is refused, so secrets
stay out of files and logs.

Contract with the config classes: each is a frozen dataclass whose annotations are the file's types
(str, int, float, bool, Path, Literal, tuple[X, ...], dict[K, V], Optional/union, a nested
dataclass, Any). Its ``__post_init__`` checks what types cannot say and raises one of the loader's
``invalid`` errors with a message that starts with the key it concerns (``port: must be a TCP
port``); the loader puts the key path and the file in front. Keys, types and defaults are also what
the generated references print (kafkalog.configfile.reference), so a reference cannot drift from
what the loader accepts.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from kafkalog.configfile.strict_yaml import YamlKeyError, parse_strict

T = TypeVar("T")

ENV_REFERENCE = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")
"""``${env:NAME}``: replaced by the environment variable NAME."""

_URL_PASSWORD = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/@\s:]+:([^/@\s]+)@")
"""``scheme://user:password@``: the password group must be an environment reference."""

RULES = (
    "Keys left out take their default; those marked **required** must be given.",
    "Unknown keys, keys written twice and values of the wrong type are errors that name the file and"
    " the key path (`file:key.path: ...`), with the closest known key for a typo.",
    "Any string may hold `${env:NAME}` references, replaced by the environment variable NAME (unset:"
    " an error naming the key). Secrets go there: values read from the environment never appear in"
    " errors or logs, and a password written into a URL in clear is refused.",
    "A list of one string may be written as the string alone (`data_dirs: data`). `None` in a"
    " description is YAML's `null`.",
)
"""What every file read by this loader obeys, as the generated references state it."""


def _is(value: Any, kind: type) -> bool:
    """``isinstance`` without YAML's trap: ``true`` is not an integer here."""
    return isinstance(value, kind) and not (isinstance(value, bool) and kind is not bool)


@dataclass(frozen=True, slots=True)
class TypedLoader:
    """Loads one family of config files (a package's) into its dataclasses.

    Invariant: every problem surfaces as ``error`` with a message that starts with the file (or
    ``flags``) and names the key path, and never holds a value read from the environment.
    """

    error: type[Exception]
    """What the loader raises: the package's own configuration error."""

    invalid: tuple[type[Exception], ...] = ()
    """What the config classes' own checks raise besides ``error`` (a nested class from another
    module may have its own): caught, given the key path and the file, re-raised as ``error``."""

    what: str = "config file"
    """What the file is called in an error about the file itself (``cannot read the pipeline file``)."""

    def load(self, cls: type[T], path: str | Path | None, overrides: Mapping[str, Any] | None = None) -> T:
        """The file at ``path`` (None: no file, every value from ``overrides``) as ``cls``, with the
        top-level keys of ``overrides`` whose value is not None (command-line flags) written over it."""
        values, source = self.values(path, overrides)
        return self.build(cls, values, source)

    def values(self, path: str | Path | None, overrides: Mapping[str, Any] | None = None) -> tuple[dict[str, Any], str]:
        """The mapping the file at ``path`` holds (empty: every default) with ``overrides`` written
        over it, and what errors call its source (the path, or ``flags`` when there is no file):
        for a caller that must shape the values before ``build``."""
        source = "flags" if path is None else str(path)
        text = ""
        if path is not None:
            try:
                text = Path(path).read_text(encoding="utf-8")
            except OSError as exc:
                raise self.error(f"{source}: cannot read the {self.what}: {exc.strerror or exc}") from exc
            except UnicodeDecodeError as exc:
                raise self.error(f"{source}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
        return {**self.read(text, source), **{k: v for k, v in (overrides or {}).items() if v is not None}}, source

    def read(self, text: str, source: str) -> dict[str, Any]:
        """The mapping ``text`` holds: strict YAML (no duplicate keys, no Python tags)."""
        try:
            loaded = parse_strict(text, source)
        except YamlKeyError as exc:
            raise self.error(f"{source}:{exc}") from exc
        except yaml.YAMLError as exc:
            raise self.error(f"{source}: not valid YAML: {exc}") from exc
        if loaded is None:
            return {}
        if not isinstance(loaded, dict):
            raise self.error(f"{source}: the top level must be a mapping of keys to values")
        return loaded

    def build(self, cls: type[T], values: Mapping[Any, Any], source: str) -> T:
        """``cls`` from already parsed ``values`` (a file's, named ``source``: ``flags`` for none)."""
        build = _Build(self)
        try:
            built: T = build.dataclass(cls, values, "")
        except self.error as exc:
            raise self.error(build.redact(f"{source}:{exc}")) from None  # the cause could quote a secret
        return built


@dataclass(slots=True)
class _Build:
    """One load: converts values while remembering what came from the environment, to redact it."""

    loader: TypedLoader
    expanded: list[tuple[str, str]] = field(default_factory=list)
    """(value, NAME) of every environment value substituted so far."""

    def fail(self, where: str, message: str) -> Exception:
        return self.loader.error(f"{where}: {message}")

    def redact(self, message: str) -> str:
        """``message`` with every value that came from the environment replaced by its reference."""
        for value, name in sorted(self.expanded, key=lambda item: -len(item[0])):
            message = message.replace(value, f"${{env:{name}}}")
        return message

    def dataclass(self, cls: Any, values: Mapping[Any, Any], where: str) -> Any:
        hints = typing.get_type_hints(cls)
        fields = dataclasses.fields(cls)
        known = [f.name for f in fields]
        dot = "." if where else ""
        for key in values:
            if not isinstance(key, str):
                raise self.fail(where or "top level", f"keys must be strings, got {key!r}")
        unknown = sorted(set(values) - set(known))
        if unknown:
            close = difflib.get_close_matches(unknown[0], known, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise self.fail(f"{where}{dot}{unknown[0]}", f"unknown key ({hint}known: {', '.join(sorted(known))})")
        for item in fields:
            required = item.default is dataclasses.MISSING and item.default_factory is dataclasses.MISSING
            if required and item.name not in values:
                raise self.fail(f"{where}{dot}{item.name}", "required key is missing")
        for name, value in values.items():
            if name.endswith("password") and isinstance(value, str) and not ENV_REFERENCE.fullmatch(value.strip()):
                # the value itself is not echoed: it is the password
                raise self.fail(
                    f"{where}{dot}{name}", "a password must be an ${env:NAME} reference, not written in the file"
                )
        converted = {name: self.convert(value, hints[name], f"{where}{dot}{name}") for name, value in values.items()}
        try:
            return cls(**converted)
        except (self.loader.error, *self.loader.invalid) as exc:
            # the class names the key relative to itself ("port: must be ..."): put the path in front
            raise self.loader.error(f"{where}{dot}{exc}" if where else str(exc)) from exc

    def convert(self, value: Any, kind: Any, where: str) -> Any:
        """``value`` as the annotation ``kind`` says, or the loader's error naming ``where``."""
        origin, args = typing.get_origin(kind), typing.get_args(kind)
        if kind is Any:
            return value
        if origin in (typing.Union, types.UnionType):
            if value is None and type(None) in args:
                return None
            choices = [a for a in args if a is not type(None)]
            for choice in choices[:-1]:  # tried in the order written: the first that fits
                try:
                    return self.convert(value, choice, where)
                except self.loader.error:
                    continue
            return self.convert(value, choices[-1], where)
        if origin is typing.Literal:
            if not any(value == a and type(value) is type(a) for a in args):
                raise self.fail(where, f"must be one of {', '.join(map(str, args))}, not {value!r}")
            return value
        if origin is tuple:
            if isinstance(value, str):
                value = [value]  # a list of one string written as the string alone
            if not isinstance(value, list | tuple):
                raise self.fail(where, f"expected a list, got {type(value).__name__}")
            return tuple(self.convert(item, args[0], f"{where}[{i}]") for i, item in enumerate(value))
        if origin is dict:
            if not isinstance(value, dict):
                raise self.fail(where, f"expected a mapping, got {type(value).__name__}")
            return {self.convert(k, args[0], where): self.convert(v, args[1], f"{where}.{k}") for k, v in value.items()}
        if dataclasses.is_dataclass(kind):
            if not isinstance(value, dict):
                raise self.fail(where, f"expected a mapping, got {type(value).__name__}")
            return self.dataclass(kind, value, where)
        return self.scalar(value, kind, where)

    def scalar(self, value: Any, kind: Any, where: str) -> Any:
        if kind is bool:
            if not isinstance(value, bool):
                raise self.fail(where, f"expected true or false, got {value!r}")
            return value
        if kind is int:
            if not _is(value, int):
                raise self.fail(where, f"expected an integer, got {value!r}")
            return value
        if kind is float:
            if not _is(value, int) and not _is(value, float):
                raise self.fail(where, f"expected a number, got {value!r}")
            return float(value)
        if kind is str:
            if not isinstance(value, str):
                raise self.fail(where, f"expected a string, got {value!r}")
            return self.text(value, where)
        if kind is Path:
            if not isinstance(value, str | os.PathLike):
                raise self.fail(where, f"expected a path, got {value!r}")
            return Path(self.text(os.fspath(value), where))
        raise self.fail(where, f"unsupported type {kind!r}")

    def text(self, value: str, where: str) -> str:
        """A string with its ``${env:NAME}`` references replaced; a password in a URL must be one."""
        for match in _URL_PASSWORD.finditer(value):
            if not ENV_REFERENCE.fullmatch(match.group(1)):
                # the value itself is not echoed: it holds the password
                raise self.fail(where, "a password in a URL must be an ${env:NAME} reference, not written in the file")

        def lookup(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in os.environ:
                raise self.fail(where, f"environment variable {name} is not set")
            if os.environ[name]:
                self.expanded.append((os.environ[name], name))
            return os.environ[name]

        return ENV_REFERENCE.sub(lookup, value)
