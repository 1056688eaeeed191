"""The files operators write, read one way: strict YAML, typed into frozen dataclasses, and the
generated reference of every key.

Role: shared by the broker's, the mirror-maker's and the pipelines' configuration, so the three
refuse the same mistakes in the same words and document their keys the same way. ``strict_yaml``
parses (no duplicate keys), ``typed`` converts and checks (``file:key.path`` errors, ``${env:NAME}``),
``reference`` renders the tables of docs/config-reference.md and docs/spec-reference.md from the
same classes. Imports nothing of ours but the exception root, so every layer may use it.
"""

from kafkalog.configfile.strict_yaml import YamlKeyError, parse_strict
from kafkalog.configfile.typed import RULES, TypedLoader

__all__ = ["RULES", "TypedLoader", "YamlKeyError", "parse_strict"]
