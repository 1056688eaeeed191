"""Primitive wire types and schemas, declared as data: one generic encoder and decoder walk them.

Every length and count read from the wire is checked against the bytes that remain before anything
is allocated, so a lying length costs nothing but a ProtocolError.

Decoded structures are dicts keyed by field name; encoders take the same dicts. ``RECORDS`` fields
(message sets) decode to a memoryview into the frame (no copy) and encode from bytes, a memoryview,
None, or any object with ``length`` and a byte range the writer cannot see (a log FileRegion), which
is emitted as its own chunk so that the server can send it with sendfile.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any, Protocol

from kafkalog.errors import ProtocolError

Struct = dict[str, Any]

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


_MAX_INT32 = 2**31 - 1


def _length(length: int, what: str) -> int:
    """A length or count that an int32 field can carry, or ProtocolError."""
    if not 0 <= length <= _MAX_INT32:
        raise ProtocolError(f"{what} of length {length} cannot be encoded (int32 limit)")
    return length


class Region(Protocol):
    """A byte range the writer passes through without reading (kafkalog.log.FileRegion)."""

    length: int


class Reader:
    """A cursor over a frame: every read is bounds-checked."""

    __slots__ = ("buf", "end", "pos")

    def __init__(self, buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None) -> None:
        self.buf = memoryview(buf)
        self.pos = pos
        self.end = len(self.buf) if end is None else end

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def take(self, count: int, what: str) -> int:
        """Advance over ``count`` bytes and return where they start."""
        if count < 0 or count > self.end - self.pos:
            raise ProtocolError(f"{what}: needs {count} bytes, {self.end - self.pos} remain")
        start = self.pos
        self.pos += count
        return start


class Writer:
    """Collects an encoding as chunks: runs of small fields are joined, regions stay separate."""

    __slots__ = ("chunks", "pending", "size")

    def __init__(self) -> None:
        self.chunks: list[bytes | memoryview | Region] = []
        self.pending = bytearray()
        self.size = 0

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.pending += data
        self.size += len(data)

    def region(self, region: Region) -> None:
        if self.pending:
            self.chunks.append(bytes(self.pending))
            self.pending = bytearray()
        self.chunks.append(region)
        self.size += region.length

    def finish(self) -> list[bytes | memoryview | Region]:
        if self.pending:
            self.chunks.append(bytes(self.pending))
            self.pending = bytearray()
        return self.chunks


class Type:
    """A wire type: ``min_size`` bytes at least; encode into a Writer, decode from a Reader."""

    min_size = 0
    name = "value"

    def encode(self, value: Any, out: Writer) -> None:
        raise NotImplementedError

    def decode(self, reader: Reader) -> Any:
        raise NotImplementedError


class _Fixed(Type):
    def __init__(self, packer: struct.Struct, name: str) -> None:
        self.packer = packer
        self.min_size = packer.size
        self.name = name

    def encode(self, value: Any, out: Writer) -> None:
        try:
            out.write(self.packer.pack(value))
        except struct.error as exc:
            raise ProtocolError(f"{self.name} value {value!r} does not fit: {exc}") from exc

    def decode(self, reader: Reader) -> Any:
        return self.packer.unpack_from(reader.buf, reader.take(self.min_size, self.name))[0]


INT8 = _Fixed(_I8, "int8")
INT16 = _Fixed(_I16, "int16")
INT32 = _Fixed(_I32, "int32")
INT64 = _Fixed(_I64, "int64")


class _Boolean(Type):
    min_size = 1
    name = "boolean"

    def encode(self, value: Any, out: Writer) -> None:
        out.write(b"\x01" if value else b"\x00")

    def decode(self, reader: Reader) -> bool:
        return reader.buf[reader.take(1, self.name)] != 0


BOOLEAN = _Boolean()


class _String(Type):
    """int16 length, then UTF-8 bytes; -1 is null where ``nullable``."""

    min_size = 2

    def __init__(self, *, nullable: bool) -> None:
        self.nullable = nullable
        self.name = "nullable string" if nullable else "string"

    def encode(self, value: Any, out: Writer) -> None:
        if value is None:
            if not self.nullable:
                raise ProtocolError("a non-nullable string is None")
            out.write(_I16.pack(-1))
            return
        try:
            data = value.encode("utf-8")
        except UnicodeEncodeError as exc:  # e.g. a lone surrogate from an undecodable file name
            raise ProtocolError(f"{self.name} {value!r} has no UTF-8 form: {exc}") from exc
        if len(data) > 32767:
            raise ProtocolError(f"string of {len(data)} bytes is longer than 32767")
        out.write(_I16.pack(len(data)))
        out.write(data)

    def decode(self, reader: Reader) -> str | None:
        length = _I16.unpack_from(reader.buf, reader.take(2, self.name))[0]
        if length < 0:
            if length == -1 and self.nullable:
                return None
            raise ProtocolError(f"{self.name} has length {length}")
        start = reader.take(length, self.name)
        try:
            return str(reader.buf[start : start + length], "utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"{self.name} is not UTF-8: {exc}") from exc


STRING = _String(nullable=False)
NULLABLE_STRING = _String(nullable=True)


class _Bytes(Type):
    """int32 length, then bytes; -1 is null. Decodes to bytes."""

    min_size = 4
    name = "bytes"

    def encode(self, value: Any, out: Writer) -> None:
        if value is None:
            out.write(_I32.pack(-1))
            return
        out.write(_I32.pack(_length(len(value), self.name)))
        out.write(value)

    def decode(self, reader: Reader) -> bytes | None:
        length = _I32.unpack_from(reader.buf, reader.take(4, self.name))[0]
        if length == -1:
            return None
        start = reader.take(length, self.name)
        return bytes(reader.buf[start : start + length])


BYTES = _Bytes()


class _Records(Type):
    """A message set: int32 size, then the bytes (null as -1). Decodes to a memoryview (no copy);
    encodes bytes/memoryviews inline and regions as separate chunks."""

    min_size = 4
    name = "records"

    def encode(self, value: Any, out: Writer) -> None:
        if value is None:
            out.write(_I32.pack(-1))
        elif isinstance(value, bytes | bytearray | memoryview):
            out.write(_I32.pack(_length(len(value), self.name)))
            out.write(value)
        else:
            out.write(_I32.pack(_length(value.length, self.name)))
            out.region(value)

    def decode(self, reader: Reader) -> memoryview | None:
        length = _I32.unpack_from(reader.buf, reader.take(4, self.name))[0]
        if length == -1:
            return None
        start = reader.take(length, self.name)
        return reader.buf[start : start + length]


RECORDS = _Records()


class Array(Type):
    """int32 count, then the elements; -1 is null where ``nullable``. The count is checked against
    the bytes left (each element takes at least its type's minimum size) before allocating."""

    min_size = 4

    def __init__(self, element: Type | Sequence[tuple[str, Any]], *, nullable: bool = False) -> None:
        self.element = element if isinstance(element, Type) else Schema(*element)
        self.nullable = nullable
        self.name = f"array of {self.element.name}"

    def encode(self, value: Any, out: Writer) -> None:
        if value is None:
            if not self.nullable:
                raise ProtocolError(f"a non-nullable {self.name} is None")
            out.write(_I32.pack(-1))
            return
        out.write(_I32.pack(_length(len(value), self.name)))
        for item in value:
            self.element.encode(item, out)

    def decode(self, reader: Reader) -> list[Any] | None:
        count = _I32.unpack_from(reader.buf, reader.take(4, self.name))[0]
        if count < 0:
            if count == -1 and self.nullable:
                return None
            raise ProtocolError(f"{self.name} has count {count}")
        if count * max(self.element.min_size, 1) > reader.remaining:
            raise ProtocolError(f"{self.name} claims {count} elements but only {reader.remaining} bytes remain")
        element = self.element
        return [element.decode(reader) for _ in range(count)]


class Schema(Type):
    """Named fields in order; decodes to a dict, encodes from one."""

    def __init__(self, *fields: tuple[str, Any]) -> None:
        # A field's type is a Type, or a list of (name, type) pairs meaning an array of that schema.
        self.fields = tuple((name, kind if isinstance(kind, Type) else Array(kind)) for name, kind in fields)
        self.min_size = sum(kind.min_size for _, kind in self.fields)
        self.name = "{" + ", ".join(name for name, _ in self.fields) + "}"

    def encode(self, value: Any, out: Writer) -> None:
        for name, kind in self.fields:
            try:
                field = value[name]
            except KeyError:
                raise ProtocolError(f"field {name!r} is missing") from None
            kind.encode(field, out)

    def decode(self, reader: Reader) -> Struct:
        return {name: kind.decode(reader) for name, kind in self.fields}
