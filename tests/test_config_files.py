"""The broker's, the mirror-maker's, the schema registry's and a pipeline's file are read by one loader
(kafkalog.configfile): the same mistake in any of them is refused in the same words, the file and the key path first.
Real files, each read by its own public loader."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from kafkalog.mirror.config import load_mirror_config
from kafkalog.schema_registry.config import load_registry_config
from kafkalog.server.config import load_config
from pipelines.config.pipeline import load_spec


@dataclass(frozen=True)
class Kind:
    """One kind of file: how it loads, a valid document, and keys of each type to spoil (dotted paths)."""

    name: str
    load: Callable[[Path], Any]
    valid: dict[str, Any]
    typo: tuple[str, str]
    """A misspelt top-level key, and the key it should have been."""
    integer_key: str
    string_key: str
    """A top-level string key that takes any text."""
    checked_string_key: str
    """A string key whose value the class checks, quoting it when it refuses."""

    def write(self, tmp_path: Path, changes: dict[str, Any] | None = None, extra: str = "") -> Path:
        """The valid document with ``changes`` (dotted path: value) made and ``extra`` text appended."""
        document = copy.deepcopy(self.valid)
        for key, value in (changes or {}).items():
            *parents, last = key.split(".")
            node = document
            for part in parents:
                node = node.setdefault(part, {})
            node[last] = value
        path = tmp_path / f"{self.name}.yaml"
        path.write_text(yaml.safe_dump(document, sort_keys=False) + extra, encoding="utf-8")
        return path

    def refusal(self, tmp_path: Path, changes: dict[str, Any] | None = None, extra: str = "") -> str:
        """The error of loading the file so spoilt, after its ``<file>:`` (checked to be there)."""
        path = self.write(tmp_path, changes, extra)
        with pytest.raises(Exception) as info:
            self.load(path)
        message = str(info.value)
        assert message.startswith(f"{path}:"), message
        return message[len(str(path)) + 1 :]


KINDS = [
    Kind("broker", load_config, {"data_dirs": ["data"]}, ("portt", "port"), "port", "advertised_host", "zookeeper"),
    Kind(
        "mirror",
        lambda path: load_mirror_config(path, {}),
        {"sources": ["h1:9092"], "target": "h9:9092"},
        ("gruop", "group"),
        "streams",
        "group",
        "whitelist",
    ),
    Kind(
        "registry",
        lambda path: load_registry_config(path, {}),
        {"bootstrap": "h1:9092"},
        ("topci", "topic"),
        "port",
        "host",
        "advertised_url",
    ),
    Kind(
        "pipeline",
        load_spec,
        {
            "name": "events_raw",
            "source": {"bootstrap": "localhost:9092"},
            "topics": ["events"],
            "decoder": {"format": "json", "schema": {"ts": "string"}},
            "raw": {"path": "/data/raw/events"},
        },
        ("descripton", "description"),
        "limits.max_messages_per_split",
        "description",
        "event_time.timezone",
    ),
]


@pytest.fixture(params=KINDS, ids=[k.name for k in KINDS])
def kind(request: pytest.FixtureRequest) -> Kind:
    return request.param  # type: ignore[no-any-return]


def test_each_valid_file_loads(kind: Kind, tmp_path: Path) -> None:
    assert kind.load(kind.write(tmp_path)) is not None


def test_a_misspelt_key_is_named_with_the_one_meant(kind: Kind, tmp_path: Path) -> None:
    wrong, meant = kind.typo
    message = kind.refusal(tmp_path, {wrong: "x"})
    assert message.startswith(f"{wrong}: unknown key (did you mean {meant!r}? known: "), message


def test_a_wrong_type_names_the_key_and_the_value(kind: Kind, tmp_path: Path) -> None:
    key = kind.integer_key
    assert kind.refusal(tmp_path, {key: "soon"}) == f"{key}: expected an integer, got 'soon'"
    assert kind.refusal(tmp_path, {key: True}) == f"{key}: expected an integer, got True"  # YAML's true is no 1


def test_a_key_written_twice_is_refused_with_its_line(kind: Kind, tmp_path: Path) -> None:
    lines = kind.write(tmp_path).read_text().count("\n")
    message = kind.refusal(tmp_path, extra=f"{kind.string_key}: a\n{kind.string_key}: b\n")
    assert message == f"line {lines + 2}: duplicate key {kind.string_key!r}"


def test_invalid_yaml_is_named_where_it_is_wrong(kind: Kind, tmp_path: Path) -> None:
    lines = kind.write(tmp_path).read_text().count("\n")
    message = kind.refusal(tmp_path, extra=f"{kind.string_key}: [unclosed\n")
    assert message.startswith(" not valid YAML: while parsing a flow sequence"), message
    assert f'{kind.name}.yaml", line {lines + 1}' in message, message


def test_an_environment_reference_is_replaced(kind: Kind, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONFIG_TEST_VALUE", "from-the-environment")
    loaded = kind.load(kind.write(tmp_path, {kind.string_key: "x-${env:CONFIG_TEST_VALUE}"}))
    assert getattr(loaded, kind.string_key) == "x-from-the-environment"


def test_an_unset_environment_variable_names_the_key(
    kind: Kind, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CONFIG_TEST_UNSET", raising=False)
    message = kind.refusal(tmp_path, {kind.string_key: "${env:CONFIG_TEST_UNSET}"})
    assert message == f"{kind.string_key}: environment variable CONFIG_TEST_UNSET is not set"


def test_a_value_from_the_environment_is_never_echoed(
    kind: Kind, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the class refuses the value and quotes it: the loader puts the reference back in its place
    secret = "([hunter2-not-for-logs"
    monkeypatch.setenv("CONFIG_TEST_SECRET", secret)
    message = kind.refusal(tmp_path, {kind.checked_string_key: "${env:CONFIG_TEST_SECRET}"})
    assert message.startswith(f"{kind.checked_string_key}: "), message
    assert "hunter2" not in message, message


def test_a_password_written_into_a_url_is_refused(kind: Kind, tmp_path: Path) -> None:
    message = kind.refusal(tmp_path, {kind.string_key: "http://me:hunter2@host/"})
    expected = "a password in a URL must be an ${env:NAME} reference, not written in the file"
    assert message == f"{kind.string_key}: {expected}"


@pytest.mark.parametrize(
    ("kind_name", "changes", "expected"),
    [
        ("broker", {"log.message_format": True}, "log.message_format: must be one of 1, 2, not True"),
        ("broker", {"groups.max_size": 0}, "groups.max_size: must be >= 1, not 0"),
        (
            "broker",
            {"topics": [{"name": "t", "partitions": 0}]},
            "topics[0].partitions: a topic needs at least one, not 0",
        ),
        ("broker", {"log.segment_bytes": 10}, "log.segment_bytes: must be in [64, 2147483647], not 10"),
        ("mirror", {"sources": ["h1:9092", {"zookeeper": "zk:x"}]}, "sources[1].zookeeper: "),
        ("mirror", {"target": {"name": "agg"}}, "target.bootstrap: give bootstrap or zookeeper (one of them) for"),
        ("registry", {"tls": {"certificate": "c", "key": "k", "client_auth": True}}, "tls.client_auth: needs ca_file"),
        ("pipeline", {"source.retry_ms": 0}, "source.retry_ms: must be positive"),
    ],
)
def test_a_nested_key_is_named_by_its_path(
    tmp_path: Path, kind_name: str, changes: dict[str, Any], expected: str
) -> None:
    kind = next(k for k in KINDS if k.name == kind_name)
    message = kind.refusal(tmp_path, changes)
    assert message.startswith(expected), message


def test_a_password_written_in_a_file_is_refused_without_being_quoted(tmp_path: Path) -> None:
    from kafkalog.mirror.config import load_mirror_config

    path = tmp_path / "mirror.yaml"
    cluster = {"bootstrap": "h:9093", "security": {"protocol": "SASL_SSL", "username": "m", "password": "hunter2-x"}}
    path.write_text(yaml.safe_dump({"sources": [{"name": "east", **cluster}], "target": "h9:9092"}))
    with pytest.raises(
        Exception, match=r"sources\[0\]\.security\.password: a password must be an \$\{env:NAME\}"
    ) as info:
        load_mirror_config(path, {})
    assert "hunter2-x" not in str(info.value)
