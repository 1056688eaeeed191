"""Control batches (KIP-98): the transaction markers a partition leader writes, and the attribute
bits a produced set may not carry.

A transaction marker is one record batch of Kafka's format (kafkalog.record.batch_format) with the
transactional and control bits set, the producer's id and epoch, base sequence -1, and one record:

    ControlRecord key   => Version int16 (0), Type int16 (0 ABORT, 1 COMMIT)
    EndTxnMarker value  => Version int16 (0), CoordinatorEpoch int32

Only the broker writes control batches: a client's produced set holding one is refused
(INVALID_RECORD, as Kafka: "clients may not write control records").
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from kafkalog.errors import CorruptRecordError
from kafkalog.record import batch_format as batches
from kafkalog.record.batch_format import Buffer, RecordInput

ABORT = 0
COMMIT = 1
"""The control record types of a transaction marker (its key's second int16)."""

_KEY = struct.Struct(">hh")  # Version, Type
_VALUE = struct.Struct(">hi")  # Version, CoordinatorEpoch
_VERSION = 0


class Marker(NamedTuple):
    """What a transaction marker says: the transaction committed or aborted, and the epoch of the
    coordinator that decided it."""

    commit: bool
    coordinator_epoch: int


def encode_marker(
    producer_id: int, producer_epoch: int, *, commit: bool, coordinator_epoch: int, timestamp: int, base_offset: int = 0
) -> bytes:
    """One control batch ending ``producer_id``'s transaction: a COMMIT or ABORT marker."""
    key = _KEY.pack(_VERSION, COMMIT if commit else ABORT)
    value = _VALUE.pack(_VERSION, coordinator_epoch)
    return batches.encode_batch(
        [RecordInput(key, value, timestamp)],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=batches.NO_SEQUENCE,
        transactional=True,
        control=True,
    )


def decode_marker(buf: Buffer, pos: int = 0, end: int | None = None) -> Marker:
    """The marker of the control batch at ``pos`` (its CRC checked); CorruptRecordError if the batch
    is not one whole control batch holding a marker record."""
    header, records = batches.decode_batch(buf, pos, end=end)
    if not header.control or len(records) != 1:
        raise CorruptRecordError(
            f"the batch at offset {header.base_offset} is not a transaction marker "
            f"(control {header.control}, {len(records)} records)",
            offset=header.base_offset,
        )
    key, value = records[0].key, records[0].value
    if key is None or len(key) < _KEY.size or value is None or len(value) < _VALUE.size:
        raise CorruptRecordError(f"the marker at offset {header.base_offset} has no key or value of its size")
    _, kind = _KEY.unpack_from(key)
    if kind not in (ABORT, COMMIT):
        raise CorruptRecordError(f"the control record at offset {header.base_offset} has unknown type {kind}")
    _, coordinator_epoch = _VALUE.unpack_from(value)
    return Marker(kind == COMMIT, coordinator_epoch)


_ENTRY_START = struct.Struct(">qi")  # BaseOffset/offset, BatchLength/size: alike in every magic


def batch_attributes(buf: Buffer) -> int:
    """The union of the attributes of every magic 2 batch in ``buf`` (whole entries back to back,
    as validation leaves them); message-set entries (magic 0/1) contribute nothing. A caller tests
    the bits (batch_format.CONTROL_BIT, TRANSACTIONAL_BIT) without decoding anything."""
    union = 0
    pos = 0
    size = len(buf)
    while pos + batches.BATCH_OVERHEAD <= size:
        _, length = _ENTRY_START.unpack_from(buf, pos)
        if buf[pos + batches.MAGIC_POS] == batches.MAGIC:
            union |= int.from_bytes(buf[pos + batches.ATTRIBUTES_POS : pos + batches.ATTRIBUTES_POS + 2], "big")
        if length < 0:
            break
        pos += batches.LOG_OVERHEAD + length
    return union
