"""The registry's settings: validated once, each error naming its key; flags over the file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kafkalog.schema_registry.config import RegistryConfig, load_registry_config
from kafkalog.schema_registry.errors import RegistryConfigError
from kafkalog.schemas.compatibility import CompatibilityLevel


def test_defaults_are_confluents() -> None:
    config = RegistryConfig(bootstrap="127.0.0.1:9092")
    assert (config.topic, config.group, config.port) == ("_schemas", "schema-registry", 8081)
    assert config.rules.default_compatibility is CompatibilityLevel.BACKWARD
    assert config.rules.incompatible_error_code == 409
    assert config.url(8081) == "http://127.0.0.1:8081"
    assert (
        RegistryConfig(bootstrap="h:1", advertised_url="https://r.example.com:9/").url(0) == "https://r.example.com:9"
    )


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"bootstrap": "nohost"}, "bootstrap:"),
        ({"port": 70000}, "port:"),
        ({"topic": "bad topic"}, "topic:"),
        ({"topic": ""}, "topic:"),
        ({"group": ""}, "group:"),
        ({"default_compatibility": "SIDEWAYS"}, "default_compatibility: Invalid compatibility level"),
        ({"incompatible_error_code": 400}, "incompatible_error_code: 409 or 40901"),
        ({"session_timeout_ms": 0}, "session_timeout_ms:"),
        ({"max_request_bytes": -1}, "max_request_bytes:"),
        ({"advertised_url": "ftp://x:1"}, "advertised_url:"),
        ({"host": "0.0.0.0"}, "advertised_url: needed when host is a wildcard"),
        ({"request_timeout_ms": 0}, "request_timeout_ms:"),
        ({"peers": ("http://a:1", "a:2")}, "peers: http[s]://host:port, not 'a:2'"),
        ({"peers": ("http://a",)}, "peers: http[s]://host:port"),
    ],
)
def test_invalid_settings_name_their_key(settings: dict[str, object], message: str) -> None:
    with pytest.raises(RegistryConfigError, match=re.escape(message)):
        RegistryConfig(**{"bootstrap": "127.0.0.1:9092", **settings})  # type: ignore[arg-type]


def test_the_file_and_the_flags(tmp_path: Path) -> None:
    path = tmp_path / "registry.yaml"
    path.write_text("bootstrap: 127.0.0.1:9092\nport: 8090\ntls: {certificate: a.pem, key: a.key, client_auth: true}\n")
    with pytest.raises(RegistryConfigError, match=r"registry\.yaml:tls\.client_auth: needs ca_file"):
        load_registry_config(path, {})
    path.write_text("bootstrap: 127.0.0.1:9092\nport: 8090\nprot: 1\n")
    with pytest.raises(RegistryConfigError, match="prot: unknown key"):
        load_registry_config(path, {})
    path.write_text("bootstrap: 127.0.0.1:9092\nport: 8090\n")
    assert load_registry_config(path, {"port": 9000, "topic": None}).port == 9000
    with pytest.raises(RegistryConfigError, match="bootstrap: the cluster that holds the topic is needed"):
        load_registry_config(None, {"port": 1})


def test_peers_from_the_file(tmp_path: Path) -> None:
    path = tmp_path / "registry.yaml"
    path.write_text("bootstrap: 127.0.0.1:9092\npeers: [http://127.0.0.1:8081, http://127.0.0.1:8082]\n")
    assert load_registry_config(path, {}).peers == ("http://127.0.0.1:8081", "http://127.0.0.1:8082")
