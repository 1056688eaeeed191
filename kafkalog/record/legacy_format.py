"""The byte layout of Kafka's message format v0 and v1 (magic 0 and 1), shared by disk and wire.

    MessageSet      => [MessageSetEntry]        no count: a set ends where its bytes end
    MessageSetEntry => Offset MessageSize Message
      Offset        => int64    logical offset; a compressed v1 wrapper carries its LAST inner offset
      MessageSize   => int32    number of bytes of Message that follow
    Message         => Crc Magic Attributes [Timestamp] Key Value
      Crc           => uint32   CRC-32 (IEEE, zlib.crc32) of everything from Magic to the end of Value
      Magic         => int8     0 or 1
      Attributes    => int8     bits 0-2: codec (0 none, 1 gzip, 2 snappy, 3 lz4)
                                bit 3 (magic 1 only): timestamp type (0 create time, 1 log-append time)
      Timestamp     => int64    magic 1 only: milliseconds since the epoch, -1 for "none"
      Key           => int32 length (-1 = null), then the bytes
      Value         => int32 length (-1 = null), then the bytes

A compressed message ("wrapper") holds, as its Value, a whole compressed MessageSet of uncompressed
inner messages of the same magic. Inner offsets are absolute in magic 0 and relative (0..n-1) in
magic 1, where the absolute offset of an inner message is wrapper_offset - last_inner + inner.

Because Offset and MessageSize come first and Magic sits at the same position in both versions, a
reader can always find the next entry and choose the layout of this one from byte 16 alone.

The attribute bits, the codecs and what a message decodes to mean the same in every format: they are
in ``kafkalog.record.message``.
"""

from __future__ import annotations

import struct

from kafkalog.record.message import Codec

# --- positions inside one MessageSetEntry, relative to the entry's first byte
OFFSET_POS = 0
SIZE_POS = 8
CRC_POS = 12
MAGIC_POS = 16  # the CRC covers [MAGIC_POS, end of entry)
ATTRIBUTES_POS = 17
TIMESTAMP_POS = 18  # magic 1 only

LOG_OVERHEAD = 12  # Offset + MessageSize: the bytes of an entry that are not the Message
MESSAGE_V0_OVERHEAD = 4 + 1 + 1 + 4 + 4  # crc, magic, attributes, key length, value length
MESSAGE_V1_OVERHEAD = MESSAGE_V0_OVERHEAD + 8  # ... plus the timestamp
ENTRY_V0_MIN = LOG_OVERHEAD + MESSAGE_V0_OVERHEAD  # 26: smallest possible v0 entry (null key and value)
ENTRY_V1_MIN = LOG_OVERHEAD + MESSAGE_V1_OVERHEAD  # 34
MESSAGE_OVERHEAD = {0: MESSAGE_V0_OVERHEAD, 1: MESSAGE_V1_OVERHEAD}
KEY_LENGTH_POS = {0: 18, 1: 26}  # where the key's length sits inside an entry, per magic

ENTRY_HEADER = struct.Struct(
    ">q"  # Offset
    "i"  # MessageSize
)
MESSAGE_PREFIX = struct.Struct(
    ">q"  # Offset
    "i"  # MessageSize
    "I"  # Crc
    "b"  # Magic
    "b"  # Attributes
)
ENTRY_V0_HEADER = struct.Struct(
    ">q"  # Offset
    "i"  # MessageSize
    "I"  # Crc
    "b"  # Magic (0)
    "b"  # Attributes
    "i"  # Key length
)
ENTRY_V1_HEADER = struct.Struct(
    ">q"  # Offset
    "i"  # MessageSize
    "I"  # Crc
    "b"  # Magic (1)
    "b"  # Attributes
    "q"  # Timestamp
    "i"  # Key length
)
INT32 = struct.Struct(">i")
UINT32 = struct.Struct(">I")
INT64 = struct.Struct(">q")
MAGIC_ATTRIBUTES = struct.Struct(">bb")
MAGIC_ATTRIBUTES_TIMESTAMP = struct.Struct(">bbq")

NULL_LENGTH = -1
MAGIC_VALUES = (0, 1)

LEGACY_CODECS = (Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4)
"""The codecs of message format v0/v1 (zstd came with v2)."""
