"""Strict YAML for the files operators write (broker, mirror-maker and pipeline files).

Role: the parser under kafkalog.configfile.typed. PyYAML's safe loader silently keeps the last of
two equal keys (a setting written twice is a setting lost); this one refuses them, and keys that are
not plain values, with the line. Errors from PyYAML itself name the file instead of
``<unicode string>``.
"""

from __future__ import annotations

from typing import Any

import yaml

from kafkalog.errors import KafkalogError


class YamlKeyError(KafkalogError):
    """A duplicate or non-plain key; the message starts with ``line N:`` (callers add the file)."""


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys instead of silently keeping the last."""


def _mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue  # `<<: *defaults`: keys written here override merged ones, as in safe_load
        key = loader.construct_object(key_node, deep=deep)
        if not isinstance(key, str | int | float | bool) and key is not None:
            raise YamlKeyError(f"line {key_node.start_mark.line + 1}: a key must be a plain value, not {key!r}")
        if key in seen:
            raise YamlKeyError(f"line {key_node.start_mark.line + 1}: duplicate key {key!r}")
        seen.add(key)
    loader.flatten_mapping(node)
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def parse_strict(text: str, source: str) -> Any:
    """The document in ``text``. Raises YamlKeyError for a duplicate or non-plain key, and
    PyYAML's yaml.YAMLError (its marks naming ``source``) for anything else that is not YAML."""
    try:
        return yaml.load(text, Loader=_StrictLoader)
    except yaml.MarkedYAMLError as exc:
        for mark in (exc.context_mark, exc.problem_mark):
            if mark is not None:
                mark.name = source  # not "<unicode string>"
        raise
