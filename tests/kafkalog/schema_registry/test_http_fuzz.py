"""The registry's HTTP API under requests made up by hypothesis: methods, paths with odd segments and
encodings, query strings, headers and bodies (too large, nested deeply, of the wrong JSON types, not
UTF-8, garbage schemas of every type). Whatever comes, the registry answers: a status of the 2xx or
4xx families (never a 500, never a hang, never a connection dropped without an answer), every refusal
a Confluent error body (``{"error_code": int, "message": str}``, its code starting with the status),
and a refused request leaves the state as it was (no record written). Once open to all, once asking
for basic authentication (some requests logged in, others not)."""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import socket
from collections.abc import Iterator
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog.schema_registry.api import Api
from kafkalog.schema_registry.auth import BasicAuth, hash_password
from kafkalog.schema_registry.election import StaticPrimary
from kafkalog.schema_registry.forward import Forwarder
from kafkalog.schema_registry.registry import Registry
from kafkalog.schema_registry.server import HttpLimits, RegistryServer
from kafkalog.schema_registry.store import MemoryStore

pytestmark = pytest.mark.unit  # a server in this process only

LIMIT = 64 * 1024
AVRO = {"type": "record", "name": "Ev", "namespace": "demo", "fields": [{"name": "id", "type": "string"}]}
PROTO = 'syntax = "proto3";\npackage demo;\nmessage P { string id = 1; }\n'
JSON_SCHEMA = {"type": "object", "properties": {"id": {"type": "string"}}}

WORDS = [
    "subjects", "versions", "schemas", "ids", "config", "mode", "compatibility", "referencedby", "schema",
    "types", "contexts", "latest", "-1", "0", "1", "2", "3", "2147483647", "2147483648", "99999999999999999999",
    "s", "p", "j", "nobody", "associations", "exporters", ".", "..", "subjects%2Fs", "%2F", "%00", "%FF", "%zz",
    "%", "%C3%A9", "%ED%A0%80", " ", "%20", "\u00e9", ";", "?",
]  # fmt: skip
QUERY_NAMES = [
    "deleted", "deletedOnly", "permanent", "offset", "limit", "normalize", "verbose", "format", "fetchMaxId",
    "subjectPrefix", "force", "defaultToGlobal", "latestOnly", "subject", "x",
]  # fmt: skip
QUERY_VALUES = ["true", "True", "false", "", "-1", "0", "2", "99999999999999999999", "serialized", "%FF", "%", "a b"]

segment = st.one_of(
    st.sampled_from(WORDS),
    st.text(max_size=12).map(lambda t: quote(t, safe="")),
    st.binary(max_size=6).map(lambda b: "".join(f"%{byte:02X}" for byte in b)),
)
path = st.lists(segment, max_size=6).map(lambda parts: "/" + "/".join(parts))
query = st.lists(
    st.tuples(st.sampled_from(QUERY_NAMES), st.one_of(st.sampled_from(QUERY_VALUES), st.text(max_size=8))), max_size=4
).map(lambda pairs: "&".join(f"{quote(k)}={quote(v, safe='%')}" for k, v in pairs))

json_value = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
avro_garbage = st.one_of(
    st.fixed_dictionaries(
        {"type": st.sampled_from(["record", "enum", "fixed", "array", "map", "int", "nope", "demo.Ev"])},
        optional={
            "name": st.text(max_size=8),
            "fields": st.lists(st.dictionaries(st.sampled_from(["name", "type", "default"]), json_value), max_size=3),
            "symbols": json_value,
            "size": json_value,
            "items": json_value,
            "values": json_value,
            "logicalType": st.sampled_from(["decimal", "uuid", "date", "x"]),
        },
    ).map(json.dumps),
    json_value.map(json.dumps),
    st.integers(1, 3000).map(lambda n: '{"type":"array","items":' * n + '"int"' + "}" * n),
)
proto_garbage = st.one_of(
    st.text(max_size=80),
    st.lists(
        st.sampled_from(
            [
                'syntax = "proto3";',
                'syntax = "proto2";',
                "package a.b;",
                "message M {",
                "}",
                "string id = 1;",
                "int32 n = 0;",
                'import "nope.proto";',
                'import "google/protobuf/timestamp.proto";',
                "oneof o {",
                "enum E { A = 0; }",
                "map<string, M> m = 2;",
                "repeated M r = 3;",
                "option x = 1;",
                "message {",
            ]
        ),
        max_size=10,
    ).map(" ".join),
    st.binary(max_size=60).map(lambda b: base64.b64encode(b).decode()),
)
json_schema_garbage = st.one_of(
    json_value.map(json.dumps),
    st.fixed_dictionaries(
        {},
        optional={
            "type": st.sampled_from(["object", "array", "string", "nope", 1]),
            "$ref": st.sampled_from(["#", "#/definitions/x", "other.json", "#/$defs/a/b"]),
            "properties": st.dictionaries(st.text(max_size=5), json_value, max_size=3),
            "items": json_value,
            "additionalProperties": json_value,
            "oneOf": st.lists(json_value, max_size=3),
            "pattern": st.sampled_from(["(", "[a-", "a{99999999}", ".*"]),
        },
    ).map(json.dumps),
    st.integers(1, 3000).map(lambda n: '{"items":' * n + "{}" + "}" * n),
)
schema_body = st.fixed_dictionaries(
    {"schema": st.one_of(avro_garbage, proto_garbage, json_schema_garbage, json_value)},
    optional={
        "schemaType": st.sampled_from(["AVRO", "PROTOBUF", "JSON", "avro", "XML", "", 7]),
        "references": st.one_of(
            json_value,
            st.lists(
                st.fixed_dictionaries(
                    {
                        "name": json_value,
                        "subject": st.sampled_from(["s", "p", "nobody", ""]),
                        "version": st.sampled_from([1, -1, 0, 2**31, "1", None]),
                    }
                ),
                max_size=3,
            ),
        ),
        "id": st.sampled_from([1, 2, 0, -1, 2**31, "1", None]),
        "version": st.sampled_from([1, 0, -1, 2**31, "x"]),
        "compatibility": st.sampled_from(["NONE", "FULL", "none", "SIDEWAYS", 1]),
        "mode": st.sampled_from(["READONLY", "IMPORT", "READWRITE", "nope", None]),
    },
).map(lambda d: json.dumps(d).encode())
body = st.one_of(
    st.just(b""),
    schema_body,
    json_value.map(lambda v: json.dumps(v).encode()),
    st.integers(1, 200_000).map(lambda n: b"[" * n),  # nested deeper than any parser goes
    st.binary(max_size=200),  # not UTF-8, not JSON
    st.sampled_from([b'{"schema": "\xff\xfe"}', b'{"schema": 1e999999}', b"1" * 5000, b'{"a":' * 50]),
    st.integers(LIMIT + 1, LIMIT + 10_000).map(lambda n: b" " * n),  # past the limit
)
content_type = st.sampled_from(
    [None, "application/vnd.schemaregistry.v1+json", "application/json", "application/json; charset=latin-1",
     "application/vnd.schemaregistry+json", "text/plain", "", "application/x-www-form-urlencoded", "*/*"]
)  # fmt: skip
extra_headers = st.lists(
    st.tuples(
        st.sampled_from(["Authorization", "Accept", "X-Kafkalog-Registry-Forwarded", "Expect", "X-Odd", "Host"]),
        st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF), max_size=30),
    ),
    max_size=3,
)
method = st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE", "get", "BREW"])
length_lie = st.sampled_from([None, None, None, "0", "-1", "1x", "99999999999999", "10"])
GOOD = "Basic " + base64.b64encode(b"alice:secret").decode()
login = st.sampled_from([GOOD, GOOD, None, "Basic YWxpY2U6bm9wZQ==", "Bearer x", "Basic", "Basic \u00e9", "Basic Og=="])


@pytest.fixture(scope="module", params=["open", "basic-auth"])
def registry(request: pytest.FixtureRequest) -> Iterator[tuple[RegistryServer, MemoryStore]]:
    """A registry holding a schema of each type, open to all or asking for basic authentication."""
    store = MemoryStore()
    auth = BasicAuth({"alice": hash_password("secret", iterations=1000)}) if request.param == "basic-auth" else None
    server = RegistryServer(
        Api(Registry(store)), store, StaticPrimary(None), Forwarder(timeout_s=5), port=0,
        limits=HttpLimits(max_body_bytes=LIMIT, socket_timeout_s=0.2, request_timeout_s=0.5), auth=auth,
    )  # fmt: skip
    server.start()
    try:
        for target, payload in (
            ("/subjects/s/versions", {"schema": json.dumps(AVRO)}),
            ("/subjects/p/versions", {"schema": PROTO, "schemaType": "PROTOBUF"}),
            ("/subjects/j/versions", {"schema": json.dumps(JSON_SCHEMA), "schemaType": "JSON"}),
        ):
            data = json.dumps(payload).encode()
            headers = {"Content-Length": str(len(data)), "Authorization": GOOD}
            status, _, _ = exchange(server.port, "POST", target, data, headers)
            assert status == 200
        yield server, store
    finally:
        server.stop()


def exchange(port: int, verb: str, target: str, data: bytes, headers: dict[str, str]) -> tuple[int, str, bytes]:
    """One request written as raw bytes (odd paths and headers as they are): (status, media type, body)."""
    head = f"{verb} {target} HTTP/1.1\r\n".encode("latin-1")
    head += b"".join(f"{k}: {v}\r\n".encode("latin-1") for k, v in headers.items())
    with socket.create_connection(("127.0.0.1", port), timeout=15) as sock:
        # the server may answer (413, 401) and close before taking the body: its answer is read anyway
        with contextlib.suppress(OSError):
            sock.sendall(head + b"\r\n" + data)
        answer = http.client.HTTPResponse(sock, method=verb.upper())
        answer.begin()
        return answer.status, answer.getheader("Content-Type") or "", answer.read()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    verb=method, target_path=path, target_query=query, data=body, media=content_type, extra=extra_headers,
    lie=length_lie, credentials=login,
)  # fmt: skip
def test_every_request_gets_a_well_formed_answer_and_refusals_change_nothing(
    registry: tuple[RegistryServer, MemoryStore],
    verb: str,
    target_path: str,
    target_query: str,
    data: bytes,
    media: str | None,
    extra: list[tuple[str, str]],
    lie: str | None,
    credentials: str | None,
) -> None:
    server, store = registry
    target = target_path + ("?" + target_query if target_query else "")
    headers = {"Host": "registry"}
    headers.update({k: v for k, v in extra if k != "Host"})
    if credentials is not None:
        headers["Authorization"] = credentials
    if media is not None:
        headers["Content-Type"] = media
    headers["Content-Length"] = lie if lie is not None else str(len(data))
    if lie is not None:
        data = b""  # a length that lies: the body stays unsent (the server must not wait forever)
    before = len(store.log)
    try:
        status, media_type, answer = exchange(server.port, verb, target, data, headers)
    except (OSError, http.client.HTTPException) as e:
        pytest.fail(f"no answer to {verb} {target!r} ({len(data)} bytes): {e!r}")
    assert 200 <= status < 300 or 400 <= status < 500, (status, verb, target, answer[:300])
    if status >= 400:
        assert len(store.log) == before, f"a refused {verb} {target!r} wrote a record"
        if verb.upper() != "HEAD":
            assert media_type == "application/vnd.schemaregistry.v1+json", media_type
            error = json.loads(answer)
            assert set(error) == {"error_code", "message"}, error
            assert isinstance(error["error_code"], int) and isinstance(error["message"], str), error
            assert str(error["error_code"]).startswith(str(status)), (status, error)
            assert "Traceback" not in error["message"]
