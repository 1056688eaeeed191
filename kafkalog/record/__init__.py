"""Kafka message format v0/v1: encoding, decoding, compression, and validation for the log."""

from kafkalog.record.builder import MessageSetBuilder, encode_message, entry_size, frame
from kafkalog.record.codec import DEFAULT_MAX_DECOMPRESSED_BYTES, compress, decompress
from kafkalog.record.format import (
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    Codec,
    Entry,
    Message,
    TimestampType,
)
from kafkalog.record.passthrough import StoredEntries, stored_entries
from kafkalog.record.reader import decode_all, decode_batches, decode_inner, decode_messages, iter_entries

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED_BYTES",
    "LOG_OVERHEAD",
    "NO_TIMESTAMP",
    "Codec",
    "Entry",
    "Message",
    "MessageSetBuilder",
    "StoredEntries",
    "TimestampType",
    "compress",
    "decode_all",
    "decode_batches",
    "decode_inner",
    "decode_messages",
    "decompress",
    "encode_message",
    "entry_size",
    "frame",
    "iter_entries",
    "stored_entries",
]
