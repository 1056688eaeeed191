"""Fuzz the request decoder: ``python -m bench.protocol_fuzz [--inputs N] [--seed S]``.

Feeds N inputs to kafkalog.protocol.decode_request: mutations of valid frames of every (API, version)
we serve (truncations, flipped/overwritten bytes, inserted/removed bytes, extreme 2- and 4-byte values
over lengths and counts, splices of two frames, several of these stacked), a valid header followed by
random bytes, and fully random byte strings. Each input must decode or raise ProtocolError; a frame
that decodes must also re-encode to a frame that decodes the same. Anything else (struct.error,
UnicodeDecodeError, IndexError, MemoryError, ...) is printed with the input in hex and its traceback,
and the run exits 1.

Output: progress every 100k inputs, then ``RESULT <name> <value> <unit>`` lines.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

from kafkalog.errors import ProtocolError
from kafkalog.protocol import REGISTRY, decode_request, encode_request
from kafkalog.protocol.types import (
    BOOLEAN,
    BYTES,
    COMPACT_BYTES,
    COMPACT_NULLABLE_BYTES,
    COMPACT_NULLABLE_STRING,
    COMPACT_RECORDS,
    COMPACT_STRING,
    INT8,
    INT16,
    INT32,
    INT64,
    NULLABLE_STRING,
    RECORDS,
    STRING,
    UUID,
    Array,
    Schema,
    Type,
)

DEFAULT_INPUTS = 1_000_000
DEFAULT_SEED = 20240611
FRAMES_PER_API = 8
PROGRESS_EVERY = 100_000
SHOW_AT_MOST = 5  # unexpected errors printed in full; all are counted

TEXTS = ["", "t", "events", "pagé-views", "日本語", "😀", "a" * 40, "\x00", "group-1"]
INT32_EXTREMES = [
    b"\x7f\xff\xff\xff",
    b"\x80\x00\x00\x00",
    b"\xff\xff\xff\xff",
    b"\xff\xff\xff\xfe",
    b"\x00\x00\x00\x00",
]
INT16_EXTREMES = [b"\x7f\xff", b"\x80\x00", b"\xff\xff", b"\xff\xfe", b"\x00\x00"]


def random_value(kind: Type, rng: random.Random) -> Any:
    """A random valid value of any schema or type (small: arrays of 0..3, short strings)."""
    if kind is BOOLEAN:
        return rng.random() < 0.5
    if kind in (INT8, INT16, INT32, INT64):
        bits = 8 * kind.min_size
        if rng.random() < 0.2:
            return rng.choice([-1, 0, -(1 << (bits - 1)), (1 << (bits - 1)) - 1])
        return rng.randrange(-(1 << (bits - 1)), 1 << (bits - 1)) if rng.random() < 0.5 else rng.randrange(100)
    if kind is STRING or kind is COMPACT_STRING:
        return rng.choice(TEXTS)
    if kind is NULLABLE_STRING or kind is COMPACT_NULLABLE_STRING:
        return None if rng.random() < 0.3 else rng.choice(TEXTS)
    if kind in (BYTES, RECORDS, COMPACT_NULLABLE_BYTES, COMPACT_RECORDS):
        return None if rng.random() < 0.2 else rng.randbytes(rng.randrange(12))
    if kind is COMPACT_BYTES:
        return rng.randbytes(rng.randrange(12))
    if kind is UUID:
        return rng.randbytes(16)
    if isinstance(kind, Array):
        if kind.nullable and rng.random() < 0.2:
            return None
        return [random_value(kind.element, rng) for _ in range(rng.randrange(4))]
    if isinstance(kind, Schema):
        return {name: random_value(sub, rng) for name, sub in kind.fields}
    raise TypeError(f"no generator for {kind!r}")


def corpus(rng: random.Random) -> list[bytes]:
    """Valid request frames (without the size prefix), FRAMES_PER_API of every (API, version)."""
    frames = []
    for key in sorted(REGISTRY):
        api = REGISTRY[key]
        for _ in range(FRAMES_PER_API):
            client_id = None if rng.random() < 0.2 else rng.choice(TEXTS)
            body = random_value(api.request, rng)
            frames.append(encode_request(api, rng.randrange(-(1 << 31), 1 << 31), client_id, body)[4:])
    return frames


class Mutator:
    """Inputs for the decoder, derived from a corpus of valid frames."""

    def __init__(self, frames: list[bytes], rng: random.Random) -> None:
        self.frames = frames
        self.rng = rng
        self.headers = [frame[: 10 + max(0, int.from_bytes(frame[8:10], "big", signed=True))] for frame in frames]
        ops: list[tuple[Callable[[bytearray], None], int]] = [
            (self.truncate, 3),
            (self.flip, 4),
            (self.set_byte, 2),
            (self.insert, 2),
            (self.remove, 2),
            (self.extreme32, 5),
            (self.extreme16, 3),
            (self.append, 1),
            (self.splice, 1),
        ]
        self.ops = [op for op, weight in ops for _ in range(weight)]

    def next(self) -> bytes:
        rng = self.rng
        roll = rng.random()
        if roll < 0.04:  # fully random bytes
            return rng.randbytes(int(rng.random() * 64))
        if roll < 0.12:  # a valid header, then random bytes for the body decoder
            return rng.choice(self.headers) + rng.randbytes(int(rng.random() * 48))
        if roll < 0.14:  # unmutated: the ok path is measured too
            return rng.choice(self.frames)
        data = bytearray(rng.choice(self.frames))
        for _ in range(1 if roll < 0.7 else 2 + int(rng.random() * 3)):
            rng.choice(self.ops)(data)
        return bytes(data)

    def _position(self, data: bytearray, width: int = 1) -> int:
        return int(self.rng.random() * max(1, len(data) - width + 1))

    def truncate(self, data: bytearray) -> None:
        del data[int(self.rng.random() * len(data)) :]

    def flip(self, data: bytearray) -> None:
        if data:
            data[self._position(data)] ^= 1 + int(self.rng.random() * 255)

    def set_byte(self, data: bytearray) -> None:
        if data:
            data[self._position(data)] = int(self.rng.random() * 256)

    def insert(self, data: bytearray) -> None:
        position = int(self.rng.random() * (len(data) + 1))
        data[position:position] = self.rng.randbytes(1 + int(self.rng.random() * 8))

    def remove(self, data: bytearray) -> None:
        position = self._position(data)
        del data[position : position + 1 + int(self.rng.random() * 8)]

    def extreme32(self, data: bytearray) -> None:
        if len(data) >= 4:
            position = self._position(data, 4)
            data[position : position + 4] = self.rng.choice(INT32_EXTREMES)

    def extreme16(self, data: bytearray) -> None:
        if len(data) >= 2:
            position = self._position(data, 2)
            data[position : position + 2] = self.rng.choice(INT16_EXTREMES)

    def append(self, data: bytearray) -> None:
        data += self.rng.randbytes(1 + int(self.rng.random() * 8))

    def splice(self, data: bytearray) -> None:
        other = self.rng.choice(self.frames)
        del data[int(self.rng.random() * (len(data) + 1)) :]
        data += other[int(self.rng.random() * (len(other) + 1)) :]


def check(frame: bytes) -> bool:
    """True if ``frame`` decodes (and re-encodes to the same), False on ProtocolError; else raises."""
    try:
        header, api, body = decode_request(frame)
    except ProtocolError:
        return False
    again = encode_request(api, header.correlation_id, header.client_id, body)
    header2, api2, body2 = decode_request(again[4:])
    if (header2, api2, body2) != (header, api, body):
        raise AssertionError("a decoded request does not survive encode + decode")
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--inputs", type=int, default=DEFAULT_INPUTS, help="inputs to feed (default 1,000,000)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="random seed (default fixed)")
    args = parser.parse_args(argv)

    rng = random.Random(args.seed)
    frames = corpus(rng)
    mutator = Mutator(frames, rng)
    print(
        f"protocol fuzz: {args.inputs:,} inputs, seed {args.seed}, "
        f"{len(frames)} valid frames of {len(REGISTRY)} API versions"
    )
    ok = rejected = unexpected = 0
    started = time.perf_counter()
    for done in range(1, args.inputs + 1):
        frame = mutator.next()
        try:
            if check(frame):
                ok += 1
            else:
                rejected += 1
        except Exception:
            unexpected += 1
            if unexpected <= SHOW_AT_MOST:
                print(f"UNEXPECTED ERROR on input #{done} ({len(frame)} bytes): {frame.hex()}")
                traceback.print_exc(file=sys.stdout)
        if done % PROGRESS_EVERY == 0:
            elapsed = time.perf_counter() - started
            print(
                f"{done:>10,} inputs  {ok:>9,} ok  {rejected:>9,} ProtocolError  {unexpected} unexpected"
                f"  {elapsed:7.1f} s  {done / elapsed:9,.0f} inputs/s",
                flush=True,
            )
    elapsed = time.perf_counter() - started
    print(f"done in {elapsed:.1f} s: {ok:,} ok, {rejected:,} ProtocolError, {unexpected} unexpected")
    print(f"RESULT protocol_fuzz_inputs {args.inputs} inputs")
    print(f"RESULT protocol_fuzz_rate {args.inputs / elapsed:.0f} inputs/s")
    print(f"RESULT protocol_fuzz_unexpected_errors {unexpected} errors")
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
