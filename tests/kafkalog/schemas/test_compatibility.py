"""Compatibility levels applied as Confluent's registry applies them: the directions, the latest or
every previous schema, and the messages it adds around the format's findings."""

from __future__ import annotations

import json

import pytest

from kafkalog.schemas import avro, json_schema, protobuf
from kafkalog.schemas.compatibility import DIFFERENT_SCHEMA_TYPE, CompatibilityLevel, check


def _record(*fields: dict[str, object]) -> avro.AvroSchema:
    return avro.parse(json.dumps({"type": "record", "name": "Ev", "fields": list(fields)}))


V1 = _record({"name": "id", "type": "string"})
V2 = _record({"name": "id", "type": "string"}, {"name": "n", "type": "int", "default": 0})
V3 = _record({"name": "n", "type": "int", "default": 0})  # id removed
NO_DEFAULT = _record({"name": "id", "type": "string"}, {"name": "req", "type": "string"})

MISSING_REQ = (
    "{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'req' at path '/fields/1' in the new"
    " schema has no default value and is missing in the old schema', additionalInfo:'req'}"
)


def test_levels_by_name() -> None:
    assert CompatibilityLevel.of("full_transitive") is CompatibilityLevel.FULL_TRANSITIVE
    with pytest.raises(ValueError, match=r"Invalid compatibility level\. Valid values are none, backward"):
        CompatibilityLevel.of("sideways")
    assert CompatibilityLevel.FULL.backward and CompatibilityLevel.FULL.forward
    assert not CompatibilityLevel.FORWARD.backward and CompatibilityLevel.BACKWARD_TRANSITIVE.transitive


def test_backward_the_new_schema_reads_the_old_data() -> None:
    assert check(CompatibilityLevel.BACKWARD, V2, [V1]) == []
    assert check(CompatibilityLevel.BACKWARD, NO_DEFAULT, [V1], versions=[1]) == [
        MISSING_REQ,
        "{oldSchemaVersion: 1}",
        f"{{oldSchema: '{V1.canonical()}'}}",
    ]
    assert check(CompatibilityLevel.NONE, NO_DEFAULT, [V1]) == []
    assert check(CompatibilityLevel.BACKWARD, NO_DEFAULT, []) == []


def test_forward_the_old_schema_reads_the_new_data() -> None:
    # the old schema reads data without 'req' fine; NO_DEFAULT reading V1's data is what BACKWARD refuses
    assert check(CompatibilityLevel.FORWARD, NO_DEFAULT, [V1]) == []
    found = check(CompatibilityLevel.FORWARD, V1, [NO_DEFAULT])
    assert found == [
        "{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'req' at path '/fields/1' in the"
        " old schema has no default value and is missing in the new schema', additionalInfo:'req'}",
        f"{{oldSchema: '{NO_DEFAULT.canonical()}'}}",
    ]


def test_full_lists_forward_findings_then_backward_ones_with_the_old_schema() -> None:
    new = _record({"name": "id", "type": "int"})
    found = check(CompatibilityLevel.FULL, new, [V1], versions=[7])
    assert [m.split(",")[0] for m in found] == [
        "{errorType:'TYPE_MISMATCH'",
        "{errorType:'TYPE_MISMATCH'",
        "{oldSchemaVersion: 7}",
        f"{{oldSchema: '{V1.canonical()}'}}".split(",")[0],
    ]
    assert "in the old schema does not match with the new schema" in found[0]
    assert "in the new schema does not match with the old schema" in found[1]


def test_plain_levels_check_the_latest_and_transitive_ones_every_previous_newest_first() -> None:
    only_v2 = _record({"name": "n", "type": "int"})  # no default: V1 has no n
    assert check(CompatibilityLevel.BACKWARD, only_v2, [V1, V2]) == []
    found = check(CompatibilityLevel.BACKWARD_TRANSITIVE, only_v2, [V1, V2], versions=[1, 2])
    assert found[-2:] == ["{oldSchemaVersion: 1}", f"{{oldSchema: '{V1.canonical()}'}}"]
    # the first incompatible one, newest first, is the one reported
    breaks_both = _record({"name": "other", "type": "int"})
    found = check(CompatibilityLevel.BACKWARD_TRANSITIVE, breaks_both, [V1, V2], versions=[1, 2])
    assert "{oldSchemaVersion: 2}" in found and "{oldSchemaVersion: 1}" not in found
    assert check(CompatibilityLevel.BACKWARD_TRANSITIVE, V3, [V1, V2]) == []  # a field removed, one defaulted
    assert check(CompatibilityLevel.FULL_TRANSITIVE, V3, [V1, V2])[0].startswith(
        "{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'id'"
    )  # the old schemas cannot read data without the field they require


def test_a_previous_schema_of_another_type() -> None:
    other = json_schema.parse('{"type": "object"}')
    assert check(CompatibilityLevel.BACKWARD, V1, [other]) == [DIFFERENT_SCHEMA_TYPE]


def test_every_format_is_dispatched() -> None:
    old = protobuf.parse('syntax = "proto3";\nmessage M { string s = 1; }\n')
    new = protobuf.parse('syntax = "proto3";\nmessage M { int32 s = 1; }\n')
    found = check(CompatibilityLevel.BACKWARD, new, [old])
    assert found[0].startswith('{errorType:"FIELD_SCALAR_KIND_CHANGED"')
    assert found[-1] == f"{{oldSchema: '{old.canonical()}'}}"
    j1 = json_schema.parse('{"type": "string"}')
    j2 = json_schema.parse('{"type": "integer"}')
    assert check(CompatibilityLevel.FORWARD, j2, [j1])[0].startswith('{errorType:"TYPE_CHANGED"')


def test_a_long_old_schema_is_cut_in_the_message() -> None:
    fields = [{"name": f"f{i}", "type": "string", "doc": "x" * 100} for i in range(150)]
    big = avro.parse(json.dumps({"type": "record", "name": "Ev", "fields": fields}))
    found = check(CompatibilityLevel.BACKWARD, _record({"name": "z", "type": "int"}), [big])
    assert found[-1].startswith("{oldSchema: <truncated> '")
    assert found[-1].endswith("...'}")
    assert len(found[-1]) < 10 * 1024 + 40
