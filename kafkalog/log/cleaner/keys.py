"""The rule a compacted log puts on appends: every record has a key (Kafka refuses the others).

A compacted log keeps the latest record of each key; a record without one has nothing to be the
latest of, so Kafka's log validator refuses it ("Compacted topic cannot accept message without
key") and its cleaner would drop it. Control batches (transaction markers) carry keys of their own.
"""

from __future__ import annotations

from kafkalog.errors import InvalidRecordError
from kafkalog.record import batch_format as batches
from kafkalog.record import kernels


def refuse_keyless(data: bytes | bytearray | memoryview, where: str) -> None:
    """Raise InvalidRecordError naming the first record of ``data`` (validated magic 2 batches,
    offsets assigned) that has no key; ``where`` names the partition for the message."""
    for header in batches.iter_headers(data, verify_crc=False):
        if header.control:
            continue
        payload = batches.records_payload(data, header)
        records, error = kernels.decode_records(
            payload, header.records_count, header.base_offset, header.base_timestamp,
            header.max_timestamp, header.last_offset_delta, False,
        )  # fmt: skip
        if error is not None:  # validated just before: cannot happen, but never let one through
            raise InvalidRecordError(f"{where}: a record of the batch at offset {header.base_offset}: {error[2]}")
        for record in records:
            if record.key is None:
                raise InvalidRecordError(
                    f"compacted topic cannot accept a message without a key ({where}, the record at "
                    f"offset {record.offset}): cleanup.policy includes compact"
                )
