"""The schema'd decoders in the pipeline file: avro, json_schema, connect_json, their registry
and key decoder, each refusal naming its key; the decoder shipped to tasks without secrets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from pipelines.config.pipeline import Decoder, KeyDecoder, Registry, RegistryTls, load_spec
from pipelines.errors import SpecError


def spec_data(decoder: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "orders",
        "source": {"bootstrap": "localhost:9092"},
        "topics": ["orders"],
        "decoder": decoder,
        "raw": {"path": "/data/raw/orders"},
    }


def load(tmp_path: Path, decoder: dict[str, Any], **extra: Any) -> Decoder:
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump({**spec_data(decoder), **extra}), encoding="utf-8")
    return load_spec(path).decoder


def error(tmp_path: Path, decoder: dict[str, Any], **extra: Any) -> str:
    with pytest.raises(SpecError) as caught:
        load(tmp_path, decoder, **extra)
    return str(caught.value).split(":", 1)[1]


def test_an_avro_decoder_with_a_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SR_PASSWORD", "s3cret")
    decoder = load(
        tmp_path,
        {
            "format": "avro",
            "registry": {
                "urls": ["https://sr-1:8081", "https://sr-2:8081"],
                "username": "loader",
                "password": "${env:SR_PASSWORD}",
                "tls": {"ca_file": "/etc/ca.pem", "verify": False},
                "subject_strategy": "topic_record",
                "record": "shop.Order",
                "version": 3,
            },
            "key_decoder": {"format": "string"},
        },
    )
    registry = decoder.registry
    assert registry == Registry(
        urls=("https://sr-1:8081", "https://sr-2:8081"),
        username="loader",
        password="s3cret",
        tls=RegistryTls(ca_file=Path("/etc/ca.pem"), verify=False),
        subject_strategy="topic_record",
        record="shop.Order",
        version=3,
    )
    assert "s3cret" not in repr(registry)
    assert registry.subject("orders") == "orders-shop.Order"
    assert registry.subject("orders", key=True) == "orders-key"
    assert decoder.key_decoder == KeyDecoder(format="string")
    assert not decoder.declares_columns


def test_subject_strategies() -> None:
    assert Registry(urls=("http://sr:8081",)).subject("t") == "t-value"
    assert Registry(urls=("http://sr:8081",), subject_strategy="record", record="a.B").subject("t") == "a.B"


def test_the_decoder_reaches_tasks_without_the_registry_credentials(tmp_path: Path) -> None:
    decoder = Decoder(
        format="avro",
        registry=Registry(urls=("http://sr:8081",), username="u", password="p", tls=RegistryTls(ca_file=Path("/c"))),
        key_decoder=KeyDecoder(format="avro"),
    )
    settings = decoder.settings()
    assert settings["registry"]["password"] is None and settings["registry"]["username"] is None
    back = Decoder.from_settings(settings)
    assert back.registry is not None and back.registry.tls.ca_file == Path("/c")
    assert back == Decoder(
        format="avro",
        registry=Registry(urls=("http://sr:8081",), tls=RegistryTls(ca_file=Path("/c"))),
        key_decoder=KeyDecoder(format="avro"),
    )
    plain = Decoder(format="csv", schema={"a": "long"}, required=("a",))
    assert Decoder.from_settings(plain.settings()) == plain
    avsc = Decoder(format="avro", schema_file=tmp_path / "a.avsc", framed=True)
    assert Decoder.from_settings(avsc.settings()) == avsc


def test_a_written_password_is_refused(tmp_path: Path) -> None:
    message = error(
        tmp_path, {"format": "avro", "registry": {"urls": "http://sr:8081", "username": "u", "password": "x"}}
    )
    assert message == "decoder.registry.password: a password must be an ${env:NAME} reference, not written in the file"


@pytest.mark.parametrize(
    ("decoder", "expected"),
    [
        ({"format": "avro"}, "decoder.registry: the avro decoder needs a registry or a schema_file (exactly one)"),
        (
            {"format": "avro", "registry": {"urls": "http://sr:8081"}, "schema_file": "a.avsc"},
            "decoder.registry: the avro decoder needs a registry or a schema_file (exactly one)",
        ),
        ({"format": "avro", "registry": {"urls": []}}, "decoder.registry.urls: at least one http(s)://host:port"),
        ({"format": "avro", "registry": {"urls": "sr:8081"}}, "decoder.registry.urls[0]: 'sr:8081' is not an http://"),
        (
            {"format": "avro", "registry": {"urls": "http://sr:8081", "subject_strategy": "record"}},
            "decoder.registry.record: the record strategy needs the record's full name",
        ),
        (
            {"format": "avro", "registry": {"urls": "http://sr:8081", "record": "a..b"}},
            "decoder.registry.record: 'a..b' is not a full name",
        ),
        ({"format": "avro", "registry": {"urls": "http://sr:8081", "version": 0}}, "decoder.registry.version: must be"),
        (
            {"format": "avro", "registry": {"urls": "http://sr:8081", "version": "newest"}},
            "decoder.registry.version: must be one of latest, not 'newest'",
        ),
        (
            {"format": "avro", "registry": {"urls": "http://sr:8081", "username": "u"}},
            "decoder.registry.username: basic auth needs a username and a password",
        ),
        (
            {"format": "avro", "registry": {"urls": "http://sr:8081", "tls": {"certificate": "c.pem"}}},
            "decoder.registry.tls.certificate: a client certificate and its key go together",
        ),
        (
            {"format": "avro", "schema_file": "a.avsc", "schema": {"a": "long"}},
            "decoder.schema: the avro decoder takes its columns from the values' schema",
        ),
        ({"format": "json_schema"}, "decoder.registry: the json_schema decoder needs the schema registry"),
        ({"format": "protobuf"}, "decoder.registry: the protobuf decoder needs the schema registry"),
        (
            {"format": "json", "schema": {"a": "long"}, "registry": {"urls": "http://sr:8081"}},
            "decoder.registry: the json decoder reads no registry",
        ),
        (
            {"format": "csv", "schema": {"a": "long"}, "schema_file": "x"},
            "decoder.schema_file: the csv decoder reads no",
        ),
        (
            {"format": "avro", "registry": {"urls": "http://sr:8081"}, "framed": True},
            "decoder.framed: only for avro with a schema_file",
        ),
        ({"format": "connect_json"}, "decoder.schema: the connect_json decoder needs the columns"),
        (
            {"format": "raw", "key_decoder": {"format": "avro"}},
            "decoder.key_decoder.registry: avro keys need a registry",
        ),
        (
            {"format": "raw", "key_decoder": {"format": "json"}},
            "decoder.key_decoder.schema: the json key decoder needs",
        ),
        (
            {"format": "raw", "key_decoder": {"format": "string", "schema": {"a": "long"}}},
            "decoder.key_decoder.schema: the string key",
        ),
        (
            {"format": "raw", "key_decoder": {"format": "xml"}},
            "decoder.key_decoder.format: must be one of raw, string, json, avro",
        ),
        ({"format": "json", "schema": {"key_decoded": "long"}}, "decoder.schema.key_decoded: clashes with a column"),
    ],
)
def test_refusals_name_their_key(tmp_path: Path, decoder: dict[str, Any], expected: str) -> None:
    message = error(tmp_path, decoder)
    assert message.startswith(expected), message


def test_event_time_of_a_schemad_decoder_is_checked_once_the_schema_is_read(tmp_path: Path) -> None:
    # the columns are not in the file: the field is checked when the run resolves the schema
    decoder = load(tmp_path, {"format": "avro", "schema_file": "e.avsc"}, event_time={"field": "ts"})
    assert decoder.schema_file == Path("e.avsc")


def test_connect_json_with_declared_columns(tmp_path: Path) -> None:
    decoder = load(tmp_path, {"format": "connect_json", "schema": {"id": "string", "n": "long"}, "required": ["id"]})
    assert decoder.declares_columns and decoder.required == ("id",)


def test_fingerprints_of_files_without_the_new_keys_stay(tmp_path: Path) -> None:
    # a plan stores its spec's fingerprint: the new keys left at their defaults must not change it
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(spec_data({"format": "json", "schema": {"a": "long"}})), encoding="utf-8")
    assert load_spec(path).fingerprint() == "ea720e2488cf5cb5"  # what it was before the schema'd decoders


def test_an_address_carrying_credentials_is_refused_without_showing_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SR_PASSWORD", "s3cret")
    urls = ["https://loader:${env:SR_PASSWORD}@sr:8081"]
    message = error(tmp_path, {"format": "avro", "registry": {"urls": urls}})
    assert "may not carry credentials" in message and "s3cret" not in message, message
