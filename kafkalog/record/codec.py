"""Batch compression codecs as Kafka clients frame them: gzip, snappy (xerial-framed), lz4, zstd.

Decompression is bounded: a payload may never expand beyond ``max_size`` bytes, so a small
malicious message cannot make us allocate gigabytes (a "decompression bomb").

Framings that real clients use and that we must read and write byte-compatibly:
- gzip: a plain gzip stream (RFC 1952).
- snappy: the Java clients and kafka-python write the xerial "blocking" stream:
      header (16 bytes) = 0x82 "SNAPPY" 0x00, int32 version = 1, int32 compat = 1
      then blocks of  int32 compressed length (big-endian) + one raw snappy block
  librdkafka writes one raw snappy block without framing. We read both and write xerial.
- lz4: an LZ4 frame with independent blocks and no content size (Kafka's Java reader rejects
  dependent blocks and content sizes). Before KIP-57, magic 0 producers computed the frame header
  checksum over the 4 magic bytes as well as the descriptor; magic 0 payloads use that broken
  checksum both ways, magic 1 and 2 payloads use the correct one.
- zstd (magic 2 only, KIP-110): zstd frames. The Java clients' ZstdOutputStream states no content
  size in the frame header, librdkafka does; we read both (and frames back to back, as Java does)
  and write one frame with its content size.
"""

from __future__ import annotations

import struct
import zlib

import cramjam
import lz4.frame
import snappy
import xxhash

from kafkalog.errors import CorruptRecordError, RecordTooLargeError, UnsupportedCodecError
from kafkalog.record.message import Codec

DEFAULT_MAX_DECOMPRESSED_BYTES = 64 * 1024 * 1024
"""Largest decompressed payload accepted unless a caller says otherwise."""

XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
XERIAL_BLOCK_SIZE = 32 * 1024  # the xerial library's default uncompressed block size
_BLOCK_LENGTH = struct.Struct(">i")

_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_CONTENT_SIZE_FLAG = 0x08
_GZIP_WBITS = 16 + zlib.MAX_WBITS  # gzip container
_GZIP_OR_ZLIB_WBITS = 32 + zlib.MAX_WBITS  # auto-detect on input
_ZSTD_LEVEL = 3  # zstd's and the Java clients' default
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_ZSTD_FIRST_GUESS = 64 * 1024
_LZ4_FIRST_GUESS = 1 << 20
_LZ4_MOST_PER_ROUND = 16 << 20


def compress(codec: Codec, data: bytes | bytearray | memoryview, *, magic: int = 1) -> bytes:
    """Compress ``data`` (an encoded inner message set) the way Kafka clients do for ``codec``."""
    if codec == Codec.GZIP:
        compressor = zlib.compressobj(6, zlib.DEFLATED, _GZIP_WBITS)
        return compressor.compress(data) + compressor.flush()
    if codec == Codec.SNAPPY:
        return _snappy_xerial_compress(data)
    if codec == Codec.LZ4:
        frame = lz4.frame.compress(
            data,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            store_size=False,
        )
        return _lz4_set_header_checksum(frame, legacy=(magic == 0))
    if codec == Codec.ZSTD:
        return bytes(cramjam.zstd.compress(bytes(data), level=_ZSTD_LEVEL))
    raise UnsupportedCodecError(f"cannot compress with codec {codec!r}")


def decompress(
    codec: Codec,
    data: bytes | bytearray | memoryview,
    *,
    magic: int = 1,
    max_size: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> bytes:
    """Decompress a wrapper message's value; never returns more than ``max_size`` bytes.

    Raises CorruptRecordError when the payload is not valid for ``codec`` and RecordTooLargeError
    when it would expand beyond ``max_size``.
    """
    try:
        if codec == Codec.GZIP:
            return _gzip_decompress(data, max_size)
        if codec == Codec.SNAPPY:
            return _snappy_decompress(bytes(data), max_size)
        if codec == Codec.LZ4:
            return _lz4_decompress(bytes(data), magic, max_size)
        if codec == Codec.ZSTD:
            return _zstd_decompress(data, max_size)
    except (RecordTooLargeError, CorruptRecordError):
        raise
    except Exception as exc:  # each library raises its own types for bad input
        raise CorruptRecordError(f"{Codec(codec).name.lower()} payload does not decompress: {exc}") from exc
    raise UnsupportedCodecError(f"unknown compression codec {int(codec)}")


def _too_large(max_size: int) -> RecordTooLargeError:
    return RecordTooLargeError(f"compressed payload expands beyond the limit of {max_size} bytes")


def _gzip_decompress(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    # A gzip stream may hold several members back to back (RFC 1952); Java's GZIPInputStream and
    # kafka-python read them all, so must we. Bytes after a member that are not one are corrupt.
    parts: list[bytes] = []
    produced = 0
    remaining = bytes(data)
    while True:
        decompressor = zlib.decompressobj(_GZIP_OR_ZLIB_WBITS)
        part = decompressor.decompress(remaining, max_size - produced + 1)
        produced += len(part)
        if produced > max_size or decompressor.unconsumed_tail:
            raise _too_large(max_size)
        if not decompressor.eof:
            raise CorruptRecordError("gzip payload is truncated")
        parts.append(part)
        remaining = decompressor.unused_data
        if not remaining:
            return b"".join(parts)


def _snappy_xerial_compress(data: bytes | bytearray | memoryview) -> bytes:
    view = memoryview(data)
    parts = [XERIAL_HEADER]
    for start in range(0, len(view), XERIAL_BLOCK_SIZE):
        block = snappy.compress(bytes(view[start : start + XERIAL_BLOCK_SIZE]))
        parts.append(_BLOCK_LENGTH.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_raw_decompress(block: bytes, budget: int, max_size: int) -> bytes:
    # The raw format states its uncompressed length up front: check it before allocating.
    if cramjam.snappy.decompress_raw_len(block) > budget:
        raise _too_large(max_size)
    return bytes(cramjam.snappy.decompress_raw(block))


def _snappy_decompress(data: bytes, max_size: int) -> bytes:
    if not data.startswith(XERIAL_HEADER[:8]):
        return _snappy_raw_decompress(data, max_size, max_size)
    if len(data) < len(XERIAL_HEADER):
        raise CorruptRecordError("xerial snappy header is truncated")
    parts: list[bytes] = []
    produced = 0
    position = len(XERIAL_HEADER)
    while position < len(data):
        if position + 4 > len(data):
            raise CorruptRecordError("xerial snappy block length is truncated")
        (length,) = _BLOCK_LENGTH.unpack_from(data, position)
        position += 4
        if length < 0 or position + length > len(data):
            raise CorruptRecordError(f"xerial snappy block length {length} runs past the payload")
        block = _snappy_raw_decompress(data[position : position + length], max_size - produced, max_size)
        produced += len(block)
        parts.append(block)
        position += length
    return b"".join(parts)


def _lz4_header_length(frame: bytes) -> int:
    if len(frame) < 7 or not frame.startswith(_LZ4_MAGIC):
        raise CorruptRecordError("lz4 payload does not start with an LZ4 frame header")
    flags = frame[4]
    return 7 + (8 if flags & _LZ4_CONTENT_SIZE_FLAG else 0)


def _lz4_set_header_checksum(frame: bytes, *, legacy: bool) -> bytes:
    """Rewrite the frame descriptor's checksum byte: correct (KIP-57) or legacy (magic 0)."""
    header_length = _lz4_header_length(frame)
    covered = frame[0 : header_length - 1] if legacy else frame[4 : header_length - 1]
    checksum = (xxhash.xxh32_intdigest(covered) >> 8) & 0xFF
    return frame[: header_length - 1] + bytes((checksum,)) + frame[header_length:]


def _lz4_decompress(data: bytes, magic: int, max_size: int) -> bytes:
    if magic == 0:
        data = _lz4_set_header_checksum(data, legacy=False)
    # In rounds of 1 MiB, doubling to 16 MiB, up to max_size + 1 in all. The binding is slow both
    # ways (measured on a batch of 200 KB, 10 us at best): given 32 MiB or more (our limit is 64) it
    # took 97 us, and under about 512 KiB, room too tight for its 64 KiB blocks, 130 us.
    decompressor = lz4.frame.LZ4FrameDecompressor()
    parts: list[bytes] = []
    total, room, pending = 0, _LZ4_FIRST_GUESS, data
    while True:
        part: bytes = decompressor.decompress(pending, max_length=min(room, max_size + 1 - total))
        pending = b""
        parts.append(part)
        total += len(part)
        if total > max_size:
            raise _too_large(max_size)
        if decompressor.eof or decompressor.needs_input:
            break
        room = min(room * 2, _LZ4_MOST_PER_ROUND)
    if not decompressor.eof:
        raise CorruptRecordError("lz4 frame is truncated")
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _zstd_content_size(data: bytes) -> int | None:
    """The decompressed size the first frame's header states, or None when it states none."""
    if len(data) < 6 or not data.startswith(_ZSTD_MAGIC):
        raise CorruptRecordError("zstd payload does not start with a zstd frame")
    descriptor = data[4]
    size_flag, single_segment, dictionary_flag = descriptor >> 6, (descriptor >> 5) & 1, descriptor & 3
    field = (1 if single_segment else 0, 2, 4, 8)[size_flag]
    if field == 0:
        return None
    start = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[dictionary_flag]
    if len(data) < start + field:
        raise CorruptRecordError("zstd frame header is truncated")
    size = int.from_bytes(data[start : start + field], "little")
    return size + 256 if field == 2 else size


def _zstd_decompress(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    # Into a buffer of bounded size: the stated content size when there is one (never believed
    # beyond max_size), else a guess doubled until the frames fit or the limit is reached. The
    # buffer holds one byte more than allowed, so "fits exactly at the limit" is told from "larger".
    payload = bytes(data)
    stated = _zstd_content_size(payload)
    if stated is not None and stated > max_size:
        raise _too_large(max_size)
    capacity = min(max_size, stated if stated is not None else max(_ZSTD_FIRST_GUESS, 4 * len(payload)))
    while True:
        out = bytearray(capacity + 1)
        try:
            written = cramjam.zstd.decompress_into(payload, out)
        except cramjam.DecompressionError as exc:
            if "whole buffer" not in str(exc):
                raise CorruptRecordError(f"zstd payload does not decompress: {exc}") from exc
            if capacity >= max_size:
                raise _too_large(max_size) from None
            capacity = min(max_size, capacity * 4)
            continue
        if written > max_size:
            raise _too_large(max_size)
        del out[written:]
        return bytes(out)
