"""The ``_schemas`` records: keys byte for byte as Confluent's registry writes them (compaction keys
on the bytes), values read back, and records of other writers (Confluent 8's fields, kinds this
registry does not keep, garbage) read without failing."""

from __future__ import annotations

import json

from kafkalog.schema_registry import records
from kafkalog.schema_registry.records import SchemaValue
from kafkalog.schemas.model import SchemaReference, SchemaType


def test_keys_are_confluents_bytes() -> None:
    assert records.schema_key("t-value", 1) == b'{"keytype":"SCHEMA","subject":"t-value","version":1,"magic":1}'
    assert records.config_key(None) == b'{"keytype":"CONFIG","subject":null,"magic":0}'
    assert records.config_key("t-value") == b'{"keytype":"CONFIG","subject":"t-value","magic":0}'
    assert records.mode_key("s") == b'{"keytype":"MODE","subject":"s","magic":0}'
    assert records.delete_subject_key("s") == b'{"keytype":"DELETE_SUBJECT","subject":"s","magic":0}'
    assert records.noop_key() == b'{"keytype":"NOOP","magic":0}'
    assert records.schema_key("é", 2) == '{"keytype":"SCHEMA","subject":"é","version":2,"magic":1}'.encode()


def test_schema_values_round_trip() -> None:
    plain = SchemaValue("s", 1, 7, '{"type":"string"}')
    assert plain.encode() == b'{"subject":"s","version":1,"id":7,"schema":"{\\"type\\":\\"string\\"}","deleted":false}'
    typed = SchemaValue("p", 2, 8, "syntax", SchemaType.PROTOBUF, (SchemaReference("a.proto", "a", 1),), deleted=True)
    assert json.loads(typed.encode()) == {
        "subject": "p", "version": 2, "id": 8, "schema": "syntax", "schemaType": "PROTOBUF",
        "references": [{"name": "a.proto", "subject": "a", "version": 1}], "deleted": True,
    }  # fmt: skip
    for value in (plain, typed):
        decoded = records.decode(records.schema_key(value.subject, value.version), value.encode())
        assert decoded == records.SchemaRecord(value.subject, value.version, value)


def test_other_writers_records_are_read_or_skipped_without_failing() -> None:
    confluent8 = (
        b'{"subject":"s","version":1,"id":3,"md5":"abc","schema":"\\"int\\"","schemaType":"AVRO",'
        b'"metadata":null,"ruleSet":null,"guid":"x","ts":1,"deleted":false}'
    )
    decoded = records.decode(b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":0}', confluent8)
    assert decoded == records.SchemaRecord("s", 1, SchemaValue("s", 1, 3, '"int"'))
    assert records.decode(records.schema_key("s", 1), None) == records.SchemaRecord("s", 1, None)
    assert records.decode(records.config_key(None), b'{"compatibilityLevel":"FULL","normalize":true}') == (
        records.ConfigRecord(None, "FULL")
    )
    assert records.decode(records.config_key("s"), None) == records.ConfigRecord("s", None)
    assert records.decode(records.delete_subject_key("s"), b'{"subject":"s","version":4}') == (
        records.DeleteSubjectRecord("s", 4)
    )
    assert records.decode(records.noop_key(), None) == records.Ignored("NOOP")
    assert records.decode(b'{"keytype":"CONTEXT","tenant":"t","context":"c","magic":0}', b"{}") == (
        records.Ignored("CONTEXT")
    )
    for key, value in [
        (None, b"{}"),
        (b"not json", b"{}"),
        (b'{"magic":0}', b"{}"),
        (b"[1]", None),
        (records.schema_key("s", 1), b"[]"),
        (records.schema_key("s", 1), b'{"subject":"s","version":1,"schema":"x"}'),
        (records.schema_key("s", 1), b'{"subject":"s","version":1,"id":true,"schema":"x"}'),
        (records.schema_key("s", 1), b'{"subject":"s","version":1,"id":1,"schema":"x","schemaType":"XML"}'),
        (b'{"keytype":"SCHEMA","subject":"s","version":"1","magic":1}', None),
        (records.config_key(None), b'{"compatibilityLevel":7}'),
    ]:
        assert isinstance(records.decode(key, value), records.UnreadableRecord), (key, value)


def test_hostile_records_are_unreadable_never_an_exception() -> None:
    """Anyone who can produce to the topic can write these: a reader that raised on one would stop for
    good (and a compacted topic keeps the record, so every restart would stop on it again)."""
    value = b'{"subject":"a","version":1,"id":1,"schema":"x","schemaType":5}'
    for key, value_ in [
        (b"[" * 5000, None),  # json's RecursionError
        (records.schema_key("a", 1), b"[" * 5000),
        (records.schema_key("a", 1), b'{"subject":"a","version":1,"id":1,"schema":"x","references":' + b"[" * 5000),
        (records.schema_key("a", 1), value),  # a schemaType that is not a string
        (records.schema_key("a", 1), b'{"subject":"a","version":1,"id":1,"schema":"x","schemaType":["AVRO"]}'),
        (records.schema_key("a", 1), b'{"subject":"a","version":1,"id":1,"schema":"x","references":[{"name":1}]}'),
    ]:
        assert isinstance(records.decode(key, value_), records.UnreadableRecord), (key[:40], value_[:80])


def test_ids_and_versions_outside_a_java_int_are_unreadable() -> None:
    """One record with id 2^31 would make every later registration find no id left."""

    def value(version: int, schema_id: int) -> bytes:
        return json.dumps({"subject": "a", "version": version, "id": schema_id, "schema": "x"}).encode()

    top = 2**31 - 1
    assert records.decode(records.schema_key("a", top), value(top, top)) == records.SchemaRecord(
        "a", top, SchemaValue("a", top, top, "x")
    )
    for version, schema_id in [(1, 2**31), (1, 0), (1, -1), (2**31, 1), (0, 1), (1, 10**30)]:
        decoded = records.decode(records.schema_key("a", version), value(version, schema_id))
        assert isinstance(decoded, records.UnreadableRecord), (version, schema_id)
    assert isinstance(records.decode(records.schema_key("a", 2**31), None), records.UnreadableRecord)
