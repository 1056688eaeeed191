"""Choosing a partition for a message: murmur2(key) as Kafka's Java clients do (so a key lands on the
same partition whichever client wrote it), a random partition for messages without a key."""

from __future__ import annotations

import random
from collections.abc import Callable

Partitioner = Callable[[bytes | None, int], int]
"""(serialized key, partition count) -> partition."""

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (seed 0x9747b28c), as a signed 32-bit integer like Java's."""
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    whole = length & ~3
    for i in range(0, whole, 4):
        k = data[i] | data[i + 1] << 8 | data[i + 2] << 16 | data[i + 3] << 24
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rest = length & 3
    if rest == 3:
        h ^= data[whole + 2] << 16
    if rest >= 2:
        h ^= data[whole + 1] << 8
    if rest >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def default_partitioner(key: bytes | None, partitions: int) -> int:
    """The seeds' rule: hash(key) % partitions (hash = Kafka's murmur2); random without a key."""
    if key is None:
        return random.randrange(partitions)
    return (murmur2(key) & 0x7FFFFFFF) % partitions
