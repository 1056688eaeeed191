"""The loader's registry client and the run's schemas, against a registry served over HTTP.

The registry is kafkalog's own (tests.support.registry_in_process: its REST API and compatibility
checks served from a thread of this process, its state in memory), so these tests are fast, but
they talk HTTP to a server, hence the integration tier."""

from __future__ import annotations

import json
import socket
import ssl
from pathlib import Path

import pytest

from pipelines.config.pipeline import Decoder, EventTime, KeyDecoder, Registry, RegistryTls
from pipelines.errors import PayloadSchemaError, SchemaRegistryError
from pipelines.schemas.registry_client import RegistryClient
from pipelines.schemas.resolved import Pin, RunSchemas, SubjectSchemas, resolve_schemas
from tests.support.certificates import authority, person
from tests.support.registry_in_process import LocalRegistry, unavailable_registry

pytestmark = pytest.mark.integration

V1 = {
    "type": "record",
    "name": "Ev",
    "fields": [{"name": "id", "type": "string"}, {"name": "n", "type": "int", "default": 0}],
}
V2 = {**V1, "fields": [*V1["fields"], {"name": "added", "type": ["null", "long"], "default": None}]}
V3 = {**V1, "fields": [V1["fields"][0], V2["fields"][2]]}


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def avro_decoder(*urls: str, **registry: object) -> Decoder:
    return Decoder(format="avro", registry=Registry(urls=urls, **registry))  # type: ignore[arg-type]


def test_the_three_reads() -> None:
    with LocalRegistry() as sr:
        first = sr.register("t-value", V1)
        second = sr.register("t-value", V2)
        client = RegistryClient(Registry(urls=(sr.url,)))
        assert client.versions("t-value") == [1, 2]
        latest = client.version("t-value", "latest")
        assert (latest.id, latest.version, latest.schema_type, json.loads(latest.schema)) == (second, 2, "AVRO", V2)
        assert json.loads(client.schema_by_id(first, "t-value").schema) == V1
        with pytest.raises(SchemaRegistryError) as caught:
            client.versions("nope-value")
        assert str(caught.value) == (
            f"schema registry {sr.url}: GET /subjects/nope-value/versions?deleted=true answered HTTP 404 "
            "(error 40401: Subject 'nope-value' not found.)"
        )


def test_failover_to_the_next_address_on_a_refused_connection_and_on_5xx() -> None:
    with unavailable_registry() as (down_url, asked), LocalRegistry() as up:
        up.register("t-value", V1)
        dead = f"http://127.0.0.1:{closed_port()}"
        client = RegistryClient(Registry(urls=(dead, down_url, up.url)))
        assert client.versions("t-value") == [1]
        assert asked == ["/subjects/t-value/versions?deleted=true"]


def test_a_registry_that_does_not_answer_is_one_line_naming_it() -> None:
    dead = f"http://127.0.0.1:{closed_port()}"
    with pytest.raises(SchemaRegistryError) as caught:
        resolve_schemas(avro_decoder(dead), ["t"])
    message = str(caught.value)
    assert message.startswith(f"schema registry {dead} did not answer GET /subjects/t-value/versions?deleted=true: ")
    assert "\n" not in message and "refused" in message.lower()


def test_basic_auth() -> None:
    with LocalRegistry(username="loader", password="s3cret") as sr:
        sr.register("t-value", V1)
        assert RegistryClient(Registry(urls=(sr.url,), username="loader", password="s3cret")).versions("t-value")
        with pytest.raises(SchemaRegistryError) as caught:
            RegistryClient(Registry(urls=(sr.url,), username="loader", password="wrong")).versions("t-value")
        assert "HTTP 401" in str(caught.value) and "wrong" not in str(caught.value)


def test_an_answer_too_large_is_refused() -> None:
    with LocalRegistry() as sr:
        sr.register("t-value", V1)
        with pytest.raises(SchemaRegistryError, match="an answer larger than 10 bytes"):
            RegistryClient(Registry(urls=(sr.url,)), max_response_bytes=10).version("t-value", 1)


def test_the_run_reads_every_version_and_the_latest_live_one_as_reader() -> None:
    with LocalRegistry() as sr:
        ids = [sr.register("t-value", v) for v in (V1, V2, V3)]
        sr.soft_delete("t-value", 3)  # values written with it may still be in the topic
        schemas = resolve_schemas(avro_decoder(sr.url), ["t"])
        assert schemas is not None
        value = schemas.value_for("t")
        assert (value.subject, value.reader_version, value.reader_id) == ("t-value", 2, ids[1])
        assert set(value.writers) == set(ids)
        assert RunSchemas.from_json(schemas.to_json()) == schemas
        pinned = resolve_schemas(avro_decoder(sr.url, version=1), ["t"])
        assert pinned is not None and pinned.value_for("t").reader_id == ids[0]
        replayed = resolve_schemas(avro_decoder(sr.url), ["t"], pinned={"t-value": Pin(ids[2], 3)})
        assert replayed is not None and replayed.value_for("t").reader_id == ids[2]


def test_subject_strategies_and_key_schemas() -> None:
    with LocalRegistry() as sr:
        sr.register("shop.Ev", V1)
        sr.register("a-key", {"type": "string"})
        decoder = Decoder(
            format="avro",
            registry=Registry(urls=(sr.url,), subject_strategy="record", record="shop.Ev"),
            key_decoder=KeyDecoder(format="avro"),
        )
        schemas = resolve_schemas(decoder, ["a"])
        assert schemas is not None
        assert schemas.value_for("a").subject == "shop.Ev"
        key = schemas.key_for("a")
        assert key is not None and key.subject == "a-key"


JSON_SCHEMA = {"type": "object", "properties": {"id": {"type": "string"}}}


@pytest.mark.parametrize(
    ("register", "decoder", "expected"),
    [
        (
            ("t-value", JSON_SCHEMA, "JSON"),
            {},
            "subject t-value version 1 (id 1) is a JSON schema; this decoder reads AVRO",
        ),
        (("t-value", V1, "AVRO"), {"version": 4}, "subject t-value has no version 4 (it has 1)"),
        (("t-value", {"type": "nope"}, None), {}, "subject t-value version 1 (id 1) is not an Avro schema"),
    ],
)
def test_schemas_that_cannot_be_read_are_refused_before_loading(
    register: tuple[str, dict[str, object], str | None], decoder: dict[str, object], expected: str
) -> None:
    with LocalRegistry() as sr:
        subject, schema, schema_type = register
        if schema_type is None:  # not a schema the registry takes today: one left in the topic by another
            sr.write_record(subject, 1, 1, json.dumps(schema))
        else:
            sr.register(subject, schema, schema_type)
        with pytest.raises(PayloadSchemaError) as caught:
            resolve_schemas(avro_decoder(sr.url, **decoder), ["t"])
        assert str(caught.value).startswith(expected), str(caught.value)


def test_required_fields_and_the_event_time_are_checked_against_the_schema() -> None:
    with LocalRegistry() as sr:
        sr.register("t-value", V1)
        decoder = Decoder(format="avro", registry=Registry(urls=(sr.url,)), required=("gone",))
        with pytest.raises(PayloadSchemaError, match=r"decoder.required\[0\]: 'gone' is not a field"):
            resolve_schemas(decoder, ["t"])
        with pytest.raises(PayloadSchemaError, match=r"event_time\.format: 'n' is a number"):
            resolve_schemas(avro_decoder(sr.url), ["t"], event_time=EventTime(field="n"))
        assert resolve_schemas(avro_decoder(sr.url), ["t"], event_time=EventTime(field="n", format="epoch_millis"))


def test_topics_read_into_different_columns_are_refused() -> None:
    with LocalRegistry() as sr:
        sr.register("a-value", V1)
        sr.register("b-value", V2)
        with pytest.raises(PayloadSchemaError, match="topics a and b are read into different columns"):
            resolve_schemas(avro_decoder(sr.url), ["a", "b"])


def test_a_schema_file_is_read_on_the_driver(tmp_path: Path) -> None:
    (tmp_path / "ev.avsc").write_text(json.dumps(V1))
    schemas = resolve_schemas(Decoder(format="avro", schema_file=tmp_path / "ev.avsc"), ["t"])
    assert schemas == RunSchemas({"t": SubjectSchemas("AVRO", json.dumps(V1), any_id=True)})
    with pytest.raises(PayloadSchemaError, match="cannot read the schema file"):
        resolve_schemas(Decoder(format="avro", schema_file=tmp_path / "gone.avsc"), ["t"])


def test_https_with_the_registry_s_authority_a_client_certificate_or_no_check(tmp_path: Path) -> None:
    ca = authority(tmp_path / "ca")
    server = ca.issue("registry", person("registry"), server=True)
    client_cert = ca.issue("loader", person("loader"))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(server.certificate, server.key)
    context.load_verify_locations(ca.certificate)
    context.verify_mode = ssl.CERT_REQUIRED  # the registry asks for a client certificate
    ours = ssl.create_default_context(cafile=str(ca.certificate))
    ours.check_hostname = False
    ours.load_cert_chain(client_cert.certificate, client_cert.key)
    with LocalRegistry(tls=context, client_tls=ours) as sr:
        sr.register("t-value", V1)
        tls = RegistryTls(ca_file=ca.certificate, certificate=client_cert.certificate, key=client_cert.key)
        assert RegistryClient(Registry(urls=(sr.url,), tls=tls)).versions("t-value") == [1]
        unchecked = RegistryTls(verify=False, certificate=client_cert.certificate, key=client_cert.key)
        assert RegistryClient(Registry(urls=(sr.url,), tls=unchecked)).versions("t-value") == [1]
        untrusted = RegistryTls(certificate=client_cert.certificate, key=client_cert.key)  # the system's authorities
        with pytest.raises(
            SchemaRegistryError, match=f"schema registry {sr.url} did not answer .*CERTIFICATE_VERIFY_FAILED"
        ):
            RegistryClient(Registry(urls=(sr.url,), tls=untrusted)).versions("t-value")


def test_tls_settings_that_cannot_be_used_name_the_files(tmp_path: Path) -> None:
    missing = tmp_path / "nope.pem"
    with pytest.raises(SchemaRegistryError, match=f"TLS settings cannot be used \\({missing}, None\\)"):
        RegistryClient(Registry(urls=("https://sr:8081",), tls=RegistryTls(ca_file=missing)))


def test_a_server_that_speaks_no_http_is_an_address_that_did_not_answer() -> None:
    import threading

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()

        def garbage() -> None:
            connection, _ = server.accept()
            with connection:
                connection.recv(1024)
                connection.sendall(b"\x00\x01 not http\r\n\r\n")

        thread = threading.Thread(target=garbage, daemon=True)
        thread.start()
        url = f"http://127.0.0.1:{server.getsockname()[1]}"
        with pytest.raises(SchemaRegistryError) as caught:
            RegistryClient(Registry(urls=(url,), timeout_ms=5000)).versions("t-value")
        thread.join(timeout=5)
    assert str(caught.value).startswith(f"schema registry {url} did not answer GET /subjects/t-value/versions")


def test_a_writer_schema_with_an_array_of_items_of_no_bytes_is_refused() -> None:
    # its values are decoded by its layout: a corrupt count would build items without end
    gone = {**V1, "fields": [*V1["fields"], {"name": "pings", "type": {"type": "array", "items": "null"}}]}
    with LocalRegistry() as sr:
        sr.register("t-value", gone)
        sr.register("t-value", V1)
        with pytest.raises(
            PayloadSchemaError, match=r"version 1 \(id 1\): /pings: an array of items that take no bytes"
        ):
            resolve_schemas(avro_decoder(sr.url), ["t"])


def test_a_redirect_is_not_followed_so_credentials_stay_with_the_registry() -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen: list[str | None] = []

    class Elsewhere(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization"))
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"[1]")

    elsewhere = ThreadingHTTPServer(("127.0.0.1", 0), Elsewhere)

    class Redirecting(Elsewhere):
        def do_GET(self) -> None:
            self.send_response(302)
            self.send_header("Location", f"http://127.0.0.1:{elsewhere.server_address[1]}{self.path}")
            self.end_headers()

    registry = ThreadingHTTPServer(("127.0.0.1", 0), Redirecting)
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in (elsewhere, registry)]
    for thread in threads:
        thread.start()
    try:
        url = f"http://127.0.0.1:{registry.server_address[1]}"
        client = RegistryClient(Registry(urls=(url,), username="loader", password="s3cret"))
        with pytest.raises(SchemaRegistryError, match="answered HTTP 302"):
            client.versions("t-value")
        assert seen == []
    finally:
        for server in (elsewhere, registry):
            server.shutdown()
            server.server_close()


def test_a_writer_the_reader_cannot_read_refuses_the_run_naming_the_versions_and_the_field() -> None:
    without_default = {**V1, "fields": [V1["fields"][0], {"name": "n", "type": "int"}]}
    with LocalRegistry() as sr:
        sr.register("t-value", {**V3, "fields": [V3["fields"][0]]})  # written without n
        sr.register("t-value", without_default, compatibility="NONE")  # the reader: n required, no default
        with pytest.raises(PayloadSchemaError) as caught:
            resolve_schemas(avro_decoder(sr.url), ["t"])
    message = str(caught.value)
    assert message.startswith(
        "subject t-value: records written with version 1 (id 1) cannot be read into version 2 (id 2)"
    ), message
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in message and "The field 'n' at path '/fields/1'" in message
