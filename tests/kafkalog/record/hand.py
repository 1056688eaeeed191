"""Hand-made bytes for the record tests: messages, entries and codec payloads built with struct, zlib,
snappy and lz4 directly, never with kafkalog's own encoders, so that they can serve as an oracle."""

from __future__ import annotations

import struct
import zlib
from typing import NamedTuple

import lz4.frame
import snappy
import xxhash
from hypothesis import HealthCheck, settings

XERIAL_HEADER = (
    b"\x82SNAPPY\x00"  # xerial marker: 0x82, "SNAPPY", NUL
    + struct.pack(">i", 1)  # version
    + struct.pack(">i", 1)  # minimum compatible version
)


def fuzz(max_examples: int) -> settings:
    """Hypothesis settings for this suite: a bounded number of examples and no deadline (slow CI)."""
    return settings(
        max_examples=max_examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def message(
    magic: int,
    key: bytes | None = None,
    value: bytes | None = None,
    *,
    attributes: int = 0,
    timestamp: int = -1,
    key_length: int | None = None,
    value_length: int | None = None,
    crc: int | None = None,
) -> bytes:
    """One Message (Crc .. Value). ``key_length``/``value_length``/``crc`` override the true values
    (to build messages that lie); the CRC is otherwise computed over what was written."""
    body = struct.pack(">B", magic)  # Magic
    body += struct.pack(">B", attributes)  # Attributes
    if magic == 1:
        body += struct.pack(">q", timestamp)  # Timestamp
    if key_length is None:
        key_length = -1 if key is None else len(key)
    body += struct.pack(">i", key_length)  # Key length
    body += key or b""  # Key
    if value_length is None:
        value_length = -1 if value is None else len(value)
    body += struct.pack(">i", value_length)  # Value length
    body += value or b""  # Value
    return struct.pack(">I", zlib.crc32(body) if crc is None else crc) + body  # Crc over Magic .. Value


def entry(offset: int, msg: bytes, *, size: int | None = None) -> bytes:
    """A MessageSetEntry: Offset, MessageSize, Message."""
    return struct.pack(">q", offset) + struct.pack(">i", len(msg) if size is None else size) + msg


def gzip(data: bytes) -> bytes:
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)  # wbits 31: a gzip container
    return compressor.compress(data) + compressor.flush()


def gunzip(data: bytes) -> bytes:
    return zlib.decompress(data, 31)


def snappy_xerial(data: bytes, block: int = 32 * 1024) -> bytes:
    """The xerial framing: header, then blocks of int32 length + one raw snappy block."""
    out = XERIAL_HEADER
    for start in range(0, len(data), block):
        raw = snappy.compress(data[start : start + block])
        out += struct.pack(">i", len(raw)) + raw
    return out


def snappy_unxerial(data: bytes) -> tuple[bytes, list[int]]:
    """Decode a xerial stream by hand; also return the uncompressed size of every block."""
    assert data[:16] == XERIAL_HEADER
    pos, out, sizes = 16, b"", []
    while pos < len(data):
        (length,) = struct.unpack_from(">i", data, pos)
        block = snappy.decompress(data[pos + 4 : pos + 4 + length])
        sizes.append(len(block))
        out += block
        pos += 4 + length
    assert pos == len(data)
    return out, sizes


def lz4_frame(data: bytes, *, legacy_checksum: bool = False) -> bytes:
    """An LZ4 frame with independent blocks and no content size; with ``legacy_checksum`` the header
    checksum is Kafka's pre-KIP-57 one (xxh32 over the 4 magic bytes too)."""
    frame = lz4.frame.compress(data, block_linked=False, store_size=False, content_checksum=False)
    if legacy_checksum:
        frame = frame[:6] + bytes([(xxhash.xxh32_intdigest(frame[:6]) >> 8) & 0xFF]) + frame[7:]
    return frame


class Shallow(NamedTuple):
    """One entry as parsed by hand (see walk)."""

    position: int
    offset: int
    size: int  # whole entry, Offset and MessageSize included
    crc: int
    magic: int
    attributes: int
    timestamp: int
    key: bytes | None
    value: bytes | None


def walk(data: bytes | bytearray) -> list[Shallow]:
    """Parse every entry of a complete, well-formed message set, by hand."""
    out, pos = [], 0
    data = bytes(data)
    while pos < len(data):
        offset, size, crc, magic, attributes = struct.unpack_from(">qiIBB", data, pos)
        end = pos + 12 + size
        assert end <= len(data), "walk() is for complete sets"
        assert zlib.crc32(data[pos + 16 : end]) == crc, f"bad CRC at {pos}"
        field = pos + 18
        timestamp = -1
        if magic == 1:
            (timestamp,) = struct.unpack_from(">q", data, field)
            field += 8
        (key_length,) = struct.unpack_from(">i", data, field)
        field += 4
        key = None if key_length < 0 else data[field : field + key_length]
        field += max(key_length, 0)
        (value_length,) = struct.unpack_from(">i", data, field)
        field += 4
        value = None if value_length < 0 else data[field : field + value_length]
        assert field + max(value_length, 0) == end
        out.append(Shallow(pos, offset, end - pos, crc, magic, attributes, timestamp, key, value))
        pos = end
    return out


def set_offset(data: bytes, offset: int) -> bytes:
    """The first entry's Offset replaced (it is not covered by the CRC), as a broker assigns it."""
    return struct.pack(">q", offset) + data[8:]
