"""What every message format decodes to and shares: ``Message`` (a record with its offset,
timestamp, key, value and headers), ``Entry`` (a shallow view of one v0/v1 entry or v2 batch),
``Header``, the ``Codec`` and ``TimestampType`` enums, and the attribute bits that mean the same
in every magic (bits 0-2 the codec, bit 3 the timestamp type).

Format-neutral: the byte layouts are in ``legacy_format`` (magic 0 and 1) and ``batch_format``
(magic 2); this module knows neither.
"""

from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple

CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
NO_TIMESTAMP = -1


class Codec(IntEnum):
    """Compression codec of a message or record batch, stored in attribute bits 0-2 (zstd: magic 2 only)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(IntEnum):
    """Meaning of a magic 1 message's timestamp, stored in attribute bit 3."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


Header = tuple[str, bytes | None]
"""A record header (magic 2): a UTF-8 key and a value that may be null."""


class Message(NamedTuple):
    """One logical message (a "record" in magic 2), decoded (compressed wrappers and batches opened).

    ``offset`` is absolute; ``timestamp`` is -1 for magic 0 messages; for the inner messages of a
    log-append-time wrapper (or batch) it is the wrapper's (the batch's max) timestamp, as every
    Kafka client reports it. ``headers`` are always empty before magic 2.
    """

    offset: int
    timestamp: int
    timestamp_type: TimestampType
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


class Entry(NamedTuple):
    """A shallow view of one MessageSetEntry or record batch: its header fields and where it lies.

    ``size`` counts the whole entry (LOG_OVERHEAD included); ``timestamp`` is -1 for magic 0.
    ``offset`` is the offset of the entry's last message: the stored offset of a v0/v1 entry (a
    compressed wrapper stores its last), a batch's base offset + last offset delta. For a magic 2
    batch, ``crc`` is its CRC-32C, ``attributes`` its 16-bit attributes and ``timestamp`` its
    max timestamp.
    """

    offset: int
    position: int
    size: int
    crc: int
    magic: int
    attributes: int
    timestamp: int

    @property
    def codec(self) -> Codec:
        return Codec(self.attributes & CODEC_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        if self.magic == 0:
            return TimestampType.CREATE_TIME
        return TimestampType((self.attributes & TIMESTAMP_TYPE_MASK) >> 3)

    @property
    def end(self) -> int:
        return self.position + self.size
