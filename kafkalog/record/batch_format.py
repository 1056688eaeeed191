"""Kafka's message format v2 (magic 2): record batches (KIP-98), the same bytes on disk and wire.

    RecordBatch =>                          61 bytes of header, then the records
      BaseOffset           int64    offset of the batch's first record
      BatchLength          int32    bytes that follow this field (so a batch takes BatchLength + 12)
      PartitionLeaderEpoch int32    set by the broker; -1 from producers
      Magic                int8     2, at byte 16 like the magic of v0/v1 entries
      CRC                  uint32   CRC-32C (Castagnoli) of every byte from Attributes to the end
      Attributes           int16    bits 0-2 codec (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd)
                                    bit 3 timestamp type (0 create time, 1 log-append time)
                                    bit 4 transactional, bit 5 control, bit 6 delete horizon set
      LastOffsetDelta      int32    offset of the last record - BaseOffset
      BaseTimestamp        int64    timestamp of the first record (record timestamps are deltas)
      MaxTimestamp         int64    greatest record timestamp (log-append time: the broker's clock)
      ProducerId           int64    -1 unless idempotent or transactional
      ProducerEpoch        int16    -1 likewise
      BaseSequence         int32    -1 likewise; else the sequence number of the first record
      RecordsCount         int32    number of records
      Records              [Record] compressed as one payload when the codec is not none

    Record =>                               varints are zigzag-encoded, like protobuf's sint32/64
      Length               varint   bytes that follow this field
      Attributes           int8     unused, 0
      TimestampDelta       varlong  timestamp - BaseTimestamp
      OffsetDelta          varint   offset - BaseOffset
      KeyLength            varint   -1 for a null key
      Key                  bytes
      ValueLength          varint   -1 for a null value
      Value                bytes
      HeadersCount         varint
      Headers              [HeaderKeyLength varint, HeaderKey UTF-8, HeaderValueLength varint
                            (-1 null), HeaderValue]

Offsets are given per batch: a broker assigns BaseOffset and keeps the deltas. A decoded record is a
``Message`` (kafkalog.record.message) with its headers; with log-append time every record reports
the batch's MaxTimestamp, as Kafka's clients do.

The per-record loops (``decode_records``, ``encode_records``) are kernels in the sense of
``kafkalog.record.kernels``: the C extension implements the same functions with the same results,
and this module uses whichever is loaded.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

from kafkalog.errors import CorruptRecordError
from kafkalog.record import kernels
from kafkalog.record.codec import DEFAULT_MAX_DECOMPRESSED_BYTES, compress, decompress
from kafkalog.record.message import NO_TIMESTAMP, Codec, Header, Message, TimestampType

Buffer = bytes | bytearray | memoryview

MAGIC = 2
BATCH_HEADER = struct.Struct(
    ">q"  # BaseOffset
    "i"  # BatchLength
    "i"  # PartitionLeaderEpoch
    "b"  # Magic
    "I"  # CRC
    "h"  # Attributes
    "i"  # LastOffsetDelta
    "q"  # BaseTimestamp
    "q"  # MaxTimestamp
    "q"  # ProducerId
    "h"  # ProducerEpoch
    "i"  # BaseSequence
    "i"  # RecordsCount
)
BATCH_OVERHEAD = BATCH_HEADER.size  # 61
LENGTH_POS = 8
LOG_OVERHEAD = 12  # BaseOffset + BatchLength: the bytes a BatchLength does not count
LEADER_EPOCH_POS = 12
MAGIC_POS = 16
CRC_POS = 17
ATTRIBUTES_POS = 21  # the CRC covers [ATTRIBUTES_POS, end of batch)
LAST_OFFSET_DELTA_POS = 23
RECORDS_POS = BATCH_OVERHEAD
MIN_BATCH_LENGTH = BATCH_OVERHEAD - LOG_OVERHEAD  # 49: a batch of no records

CODEC_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
DELETE_HORIZON_BIT = 0x40
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

_CRC_STRUCT = struct.Struct(">I")


class BatchHeader(NamedTuple):
    """The header of one record batch and where the batch lies in its buffer."""

    position: int
    base_offset: int
    length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch takes (header included)."""
        return self.length + LOG_OVERHEAD

    @property
    def end(self) -> int:
        return self.position + self.size

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def codec(self) -> Codec:
        try:
            return Codec(self.attributes & CODEC_MASK)
        except ValueError:
            raise CorruptRecordError(
                f"record batch at offset {self.base_offset} names unknown codec {self.attributes & CODEC_MASK}",
                offset=self.base_offset,
                position=self.position,
            ) from None

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType.LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_BIT else TimestampType.CREATE_TIME

    @property
    def transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)


def is_batch(buf: Buffer, pos: int = 0) -> bool:
    """Whether the entry at ``pos`` is a magic 2 batch (its magic byte is readable and says 2)."""
    return len(buf) > pos + MAGIC_POS and buf[pos + MAGIC_POS] == MAGIC


def read_header(buf: Buffer, pos: int = 0, end: int | None = None) -> BatchHeader:
    """The header of the batch at ``pos``; CorruptRecordError unless a whole magic 2 batch with a
    plausible length lies within ``buf[pos:end]`` (the CRC is not checked here: see ``check_crc``)."""
    stop = len(buf) if end is None else end
    if stop - pos < BATCH_OVERHEAD:
        raise CorruptRecordError(f"record batch at byte {pos} is truncated: {stop - pos} bytes", position=pos)
    header = BatchHeader(pos, *BATCH_HEADER.unpack_from(buf, pos))
    if header.magic != MAGIC:
        raise CorruptRecordError(f"entry at byte {pos} has magic {header.magic}, not 2", position=pos)
    if header.length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            f"record batch at offset {header.base_offset} states a length of {header.length} bytes, "
            f"less than its own header ({MIN_BATCH_LENGTH})",
            offset=header.base_offset,
            position=pos,
        )
    if header.end > stop:
        raise CorruptRecordError(
            f"record batch at offset {header.base_offset} is truncated: {header.size} bytes stated, "
            f"{stop - pos} present",
            offset=header.base_offset,
            position=pos,
        )
    if header.records_count < 0 or header.last_offset_delta < 0 or header.records_count > header.last_offset_delta + 1:
        raise CorruptRecordError(
            f"record batch at offset {header.base_offset} states {header.records_count} records with a last "
            f"offset delta of {header.last_offset_delta}",
            offset=header.base_offset,
            position=pos,
        )
    return header


def batch_crc(buf: Buffer, header: BatchHeader) -> int:
    """The CRC-32C the batch's bytes have (compare with ``header.crc``)."""
    view = memoryview(buf)
    return int(kernels.crc32c(view[header.position + ATTRIBUTES_POS : header.end]))


def check_crc(buf: Buffer, header: BatchHeader) -> None:
    actual = batch_crc(buf, header)
    if actual != header.crc:
        raise CorruptRecordError(
            f"record batch at offset {header.base_offset} fails its CRC-32C check "
            f"(stored {header.crc:#010x}, computed {actual:#010x})",
            offset=header.base_offset,
            position=header.position,
        )


def iter_headers(
    buf: Buffer, *, start: int = 0, end: int | None = None, verify_crc: bool = True
) -> Iterator[BatchHeader]:
    """Shallow walk over whole magic 2 batches in ``buf[start:end]`` (nothing decompressed)."""
    stop = len(buf) if end is None else end
    pos = start
    while pos < stop:
        header = read_header(buf, pos, stop)
        if verify_crc:
            check_crc(buf, header)
        yield header
        pos = header.end


def records_payload(
    buf: Buffer, header: BatchHeader, *, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED_BYTES
) -> bytes | memoryview:
    """The batch's Records bytes: a view into ``buf`` when uncompressed, else decompressed."""
    view = memoryview(buf)[header.position + RECORDS_POS : header.end]
    codec = header.codec
    if codec == Codec.NONE:
        return view
    try:
        return decompress(codec, view, magic=MAGIC, max_size=max_decompressed)
    except CorruptRecordError as exc:
        raise CorruptRecordError(
            f"record batch at offset {header.base_offset}: {exc}", offset=header.base_offset, position=header.position
        ) from exc


def decode_batch(
    buf: Buffer,
    pos: int = 0,
    *,
    end: int | None = None,
    verify_crc: bool = True,
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> tuple[BatchHeader, list[Message]]:
    """The header and the records of the batch at ``pos``, each record a Message with headers.

    CorruptRecordError when the batch or any record is malformed (every length checked against
    what is present, nothing read past the batch), RecordTooLargeError when it decompresses beyond
    ``max_decompressed`` bytes.
    """
    header = read_header(buf, pos, end)
    if verify_crc:
        check_crc(buf, header)
    payload = records_payload(buf, header, max_decompressed=max_decompressed)
    records, error = kernels.decode_records(
        payload,
        header.records_count,
        header.base_offset,
        header.base_timestamp,
        header.max_timestamp,
        header.last_offset_delta,
        bool(header.attributes & TIMESTAMP_TYPE_BIT),
    )
    if error is not None:
        _, where, reason = error
        raise CorruptRecordError(
            f"record batch at offset {header.base_offset}: {reason} (byte {where} of its records)",
            offset=header.base_offset,
            position=header.position,
        )
    return header, records


def decode_batches(
    buf: Buffer, *, start: int = 0, end: int | None = None, verify_crc: bool = True
) -> Iterator[tuple[BatchHeader, list[Message]]]:
    """Every batch of ``buf[start:end]``, decoded."""
    stop = len(buf) if end is None else end
    pos = start
    while pos < stop:
        header, records = decode_batch(buf, pos, end=stop, verify_crc=verify_crc)
        yield header, records
        pos = header.end


class RecordInput(NamedTuple):
    """One record to encode: what a producer sends."""

    key: bytes | None
    value: bytes | None
    timestamp: int = NO_TIMESTAMP
    headers: Sequence[Header] = ()


def encode_batch(
    records: Iterable[RecordInput | tuple[bytes | None, bytes | None, int, Sequence[Header]]],
    *,
    base_offset: int = 0,
    codec: Codec = Codec.NONE,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    transactional: bool = False,
    control: bool = False,
) -> bytes:
    """One record batch of ``records`` (offsets base_offset, base_offset+1, ...).

    A record timestamp of -1 (none given) is stored as the batch's base timestamp, which is the
    first given timestamp (-1 if none is given at all), as the Java producer does.
    """
    items = records if isinstance(records, list | tuple) else list(records)
    if not items:
        raise ValueError("a record batch needs at least one record")
    base_timestamp, max_timestamp = kernels.batch_timestamps(items)
    body = kernels.encode_records(items, base_timestamp)  # a header key that is not a str: TypeError
    if codec != Codec.NONE:
        body = compress(codec, body, magic=MAGIC)
    attributes = int(codec) | (TIMESTAMP_TYPE_BIT if timestamp_type == TimestampType.LOG_APPEND_TIME else 0)
    attributes |= (TRANSACTIONAL_BIT if transactional else 0) | (CONTROL_BIT if control else 0)
    head = bytearray(
        BATCH_HEADER.pack(
            base_offset,
            BATCH_OVERHEAD - LOG_OVERHEAD + len(body),
            partition_leader_epoch,
            MAGIC,
            0,
            attributes,
            len(items) - 1,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            len(items),
        )
    )
    out = head + body
    _CRC_STRUCT.pack_into(out, CRC_POS, kernels.crc32c(memoryview(out)[ATTRIBUTES_POS:]))
    return bytes(out)


_PRODUCER = struct.Struct(">qhi")  # ProducerId, ProducerEpoch, BaseSequence
_PRODUCER_POS = 43


def without_producer(data: bytes | memoryview) -> bytes | memoryview:
    """``data`` (whole magic 2 batches) with each idempotent producer's id, epoch and sequence
    cleared (CRC recomputed), as a mirror must send batches it copies: producer ids are handed out
    per cluster, so two source clusters' producers share ids and sequences, and a target that kept
    them would take the second cluster's batches for retries of the first's and drop them.
    Transactional batches keep theirs (their markers refer to them). Returns ``data`` itself when
    nothing needed clearing."""
    copy: bytearray | None = None
    for header in iter_headers(data, verify_crc=False):
        if header.producer_id == NO_PRODUCER_ID or header.attributes & TRANSACTIONAL_BIT:
            continue
        if copy is None:
            copy = bytearray(data)
        _PRODUCER.pack_into(copy, header.position + _PRODUCER_POS, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE)
        crc = kernels.crc32c(memoryview(copy)[header.position + ATTRIBUTES_POS : header.end])
        _CRC_STRUCT.pack_into(copy, header.position + CRC_POS, crc)
    return data if copy is None else bytes(copy)


def with_producer(data: bytes | memoryview, producer_id: int, producer_epoch: int, base_sequence: int) -> bytes:
    """One whole magic 2 batch (``data``) as this producer's: its producer id, epoch and first
    sequence set (CRC recomputed) and its base offset 0, as a producer numbers a batch it sends on
    from elsewhere (a mirror) so that the batch is pipelined and retried like its own (Kafka
    refuses a produced batch whose base offset is not 0 with INVALID_RECORD)."""
    header = read_header(data, 0, len(data))
    if header.end != len(data):
        raise ValueError(
            f"with_producer takes one batch: {len(data)} bytes hold more than the {header.end} of the first"
        )
    copy = bytearray(data)
    _PRODUCER.pack_into(copy, _PRODUCER_POS, producer_id, producer_epoch, base_sequence)
    _CRC_STRUCT.pack_into(copy, CRC_POS, kernels.crc32c(memoryview(copy)[ATTRIBUTES_POS:]))
    set_base_offset(copy, 0, 0)  # outside the CRC
    return bytes(copy)


def set_base_offset(buf: bytearray, pos: int, base_offset: int) -> None:
    """Give the batch at ``pos`` its offsets (the broker's assignment); the CRC does not cover them."""
    struct.pack_into(">q", buf, pos, base_offset)
