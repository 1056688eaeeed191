"""The Confluent wire format: a value framed with the id of the schema it was written with.

Layout of a framed value (what every Confluent-compatible serializer writes by default)::

    byte 0      magic byte 0x00
    bytes 1-4   schema id, a 4-byte big-endian unsigned integer (the registry's global id)
    Protobuf only: the message indexes, the path of the message type in its .proto file
                (``FileDescriptorProto.message_type[i0].nested_type[i1]...``): their count, then
                each index, every number a zigzag varint; ``[0]`` (the file's first message) is
                written as the single byte 0x00 (count zero), and its long form 0x02 0x00 is read
                the same
    the rest    the payload (Avro binary, Protobuf binary, UTF-8 JSON)

Not supported, refused with a reason that says so: magic byte 0x01, which 8.x serializers write
before a 16-byte schema GUID instead of an id; and ids carried in the ``__value_schema_id`` /
``__key_schema_id`` headers instead of a prefix (such a value has no frame at all, so it reads as
a wrong magic byte here; the loader, which sees the headers, says which). Both are options of those
serializers, off by default.

Every value is untrusted input: nothing here reads past its end, and every malformed value is a
``WireFormatError`` whose message is the reason (what quarantine records).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from operator import itemgetter
from typing import NamedTuple

from kafkalog.schemas.errors import WireFormatError

MAGIC = 0
"""The magic byte of a value framed with a schema id."""
GUID_MAGIC = 1
"""The magic byte of a value framed with a schema GUID (8.x serializers, an option; not supported)."""
HEADER_SIZE = 5
"""Magic byte and schema id."""
MAX_SCHEMA_ID = (1 << 32) - 1
MAX_MESSAGE_INDEXES = 100_000
"""More indexes than any .proto file nests messages: a larger count is corrupt (Confluent's client
refuses the same)."""
_MAX_VARINT_BYTES = 5
"""Message indexes are 32-bit numbers: a zigzag varint of one takes at most 5 bytes."""

_HEADER = struct.Struct(">BI")
_head = itemgetter(slice(0, HEADER_SIZE))


class Framed(NamedTuple):
    """What a frame says: the schema id, the Protobuf message indexes (None unless asked for), and
    where the payload starts in the value."""

    schema_id: int
    message_indexes: tuple[int, ...] | None
    payload_offset: int


def frame(schema_id: int, payload: bytes, message_indexes: Sequence[int] | None = None) -> bytes:
    """``payload`` framed with ``schema_id`` (and, for Protobuf, ``message_indexes``: ``[0]`` is
    written in its one-byte short form, as Confluent's serializers write it)."""
    if not 0 <= schema_id <= MAX_SCHEMA_ID:
        raise WireFormatError(f"schema id {schema_id} is not a 4-byte unsigned integer")
    head = _HEADER.pack(MAGIC, schema_id)
    if message_indexes is None:
        return head + payload
    return head + encode_message_indexes(message_indexes) + payload


def encode_message_indexes(indexes: Sequence[int]) -> bytes:
    """The message-index array as written after the schema id: ``[0]`` as one 0x00 byte, anything
    else as its count and each index, zigzag varints."""
    if not indexes:
        raise WireFormatError("a message index path has at least one index")
    if len(indexes) > MAX_MESSAGE_INDEXES:
        raise WireFormatError(f"{len(indexes)} message indexes, more than {MAX_MESSAGE_INDEXES}")
    if any(not 0 <= i < 1 << 31 for i in indexes):
        raise WireFormatError(f"message indexes {list(indexes)} must be 0 or more (32-bit)")
    if list(indexes) == [0]:
        return b"\x00"
    return b"".join(_zigzag_varint(n) for n in (len(indexes), *indexes))


def _zigzag_varint(n: int) -> bytes:
    z = (n << 1) ^ (n >> 31)  # n is a non-negative 32-bit number here, so this is its zigzag
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _read_zigzag(value: bytes, at: int) -> tuple[int, int]:
    """The signed zigzag varint at ``value[at:]`` and the position after it."""
    z = 0
    for i in range(_MAX_VARINT_BYTES):
        if at + i >= len(value):
            raise WireFormatError("invalid message index: the value ends inside a varint")
        byte = value[at + i]
        z |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            return (z >> 1) ^ -(z & 1), at + i + 1
    raise WireFormatError(f"invalid message index: a varint longer than {_MAX_VARINT_BYTES} bytes")


def _magic_reason(magic: int) -> str:
    if magic == GUID_MAGIC:
        return "unsupported magic byte 0x01 (a schema GUID instead of an id): configure the serializer to write ids"
    return f"wrong magic byte 0x{magic:02x}"


def unframe(value: bytes, *, message_indexes: bool = False) -> Framed:
    """The frame of ``value``; with ``message_indexes`` (Protobuf), also the index path that follows
    the id. Raises WireFormatError with the reason for anything else."""
    if value and value[0] != MAGIC:
        raise WireFormatError(_magic_reason(value[0]))
    if len(value) < HEADER_SIZE:
        raise WireFormatError(f"value shorter than 5 bytes ({len(value)})")
    _, schema_id = _HEADER.unpack_from(value)
    if not message_indexes:
        return Framed(schema_id, None, HEADER_SIZE)
    count, at = _read_zigzag(value, HEADER_SIZE)
    if count == 0:
        return Framed(schema_id, (0,), at)
    if count < 0 or count > MAX_MESSAGE_INDEXES:
        raise WireFormatError(f"invalid message index count {count} (0 to {MAX_MESSAGE_INDEXES})")
    indexes = []
    for _ in range(count):
        index, at = _read_zigzag(value, at)
        if index < 0:
            raise WireFormatError(f"invalid message index {index} (negative)")
        indexes.append(index)
    return Framed(schema_id, tuple(indexes), at)


def schema_ids(values: Sequence[bytes | None]) -> tuple[list[int], list[tuple[int, str]]]:
    """The schema id of each value of a chunk, found for the whole chunk at once: a list of ids
    (-1 where the value has no valid frame) and those values' (index, reason) pairs, in order.
    The magic byte and the id only: a Protobuf value's message indexes are read by ``unframe``."""
    n = len(values)
    if None not in values and all(map(HEADER_SIZE.__le__, map(len, values))):  # type: ignore[arg-type]
        # the common case: one join and one unpack of every head, no Python-level step per byte
        heads = b"".join(map(_head, values))  # type: ignore[arg-type]
        ids = [schema_id for _, schema_id in _HEADER.iter_unpack(heads)]
        if not heads[::HEADER_SIZE].strip(b"\x00"):
            return ids, []
        bad = [(i, _magic_reason(magic)) for i, magic in enumerate(heads[::HEADER_SIZE]) if magic != MAGIC]
        for i, _ in bad:
            ids[i] = -1
        return ids, bad
    ids = [-1] * n
    bad = []
    for i, value in enumerate(values):
        if value is None:
            bad.append((i, "the message has no value (null)"))
            continue
        try:
            ids[i] = unframe(value).schema_id
        except WireFormatError as exc:
            bad.append((i, str(exc)))
    return ids, bad
