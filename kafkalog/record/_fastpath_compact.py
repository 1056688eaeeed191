"""The log cleaner's kernels in pure Python: the reference the C ones (``_speedups_compact.c``) match.

Compaction keeps, of every key, the record with the highest offset. The cleaner first reads the
dirty section of a log into an offset map (key hash → the highest offset seen with that key), then
rewrites the log keeping each record whose offset is at least its key's in the map. These kernels
are the two loops over records, and over the plain record batches that make up most logs:

- ``map_put_records`` / ``map_put_batches``: put keys into the map;
- ``filter_records`` / ``filter_batches``: what of a batch stays.

The offset map is a bytearray of ``MAP_SLOT_BYTES`` slots, open addressing with linear probing:
each slot holds the 128-bit MurmurHash3 (x64, seed 0) of a key, h1 then h2 as little-endian
64-bit words, and the offset as a little-endian int64; an empty slot's offset is -1 (the table
starts as 0xFF bytes). The probe starts at slot ``h1 mod slots``. Both implementations read and
write this layout, so a map built by one is read by the other (tests rely on it). Its memory is
bounded by the table: the caller never lets more than ``max_entries`` keys in (a load factor below
one keeps probes short), and checks the room a batch needs before putting it.

A "plain" batch is a magic 2 batch that is uncompressed and neither transactional nor a control
batch: the batch kernels take those whole and stop at any other whole entry (status 1), which the
cleaner decodes itself (decompression, transactions, markers, v0/v1 messages) and hands to the
record kernels. An entry cut by ``stop`` (of any magic) ends a walk like the end of the bytes
(status 0, the position at its start): the caller reads on from there. Malformed data raises
ValueError: the log was validated on append and on load, so this is damage to report; a record
whose offset or kept timestamp leaves the int64 range is malformed too.
"""

from __future__ import annotations

import struct
from typing import Any

from crc32c import crc32c as _crc32c

MAP_SLOT_BYTES = 24
_SLOT = struct.Struct("<QQq")  # h1, h2, offset
_EMPTY = -1
_MASK64 = (1 << 64) - 1
_C1 = 0x87C37B91114253D5
_C2 = 0x4CF5AD432745937F
_HEADER = struct.Struct(">qiibIhiqqqhii")  # kafkalog.record.batch_format's BATCH_HEADER
_HEADER_SIZE = _HEADER.size  # 61
_LENGTH = struct.Struct(">i")  # at byte 8 of an entry of any magic: the bytes that follow it
_MIN_LENGTH = 49
_MAGIC_POS = 16
_ATTRIBUTES_POS = 21
_CODEC_MASK = 0x07
_TS_TYPE_BIT = 0x08
_TRANSACTIONAL_BIT = 0x10
_CONTROL_BIT = 0x20
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_STATUS_DONE, _STATUS_SPECIAL, _STATUS_FULL = 0, 1, 2


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _MASK64


def _fmix(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & _MASK64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & _MASK64
    k ^= k >> 33
    return k


def key_hash(key: bytes | memoryview) -> tuple[int, int]:
    """MurmurHash3_x64_128 of ``key`` with seed 0: (h1, h2), unsigned 64-bit."""
    data = bytes(key)
    length = len(data)
    h1 = h2 = 0
    whole = length // 16 * 16
    for i in range(0, whole, 16):
        k1, k2 = struct.unpack_from("<QQ", data, i)
        k1 = (k1 * _C1) & _MASK64
        k1 = (_rotl(k1, 31) * _C2) & _MASK64
        h1 ^= k1
        h1 = _rotl(h1, 27)
        h1 = (h1 + h2) & _MASK64
        h1 = (h1 * 5 + 0x52DCE729) & _MASK64
        k2 = (k2 * _C2) & _MASK64
        k2 = (_rotl(k2, 33) * _C1) & _MASK64
        h2 ^= k2
        h2 = _rotl(h2, 31)
        h2 = (h2 + h1) & _MASK64
        h2 = (h2 * 5 + 0x38495AB5) & _MASK64
    tail = data[whole:]
    k1 = k2 = 0
    for i in range(len(tail) - 1, 7, -1):
        k2 ^= tail[i] << ((i - 8) * 8)
    if len(tail) > 8:
        k2 = (k2 * _C2) & _MASK64
        k2 = (_rotl(k2, 33) * _C1) & _MASK64
        h2 ^= k2
    for i in range(min(len(tail), 8) - 1, -1, -1):
        k1 ^= tail[i] << (i * 8)
    if tail:
        k1 = (k1 * _C1) & _MASK64
        k1 = (_rotl(k1, 31) * _C2) & _MASK64
        h1 ^= k1
    h1 ^= length
    h2 ^= length
    h1 = (h1 + h2) & _MASK64
    h2 = (h2 + h1) & _MASK64
    h1 = _fmix(h1)
    h2 = _fmix(h2)
    h1 = (h1 + h2) & _MASK64
    h2 = (h2 + h1) & _MASK64
    return h1, h2


def _slot_of(table: Any, h1: int, h2: int) -> tuple[int, int]:
    """(byte position of the slot holding the hash, or of the empty slot where it would go; its offset)."""
    slots = len(table) // MAP_SLOT_BYTES
    if not slots:
        raise ValueError(f"the offset map of {len(table)} bytes has no slot")
    index = h1 % slots
    for _ in range(slots):
        position = index * MAP_SLOT_BYTES
        s1, s2, offset = _SLOT.unpack_from(table, position)
        if offset == _EMPTY or (s1 == h1 and s2 == h2):
            return position, offset
        index = index + 1 if index + 1 < slots else 0
    raise ValueError("the offset map is full")  # the caller's max_entries keeps a slot free


def map_get(table: Any, key: bytes) -> int:
    """The offset the map holds for ``key``; -1 if none."""
    return _slot_of(table, *key_hash(key))[1]


def _varint(view: memoryview, pos: int, end: int) -> tuple[int, int]:
    """(value, next position) of the zigzag varint at ``pos``; at most 10 bytes and 64 bits, as
    kafkalog.record._fastpath reads them (so every value fits an int64)."""
    start = pos
    shift = 0
    result = 0
    limit = min(end, pos + 10)
    while pos < limit:
        byte = view[pos]
        pos += 1
        if shift == 63 and byte > 1:
            break
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
    raise ValueError(f"a varint runs past its record or beyond 64 bits (byte {start})")


def _records(payload: Any, count: int, base_offset: int) -> list[tuple[int, int, int, int, int, int, int]]:
    """Each record of ``payload``: (start, end, timestamp delta, offset, key position, key length
    (-1: null), value length (-1: null)). Every record is read before the caller uses one, so a
    malformed one raises before anything is put or kept."""
    if count < 0:
        raise ValueError(f"a batch cannot hold {count} records")
    view = memoryview(payload)
    end = len(view)
    pos = 0
    found = []
    for _ in range(count):
        start = pos
        length, pos = _varint(view, pos, end)
        if length <= 0 or length > end - pos:
            raise ValueError(f"a record's length runs past its batch (byte {start})")
        record_end = pos + length
        pos += 1  # attributes
        timestamp_delta, pos = _varint(view, pos, record_end)
        offset_delta, pos = _varint(view, pos, record_end)
        offset = base_offset + offset_delta
        if not 0 <= offset <= _INT64_MAX:
            raise ValueError(f"a record's offset is out of range (byte {start})")
        key_length, pos = _varint(view, pos, record_end)
        if key_length < -1 or key_length > record_end - pos:
            raise ValueError(f"a record's key length does not fit in the record (byte {start})")
        key_pos = pos
        pos += max(key_length, 0)
        value_length, pos = _varint(view, pos, record_end)
        if value_length < -1 or value_length > record_end - pos:
            raise ValueError(f"a record's value length does not fit in the record (byte {start})")
        found.append((start, record_end, timestamp_delta, offset, key_pos, key_length, value_length))
        pos = record_end
    if pos != end:
        raise ValueError(f"{end - pos} bytes follow the last of {count} records")
    return found


def map_put_records(table: bytearray, max_entries: int, used: int, payload: Any, count: int, base_offset: int) -> int:
    """Put every keyed record of ``payload`` (``count`` records of a batch whose base offset is
    ``base_offset``, decompressed) into the map; returns how many keys it holds now. The caller
    made room: at most ``max_entries - used`` new keys come in (else ValueError)."""
    view = memoryview(payload)
    for _, _, _, offset, key_pos, key_length, _ in _records(payload, count, base_offset):
        if key_length < 0:
            continue  # a compacted log has no keyless record; one written before compaction goes
        h1, h2 = key_hash(view[key_pos : key_pos + key_length])
        position, found = _slot_of(table, h1, h2)
        if found == _EMPTY:
            if used >= max_entries:
                raise ValueError(f"the offset map holds {max_entries} keys: no room for more")
            used += 1
        _SLOT.pack_into(table, position, h1, h2, offset)
    return used


def _plain_batches(buf: Any, pos: int, stop: int) -> Any:
    """(position, header fields, plain) of each whole entry from ``pos``, until one that is not a
    plain batch (yielded with ``plain`` False and no fields, then the walk ends) or the end of the
    whole entries (an entry cut by ``stop`` is left for the caller to read on from)."""
    if not 0 <= pos <= stop <= len(buf):
        raise ValueError(f"positions {pos} to {stop} lie outside the {len(buf)} bytes given")
    while stop - pos > _MAGIC_POS:  # offset, length, leader epoch (v0/v1: CRC) and magic are there
        (length,) = _LENGTH.unpack_from(buf, pos + 8)
        magic = buf[pos + _MAGIC_POS]
        if magic == 2 and length < _MIN_LENGTH:
            raise ValueError(f"a record batch at byte {pos} states a length of {length}")
        if length > stop - pos - 12:
            return  # a partial entry: the caller reads on from here
        if magic != 2:
            yield pos, None, False  # a v0/v1 entry (written before the log stored batches)
            return
        fields = _HEADER.unpack_from(buf, pos)
        base_offset, attributes, last_delta, count = fields[0], fields[5], fields[6], fields[12]
        if count < 0 or last_delta < 0 or count > last_delta + 1 or base_offset + last_delta > _INT64_MAX:
            raise ValueError(
                f"a record batch at byte {pos} states {count} records with a last offset delta of "
                f"{last_delta} from base offset {base_offset}"
            )
        plain = not attributes & (_CODEC_MASK | _TRANSACTIONAL_BIT | _CONTROL_BIT)
        yield pos, (fields if plain else None), plain
        if not plain:
            return
        pos += 12 + length


def map_put_batches(
    table: bytearray, max_entries: int, used: int, buf: Any, pos: int, stop: int
) -> tuple[int, int, int, int]:
    """Put the records of the plain batches of ``buf[pos:stop]`` into the map. Returns (position
    reached, keys held, last offset put (-1: none), status): 0 at the end of the whole batches, 1
    at a batch that is not plain, 2 at a batch whose records might not fit (``used`` plus its
    record count over ``max_entries``)."""
    last = -1
    for at, fields, plain in _plain_batches(buf, pos, stop):
        if not plain:
            return at, used, last, _STATUS_SPECIAL
        count = fields[12]
        if used + count > max_entries:
            return at, used, last, _STATUS_FULL
        used = map_put_records(table, max_entries, used, memoryview(buf)[at + _HEADER_SIZE : at + 12 + fields[1]],
                               count, fields[0])  # fmt: skip
        last = fields[0] + fields[6]
        pos = at + 12 + fields[1]
    return pos, used, last, _STATUS_DONE


def filter_records(
    table: Any, payload: Any, count: int, base_offset: int, retain_tombstones: bool
) -> tuple[bytearray, int, int]:
    """What of ``payload`` (``count`` records of the batch at ``base_offset``, decompressed) the
    cleaner keeps: each record with a key whose offset is at least the map's for that key (or that
    the map does not hold), and whose value is not null unless ``retain_tombstones``. Returns (the
    kept records' bytes, as they were; how many; their largest timestamp delta, INT64_MIN if none)."""
    view = memoryview(payload)
    kept = bytearray()
    kept_count = 0
    max_delta = _INT64_MIN
    for start, end, timestamp_delta, offset, key_pos, key_length, value_length in _records(payload, count, base_offset):
        if key_length < 0 or (value_length < 0 and not retain_tombstones):
            continue
        found = _slot_of(table, *key_hash(view[key_pos : key_pos + key_length]))[1]
        if found != _EMPTY and found > offset:
            continue  # a later record has this key
        kept += view[start:end]
        kept_count += 1
        max_delta = max(max_delta, timestamp_delta)
    return kept, kept_count, max_delta


def rebuilt_batch(
    header: Any, records: Any, count: int, max_timestamp: int, attributes: int | None = None
) -> bytearray:
    """A batch with ``header``'s fields (the 13 of ``_HEADER``: base offset, last offset delta,
    base timestamp and producer fields kept, so every record's deltas still hold) around
    ``records`` (``count`` of them), its length, count, max timestamp (and attributes if given)
    and CRC-32C set anew. A batch of no records has no first timestamp: its base timestamp is -1,
    as Kafka writes the empty batch it keeps for a producer's state."""
    fields = list(header)
    fields[1] = _HEADER_SIZE - 12 + len(records)
    fields[4] = 0
    if attributes is not None:
        fields[5] = attributes
    if not count:
        fields[7] = -1
    fields[8] = max_timestamp
    fields[12] = count
    out = bytearray(_HEADER.pack(*fields))
    out += records
    crc = _crc32c(memoryview(out)[_ATTRIBUTES_POS:])
    out[17:21] = crc.to_bytes(4, "big")
    return out


def filter_batches(
    table: Any, buf: Any, pos: int, stop: int, out: bytearray, retain_tombstones: bool, protected: Any
) -> tuple[int, int, int, int]:
    """Append to ``out`` what the cleaner keeps of the plain batches of ``buf[pos:stop]``: a batch
    whose records all stay is copied as it is; one losing some is rebuilt (``rebuilt_batch``: max
    timestamp the largest kept, unless the batch is stamped with the log-append time); one left
    with none (an empty batch a cleaning kept before included) goes, unless its last offset is in
    ``protected`` (an idempotent producer's last batch, which the producer state needs: it stays as
    a batch of no records), as Kafka's cleaner does. Returns (position reached, status as
    ``map_put_batches``' 0 or 1, records read, records kept). A batch that raises adds nothing to
    ``out``; those before it stay there."""
    read = kept_total = 0
    view = memoryview(buf)
    for at, fields, plain in _plain_batches(buf, pos, stop):
        if not plain:
            return at, _STATUS_SPECIAL, read, kept_total
        end = at + 12 + fields[1]
        count = fields[12]
        records, kept, max_delta = filter_records(
            table, view[at + _HEADER_SIZE : end], count, fields[0], retain_tombstones
        )
        if kept == count and kept:
            out += view[at:end]
        elif kept:
            max_timestamp = fields[8] if fields[5] & _TS_TYPE_BIT else fields[7] + max_delta
            if not _INT64_MIN <= max_timestamp <= _INT64_MAX:
                raise ValueError(f"the records kept of the record batch at byte {at} have a timestamp out of range")
            out += rebuilt_batch(fields, records, kept, max_timestamp)
        elif fields[0] + fields[6] in protected:
            out += rebuilt_batch(fields, b"", 0, fields[8])
        read += count
        kept_total += kept
        pos = end
    return pos, _STATUS_DONE, read, kept_total
