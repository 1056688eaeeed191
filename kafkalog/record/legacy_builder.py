"""Encoding messages and message sets (magic 0 and 1, uncompressed or as one compressed wrapper)."""

from __future__ import annotations

import zlib
from collections.abc import Iterable

from kafkalog.errors import InvalidTimestampError, UnsupportedCodecError
from kafkalog.record.codec import compress
from kafkalog.record.legacy_format import (
    ENTRY_HEADER,
    INT32,
    LEGACY_CODECS,
    LOG_OVERHEAD,
    MAGIC_ATTRIBUTES,
    MAGIC_ATTRIBUTES_TIMESTAMP,
    MAGIC_VALUES,
    MESSAGE_OVERHEAD,
    NULL_LENGTH,
    UINT32,
)
from kafkalog.record.message import CODEC_MASK, NO_TIMESTAMP, Codec, TimestampType

_NULL = INT32.pack(NULL_LENGTH)


def encode_message(*, magic: int, attributes: int, timestamp: int, key: bytes | None, value: bytes | None) -> bytes:
    """Encode one Message (Crc .. Value), without the Offset and MessageSize of its entry."""
    if magic == 1:
        head = MAGIC_ATTRIBUTES_TIMESTAMP.pack(1, attributes, timestamp)
    elif magic == 0:
        head = MAGIC_ATTRIBUTES.pack(0, attributes)
    else:
        raise ValueError(f"magic must be 0 or 1, not {magic}")
    body = b"".join(
        (
            head,
            _NULL if key is None else INT32.pack(len(key)),
            b"" if key is None else key,
            _NULL if value is None else INT32.pack(len(value)),
            b"" if value is None else value,
        )
    )
    return UINT32.pack(zlib.crc32(body)) + body


def frame(offset: int, message: bytes) -> bytes:
    """Prefix an encoded Message with its entry header (Offset, MessageSize)."""
    return ENTRY_HEADER.pack(offset, len(message)) + message


def entry_size(magic: int, key: bytes | None, value: bytes | None) -> int:
    """Bytes one uncompressed entry with this key and value takes in a message set."""
    return (
        LOG_OVERHEAD + MESSAGE_OVERHEAD[magic] + (0 if key is None else len(key)) + (0 if value is None else len(value))
    )


class MessageSetBuilder:
    """Accumulates messages and encodes them as one message set.

    Uncompressed, every message becomes one entry with offset ``base_offset + i``. Compressed, the
    messages become the inner set of a single wrapper entry: inner offsets are relative (0..n-1) in
    magic 1 and absolute in magic 0; the wrapper's offset is that of the last inner message and, in
    magic 1 with create time, its timestamp is the largest inner timestamp.

    Magic 0 has no timestamp field: timestamps given for magic 0 are dropped. Not thread-safe.
    """

    def __init__(
        self,
        *,
        magic: int = 1,
        codec: Codec = Codec.NONE,
        base_offset: int = 0,
        timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    ) -> None:
        if magic not in MAGIC_VALUES:
            raise ValueError(f"magic must be 0 or 1, not {magic}")
        if magic == 0 and timestamp_type != TimestampType.CREATE_TIME:
            raise ValueError("magic 0 messages have no timestamp type")
        self.magic = magic
        self.codec = Codec(codec)
        if self.codec not in LEGACY_CODECS:
            raise UnsupportedCodecError(f"{self.codec.name.lower()} needs message format v2 (record batches)")
        self.base_offset = base_offset
        self.timestamp_type = timestamp_type
        self._messages: list[tuple[bytes | None, bytes | None, int]] = []
        self._size = 0

    def append(self, value: bytes | None, key: bytes | None = None, timestamp: int | None = None) -> None:
        """Add one message; ``timestamp`` in ms since the epoch, None meaning -1 (none)."""
        ts = NO_TIMESTAMP if timestamp is None else timestamp
        if ts < NO_TIMESTAMP:
            raise InvalidTimestampError(f"timestamp {ts} is negative and not -1 (none)")
        self._messages.append((key, value, ts))
        self._size += entry_size(self.magic, key, value)

    def extend(self, messages: Iterable[tuple[bytes | None, bytes | None, int | None]]) -> None:
        """Add many (key, value, timestamp) triples."""
        for key, value, timestamp in messages:
            self.append(value, key, timestamp)

    def __len__(self) -> int:
        return len(self._messages)

    @property
    def uncompressed_size(self) -> int:
        """Bytes the messages take as an uncompressed message set."""
        return self._size

    def build(self) -> bytes:
        """Encode the accumulated messages as a message set (empty bytes for no messages)."""
        if not self._messages:
            return b""
        if self.codec == Codec.NONE:
            return self._encode_entries(self.base_offset, self._attributes(Codec.NONE))
        inner_base = 0 if self.magic == 1 else self.base_offset
        inner = self._encode_entries(inner_base, self._attributes(Codec.NONE))
        wrapper_timestamp = max(ts for _, _, ts in self._messages) if self.magic == 1 else NO_TIMESTAMP
        wrapper = encode_message(
            magic=self.magic,
            attributes=self._attributes(self.codec),
            timestamp=wrapper_timestamp,
            key=None,
            value=compress(self.codec, inner, magic=self.magic),
        )
        return frame(self.base_offset + len(self._messages) - 1, wrapper)

    def _attributes(self, codec: Codec) -> int:
        return (codec & CODEC_MASK) | (self.timestamp_type << 3 if self.magic == 1 else 0)

    def _encode_entries(self, first_offset: int, attributes: int) -> bytes:
        magic = self.magic
        return b"".join(
            frame(
                first_offset + i,
                encode_message(magic=magic, attributes=attributes, timestamp=ts, key=key, value=value),
            )
            for i, (key, value, ts) in enumerate(self._messages)
        )
