"""Down-conversion for old fetchers: magic 2 batches become magic 1 (Fetch v2/v3) or magic 0 (v0/v1)
message sets that kafka-python's own legacy reader accepts, with every offset, key, value and (in
magic 1) timestamp kept; zstd batches become plain entries; older entries pass unchanged."""

from __future__ import annotations

import pytest
from kafka.record.memory_records import MemoryRecords

from kafkalog.record import MessageSetBuilder, decode_messages, iter_entries
from kafkalog.record.batch_format import RecordInput, encode_batch
from kafkalog.record.convert import needs_conversion, to_magic
from kafkalog.record.message import Codec, TimestampType

TS = 1_700_000_000_000


def legacy_read(data: bytes) -> list[tuple[int, int, bytes | None, bytes | None]]:
    out = []
    records = MemoryRecords(data)
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc()
        out += [(r.offset, r.timestamp, r.key, r.value) for r in batch]
    return out


@pytest.mark.parametrize("codec", list(Codec))
@pytest.mark.parametrize("magic", [0, 1])
def test_batches_become_legacy_sets_that_old_readers_accept(codec: Codec, magic: int) -> None:
    stream = encode_batch(
        [RecordInput(b"k%d" % i, b"v" * i, TS + i, [("h", b"dropped")]) for i in range(4)], base_offset=10, codec=codec
    ) + encode_batch([RecordInput(None, b"tail", TS + 9)], base_offset=14)
    assert needs_conversion(stream, magic) and not needs_conversion(stream, 2)
    converted = to_magic(stream, magic)
    assert {e.magic for e in iter_entries(converted)} == {magic}
    expected_codec = Codec.NONE if codec == Codec.ZSTD else codec
    assert next(iter_entries(converted)).codec == expected_codec
    expected = [(10 + i, TS + i if magic else None, b"k%d" % i, b"v" * i) for i in range(4)]
    expected.append((14, TS + 9 if magic else None, None, b"tail"))
    assert legacy_read(converted) == expected  # kafka-python says None for "no timestamp" (magic 0)
    assert [(m.offset, m.headers) for m in decode_messages(converted)] == [(o, ()) for o, *_ in expected]


def test_log_append_time_survives_and_older_entries_pass_unchanged() -> None:
    old = MessageSetBuilder(magic=1, base_offset=0)
    old.extend([(b"a", b"1", TS)])
    stamped = encode_batch(
        [RecordInput(b"b", b"2", TS + 5)], base_offset=1, timestamp_type=TimestampType.LOG_APPEND_TIME
    )
    converted = to_magic(old.build() + stamped + stamped[:-3], 1)  # a cut batch at the end is dropped
    assert converted.startswith(old.build())
    messages = list(decode_messages(converted))
    assert [(m.offset, m.timestamp, m.timestamp_type) for m in messages] == [
        (0, TS, TimestampType.CREATE_TIME), (1, TS + 5, TimestampType.LOG_APPEND_TIME),
    ]  # fmt: skip
    # ... and a compressed log-append-time batch for a magic 0 reader, which has no timestamps
    zipped = encode_batch(
        [RecordInput(b"c", b"3", TS)] * 2, codec=Codec.GZIP, timestamp_type=TimestampType.LOG_APPEND_TIME
    )
    assert [(m.offset, m.timestamp) for m in decode_messages(to_magic(zipped, 0))] == [(0, -1), (1, -1)]
    with pytest.raises(ValueError, match="magic 0 or 1"):
        to_magic(converted, 2)
