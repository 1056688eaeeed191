"""Kafka's message formats: v0/v1 message sets and v2 record batches: encoding, decoding,
compression, and validation for the log.

A module's name says which format it is about:
- ``legacy_*`` message sets, magic 0 and 1 (``legacy_format`` the byte layout, ``legacy_builder``
  encoding, ``legacy_validate`` a magic 1 log's append, which down-converts record batches it is
  given), as kafka-python's ``legacy_records``; the layout and the builder know nothing else;
- ``batch_*`` record batches, magic 2 (``batch_format`` the layout, encoding and decoding,
  ``batch_validate`` a magic 2 log's append, which up-converts message sets it is given), as
  kafka-python's ``default_records``; the layout knows nothing else;
- a name without either prefix is shared by every format: ``message`` (what every format decodes
  to), ``reader``, ``validate`` (the one entry point of an append), ``validated``, ``convert``,
  ``passthrough``, ``codec``, and the kernels (``kernels``, the C ``_speedups`` and its
  pure-Python twin ``_fastpath``), each taking every entry as its magic says.
"""

from kafkalog.record.batch_format import BatchHeader, RecordInput, decode_batch, encode_batch, iter_headers
from kafkalog.record.codec import DEFAULT_MAX_DECOMPRESSED_BYTES, compress, decompress
from kafkalog.record.legacy_builder import MessageSetBuilder, encode_message, entry_size, frame
from kafkalog.record.legacy_format import LEGACY_CODECS, LOG_OVERHEAD
from kafkalog.record.message import NO_TIMESTAMP, Codec, Entry, Header, Message, TimestampType
from kafkalog.record.passthrough import StoredEntries, stored_entries
from kafkalog.record.reader import (
    decode_all,
    decode_batches,
    decode_inner,
    decode_messages,
    iter_entries,
    last_entry_offset,
)

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED_BYTES",
    "LEGACY_CODECS",
    "LOG_OVERHEAD",
    "NO_TIMESTAMP",
    "BatchHeader",
    "Codec",
    "Entry",
    "Header",
    "Message",
    "MessageSetBuilder",
    "RecordInput",
    "StoredEntries",
    "TimestampType",
    "compress",
    "decode_all",
    "decode_batch",
    "decode_batches",
    "decode_inner",
    "decode_messages",
    "decompress",
    "encode_batch",
    "encode_message",
    "entry_size",
    "frame",
    "iter_entries",
    "iter_headers",
    "last_entry_offset",
    "stored_entries",
]
