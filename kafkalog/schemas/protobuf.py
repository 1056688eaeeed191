"""Protobuf schemas: ``.proto`` text (or a base64 FileDescriptorProto) to file descriptors, and back.

A schema arrives as ``.proto`` text (what Java serializers register) or as base64 of a serialized
``FileDescriptorProto`` (what confluent-kafka's Python serializer registers). Either way
:func:`parse` compiles it with protoc, in-process (grpc_tools' compiler), in a temporary directory
of its own holding the schema and its references (each another file, named as it is imported; a
reference may itself be text or base64). What serializers import without registering it is found
here: the well-known types (``google/protobuf/*.proto``, grpc_tools' bundled copies), the common
Google types (``google/type/*.proto``, from googleapis-common-protos) and Confluent's
``confluent/meta.proto`` and ``confluent/type/decimal.proto`` (definitions of our own in
``_proto/``). A descriptor given in base64 is printed to text and compiled like any text (which
proves its names and types), then kept as given once a descriptor pool accepts it beside its
compiled imports, so that what its printed text leaves out (custom options defined in the imports)
is not lost.

The compiler's structured errors (file, line, column, message) become :class:`InvalidSchemaError`'s
message, worded as protoc prints them (``schema.proto:3:13: "strin" is not defined.``). grpc_tools'
``get_protos`` is used rather than its command line: it reports errors as values instead of on the
process's file descriptor 2 (which a threaded server cannot take over safely), and it returns each
file's serialized descriptor inside the Python module it generates for it (``AddSerializedFile``),
read here with :mod:`ast`. Calls are serialised by a lock: the compiler is not known to be
thread-safe.

The model, :class:`ProtobufSchema`, is the schema's ``FileDescriptorProto`` and those of every file
it imports. :meth:`ProtobufSchema.canonical` is a ``.proto`` text printed from the descriptor by
:func:`to_proto_text` (deterministic: the same descriptor, the same text; type names fully
qualified; custom options printed with the extensions the imports define; the descriptor's order
of nested messages kept, map entries included, as the message indexes count them),
:meth:`ProtobufSchema.serialized` the base64 descriptor (the registry's ``format=serialized``).
Messages are found by full name or by their message-index path (the Confluent wire format's
indexes: ``message_type[i0].nested_type[i1]...``).
"""

from __future__ import annotations

import ast
import atexit
import base64
import binascii
import contextvars
import importlib.util
import math
import re
import shutil
import struct
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format, unknown_fields
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.descriptor_pb2 import (
    DescriptorProto,
    EnumDescriptorProto,
    FieldDescriptorProto,
    FileDescriptorProto,
)
from google.protobuf.message import DecodeError

from kafkalog.schemas.errors import InvalidSchemaError
from kafkalog.schemas.model import SchemaReference, SchemaType, check_input

DEFAULT_FILE_NAME: Final = "schema.proto"
_REFERENCE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*(/[A-Za-z0-9_][A-Za-z0-9_.\-]*)*\.proto\Z")
_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]+\Z")
_COMPILER_LOCK = threading.Lock()

_SCALARS: Final = {
    FieldDescriptorProto.TYPE_DOUBLE: "double",
    FieldDescriptorProto.TYPE_FLOAT: "float",
    FieldDescriptorProto.TYPE_INT64: "int64",
    FieldDescriptorProto.TYPE_UINT64: "uint64",
    FieldDescriptorProto.TYPE_INT32: "int32",
    FieldDescriptorProto.TYPE_FIXED64: "fixed64",
    FieldDescriptorProto.TYPE_FIXED32: "fixed32",
    FieldDescriptorProto.TYPE_BOOL: "bool",
    FieldDescriptorProto.TYPE_STRING: "string",
    FieldDescriptorProto.TYPE_BYTES: "bytes",
    FieldDescriptorProto.TYPE_UINT32: "uint32",
    FieldDescriptorProto.TYPE_SFIXED32: "sfixed32",
    FieldDescriptorProto.TYPE_SFIXED64: "sfixed64",
    FieldDescriptorProto.TYPE_SINT32: "sint32",
    FieldDescriptorProto.TYPE_SINT64: "sint64",
}
_MAX_FIELD_NUMBER: Final = 536_870_911  # 2**29 - 1: a range's end past it is "max"


@dataclass(frozen=True, eq=False)
class ProtobufSchema:
    """A compiled Protobuf schema: ``file`` and ``dependencies`` (every file it imports, directly or
    not, each before the files importing it). Implements :class:`kafkalog.schemas.model.ParsedSchema`."""

    file: FileDescriptorProto
    dependencies: tuple[FileDescriptorProto, ...]
    text: str = field(repr=False)
    references: Sequence[SchemaReference] = ()
    schema_type: SchemaType = SchemaType.PROTOBUF

    @property
    def name(self) -> str | None:
        if not self.file.message_type:
            return None
        return _qualify(self.file.package, self.file.message_type[0].name)

    @property
    def package(self) -> str:
        return self.file.package

    @property
    def syntax(self) -> str:
        return self.file.syntax or "proto2"

    def canonical(self) -> str:
        return self.text

    def normalized(self) -> ProtobufSchema:
        return self  # the text is printed from the descriptor already: one form per schema

    def serialized(self) -> str:
        """The schema as base64 of its serialized FileDescriptorProto."""
        return base64.b64encode(self.file.SerializeToString(deterministic=True)).decode("ascii")

    def file_descriptor_set(self) -> descriptor_pb2.FileDescriptorSet:
        """The schema and its dependencies, each file after those it imports (a DescriptorPool takes
        them in this order)."""
        return descriptor_pb2.FileDescriptorSet(file=[*self.dependencies, self.file])

    def messages(self) -> Iterator[tuple[str, tuple[int, ...], DescriptorProto]]:
        """Every message of the schema's file (map entries included, as the descriptor holds them):
        its full name, its message-index path, and its descriptor; depth first, in order."""
        return _file_messages(self.file)

    def message_at(self, indexes: Sequence[int]) -> tuple[str, DescriptorProto]:
        """The message at a message-index path (``[]`` and ``[0]`` both the first message) and its
        full name; ``LookupError`` naming the path when there is none."""
        path = list(indexes) or [0]
        messages: Sequence[DescriptorProto] = self.file.message_type
        prefix = self.file.package
        message: DescriptorProto | None = None
        for depth, index in enumerate(path):
            if not 0 <= index < len(messages):
                raise LookupError(f"no message at index path {path} (level {depth} has {len(messages)} messages)")
            message = messages[index]
            prefix = _qualify(prefix, message.name)
            messages = message.nested_type
        assert message is not None
        return prefix, message

    def indexes_of(self, full_name: str) -> tuple[int, ...]:
        """The message-index path of the message named ``full_name`` (``LookupError`` if none)."""
        for name, path, _ in self.messages():
            if name == full_name.lstrip("."):
                return path
        raise LookupError(f"no message {full_name!r} in {self.file.name}")

    def message(self, full_name: str) -> DescriptorProto:
        """The descriptor of the message named ``full_name``, in the schema or a file it imports."""
        wanted = full_name.lstrip(".")
        for file in (self.file, *self.dependencies):
            for name, _, message in _file_messages(file):
                if name == wanted:
                    return message
        raise LookupError(f"no message {full_name!r} in {self.file.name} or its imports")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ProtobufSchema) and (self.text, tuple(self.references)) == (
            other.text,
            tuple(other.references),
        )

    def __hash__(self) -> int:
        return hash((self.text, tuple(self.references)))


def _file_messages(file: FileDescriptorProto) -> Iterator[tuple[str, tuple[int, ...], DescriptorProto]]:
    def walk(
        prefix: str, path: tuple[int, ...], messages: Sequence[DescriptorProto]
    ) -> Iterator[tuple[str, tuple[int, ...], DescriptorProto]]:
        for i, message in enumerate(messages):
            full = _qualify(prefix, message.name)
            yield full, (*path, i), message
            yield from walk(full, (*path, i), message.nested_type)

    return walk(file.package, (), file.message_type)


def _qualify(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def parse(
    text: str,
    references: Mapping[str, str] | None = None,
    *,
    declared: Sequence[SchemaReference] = (),
) -> ProtobufSchema:
    """Compile ``text`` (``.proto`` text or a base64 FileDescriptorProto), its imports found in
    ``references`` (import path -> text or base64) or among the well-known types. Raises
    :class:`InvalidSchemaError` with protoc's first errors."""
    check_input(text, references)
    files: dict[str, str] = {}
    given: dict[str, FileDescriptorProto] = {}  # the files given as descriptors, by import name
    for name, ref_text in (references or {}).items():
        _check_file_name(name, "reference name")
        descriptor, files[name] = _as_text(ref_text, f"reference {name!r}")
        if descriptor is not None:
            given[name] = descriptor
    if not text.strip():
        raise InvalidSchemaError("empty schema")
    descriptor, source = _as_text(text, "schema")
    name = (descriptor.name if descriptor is not None else "") or DEFAULT_FILE_NAME
    # the name becomes a file in the compiler's directory: a path out of it is refused, not written
    _check_file_name(name, "file name of the descriptor")
    if name in files:
        name = next(f"schema_{i}.proto" for i in range(1, len(files) + 2) if f"schema_{i}.proto" not in files)
    files[name] = source
    if descriptor is not None:
        given[name] = descriptor
    compiled = _with_given(_compile(name, files), given)
    main, dependencies = compiled[-1], tuple(compiled[:-1])
    return ProtobufSchema(main, dependencies, _printed(main, dependencies, "schema"), tuple(declared))


def _check_file_name(name: str, what: str) -> None:
    if not _REFERENCE_NAME.match(name) or ".." in name.split("/"):
        raise InvalidSchemaError(f"invalid {what} {name!r}: a relative path ending in .proto")


def _printed(file: FileDescriptorProto, dependencies: Sequence[FileDescriptorProto], what: str) -> str:
    """:func:`to_proto_text`, a descriptor it cannot print (one given in base64 need not be what
    protoc makes) refused with :class:`InvalidSchemaError`."""
    try:
        return to_proto_text(file, dependencies)
    except InvalidSchemaError as e:
        raise InvalidSchemaError(f"{what}: {e}") from None
    except (KeyError, ValueError, IndexError, TypeError, AttributeError, DecodeError, UnicodeError) as e:
        raise InvalidSchemaError(f"{what}: a FileDescriptorProto that cannot be printed: {e!r}") from None


def _with_given(
    compiled: list[FileDescriptorProto], given: Mapping[str, FileDescriptorProto]
) -> list[FileDescriptorProto]:
    """``compiled``, each file that was given as a descriptor taken as given (named as imported).

    A descriptor is compiled from its printed text, which proves its names and types; the printed
    text may leave out what needs more than the descriptor to print (custom options, whose
    extensions are defined in its imports), so the descriptor itself is what is kept, once a
    descriptor pool has accepted it beside its compiled imports.
    """
    if not given:
        return compiled
    files = []
    for file in compiled:
        kept = file
        if file.name in given:
            kept = FileDescriptorProto()
            kept.CopyFrom(given[file.name])
            kept.name = file.name
        files.append(kept)
    pool = descriptor_pool.DescriptorPool()
    try:
        for file in files:
            pool.Add(file)
    except (TypeError, ValueError) as e:
        raise InvalidSchemaError(f"a descriptor that does not build: {e}") from None
    return files


def _as_text(text: str, what: str) -> tuple[FileDescriptorProto | None, str]:
    """``text`` as ``.proto`` text, and the descriptor when it was given as one (base64)."""
    stripped = text.strip()
    if not stripped or not _BASE64.match(stripped):
        return None, text
    try:
        raw = base64.b64decode(stripped, validate=False)
    except (binascii.Error, ValueError):
        return None, text  # words, not base64 ("hello world"): protoc says what is wrong with them as .proto text
    try:
        fdp = FileDescriptorProto.FromString(raw)
    except DecodeError as e:
        if len(stripped.split()) > 1 and not all(len(line) % 4 == 0 for line in stripped.split()[:-1]):
            return None, text  # words that happen to decode, not base64 written in lines
        raise InvalidSchemaError(f"{what}: neither .proto text nor a base64 FileDescriptorProto ({e})") from None
    if not fdp.name and not fdp.message_type and not fdp.enum_type:
        raise InvalidSchemaError(f"{what}: neither .proto text nor a base64 FileDescriptorProto")
    return fdp, _printed(fdp, (), what)


def _import_paths() -> list[bytes]:
    """Where imports that are no reference are found: the well-known types (grpc_tools' copies of
    ``google/protobuf/*.proto``), ``google/type/*.proto`` (googleapis-common-protos ships them beside
    its modules) and ``confluent/meta.proto`` and ``confluent/type/decimal.proto`` (ours): what
    serializers import without registering it, and nothing else."""
    global _IMPORT_PATHS
    with _COMPILER_LOCK:
        if _IMPORT_PATHS is None:
            import grpc_tools  # noqa: PLC0415  (loaded on the first compile only)

            paths = [Path(grpc_tools.__file__).parent / "_proto", Path(__file__).parent / "_proto"]
            google_types = importlib.util.find_spec("google.type")
            if google_types is not None and google_types.submodule_search_locations:
                # a directory of its own that holds google/type alone (the package's parent directory,
                # site-packages, would let an import find any .proto file installed there)
                root = Path(tempfile.mkdtemp(prefix="kafkalog-proto-types-"))
                atexit.register(shutil.rmtree, root, ignore_errors=True)
                (root / "google").mkdir()
                (root / "google" / "type").symlink_to(next(iter(google_types.submodule_search_locations)))
                paths.append(root)
            _IMPORT_PATHS = [str(path).encode() for path in paths]
        return _IMPORT_PATHS


_IMPORT_PATHS: list[bytes] | None = None


def _compile(name: str, files: Mapping[str, str]) -> list[FileDescriptorProto]:
    """The descriptors of ``name`` and of everything it imports (dependencies first)."""
    from grpc_tools import _protoc_compiler  # noqa: PLC0415

    with tempfile.TemporaryDirectory(prefix="kafkalog-proto-") as tmp:
        root = Path(tmp).resolve()
        for file_name, source in files.items():
            path = Path(tmp, file_name)
            if not path.resolve().is_relative_to(root):  # names are checked before; this is the last line
                raise InvalidSchemaError(f"file {file_name!r} would be written outside the compiler's directory")
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(source, encoding="utf-8")
            except OSError as e:  # one name a directory of another's ("a.proto", "a.proto/b.proto")
                raise InvalidSchemaError(f"file {file_name!r} clashes with another file's path: {e.strerror}") from None
        includes = [tmp.encode(), *_import_paths()]
        with _COMPILER_LOCK:
            try:
                modules = _protoc_compiler.get_protos(name.encode(), includes)
            except _protoc_compiler.ProtocErrors as e:
                raise InvalidSchemaError(_protoc_message(e.errors())) from None
    return [_serialized_descriptor(module_name, code) for module_name, code in modules]


def _protoc_message(errors: Sequence[Any]) -> str:
    lines = []
    for error in errors[:5]:
        file_name = error.filename.decode(errors="replace")
        message = error.message.decode(errors="replace")
        where = f"{file_name}:{error.line + 1}:{error.column + 1}" if error.line >= 0 else file_name
        lines.append(f"{where}: {message}")
    if len(errors) > 5:
        lines.append(f"... and {len(errors) - 5} more")
    return "\n".join(lines) or "protoc refused the schema"


def _serialized_descriptor(module_name: bytes, code: bytes) -> FileDescriptorProto:
    """The FileDescriptorProto a generated module registers (its ``AddSerializedFile`` argument)."""
    for node in ast.walk(ast.parse(code)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "AddSerializedFile"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, bytes)
        ):
            return FileDescriptorProto.FromString(node.args[0].value)
    raise RuntimeError(f"grpc_tools generated {module_name!r} without a serialized descriptor: an unknown version?")


# --- descriptor -> .proto text --------------------------------------------------------------------


def to_proto_text(file: FileDescriptorProto, dependencies: Sequence[FileDescriptorProto] = ()) -> str:
    """``file`` as ``.proto`` text that protoc compiles back to the same descriptor. Deterministic:
    fully qualified type names, the descriptor's order. Custom options are printed when the
    extensions that define them are among ``dependencies`` (or ``file``), and left out otherwise."""
    token = _EXTENSIONS.set(_extension_pool(file, dependencies))
    try:
        return _file_text(file)
    finally:
        _EXTENSIONS.reset(token)


_EXTENSIONS: contextvars.ContextVar[descriptor_pool.DescriptorPool | None] = contextvars.ContextVar(
    "kafkalog_schemas_extensions", default=None
)


def _extension_pool(
    file: FileDescriptorProto, dependencies: Sequence[FileDescriptorProto]
) -> descriptor_pool.DescriptorPool | None:
    """A pool of ``file`` and its imports, where custom options find their extensions (None when
    the file defines or imports no extension, or the files do not build)."""
    files = [*dependencies, file]
    if not any(_has_extensions(f) for f in files):
        return None
    pool = descriptor_pool.DescriptorPool()
    try:
        for f in files:
            pool.Add(f)
    except (TypeError, ValueError):
        return None
    return pool


def _has_extensions(file: FileDescriptorProto) -> bool:
    def nested(messages: Sequence[DescriptorProto]) -> bool:
        return any(m.extension or nested(m.nested_type) for m in messages)

    return bool(file.extension) or nested(file.message_type)


def _file_text(file: FileDescriptorProto) -> str:
    out: list[str] = []
    syntax = file.syntax or "proto2"
    if syntax == "editions":
        out.append(f'edition = "{_edition(file)}";')
    else:
        out.append(f'syntax = "{syntax}";')
    if file.package:
        out.append(f"package {file.package};")
    public, weak = set(file.public_dependency), set(file.weak_dependency)
    for i, dependency in enumerate(file.dependency):
        kind = "public " if i in public else "weak " if i in weak else ""
        out.append(f"import {kind}{_quote(dependency)};")
    out.extend(f"option {line};" for line in _options(file.options))
    for message in file.message_type:
        out.extend(_message(message, syntax, 0))
    for enum in file.enum_type:
        out.extend(_enum(enum, 0))
    out.extend(_extensions(file.extension, syntax, 0))
    for service in file.service:
        out.append(f"service {service.name} {{")
        out.extend(f"  option {line};" for line in _options(service.options))
        for method in service.method:
            client = "stream " if method.client_streaming else ""
            server = "stream " if method.server_streaming else ""
            head = f"  rpc {method.name} ({client}{method.input_type}) returns ({server}{method.output_type})"
            options = _options(method.options)
            if options:
                out.append(head + " {")
                out.extend(f"    option {line};" for line in options)
                out.append("  }")
            else:
                out.append(head + ";")
        out.append("}")
    return "\n".join(out) + "\n"


def _edition(file: FileDescriptorProto) -> str:
    name = descriptor_pb2.Edition.Name(file.edition)
    return name.removeprefix("EDITION_")


def _message(message: DescriptorProto, syntax: str, depth: int, head: str | None = None) -> list[str]:
    pad = "  " * (depth + 1)
    out = [head or f"{'  ' * depth}message {message.name} {{"]
    out.extend(f"{pad}option {line};" for line in _options(message.options))
    entries = {n.name: n for n in message.nested_type if n.options.map_entry}
    groups = {f.type_name.rpartition(".")[2] for f in message.field if f.type == FieldDescriptorProto.TYPE_GROUP}
    real_oneofs = {f.oneof_index for f in message.field if f.HasField("oneof_index") and not f.proto3_optional}
    # A map field's entry and a group's body are nested messages placed where their field is
    # declared, and the message-index paths of the wire format count them: so each regular nested
    # message is printed before the first field whose own nested message comes after it, which
    # keeps the descriptor's order of nested messages (and of fields) when the text is compiled.
    position = {n.name: i for i, n in enumerate(message.nested_type)}
    pending = [n for n in message.nested_type if n.name not in entries and n.name not in groups]

    def nested_before(fields: Sequence[FieldDescriptorProto]) -> None:
        anchors = [position.get(f.type_name.rpartition(".")[2], -1) for f in fields if _anchors(f, entries)]
        if anchors:
            while pending and position[pending[0].name] < max(anchors):
                out.extend(_message(pending.pop(0), syntax, depth + 1))

    printed_oneofs: set[int] = set()
    for fd in message.field:
        if fd.HasField("oneof_index") and fd.oneof_index in real_oneofs:
            if fd.oneof_index in printed_oneofs:
                continue
            printed_oneofs.add(fd.oneof_index)
            members = [m for m in message.field if m.HasField("oneof_index") and m.oneof_index == fd.oneof_index]
            nested_before(members)
            oneof = message.oneof_decl[fd.oneof_index]
            out.append(f"{pad}oneof {oneof.name} {{")
            out.extend(f"{pad}  option {line};" for line in _options(oneof.options))
            for member in members:
                out.extend(_field(member, message, entries, syntax, depth + 2, in_oneof=True))
            out.append(f"{pad}}}")
        else:
            nested_before([fd])
            out.extend(_field(fd, message, entries, syntax, depth + 1, in_oneof=False))
    for nested in pending:
        out.extend(_message(nested, syntax, depth + 1))
    for enum in message.enum_type:
        out.extend(_enum(enum, depth + 1))
    out.extend(_extensions(message.extension, syntax, depth + 1))
    for ext_range in message.extension_range:
        out.append(f"{pad}extensions {_range(ext_range.start, ext_range.end - 1)};")
    if message.reserved_range:
        out.append(f"{pad}reserved {', '.join(_range(r.start, r.end - 1) for r in message.reserved_range)};")
    if message.reserved_name:
        out.append(f"{pad}reserved {', '.join(_quote(n) for n in message.reserved_name)};")
    out.append(f"{'  ' * depth}}}")
    return out


def _anchors(fd: FieldDescriptorProto, entries: Mapping[str, DescriptorProto]) -> bool:
    """Whether ``fd`` declares a nested message where it stands (a map field, a group)."""
    if fd.type == FieldDescriptorProto.TYPE_GROUP:
        return True
    return (
        fd.type == FieldDescriptorProto.TYPE_MESSAGE
        and fd.label == FieldDescriptorProto.LABEL_REPEATED
        and fd.type_name.rpartition(".")[2] in entries
    )


def _range(start: int, end: int) -> str:
    if start == end:
        return str(start)
    return f"{start} to {'max' if end >= _MAX_FIELD_NUMBER else end}"


def _field(
    fd: FieldDescriptorProto,
    message: DescriptorProto,
    entries: Mapping[str, DescriptorProto],
    syntax: str,
    depth: int,
    *,
    in_oneof: bool,
) -> list[str]:
    pad = "  " * depth
    entry = entries.get(fd.type_name.rpartition(".")[2]) if fd.type == FieldDescriptorProto.TYPE_MESSAGE else None
    options = _field_options(fd)
    suffix = f" [{', '.join(options)}]" if options else ""
    if entry is not None and fd.label == FieldDescriptorProto.LABEL_REPEATED:
        if len(entry.field) != 2:
            raise InvalidSchemaError(f"map entry {entry.name} of field {fd.name} has {len(entry.field)} fields, not 2")
        key, value = entry.field[0], entry.field[1]
        return [f"{pad}map<{_type_name(key)}, {_type_name(value)}> {fd.name} = {fd.number}{suffix};"]
    label = _label(fd, syntax, in_oneof)
    if fd.type == FieldDescriptorProto.TYPE_GROUP:
        group = next((n for n in message.nested_type if n.name == fd.type_name.rpartition(".")[2]), None)
        if group is None:
            raise InvalidSchemaError(f"group field {fd.name} names {fd.type_name}, no nested message of its own")
        head = f"{pad}{label}group {group.name} = {fd.number}{suffix} {{"
        return _message(group, syntax, depth, head=head)
    return [f"{pad}{label}{_type_name(fd)} {fd.name} = {fd.number}{suffix};"]


def _label(fd: FieldDescriptorProto, syntax: str, in_oneof: bool) -> str:
    if in_oneof:
        return ""
    if fd.label == FieldDescriptorProto.LABEL_REPEATED:
        return "repeated "
    if fd.label == FieldDescriptorProto.LABEL_REQUIRED:
        return "required "
    if syntax == "proto3":
        return "optional " if fd.proto3_optional else ""
    if syntax == "editions":
        return ""  # presence is a feature there, not a label
    return "optional "


def _type_name(fd: FieldDescriptorProto) -> str:
    if fd.type in _SCALARS:
        return _SCALARS[fd.type]
    return fd.type_name


def _field_options(fd: FieldDescriptorProto) -> list[str]:
    options = []
    if fd.HasField("default_value"):
        options.append(f"default = {_default(fd)}")
    if fd.HasField("json_name") and fd.json_name != _json_name(fd.name):
        options.append(f"json_name = {_quote(fd.json_name)}")
    options.extend(_options(fd.options))
    return options


def _json_name(name: str) -> str:
    """protoc's default json_name: underscores dropped, the letter after each upper-cased."""
    out, upper = [], False
    for char in name:
        if char == "_":
            upper = True
        elif upper:
            out.append(char.upper())
            upper = False
        else:
            out.append(char)
    return "".join(out)


def _default(fd: FieldDescriptorProto) -> str:
    value = fd.default_value
    if fd.type == FieldDescriptorProto.TYPE_STRING:
        return _quote(value)
    if fd.type == FieldDescriptorProto.TYPE_BYTES:
        return f'"{value}"'  # the descriptor holds bytes defaults C-escaped already
    return value  # numbers, bools, enum value names, inf/-inf/nan as protoc writes them


def _extensions(extensions: Sequence[FieldDescriptorProto], syntax: str, depth: int) -> list[str]:
    out: list[str] = []
    pad = "  " * depth
    extendee = None
    for fd in extensions:
        if fd.extendee != extendee:
            if extendee is not None:
                out.append(f"{pad}}}")
            extendee = fd.extendee
            out.append(f"{pad}extend {extendee} {{")
        out.extend(_field(fd, DescriptorProto(), {}, syntax, depth + 1, in_oneof=False))
    if extendee is not None:
        out.append(f"{pad}}}")
    return out


def _enum(enum: EnumDescriptorProto, depth: int) -> list[str]:
    pad = "  " * (depth + 1)
    out = [f"{'  ' * depth}enum {enum.name} {{"]
    out.extend(f"{pad}option {line};" for line in _options(enum.options))
    for value in enum.value:
        options = _options(value.options)
        suffix = f" [{', '.join(options)}]" if options else ""
        out.append(f"{pad}{value.name} = {value.number}{suffix};")
    if enum.reserved_range:
        out.append(f"{pad}reserved {', '.join(_range(r.start, r.end) for r in enum.reserved_range)};")
    if enum.reserved_name:
        out.append(f"{pad}reserved {', '.join(_quote(n) for n in enum.reserved_name)};")
    out.append(f"{'  ' * depth}}}")
    return out


def _options(options: Any) -> list[str]:
    """The options set on an options message, as ``name = value``: the standard ones (a
    message-valued one flattened to ``name.sub = value``), then the custom ones
    (``(package.name) = value``, a message in the text format) by number."""
    out: list[str] = []
    for fd, value in options.ListFields():
        if fd.name == "uninterpreted_option":
            continue
        if fd.is_extension:
            out.extend(_custom(fd, value))
        else:
            out.extend(_option(fd.name, fd, value))
    pool = _EXTENSIONS.get()
    if pool is None:
        return out
    try:
        extendee = pool.FindMessageTypeByName(options.DESCRIPTOR.full_name)
    except KeyError:
        return out
    chunks: dict[int, list[Any]] = {}
    for unknown in iter(unknown_fields.UnknownFieldSet(options)):
        chunks.setdefault(unknown.field_number, []).append(unknown)
    for number in sorted(chunks):
        try:
            extension = pool.FindExtensionByNumber(extendee, number)
        except KeyError:
            continue  # an option whose definition is not imported: it cannot be named
        out.extend(_unknown_option(extension, chunks[number]))
    return out


def _custom(fd: FieldDescriptor, value: Any) -> list[str]:
    """A custom option the runtime knows (its extension is in the default pool)."""
    values = list(value) if fd.is_repeated else [value]
    return [_custom_line(fd, v) for v in values]


def _custom_line(fd: FieldDescriptor, value: Any) -> str:
    if fd.type == FieldDescriptor.TYPE_MESSAGE:
        return f"({fd.full_name}) = {{{text_format.MessageToString(value, as_one_line=True)}}}"
    return _option(f"({fd.full_name})", fd, _Single(value))[0]


def _unknown_option(extension: FieldDescriptor, chunks: Sequence[Any]) -> list[str]:
    """A custom option held as unknown fields (its extension defined in the schema's imports); one
    whose bytes are not a value of its type is refused."""
    expected = _WIRE_TYPES.get(extension.type, 0)
    for chunk in chunks:
        if chunk.wire_type != expected:  # a packed repeated option included: protoc writes none
            raise InvalidSchemaError(
                f"custom option ({extension.full_name}) has wire type {chunk.wire_type}, not one of its type"
            )
    try:
        return _decoded_option(extension, chunks)
    except (DecodeError, UnicodeDecodeError, struct.error) as e:
        raise InvalidSchemaError(f"custom option ({extension.full_name}) does not decode: {e}") from None


#: a custom option's wire type by its type (the others, varints, are 0)
_WIRE_TYPES: Final = {
    FieldDescriptor.TYPE_MESSAGE: 2,
    FieldDescriptor.TYPE_STRING: 2,
    FieldDescriptor.TYPE_BYTES: 2,
    FieldDescriptor.TYPE_GROUP: 3,
    FieldDescriptor.TYPE_DOUBLE: 1,
    FieldDescriptor.TYPE_FIXED64: 1,
    FieldDescriptor.TYPE_SFIXED64: 1,
    FieldDescriptor.TYPE_FLOAT: 5,
    FieldDescriptor.TYPE_FIXED32: 5,
    FieldDescriptor.TYPE_SFIXED32: 5,
}


def _decoded_option(extension: FieldDescriptor, chunks: Sequence[Any]) -> list[str]:
    if extension.type == FieldDescriptor.TYPE_MESSAGE and extension.message_type is not None:
        cls = message_factory.GetMessageClass(extension.message_type)
        if extension.is_repeated:
            return [_custom_line(extension, cls.FromString(chunk.data)) for chunk in chunks]
        # protoc writes each assignment of one option as a chunk of its own: parsed together, they merge
        merged = cls.FromString(b"".join(chunk.data for chunk in chunks))
        return [_custom_line(extension, merged)]
    return [_custom_line(extension, _scalar(extension, chunk.wire_type, chunk.data)) for chunk in chunks]


def _scalar(fd: FieldDescriptor, wire_type: int, data: Any) -> Any:
    """A scalar option's value from its wire form."""
    if wire_type == 2:
        return data.decode("utf-8") if fd.type == FieldDescriptor.TYPE_STRING else data
    if fd.type in (FieldDescriptor.TYPE_SINT32, FieldDescriptor.TYPE_SINT64):
        return (data >> 1) ^ -(data & 1)
    if fd.type == FieldDescriptor.TYPE_FLOAT:
        return struct.unpack("<f", struct.pack("<I", data))[0]
    if fd.type == FieldDescriptor.TYPE_DOUBLE:
        return struct.unpack("<d", struct.pack("<Q", data))[0]
    if fd.type in (FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_SFIXED32,
                   FieldDescriptor.TYPE_SFIXED64, FieldDescriptor.TYPE_ENUM):  # fmt: skip
        bits = 32 if fd.type == FieldDescriptor.TYPE_SFIXED32 else 64
        return data - (1 << bits) if data >= 1 << (bits - 1) else data
    return data


def _option(name: str, fd: FieldDescriptor, value: Any) -> list[str]:
    if fd.is_repeated and not isinstance(value, _Single):
        return [line for item in value for line in _option(name, fd, _Single(item))]
    if isinstance(value, _Single):
        value = value.item
    if fd.type == FieldDescriptor.TYPE_MESSAGE:
        return [f"{name}.{line}" for sub, sub_value in value.ListFields() for line in _option(sub.name, sub, sub_value)]
    if fd.type == FieldDescriptor.TYPE_ENUM and fd.enum_type is not None:
        known = fd.enum_type.values_by_number.get(value)
        return [f"{name} = {known.name if known is not None else value}"]
    if fd.type == FieldDescriptor.TYPE_BOOL:
        return [f"{name} = {'true' if value else 'false'}"]
    if fd.type == FieldDescriptor.TYPE_STRING:
        return [f"{name} = {_quote(value)}"]
    if fd.type == FieldDescriptor.TYPE_BYTES:
        return [f"{name} = {_quote(value.decode('latin-1'))}"]
    if isinstance(value, float) and not math.isfinite(value):
        return [f"{name} = {'nan' if math.isnan(value) else 'inf' if value > 0 else '-inf'}"]
    return [f"{name} = {value!r}"]


@dataclass(frozen=True)
class _Single:
    item: Any


def _quote(text: str) -> str:
    """``text`` as a protobuf string literal."""
    out = ['"']
    for char in text:
        code = ord(char)
        if char in ('"', "\\"):
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif char == "\r":
            out.append("\\r")
        elif char == "\t":
            out.append("\\t")
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\{code:03o}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)
