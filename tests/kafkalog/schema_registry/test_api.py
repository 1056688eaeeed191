"""The REST API against a store in memory: Confluent's paths, answers, error codes and texts, the
rules of ids, versions, deletes, levels and modes (the HTTP server and the topic are tested apart)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kafkalog.schema_registry import records
from kafkalog.schema_registry.api import Api, Request, Response
from kafkalog.schema_registry.errors import ApiError
from kafkalog.schema_registry.records import SchemaValue
from kafkalog.schema_registry.registry import Registry, Rules
from kafkalog.schema_registry.store import MemoryStore
from kafkalog.schemas.compatibility import CompatibilityLevel
from kafkalog.schemas.model import SchemaType

V1 = {"type": "record", "name": "Ev", "namespace": "demo", "fields": [{"name": "id", "type": "string"}]}
V2_DEFAULT = {**V1, "fields": [*V1["fields"], {"name": "n", "type": "int", "default": 0}]}
V2_REQUIRED = {**V1, "fields": [*V1["fields"], {"name": "n", "type": "int"}]}
PROTO = 'syntax = "proto3";\npackage demo;\nmessage Ev {\n  string id = 1;\n}\n'
JSON_SCHEMA = {"type": "object", "properties": {"id": {"type": "string"}}, "additionalProperties": False}


class Client:
    """Calls the API as the HTTP server would, and answers (status, JSON)."""

    def __init__(self, rules: Rules | None = None) -> None:
        self.store = MemoryStore()
        self.api = Api(Registry(self.store, rules or Rules()))

    def call(
        self, method: str, target: str, body: Any = None, *, raw: bytes | None = None, content_type: str | None = None
    ) -> tuple[int, Any]:
        data = raw if raw is not None else (b"" if body is None else json.dumps(body).encode())
        try:
            response = self.api.handle(Request.of(method, target, data, content_type))
        except ApiError as e:  # the target itself is refused (the server answers it the same way)
            response = Response.of_error(e)
        text = response.body.decode()
        try:
            return response.status, json.loads(text)
        except ValueError:
            return response.status, text

    def register(self, subject: str, schema: Any, **extra: Any) -> tuple[int, Any]:
        text = schema if isinstance(schema, str) else json.dumps(schema)
        return self.call("POST", f"/subjects/{subject}/versions", {"schema": text, **extra})


def error(answer: tuple[int, Any]) -> tuple[int, int]:
    status, body = answer
    return status, body["error_code"]


def test_root_types_contexts_and_unknown_paths() -> None:
    c = Client()
    assert c.call("GET", "/") == (200, {})
    assert c.call("POST", "/") == (200, {})
    assert c.call("GET", "/schemas/types") == (200, ["JSON", "PROTOBUF", "AVRO"])
    assert c.call("GET", "/contexts") == (200, ["."])
    status, body = c.call("GET", "/associations/resources/-/t?resourceType=topic&associationType=value")
    assert status == 404 and body["error_code"] == 404, "confluent-kafka probes it and takes only a 404"
    assert error(c.call("GET", "/subjects/a/b/c/d/e/f")) == (404, 404)
    assert error(c.call("PATCH", "/subjects")) == (405, 405)
    assert error(c.call("GET", "/%ff")) == (404, 404)


def test_register_gives_one_id_per_schema_across_subjects_and_is_idempotent() -> None:
    c = Client()
    assert c.register("a-value", V1) == (200, {"id": 1})
    assert c.register("a-value", V1) == (200, {"id": 1}), "the same schema again: its id, no new version"
    assert c.register("b-value", V1) == (200, {"id": 1}), "another subject: the same global id"
    assert c.call("GET", "/subjects/a-value/versions") == (200, [1])
    # written another way (spaces, key order kept): the canonical text is what identifies it
    assert c.register("a-value", json.dumps(V1, indent=2)) == (200, {"id": 1})
    assert c.register("a-value", V2_DEFAULT) == (200, {"id": 2})
    assert c.call("GET", "/subjects/a-value/versions") == (200, [1, 2])
    assert c.call("GET", "/subjects") == (200, ["a-value", "b-value"])
    assert c.call("GET", "/subjects?subjectPrefix=b") == (200, ["b-value"])
    status, latest = c.call("GET", "/subjects/a-value/versions/latest")
    assert status == 200 and latest["version"] == 2 and latest["id"] == 2 and latest["subject"] == "a-value"
    assert "schemaType" not in latest and "references" not in latest, "left out for Avro and for none"
    assert json.loads(latest["schema"]) == V2_DEFAULT
    assert c.call("GET", "/subjects/a-value/versions/-1")[1] == latest
    assert c.call("GET", "/schemas/ids/1") == (200, {"schema": json.dumps(V1, separators=(",", ":"))})
    assert c.call("GET", "/schemas/ids/1?fetchMaxId=true")[1]["maxId"] == 2
    assert c.call("GET", "/schemas/ids/1/subjects") == (200, ["a-value", "b-value"])
    assert c.call("GET", "/schemas/ids/1/versions") == (
        200,
        [{"subject": "a-value", "version": 1}, {"subject": "b-value", "version": 1}],
    )
    assert c.call("GET", "/subjects/a-value/versions/1/schema") == (200, V1), "the schema itself, not wrapped"


def test_re_registering_an_existing_schema_is_idempotent_even_when_it_is_now_incompatible() -> None:
    c = Client()
    c.register("s", V1)
    c.register("s", V2_DEFAULT)
    assert c.call("PUT", "/config/s", {"compatibility": "FORWARD_TRANSITIVE"}) == (
        200,
        {"compatibility": "FORWARD_TRANSITIVE"},
    )
    assert c.register("s", V1) == (200, {"id": 1})


def test_incompatible_schema_is_refused_with_confluents_words_and_the_configured_code() -> None:
    c = Client()
    c.register("s", V1)
    status, body = c.register("s", V2_REQUIRED)
    assert status == 409 and body["error_code"] == 409
    message = body["message"]
    assert message.startswith(
        'Schema being registered is incompatible with an earlier schema for subject "s", details: ['
    )
    assert "{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE'" in message
    assert "{oldSchemaVersion: 1}" in message
    assert message.endswith("{validateFields: 'false', compatibility: 'BACKWARD'}]")
    newer = Client(Rules(incompatible_error_code=40901))
    newer.register("s", V1)
    assert error(newer.register("s", V2_REQUIRED)) == (409, 40901)
    assert c.call("GET", "/subjects/s/versions") == (200, [1]), "nothing written"


def test_compatibility_levels_from_subject_then_global_then_default() -> None:
    c = Client(Rules(default_compatibility=CompatibilityLevel.NONE))
    assert c.call("GET", "/config") == (200, {"compatibilityLevel": "NONE"})
    c.register("s", V1)
    assert c.register("s", V2_REQUIRED) == (200, {"id": 2}), "NONE checks nothing"
    assert c.call("PUT", "/config", {"compatibility": "backward"}) == (200, {"compatibility": "BACKWARD"})
    assert c.call("GET", "/config") == (200, {"compatibilityLevel": "BACKWARD"})
    v3 = {**V1, "fields": [*V1["fields"], {"name": "x", "type": "string"}]}
    assert error(c.register("s", v3)) == (409, 409)
    assert error(c.call("GET", "/config/s")) == (404, 40408)
    assert c.call("GET", "/config/s?defaultToGlobal=TRUE") == (200, {"compatibilityLevel": "BACKWARD"})
    assert c.call("PUT", "/config/s", {"compatibility": "NONE", "normalize": True, "unknown": 1})[0] == 200
    assert c.call("GET", "/config/s") == (200, {"compatibilityLevel": "NONE"})
    assert c.register("s", v3) == (200, {"id": 3})
    assert c.call("DELETE", "/config/s") == (200, {"compatibilityLevel": "NONE"})
    assert error(c.call("DELETE", "/config/s")) == (404, 40408)
    assert error(c.call("DELETE", "/config/nobody")) == (404, 40401)
    assert c.call("DELETE", "/config") == (200, {"compatibilityLevel": "BACKWARD"})
    assert c.call("GET", "/config") == (200, {"compatibilityLevel": "NONE"}), "back to the default"
    for bad in ({"compatibility": "SIDEWAYS"}, {"compatibility": 3}, {}, [], None):
        status, body = c.call("PUT", "/config", bad)
        assert (status, body["error_code"]) == (422, 42203)
        assert body["message"].startswith("Invalid compatibility level. Valid values are none, backward")


def test_test_compatibility_against_a_version_and_all_versions() -> None:
    c = Client()
    assert c.call("POST", "/compatibility/subjects/s/versions/latest", {"schema": json.dumps(V1)}) == (
        200,
        {"is_compatible": True},
    ), "no version yet: compatible"
    assert error(c.call("POST", "/compatibility/subjects/s/versions/3", {"schema": json.dumps(V1)})) == (404, 40402)
    c.register("s", V1)
    ok = c.call("POST", "/compatibility/subjects/s/versions/1?verbose=true", {"schema": json.dumps(V2_DEFAULT)})
    assert ok == (200, {"is_compatible": True, "messages": []})
    status, body = c.call(
        "POST", "/compatibility/subjects/s/versions/latest?verbose=True", {"schema": json.dumps(V2_REQUIRED)}
    )
    assert status == 200 and body["is_compatible"] is False
    assert body["messages"][0].startswith("{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE'")
    brief = c.call("POST", "/compatibility/subjects/s/versions", {"schema": json.dumps(V2_REQUIRED)})
    assert brief == (200, {"is_compatible": False})
    assert error(c.call("POST", "/compatibility/subjects/s/versions/x", {"schema": json.dumps(V1)})) == (422, 42202)


def test_lookup_finds_the_version_that_holds_a_schema() -> None:
    c = Client()
    assert error(c.call("POST", "/subjects/s", {"schema": json.dumps(V1)})) == (404, 40401)
    c.register("s", V1)
    c.register("s", V2_DEFAULT)
    status, body = c.call("POST", "/subjects/s?normalize=False&deleted=False", {"schema": json.dumps(V1)})
    assert status == 200 and (body["subject"], body["version"], body["id"]) == ("s", 1, 1)
    assert error(c.call("POST", "/subjects/s", {"schema": json.dumps(V2_REQUIRED)})) == (404, 40403)
    c.call("DELETE", "/subjects/s/versions/1")
    assert error(c.call("POST", "/subjects/s", {"schema": json.dumps(V1)})) == (404, 40403)
    assert c.call("POST", "/subjects/s?deleted=true", {"schema": json.dumps(V1)})[1]["version"] == 1


def test_soft_and_hard_deletes_of_versions_follow_confluents_rules() -> None:
    c = Client()
    c.register("s", V1)
    c.register("s", V2_DEFAULT)
    assert error(c.call("DELETE", "/subjects/s/versions/1?permanent=true")) == (404, 40407)
    assert c.call("DELETE", "/subjects/s/versions/2") == (200, 2)
    assert error(c.call("DELETE", "/subjects/s/versions/2")) == (404, 40406)
    assert c.call("GET", "/subjects/s/versions/latest")[1]["version"] == 1, "latest skips a soft-deleted version"
    assert error(c.call("GET", "/subjects/s/versions/2")) == (404, 40402)
    assert c.call("GET", "/subjects/s/versions/2?deleted=true")[1]["id"] == 2
    assert c.call("GET", "/subjects/s/versions") == (200, [1])
    assert c.call("GET", "/subjects/s/versions?deleted=true") == (200, [1, 2])
    assert c.call("GET", "/subjects/s/versions?deletedOnly=true") == (200, [2])
    # compatibility no longer sees version 2; the next version is 3 all the same
    v3 = {**V1, "fields": [*V1["fields"], {"name": "n", "type": "string", "default": ""}]}
    assert c.register("s", v3) == (200, {"id": 3})
    assert c.call("GET", "/subjects/s/versions") == (200, [1, 3])
    assert c.call("DELETE", "/subjects/s/versions/2?permanent=true") == (200, 2)
    assert error(c.call("GET", "/subjects/s/versions/2?deleted=true")) == (404, 40402)
    assert error(c.call("GET", "/schemas/ids/2")) == (404, 40403), "no version holds id 2 any more"
    assert error(c.call("DELETE", "/subjects/s/versions/9")) == (404, 40402)
    assert error(c.call("DELETE", "/subjects/nobody/versions/1")) == (404, 40401)
    assert error(c.call("DELETE", "/subjects/s/versions/0")) == (422, 42202)
    # re-registering a soft-deleted schema makes a new version with the same id
    c.call("DELETE", "/subjects/s/versions/3")
    assert c.register("s", v3) == (200, {"id": 3})
    assert c.call("GET", "/subjects/s/versions") == (200, [1, 4])


def test_soft_and_hard_deletes_of_subjects() -> None:
    c = Client()
    c.register("s", V1)
    c.register("s", V2_DEFAULT)
    c.call("PUT", "/config/s", {"compatibility": "FULL"})
    assert error(c.call("DELETE", "/subjects/s?permanent=true")) == (404, 40405)
    assert c.call("DELETE", "/subjects/s") == (200, [1, 2])
    assert error(c.call("DELETE", "/subjects/s")) == (404, 40404)
    assert error(c.call("GET", "/subjects/s/versions")) == (404, 40401)
    assert c.call("GET", "/subjects") == (200, [])
    assert c.call("GET", "/subjects?deleted=true") == (200, ["s"])
    assert c.call("GET", "/subjects?deletedOnly=true") == (200, ["s"])
    assert c.call("GET", "/schemas/ids/1")[0] == 200, "a soft-deleted version's schema is still served by id"
    assert c.call("DELETE", "/subjects/s?permanent=true") == (200, [1, 2])
    assert c.call("GET", "/subjects?deleted=true") == (200, [])
    assert error(c.call("GET", "/schemas/ids/1")) == (404, 40403)
    assert error(c.call("GET", "/config/s")) == (404, 40408), "its config went with it"
    assert error(c.call("DELETE", "/subjects/s")) == (404, 40401)
    # ids are never given again
    assert c.register("s", V1) == (200, {"id": 3})
    assert c.call("GET", "/subjects/s/versions") == (200, [1])


def test_references_resolve_and_a_referenced_schema_cannot_be_deleted() -> None:
    c = Client()
    inner = {"type": "record", "name": "Inner", "namespace": "demo", "fields": [{"name": "x", "type": "int"}]}
    outer = {"type": "record", "name": "Outer", "namespace": "demo", "fields": [{"name": "i", "type": "demo.Inner"}]}
    assert c.register("inner", inner) == (200, {"id": 1})
    missing = [{"name": "demo.Inner", "subject": "inner", "version": 5}]
    assert error(c.register("outer", outer, references=missing)) == (422, 42201)
    refs = [{"name": "demo.Inner", "subject": "inner", "version": 1}]
    assert c.register("outer", outer, references=refs) == (200, {"id": 2})
    assert c.register("outer", outer, references=[{**refs[0], "version": -1}]) == (200, {"id": 2}), "-1 is latest"
    assert error(c.register("outer", outer)) == (422, 42201), "without the reference it does not parse"
    status, body = c.call("GET", "/subjects/outer/versions/1")
    assert body["references"] == refs
    assert c.call("GET", "/schemas/ids/2")[1]["references"] == refs
    assert c.call("GET", "/subjects/inner/versions/1/referencedby") == (200, [2])
    status, body = c.call("DELETE", "/subjects/inner/versions/1")
    assert (status, body) == (422, {"error_code": 42206, "message": "One or more references exist to the schema 1."})
    assert error(c.call("DELETE", "/subjects/inner")) == (422, 42206)


def test_no_hard_delete_leaves_a_dangling_reference() -> None:
    """A soft-deleted referrer still holds its reference (it can be read, and a later version of its
    subject is checked against nothing it cannot parse): the referenced version outlives it until the
    referrer is hard deleted itself. A new reference to a soft-deleted version is refused."""
    c = Client()
    inner = {"type": "record", "name": "Inner", "namespace": "demo", "fields": [{"name": "x", "type": "int"}]}
    outer = {"type": "record", "name": "Outer", "namespace": "demo", "fields": [{"name": "i", "type": "demo.Inner"}]}
    refs = [{"name": "demo.Inner", "subject": "inner", "version": 1}]
    assert c.register("inner", inner) == (200, {"id": 1})
    assert c.register("outer", outer, references=refs) == (200, {"id": 2})
    assert c.call("DELETE", "/subjects/outer") == (200, [1])  # the referrer, soft deleted
    assert c.call("DELETE", "/subjects/inner") == (200, [1])  # a soft-deleted referrer does not hold it
    assert error(c.call("DELETE", "/subjects/inner?permanent=true")) == (422, 42206)
    assert error(c.call("DELETE", "/subjects/inner/versions/1?permanent=true")) == (422, 42206)
    status, body = c.register("outer", outer, references=refs)
    assert (status, body["error_code"]) == (422, 42201), "a new reference to a soft-deleted version"
    assert "soft deleted" in body["message"]
    assert c.call("DELETE", "/subjects/outer?permanent=true") == (200, [1])
    assert c.call("DELETE", "/subjects/inner?permanent=true") == (200, [1]), "no referrer left"
    # versions of one subject that reference each other go together
    assert c.register("self", inner)[0] == 200
    chain = {**outer, "name": "Chain"}
    assert c.call("PUT", "/config/self", {"compatibility": "NONE"})[0] == 200
    assert c.register("self", chain, references=[{**refs[0], "subject": "self"}])[0] == 200
    assert error(c.call("DELETE", "/subjects/self")) == (422, 42206), "a live referrer holds v1 (soft delete)"
    assert c.call("DELETE", "/subjects/self/versions/2")[0] == 200
    assert c.call("DELETE", "/subjects/self") == (200, [1])
    assert c.call("DELETE", "/subjects/self?permanent=true") == (200, [1, 2])


def test_protobuf_and_json_schemas() -> None:
    c = Client()
    status, body = c.register("p", PROTO, schemaType="PROTOBUF")
    assert (status, body) == (200, {"id": 1})
    status, got = c.call("GET", "/schemas/ids/1")
    assert got["schemaType"] == "PROTOBUF" and "message Ev" in got["schema"]
    serialized = c.call("GET", "/schemas/ids/1?format=serialized")[1]["schema"]
    assert serialized != got["schema"] and "message" not in serialized
    # the descriptor itself, as Python's ProtobufSerializer sends it, is the same schema
    assert c.register("p", serialized, schemaType="PROTOBUF") == (200, {"id": 1})
    assert c.call("GET", "/subjects/p/versions/1?format=serialized")[1]["schema"] == serialized
    changed = PROTO.replace("string id = 1", "int32 id = 1")
    status, body = c.register("p", changed, schemaType="PROTOBUF")
    assert status == 409 and "FIELD_SCALAR_KIND_CHANGED" in body["message"]
    assert c.register("j", JSON_SCHEMA, schemaType="JSON") == (200, {"id": 2})
    assert c.call("GET", "/subjects/j/versions/1")[1]["schemaType"] == "JSON"
    assert error(c.register("p", V1)) == (409, 409), "another type than the subject's"


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"schema": "{not json"}, 42201),
        ({"schema": '{"type":"record","name":"E","fields":[{"name":"a","type":"nope"}]}'}, 42201),
        ({"schema": ""}, 42201),
        ({"schema": 5}, 42201),
        ({}, 42201),
        ({"schema": json.dumps(V1), "schemaType": "XML"}, 42201),
        ({"schema": "message {", "schemaType": "PROTOBUF"}, 42201),
        ({"schema": json.dumps(V1), "references": "x"}, 42201),
        ({"schema": json.dumps(V1), "references": [{"name": "a", "subject": "b", "version": 2**40}]}, 42201),
        ([1, 2], 422),
        ("just a string", 422),
    ],
)
def test_bad_schemas_and_bodies_get_422(body: Any, code: int) -> None:
    status, answer = Client().call("POST", "/subjects/s/versions", body)
    assert (status, answer["error_code"]) == (422, code), answer


def test_malformed_requests_get_the_apis_codes() -> None:
    c = Client()
    c.register("s", V1)
    assert error(c.call("POST", "/subjects/s/versions", raw=b"{")) == (422, 422)
    assert error(c.call("POST", "/subjects/s/versions", raw=b"[" * 100_000)) == (422, 422), "nested too deeply"
    huge = b'{"schema": "x", "id": ' + b"9" * 5000 + b"}"
    assert error(c.call("POST", "/subjects/s/versions", raw=huge)) == (422, 422), "a number too long to read"
    assert error(c.call("POST", "/subjects/s/versions", raw=b'{"schema":"x","id":99999999999}')) == (422, 422)
    assert error(c.call("POST", "/subjects/s/versions", raw=b"\xff\xfe")) == (422, 422)
    body = json.dumps({"schema": json.dumps(V1)}).encode()
    assert error(c.call("POST", "/subjects/s/versions", raw=body, content_type="text/xml")) == (415, 415)
    for media in ("application/vnd.schemaregistry.v1+json", "application/vnd.schemaregistry+json",
                  "application/json; charset=utf-8"):  # fmt: skip
        assert c.call("POST", "/subjects/s/versions", raw=body, content_type=media) == (200, {"id": 1})
    assert error(c.call("GET", "/subjects/s/versions/abc")) == (422, 42202)
    assert error(c.call("GET", "/subjects/s/versions/2147483648")) == (422, 42202)
    assert error(c.call("GET", "/subjects/s/versions/99999999999999999999")) == (422, 42202)
    assert c.call("GET", "/subjects/s/versions/LATEST")[0] == 200
    assert error(c.call("GET", "/schemas/ids/abc")) == (404, 40403)
    assert error(c.call("GET", "/schemas/ids/-1")) == (404, 40403)
    assert error(c.call("GET", "/schemas/ids/77")) == (404, 40403)
    assert error(c.call("GET", "/subjects/nobody/versions/1")) == (404, 40401)
    assert error(c.call("GET", "/subjects/s/versions/7")) == (404, 40402)
    assert error(c.register("%01bad", V1)) == (422, 42208)
    assert error(c.register("%20", V1)) == (422, 42208)
    query = "&".join(f"k{i}=1" for i in range(60))
    assert error(c.call("GET", f"/subjects?{query}")) == (422, 422)


def test_a_subject_may_hold_a_slash_when_encoded() -> None:
    c = Client()
    assert c.register("a%2Fb", V1) == (200, {"id": 1})
    assert c.call("GET", "/subjects") == (200, ["a/b"])
    assert c.call("GET", "/subjects/a%2Fb/versions/1")[1]["subject"] == "a/b"
    assert error(c.call("GET", "/subjects/a/b/versions/1")) == (404, 404), "unencoded: another path"


def test_modes_readonly_refuses_writes_and_import_takes_ids() -> None:
    c = Client()
    assert c.call("GET", "/mode") == (200, {"mode": "READWRITE"})
    c.register("s", V1)
    assert error(c.call("GET", "/mode/s")) == (404, 40409)
    assert c.call("GET", "/mode/s?defaultToGlobal=true") == (200, {"mode": "READWRITE"})
    assert c.call("PUT", "/mode/s", {"mode": "readonly"}) == (200, {"mode": "READONLY"})
    status, body = c.register("s", V2_DEFAULT)
    assert (status, body) == (422, {"error_code": 42205, "message": "Subject s is in read-only mode"})
    assert error(c.call("DELETE", "/subjects/s/versions/1")) == (422, 42205)
    assert c.register("t", V1) == (200, {"id": 1}), "another subject is not read-only"
    assert c.call("DELETE", "/mode/s") == (200, {"mode": "READONLY"})
    assert c.register("s", V2_DEFAULT) == (200, {"id": 2})
    for bad in ({"mode": "SOMETIMES"}, {"mode": 1}, {}):
        status, body = c.call("PUT", "/mode", bad)
        assert (status, body["error_code"]) == (422, 42204) and body["message"].startswith("Invalid mode.")
    assert error(c.call("PUT", "/mode", {"mode": "IMPORT"})) == (422, 42205), "subjects exist"
    assert error(c.register("s", V1, id=50)) == (422, 42205), "an id is given only in import mode"
    assert c.call("PUT", "/mode?force=true", {"mode": "IMPORT"}) == (200, {"mode": "IMPORT"})
    imported = {**V1, "name": "Imported"}
    assert c.register("imp", imported, id=50, version=7) == (200, {"id": 50})
    assert c.call("GET", "/subjects/imp/versions") == (200, [7])
    assert error(c.register("imp2", V2_REQUIRED, id=50)) == (422, 42207), "id 50 holds another schema"
    c.call("PUT", "/mode", {"mode": "READWRITE"})
    assert c.register("x", {**V1, "name": "Next"}) == (200, {"id": 51}), "ids go on after the imported ones"


def test_every_write_goes_to_the_store_in_confluents_record_format() -> None:
    c = Client()
    c.register("s", V1)
    c.call("PUT", "/config", {"compatibility": "FULL"})
    c.call("PUT", "/mode/s", {"mode": "READONLY"})
    c.call("DELETE", "/mode/s")
    c.call("DELETE", "/subjects/s")
    c.call("DELETE", "/subjects/s?permanent=true")
    keys = [key for key, _ in c.store.log]
    assert keys == [
        b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}',
        b'{"keytype":"CONFIG","subject":null,"magic":0}',
        b'{"keytype":"MODE","subject":"s","magic":0}',
        b'{"keytype":"MODE","subject":"s","magic":0}',
        b'{"keytype":"DELETE_SUBJECT","subject":"s","magic":0}',
        b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}',
    ]
    values = [value for _, value in c.store.log]
    assert values[0] == (
        b'{"subject":"s","version":1,"id":1,"schema":"{\\"type\\":\\"record\\",\\"name\\":\\"Ev\\",\\"namespace\\":'
        b'\\"demo\\",\\"fields\\":[{\\"name\\":\\"id\\",\\"type\\":\\"string\\"}]}","deleted":false}'
    )
    assert values[1:] == [
        b'{"compatibilityLevel":"FULL"}',
        b'{"subject":"s","mode":"READONLY"}',
        None,
        b'{"subject":"s","version":1}',
        None,
    ]


class RacingStore(MemoryStore):
    """A store another registry writes to just before this one's first write lands."""

    def __init__(self) -> None:
        super().__init__()
        self.raced = False

    def write(self, records_: Any) -> None:
        if not self.raced:
            self.raced = True
            other = SchemaValue("t", 1, 1, json.dumps({"type": "fixed", "name": "F", "size": 2}))
            super().write([(records.schema_key("t", 1), other.encode())])
        super().write(records_)


def test_a_registration_that_lost_a_race_with_another_writer_is_not_acknowledged() -> None:
    store = RacingStore()
    api = Api(Registry(store))
    answer = api.handle(Request.of("POST", "/subjects/s/versions", json.dumps({"schema": json.dumps(V1)}).encode()))
    assert answer.status == 500 and json.loads(answer.body)["error_code"] == 50001
    assert json.loads(store.state.schemas[1].text)["type"] == "fixed", "the first record for id 1 holds it"
    again = api.handle(Request.of("POST", "/subjects/s/versions", json.dumps({"schema": json.dumps(V1)}).encode()))
    assert json.loads(again.body) == {"id": 2}, "tried again, it gets the next id"


def test_schemas_listed_and_lists_paged() -> None:
    c = Client()
    for subject in ("a", "b", "c"):
        c.register(subject, {**V1, "name": subject.upper()})
    c.register("a", {**V1, "name": "A", "fields": [*V1["fields"], {"name": "n", "type": "int", "default": 0}]})
    status, listed = c.call("GET", "/schemas")
    assert status == 200 and [(s["subject"], s["version"], s["id"]) for s in listed] == [
        ("a", 1, 1), ("a", 2, 4), ("b", 1, 2), ("c", 1, 3),
    ]  # fmt: skip
    assert [s["version"] for s in c.call("GET", "/schemas?subjectPrefix=a&latestOnly=true")[1]] == [2]
    assert c.call("GET", "/subjects?offset=1&limit=1") == (200, ["b"])
    assert c.call("GET", "/subjects?offset=2") == (200, ["c"])
    assert c.call("GET", "/subjects?limit=-1") == (200, ["a", "b", "c"])
    assert c.call("GET", "/subjects/a/versions?limit=1") == (200, [1])
    assert error(c.call("GET", "/subjects?offset=x")) == (422, 422)
    assert error(c.call("GET", "/subjects?limit=99999999999999")) == (422, 422)


def test_schemas_too_large_to_compare_are_invalid_not_a_server_error() -> None:
    """The checkers give up past their bounds (InvalidSchemaError): the new schema's fault, 42201."""
    client = Client()
    props = {f"p{i}": {"type": "string"} for i in range(20_001)}  # past json_schema_compat.MAX_COMPARISONS
    first = {"type": "object", "properties": props}
    second = {"type": "object", "properties": {**props, "x": {"type": "integer"}}}
    assert client.register("j", first, schemaType="JSON")[0] == 200
    body = {"schema": json.dumps(second), "schemaType": "JSON"}
    for target in ("/subjects/j/versions", "/compatibility/subjects/j/versions/latest"):
        status, answer = client.call("POST", target, body)
        assert (status, answer["error_code"]) == (422, 42201), target
        assert "too large to compare" in answer["message"]


def test_a_recursion_error_while_comparing_is_an_invalid_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    client = Client()
    assert client.register("s", V1)[0] == 200

    def too_deep(*_: Any, **__: Any) -> list[str]:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr("kafkalog.schema_registry.registry.check", too_deep)
    assert error(client.register("s", V2_DEFAULT)) == (422, 42201)
    assert error(client.call("POST", "/compatibility/subjects/s/versions", {"schema": json.dumps(V2_DEFAULT)})) == (
        422, 42201,
    )  # fmt: skip


def test_referencedby_pages_and_counts_soft_deleted_referrers_on_request() -> None:
    c = Client(Rules(default_compatibility=CompatibilityLevel.NONE))
    inner = {"type": "record", "name": "Inner", "namespace": "demo", "fields": [{"name": "x", "type": "int"}]}
    assert c.register("inner", inner) == (200, {"id": 1})
    refs = [{"name": "demo.Inner", "subject": "inner", "version": 1}]
    for i in range(4):
        outer = {
            "type": "record",
            "name": f"Outer{i}",
            "namespace": "demo",
            "fields": [{"name": "i", "type": "demo.Inner"}],
        }
        assert c.register(f"outer{i}", outer, references=refs) == (200, {"id": 2 + i})
    path = "/subjects/inner/versions/1/referencedby"
    assert c.call("GET", path) == (200, [2, 3, 4, 5])
    assert c.call("GET", path + "?offset=1&limit=2") == (200, [3, 4])
    assert c.call("GET", path + "?offset=3") == (200, [5])
    assert c.call("GET", path + "?limit=-1") == (200, [2, 3, 4, 5])
    assert c.call("DELETE", "/subjects/outer0") == (200, [1])
    assert c.call("GET", path) == (200, [3, 4, 5])
    assert c.call("GET", path + "?deleted=true") == (200, [2, 3, 4, 5])
    assert c.call("GET", "/subjects/inner/versions/latest/referencedby?deleted=true&limit=1") == (200, [2])
    assert error(c.call("GET", "/subjects/nobody/versions/1/referencedby")) == (404, 40401)
    assert error(c.call("GET", "/subjects/inner/versions/2/referencedby")) == (404, 40402)
    assert error(c.call("GET", path + "?offset=x")) == (422, 422)


def test_subject_missing_and_version_missing_as_confluent_tells_them_apart() -> None:
    c = Client()
    assert c.register("s", V1) == (200, {"id": 1})
    assert c.register("s", V2_DEFAULT) == (200, {"id": 2})
    assert c.call("DELETE", "/subjects/s/versions/2") == (200, 2)
    # latest is the latest version not soft deleted, with ?deleted=true too
    assert c.call("GET", "/subjects/s/versions/latest?deleted=true")[1]["version"] == 1
    assert c.call("GET", "/subjects/s/versions/2?deleted=true")[1]["version"] == 2
    assert c.call("GET", "/subjects/s/versions/2") == (404, {"error_code": 40402, "message": "Version 2 not found."})
    assert c.call("DELETE", "/subjects/s") == (200, [1])
    # every version soft deleted: the subject is missing, unless soft-deleted ones are asked for
    assert error(c.call("GET", "/subjects/s/versions/1")) == (404, 40401)
    assert error(c.call("GET", "/subjects/s/versions/latest")) == (404, 40401)
    assert c.call("GET", "/subjects/s/versions/latest?deleted=true") == (
        404,
        {"error_code": 40402, "message": "Version -1 not found."},
    )
    assert c.call("GET", "/subjects/s/versions/1?deleted=true")[1]["id"] == 1
    assert c.call("GET", "/subjects/s/versions/1/referencedby") == (200, []), "found soft deleted, as Confluent's"
    assert error(c.call("GET", "/subjects/s/versions/latest/referencedby")) == (404, 40402)
    assert error(c.call("GET", "/subjects/nobody/versions/latest")) == (404, 40401)
    # compatibility against a version: 40402 whether or not the subject exists (Confluent's resource)
    body = {"schema": json.dumps(V1)}
    assert error(c.call("POST", "/compatibility/subjects/nobody/versions/1", body)) == (404, 40402)
    assert c.call("POST", "/compatibility/subjects/nobody/versions/latest", body) == (200, {"is_compatible": True})
    assert error(c.call("POST", "/compatibility/subjects/s/versions/1", body)) == (404, 40402)


def test_a_stored_schema_that_no_longer_parses_is_named_not_a_500() -> None:
    """Written into the topic by another registry (or version of this one) taking what this one does not."""
    c = Client()
    bad_avro = SchemaValue("s", 1, 1, '{"type": "record", "name": "Ev", "fields": [{"name": "x", "type": "nope"}]}')
    bad_proto = SchemaValue("p", 1, 2, "syntax = 'proto9'; message {", SchemaType.PROTOBUF)
    c.store.write([(records.schema_key("s", 1), bad_avro.encode()), (records.schema_key("p", 1), bad_proto.encode())])
    assert c.call("GET", "/subjects/s/versions/1")[1]["id"] == 1, "read as stored"
    status, body = c.register("s", V1)
    assert (status, body["error_code"]) == (422, 42201)
    assert "the stored AVRO schema of subject 's' version 1 (id 1) does not parse here" in body["message"]
    status, body = c.call("POST", "/compatibility/subjects/s/versions/latest", {"schema": json.dumps(V1)})
    assert (status, body["error_code"]) == (422, 42201) and "subject 's' version 1" in body["message"]
    status, body = c.call("GET", "/subjects/p/versions/1?format=serialized")
    assert (status, body["error_code"]) == (422, 42201)
    assert "the stored PROTOBUF schema of subject 'p' version 1 (id 2) does not parse here" in body["message"]
    status, body = c.call("GET", "/schemas/ids/2?format=serialized")
    assert (status, body["error_code"]) == (422, 42201) and "schema id 2" in body["message"]
    assert c.call("PUT", "/config/s", {"compatibility": "NONE"})[0] == 200
    assert c.register("s", V1) == (200, {"id": 3}), "NONE compares with nothing: nothing to parse"
