"""Protobuf compatibility: Confluent's registry's rules, a structural diff of two schemas.

The writer's schema (the "original") is compared with the reader's (the "update"), as Confluent's
``SchemaDiff`` compares a previous schema with the one that would read its data. Fields are matched
by number; messages and enums by name at each level. Only the incompatible differences are reported
(the compatible ones, such as a message, field, enum or oneof added or removed, a field renamed, an
enum constant changed, a string/bytes label changed, a oneof member moved to the top level, change
nothing); they are:
- PACKAGE_CHANGED; MESSAGE_REMOVED (a map's entry is no message);
- REQUIRED_FIELD_ADDED, REQUIRED_FIELD_REMOVED (proto2);
- FIELD_KIND_CHANGED between a scalar (an enum counts as one), a message and a map;
- FIELD_SCALAR_KIND_CHANGED across the groups a scalar may change within: {int32, int64, uint32,
  uint64, bool, enums}, {sint32, sint64}, {string, bytes}, {fixed32, sfixed32}, {fixed64,
  sfixed64}, {float}, {double};
- FIELD_NUMERIC_LABEL_CHANGED: a numeric field's label changed where both fields have one
  (``optional``/``repeated``/``required``; a proto3 field written without one has none);
- FIELD_NAMED_TYPE_CHANGED: a message field's type is another message (by its name within its
  package), or a message of another version of a referenced schema that is itself incompatible;
- ONEOF_FIELD_REMOVED (unless the whole oneof went), MULTIPLE_FIELDS_MOVED_TO_ONEOF,
  FIELD_MOVED_TO_EXISTING_ONEOF: fields that were independent made mutually exclusive.
Paths are Confluent's: ``#/`` then the message names, a oneof's name, a field's number.

A message of a referenced schema is compared once per pair of descriptors (met again along another
path, it gives the first result again), and at most :data:`MAX_FINDINGS` findings are kept for it
and reported: messages that hold the next one twice, a chain of them, would otherwise cost
exponential time. A chain of message types through references too deep to compare is refused with
:class:`~kafkalog.schemas.errors.InvalidSchemaError`.

Each finding is worded ``{errorType:"<TYPE>", description:"<text>"}`` with Confluent's text, "new"
and "old" filled in by the roles given.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

from google.protobuf.descriptor_pb2 import (
    DescriptorProto,
    EnumDescriptorProto,
    FieldDescriptorProto,
)

from kafkalog.schemas.errors import InvalidSchemaError
from kafkalog.schemas.protobuf import ProtobufSchema

MAX_FINDINGS: Final = 100

_GROUPS: Final = {
    FieldDescriptorProto.TYPE_INT32: "GENERAL_NUMBER",
    FieldDescriptorProto.TYPE_INT64: "GENERAL_NUMBER",
    FieldDescriptorProto.TYPE_UINT32: "GENERAL_NUMBER",
    FieldDescriptorProto.TYPE_UINT64: "GENERAL_NUMBER",
    FieldDescriptorProto.TYPE_BOOL: "GENERAL_NUMBER",
    FieldDescriptorProto.TYPE_ENUM: "GENERAL_NUMBER",
    FieldDescriptorProto.TYPE_SINT32: "SIGNED_NUMBER",
    FieldDescriptorProto.TYPE_SINT64: "SIGNED_NUMBER",
    FieldDescriptorProto.TYPE_STRING: "STRING_OR_BYTES",
    FieldDescriptorProto.TYPE_BYTES: "STRING_OR_BYTES",
    FieldDescriptorProto.TYPE_FIXED32: "FIXED32",
    FieldDescriptorProto.TYPE_SFIXED32: "FIXED32",
    FieldDescriptorProto.TYPE_FIXED64: "FIXED64",
    FieldDescriptorProto.TYPE_SFIXED64: "FIXED64",
    FieldDescriptorProto.TYPE_FLOAT: "FLOAT",
    FieldDescriptorProto.TYPE_DOUBLE: "DOUBLE",
}

_DESCRIPTIONS: Final = {
    "PACKAGE_CHANGED": "The package at '{path}' in the {0} schema does not match the package in the {1} schema",
    "MESSAGE_REMOVED": "The {0} schema is missing a MESSAGE type at path '{path}' in the {1} schema",
    "FIELD_KIND_CHANGED": "The type of a field at path '{path}' in the {0} schema does not match the {1} schema",
    "FIELD_SCALAR_KIND_CHANGED": (
        "The kind of a SCALAR field at path '{path}' in the {0} schema does not match its kind in the {1} schema"
    ),
    "FIELD_NAMED_TYPE_CHANGED": (
        "The type of a MESSAGE field at path '{path}' in the {0} schema does not match its type in the {1} schema"
    ),
    "FIELD_NUMERIC_LABEL_CHANGED": (
        "The label for a NUMERIC field at path '{path}' in the {0} schema does not match its label in the {1} schema"
    ),
    "REQUIRED_FIELD_ADDED": "A required field  at path '{path}' in the {0} schema is missing in the {1} schema",
    "REQUIRED_FIELD_REMOVED": "The {0} schema is missing a required field at path: '{path}' in the {1} schema",
    "ONEOF_FIELD_REMOVED": "The {0} schema is missing a oneof field at path '{path}' in the {1} schema",
    "MULTIPLE_FIELDS_MOVED_TO_ONEOF": (
        "Multiple fields in the oneof at path '{path}' in the {0} schema are outside a oneof in the {1} schema"
    ),
    "FIELD_MOVED_TO_EXISTING_ONEOF": (
        "A field in the oneof at path '{path}' in the {0} schema is outside an existing oneof in the {1} schema"
    ),
}


@dataclass(frozen=True)
class Difference:
    """One incompatible difference: its Confluent type and path."""

    kind: str
    path: str

    def describe(self, reader: str = "new", writer: str = "old") -> str:
        text = _DESCRIPTIONS[self.kind].format(reader, writer, path=self.path)
        return f'{{errorType:"{self.kind}", description:"{text}"}}'


def check(reader: ProtobufSchema, writer: ProtobufSchema) -> list[Difference]:
    """The incompatible differences between ``writer`` (the original) and ``reader`` (the update)."""
    context = _Context(_Types(writer), _Types(reader), {})
    if writer.package != reader.package:
        context.add("PACKAGE_CHANGED", [])
    try:
        context.types(writer.file.message_type, reader.file.message_type, [])
    except RecursionError:  # message types through references nest as deep as the chain is long
        raise InvalidSchemaError("the schemas' message types are nested too deeply to be compared") from None
    return context.found[:MAX_FINDINGS]


def incompatibilities(
    reader: ProtobufSchema, writer: ProtobufSchema, *, reader_is: str = "new", writer_is: str = "old"
) -> list[str]:
    """:func:`check`, worded as Confluent's registry words it."""
    return [d.describe(reader_is, writer_is) for d in check(reader, writer)]


@dataclass(frozen=True)
class _TypeInfo:
    package: str
    message: DescriptorProto | None  # None: an enum
    is_map: bool
    origin: tuple[str, int] | None  # the referenced schema it comes from, ("", -1) for the schema's own


class _Types:
    """Every message and enum a schema can name (its own and its imports'), by full name."""

    def __init__(self, schema: ProtobufSchema) -> None:
        self.by_name: dict[str, _TypeInfo] = {}
        self.syntax = schema.syntax
        declared = {ref.name: (ref.subject, ref.version) for ref in schema.references}
        for file in (*schema.dependencies, schema.file):
            origin = ("", -1) if file is schema.file else declared.get(file.name)
            self._collect(file.package, file.package, file.message_type, file.enum_type, origin)

    def _collect(
        self,
        package: str,
        prefix: str,
        messages: Sequence[DescriptorProto],
        enums: Sequence[EnumDescriptorProto],
        origin: tuple[str, int] | None,
    ) -> None:
        for enum in enums:
            self.by_name[_join(prefix, enum.name)] = _TypeInfo(package, None, False, origin)
        for message in messages:
            full = _join(prefix, message.name)
            self.by_name[full] = _TypeInfo(package, message, message.options.map_entry, origin)
            self._collect(package, full, message.nested_type, message.enum_type, origin)

    def get(self, type_name: str) -> _TypeInfo | None:
        return self.by_name.get(type_name.lstrip("."))


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _messages(messages: Sequence[DescriptorProto]) -> Iterator[DescriptorProto]:
    return (m for m in messages if not m.options.map_entry)


class _Context:
    def __init__(
        self,
        original: _Types,
        update: _Types,
        memo: dict[tuple[int, int], list[Difference]],
        in_scope: frozenset[str] = frozenset(),
    ) -> None:
        self.original = original
        self.update = update
        self.found: list[Difference] = []
        self.in_scope = set(in_scope)  # original messages being compared (recursion guard)
        self.memo = memo  # (original, update) message descriptors -> their findings

    def add(self, kind: str, path: Sequence[str]) -> None:
        self.found.append(Difference(kind, "#/" + "/".join(path)))

    def types(
        self,
        original: Sequence[DescriptorProto],
        update: Sequence[DescriptorProto],
        path: list[str],
    ) -> None:
        """Compare the messages declared at one level (enums change nothing incompatible)."""
        updated = {m.name: m for m in _messages(update)}
        for message in _messages(original):
            counterpart = updated.get(message.name)
            if counterpart is None:
                self.add("MESSAGE_REMOVED", [*path, message.name])
            else:
                self.message(message, counterpart, [*path, message.name])

    def message(self, original: DescriptorProto, update: DescriptorProto, path: list[str]) -> None:
        key = "/".join(path) + "@" + original.name
        if key not in self.in_scope:
            self.in_scope.add(key)
            try:
                self.fields(original, update, path)
            finally:
                self.in_scope.discard(key)
        self.types(original.nested_type, update.nested_type, path)

    def fields(self, original: DescriptorProto, update: DescriptorProto, path: list[str]) -> None:
        old_by_tag, old_oneof_of, old_oneofs = _fields(original)
        new_by_tag, new_oneof_of, new_oneofs = _fields(update)
        deleted_oneofs = {
            name
            for name, members in old_oneofs.items()
            if name not in new_oneofs and not any(tag in new_by_tag for tag in members)
        }
        for name, members in new_oneofs.items():
            origins: set[str] = set()
            moved_in = 0
            for tag in members:
                if tag in old_oneof_of:
                    origins.add("oneof:" + old_oneof_of[tag])
                elif tag in old_by_tag:
                    origins.add(f"field:{tag}")
                    moved_in += 1
            if len(origins) > 1:
                self.add(
                    "MULTIPLE_FIELDS_MOVED_TO_ONEOF" if moved_in > 1 else "FIELD_MOVED_TO_EXISTING_ONEOF", [*path, name]
                )
        for tag in sorted(old_by_tag.keys() | new_by_tag.keys()):
            old, new = old_by_tag.get(tag), new_by_tag.get(tag)
            if new is None:
                assert old is not None
                if tag in old_oneof_of:
                    if old_oneof_of[tag] not in deleted_oneofs:
                        self.add("ONEOF_FIELD_REMOVED", [*path, old_oneof_of[tag], str(tag)])
                elif old.label == FieldDescriptorProto.LABEL_REQUIRED:
                    self.add("REQUIRED_FIELD_REMOVED", [*path, str(tag)])
            elif old is None:
                if tag not in new_oneof_of and new.label == FieldDescriptorProto.LABEL_REQUIRED:
                    self.add("REQUIRED_FIELD_ADDED", [*path, str(tag)])
            else:
                where = [*path, new_oneof_of[tag], str(tag)] if tag in new_oneof_of else [*path, str(tag)]
                self.field(old, new, where, tag in old_oneof_of, tag in new_oneof_of)

    def field(
        self,
        old: FieldDescriptorProto,
        new: FieldDescriptorProto,
        path: list[str],
        old_in_oneof: bool,
        new_in_oneof: bool,
    ) -> None:
        self.labels_and_types(
            _label(old, self.original, old_in_oneof), _label(new, self.update, new_in_oneof), old, new, path
        )

    def labels_and_types(
        self,
        old_label: str | None,
        new_label: str | None,
        old: FieldDescriptorProto,
        new: FieldDescriptorProto,
        path: list[str],
    ) -> None:
        old_kind, new_kind = self.kind(old, self.original), self.kind(new, self.update)
        if old_kind != new_kind:
            self.add("FIELD_KIND_CHANGED", path)
        elif old_kind == "SCALAR":
            if _GROUPS[old.type] != _GROUPS[new.type]:
                self.add("FIELD_SCALAR_KIND_CHANGED", path)
            elif (
                old_label is not None
                and new_label is not None
                and old_label != new_label
                and _GROUPS[old.type] != "STRING_OR_BYTES"
            ):
                self.add("FIELD_NUMERIC_LABEL_CHANGED", path)
        elif old_kind == "MESSAGE":
            self.message_types(old.type_name, new.type_name, path)
        else:  # MAP: the key and the value, as fields without labels
            old_entry, new_entry = self.original.get(old.type_name), self.update.get(new.type_name)
            assert old_entry is not None and old_entry.message is not None
            assert new_entry is not None and new_entry.message is not None
            for i in (0, 1):
                self.labels_and_types(None, None, old_entry.message.field[i], new_entry.message.field[i], path)

    def kind(self, fd: FieldDescriptorProto, types: _Types) -> str:
        if fd.type in _GROUPS:
            return "SCALAR"
        info = types.get(fd.type_name)
        if info is not None and info.is_map and fd.label == FieldDescriptorProto.LABEL_REPEATED:
            return "MAP"
        return "MESSAGE"

    def message_types(self, old_name: str, new_name: str, path: list[str]) -> None:
        old, new = self.original.get(old_name), self.update.get(new_name)
        if old is None or new is None or old.message is None or new.message is None:
            if old_name != new_name:
                self.add("FIELD_NAMED_TYPE_CHANGED", path)
            return
        old_local = _local(old_name.lstrip("."), old.package)
        new_local = _local(new_name.lstrip("."), new.package)
        if old_local != new_local:
            self.add("FIELD_NAMED_TYPE_CHANGED", path)
            return
        if old.origin is not None and new.origin is not None and old.origin == new.origin:
            return  # the schema's own message (compared where it is declared), or one referenced version
        key = (id(old.message), id(new.message))
        found = self.memo.get(key)
        if found is None:
            sub = _Context(self.original, self.update, self.memo, frozenset(self.in_scope))
            sub.message(old.message, new.message, old_local.split("."))
            found = self.memo[key] = sub.found[:MAX_FINDINGS]
        self.found += found
        if found:
            self.add("FIELD_NAMED_TYPE_CHANGED", path)


def _local(full_name: str, package: str) -> str:
    return full_name[len(package) + 1 :] if package and full_name.startswith(package + ".") else full_name


def _fields(
    message: DescriptorProto,
) -> tuple[dict[int, FieldDescriptorProto], dict[int, str], dict[str, list[int]]]:
    """A message's fields by number, the oneof of each member, and each oneof's members (the
    synthetic oneof of a proto3 ``optional`` field is no oneof)."""
    by_tag: dict[int, FieldDescriptorProto] = {}
    oneof_of: dict[int, str] = {}
    oneofs: dict[str, list[int]] = {}
    for fd in message.field:
        by_tag[fd.number] = fd
        if fd.HasField("oneof_index") and not fd.proto3_optional:
            name = message.oneof_decl[fd.oneof_index].name
            oneof_of[fd.number] = name
            oneofs.setdefault(name, []).append(fd.number)
    return by_tag, oneof_of, oneofs


def _label(fd: FieldDescriptorProto, types: _Types, in_oneof: bool) -> str | None:
    """The label a field is written with (None where it has none: a proto3 field without one, a
    oneof member, a map)."""
    if in_oneof:
        return None
    if fd.label == FieldDescriptorProto.LABEL_REPEATED:
        info = types.get(fd.type_name) if fd.type == FieldDescriptorProto.TYPE_MESSAGE else None
        return None if info is not None and info.is_map else "REPEATED"
    if fd.label == FieldDescriptorProto.LABEL_REQUIRED:
        return "REQUIRED"
    # the schema's own syntax decides, for the fields of messages it imports too (close enough: the
    # label only matters between two numeric fields of one message)
    return "OPTIONAL" if fd.proto3_optional or types.syntax != "proto3" else None
