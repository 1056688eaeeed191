"""Primitive wire types and schemas, declared as data: one generic encoder and decoder walk them.

Every length and count read from the wire is checked against the bytes that remain before anything
is allocated, so a lying length costs nothing but a ProtocolError.

Decoded structures are dicts keyed by field name; encoders take the same dicts. ``RECORDS`` fields
(message sets) decode to a memoryview into the frame (no copy) and encode from bytes, a memoryview,
None, or any object with ``length`` and a byte range the writer cannot see (a log FileRegion), which
is emitted as its own chunk so that the server can send it with sendfile.

Flexible versions (KIP-482) use compact forms: lengths and counts as an unsigned varint of N + 1
(0 meaning null) for strings, bytes, records and arrays; and every structure of a flexible version
ends with a tagged-field section: an unsigned varint count, then per field its tag, its size (both
unsigned varints) and its bytes. Tags a schema does not know are skipped (their size bounds them),
so newer clients' optional fields never break an older reader.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

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


REQUIRED: Any = object()
"""The default of a field that has none: encoding a structure without it is an error."""


class Schema(Type):
    """Named fields in order; decodes to a dict, encodes from one.

    A field is ``(name, type)`` or ``(name, type, default)``: a field with a default may be left out
    of the dict to encode (Kafka's definitions give most later fields one, so that a caller builds one
    dict for every version); a field without one must be there.
    """

    def __init__(self, *fields: tuple[str, Any] | tuple[str, Any, Any]) -> None:
        # A field's type is a Type, or a list of (name, type) pairs meaning an array of that schema.
        plan = []
        for name, kind, *default in fields:
            plan.append((name, kind if isinstance(kind, Type) else Array(kind), default[0] if default else REQUIRED))
        self.plan = tuple(plan)
        self.fields = tuple((name, kind) for name, kind, _ in plan)
        self.min_size = sum(kind.min_size for _, kind in self.fields)
        self.name = "{" + ", ".join(name for name, _ in self.fields) + "}"

    def encode(self, value: Any, out: Writer) -> None:
        for name, kind, default in self.plan:
            field = value.get(name, default)
            if field is REQUIRED:
                raise ProtocolError(f"field {name!r} is missing")
            kind.encode(field, out)

    def decode(self, reader: Reader) -> Struct:
        return {name: kind.decode(reader) for name, kind in self.fields}


# ------------------------------------------------------------------ flexible versions (KIP-482)

_MAX_UVARINT_BYTES = 5  # an unsigned varint carries at most 32 bits here (lengths, counts, tags)


def read_uvarint(reader: Reader, what: str) -> int:
    """An unsigned varint of at most 32 bits; ProtocolError if it runs out or is longer."""
    result = 0
    shift = 0
    buf = reader.buf
    for _ in range(_MAX_UVARINT_BYTES):
        byte = buf[reader.take(1, what)]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            if result > 0xFFFFFFFF:
                raise ProtocolError(f"{what}: unsigned varint {result} is larger than 32 bits")
            return result
        shift += 7
    raise ProtocolError(f"{what}: unsigned varint longer than {_MAX_UVARINT_BYTES} bytes")


def uvarint(value: int) -> bytes:
    """The unsigned varint encoding of ``value`` (0 <= value < 2**32)."""
    if not 0 <= value <= 0xFFFFFFFF:
        raise ProtocolError(f"unsigned varint {value} is out of range")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


class _UnsignedVarint(Type):
    min_size = 1
    name = "unsigned varint"

    def encode(self, value: Any, out: Writer) -> None:
        out.write(uvarint(value))

    def decode(self, reader: Reader) -> int:
        return read_uvarint(reader, self.name)


UNSIGNED_VARINT = _UnsignedVarint()


def _compact_length(reader: Reader, what: str, *, nullable: bool) -> int | None:
    """A compact length (N + 1, 0 for null), checked against the bytes that remain."""
    stored = read_uvarint(reader, what)
    if stored == 0:
        if nullable:
            return None
        raise ProtocolError(f"{what} is null")
    return stored - 1


class _CompactString(Type):
    """Unsigned varint length + 1, then UTF-8 bytes; 0 is null where ``nullable``."""

    min_size = 1

    def __init__(self, *, nullable: bool) -> None:
        self.nullable = nullable
        self.name = "compact nullable string" if nullable else "compact string"

    def encode(self, value: Any, out: Writer) -> None:
        if value is None:
            if not self.nullable:
                raise ProtocolError(f"a {self.name} is None")
            out.write(b"\x00")
            return
        try:
            data = value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ProtocolError(f"{self.name} {value!r} has no UTF-8 form: {exc}") from exc
        if len(data) > 32767:
            raise ProtocolError(f"string of {len(data)} bytes is longer than 32767")
        out.write(uvarint(len(data) + 1))
        out.write(data)

    def decode(self, reader: Reader) -> str | None:
        length = _compact_length(reader, self.name, nullable=self.nullable)
        if length is None:
            return None
        start = reader.take(length, self.name)
        try:
            return str(reader.buf[start : start + length], "utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"{self.name} is not UTF-8: {exc}") from exc


COMPACT_STRING = _CompactString(nullable=False)
COMPACT_NULLABLE_STRING = _CompactString(nullable=True)


class _CompactBytes(Type):
    """Unsigned varint length + 1, then bytes; 0 is null where ``nullable``. Decodes to bytes."""

    min_size = 1

    def __init__(self, *, nullable: bool) -> None:
        self.nullable = nullable
        self.name = "compact nullable bytes" if nullable else "compact bytes"

    def encode(self, value: Any, out: Writer) -> None:
        if value is None:
            if not self.nullable:
                raise ProtocolError(f"a {self.name} is None")
            out.write(b"\x00")
            return
        out.write(uvarint(_length(len(value), self.name) + 1))
        out.write(value)

    def decode(self, reader: Reader) -> bytes | None:
        length = _compact_length(reader, self.name, nullable=self.nullable)
        if length is None:
            return None
        start = reader.take(length, self.name)
        return bytes(reader.buf[start : start + length])


COMPACT_BYTES = _CompactBytes(nullable=False)
COMPACT_NULLABLE_BYTES = _CompactBytes(nullable=True)


class _CompactRecords(Type):
    """Record batches in a flexible version: unsigned varint size + 1 (0 is null), then the bytes.
    Decodes to a memoryview; encodes bytes inline and regions as separate chunks, like RECORDS."""

    min_size = 1
    name = "compact records"

    def encode(self, value: Any, out: Writer) -> None:
        if value is None:
            out.write(b"\x00")
        elif isinstance(value, bytes | bytearray | memoryview):
            out.write(uvarint(_length(len(value), self.name) + 1))
            out.write(value)
        else:
            out.write(uvarint(_length(value.length, self.name) + 1))
            out.region(value)

    def decode(self, reader: Reader) -> memoryview | None:
        length = _compact_length(reader, self.name, nullable=True)
        if length is None:
            return None
        start = reader.take(length, self.name)
        return reader.buf[start : start + length]


COMPACT_RECORDS = _CompactRecords()


class _Uuid(Type):
    """16 bytes (a topic id); decodes to bytes, all zero meaning none."""

    min_size = 16
    name = "uuid"

    def encode(self, value: Any, out: Writer) -> None:
        if len(value) != 16:
            raise ProtocolError(f"a uuid has 16 bytes, not {len(value)}")
        out.write(value)

    def decode(self, reader: Reader) -> bytes:
        start = reader.take(16, self.name)
        return bytes(reader.buf[start : start + 16])


UUID = _Uuid()


class CompactArray(Array):
    """Unsigned varint count + 1, then the elements; 0 is null where ``nullable``. Elements that are
    structures are flexible ones (each ends with its tagged fields)."""

    min_size = 1

    def __init__(self, element: Type | Sequence[tuple[str, Any]], *, nullable: bool = False) -> None:
        super().__init__(element if isinstance(element, Type) else FlexibleSchema(*element), nullable=nullable)
        self.name = f"compact array of {self.element.name}"

    def encode(self, value: Any, out: Writer) -> None:
        if value is None:
            if not self.nullable:
                raise ProtocolError(f"a non-nullable {self.name} is None")
            out.write(b"\x00")
            return
        out.write(uvarint(_length(len(value), self.name) + 1))
        for item in value:
            self.element.encode(item, out)

    def decode(self, reader: Reader) -> list[Any] | None:
        count = _compact_length(reader, self.name, nullable=self.nullable)
        if count is None:
            return None
        if count * max(self.element.min_size, 1) > reader.remaining:
            raise ProtocolError(f"{self.name} claims {count} elements but only {reader.remaining} bytes remain")
        element = self.element
        return [element.decode(reader) for _ in range(count)]


class TaggedField(NamedTuple):
    """An optional field of a flexible structure, sent in its tagged-field section when present."""

    tag: int
    name: str
    type: Type


class FlexibleSchema(Schema):
    """A structure of a flexible version: its fields in order (a nested list of (name, type) pairs
    is a compact array of flexible structures), then its tagged fields. Known tags decode into the
    dict under their names (absent: not in the dict); unknown tags are skipped. Encoding writes the
    known tagged fields present in the dict (not None), in ascending tag order."""

    def __init__(self, *fields: tuple[str, Any] | tuple[str, Any, Any], tagged: Sequence[TaggedField] = ()) -> None:
        super().__init__(
            *(
                (name, kind if isinstance(kind, Type) else CompactArray(kind), *default)
                for name, kind, *default in fields
            )
        )
        self.tagged = tuple(sorted(tagged, key=lambda field: field.tag))
        self.by_tag = {field.tag: field for field in self.tagged}
        if len(self.by_tag) != len(self.tagged):
            raise ValueError("two tagged fields share a tag")
        self.min_size += 1  # the tagged-field count

    def encode(self, value: Any, out: Writer) -> None:
        super().encode(value, out)
        present = [field for field in self.tagged if value.get(field.name) is not None]
        out.write(uvarint(len(present)))
        for field in present:
            inner = Writer()
            field.type.encode(value[field.name], inner)
            data = b"".join(bytes(chunk) for chunk in inner.finish())  # type: ignore[arg-type]
            out.write(uvarint(field.tag))
            out.write(uvarint(len(data)))
            out.write(data)

    def decode(self, reader: Reader) -> Struct:
        value = super().decode(reader)
        count = read_uvarint(reader, "tagged field count")
        if count > reader.remaining // 2:  # every tagged field takes at least a tag and a size
            raise ProtocolError(f"{count} tagged fields claimed, {reader.remaining} bytes remain")
        previous = -1
        for _ in range(count):
            tag = read_uvarint(reader, "tag")
            if tag <= previous:
                raise ProtocolError(f"tagged field {tag} follows tag {previous}: tags must rise")
            previous = tag
            size = read_uvarint(reader, f"size of tagged field {tag}")
            start = reader.take(size, f"tagged field {tag}")
            field = self.by_tag.get(tag)
            if field is None:
                continue  # a field a newer peer knows and we do not: skipped whole
            inner = Reader(reader.buf, start, start + size)
            value[field.name] = field.type.decode(inner)
            if inner.remaining:
                raise ProtocolError(f"tagged field {field.name} leaves {inner.remaining} of its {size} bytes unread")
        return value
