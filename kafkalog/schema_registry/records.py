"""The records of the ``_schemas`` topic: keys and values in Confluent's JSON, byte for byte.

A compacted topic keeps one record per key, so a key must be written with exactly the bytes every
other implementation (Confluent's registry, Karapace) writes for it: its fields in Confluent's order
(``keytype``, ``subject``, ``version``, ``magic``), compact JSON, no spaces. Otherwise two writers'
records for one key would both survive compaction. Values are compact JSON too; their field order
matters to no reader.

Kinds of record (``keytype``):
- SCHEMA ``{"keytype":"SCHEMA","subject":s,"version":v,"magic":1}``: a version of a subject,
  value ``{"subject","version","id","schema","schemaType"?,"references"?,"deleted"}`` (``schemaType``
  left out for Avro, ``references`` when there are none); a soft delete rewrites it with
  ``"deleted":true``, a hard delete is its tombstone;
- CONFIG ``{"keytype":"CONFIG","subject":s|null,"magic":0}``: a compatibility level, value
  ``{"compatibilityLevel":...}`` (null subject: the global one); a tombstone removes it;
- MODE ``{"keytype":"MODE","subject":s|null,"magic":0}``: value ``{"subject":s,"mode":...}``;
- DELETE_SUBJECT ``{"keytype":"DELETE_SUBJECT","subject":s,"magic":0}``: value
  ``{"subject":s,"version":n}``: the subject's versions up to n are soft deleted;
- CLEAR_SUBJECT (Confluent 8): value ``{"subject":s}``: tolerated, read as nothing to do;
- NOOP ``{"keytype":"NOOP","magic":0}``, no value: written by Confluent's registry to learn the
  topic's end; read as nothing to do. Other kinds (Confluent's contexts, associations) are
  skipped too, so a topic another registry shares never stops this one.

Decoding is strict about what it uses and lenient about the rest: a record it cannot read is
reported (:class:`UnreadableRecord`) and skipped by the state, never fatal.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from kafkalog.schemas.model import SchemaReference, SchemaType

SCHEMA: Final = "SCHEMA"
CONFIG: Final = "CONFIG"
MODE: Final = "MODE"
DELETE_SUBJECT: Final = "DELETE_SUBJECT"
CLEAR_SUBJECT: Final = "CLEAR_SUBJECT"
NOOP: Final = "NOOP"


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def schema_key(subject: str, version: int) -> bytes:
    return _dumps({"keytype": SCHEMA, "subject": subject, "version": version, "magic": 1})


def config_key(subject: str | None) -> bytes:
    return _dumps({"keytype": CONFIG, "subject": subject, "magic": 0})


def mode_key(subject: str | None) -> bytes:
    return _dumps({"keytype": MODE, "subject": subject, "magic": 0})


def delete_subject_key(subject: str) -> bytes:
    return _dumps({"keytype": DELETE_SUBJECT, "subject": subject, "magic": 0})


def noop_key() -> bytes:
    return _dumps({"keytype": NOOP, "magic": 0})


@dataclass(frozen=True, slots=True)
class SchemaValue:
    """One version of a subject as the topic holds it."""

    subject: str
    version: int
    schema_id: int
    schema: str
    schema_type: SchemaType = SchemaType.AVRO
    references: tuple[SchemaReference, ...] = ()
    deleted: bool = False

    def encode(self) -> bytes:
        value: dict[str, Any] = {
            "subject": self.subject,
            "version": self.version,
            "id": self.schema_id,
            "schema": self.schema,
        }
        if self.schema_type is not SchemaType.AVRO:
            value["schemaType"] = self.schema_type.value
        if self.references:
            value["references"] = [reference_json(r) for r in self.references]
        value["deleted"] = self.deleted
        return _dumps(value)


def reference_json(reference: SchemaReference) -> dict[str, Any]:
    return {"name": reference.name, "subject": reference.subject, "version": reference.version}


def config_value(level: str) -> bytes:
    return _dumps({"compatibilityLevel": level})


def mode_value(subject: str | None, mode: str) -> bytes:
    return _dumps({"subject": subject, "mode": mode})


def delete_subject_value(subject: str, version: int) -> bytes:
    return _dumps({"subject": subject, "version": version})


# ---------------------------------------------------------------------------------------- reading


@dataclass(frozen=True, slots=True)
class SchemaRecord:
    subject: str
    version: int
    value: SchemaValue | None
    """None: a tombstone (the version is deleted for good)."""


@dataclass(frozen=True, slots=True)
class ConfigRecord:
    subject: str | None
    level: str | None
    """None: a tombstone (the subject's level, or the global one, is removed)."""


@dataclass(frozen=True, slots=True)
class ModeRecord:
    subject: str | None
    mode: str | None


@dataclass(frozen=True, slots=True)
class DeleteSubjectRecord:
    subject: str
    version: int


@dataclass(frozen=True, slots=True)
class Ignored:
    """A record that changes nothing here (NOOP, CLEAR_SUBJECT, a kind this registry does not keep)."""

    keytype: str


@dataclass(frozen=True, slots=True)
class UnreadableRecord:
    """A record whose key or value is not what its kind holds; ``reason`` names the first cause."""

    reason: str


Record = SchemaRecord | ConfigRecord | ModeRecord | DeleteSubjectRecord | Ignored | UnreadableRecord


def decode(key: bytes | None, value: bytes | None) -> Record:
    """The record a (key, value) of the topic holds."""
    if key is None:
        return UnreadableRecord("a record without a key")
    try:
        k = json.loads(key)
        v = None if value is None else json.loads(value)
    except (ValueError, UnicodeDecodeError) as e:
        return UnreadableRecord(f"not JSON: {e}")
    except RecursionError:
        return UnreadableRecord("not JSON: nested too deeply")
    if not isinstance(k, dict) or not isinstance(k.get("keytype"), str):
        return UnreadableRecord("a key without a keytype")
    keytype = k["keytype"]
    if v is not None and not isinstance(v, dict):
        return UnreadableRecord(f"a {keytype} value that is not a JSON object")
    try:
        return _decode(keytype, k, v)
    except (KeyError, TypeError, ValueError) as e:
        return UnreadableRecord(f"a {keytype} record without a valid {e}")
    except Exception as e:  # any record of the topic is untrusted: it must never stop the reader
        return UnreadableRecord(f"a {keytype} record that cannot be read: {type(e).__name__}: {e}")


def _decode(keytype: str, key: dict[str, Any], value: dict[str, Any] | None) -> Record:
    if keytype == SCHEMA:
        subject, version = _str(key, "subject"), _number(key, "version")
        if value is None:
            return SchemaRecord(subject, version, None)
        schema_type = SchemaType.of(value.get("schemaType"))
        references = tuple(
            SchemaReference(_str(r, "name"), _str(r, "subject"), _int(r, "version"))
            for r in _list(value.get("references"))
        )
        schema = SchemaValue(
            _str(value, "subject"), _number(value, "version"), _number(value, "id"), _str(value, "schema"),
            schema_type, references, value.get("deleted") is True,
        )  # fmt: skip
        return SchemaRecord(subject, version, schema)
    if keytype == CONFIG:
        return ConfigRecord(_optional_str(key, "subject"), None if value is None else _str(value, "compatibilityLevel"))
    if keytype == MODE:
        return ModeRecord(_optional_str(key, "subject"), None if value is None else _str(value, "mode"))
    if keytype == DELETE_SUBJECT:
        if value is None:
            return Ignored(keytype)
        return DeleteSubjectRecord(_str(key, "subject"), _int(value, "version"))
    return Ignored(keytype)


def _str(d: dict[str, Any], name: str) -> str:
    value = d[name]
    if not isinstance(value, str):
        raise TypeError(name)
    return value


def _optional_str(d: dict[str, Any], name: str) -> str | None:
    value = d.get(name)
    if value is not None and not isinstance(value, str):
        raise TypeError(name)
    return value


def _int(d: dict[str, Any], name: str) -> int:
    value = d[name]
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(name)
    return value


MAX_NUMBER: Final = 2**31 - 1
"""The largest schema id or version (a Java int, as Confluent's registry and the wire format's 4 bytes hold)."""


def _number(d: dict[str, Any], name: str) -> int:
    """A schema id or version: 1 to 2^31-1 (one past it would stop every later registration)."""
    value = _int(d, name)
    if not 1 <= value <= MAX_NUMBER:
        raise ValueError(f"{name} (out of 1..{MAX_NUMBER}: {value})")
    return value


def _list(value: Any) -> Sequence[dict[str, Any]]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(r, dict) for r in value):
        raise TypeError("references")
    return value
