"""compress/decompress frame payloads as real Kafka clients do (kafka-python is the witness) and refuse bombs."""

from __future__ import annotations

import random
import struct
import subprocess
import sys
import textwrap
import tracemalloc

import kafka.codec as kc
import lz4.frame
import pytest
import snappy
import xxhash
import zstandard
from hypothesis import given
from hypothesis import strategies as st

from kafkalog.errors import CorruptRecordError, RecordTooLargeError, UnsupportedCodecError
from kafkalog.record import DEFAULT_MAX_DECOMPRESSED_BYTES, Codec, compress, decompress

from . import hand


def _samples() -> list[bytes]:
    rng = random.Random(7)
    noise = bytes(rng.getrandbits(8) for _ in range(70_000))  # incompressible, spans several blocks
    text = b"".join(b"message %d of a fairly repetitive inner set\n" % i for i in range(5000))  # ~230 KB
    return [b"x", b"hello kafka" * 3, noise, text, bytes(100_000)]


SAMPLES = _samples()
SAMPLE_IDS = ["1-byte", "short", "noise-70k", "text-230k", "zeros-100k"]


def test_the_kafka_python_codecs_we_rely_on_exist() -> None:
    for name in ("gzip_decode", "gzip_encode", "snappy_encode", "snappy_decode", "lz4_encode", "lz4_decode"):
        assert callable(getattr(kc, name)), name
    for name in ("lz4_encode_old_kafka", "lz4_decode_old_kafka"):
        assert callable(getattr(kc, name)), name
    assert kc.has_snappy() and kc.has_lz4()


# --- gzip


@pytest.mark.parametrize("data", SAMPLES, ids=SAMPLE_IDS)
def test_gzip_both_ways_with_kafka_python(data: bytes) -> None:
    ours = compress(Codec.GZIP, data)
    assert ours[:3] == b"\x1f\x8b\x08"  # a gzip member: ID1 ID2, CM = deflate
    assert kc.gzip_decode(ours) == data
    assert hand.gunzip(ours) == data
    assert decompress(Codec.GZIP, kc.gzip_encode(data)) == data
    assert decompress(Codec.GZIP, hand.gzip(data)) == data


def test_gzip_with_two_members_is_not_silently_cut_to_the_first() -> None:
    """RFC 1952: a gzip stream is a series of members. Java's GZIPInputStream and kafka-python
    (gzip.GzipFile) decode every member; dropping the second member silently loses messages."""
    first, second = b"the first member " * 10, b"the second member " * 10
    payload = hand.gzip(first) + hand.gzip(second)
    assert kc.gzip_decode(payload) == first + second
    try:
        out = decompress(Codec.GZIP, payload)
    except CorruptRecordError:
        return  # refusing the payload is acceptable: it is at least not silent
    assert out == first + second


# --- snappy


@pytest.mark.parametrize("data", SAMPLES, ids=SAMPLE_IDS)
def test_snappy_we_write_the_xerial_framing(data: bytes) -> None:
    ours = compress(Codec.SNAPPY, data)
    assert ours[:8] == b"\x82SNAPPY\x00"  # marker
    assert struct.unpack_from(">ii", ours, 8) == (1, 1)  # version, compatible version
    decoded, block_sizes = hand.snappy_unxerial(ours)  # int32-length-prefixed raw snappy blocks
    assert decoded == data
    assert all(size == 32 * 1024 for size in block_sizes[:-1]) and 0 < block_sizes[-1] <= 32 * 1024
    assert kc.snappy_decode(ours) == data


@pytest.mark.parametrize("data", SAMPLES, ids=SAMPLE_IDS)
def test_snappy_we_read_xerial_and_raw_from_kafka_python(data: bytes) -> None:
    assert decompress(Codec.SNAPPY, kc.snappy_encode(data)) == data  # xerial, the Java clients' framing
    assert decompress(Codec.SNAPPY, kc.snappy_encode(data, xerial_blocksize=1000)) == data
    assert decompress(Codec.SNAPPY, kc.snappy_encode(data, xerial_compatible=False)) == data  # raw: librdkafka
    assert decompress(Codec.SNAPPY, snappy.compress(data)) == data


# --- lz4


def _header_checksum(frame: bytes, start: int) -> int:
    flags = frame[4]
    end = 6 + (8 if flags & 0x08 else 0)  # FLG, BD, [content size]
    return (xxhash.xxh32_intdigest(frame[start:end]) >> 8) & 0xFF


@pytest.mark.parametrize("data", SAMPLES, ids=SAMPLE_IDS)
def test_lz4_magic1_uses_the_correct_header_checksum_both_ways(data: bytes) -> None:
    ours = compress(Codec.LZ4, data, magic=1)
    assert ours[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic
    assert ours[4] & 0x20, "blocks must be independent (Kafka's Java reader refuses linked blocks)"
    assert not ours[4] & 0x08, "no content size in the frame descriptor"
    assert ours[6] == _header_checksum(ours, 4)  # KIP-57: xxh32 of the descriptor only
    assert kc.lz4_decode(ours) == data
    assert lz4.frame.decompress(ours) == data
    assert decompress(Codec.LZ4, kc.lz4_encode(data), magic=1) == data  # with a content size, as kafka-python
    assert decompress(Codec.LZ4, hand.lz4_frame(data), magic=1) == data


@pytest.mark.parametrize("data", SAMPLES, ids=SAMPLE_IDS)
def test_lz4_magic0_uses_kafkas_old_broken_header_checksum_both_ways(data: bytes) -> None:
    ours = compress(Codec.LZ4, data, magic=0)
    assert ours[6] == _header_checksum(ours, 0)  # pre-KIP-57: xxh32 over the magic bytes too
    assert ours[6] != _header_checksum(ours, 4)
    assert kc.lz4_decode_old_kafka(ours) == data
    with pytest.raises(RuntimeError):
        kc.lz4_decode(ours)  # a correct reader refuses it: the checksum really is the old one
    assert decompress(Codec.LZ4, kc.lz4_encode_old_kafka(data), magic=0) == data
    assert decompress(Codec.LZ4, hand.lz4_frame(data, legacy_checksum=True), magic=0) == data


def test_lz4_magic1_refuses_the_legacy_checksum() -> None:
    with pytest.raises(CorruptRecordError):
        decompress(Codec.LZ4, hand.lz4_frame(b"payload" * 10, legacy_checksum=True), magic=1)


@given(
    data=st.binary(max_size=3000),
    codec=st.sampled_from([Codec.GZIP, Codec.SNAPPY, Codec.LZ4]),
    magic=st.sampled_from([0, 1]),
)
@hand.fuzz(60)
def test_compress_then_decompress_is_the_identity(data: bytes, codec: Codec, magic: int) -> None:
    assert decompress(codec, compress(codec, data, magic=magic), magic=magic, max_size=len(data)) == data


def test_unknown_codecs_are_unsupported() -> None:
    for codec in (0, 5, 6, 7):
        with pytest.raises(UnsupportedCodecError):
            decompress(codec, hand.gzip(b"x"))  # type: ignore[arg-type]
    with pytest.raises(UnsupportedCodecError):
        compress(Codec.NONE, b"x")


@pytest.mark.parametrize(
    ("codec", "payload"),
    [
        (Codec.GZIP, b"\x1f\x8b\x08 not really"),
        (Codec.GZIP, hand.gzip(b"abc" * 100)[:-9]),
        (Codec.SNAPPY, b"\x82SNAPPY\x00\x00\x00\x00\x01"),
        (Codec.SNAPPY, hand.snappy_xerial(b"abc" * 100)[:-1]),
        (Codec.SNAPPY, hand.XERIAL_HEADER + b"\x00\x00"),
        (Codec.LZ4, hand.lz4_frame(b"abc" * 100)[:-2]),
        (Codec.LZ4, b"\x04\x22\x4d\x18\x60\x40\x82garbage-garbage"),
    ],
)
def test_bad_payloads_are_corrupt(codec: Codec, payload: bytes) -> None:
    with pytest.raises(CorruptRecordError) as excinfo:
        decompress(codec, payload, magic=1)
    assert not isinstance(excinfo.value, UnsupportedCodecError)


# --- decompression bombs


BOMB = bytes(4 << 20)  # 4 MiB of zeros: every codec shrinks it a lot


@pytest.mark.parametrize(
    ("codec", "magic", "make"),
    [
        (Codec.GZIP, 1, hand.gzip),
        (Codec.SNAPPY, 1, hand.snappy_xerial),
        (Codec.SNAPPY, 1, lambda data: hand.snappy_xerial(data, block=len(data))),  # one huge xerial block
        (Codec.SNAPPY, 1, snappy.compress),  # raw, librdkafka-style
        (Codec.LZ4, 1, hand.lz4_frame),
        (Codec.LZ4, 0, lambda data: hand.lz4_frame(data, legacy_checksum=True)),
    ],
    ids=["gzip", "snappy-xerial", "snappy-xerial-one-block", "snappy-raw", "lz4", "lz4-magic0"],
)
def test_a_payload_expanding_beyond_max_size_is_refused(codec: Codec, magic: int, make) -> None:
    payload = make(BOMB)
    assert len(payload) * 10 < len(BOMB)
    assert decompress(codec, payload, magic=magic, max_size=len(BOMB)) == BOMB  # exactly at the limit: fine
    with pytest.raises(RecordTooLargeError):
        decompress(codec, payload, magic=magic, max_size=len(BOMB) - 1)
    tracemalloc.start()
    try:
        with pytest.raises(RecordTooLargeError):
            decompress(codec, payload, magic=magic, max_size=64 * 1024)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < len(BOMB) // 2, f"refusing the bomb allocated {peak} bytes"


def test_the_default_limit_is_applied() -> None:
    payload = snappy.compress(bytes(DEFAULT_MAX_DECOMPRESSED_BYTES + 1))
    with pytest.raises(RecordTooLargeError):
        decompress(Codec.SNAPPY, payload)


_HUGE_SNAPPY = textwrap.dedent(
    """
    import re, resource, struct
    from kafkalog.errors import RecordTooLargeError
    from kafkalog.record import Codec, decompress

    # At most 512 MiB more address space: allocating the stated 4 GiB would abort the process.
    status = open("/proc/self/status").read()
    vm = int(re.search(r"VmSize:\\s+(\\d+) kB", status).group(1)) * 1024
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    soft = vm + (512 << 20) if hard == resource.RLIM_INFINITY else min(vm + (512 << 20), hard)
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))

    raw = b"\\xfe\\xff\\xff\\xff\\x0f" + bytes(16)  # varint length 0xfffffffe, then almost nothing
    xerial = b"\\x82SNAPPY\\x00" + struct.pack(">iii", 1, 1, len(raw)) + raw
    for payload in (raw, xerial):
        for limit in (1 << 20, None):
            try:
                if limit is None:
                    decompress(Codec.SNAPPY, payload)
                else:
                    decompress(Codec.SNAPPY, payload, max_size=limit)
            except RecordTooLargeError:
                print("refused")
    """
)


@pytest.mark.integration
def test_a_raw_snappy_block_stating_a_huge_length_is_refused_without_allocating_it() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _HUGE_SNAPPY], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, f"the process died (allocated the stated length?): {result.stderr[-2000:]}"
    assert result.stdout.split() == ["refused"] * 4, result.stdout + result.stderr


def test_zstd_frames_with_and_without_a_stated_size_back_to_back_and_bounded() -> None:

    data = bytes(range(256)) * 400
    java_style = zstandard.ZstdCompressor(write_content_size=False).compress(data)  # ZstdOutputStream: no size
    ours = compress(Codec.ZSTD, data, magic=2)
    assert zstandard.ZstdDecompressor().decompress(ours) == data
    for payload in (java_style, ours):
        assert decompress(Codec.ZSTD, payload, magic=2) == data
        assert decompress(Codec.ZSTD, payload, magic=2, max_size=len(data)) == data
        with pytest.raises(RecordTooLargeError):
            decompress(Codec.ZSTD, payload, magic=2, max_size=len(data) - 1)
        with pytest.raises(CorruptRecordError, match="zstd"):
            decompress(Codec.ZSTD, payload[:-4], magic=2)
    assert decompress(Codec.ZSTD, java_style + ours, magic=2) == data + data  # frames concatenate
    with pytest.raises(CorruptRecordError, match="zstd frame"):
        decompress(Codec.ZSTD, b"not zstd at all", magic=2)
    # a frame header stating 2**40 bytes (size field of 8 bytes, single segment) is refused before
    # anything is allocated
    lying = b"\x28\xb5\x2f\xfd" + bytes([0xE0]) + (2**40).to_bytes(8, "little") + ours[6:]
    with pytest.raises(RecordTooLargeError):
        decompress(Codec.ZSTD, lying, magic=2)
