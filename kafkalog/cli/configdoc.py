"""The broker, mirror-maker and schema registry configuration reference (docs/config-reference.md), generated.

    python -m kafkalog.cli.configdoc > docs/config-reference.md

Role: one source of truth for the YAML of ``kafkalog broker --config FILE`` (BrokerConfig and what
it nests), ``kafkalog mirror --config FILE`` (MirrorConfig and ClusterSpec) and ``kafkalog registry
--config FILE`` (RegistryConfig and what it nests). The loaders take
exactly the dataclass fields as keys, so keys, types and defaults come from the classes and the
descriptions from their docstrings (kafkalog.configfile.reference), and the rules every file obeys
from the loader that reads it (kafkalog.configfile.typed); what only a loader knows (a default it fills
in that the class cannot state) is listed here, and must name a real key. A test checks the file is
up to date, every key is described, and the broker's loader accepts every key listed.

Like the command line, this module sits above the server, the mirror and the registry: nothing imports it.
"""

from __future__ import annotations

import sys

from kafkalog.configfile.reference import Section, render, rules, sections, with_defaults
from kafkalog.mirror.config import MirrorConfig
from kafkalog.schema_registry.config import RegistryConfig
from kafkalog.server.config import BrokerConfig

REGENERATE = "python -m kafkalog.cli.configdoc > docs/config-reference.md"

# load_mirror_config names a cluster given without a name (or as a command-line string) by where
# it stands; the dataclass itself requires a name.
_MIRROR_LOADER_DEFAULTS = {
    "sources[].name": "`source<i>` (i: its position, from 0)",
    "target.name": "`target`",
}


def broker_sections() -> list[Section]:
    """The keys of ``kafkalog broker --config FILE``."""
    return sections(BrokerConfig)


def mirror_sections() -> list[Section]:
    """The keys of ``kafkalog mirror --config FILE``."""
    return with_defaults(sections(MirrorConfig), _MIRROR_LOADER_DEFAULTS)


def registry_sections() -> list[Section]:
    """The keys of ``kafkalog registry --config FILE``."""
    return sections(RegistryConfig)


def reference() -> str:
    out = [
        "# Configuration reference: broker, mirror-maker and schema registry",
        "",
        f"Generated from the config classes by `{REGENERATE}`; do not edit by hand.",
        "",
        "Each file is YAML, read by the loader that reads pipeline files too (their reference:",
        "docs/spec-reference.md). Command-line flags override the file's top-level keys.",
        "",
        *rules(),
        "## Broker: `kafkalog broker --config FILE`",
        "",
        "One broker process; example: conf/broker.yaml. Flags: `kafkalog broker --help`. Guides:",
        "docs/broker.md, docs/log.md (the `log` settings), docs/registry.md (`zookeeper`).",
        "",
        *render(broker_sections(), level=3),
        "## Mirror-maker: `kafkalog mirror --config FILE`",
        "",
        "One mirror process; example: conf/mirror.yaml. `sources` and `target` may come from the flags",
        "instead (`--source`, `--target`; `kafkalog mirror --help`). Guide: docs/mirror.md.",
        "",
        *render(mirror_sections(), level=3),
        "## Schema registry: `kafkalog registry --config FILE`",
        "",
        "One registry process; example: conf/registry.yaml. Flags override the top-level keys",
        "(`kafkalog registry --help`). Guide: docs/schema-registry.md.",
        "",
        *render(registry_sections(), level=3),
    ]
    return "\n".join(out).rstrip() + "\n"


if __name__ == "__main__":
    sys.stdout.write(reference())
