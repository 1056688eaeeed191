"""A producer's batches as the bytes of Produce requests, in the format the broker takes: magic 2
record batches (Produce v3+), else message sets of magic 1 (Produce v2) or 0. A batch's messages are
encoded with the producer's codec, numbered when the producer has an id; a set given already
encoded (``send_set``) goes as it is where it can, converted where the broker needs another format,
one record batch per part (``set_parts``). A batch keeps the bytes it was first sent as: a retry
sends the same bytes.
"""

from __future__ import annotations

from typing import Protocol

from kafkalog.client.producer_batch import ProducerBatch
from kafkalog.errors import UnsupportedByBrokerError
from kafkalog.record import Codec, MessageSetBuilder, TimestampType, encode_batch, iter_entries
from kafkalog.record.batch_format import (
    MAGIC,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TRANSACTIONAL_BIT,
    RecordInput,
    decode_batches,
    read_header,
    set_base_offset,
    with_producer,
    without_producer,
)
from kafkalog.record.convert import DEFAULT_MAX_BATCH_BYTES, needs_conversion, to_batches, to_magic


class Numbering(Protocol):
    """What encoding needs of the producer's idempotence (kafkalog.client.idempotence.Idempotence):
    its (producer id, epoch) once it has one, whether its batches belong to transactions, and the
    first sequence number of a batch."""

    identity: tuple[int, int] | None
    transactional: bool

    def first_sequence(self, batch: ProducerBatch, span: int) -> int: ...


def encode(batch: ProducerBatch, magic: int, codec: Codec, idempotence: Numbering) -> bytes | memoryview:
    """The batch's bytes in format ``magic``, numbered when the producer has an id; the same
    bytes for every retry."""
    if batch.encoded is not None and batch.encoded[0] == magic:
        return batch.encoded[1]
    record_set: bytes | memoryview
    if batch.stored is not None:
        record_set = _stored_as(batch.stored, magic)
        if magic == 2:
            record_set = _one_batch(record_set)  # what Produce v3+ takes of a partition
            if idempotence.identity is not None and not batch.alone:
                # numbered as this producer's own (another cluster's ids mean nothing here):
                # pipelined, and a retry of it is recognised
                producer_id, epoch = idempotence.identity
                span = read_header(record_set, 0, len(record_set)).last_offset_delta + 1
                batch.sequence = idempotence.first_sequence(batch, span)
                record_set = with_producer(record_set, producer_id, epoch, batch.sequence)
            else:  # see without_producer: a transaction's batches keep theirs
                record_set = _from_offset_zero(without_producer(record_set))
    elif magic == 2:
        producer_id, epoch = idempotence.identity or (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        if idempotence.identity is not None:
            batch.sequence = idempotence.first_sequence(batch, batch.count)
        record_set = encode_batch(
            batch.messages,
            codec=codec,
            producer_id=producer_id,
            producer_epoch=epoch,
            base_sequence=batch.sequence,
            transactional=idempotence.transactional and idempotence.identity is not None,
        )
    else:
        record_set = _legacy_set(batch, magic, codec)
    batch.encoded = (magic, record_set)
    return record_set


def _legacy_set(batch: ProducerBatch, magic: int, codec: Codec) -> bytes:
    """A batch as a message set of format ``magic`` (0 or 1), for a broker older than record batches."""
    if codec == Codec.ZSTD:
        raise UnsupportedByBrokerError("zstd needs a broker that takes record batches (Kafka 0.11+)")
    if any(headers for *_, headers in batch.messages):
        raise UnsupportedByBrokerError("headers need a broker that takes record batches (Kafka 0.11+)")
    builder = MessageSetBuilder(magic=magic, codec=codec, timestamp_type=TimestampType.CREATE_TIME)
    for key, value, timestamp, _ in batch.messages:
        builder.append(value, key, timestamp if magic == 1 else None)
    return builder.build()


def set_parts(data: bytes | memoryview) -> list[tuple[bytes | memoryview, bool, int]]:
    """A set given to ``Producer.send_set`` as the parts that go in Produce requests, each (bytes, goes
    alone, offsets it spans): a broker of Produce v3+ takes one record batch per partition in a
    request (Kafka refuses more with INVALID_RECORD), so each magic 2 batch is a part of its own,
    and so is each compressed v0/v1 wrapper (it becomes one batch of its codec); a run of plain
    v0/v1 messages is one part (it becomes one batch). Only a transaction's batch goes alone."""
    view = memoryview(data)
    parts: list[tuple[bytes | memoryview, bool, int]] = []
    plain_start = -1
    plain_span = 0

    def end_plain(at: int) -> None:
        nonlocal plain_start
        if plain_start >= 0:
            parts.append((view[plain_start:at], False, plain_span))
            plain_start = -1

    for entry in iter_entries(view, verify_crc=False):
        if entry.magic != MAGIC and entry.codec == Codec.NONE:
            if plain_start >= 0 and entry.position + entry.size - plain_start > DEFAULT_MAX_BATCH_BYTES:
                end_plain(entry.position)  # a batch stays under what a broker takes as one
            if plain_start < 0:
                plain_start, plain_span = entry.position, 0
            plain_span += 1
            continue
        end_plain(entry.position)
        if entry.magic != MAGIC:  # a compressed wrapper: its messages' offsets
            parts.append((view[entry.position : entry.position + entry.size], False, 1))
            continue
        header = read_header(view, entry.position, entry.position + entry.size)
        alone = bool(header.attributes & TRANSACTIONAL_BIT)
        parts.append((view[entry.position : header.end], alone, header.last_offset_delta + 1))
    end_plain(len(view))
    return parts or [(data, True, 0)]


def _from_offset_zero(data: bytes | memoryview) -> bytes | memoryview:
    """One batch with base offset 0, as a producer sends it (Kafka refuses another base offset
    with INVALID_RECORD; the broker assigns the offsets, and the CRC does not cover them)."""
    if read_header(data, 0, len(data)).base_offset == 0:
        return data
    copy = bytearray(data)
    set_base_offset(copy, 0, 0)
    return bytes(copy)


def _one_batch(data: bytes | memoryview) -> bytes | memoryview:
    """``data`` (magic 2 batches) as one batch: itself when it is one; else (v0/v1 entries
    converted, a batch per compressed wrapper) their records re-encoded in one batch."""
    first = read_header(data, 0, len(data))
    if first.end == len(data):
        return data
    records = [RecordInput(m.key, m.value, m.timestamp, m.headers) for _, batch in decode_batches(data) for m in batch]
    return encode_batch(records, codec=Codec(first.codec))


def _stored_as(data: bytes | memoryview, magic: int) -> bytes | memoryview:
    """A set given already encoded, in format ``magic``: as it is when it is that already."""
    if magic == 2:
        return data if all(e.magic == 2 for e in iter_entries(data, verify_crc=False)) else to_batches(data)
    return to_magic(data, magic) if needs_conversion(data, magic) else data


__all__ = ["encode", "set_parts"]
