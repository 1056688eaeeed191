"""Kafka's message formats: v0/v1 message sets and v2 record batches (``kafkalog.record.batch_format``):
encoding, decoding, compression, and validation for the log."""

from kafkalog.record.batch_format import BatchHeader, RecordInput, decode_batch, encode_batch, iter_headers
from kafkalog.record.codec import DEFAULT_MAX_DECOMPRESSED_BYTES, compress, decompress
from kafkalog.record.legacy_builder import MessageSetBuilder, encode_message, entry_size, frame
from kafkalog.record.legacy_format import (
    LEGACY_CODECS,
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    Codec,
    Entry,
    Header,
    Message,
    TimestampType,
)
from kafkalog.record.passthrough import StoredEntries, stored_entries
from kafkalog.record.reader import decode_all, decode_batches, decode_inner, decode_messages, iter_entries

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
    "stored_entries",
]
