"""docs/config-reference.md: generated from the broker's, the mirror's and the registry's config classes, up to date,
every key described, and every key it lists accepted by the loader of its file."""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from kafkalog.cli.configdoc import REGENERATE, broker_sections, mirror_sections, reference, registry_sections
from kafkalog.client.security import ClientSecurity
from kafkalog.configfile.reference import Section, missing_docs, sections, with_defaults
from kafkalog.log import LogConfig
from kafkalog.mirror.config import ClusterSpec, MirrorConfig, load_mirror_config
from kafkalog.schema_registry.config import RegistryConfig, RegistryTls, load_registry_config
from kafkalog.server.config import (
    AuthorizationSettings,
    BrokerAddress,
    BrokerConfig,
    BrokerConfigError,
    Limits,
    SaslSettings,
    TlsSettings,
    TopicSpec,
    load_config,
)

REPO = Path(__file__).resolve().parents[2]


def test_the_committed_reference_is_the_generated_one() -> None:
    committed = (REPO / "docs" / "config-reference.md").read_text(encoding="utf-8")
    assert committed == reference(), f"docs/config-reference.md is stale: {REGENERATE}"


@pytest.mark.parametrize(
    "parts", [broker_sections, mirror_sections, registry_sections], ids=["broker", "mirror", "registry"]
)
def test_every_mapping_and_key_is_described(parts: Callable[[], list[Section]]) -> None:
    assert missing_docs(parts()) == [], "every config class needs a docstring, and every field one under it"


@dataclasses.dataclass(frozen=True)
class _Half:
    """Documented class."""

    described: int = 1
    """Described field."""
    bare: int = 2


@dataclasses.dataclass(frozen=True)
class _Outer:
    """Documented class."""

    inner: tuple[_Half, ...] = ()
    """Described field."""


@dataclasses.dataclass(frozen=True)
class _Nameless:
    value: int = 0
    """Described field."""


def test_the_completeness_check_finds_what_is_missing() -> None:
    assert missing_docs(sections(_Outer)) == ["inner[].bare"]
    assert missing_docs(sections(_Nameless)) == ["top level (the class _Nameless)"]
    with pytest.raises(KeyError, match=r"inner\[\]\.gone"):
        with_defaults(sections(_Outer), {"inner[].gone": "x"})


# ---------------------------------------------------------------------------------------------
# every listed key, written into a file, is read back by the loader


def _at(config: Any, path: str) -> Any:
    """The value at a reference path (``cluster[].host``: the first list item's)."""
    value = config
    for part in path.split("."):
        value = getattr(value, part.removesuffix("[]"))
        if part.endswith("[]"):
            value = value[0]
    return value


def _plain(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def _document(parts: list[Section], config: Any) -> dict[str, Any]:
    """YAML data giving every key the reference lists, at ``config``'s value. A key whose value is a
    mapping (or a list of mappings) is filled through the keys of its own section."""
    document: dict[str, Any] = {}
    for section in parts:
        for row in section.rows:
            path = section.key_path(row)
            value = _at(config, path)
            if dataclasses.is_dataclass(value) or (
                isinstance(value, tuple) and value and dataclasses.is_dataclass(value[0])
            ):
                continue
            *parents, key = path.split(".")
            mapping = document
            for part in parents:
                if part.endswith("[]"):
                    mapping = mapping.setdefault(part[:-2], [{}])[0]
                else:
                    mapping = mapping.setdefault(part, {})
            mapping[key] = _plain(value)
    return document


# One item per list: a listed ``name[]`` key is written into the first item only.
BROKER = BrokerConfig(
    broker_id=1,
    port=9093,
    data_dirs=(Path("d1"),),
    cluster=(BrokerAddress(1, "10.0.0.1", 9093, ("PLAINTEXT://10.0.0.1:9093", "SASL_SSL://10.0.0.1:9094")),),
    listeners=("PLAINTEXT://10.0.0.1:9093", "SASL_SSL://10.0.0.1:9094"),
    listener_security_protocol_map={"INTERNAL": "SASL_PLAINTEXT"},
    sasl=SaslSettings(users_file=Path("users.json"), mechanisms=("SCRAM-SHA-512",)),
    tls=TlsSettings(
        certificate=Path("broker.pem"), key=Path("broker.key"), client_ca=Path("ca.pem"), client_auth="requested"
    ),
    authorization=AuthorizationSettings(super_users=("User:admin",), deny_by_default=True, acl_file=Path("acls.json")),
    topics=(TopicSpec("events", 3),),
    log=LogConfig(retention_bytes=1 << 30, message_timestamp_type="log_append_time"),
    limits=Limits(idle_timeout_ms=1000),
    metrics_port=9100,
)

MIRROR = MirrorConfig(
    sources=(ClusterSpec("east", bootstrap="10.0.1.5:9092"),),
    target=ClusterSpec(
        "aggregate", zookeeper="10.0.9.5:2181/agg", security=ClientSecurity("SSL", ca_file=Path("ca.pem"))
    ),
    whitelist=r"events\..*",
    gap_file=Path("gaps.jsonl"),
    producer={"linger_ms": 20},
)


REGISTRY = RegistryConfig(
    bootstrap="10.0.0.1:9092,10.0.0.2:9092",
    security=ClientSecurity("SSL", ca_file=Path("ca.pem")),
    host="0.0.0.0",
    port=8082,
    advertised_url="https://registry-1.example.com:8082",
    topic="_schemas_b",
    leader_eligibility=False,
    incompatible_error_code=40901,
    tls=RegistryTls(Path("registry.pem"), Path("registry.key"), ca_file=Path("ca.pem"), client_auth=True),
    users_file=Path("registry-users"),
)


def _write(tmp_path: Path, document: dict[str, Any]) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def test_the_broker_loader_reads_every_listed_key(tmp_path: Path) -> None:
    document = _document(broker_sections(), BROKER)
    assert {"broker_id", "data_dirs", "zookeeper"} <= set(document)
    assert {"segment_bytes", "on_corruption"} <= set(document["log"])
    assert set(document["cluster"][0]) == {"id", "host", "port", "listeners"}
    assert set(document["sasl"]) == {
        "users_file", "mechanisms", "listener_mechanisms", "plain_in_clear", "handshake_timeout_ms",
        "max_receive_bytes", "max_login_buffer_bytes", "failed_authentication_delay_ms",
    }  # fmt: skip
    assert load_config(_write(tmp_path, document)) == BROKER

    # The check above means something only if the loader refuses a key it does not know.
    document["log"]["segment_size"] = 1
    with pytest.raises(BrokerConfigError, match=r"log\.segment_size: unknown key"):
        load_config(_write(tmp_path, document))


def test_the_mirror_loader_reads_every_listed_key(tmp_path: Path) -> None:
    document = _document(mirror_sections(), MIRROR)
    assert set(document["target"]) == {"name", "bootstrap", "zookeeper", "security"}
    assert load_mirror_config(_write(tmp_path, document), {}) == MIRROR


def test_the_registry_loader_reads_every_listed_key(tmp_path: Path) -> None:
    document = _document(registry_sections(), REGISTRY)
    assert set(document["tls"]) == {"certificate", "key", "key_password", "ca_file", "client_auth"}
    assert load_registry_config(_write(tmp_path, document), {}) == REGISTRY


def test_the_mirror_loader_names_clusters_as_the_reference_says(tmp_path: Path) -> None:
    path = _write(tmp_path, {"sources": [{"bootstrap": "h1:9092"}, "zk:zk:2181/west"], "target": "h9:9092"})
    config = load_mirror_config(path, {})
    assert [s.name for s in config.sources] == ["source0", "source1"]
    assert config.target.name == "target"
    rows = {s.key_path(r): r.default for s in mirror_sections() for r in s.rows}
    assert rows["sources[].name"].startswith("`source<i>`")
    assert rows["target.name"] == "`target`"


def test_the_commented_examples_load() -> None:
    broker = load_config(REPO / "conf" / "broker.yaml")
    assert broker.default_partitions == 3
    mirror = load_mirror_config(REPO / "conf" / "mirror.yaml", {})
    assert [s.name for s in mirror.sources] == ["east", "west"]
    registry = load_registry_config(REPO / "conf" / "registry.yaml", {})
    assert (registry.topic, registry.port) == ("_schemas", 8081)


def test_the_shared_config_machinery_imports_nothing_of_ours() -> None:
    # pipelines read their files with kafkalog.configfile too; the import contracts allow that only
    # while configfile pulls in no layer but the exception root.
    for module in sorted((REPO / "kafkalog" / "configfile").glob("*.py")):
        tree = ast.parse(module.read_text(encoding="utf-8"))
        imported = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        imported += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        ours = [m for m in imported if m.split(".")[0] in ("kafkalog", "pipelines", "tests")]
        assert [m for m in ours if not m.startswith(("kafkalog.configfile", "kafkalog.errors"))] == [], module
