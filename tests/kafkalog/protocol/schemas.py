"""Helpers shared by the protocol tests: walk any schema to build random values and compare decodings.

Everything here works from the schemas themselves (kafkalog.protocol.types / apis), so a new API or
version is covered by every test as soon as it is in REGISTRY.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from kafkalog.errors import ProtocolError
from kafkalog.protocol import REGISTRY, Api, decode_request, encode_request
from kafkalog.protocol.frames import RequestHeader
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

INTS = (INT8, INT16, INT32, INT64)
RECORD_TYPES = (RECORDS, COMPACT_RECORDS)
ALL_APIS: list[Api] = [REGISTRY[key] for key in sorted(REGISTRY)]
API_IDS = [f"{api.key.name}-v{api.version}" for api in ALL_APIS]

TEXT = st.text(max_size=12)  # arbitrary unicode (hypothesis leaves out lone surrogates), empty included
DATA = st.binary(max_size=24)


def fuzz(max_examples: int) -> settings:
    """Hypothesis settings for this suite: a bounded number of examples and no deadline (slow machine)."""
    return settings(
        max_examples=max_examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


@dataclass(eq=False)
class FakeRegion:
    """Stands in for a log FileRegion: the writer sees only ``length``; the test keeps the bytes."""

    payload: bytes
    length: int = field(init=False)

    def __post_init__(self) -> None:
        self.length = len(self.payload)


@dataclass(eq=False)
class OpaqueRegion:
    """A region of any declared length whose bytes nobody ever materialises."""

    length: int


def int_range(kind: Type) -> tuple[int, int]:
    bits = 8 * kind.min_size
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def values(kind: Type, *, regions: bool = False) -> st.SearchStrategy[Any]:
    """Random valid values of ``kind``: ints of its width, unicode strings (None where nullable),
    arrays of 0..4 elements (None where nullable), bytes or None for BYTES and RECORDS (and, with
    ``regions``, FakeRegions for RECORDS)."""
    if kind is BOOLEAN:
        return st.booleans()
    if kind in INTS:
        low, high = int_range(kind)
        return st.integers(min_value=low, max_value=high)
    if kind in (STRING, COMPACT_STRING):
        return TEXT
    if kind in (NULLABLE_STRING, COMPACT_NULLABLE_STRING):
        return st.none() | TEXT
    if kind in (BYTES, COMPACT_NULLABLE_BYTES):
        return st.none() | DATA
    if kind is COMPACT_BYTES:
        return DATA
    if kind is UUID:
        return st.binary(min_size=16, max_size=16)
    if kind in RECORD_TYPES:
        records = st.none() | DATA
        return (records | DATA.map(FakeRegion)) if regions else records
    if isinstance(kind, Array):
        items = st.lists(values(kind.element, regions=regions), max_size=4)
        return st.none() | items if kind.nullable else items
    if isinstance(kind, Schema):
        return st.fixed_dictionaries({name: values(sub, regions=regions) for name, sub in kind.fields})
    raise TypeError(f"no strategy for {kind!r}: a new wire type needs one here")


def expected(kind: Type, value: Any) -> Any:
    """What decoding the encoding of ``value`` gives back: FakeRegions become their bytes."""
    if isinstance(kind, Array):
        return None if value is None else [expected(kind.element, item) for item in value]
    if isinstance(kind, Schema):
        return {name: expected(sub, value[name]) for name, sub in kind.fields}
    if kind in RECORD_TYPES and isinstance(value, FakeRegion):
        return value.payload
    if kind in RECORD_TYPES and value is not None:
        return bytes(value)
    return value


def normalized(kind: Type, value: Any) -> Any:
    """A decoded value with RECORDS memoryviews turned into bytes (after checking they are views)."""
    if isinstance(kind, Array):
        return None if value is None else [normalized(kind.element, item) for item in value]
    if isinstance(kind, Schema):
        assert list(value) == [name for name, _ in kind.fields]
        return {name: normalized(sub, value[name]) for name, sub in kind.fields}
    if kind in RECORD_TYPES and value is not None:
        assert isinstance(value, memoryview), f"RECORDS decoded to {type(value).__name__}, not a memoryview"
        return value.tobytes()
    return value


def contains(kind: Type, wanted: Type) -> bool:
    if kind is wanted:
        return True
    if isinstance(kind, Array):
        return contains(kind.element, wanted)
    if isinstance(kind, Schema):
        return any(contains(sub, wanted) for _, sub in kind.fields)
    return False


def positional(kind: Type, value: Any) -> Any:
    """``value`` as nested tuples (structs) and lists (arrays), the shape kafka-python's classic
    Struct classes take and give; RECORDS as bytes."""
    if isinstance(kind, Array):
        return None if value is None else [positional(kind.element, item) for item in value]
    if isinstance(kind, Schema):
        return tuple(positional(sub, value[name]) for name, sub in kind.fields)
    if kind in RECORD_TYPES and value is not None:
        return bytes(value)
    return value


def flatten(tree: Any) -> list[Any]:
    """The wire-order leaves of a positional tree, with array lengths marked: two trees that flatten
    equal encode to the same bytes, whatever names or wrapping structs either side uses (kafka-python's
    MetadataRequest topics are structs of one string; ours are strings)."""
    if isinstance(tree, tuple):
        return [leaf for item in tree for leaf in flatten(item)]
    if isinstance(tree, list):
        return [("array", len(tree)), *(leaf for item in tree for leaf in flatten(item))]
    if isinstance(tree, bytearray | memoryview):
        return [bytes(tree)]
    return [tree]


def headers() -> st.SearchStrategy[tuple[int, str | None]]:
    low, high = int_range(INT32)
    return st.tuples(st.integers(min_value=low, max_value=high), st.none() | TEXT)


def decode_or_reject(frame: bytes | bytearray | memoryview) -> tuple[RequestHeader, Api, dict[str, Any]] | None:
    """decode_request's result, or None when it raised ProtocolError; any other exception propagates
    (and fails the test). A frame that decodes must also re-encode to a frame that decodes the same."""
    try:
        header, api, body = decode_request(frame)
    except ProtocolError:
        return None
    again = encode_request(api, header.correlation_id, header.client_id, body)
    header2, api2, body2 = decode_request(again[4:])
    assert (header2, api2) == (header, api)
    assert normalized(api.request, body2) == normalized(api.request, body)
    return header, api, body
